# qvet: three static libraries in layers, one `qvet` binary, Check suites,
# libFuzzer targets, and an example program.
#
#   BUILD/libqvet_cpu.a  formats, specs, the registry as data, problems, layouts,
#                        the .npy/.safetensors/JSON readers, the reference and the
#                        verdict, eval's CPU parts: links no CUDA library
#   BUILD/libqvet_gpu.a  kernels, the launch table (src/gpu_launch.c), the GPU
#                        runner, bench's timing, eval's GPU linear layers
#   BUILD/libqvet_cli.a  the subcommands and the campaign (check, fuzz, replay),
#                        which reaches the GPU runner directly from above
#
#   make              build everything (CUDA kernels included; no GPU needed)
#   make check        install missing Debian packages, build, run every Check suite
#   make run          the main job: qvet check, a bounded qvet fuzz, qvet report
#   make fuzz         a longer CPU-model fuzz campaign (10^4 cases per variant class)
#   make fuzz-parsers libFuzzer + ASan + UBSan on every input parser, bounded time
#   make report       render reports/out/index.md from results in $(BUILD)/results
#   make ppl          fetch the model and text, run qvet ppl (GPU when present)
#   make bench        kernel speed against cuBLAS (GPU only)
#   make mutants      mutation testing on the GPU; make mutants-cpu on the CPU models
#
# BUILD selects the output folder, so several builds can live side by side.

BUILD    ?= build
CC       := gcc
CLANG    := clang
NVCC     ?= /usr/local/cuda/bin/nvcc
CUDA_HOME ?= /usr/local/cuda

# -std=c11 with _GNU_SOURCE for clock_gettime/strdup/etc.; -ffp-contract=off so the
# C compiler never fuses a*b+c behind the reference's back (the CPU models state
# exactly where they use fma()); -fno-math-errno keeps sqrt inlinable without
# changing any result.
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
            -ffp-contract=off -fno-math-errno -Iinclude -Isrc -MMD -MP
# The CUDA headers only for the code above the CPU library (see the layers below).
CUDA_INC := -I$(CUDA_HOME)/include
# Kernels: Hopper machine code plus compute_90 PTX so newer drivers can JIT.
# -fmad=true is stated on purpose: each kernel's declared arithmetic model says
# where FMA contraction happens. Never --use_fast_math: it flushes subnormals and
# approximates division, which would break the declared models.
NVFLAGS  ?= -O3 -lineinfo
NVFLAGS  += -std=c++17 -fmad=true -Iinclude -Isrc \
            -gencode=arch=compute_90,code=sm_90 \
            -gencode=arch=compute_90,code=compute_90 \
            -Xcompiler -Wall -MMD -MP $(MUTANT_FLAGS)
# A mutant build passes e.g. MUTANT=scale_perm_single_missing (see mutants/).
ifneq ($(MUTANT),)
MUTANT_FLAGS := -DQV_MUTANT_$(MUTANT)=1 -DQV_MUTANT_NAME=\"$(MUTANT)\"
CFLAGS += $(MUTANT_FLAGS)
endif

# kernels/wonly_wg.cu, moe_wg.cu, moe_fp8_wg.cu and qqq_wg.cu use wgmma, which exists only in the
# architecture-specific sm_90a target (no forward-compatible PTX): those files
# are built for sm_90a alone, with the other flags unchanged.
WG_NVFLAGS := $(filter-out -gencode=%,$(NVFLAGS)) -gencode=arch=compute_90a,code=sm_90a
$(BUILD)/obj/kernels/wonly_wg.cu.o: NVFLAGS := $(WG_NVFLAGS)
$(BUILD)/obj/kernels/qqq_wg.cu.o: NVFLAGS := $(WG_NVFLAGS)
$(BUILD)/obj/kernels/moe_wg.cu.o: NVFLAGS := $(WG_NVFLAGS)
$(BUILD)/obj/kernels/moe_fp8_wg.cu.o: NVFLAGS := $(WG_NVFLAGS)

# Check and subunit are linked statically (by path) so the binaries also run on
# the lent GPU machine, which has neither; MPFR, GMP, OpenBLAS and cuBLAS exist
# there as shared libraries. cudart is static for the same reason. cuBLAS and
# cuBLASLt are not linked: src/gpu_cublas.c loads them on first use, so a
# process that never calls them does not map them (~0.1 s a start); the run
# path tells dlopen where they are.
LIBDIR    := /usr/lib/x86_64-linux-gnu
CHECK_LIBS := $(LIBDIR)/libcheck.a $(LIBDIR)/libsubunit.a
# CPU_LDLIBS is all a program on the CPU library needs (dlopen, for the plugin
# loader, is in the C library since glibc 2.34).
CPU_LDLIBS := -lmpfr -lgmp -lopenblas -lm -lpthread
LDLIBS    := -L$(CUDA_HOME)/lib64 -lcudart_static \
             -Wl,-rpath,$(CUDA_HOME)/lib64 -lstdc++ $(CPU_LDLIBS) -ldl -lrt

# The layers: each library uses only itself and the ones below it, so a
# program links them top first ($(LIBS)). CLI_C: the subcommands (cmd_*.c),
# their option helpers and the campaign; GPU_C/GPU_CU: what calls CUDA
# (src/gpu_*.c, kernels/, bench/ but its subcommand, eval/*_gpu.c); CPU_C:
# the rest of src/, reference/ and eval/.
CLI_C   := src/cli_util.c src/launch_env.c $(wildcard src/cmd_*.c bench/cmd_*.c eval/cmd_*.c reports/*.c) \
           $(filter-out fuzz/lf_%.c,$(wildcard fuzz/*.c))
GPU_C   := $(wildcard src/gpu_*.c kernels/*.c eval/*_gpu.c) $(filter-out $(CLI_C),$(wildcard bench/*.c))
GPU_CU  := $(wildcard kernels/*.cu bench/*.cu eval/*.cu)
CPU_C   := $(filter-out src/qvet.c $(CLI_C) $(GPU_C),$(wildcard src/*.c reference/*.c eval/*.c))
CPU_OBJ := $(CPU_C:%.c=$(BUILD)/obj/%.o)
GPU_OBJ := $(GPU_C:%.c=$(BUILD)/obj/%.o) $(GPU_CU:%.cu=$(BUILD)/obj/%.cu.o)
CLI_OBJ := $(CLI_C:%.c=$(BUILD)/obj/%.o)
LIB_CPU := $(BUILD)/libqvet_cpu.a
LIB_GPU := $(BUILD)/libqvet_gpu.a
LIB_CLI := $(BUILD)/libqvet_cli.a
LIBS    := $(LIB_CLI) $(LIB_GPU) $(LIB_CPU)
QVET    := $(BUILD)/qvet
EXAMPLE := $(BUILD)/examples/verify_buffers $(BUILD)/examples/verify_moe

TEST_SRC := $(wildcard tests/t_*.c)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(wildcard fuzz/lf_*.c)

.PHONY: all check deps run fuzz fuzz-parsers report ppl bench mutants mutants-cpu clean
# Keep the test objects (intermediates of a pattern rule) so a second make
# does not rebuild them.
.SECONDARY:
all: $(QVET) $(TESTS) $(EXAMPLE) $(BUILD)/plugins/libqvet_example_plugin.so

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

# Every results file's provenance line names the commit qvet was built from,
# with "+changes" where tracked files differed from it (src/cli_util.c,
# qv_build_commit), also where the binary runs without the repository (the
# lent GPU machine gets a copy of the tree); t_campaign compares it with the
# same value. BUILD/git-commit holds it and is rewritten only when it
# changes, so that the two objects are rebuilt then and only then.
QV_GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(if $(shell git status --porcelain --untracked-files=no 2>/dev/null | head -1),+changes)
QV_GIT_STAMP  := $(BUILD)/git-commit
$(shell mkdir -p $(BUILD) && (echo '$(QV_GIT_COMMIT)' | cmp -s - $(QV_GIT_STAMP) || echo '$(QV_GIT_COMMIT)' > $(QV_GIT_STAMP)))
$(BUILD)/obj/src/cli_util.o $(BUILD)/obj/tests/t_campaign.o: CFLAGS += -DQV_GIT_COMMIT=\"$(QV_GIT_COMMIT)\"
$(BUILD)/obj/src/cli_util.o $(BUILD)/obj/tests/t_campaign.o: $(QV_GIT_STAMP)

# Code above the CPU library sees the CUDA headers; the CPU library does not.
$(GPU_OBJ) $(CLI_OBJ): CFLAGS += $(CUDA_INC)

# The CPU library. After archiving, all its members (--whole-archive) are linked
# into an empty program with CPU_LDLIBS alone: an object that needs CUDA, a
# kernel or a layer above fails the build here, not in a user's link.
$(LIB_CPU): $(CPU_OBJ)
	@rm -f $@
	ar rcs $@ $^
	@echo 'int main(void) { return 0; }' | $(CC) -x c - -x none -Wl,--whole-archive $@ -Wl,--no-whole-archive \
	    $(CPU_LDLIBS) -o $(BUILD)/obj/cpu_layer_check \
	    || { rm -f $@; echo "$@: the CPU library needs more than $(CPU_LDLIBS) (above)" >&2; exit 1; }

# The GPU library: the kernels and everything that calls CUDA, over the CPU library.
$(LIB_GPU): $(GPU_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The CLI layer: the subcommands and the campaign, over both.
$(LIB_CLI): $(CLI_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(QVET): $(BUILD)/obj/src/qvet.o $(LIBS)
	$(CC) -rdynamic $^ $(LDLIBS) -o $@

# The examples a user's program follows (examples/verify_buffers.c, a GEMM;
# examples/verify_moe.c, a routed layer): built as their headers say, against
# the CPU library alone; tests/t_layers.c runs them.
$(BUILD)/examples/%: examples/%.c $(LIB_CPU) $(wildcard include/qvet/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Iinclude $< $(LIB_CPU) $(CPU_LDLIBS) -o $@
$(BUILD)/tests/t_layers: | $(EXAMPLE)

# tests/support/*.c: helpers shared by the suites (no test includes a .c file).
TEST_SUPPORT := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/support/*.c))
$(BUILD)/obj/tests/support/%.o: CFLAGS += -Itests
$(BUILD)/obj/tests/%.o: CFLAGS += -Itests $(CUDA_INC)
$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TEST_SUPPORT) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $^ $(CHECK_LIBS) $(LDLIBS) -o $@

# The example plugin: a shared library implementing one variant through the
# plugin ABI (include/qvet/plugin.h); CI loads it with --plugin.
$(BUILD)/plugins/libqvet_example_plugin.so: $(wildcard plugins/example/*.c) include/qvet/plugin.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared $(filter %.c,$^) -o $@

# The routed example plugin (ABI version 3): one routed row on host pointers.
all: $(BUILD)/plugins/libqvet_example_moe_plugin.so
$(BUILD)/plugins/libqvet_example_moe_plugin.so: $(wildcard plugins/example_moe/*.c) include/qvet/plugin.h \
                                                 include/qvet/moe.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared $(filter %.c,$^) -o $@ -lm

# The CUDA example plugin (device pointers): a W4A16 spec and a routed row as
# plain kernels, cudart linked statically like qvet's; and its two mutants
# (plugins/example_cuda says which bug each is), which the GPU suite
# t_gpu_plugin must see FAIL.
CUDA_PLUGIN_SRC := plugins/example_cuda/example_cuda_plugin.cu
CUDA_PLUGIN_MUTANTS := scale_col0 weight_after_cast
CUDA_PLUGINS := $(BUILD)/plugins/libqvet_example_cuda_plugin.so \
                $(foreach m,$(CUDA_PLUGIN_MUTANTS),$(BUILD)/plugins/libqvet_example_cuda_$(m)_plugin.so)
CUDA_PLUGIN_FLAGS := -O2 -std=c++17 -fmad=true -Iinclude -gencode=arch=compute_90,code=sm_90 \
                     -Xcompiler -fPIC,-Wall -shared
all: $(CUDA_PLUGINS)
$(BUILD)/plugins/libqvet_example_cuda_plugin.so: $(CUDA_PLUGIN_SRC) include/qvet/plugin.h include/qvet/moe.h
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_PLUGIN_FLAGS) $< -o $@
$(BUILD)/plugins/libqvet_example_cuda_%_plugin.so: $(CUDA_PLUGIN_SRC) include/qvet/plugin.h include/qvet/moe.h
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_PLUGIN_FLAGS) -DQV_MUTANT_example_cuda_$* $< -o $@

# Two deliberately broken plugins that tests/t_plugin.c expects the loader to
# refuse: one reports another ABI version, one lacks qv_plugin_launch.
BAD_PLUGINS := $(BUILD)/plugins/libqvet_bad_abi_plugin.so $(BUILD)/plugins/libqvet_missing_sym_plugin.so
all: $(BAD_PLUGINS)
$(BUILD)/plugins/libqvet_bad_abi_plugin.so: $(wildcard plugins/bad_abi/*.c) include/qvet/plugin.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared $(filter %.c,$^) -o $@
$(BUILD)/plugins/libqvet_missing_sym_plugin.so: $(wildcard plugins/missing_sym/*.c) include/qvet/plugin.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared $(filter %.c,$^) -o $@

# MPI campaigns (src/mpi/qvet_mpi.c says how the work is split): BUILD/qvet-mpi is
# qvet with an MPI entry; under mpirun, check, fuzz, ppl and mutants share the work over the
# ranks. `make MPI=1` makes BUILD/qvet that binary too (use its own BUILD). It is
# linked with -Wl,--wrap=main: the C runtime enters __wrap_main (the MPI entry),
# which reaches src/qvet.c's main as __real_main, so the dispatcher exists once.
# Open MPI comes from Debian (tools/deps.sh); mpicc only supplies the flags.
MPICC      ?= mpicc
MPI_CFLAGS  = $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_LIBS    = $(shell $(MPICC) --showme:link 2>/dev/null)
QVET_MPI   := $(BUILD)/qvet-mpi
MPI_OBJ    := $(BUILD)/obj/src/mpi/qvet_mpi.o
all: $(QVET_MPI)
$(MPI_OBJ): src/mpi/qvet_mpi.c
	@command -v $(MPICC) >/dev/null || { echo "$(MPICC) not found: install openmpi-bin and libopenmpi-dev (make deps)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_INC) $(MPI_CFLAGS) -c $< -o $@
$(QVET_MPI): $(BUILD)/obj/src/qvet.o $(MPI_OBJ) $(LIBS)
	$(CC) -rdynamic -Wl,--wrap=main $^ $(MPI_LIBS) $(LDLIBS) -o $@
ifeq ($(MPI),1)
$(QVET): $(MPI_OBJ)
$(QVET): LDLIBS := $(LIBS) -Wl,--wrap=main $(MPI_LIBS) $(LDLIBS)
endif

deps:
	@bash tools/deps.sh

# make check: packages first (tools/deps.sh only calls apt-get when one is
# missing), then a normal build, then every Check suite through the runner,
# which prints the closing "N passed, N failed" line and fails on any crash.
check: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@bash tools/run-tests.sh $(BUILD)

run: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@bash tools/run-main.sh $(BUILD)

# make fuzz: 20000 CPU-model cases as two shards of one campaign, one per core
# (about 15 ms of CPU per case); shard 1's log is printed after shard 0's.
fuzz: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BUILD)/results
	@$(QVET) fuzz --cpu --cases 10000 --shard 1/2 --seed $${SEED:-1} --quiet --fail-dir $(BUILD)/results/failures \
	    --out $(BUILD)/results/fuzz-1.jsonl >$(BUILD)/results/fuzz-1.log 2>&1 & pid=$$!; \
	$(QVET) fuzz --cpu --cases 10000 --shard 0/2 --seed $${SEED:-1} --fail-dir $(BUILD)/results/failures --out $(BUILD)/results/fuzz-0.jsonl; r0=$$?; \
	wait $$pid; r1=$$?; cat $(BUILD)/results/fuzz-1.log; \
	[ $$r0 -eq 0 ] && [ $$r1 -eq 0 ]

report: $(QVET)
	$(QVET) report $(wildcard $(BUILD)/results/*.jsonl) -o reports/out

# libFuzzer targets: the CPU library's sources (every parser lives there)
# rebuilt by clang with ASan+UBSan, linked without CUDA.
FZ_FLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -Iinclude -Isrc \
            -fsanitize=address,undefined -fno-sanitize-recover=undefined
FZ_OBJ   := $(CPU_C:%.c=$(BUILD)/fz/%.o)
FZ_LIB   := $(BUILD)/fz/libqvet_fz.a
FUZZERS  := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fz/%)
$(BUILD)/fz/%.o: %.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FZ_LIB): $(FZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/fz/lf_%: fuzz/lf_%.c $(FZ_LIB)
	$(CLANG) $(FZ_FLAGS) -fsanitize=fuzzer $^ $(CPU_LDLIBS) -o $@
fuzz-parsers: deps
	@$(MAKE) --no-print-directory $(FUZZERS)
	@bash tools/fuzz-parsers.sh $(BUILD) $${FUZZ_SECONDS:-60}

# make ppl also builds the m_* suites, which need the fetched model.
MODEL_TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/m_*.c))
ppl: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all $(MODEL_TESTS)
	@bash tools/run-ppl.sh $(BUILD)

bench: $(QVET)
	@mkdir -p $(BUILD)/results
	$(QVET) bench --out $(BUILD)/results/bench.jsonl
	$(QVET) bench --variant 'moe-*' --out $(BUILD)/results/bench-moe.jsonl

# Mutation testing (tools/mutants.py, mutants/catalogue.tsv): every mutant is a
# rebuild with -DQV_MUTANT_<name>; only the files holding the switch recompile.
mutants: deps
	@python3 tools/mutants.py --gpu

mutants-cpu: deps
	@python3 tools/mutants.py --cpu

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/fz -name '*.d' 2>/dev/null)
