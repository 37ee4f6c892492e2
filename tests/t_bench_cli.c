/* t_bench_cli.c: `qvet bench` as a user runs it: every bad option is refused
 * with a message on stderr and exit 2 before any GPU work, --dry-run lists the
 * rows (baselines, quantizers) the declarations call for, and on a machine
 * without a GPU the command says so and exits 3 without writing its --out
 * file. With a GPU, a short run's JSON Lines are checked for what the ratios
 * rest on (paired_ratios). The binary is $QVET_BIN, or ../qvet next to this
 * test's folder (BUILD/qvet for BUILD/tests/t_bench_cli). The timings
 * themselves are the H200's (docs/benchmark.md, bench/RESULTS.md). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/json.h"
#include "qvet/moe.h"
#include "support/cli.h"
#include "support/suite.h"

/* The driver's files, looked at without a CUDA call. */
static int have_device(void) { return access("/dev/nvidia0", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0; }

START_TEST(help)
{
    /* the activation-quantized family's baselines and the comma-separated globs */
    qvet_expect((const char *[]){"bench", "--help", NULL}, 0,
                (const char *[]){"usage: qvet bench", "cuBLASLt fp8 and int8", "'qqq-*,w8a8-*'", NULL});
}
END_TEST

/* Each bad option: exit 2, the quoted words on stderr, nothing on stdout. */
static const struct bad_opt {
    const char *args[6];
    const char *says;
} bad_opts[] = {
    {{"bench", "--model", "llama-1", NULL}, "--model must be llama2-7b, llama3-70b or all"},
    {{"bench", "--m", "1,0", NULL}, "--m"},
    {{"bench", "--m", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", NULL}, "at most 16 values"},
    {{"bench", "--m", ",", NULL}, "--m ',' has an empty item"},
    {{"bench", "--m", "1,,16", NULL}, "--m '1,,16' has an empty item"},
    {{"bench", "--m", "16,", NULL}, "--m '16,' has an empty item"},
    {{"bench", "--runs", "0", NULL}, "--runs"},
    {{"bench", "--runs", "many", NULL}, "--runs"},
    {{"bench", "--variant", "no-such-row*", NULL}, "no row with a GPU kernel matches 'no-such-row*'"},
    {{"bench", "--variant", "nothing-a,nothing-b", NULL}, "matches 'nothing-a,nothing-b'"},
    {{"bench", "--variant", ",,", NULL}, "--variant ',,' has an empty item"},
    {{"bench", "--variant", "cublas-f16,", NULL}, "--variant 'cublas-f16,' has an empty item"},
    {{"bench", "--variant", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", NULL}, "at most 16 patterns"},
    {{"bench", "--frobnicate", NULL}, "unknown option or missing value: --frobnicate"},
    {{"bench", "--runs", NULL}, "unknown option or missing value: --runs"},
    {{"bench", "--passes", "0", NULL}, "--passes"},
    {{"bench", "--passes", "9", NULL}, "--passes"},
    {{"bench", "--passes", "two", NULL}, "--passes"},
};

START_TEST(bad_option)
{
    const struct bad_opt *b = &bad_opts[_i];
    run_result r = qvet_run(b->args);
    ck_assert_msg(r.rc == 2, "case %d: exit %d, expected 2 (stderr: %s)", _i, r.rc, r.err);
    ck_assert_msg(strstr(r.err, b->says) != NULL, "case %d: stderr lacks '%s': %s", _i, b->says, r.err);
    ck_assert_msg(strstr(r.out, "device:") == NULL, "case %d: timing started: %s", _i, r.out);
    run_free(&r);
}
END_TEST

/* QVET_BENCH_TRACE takes 1 or 0 (unset and empty: 0); any other value is a
 * usage error before any GPU work, not a silent "off". */
START_TEST(trace_env)
{
    static const char *const bad[] = {"yes", "2", "true"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("QVET_BENCH_TRACE", bad[i], 1);
        run_result r = qvet_run((const char *[]){"bench", "--dry-run", NULL});
        ck_assert_msg(r.rc == 2, "QVET_BENCH_TRACE=%s: exit %d, expected 2 (stderr: %s)", bad[i], r.rc, r.err);
        ck_assert_msg(strstr(r.err, "QVET_BENCH_TRACE") != NULL && strstr(r.err, bad[i]) != NULL, "stderr: %s",
                      r.err);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
    }
    static const char *const good[] = {"0", "1", ""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("QVET_BENCH_TRACE", good[i], 1);
        run_result r = qvet_run((const char *[]){"bench", "--dry-run", NULL});
        ck_assert_msg(r.rc == 0, "QVET_BENCH_TRACE='%s': exit %d (stderr: %s)", good[i], r.rc, r.err);
        run_free(&r);
    }
    unsetenv("QVET_BENCH_TRACE");
}
END_TEST

/* --dry-run lists the rows without touching a GPU. Expected, from the rows'
 * declarations: qqq-w4a8-ch has per-token int8 activations, so the int8
 * quantizer goes in front of it; w8a8-i8-tensor has a per-tensor activation
 * scale, which no per-token quantizer produces; w8a8-fp8-block128 scales
 * activations per token and 128-K group. Any int8/e4m3-activation row brings
 * the per-tensor fp8 and the int8 cuBLASLt baselines, an e4m3 row also the
 * per-token x channel and per-128-K fp8 ones; a weight-only row brings none. */
START_TEST(dry_run_rows)
{
    run_result r = qvet_run((const char *[]){"bench", "--dry-run", "--variant",
                                              "qqq-w4a8-ch,w8a8-i8-tensor,w8a8-fp8-block128", "--model", "llama2-7b",
                                              "--m", "1,16", NULL});
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    const char *const want[] = {
        "cublas-f16                 reference: cuBLAS fp16\n",
        "cublaslt-fp8               baseline: cuBLASLt e4m3 x e4m3 -> f16",
        "cublaslt-fp8-tok-ch        baseline: cuBLASLt e4m3 x e4m3 -> f16, per-token x per-channel",
        "cublaslt-fp8-block         baseline: cuBLASLt e4m3 x e4m3 -> f16, one scale per 128 K",
        "cublaslt-fp8-blk128        baseline: cuBLASLt e4m3 x e4m3 -> f16, weights per 128 x 128 block",
        "cublaslt-int8              baseline: cuBLASLt int8 x int8 -> int32\n",
        "qqq-w4a8-ch                GEMM, and +aq: act-quant-i8 in front\n",
        "w8a8-i8-tensor             GEMM (no per-token quantizer",
        "w8a8-fp8-block128          GEMM, and +aq: act-quant-e4m3-g128 in front\n",
        "act-quant-i8               quantizer alone: f16 -> int8 per token\n",
        "act-quant-e4m3-g128        quantizer alone: f16 -> e4m3 per token and 128-K group\n",
        /* (1 + 5 baselines + 3 rows + 2 with +aq + 2 quantizers) x 1 model x 4 layers x 2 M,
         * and the 4 registry rows (reference included) chained x 1 model x 2 M */
        "11 rows, 1 model(s) x 4 layers x 2 M values: 104 timings of 5 + 50 launches, and 8 of the block's\n"
        "four layers launched back to back (chain), in each of 2 passes over the rows (every other one in\n"
        "reverse order)\n",
    };
    const char *at = r.out;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *hit = strstr(at, want[i]);
        ck_assert_msg(hit != NULL, "line %zu missing or out of order: '%s' in:\n%s", i, want[i], r.out);
        at = hit + strlen(want[i]);
    }
    ck_assert_msg(strstr(r.out, "act-quant-e4m3 ") == NULL, "per-token e4m3 quantizer listed without its row");
    run_free(&r);

    r = qvet_run((const char *[]){"bench", "--dry-run", "--variant", "marlin-w4a16-ch-f16", "--runs", "7", "--passes",
                                   "1", NULL});
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    ck_assert_msg(strstr(r.out, "cublaslt") == NULL && strstr(r.out, "act-quant") == NULL, "%s", r.out);
    /* (reference + 1 row) x 2 models x 4 layers x the 9 default M values; the
     * same 2 rows chained x 2 models x 9 M */
    ck_assert_msg(strstr(r.out, "2 rows, 2 model(s) x 4 layers x 9 M values: 144 timings of 5 + 7 launches, and 36 of "
                                "the block's\nfour layers launched back to back (chain), in each of 1 pass over the "
                                "rows (every other one in\nreverse order)\n"),
                  "%s", r.out);
    run_free(&r);
}
END_TEST

/* --dry-run with routed rows (moe-*): each routed row with a GPU kernel
 * that the globs select and the count of their timings (three a row and
 * token count: the routed layer and the loop of cuBLAS GEMMs side by side,
 * then cuBLAS's grouped GEMM), after the registry rows' plan when the globs
 * select both; a glob that selects nothing is refused. */
START_TEST(dry_run_routed)
{
    run_result r = qvet_run((const char *[]){"bench", "--dry-run", "--variant", "moe-*", NULL});
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    int rows = 0;
    for (int i = 0; i < qv_moe_row_count(); i++) {
        const qv_moe_row *row = qv_moe_row_get(i);
        if (!row->gpu_kernel) continue;
        char want[160];
        snprintf(want, sizeof want, "%-26s routed layer (routing, sort, grouped GEMM, combine), experts of %lld x %lld\n",
                 row->name, (long long)row->n, (long long)row->k);
        ck_assert_msg(strstr(r.out, want) != NULL, "'%s' missing in:\n%s", want, r.out);
        rows++;
    }
    ck_assert_int_ge(rows, 6);
    char count[160];
    snprintf(count, sizeof count, "%d routed row(s) x 5 token counts (1,8,64,512,4096): %d timings of 5 + 50 launches",
             rows, 15 * rows);
    ck_assert_msg(strstr(r.out, count) != NULL, "'%s' missing in:\n%s", count, r.out);
    ck_assert_msg(strstr(r.out, "cublas-f16") == NULL, "registry rows planned for routed globs alone:\n%s", r.out);
    run_free(&r);

    r = qvet_run((const char *[]){"bench", "--dry-run", "--variant", "marlin-w4a16-ch-f16,moe-mixtral-*", "--model",
                                   "llama2-7b", "--m", "1,64", "--runs", "9", NULL});
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    const char *dense = strstr(r.out, "2 rows, 1 model(s) x 4 layers x 2 M values: 16 timings of 5 + 9 launches");
    const char *moe = strstr(r.out, "1 routed row(s) x 2 token counts (1,64): 6 timings of 5 + 9 launches");
    ck_assert_msg(dense && moe && dense < moe, "both plans, registry rows first:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "moe-mixtral-w4a16-g128-f16 routed layer"));
    run_free(&r);

    r = qvet_run((const char *[]){"bench", "--dry-run", "--variant", "moe-no-such-*", NULL});
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "no row with a GPU kernel matches 'moe-no-such-*'"));
    run_free(&r);
}
END_TEST

/* A fresh folder /tmp/qvet_bench_<tag>_XXXXXX in dir and the path of its
 * bench.jsonl in out. */
static void temp_out(char *dir, size_t dir_len, const char *tag, char *out, size_t out_len)
{
    snprintf(dir, dir_len, "/tmp/qvet_bench_%s_XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(out, out_len, "%s/bench.jsonl", dir);
}

/* Without a GPU: a clear message, exit 3, and no --out file left behind. */
START_TEST(no_device)
{
    if (have_device()) {
        printf("no_device: a GPU is present, the no-device path is not reachable here\n");
        return;
    }
    char dir[64], out[256];
    temp_out(dir, sizeof dir, "cli", out, sizeof out);
    const char *const sets[][8] = {
        {"bench", NULL},
        {"bench", "--variant", "qqq-*,w8a8-*", "--m", "1,16", "--out", out, NULL},
        {"bench", "--variant", "marlin-w4a16-ch-f16", "--model", "llama3-70b", "--runs", "3", NULL},
        {"bench", "--variant", "moe-*", "--out", out, NULL},
        {"bench", "--variant", "moe-mixtral-*,marlin-w4a16-ch-f16", "--m", "1", "--out", out, NULL},
    };
    for (int i = 0; i < 5; i++) {
        run_result r = qvet_run(sets[i]);
        ck_assert_msg(r.rc == 3, "set %d: exit %d, expected 3 (stderr: %s)", i, r.rc, r.err);
        ck_assert_msg(strstr(r.err, "qvet bench: no CUDA device") != NULL, "set %d: stderr: %s", i, r.err);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
    }
    ck_assert_msg(access(out, F_OK) != 0, "%s was written without a device", out);
    rmdir(dir);
}
END_TEST

/* The "kind":"bench" lines of a JSON Lines file, parsed (at most `cap`). */
static int read_bench_lines(const char *path, qv_json **lines, int cap)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s not written", path);
    char buf[4096];
    int n = 0;
    while (fgets(buf, sizeof buf, f)) {
        qv_json *j = NULL;
        ck_assert_msg(qv_json_parse(buf, strlen(buf), &j) == QV_OK, "%s: not JSON: %s", path, buf);
        const char *kind = qv_json_str(qv_json_get(j, "kind"));
        const char *var = qv_json_str(qv_json_get(j, "variant"));
        if (kind && !strcmp(kind, "bench") && var && strcmp(var, "copy") && n < cap)
            lines[n++] = j;
        else
            qv_json_free(j);
    }
    fclose(f);
    return n;
}

static const qv_json *find_line(qv_json **lines, int n, const char *variant, const char *layer, int m)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(qv_json_str(qv_json_get(lines[i], "variant")), variant) &&
            !strcmp(qv_json_str(qv_json_get(lines[i], "layer")), layer) &&
            (int)qv_json_num(qv_json_get(lines[i], "m"), -1) == m)
            return lines[i];
    ck_abort_msg("no line for %s %s m=%d", variant, layer, m);
    return NULL;
}

static double num(const qv_json *j, const char *key)
{
    const qv_json *v = qv_json_get(j, key);
    ck_assert_msg(v != NULL && !qv_json_is_null(v), "no number '%s'", key);
    return qv_json_num(v, 0);
}

/* With a GPU: a row's ratio is against the cuBLAS fp16 time timed side by
 * side with it (cublas_paired_us, on every layer and on the block as the sum
 * of the layers' paired times), and with --no-pair against the cublas-f16
 * row's own time, with no paired field. The JSON's numbers carry 3 (times)
 * and 4 (ratios) decimals, hence the tolerances. */
START_TEST(paired_ratios)
{
    if (!have_device()) {
        printf("SKIP: no CUDA device\n");
        return;
    }
    static const char *const layers[] = {"qkv", "o", "gate_up", "down"};
    for (int pair = 1; pair >= 0; pair--) {
        char dir[64], out[256];
        temp_out(dir, sizeof dir, "pair", out, sizeof out);
        const char *args[] = {"bench",   "--variant", "marlin-w4a16-ch-f16", "--model", "llama2-7b", "--m",
                              "1,256",   "--runs",    "10",                  "--passes", "1",        "--out",
                              out,       pair ? NULL : "--no-pair",          NULL};
        run_result r = qvet_run(args);
        ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
        ck_assert_msg((strstr(r.out, "pairing: ") != NULL) == pair, "pairing line (pair=%d): %s", pair, r.out);
        run_free(&r);
        qv_json *lines[64];
        const int n = read_bench_lines(out, lines, 64);
        static const int ms[] = {1, 256};
        for (int mi = 0; mi < 2; mi++) {
            double row_sum = 0, ref_sum = 0;
            for (int li = 0; li < 4; li++) {
                const qv_json *row = find_line(lines, n, "marlin-w4a16-ch-f16", layers[li], ms[mi]);
                const qv_json *ref = find_line(lines, n, "cublas-f16", layers[li], ms[mi]);
                const double us = num(row, "median_us"), ratio = num(row, "vs_cublas");
                ck_assert_msg(qv_json_get(ref, "cublas_paired_us") == NULL, "the reference row is paired");
                double want;
                if (pair) {
                    want = num(row, "cublas_paired_us");
                } else {
                    ck_assert_msg(qv_json_get(row, "cublas_paired_us") == NULL, "--no-pair line has a paired time");
                    want = num(ref, "median_us");
                }
                ck_assert_msg(us > 0 && want > 0, "%s m=%d: times %g, %g", layers[li], ms[mi], us, want);
                ck_assert_msg(fabs(ratio - want / us) <= 1e-4 * (1 + ratio), "%s m=%d: vs_cublas %.4f, %g / %g",
                              layers[li], ms[mi], ratio, want, us);
                row_sum += us, ref_sum += want;
            }
            const qv_json *blk = find_line(lines, n, "marlin-w4a16-ch-f16", "block", ms[mi]);
            ck_assert_msg(fabs(num(blk, "median_us") - row_sum) <= 0.01, "block m=%d: %g, layers %g", ms[mi],
                          num(blk, "median_us"), row_sum);
            ck_assert_msg(fabs(num(blk, "vs_cublas") - ref_sum / row_sum) <= 1e-4 * (1 + ref_sum / row_sum),
                          "block m=%d: vs_cublas %.4f, %g / %g", ms[mi], num(blk, "vs_cublas"), ref_sum, row_sum);
            if (pair) ck_assert_msg(fabs(num(blk, "cublas_paired_us") - ref_sum) <= 0.01, "block m=%d", ms[mi]);
        }
        for (int i = 0; i < n; i++) qv_json_free(lines[i]);
        unlink(out);
        rmdir(dir);
    }
}
END_TEST

/* With a GPU: registry and routed rows in one run write one --out file,
 * its provenance line first, then the registry rows' lines and the routed
 * rows' (once written without a provenance line, appended to the file). */
START_TEST(routed_out_file)
{
    if (!have_device()) {
        printf("SKIP: no CUDA device\n");
        return;
    }
    char dir[64], out[256];
    temp_out(dir, sizeof dir, "moe", out, sizeof out);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"kind\":\"stale\"}\n", f); /* a file from before: replaced, not appended to */
    fclose(f);
    run_result r = qvet_run((const char *[]){"bench", "--variant", "marlin-w4a16-ch-f16,moe-gptoss-*", "--model",
                                              "llama2-7b", "--m", "1", "--runs", "3", "--passes", "1", "--out", out,
                                              NULL});
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    run_free(&r);
    f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    char buf[4096];
    int line = 0, dense = 0, routed = 0;
    while (fgets(buf, sizeof buf, f)) {
        qv_json *j = NULL;
        ck_assert_msg(qv_json_parse(buf, strlen(buf), &j) == QV_OK, "not JSON: %s", buf);
        const char *kind = qv_json_str(qv_json_get(j, "kind")), *var = qv_json_str(qv_json_get(j, "variant"));
        if (line++ == 0) {
            ck_assert_str_eq(kind, "run");
            ck_assert_ptr_nonnull(qv_json_str(qv_json_get(j, "commit")));
        } else {
            ck_assert_str_eq(kind, "bench");
            if (!strcmp(var, "marlin-w4a16-ch-f16")) {
                ck_assert_msg(!routed, "a registry line after the routed ones");
                dense++;
            }
            if (!strcmp(var, "moe-gptoss-mxfp4-bias-bf16")) routed++;
        }
        qv_json_free(j);
    }
    fclose(f);
    ck_assert_int_gt(dense, 0);
    ck_assert_int_eq(routed, 1); /* one token count */
    unlink(out);
    rmdir(dir);
}
END_TEST

int main(void)
{
    printf("qvet binary: %s\n", qvet_path());
    TCase *tc;
    Suite *s = suite_single("bench_cli", "cli", 60, &tc);
    tcase_add_test(tc, help);
    tcase_add_loop_test(tc, bad_option, 0, (int)(sizeof bad_opts / sizeof bad_opts[0]));
    tcase_add_test(tc, dry_run_rows);
    tcase_add_test(tc, dry_run_routed);
    tcase_add_test(tc, trace_env);
    tcase_add_test(tc, no_device);
    tcase_add_test(tc, paired_ratios);
    tcase_add_test(tc, routed_out_file);
    return suite_run(s);
}
