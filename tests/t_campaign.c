/* t_campaign.c: the campaign (campaign.h) and `qvet check|fuzz|replay`.
 * The generator is a pure function of (seed, index), shards are disjoint, the
 * shape classes come out near 50/30/20, scales are never one repeated value,
 * replay reproduces a fuzz case's JSONL line and output bytes, a deliberately
 * broken kernel run through the host-pointer path is caught and shrunk, and
 * the commands' last lines and exit codes are exact.
 * The broken kernels are this file's own implementation of w8a8-i8-tok-ch's
 * declared arithmetic (exact int32, then fp32 acc * s_w * s_a, then fp16 RNE)
 * with one injected bug each; the verdicts come from the reference. */
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qvet/array.h"
#include "qvet/campaign.h"
#include "qvet/formats.h"
#include "qvet/json.h"

#include "support/run.h"
#include "support/suite.h"

#define SEED 20261129ull /* the date the suite was written; every case prints its index */

/* ---- the qvet binary ---- */

static char qvet_bin[4096];

static void find_qvet(void)
{
    const char *env = getenv("QVET_BIN");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (env && *env) snprintf(qvet_bin, sizeof qvet_bin, "%s", env);
    else if (n <= 0) snprintf(qvet_bin, sizeof qvet_bin, "build/qvet");
    else {
        self[n] = '\0';
        snprintf(qvet_bin, sizeof qvet_bin, "%s/../qvet", dirname(self)); /* BUILD/tests/.. */
    }
}

/* Runs qvet with args (NULL-terminated, without argv[0]). */
static run_result run_qvet(const char *const *args)
{
    return run_program(qvet_bin, args);
}

/* The last non-empty line of text, copied into buf. */
static const char *last_line(const char *text, char *buf, size_t len)
{
    size_t n = strlen(text);
    while (n > 0 && text[n - 1] == '\n') n--;
    size_t s = n;
    while (s > 0 && text[s - 1] != '\n') s--;
    snprintf(buf, len, "%.*s", (int)(n - s), text + s);
    return buf;
}

/* A temporary folder for one test. */
static void temp_dir(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/qvet-t_campaign-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* rm -r of a test's temporary folder. */
static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); /* 16: open folders at a time */
}

/* Lines of a file, NULL-terminated (caller frees each and the array). */
static char **read_lines(const char *path, int *count)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char **lines = NULL;
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0) {
        if (line[got - 1] == '\n') line[got - 1] = '\0';
        lines = realloc(lines, sizeof *lines * (size_t)(n + 2));
        lines[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    if (lines) lines[n] = NULL;
    *count = n;
    return lines;
}

static void free_lines(char **lines, int n)
{
    for (int i = 0; i < n; i++) free(lines[i]);
    free(lines);
}

/* A JSONL case line without its wall-time member (the only field that may
 * differ between two runs of one case). */
static void strip_time(const char *line, char *buf, size_t len)
{
    const char *t = strstr(line, "\"time_ms\":");
    ck_assert_ptr_nonnull(t);
    const char *e = strchr(t, ',');
    ck_assert_ptr_nonnull(e);
    snprintf(buf, len, "%.*s%s", (int)(t - line), line, e + 1);
}

/* ---- the generator ---- */

static qv_backend cpu_backend(void)
{
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_CPU);
    return b;
}

START_TEST(generator_is_pure)
{
    qv_backend b = cpu_backend();
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, NULL, &b), QV_OK);
    /* Case J drawn after other cases, or alone, or twice, is the same case. */
    for (int64_t j = 0; j < 40; j++) {
        qv_case a, c, other;
        qv_gen_case(&gen, SEED, j, &a);
        qv_gen_case(&gen, SEED, j + 1000, &other);
        qv_gen_case(&gen, SEED, j, &c);
        ck_assert_msg(memcmp(&a, &c, sizeof a) == 0, "seed %llu case %lld drew two different cases",
                      (unsigned long long)SEED, (long long)j);
        ck_assert_int_eq(qv_variant_check_shape(a.v, a.m, a.n, a.k), QV_OK);
        ck_assert(a.m * a.n * a.k <= b.cap_mnk || !a.capped);
        if (j < 12) {
            qv_problem p1, p2;
            ck_assert_int_eq(qv_case_build(&a, &p1), QV_OK);
            ck_assert_int_eq(qv_case_build(&c, &p2), QV_OK);
            size_t ab = (size_t)(p1.m * p1.k) * qv_fmt_storage_bytes(a.v->afmt);
            size_t qb = (size_t)(p1.k * p1.n) * qv_fmt_storage_bytes(a.v->wfmt);
            ck_assert(memcmp(p1.a, p2.a, ab) == 0);
            ck_assert(memcmp(p1.q, p2.q, qb) == 0);
            qv_problem_destroy(&p1);
            qv_problem_destroy(&p2);
        }
    }
    /* Another seed draws another campaign. */
    int same = 0;
    for (int64_t j = 0; j < 40; j++) {
        qv_case a, c;
        qv_gen_case(&gen, SEED, j, &a);
        qv_gen_case(&gen, SEED + 1, j, &c);
        same += a.v == c.v && a.m == c.m && a.n == c.n && a.k == c.k && a.data_seed == c.data_seed;
    }
    ck_assert_int_lt(same, 2);
}
END_TEST

START_TEST(shape_classes_near_50_30_20)
{
    qv_backend b = cpu_backend();
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, NULL, &b), QV_OK);
    const int n = 4000;
    int count[QV_SHAPE_COUNT] = {0}, probes[QV_PROBE_COUNT] = {0}, applies[QV_PROBE_COUNT] = {0};
    for (int j = 0; j < n; j++) {
        qv_case c;
        qv_gen_case(&gen, SEED, j, &c);
        count[c.shape_class]++;
        probes[c.probe]++;
        for (int w = QV_PROBE_WITNESS_FP8_PROMOTE; w < QV_PROBE_COUNT; w++)
            applies[w] += ref_probe_applies(c.v, (qv_probe_kind)w, c.m, c.n, c.k);
    }
    /* Binomial standard deviation at n = 4000 is under 0.8 %; allow 3 %. */
    ck_assert_msg(fabs(count[QV_SHAPE_EDGE] / (double)n - 0.5) < 0.03, "edge %d of %d", count[QV_SHAPE_EDGE], n);
    ck_assert_msg(fabs(count[QV_SHAPE_RANDOM] / (double)n - 0.3) < 0.03, "random %d of %d", count[QV_SHAPE_RANDOM], n);
    ck_assert_msg(fabs(count[QV_SHAPE_REAL] / (double)n - 0.2) < 0.03, "real %d of %d", count[QV_SHAPE_REAL], n);
    /* Every probe kind appears. */
    ck_assert_int_gt(probes[QV_PROBE_EXACT], n / 10);
    ck_assert_int_gt(probes[QV_PROBE_ONEHOT], n / 20);
    ck_assert_int_gt(probes[QV_PROBE_RANDOM], n / 3);
    /* Every witness that applies to the registry's rows is drawn (one that
     * applies to no row, such as the bias witness, is a spec's). */
    for (int w = QV_PROBE_WITNESS_FP8_PROMOTE; w < QV_PROBE_COUNT; w++)
        ck_assert_msg(probes[w] > 0 || applies[w] == 0, "witness %s applies to %d cases, never drawn",
                      qv_probe_name((qv_probe_kind)w), applies[w]);
}
END_TEST

/* 1 when the `count` scale values of a buffer (element size es) are not all one value. */
static int varied(const void *buf, int64_t count, size_t es)
{
    for (int64_t i = 1; i < count; i++)
        if (memcmp((const char *)buf, (const char *)buf + (size_t)i * es, es)) return 1;
    return 0;
}

START_TEST(scales_never_one_repeated_value)
{
    qv_backend b = cpu_backend();
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, NULL, &b), QV_OK);
    int checked = 0;
    for (int64_t j = 0; j < 300; j++) {
        qv_case c;
        qv_gen_case(&gen, SEED, j, &c);
        if (c.probe >= QV_PROBE_WITNESS_FP8_PROMOTE) continue; /* witnesses fix their values on purpose */
        if (c.m * c.n * c.k > ((int64_t)1 << 18)) continue;    /* keep the test fast */
        qv_problem p;
        ck_assert_int_eq(qv_case_build(&c, &p), QV_OK);
        const qv_variant *v = c.v;
        int64_t count = qv_problem_scale_rows(&p) * qv_problem_scale_cols(&p);
        size_t es = v->scale_layout == QV_SCALE_BLOCK ? sizeof(float) : qv_fmt_storage_bytes(v->sfmt);
        if (count >= 8) {
            ck_assert_msg(varied(p.scales, count, es), "case %lld (%s, %s): one repeated weight scale",
                          (long long)j, v->name, qv_probe_name(c.probe));
            checked++;
        }
        if (p.scales2 && p.n >= 8)
            ck_assert_msg(varied(p.scales2, p.n, sizeof(float)), "case %lld: one repeated channel scale", (long long)j);
        int64_t na = qv_problem_ascale_count(&p);
        if (na >= 8 && c.probe != QV_PROBE_ONEHOT)
            ck_assert_msg(varied(p.a_scale, na, sizeof(float)), "case %lld (%s): one repeated token scale",
                          (long long)j, v->name);
        qv_problem_destroy(&p);
    }
    ck_assert_int_gt(checked, 30);
}
END_TEST

START_TEST(suite_covers_edges_and_probes)
{
    qv_backend b = cpu_backend();
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        int nc = qv_suite_count(v, QV_CPU_CAP_CHECK), seen_m[258] = {0}, probes[QV_PROBE_COUNT] = {0};
        for (int j = 0; j < nc; j++) {
            qv_case c;
            qv_suite_case(v, QV_CPU_CAP_CHECK, SEED, j, &c);
            ck_assert_int_eq(qv_variant_check_shape(v, c.m, c.n, c.k), QV_OK);
            ck_assert(c.m * c.n * c.k <= QV_CPU_CAP_CHECK);
            if (c.m < 258) seen_m[c.m] = 1;
            probes[c.probe]++;
        }
        static const int edges[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257};
        for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
            ck_assert_msg(seen_m[edges[e]], "%s: M=%d missing from the suite", v->name, edges[e]);
        ck_assert(probes[QV_PROBE_EXACT] > 0 && probes[QV_PROBE_ONEHOT] > 0 && probes[QV_PROBE_RANDOM] > 0);
    }
    (void)b;
}
END_TEST

/* ---- a kernel under test on host pointers, with injectable bugs ---- */

enum { BUG_NONE = 0, BUG_SWAP_COLUMNS, BUG_DROP_K_TAIL };
static int bug;

/* w8a8-i8-tok-ch on plain-nk packed buffers: a (m, k) int8, b (n, k) int8,
 * scales (n) f32, a_scale (m) f32, c (m, n) fp16 bits. */
static int tok_ch_kernel(const char *variant, const qv_gemm_args *x)
{
    if (strcmp(variant, "w8a8-i8-tok-ch")) return 1;
    const int8_t *a = x->a, *b = x->b;
    const float *sw = x->scales, *sa = x->a_scale;
    uint16_t *c = x->c;
    /* The K-tail bug: a 32-deep main loop that never runs the remainder. */
    int kend = bug == BUG_DROP_K_TAIL ? x->k / 32 * 32 : x->k;
    for (int i = 0; i < x->m; i++)
        for (int j = 0; j < x->n; j++) {
            int64_t acc = 0;
            for (int kk = 0; kk < kend; kk++) acc += (int32_t)a[(int64_t)i * x->k + kk] * b[(int64_t)j * x->k + kk];
            float y = (float)(int32_t)acc;
            y = y * sw[j];
            y = y * sa[i];
            int col = j;
            if (bug == BUG_SWAP_COLUMNS && x->n >= 2 && j < 2) col = 1 - j; /* columns 0 and 1 trade places */
            c[(int64_t)i * x->n + col] = qv_f32_to_f16(y);
        }
    return 0;
}

static const char *const tok_ch_only[] = {"w8a8-i8-tok-ch"};

static qv_backend host_backend(void)
{
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_HOST_FN);
    snprintf(b.name, sizeof b.name, "test-host");
    b.launch = tok_ch_kernel;
    b.only = tok_ch_only;
    b.n_only = 1;
    return b;
}

/* Runs fuzz cases 0..n-1 of the host backend; returns the failures and the
 * first failing case in *first (index -1 if none). */
static int fuzz_host(const qv_backend *b, int n, qv_case *first)
{
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, NULL, b), QV_OK);
    ck_assert_int_eq(gen.n_variants, 1);
    int fails = 0;
    first->index = -1;
    for (int j = 0; j < n; j++) {
        qv_case c;
        qv_gen_case(&gen, SEED, j, &c);
        qv_problem p;
        ck_assert_int_eq(qv_case_build(&c, &p), QV_OK);
        qv_outcome o;
        ck_assert_int_eq(qv_case_run(b, &p, ref_probe_is_unique(c.probe), &o), QV_OK);
        if (o.res.grade == QV_FAIL) {
            if (!fails) *first = c;
            fails++;
            if (bug == BUG_NONE)
                ck_abort_msg("correct kernel failed case %d (%lld x %lld x %lld): %s", j, (long long)c.m,
                             (long long)c.n, (long long)c.k, o.res.reason);
        }
        qv_outcome_clear(&o);
        qv_problem_destroy(&p);
    }
    return fails;
}

START_TEST(host_path_passes_a_correct_kernel)
{
    bug = BUG_NONE;
    qv_backend b = host_backend();
    qv_case first;
    ck_assert_int_eq(fuzz_host(&b, 40, &first), 0);
    /* And the fixed suite of the variant. */
    const qv_variant *v = qv_variant_find("w8a8-i8-tok-ch");
    for (int j = 0; j < qv_suite_count(v, b.cap_mnk); j++) {
        qv_case c;
        qv_suite_case(v, b.cap_mnk, SEED, j, &c);
        qv_problem p;
        ck_assert_int_eq(qv_case_build(&c, &p), QV_OK);
        qv_outcome o;
        ck_assert_int_eq(qv_case_run(&b, &p, ref_probe_is_unique(c.probe), &o), QV_OK);
        ck_assert_msg(o.res.grade != QV_FAIL, "suite case %d: %s", j, o.res.reason);
        qv_outcome_clear(&o);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* A bug is caught within 40 cases, and the shrinker returns a case no larger
 * in any dimension, smaller overall, that still FAILs. */
static void caught_and_shrunk(int which, int64_t *sm, int64_t *sn, int64_t *sk)
{
    bug = which;
    qv_backend b = host_backend();
    qv_case first;
    int fails = fuzz_host(&b, 40, &first);
    ck_assert_msg(fails > 0, "bug %d survived 40 cases", which);
    qv_problem p, small;
    ck_assert_int_eq(qv_case_build(&first, &p), QV_OK);
    qv_shrunk sh;
    int unique = ref_probe_is_unique(first.probe);
    ck_assert_int_eq(qv_shrink(&b, &p, unique, 200, &small, &sh), QV_OK);
    ck_assert(sh.m <= p.m && sh.n <= p.n && sh.k <= p.k);
    ck_assert(small.m == sh.m && small.n == sh.n && small.k == sh.k);
    if (p.m * p.n * p.k > 16 * 8 * 16)
        ck_assert_msg(sh.m * sh.n * sh.k < p.m * p.n * p.k, "no reduction from %lld x %lld x %lld", (long long)p.m,
                      (long long)p.n, (long long)p.k);
    qv_outcome o;
    ck_assert_int_eq(qv_case_run(&b, &small, unique, &o), QV_OK);
    ck_assert_int_eq(o.res.grade, QV_FAIL);
    qv_outcome_clear(&o);
    /* The dump holds the inputs as .npy and the replay command. */
    char dir[256], path[600];
    temp_dir(dir, sizeof dir);
    ck_assert_int_eq(qv_case_dump(&b, &small, unique, dir, "qvet replay --seed 1 --case 2"), QV_OK);
    const char *files[] = {"A", "a_scale", "q", "scales", "out", "y"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, files[i]);
        ck_assert_msg(access(path, R_OK) == 0, "%s missing", path);
    }
    snprintf(path, sizeof path, "%s/replay.txt", dir);
    ck_assert_int_eq(access(path, R_OK), 0);
    remove_tree(dir);
    *sm = sh.m;
    *sn = sh.n;
    *sk = sh.k;
    qv_problem_destroy(&small);
    qv_problem_destroy(&p);
}

START_TEST(swapped_columns_caught_and_shrunk)
{
    int64_t m, n, k;
    caught_and_shrunk(BUG_SWAP_COLUMNS, &m, &n, &k);
    /* Columns 0 and 1 only: one row, one N tile and one K tile show it. */
    ck_assert_int_eq(m, 1);
    ck_assert_int_eq(n, 8);
}
END_TEST

START_TEST(dropped_k_tail_caught_and_shrunk)
{
    int64_t m, n, k;
    caught_and_shrunk(BUG_DROP_K_TAIL, &m, &n, &k);
    ck_assert_msg(k % 32 != 0, "shrunk K=%lld cannot show a dropped tail", (long long)k);
    ck_assert_int_eq(m, 1);
}
END_TEST

/* ---- the commands ---- */

START_TEST(check_last_line_and_exit)
{
    char dir[256], out[600], line[256];
    temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/check.jsonl", dir);
    run_result r = run_qvet((const char *[]){"check", "--cpu", "--variant", "w8a8-i8-tensor", "--out", out, NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s", r.rc, r.err);
    const qv_variant *v = qv_variant_find("w8a8-i8-tensor");
    char want[128];
    snprintf(want, sizeof want, "check: %d cases, 0 failed", qv_suite_count(v, QV_CPU_CAP_CHECK));
    ck_assert_str_eq(last_line(r.out, line, sizeof line), want);
    ck_assert_ptr_nonnull(strstr(r.out, "worst err/E"));
    int n;
    char **lines = read_lines(out, &n);
    ck_assert_int_eq(n, 1 + qv_suite_count(v, QV_CPU_CAP_CHECK));
    qv_json *run;
    ck_assert_int_eq(qv_json_parse(lines[0], strlen(lines[0]), &run), QV_OK);
    ck_assert_str_eq(qv_json_str(qv_json_get(run, "kind")), "run");
    ck_assert_str_eq(qv_json_str(qv_json_get(run, "backend")), "cpu");
    ck_assert_ptr_nonnull(qv_json_str(qv_json_get(run, "commit")));
    ck_assert_ptr_nonnull(qv_json_str(qv_json_get(run, "date")));
    qv_json_free(run);
    /* Every case line has the schema's members. */
    static const char *keys[] = {"seed", "case", "variant", "backend", "m", "n", "k", "g", "shape_class", "probe",
                                 "regime", "verdict", "reason", "max_err_over_bound", "p99_err_over_bound",
                                 "max_abs_err", "max_ulp", "p99_ulp", "nmse", "norm_rel", "bias_z", "worst", "n_fail",
                                 "n_nan", "n_inf", "n_unwritten", "ref_path", "ref_why", "alpha_g_max", "time_ms",
                                 "replay"};
    for (int i = 1; i < n; i++) {
        qv_json *j;
        ck_assert_msg(qv_json_parse(lines[i], strlen(lines[i]), &j) == QV_OK, "line %d: %s", i + 1, qv_errmsg());
        ck_assert_str_eq(qv_json_str(qv_json_get(j, "kind")), "case");
        for (size_t q = 0; q < sizeof keys / sizeof keys[0]; q++)
            ck_assert_msg(qv_json_get(j, keys[q]) != NULL, "line %d lacks %s", i + 1, keys[q]);
        ck_assert_str_ne(qv_json_str(qv_json_get(j, "verdict")), "FAIL");
        /* The histograms count the case's finite elements, each once. */
        int64_t ne, sum = 0;
        ck_assert_int_eq(qv_json_int64(qv_json_get(j, "n_elements"), &ne), QV_OK);
        const qv_json *h = qv_json_get(j, "hist_err_over_bound");
        ck_assert_int_eq(qv_json_len(h), 21);
        for (int b = 0; b < 21; b++) sum += (int64_t)qv_json_num(qv_json_at(h, b), -1);
        ck_assert(sum > 0 && sum <= ne);
        ck_assert_int_eq(qv_json_len(qv_json_get(j, "hist_ulp")), 7);
        qv_json_free(j);
    }
    free_lines(lines, n);
    run_free(&r);
    remove_tree(dir);

    r = run_qvet((const char *[]){"check", "--bogus", NULL});
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--bogus"));
    run_free(&r);
    r = run_qvet((const char *[]){"check", "--cpu", "--variant", "no-such-*", NULL});
    ck_assert_int_eq(r.rc, 2);
    run_free(&r);
    /* --gpu without a device: a clear message and exit 3 (with one, a real run). */
    r = run_qvet((const char *[]){"check", "--gpu", "--variant", "no-such-*", NULL});
    if (strstr(r.err, "no CUDA device")) ck_assert_int_eq(r.rc, 3);
    else ck_assert_int_eq(r.rc, 2);
    run_free(&r);
}
END_TEST

START_TEST(fuzz_shards_and_replay)
{
    char dir[256], all[600], s0[600], s1[600], line[256];
    temp_dir(dir, sizeof dir);
    snprintf(all, sizeof all, "%s/all.jsonl", dir);
    snprintf(s0, sizeof s0, "%s/s0.jsonl", dir);
    snprintf(s1, sizeof s1, "%s/s1.jsonl", dir);
    const char *glob = "w8a8-*";
    run_result r = run_qvet((const char *[]){"fuzz", "--cpu", "--variant", glob, "--cases", "12", "--seed", "77",
                                             "--out", all, NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_str_eq(last_line(r.out, line, sizeof line), "fuzz: 12 cases, 0 failed");
    ck_assert_ptr_nonnull(strstr(r.out, "seed 77"));
    run_free(&r);
    r = run_qvet((const char *[]){"fuzz", "--cpu", "--variant", glob, "--cases", "6", "--seed", "77", "--shard", "0/2",
                                  "--out", s0, NULL});
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(last_line(r.out, line, sizeof line), "fuzz: 6 cases, 0 failed");
    run_free(&r);
    r = run_qvet((const char *[]){"fuzz", "--cpu", "--variant", glob, "--cases", "6", "--seed", "77", "--shard", "1/2",
                                  "--out", s1, NULL});
    ck_assert_int_eq(r.rc, 0);
    run_free(&r);

    int na, n0, n1;
    char **la = read_lines(all, &na), **l0 = read_lines(s0, &n0), **l1 = read_lines(s1, &n1);
    ck_assert_int_eq(na, 13);
    ck_assert_int_eq(n0, 7);
    ck_assert_int_eq(n1, 7);
    static char x[1 << 14], y[1 << 14];
    /* Shard I holds exactly the cases J = I mod 2, identical to the unsharded run's. */
    int seen[12] = {0};
    for (int s = 0; s < 2; s++) {
        char **ls = s ? l1 : l0;
        for (int i = 1; i < 7; i++) {
            qv_json *j;
            ck_assert_int_eq(qv_json_parse(ls[i], strlen(ls[i]), &j), QV_OK);
            int64_t idx;
            ck_assert_int_eq(qv_json_int64(qv_json_get(j, "case"), &idx), QV_OK);
            qv_json_free(j);
            ck_assert(idx >= 0 && idx < 12 && idx % 2 == s && !seen[idx]);
            seen[idx] = 1;
            strip_time(ls[i], x, sizeof x);
            strip_time(la[1 + idx], y, sizeof y);
            ck_assert_str_eq(x, y);
        }
    }

    /* Replay of cases 3 and 10 gives the same line; its dumped output holds the
     * same bytes as a fresh library run of that case. */
    qv_backend b = cpu_backend();
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, glob, &b), QV_OK);
    const int picks[] = {3, 10};
    for (size_t t = 0; t < 2; t++) {
        char idx[16], dump[600], outnpy[700];
        snprintf(idx, sizeof idx, "%d", picks[t]);
        snprintf(dump, sizeof dump, "%s/replay%d", dir, picks[t]);
        r = run_qvet((const char *[]){"replay", "--seed", "77", "--case", idx, "--variant", glob, "--cpu", "--dump",
                                      dump, NULL});
        ck_assert_msg(r.rc == 0, "rc %d: %s", r.rc, r.err);
        strip_time(last_line(r.out, x, sizeof x), y, sizeof y);
        strip_time(la[1 + picks[t]], x, sizeof x);
        ck_assert_str_eq(y, x);
        run_free(&r);

        qv_case c;
        qv_gen_case(&gen, 77, picks[t], &c);
        qv_problem p;
        ck_assert_int_eq(qv_case_build(&c, &p), QV_OK);
        qv_outcome o;
        ck_assert_int_eq(qv_case_run(&b, &p, ref_probe_is_unique(c.probe), &o), QV_OK);
        snprintf(outnpy, sizeof outnpy, "%s/out.npy", dump);
        qv_array arr;
        ck_assert_int_eq(qv_npy_load(outnpy, &arr), QV_OK);
        ck_assert_int_eq((int64_t)arr.nbytes, qv_problem_out_bytes(&p));
        ck_assert(memcmp(arr.data, o.out, arr.nbytes) == 0);
        qv_array_destroy(&arr);
        qv_outcome_clear(&o);
        qv_problem_destroy(&p);
    }
    free_lines(la, na);
    free_lines(l0, n0);
    free_lines(l1, n1);
    remove_tree(dir);

    r = run_qvet((const char *[]){"replay", "--case", "3", NULL});
    ck_assert_int_eq(r.rc, 2);
    run_free(&r);
    r = run_qvet((const char *[]){"fuzz", "--cases", "3", "--minutes", "1", NULL});
    ck_assert_int_eq(r.rc, 2);
    run_free(&r);
    r = run_qvet((const char *[]){"fuzz", "--shard", "2/2", NULL});
    ck_assert_int_eq(r.rc, 2);
    run_free(&r);
}
END_TEST

static Suite *campaign_suite(void)
{
    Suite *s = suite_create("campaign");
    TCase *g = tcase_create("generator");
    tcase_add_test(g, generator_is_pure);
    tcase_add_test(g, shape_classes_near_50_30_20);
    tcase_add_test(g, scales_never_one_repeated_value);
    tcase_add_test(g, suite_covers_edges_and_probes);
    tcase_set_timeout(g, 60);
    suite_add_tcase(s, g);
    TCase *k = tcase_create("kernels");
    tcase_add_test(k, host_path_passes_a_correct_kernel);
    tcase_add_test(k, swapped_columns_caught_and_shrunk);
    tcase_add_test(k, dropped_k_tail_caught_and_shrunk);
    tcase_set_timeout(k, 60);
    suite_add_tcase(s, k);
    TCase *c = tcase_create("commands");
    tcase_add_test(c, check_last_line_and_exit);
    tcase_add_test(c, fuzz_shards_and_replay);
    tcase_set_timeout(c, 60);
    suite_add_tcase(s, c);
    return s;
}

int main(void)
{
    find_qvet();
    printf("t_campaign: seed %llu\n", (unsigned long long)SEED);
    return suite_run(campaign_suite());
}
