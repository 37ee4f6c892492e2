#!/usr/bin/env python3
"""Mutation testing for qvet: build every mutant of mutants/catalogue.tsv, run
`qvet check` and a bounded `qvet fuzz` on the variants it affects, and write
the kill matrix (JSONL and Markdown) beside the field's usual criteria.

  tools/mutants.py --cpu                 build and run on the CPU models
  tools/mutants.py --gpu                 build and run on the GPU kernels
  tools/mutants.py --gpu --build-only    build here (no GPU needed) ...
  tools/mutants.py --gpu --run-only      ... and run there on the built binaries
  tools/mutants.py --gpu --build-only --pack    ... binaries as zstd patches against the
                                         base, in parts of at most 40 MiB to carry one at a
                                         time (mutants/out/gpu/pack, pack-2, ...)
  tools/mutants.py --gpu --unpack --run-only    ... rebuilt from the parts present, whose
                                         mutants then run
  tools/mutants.py --cpu --edits mutants/edits.tsv   the one-line edits (no switch) instead
  tools/mutants.py --cpu --oracle-only   the oracle mutants of mutants/oracle.tsv alone

On the CPU the oracle mutants (mutants/oracle.tsv: the reference's decoding, sums,
bound, rounding window, verdict, monitors, the campaign's checks, the generator and the routed truth's ranking)
run after the catalogue's: each is built with the Check suites its row names, which
run against it beside `qvet check` and the bounded `qvet fuzz`, and the kill matrix
(mutant x check) goes to out/cpu/oracle.jsonl and oracle.md.

The last line is exactly "mutants: K killed of N" (catalogue and oracle mutants
together, the rows argued equivalent left out); the exit status is non-zero
when K < N or when the unmutated build fails any case or suite.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC_DIRS = ["src", "reference", "kernels", "fuzz", "eval", "bench"]
SEED_TEST = "t_seed_scenario"
JOBS = 2  # make -j; --jobs raises it on a bigger machine


def read_tsv(path, ncols=6):
    """(line number, its ncols tab-separated columns) for each row of a
    catalogue file, comments and blank lines skipped; any other column count
    exits."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) != ncols:
                sys.exit(f"mutants: {path}:{lineno}: expected {ncols} tab-separated columns, got {len(cols)}")
            yield lineno, cols


def read_catalogue(path):
    rows = []
    for _, (name, cls, backends, variants, cites, what) in read_tsv(path):
        rows.append({"name": name, "bug_class": int(cls), "backends": backends.split(","),
                     "variants": variants, "cites": cites, "what": what})
    return rows


def files_with_switch(name):
    """Source files that mention QV_MUTANT_<name>."""
    token = "QV_MUTANT_" + name
    hits = []
    for d in SRC_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, d)):
            for fn in files:
                if not fn.endswith((".c", ".cu", ".cuh", ".h")):
                    continue
                p = os.path.join(dirpath, fn)
                with open(p, encoding="utf-8", errors="replace") as f:
                    if token in f.read():
                        hits.append(os.path.relpath(p, ROOT))
    return hits


def make(build, mutant=None, target="qvet", keep=(), first=(), jobs=None):
    """make BUILD=build build/target (target: one path or a list); `keep` lists
    object files make must take as up to date (a mutant rebuilds only the
    objects of its switch, even when other sources changed after the base was
    built). `first` lists objects named as goals before the target: the
    Makefile marks every file .SECONDARY, so a deleted object is not rebuilt
    merely because the archive lists it (make takes the archive as up to date);
    a goal is always built."""
    targets = [target] if isinstance(target, str) else list(target)
    cmd = (["make", "--no-print-directory", f"-j{jobs or JOBS}", f"BUILD={build}"] + list(first)
           + [f"{build}/{t}" for t in targets])
    if mutant:
        cmd.append(f"MUTANT={mutant}")
    for obj in keep:
        cmd += ["-o", obj]
    r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout[-4000:])
        sys.exit(f"mutants: build failed (make BUILD={build} {' '.join(targets)}{' MUTANT=' + mutant if mutant else ''})")


def deps_of(dfile):
    """The prerequisites a make .d file lists (paths relative to ROOT)."""
    with open(dfile, encoding="utf-8", errors="replace") as f:
        text = f.read().replace("\\\n", " ")
    first = text.split("\n", 1)[0]
    return first.split(":", 1)[1].split() if ":" in first else []


def cache_valid(obj, dfile):
    """A cached mutated object is reusable when it is newer than every source it was built from."""
    if not (os.path.exists(obj) and os.path.exists(dfile)):
        return False
    t = os.path.getmtime(obj)
    return all(not os.path.exists(os.path.join(ROOT, d)) or os.path.getmtime(os.path.join(ROOT, d)) < t
               for d in deps_of(dfile))


def same_bytes(x, y):
    if not (os.path.exists(x) and os.path.exists(y)):
        return False
    with open(x, "rb") as a, open(y, "rb") as b:
        return a.read() == b.read()


def copy_base(base, mb):
    """A copy of the base build without its binaries' folders (tests/, fz/,
    results/ at the top; the test objects under obj/tests stay, so a mutant's
    suites relink without recompiling)."""
    if os.path.exists(mb):
        shutil.rmtree(mb)
    top = os.path.abspath(base)
    shutil.copytree(base, mb, symlinks=True,
                    ignore=lambda d, names: [n for n in names if os.path.abspath(d) == top
                                             and n in ("tests", "fz", "results")])


def build_mutant(base, out, row, targets="qvet", jobs=None):
    """Copy the base build, drop the objects of the files that hold the switch
    (headers: everything that includes them is rebuilt by dependency), rebuild
    `targets` (qvet, and for an oracle mutant the suites it runs). The mutated
    objects are cached (out/objcache/NAME), so a later base change elsewhere
    costs a relink, not another nvcc run."""
    files = files_with_switch(row["name"])
    if not files:
        return None
    mb = os.path.join(out, "build-" + row["name"])
    copy_base(base, mb)
    obj_root = os.path.join(mb, "obj")
    dropped = []
    for f in files:
        if f.endswith((".h", ".cuh")):
            # A header change reaches every object whose .d file names it.
            for dirpath, _, fns in os.walk(obj_root):
                for fn in fns:
                    if fn.endswith(".d"):
                        with open(os.path.join(dirpath, fn)) as d:
                            if f in d.read():
                                dropped.append(os.path.join(dirpath, fn[:-2] + ".o"))
        else:
            suffix = ".cu.o" if f.endswith(".cu") else ".o"
            dropped.append(os.path.join(obj_root, os.path.splitext(f)[0] + suffix))
    cache = os.path.join(out, "objcache", row["name"])
    for obj in dropped:
        if os.path.exists(obj):
            os.remove(obj)
        rel_obj = os.path.relpath(obj, obj_root)
        cobj = os.path.join(cache, rel_obj)
        cd = cobj[:-2] + ".d"
        if cache_valid(cobj, cd):
            shutil.copy2(cobj, obj)
            os.utime(obj, None)  # newer than the copied library, so make re-archives and relinks
    rel = os.path.relpath(mb, ROOT)
    # make -o also stops a file from triggering its dependents, so the mutated
    # objects (rebuilt or restored from the cache) are never in this list.
    mutated = {os.path.abspath(o) for o in dropped}
    keep = []
    for dirpath, _, fns in os.walk(obj_root):
        keep += [os.path.relpath(os.path.join(dirpath, fn), ROOT) for fn in fns
                 if fn.endswith(".o") and os.path.abspath(os.path.join(dirpath, fn)) not in mutated]
    missing = [os.path.relpath(o, ROOT) for o in dropped if not os.path.exists(o)]
    make(rel, row["name"], target=targets, keep=keep, first=missing, jobs=jobs)
    # A switch that compiles to the same object as the base's is not in effect.
    rebuilt = [o for o in dropped if os.path.relpath(o, ROOT) in missing]
    if rebuilt and all(same_bytes(o, os.path.join(base, "obj", os.path.relpath(o, obj_root))) for o in rebuilt):
        sys.exit(f"mutants: {row['name']}: the mutated objects are the base's bytes (switch not compiled in)")
    for obj in dropped:
        if os.path.exists(obj):
            cobj = os.path.join(cache, os.path.relpath(obj, obj_root))
            os.makedirs(os.path.dirname(cobj), exist_ok=True)
            if os.path.abspath(cobj) != os.path.abspath(obj):
                shutil.copy2(obj, cobj)
                if os.path.exists(obj[:-2] + ".d"):
                    # The .d names the mutant folder's object; its prerequisites are what matters.
                    shutil.copy2(obj[:-2] + ".d", cobj[:-2] + ".d")
    return files


def read_cases(out_jsonl):
    cases = []
    if os.path.exists(out_jsonl):
        with open(out_jsonl, encoding="utf-8") as f:
            for line in f:
                try:
                    o = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if o.get("kind") in ("case", "routed"):
                    cases.append(o)
    return cases


# Kernel paths that qvet's dispatch takes only for shapes the check and a short
# fuzz rarely draw: a mutant whose switch lives in one of these files runs (its
# check and fuzz, not the unmutated base's) with the variable that sends every
# eligible case down that path. The small-M kernel takes every M <= 16 by
# default (M <= 8 in the swapped form or on m16 mma, as its plan picks, and M
# >= 9 goes to the wgmma kernel on layers of 2^27 weights and more); "swap"
# forces the swapped form for every M <= 8 (t_gpu_wonly checks that path
# clean on every row), also for the switches in its tile math
# (kernels/wonly_small_tile.cuh). The e4m3 cuBLASLt path runs by default from
# M = 1 (per tensor, per token x channel) and 4 (128x128 blocks); 1 sends every
# M there (t_gpu_aq_lt_fp8 checks that path clean on every row), per token x
# channel below M = 128 in its two-step form.
# Weight-only M >= 17 takes the wgmma kernel by default (kernels/wonly_wg.cu):
# the mma kernel keeps M = 17-63 as before it with QVET_WO_WG_MIN_M=64, and the
# dequantize + cuBLAS path, which the default no longer takes, every M >= 64
# with "off" (t_gpu_wonly checks both clean on every row). QQQ W4A8 M >= 17
# takes its wgmma kernel (kernels/qqq_wg.cu): its own mutants run with every M
# sent there (1), and those of the mma kernel and the cuBLASLt path, which the
# QQQ rows now reach only at M <= 16 or with the path off, run with "off"
# (t_gpu_aq_wg and t_gpu_aq_lt check all three clean and bit-identical).
PATH_ENV = {"kernels/wonly_small.cu": {"QVET_WO_SMALL": "swap"},
            "kernels/wonly_small_tile.cuh": {"QVET_WO_SMALL": "swap"},
            "kernels/aq_lt_fp8.cu": {"QVET_AQ_LT_FP8_MIN_M": "1"},
            "kernels/wonly.cu": {"QVET_WO_WG_MIN_M": "64"},
            "kernels/wonly_dq.cu": {"QVET_WO_WG_MIN_M": "off"},
            "kernels/qqq_wg.cu": {"QVET_AQ_WG_MIN_M": "1"},
            "kernels/aq_gemm.cuh": {"QVET_AQ_WG_MIN_M": "off"},
            "kernels/aq_lt.cu": {"QVET_AQ_WG_MIN_M": "off"}}
# A switch inside one form of such a path: the block rows take cuBLASLt's
# BLK128x128 scaling only from M = 128 by default; 1 sends every M through it
# (t_gpu_aq_lt_fp8 checks that form clean on every block-row case).
# The aq mma kernel sums split-K slices in a thread-block cluster when the
# device runs the launch's clusters at once (up to 16 slices, the default at
# M <= 16); its workspace sum (counters, atomic int32 adds) then runs only past
# that, so the switches there run with QVET_AQ_CLUSTER_MAX=1, which sends every
# split through it (t_gpu_aq's split_sums checks both sums clean and equal).
# The e4m3 rows' mma kernel runs only below the cuBLASLt path's M (1 for
# w8a8-fp8-tok-ch since its two-step form), which the check's e4m3 witness
# (M = 17) never is; "off" keeps every M on it for the switches of that kernel
# whose rows are e4m3 ones (its split-K, block scales and padding).
# Of the routed suite's DeepSeek cases only the last (the expert-parallel
# shard) plans the 32 rows an expert from which fp8 block-128 experts take the
# wgmma GEMM (kernels/moe_fp8_wg.cu), and the check stops at the first failing
# case, an mma.sync one; 1 sends every case there, so the previous-block-scale
# switch (moe_scale_expert, which the mma.sync kernels read too) is met in
# that kernel (its mma.sync kill: mutants/results/gpu.md).
MUTANT_ENV = {"gpu_moe_prev_block_scale": {"QVET_MOE_WG_MIN_ROWS": "1"},
              "blk_scales_unpadded": {"QVET_AQ_LT_FP8_BLK_MIN_M": "1"},
              "gpu_aq_lock_not_reset": {"QVET_AQ_CLUSTER_MAX": "1", "QVET_AQ_LT_FP8_MIN_M": "off"},
              "gpu_aq_split_sum_not_zeroed": {"QVET_AQ_CLUSTER_MAX": "1"},
              "gpu_aq_splitk_f16_reduce": {"QVET_AQ_LT_FP8_MIN_M": "off"},
              "gpu_aq_block_scale_n_floor": {"QVET_AQ_LT_FP8_MIN_M": "off"},
              "gpu_aq_block_scale_token_major": {"QVET_AQ_LT_FP8_MIN_M": "off"},
              "gpu_aq_padding_not_cleared": {"QVET_AQ_LT_FP8_MIN_M": "off"}}


def mutant_env(name):
    env = {}
    for f in files_with_switch(name):
        env.update(PATH_ENV.get(f, {}))
    env.update(MUTANT_ENV.get(name, {}))
    return env


def run_qvet(qvet, args, out_jsonl, stop_at_fail=False, env=None):
    """Runs qvet with --out; never shrinks (the matrix needs the first failure,
    not a minimal one). stop_at_fail ends the run at the first FAIL case line
    (qvet flushes one line per case), for the slower GPU runs. env adds
    variables to the environment."""
    if os.path.exists(out_jsonl):
        os.remove(out_jsonl)
    cmd = [qvet] + args + ["--no-shrink", "--fail-dir", out_jsonl[:-len(".jsonl")] + "-fails", "--out", out_jsonl]
    env = dict(os.environ, **env) if env else None
    if not stop_at_fail:
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        return r.returncode, r.stdout, read_cases(out_jsonl)
    log = out_jsonl[:-len(".jsonl")] + ".log"
    with open(log, "w") as lf:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=lf, stderr=subprocess.STDOUT, env=env)
        stopped = False
        while p.poll() is None:
            time.sleep(0.2)
            if any(c.get("verdict") == "FAIL" for c in read_cases(out_jsonl)):
                p.terminate()
                p.wait()
                stopped = True
                break
    with open(log, encoding="utf-8", errors="replace") as lf:
        text = lf.read()
    # A run ended at its first FAIL reads as qvet's own exit status for a FAIL (1).
    return (1 if stopped else p.returncode), text, read_cases(out_jsonl)


def first_fail(cases):
    for i, c in enumerate(cases):
        if c.get("verdict") == "FAIL":
            return i, c
    return None, None


CRITERIA = ["marlin_pass", "vllm_pass", "cosine_pass", "nmse_pass"]


def criteria_pass(cases):
    """Would each usual criterion have passed the bug? Yes when it passes on
    every random case of the run in the log-uniform regime: ordinary random
    data, as those tests draw it (the extreme regimes, all-zero groups and
    near-overflow outputs, are not what they run, and a zero reference makes
    their relative measures undefined)."""
    keys = CRITERIA
    rnd = [c for c in cases if c.get("probe") == "random" and c.get("regime") == "loguniform"]
    # A case the backend or the reference refused has no output to judge: then
    # the criteria did not see the same outputs, and no answer is given.
    if not rnd or any(not isinstance(c.get("criteria"), dict) for c in rnd):
        return {k: None for k in keys}
    return {k: all(bool(c["criteria"].get(k)) for c in rnd) for k in keys}


# zstd and the libraries it loads travel with a pack: the GPU machine may lack them.
ZSTD_LIBS = ["libz.so.1", "liblzma.so.5", "liblz4.so.1"]


# What one pack part may hold: the GPU machine takes at most 64 MiB of files,
# the repository's own (about 19 MiB) and the carried ones together.
PACK_PART_MAX = 40 * 2**20


def pack_dirs(out):
    """The pack parts present under out (pack, pack-2, pack-3, ...), any subset."""
    if not os.path.isdir(out):
        return []
    parts = [(1 if fn == "pack" else int(fn[5:]), fn) for fn in os.listdir(out)
             if os.path.isdir(os.path.join(out, fn)) and (fn == "pack" or re.fullmatch(r"pack-[0-9]+", fn))]
    return [os.path.join(out, fn) for _, fn in sorted(parts)]


def pack_bins(bindir, out, names):
    """bin/qvet-base compressed, every mutant binary as a zstd patch against it,
    in parts of at most PACK_PART_MAX bytes (pack, pack-2, ...), each carrying
    the base, zstd and its libraries, so that each can travel alone."""
    for d in pack_dirs(out):
        shutil.rmtree(d)
    zstd = shutil.which("zstd")
    if not zstd:
        sys.exit("mutants: --pack needs zstd")
    base = os.path.join(bindir, "qvet-base")
    stage = os.path.join(out, "pack-patches")
    os.makedirs(stage, exist_ok=True)
    base_zst = os.path.join(stage, "qvet-base.zst")
    subprocess.run([zstd, "-q", "-f", "-19", base, "-o", base_zst], check=True)
    patches = []
    for name in names:
        exe = os.path.join(bindir, "qvet-" + name)
        if os.path.exists(exe):
            pz = os.path.join(stage, name + ".patch.zst")
            subprocess.run([zstd, "-q", "-f", "-19", "--long=27", f"--patch-from={base}", exe, "-o", pz],
                           check=True, stderr=subprocess.DEVNULL)
            patches.append(pz)
    libs = []
    for lib in ZSTD_LIBS:
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"):
            if os.path.exists(os.path.join(d, lib)):
                libs.append(os.path.join(d, lib))
                break
    fixed = os.path.getsize(base_zst) + os.path.getsize(zstd) + sum(os.path.getsize(x) for x in libs)
    parts, size = [[]], fixed
    for pz in patches:
        if parts[-1] and size + os.path.getsize(pz) > PACK_PART_MAX:
            parts.append([])
            size = fixed
        parts[-1].append(pz)
        size += os.path.getsize(pz)
    for i, part in enumerate(parts):
        d = os.path.join(out, "pack" if i == 0 else f"pack-{i + 1}")
        os.makedirs(os.path.join(d, "lib"))
        shutil.copy2(zstd, os.path.join(d, "zstd"))
        for x in libs:
            shutil.copy2(x, os.path.join(d, "lib", os.path.basename(x)))
        shutil.copy2(base_zst, os.path.join(d, "qvet-base.zst"))
        for pz in part:
            shutil.move(pz, os.path.join(d, os.path.basename(pz)))
        total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(d) for f in fs)
        print(f"mutants: packed {len(part)} binaries into {os.path.relpath(d, ROOT)} ({total / 2**20:.1f} MiB)")
    shutil.rmtree(stage)


def packed_names(out):
    """The mutants whose patches the pack parts present hold."""
    return {fn[:-len(".patch.zst")] for d in pack_dirs(out) for fn in os.listdir(d) if fn.endswith(".patch.zst")}


def unpack_bins(pack, bindir):
    """Rebuilds bin/ from one part of pack_bins' output."""
    os.makedirs(bindir, exist_ok=True)
    zstd = os.path.join(pack, "zstd")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(pack, "lib"))
    if shutil.which("zstd"):
        zstd, env = shutil.which("zstd"), None
    base = os.path.join(bindir, "qvet-base")
    subprocess.run([zstd, "-q", "-f", "-d", os.path.join(pack, "qvet-base.zst"), "-o", base], check=True, env=env)
    os.chmod(base, 0o755)
    for fn in sorted(os.listdir(pack)):
        if fn.endswith(".patch.zst"):
            exe = os.path.join(bindir, "qvet-" + fn[:-len(".patch.zst")])
            subprocess.run([zstd, "-q", "-f", "-d", "--long=27", f"--patch-from={base}", os.path.join(pack, fn),
                            "-o", exe], check=True, env=env)
            os.chmod(exe, 0o755)


def seed_scenario(bindir):
    """Runs the seed scenario test; returns its report lines and whether it passed."""
    exe = os.path.join(bindir, SEED_TEST)
    if not os.path.exists(exe):
        return ["(test binary not built)"], False
    r = subprocess.run([exe], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [ln[len("seed scenario: "):] for ln in r.stdout.splitlines() if ln.startswith("seed scenario: ")]
    return lines, r.returncode == 0


# ---- oracle mutants (mutants/oracle.tsv) --------------------------------------

ORACLE_PARTS = ["decode", "sum", "bound", "spec", "window", "verdict", "monitor", "generator", "campaign", "route"]
ORACLE_SUITES = ["t_formats", "t_truth", "t_verify", "t_spec", "t_model", "t_campaign", "t_sharp", "t_moe"]
ORACLE_CHECKS = ORACLE_SUITES + ["check", "fuzz"]
SUITE_TIMEOUT = 900  # seconds: a hang is reported, the suites' own timeouts come first


def read_oracle(path):
    """mutants/oracle.tsv: six tab-separated columns (its header says which)."""
    rows = []
    for lineno, (name, part, checks, variants, models, what) in read_tsv(path):
        if part not in ORACLE_PARTS:
            sys.exit(f"mutants: {path}:{lineno}: part '{part}' is not one of {', '.join(ORACLE_PARTS)}")
        eq = checks == "equivalent"
        cl = [] if eq else checks.split(",")
        bad = [c for c in cl if c not in ORACLE_CHECKS]
        if bad or (not eq and not cl):
            sys.exit(f"mutants: {path}:{lineno}: unknown checks {', '.join(bad) or '(none)'}")
        if ("check" in cl or "fuzz" in cl) and variants == "-":
            sys.exit(f"mutants: {path}:{lineno}: check and fuzz need a variants glob")
        rows.append({"name": name, "part": part, "checks": cl, "equivalent": eq, "variants": variants,
                     "models": models, "what": what})
    return rows


def suite_env():
    """The suites' environment: one BLAS thread each (several run at once)."""
    return dict(os.environ, OPENBLAS_NUM_THREADS="1")


def run_suite(exe):
    """Runs one Check suite; returns (failed, note): failed when it exits
    non-zero (a failing, erroring or crashing test, or no summary), note the
    first failing test or the reason."""
    try:
        r = subprocess.run([exe], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=SUITE_TIMEOUT, env=suite_env())
    except subprocess.TimeoutExpired:
        return True, f"no end within {SUITE_TIMEOUT} s"
    lines = r.stdout.splitlines()
    fails = [ln for ln in lines if ":F:" in ln or ":E:" in ln]
    if r.returncode == 0:
        return False, ""
    if fails:
        # file:line:F:tcase:test:iteration: message -> test: message
        parts = fails[0].split(":", 6)
        note = f"{parts[4]}: {parts[6].strip()}" if len(parts) == 7 else fails[0]
        return True, note[:160]
    summary = [ln for ln in lines if "Checks:" in ln]
    return True, (summary[-1] if summary else f"exit {r.returncode}, no Check summary")[:160]


def oracle_one(a, base, out, r):
    """Builds oracle mutant r with the suites it runs, runs each of its checks
    (all of them: the row of the matrix), removes the build. Returns the
    result line."""
    t0 = time.time()
    suites = [c for c in r["checks"] if c in ORACLE_SUITES]
    res = {"kind": "mutant", "mutant": r["name"], "bug_class": 0, "oracle_part": r["part"], "cites": r["models"],
           "what": r["what"], "variant": r["variants"], "backend": "cpu", "killed": False, "killed_by": "",
           "cases_to_kill": None, "checks": {}}
    files = build_mutant(base, out, r, targets=["qvet"] + [f"tests/{s}" for s in suites], jobs=1)
    if files is None:
        res["killed_by"] = "not built: switch missing"
        return res
    mb = os.path.join(out, "build-" + r["name"])
    with open(os.path.join(mb, "qvet"), "rb") as x, open(os.path.join(base, "qvet"), "rb") as y:
        if x.read() == y.read():
            sys.exit(f"mutants: {r['name']} built to the same bytes as the base (switch not compiled in)")
    killers, notes = [], {}
    for s in suites:
        failed, note = run_suite(os.path.join(mb, "tests", s))
        res["checks"][s] = "killed" if failed else "survived"
        if failed:
            killers.append(s)
            notes[s] = note
    exe = os.path.join(mb, "qvet")
    tag = "oracle-" + r["name"]
    check_killed = False
    if "check" in r["checks"]:
        rc, _, cases = run_qvet(exe, ["check", "--variant", r["variants"], "--cpu"], os.path.join(out, f"{tag}-check.jsonl"))
        i, c = first_fail(cases)
        res["checks"]["check"] = "killed" if c is not None else "survived"
        if c is not None:
            check_killed = True
            killers.append("check")
            notes["check"] = f"{c.get('probe')}: {c.get('reason', '')}"[:160]
            res["cases_to_kill"] = i + 1
        elif rc not in (0, 1):
            notes["check"] = f"no FAIL; exit {rc}"
    if "fuzz" in r["checks"]:
        if check_killed:
            res["checks"]["fuzz"] = "not needed"
        else:
            rc2, _, cases2 = run_qvet(exe, ["fuzz", "--variant", r["variants"], "--cpu", "--cases", str(a.cases),
                                            "--seed", str(a.seed)], os.path.join(out, f"{tag}-fuzz.jsonl"))
            i2, c2 = first_fail(cases2)
            res["checks"]["fuzz"] = "killed" if c2 is not None else "survived"
            if c2 is not None:
                killers.append("fuzz")
                notes["fuzz"] = f"{c2.get('probe')}: {c2.get('reason', '')}"[:160]
                res["cases_to_kill"] = i2 + 1
            elif rc2 not in (0, 1):
                notes["fuzz"] = f"no FAIL; exit {rc2}"
    res["killed"] = bool(killers)
    res["killed_by"] = ", ".join(killers)
    res["notes"] = notes
    res["seconds"] = round(time.time() - t0, 1)
    shutil.rmtree(mb)
    print(f"  {r['name']:<40} {'killed by ' + res['killed_by'] if res['killed'] else 'SURVIVED'} "
          f"({res['seconds']:.0f} s)", flush=True)
    return res


def provenance():
    """The date and the commit the tree was built at (with '+ changes' when the
    working tree differs from it)."""
    def git(*args):
        r = subprocess.run(["git"] + list(args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return time.strftime("%Y-%m-%d"), commit + (" + uncommitted changes" if dirty else "")


def write_oracle(out, results, rows, base_notes, elapsed):
    """out/cpu/oracle.jsonl (kind "mutant" lines, as `qvet report` reads them,
    with the matrix in "checks"; the equivalent rows as "mutant_equivalent")
    and out/cpu/oracle.md, the kill matrix."""
    date, commit = provenance()
    eq = [r for r in rows if r["equivalent"]]
    with open(os.path.join(out, "oracle.jsonl"), "w", encoding="utf-8") as f:
        for res in results:
            f.write(json.dumps(res, sort_keys=True) + "\n")
        for r in eq:
            f.write(json.dumps({"kind": "mutant_equivalent", "mutant": r["name"], "oracle_part": r["part"],
                                "cites": r["models"], "what": r["what"]}, sort_keys=True) + "\n")
    killed = sum(r["killed"] for r in results)
    cols = [c for c in ORACLE_CHECKS if any(c in res["checks"] for res in results)]
    cell = {"killed": "K", "survived": "·", "not needed": "(K)"}
    with open(os.path.join(out, "oracle.md"), "w", encoding="utf-8") as f:
        f.write(f"# Oracle mutant kill matrix (CPU)\n\n**{killed} killed of {len(results)}** oracle mutants "
                f"({len(eq)} more argued equivalent, not run). Run {date}, built at `{commit}`, "
                f"{elapsed / 60:.1f} min for these rows.\n\n")
        f.write("Each row is one switch of `mutants/oracle.tsv` built into a copy of the unmutated build; each "
                "column one check run against it: `K` killed it, `·` ran and did not, blank: not run for this "
                "part of the oracle, `(K)`: fuzz not needed, check killed it. The unmutated build passed every "
                "suite and every check and fuzz case first" + (base_notes or "") + ".\n\n")
        f.write("| mutant | part | " + " | ".join(cols) + " | first failure | the oracle failure it models |\n")
        f.write("|---|---|" + "---|" * len(cols) + "---|---|\n")
        for res in results:
            first = ""
            for c in cols:
                if res["checks"].get(c) == "killed":
                    first = f"{c}: {res.get('notes', {}).get(c, '')}"
                    break
            first = first.replace("|", "\\|")
            f.write(f"| `{res['mutant']}` | {res['oracle_part']} | "
                    + " | ".join(cell.get(res["checks"].get(c, ""), "") for c in cols)
                    + f" | {first if res['killed'] else '**survived**'} | {res['cites'].replace('|', '/')} |\n")
        per = {c: sum(res["checks"].get(c) == "killed" for res in results) for c in cols}
        f.write("| **kills** | | " + " | ".join(str(per[c]) for c in cols) + " | | |\n")
        only = {}
        for res in results:
            ks = [c for c in cols if res["checks"].get(c) == "killed"]
            if len(ks) == 1:
                only[ks[0]] = only.get(ks[0], 0) + 1
        f.write("\nKilled by one check alone: " + ", ".join(f"{c} {n}" for c, n in sorted(only.items())) + ".\n")
        if eq:
            f.write("\n## Argued equivalent (not run)\n\n")
            for r in eq:
                f.write(f"- `{r['name']}` ({r['part']}): {r['what']}\n")


def run_oracle(a, base, out):
    """The oracle mutants: the base build's suites first (they must pass),
    then every mutant, --oracle-parallel at a time. Returns (killed, run, ok)."""
    rows = read_oracle(os.path.join(ROOT, "mutants/oracle.tsv"))
    if a.only:
        keep = set(a.only.split(","))
        rows = [r for r in rows if r["name"] in keep]
    run_rows = [r for r in rows if not r["equivalent"]]
    if not rows:
        return 0, 0, True
    t0 = time.time()
    suites = [s for s in ORACLE_SUITES if any(s in r["checks"] for r in run_rows)]
    rel = os.path.relpath(base, ROOT)
    print(f"mutants: {len(run_rows)} oracle mutants ({len(rows) - len(run_rows)} argued equivalent); "
          f"the unmutated suites first: {', '.join(suites)}", flush=True)
    make(rel, target=["qvet"] + [f"tests/{s}" for s in suites])
    ok = True
    for s in suites:
        failed, note = run_suite(os.path.join(base, "tests", s))
        if failed:
            ok = False
            print(f"mutants: UNMUTATED {s} fails: {note}")
    n_cases = 0
    for gl in sorted({r["variants"] for r in run_rows if "check" in r["checks"] or "fuzz" in r["checks"]}):
        tag = gl.replace("*", "x")
        rc, log, cases = run_qvet(os.path.join(base, "qvet"), ["check", "--variant", gl, "--cpu"],
                                  os.path.join(out, f"oracle-base-check-{tag}.jsonl"))
        nf = sum(c.get("verdict") == "FAIL" for c in cases)
        rc2, log2, cases2 = run_qvet(os.path.join(base, "qvet"), ["fuzz", "--variant", gl, "--cpu", "--cases",
                                     str(a.cases), "--seed", str(a.seed)], os.path.join(out, f"oracle-base-fuzz-{tag}.jsonl"))
        nf += sum(c.get("verdict") == "FAIL" for c in cases2)
        n_cases += len(cases) + len(cases2)
        if rc != 0 or rc2 != 0 or nf or not cases:
            ok = False
            print(f"mutants: UNMUTATED build fails on {gl}: check exit {rc}, fuzz exit {rc2}, {nf} FAIL cases")
    if not ok:
        print("mutants: the unmutated build must pass before its mutants mean anything")
        return 0, len(run_rows), False
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.oracle_parallel)) as pool:
        results = list(pool.map(lambda r: oracle_one(a, base, out, r), run_rows))
    elapsed = time.time() - t0
    write_oracle(out, results, rows, f" ({n_cases} check and fuzz cases, 0 FAIL)", elapsed)
    killed = sum(r["killed"] for r in results)
    for res in results:
        if not res["killed"]:
            print(f"mutants: oracle mutant {res['mutant']} SURVIVED {res['killed_by']}")
    print(f"mutants: oracle: {killed} killed of {len(results)} in {elapsed / 60:.1f} min "
          f"(kill matrix: {os.path.relpath(os.path.join(out, 'oracle.md'), ROOT)})", flush=True)
    return killed, len(results), True


def read_edits(path):
    """mutants/edits.tsv: one-line bugs applied without a switch (see its header)."""
    rows = []
    for _, (name, cls, src, variants, before, after, what, old, new) in read_tsv(path, 9):
        rows.append({"name": name, "bug_class": cls, "file": src, "variants": variants, "recorded": after,
                     "what": what, "old": old.replace("\\n", "\n"), "new": new.replace("\\n", "\n")})
    return rows


def run_edits(a, base, out):
    """Builds each edit as a copy of the base build whose one object is compiled
    from an edited copy of its source (the tree itself is never touched), then
    runs check and the bounded fuzz like a switch mutant. Returns the exit status."""
    rows = read_edits(os.path.join(ROOT, a.edits))
    if a.only:
        rows = [r for r in rows if r["name"] in set(a.only.split(","))]
    make(os.path.relpath(base, ROOT))
    results = []
    for r in rows:
        with open(os.path.join(ROOT, r["file"]), encoding="utf-8") as f:
            text = f.read()
        res = {"kind": "edit", "mutant": r["name"], "bug_class": r["bug_class"], "file": r["file"],
               "variant": r["variants"], "what": r["what"], "killed": False, "killed_by": "", "cases_to_kill": None}
        if text.count(r["old"]) != 1:
            res["killed_by"] = f"not applied: the old text occurs {text.count(r['old'])} times in {r['file']}"
            results.append(res)
            print(f"  {r['name']:<32} {res['killed_by']}", flush=True)
            continue
        src = os.path.join(out, "edits-src", r["name"], r["file"])
        os.makedirs(os.path.dirname(src), exist_ok=True)
        with open(src, "w", encoding="utf-8") as f:
            f.write(text.replace(r["old"], r["new"]))
        mb = os.path.join(out, "build-edit-" + r["name"])
        copy_base(base, mb)
        rel = os.path.relpath(mb, ROOT)
        obj = os.path.join(rel, "obj", os.path.splitext(r["file"])[0] + ".o")
        os.remove(os.path.join(ROOT, obj))
        # The base's own compile line for this object, with the edited copy as its source.
        dry = subprocess.run(["make", "-n", "--no-print-directory", f"BUILD={rel}", obj], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = next((ln for ln in dry.stdout.splitlines() if f" -c {r['file']} " in ln + " "), None)
        if line is None:
            sys.exit(f"mutants: no compile line for {obj}")
        cmd = line.replace(f" -c {r['file']} ", f" -I{os.path.dirname(r['file'])} -c {src} ")
        cc = subprocess.run(cmd, shell=True, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if cc.returncode != 0:
            sys.stdout.write(cc.stdout[-2000:])
            sys.exit(f"mutants: edit {r['name']} does not compile")
        keep = []
        for dirpath, _, fns in os.walk(os.path.join(mb, "obj")):
            keep += [os.path.relpath(os.path.join(dirpath, fn), ROOT) for fn in fns if fn.endswith(".o")]
        make(rel, keep=[k for k in keep if k != obj])
        exe = os.path.join(mb, "qvet")
        tag = "edit-" + r["name"]
        rc, _, cases = run_qvet(exe, ["check", "--variant", r["variants"], "--cpu"], os.path.join(out, f"{tag}-check.jsonl"))
        i, c = first_fail(cases)
        if c is not None:
            res.update(killed=True, killed_by=f"check:{c.get('probe')}", cases_to_kill=i + 1)
        else:
            rc2, _, cases2 = run_qvet(exe, ["fuzz", "--variant", r["variants"], "--cpu", "--cases", str(a.cases),
                                            "--seed", str(a.seed)], os.path.join(out, f"{tag}-fuzz.jsonl"))
            i2, c2 = first_fail(cases2)
            if c2 is not None:
                res.update(killed=True, killed_by=f"fuzz:{c2.get('probe')}", cases_to_kill=len(cases) + i2 + 1)
        res["recorded"] = r["recorded"]
        results.append(res)
        shutil.rmtree(mb)
        print(f"  {r['name']:<32} {'killed' if res['killed'] else 'SURVIVED'} {res['killed_by']}"
              f"{'' if res['killed'] == r['recorded'].startswith('killed') else ' (edits.tsv records ' + r['recorded'] + ')'}",
              flush=True)
    with open(os.path.join(out, "edits.jsonl"), "w", encoding="utf-8") as f:
        for res in results:
            f.write(json.dumps(res, sort_keys=True) + "\n")
    killed = sum(r["killed"] for r in results)
    # Exit non-zero when an edit's outcome differs from the one edits.tsv records.
    changed = [r["mutant"] for r in results if r["killed"] != r.get("recorded", "").startswith("killed")]
    if changed:
        print(f"edits: outcome differs from edits.tsv for {', '.join(changed)}")
    print(f"edits: {killed} killed of {len(results)}")
    return 1 if changed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--cpu", action="store_true")
    g.add_argument("--gpu", action="store_true")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--run-only", action="store_true")
    ap.add_argument("--only", help="comma-separated mutant names")
    ap.add_argument("--cases", type=int, default=None,
                    help="bounded fuzz cases per variant set (default 300 on the CPU, 20 on the GPU)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--out", default="mutants/out")
    ap.add_argument("--jobs", type=int, default=2, help="parallel make jobs (2 on the shared CI machine)")
    ap.add_argument("--parallel", type=int, default=1, help="mutants built at once (each with --jobs)")
    ap.add_argument("--first-fail", dest="first_fail", action="store_true", default=None,
                    help="stop each mutant's run at its first FAIL (default on the GPU)")
    ap.add_argument("--full", dest="first_fail", action="store_false",
                    help="run each mutant's whole check (default on the CPU: every probe that fails it is listed)")
    ap.add_argument("--pack", action="store_true", help="after building, write bin/ as zstd patches to pack/")
    ap.add_argument("--unpack", action="store_true", help="before running, rebuild bin/ from pack/")
    ap.add_argument("--edits", help="run the one-line edits of this file (mutants/edits.tsv) on the CPU instead")
    ap.add_argument("--oracle-only", action="store_true", help="run the oracle mutants (mutants/oracle.tsv) alone")
    ap.add_argument("--no-oracle", action="store_true", help="leave the oracle mutants out (--cpu runs them by default)")
    ap.add_argument("--oracle-parallel", type=int, default=2,
                    help="oracle mutants built and run at once, each with make -j1 (2 on the shared CI machine)")
    a = ap.parse_args()
    global JOBS
    JOBS = max(1, a.jobs)
    backend = "gpu" if a.gpu else "cpu"
    if a.cases is None:
        a.cases = 20 if a.gpu else 300
    if a.first_fail is None:
        a.first_fail = a.gpu
    out = os.path.join(ROOT, a.out, backend)
    os.makedirs(out, exist_ok=True)
    rows = [r for r in read_catalogue(os.path.join(ROOT, "mutants/catalogue.tsv")) if backend in r["backends"]]
    if a.only:
        keep = set(a.only.split(","))
        rows = [r for r in rows if r["name"] in keep]
    bindir = os.path.join(out, "bin")
    # One unmutated build serves both backends (the same sources and flags).
    base = os.path.join(ROOT, a.out, "build-base")

    if a.edits:
        if a.gpu:
            sys.exit("mutants: --edits runs on the CPU models (--cpu)")
        return run_edits(a, base, out)
    if a.oracle_only:
        if a.gpu:
            sys.exit("mutants: the oracle mutants run on the CPU (--cpu)")
        make(os.path.relpath(base, ROOT))
        k, n, ok = run_oracle(a, base, out)
        print(f"mutants: {k} killed of {n}")
        return 0 if ok and k == n else 1
    if not a.run_only:
        print(f"mutants: building the unmutated base and {len(rows)} mutants ({backend})", flush=True)
        make(os.path.relpath(base, ROOT))
        os.makedirs(bindir, exist_ok=True)
        shutil.copy2(os.path.join(base, "qvet"), os.path.join(bindir, "qvet-base"))
        # The seed scenario (issue item 4) is a Check test; its binary travels with the others.
        if backend == "cpu":
            make(os.path.relpath(base, ROOT), target="tests/" + SEED_TEST)
            shutil.copy2(os.path.join(base, "tests", SEED_TEST), os.path.join(bindir, SEED_TEST))
        def build_one(r):
            exe = os.path.join(bindir, "qvet-" + r["name"])
            srcs = [os.path.join(ROOT, f) for f in files_with_switch(r["name"])]
            if srcs and os.path.exists(exe) and all(os.path.getmtime(exe) > os.path.getmtime(x)
                                                    for x in srcs + [os.path.join(base, "qvet")]):
                print(f"  {r['name']}: up to date", flush=True)
                return
            files = build_mutant(base, out, r)
            if files is None:
                print(f"  {r['name']}: switch QV_MUTANT_{r['name']} is placed nowhere", flush=True)
                return
            built = os.path.join(out, "build-" + r["name"], "qvet")
            with open(built, "rb") as x, open(os.path.join(base, "qvet"), "rb") as y:
                if x.read() == y.read():
                    sys.exit(f"mutants: {r['name']} built to the same bytes as the base (switch not compiled in)")
            shutil.copy2(built, os.path.join(bindir, "qvet-" + r["name"]))
            shutil.rmtree(os.path.join(out, "build-" + r["name"]))
            print(f"  built {r['name']} ({', '.join(files)})", flush=True)

        # Mutant builds are independent folders: --parallel builds several at once.
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.parallel)) as pool:
            for fut in [pool.submit(build_one, r) for r in rows]:
                fut.result()
        if a.pack:
            pack_bins(bindir, out, [r["name"] for r in rows])
        if a.build_only:
            return 0
    if a.unpack:
        dirs = pack_dirs(out)
        if not dirs:
            sys.exit(f"mutants: --unpack: no pack under {os.path.relpath(out, ROOT)} (pack, pack-2, ...)")
        for d in dirs:
            unpack_bins(d, bindir)
        # The parts carried here decide which mutants run.
        held = packed_names(out)
        left = [r["name"] for r in rows if r["name"] not in held]
        if left:
            print(f"mutants: {len(left)} selected mutants are in no pack part present here; running the "
                  f"{len(rows) - len(left)} that are", flush=True)
        rows = [r for r in rows if r["name"] in held]

    flag = "--gpu" if a.gpu else "--cpu"
    globs = sorted({r["variants"] for r in rows})
    base_fail = 0
    base_crit = {}
    for gl in globs:
        tag = gl.replace("*", "x")
        rc, log, cases = run_qvet(os.path.join(bindir, "qvet-base"), ["check", "--variant", gl, flag],
                                  os.path.join(out, f"base-check-{tag}.jsonl"))
        nf = sum(c.get("verdict") == "FAIL" for c in cases)
        rc2, log2, cases2 = run_qvet(os.path.join(bindir, "qvet-base"),
                                     ["fuzz", "--variant", gl, flag, "--cases", str(a.cases), "--seed", str(a.seed)],
                                     os.path.join(out, f"base-fuzz-{tag}.jsonl"))
        nf += sum(c.get("verdict") == "FAIL" for c in cases2)
        base_crit[gl] = criteria_pass(cases + cases2)
        if rc not in (0,) or rc2 not in (0,) or nf or not cases:
            base_fail += 1
            print(f"mutants: UNMUTATED build fails on {gl}: check exit {rc}, fuzz exit {rc2}, {nf} FAIL cases")
            print(log[-2000:])
        else:
            print(f"mutants: unmutated build clean on {gl}: {len(cases) + len(cases2)} cases, 0 FAIL", flush=True)

    results = []
    for r in rows:
        exe = os.path.join(bindir, "qvet-" + r["name"])
        res = {"kind": "mutant", "mutant": r["name"], "bug_class": r["bug_class"], "cites": r["cites"],
               "what": r["what"], "variant": r["variants"], "backend": backend, "killed": False,
               "killed_by": "", "cases_to_kill": None}
        if not os.path.exists(exe):
            res["killed_by"] = "not built: switch missing"
            results.append(res)
            continue
        tag = r["name"]
        menv = mutant_env(r["name"]) if a.gpu else {}
        if menv:
            res["env"] = " ".join(f"{k}={v}" for k, v in sorted(menv.items()))
        rc, log, cases = run_qvet(exe, ["check", "--variant", r["variants"], flag], os.path.join(out, f"{tag}-check.jsonl"),
                                  stop_at_fail=a.first_fail, env=menv)
        i, c = first_fail(cases)
        # Every probe kind that failed in the fixed suite (a witness should kill its bug class).
        res["failing_probes"] = sorted({x.get("probe") for x in cases if x.get("verdict") == "FAIL"})
        if c is not None:
            res.update(killed=True, killed_by=f"check:{c.get('probe')}", cases_to_kill=i + 1)
        else:
            rc2, log2, cases2 = run_qvet(exe, ["fuzz", "--variant", r["variants"], flag, "--cases", str(a.cases),
                                               "--seed", str(a.seed)], os.path.join(out, f"{tag}-fuzz.jsonl"),
                                      stop_at_fail=a.first_fail, env=menv)
            i2, c2 = first_fail(cases2)
            if c2 is not None:
                res.update(killed=True, killed_by=f"fuzz:{c2.get('probe')}", cases_to_kill=len(cases) + i2 + 1)
            elif rc not in (0, 1) or rc2 not in (0, 1):
                # A crash or a refused run is not a kill: it is reported for a human.
                res["killed_by"] = f"no FAIL; check exit {rc}, fuzz exit {rc2}"
            cases = cases + cases2
        res.update(criteria_pass(cases))
        results.append(res)
        print(f"  {r['name']:<32} {'killed' if res['killed'] else 'SURVIVED'} {res['killed_by']}", flush=True)

    with open(os.path.join(out, "kill.jsonl"), "w", encoding="utf-8") as f:
        for res in results:
            f.write(json.dumps(res, sort_keys=True) + "\n")
    killed = sum(r["killed"] for r in results)
    # The seed scenario is a CPU test (the decoder and the CPU model); the GPU report points to it.
    seed_lines, seed_ok = seed_scenario(bindir) if backend == "cpu" else (None, True)

    def cell(v):
        return "–" if v is None else ("passes (misses it)" if v else "fails (catches it)")

    with open(os.path.join(out, "kill.md"), "w", encoding="utf-8") as f:
        f.write(f"# Mutant kill matrix ({backend})\n\n{killed} killed of {len(results)}.\n\n")
        f.write("The last four columns: would the field's usual test have passed the mutant, on the same "
                "outputs (random log-uniform cases, against the exact value rounded to the output format)? "
                "A dash: the mutant made the backend or the reference refuse some of those cases (no output "
                "to judge). Do all four pass the unmutated build? "
                + ", ".join(f"`{g}` {'yes' if all(v.get(k) for k in CRITERIA) else 'no'}"
                            for g, v in sorted(base_crit.items())) + ".\n\n")
        f.write("| mutant | class | cites | killed | first killed by | cases | probes that fail it | Marlin <1e-3 | vLLM <0.04 | cosine | NMSE <5e-4 |\n")
        f.write("|---|---:|---|---|---|---:|---|---|---|---|---|\n")
        for res in results:
            f.write(f"| `{res['mutant']}` | {res['bug_class']} | {res['cites']} | {'yes' if res['killed'] else '**no**'} | "
                    f"{res['killed_by']} | {res['cases_to_kill'] if res['cases_to_kill'] else '–'} | "
                    f"{', '.join(res.get('failing_probes') or []) or '–'} | "
                    f"{cell(res.get('marlin_pass'))} | {cell(res.get('vllm_pass'))} | {cell(res.get('cosine_pass'))} | "
                    f"{cell(res.get('nmse_pass'))} |\n")
        with_env = [res for res in results if res.get("env")]
        if with_env:
            f.write("\nRun with a variable that sends every eligible case down the mutated path (tools/mutants.py, "
                    "PATH_ENV): " + ", ".join(f"`{res['mutant']}` ({res['env']})" for res in with_env) + ".\n")
        f.write("\n## Seed scenario: fp8 W8A16 channel scales left unpermuted\n\n")
        if seed_lines is None:
            f.write("Run on the CPU: see mutants/out/cpu/kill.md (`make mutants-cpu`).\n")
        f.write(""
                "`tests/t_seed_scenario.c`, test `bug_20261129_fp8_channel_scales_unpermuted`: the packed "
                "channel scales put back in logical order (the bug), run through the decoder and the CPU "
                "model, graded by qvet. With one scale repeated in every channel the bug is invisible to "
                "every criterion; with distinct scales qvet fails it.\n\n")
        if seed_lines:
            f.write("".join(f"- {line}\n" for line in seed_lines))
        if seed_lines is not None:
            f.write(f"\nThe regression test {'passes' if seed_ok else '**FAILS**'}.\n")
        other = "gpu_" if backend == "cpu" else "cpu_"
        na = [r for r in read_catalogue(os.path.join(ROOT, "mutants/catalogue.tsv"))
              if r["backends"] == ["none"] and not r["name"].startswith(other)]
        if na:
            f.write("\nCatalogue entries that cannot apply to this backend's code:\n\n")
            for r in na:
                f.write(f"- class {r['bug_class']} `{r['name']}`: {r['what']}\n")
    if base_fail:
        print(f"mutants: the unmutated build failed on {base_fail} variant sets")
    if not seed_ok:
        print("mutants: the seed scenario regression test failed")
    n = len(results)
    oracle_ok = True
    if backend == "cpu" and not a.no_oracle:
        print(f"mutants: catalogue: {killed} killed of {n}", flush=True)
        k2, n2, oracle_ok = run_oracle(a, base, out)
        killed, n = killed + k2, n + n2
    print(f"mutants: {killed} killed of {n}")
    return 0 if killed == n and not base_fail and seed_ok and oracle_ok else 1


if __name__ == "__main__":
    sys.exit(main())
