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

#include "../fuzz/ckpt_route.h"
#include "internal/campaign.h"
#include "internal/cli.h"
#include "internal/json.h"
#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/spec.h"

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
     * applies to no row, such as the bias witness, is a spec's: below). */
    for (int w = QV_PROBE_WITNESS_FP8_PROMOTE; w < QV_PROBE_COUNT; w++)
        ck_assert_msg(probes[w] > 0 || applies[w] == 0, "witness %s applies to %d cases, never drawn",
                      qv_probe_name((qv_probe_kind)w), applies[w]);
    ck_assert_int_gt(applies[QV_PROBE_WITNESS_FP8_PROMOTE], 0);
}
END_TEST

/* A generator over a list of specs draws only those, in proportion, and every
 * witness that applies to them, the bias witness of a spec with a bias
 * included; every shape it draws is legal (K a multiple of g and of the zero
 * points' group size, block scales on any K). */
START_TEST(spec_generator_draws_legal_cases)
{
    static const char *const specs[] = {"w=u4,ws=f16/g64,wz=int/g32", "w=bf16,a=bf16,bias=f32",
                                        "w=e4m3,ws=f32/b128x64,a=e4m3,as=f32/tok,acc=f8p128,out=bf16"};
    const qv_variant *vs[3];
    for (int i = 0; i < 3; i++) ck_assert_msg(qv_spec_parse(specs[i], &vs[i]) == QV_OK, "%s", qv_errmsg());
    qv_backend b = cpu_backend();
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init_list(&gen, vs, 3, &b), QV_OK);
    ck_assert_int_eq(gen.n_variants, 3);
    ck_assert(gen.listed);
    const int n = 3000;
    int per[3] = {0}, probes[QV_PROBE_COUNT] = {0}, block_tail = 0;
    for (int j = 0; j < n; j++) {
        qv_case c;
        qv_gen_case(&gen, SEED, j, &c);
        int i = c.v == vs[0] ? 0 : c.v == vs[1] ? 1 : c.v == vs[2] ? 2 : -1;
        ck_assert_msg(i >= 0, "case %d drew %s", j, c.v->name);
        per[i]++;
        probes[c.probe]++;
        ck_assert_msg(qv_variant_check_shape(c.v, c.m, c.n, c.k) == QV_OK, "case %d: %s", j, qv_errmsg());
        if (i == 0) ck_assert_msg(c.k % 64 == 0, "case %d: K=%lld", j, (long long)c.k);
        if (i == 2) block_tail += c.k % 128 != 0;
    }
    for (int i = 0; i < 3; i++) ck_assert_msg(per[i] > n / 5, "%s drawn %d times of %d", specs[i], per[i], n);
    ck_assert_int_gt(probes[QV_PROBE_WITNESS_BIAS], 0);
    ck_assert_int_gt(probes[QV_PROBE_WITNESS_FP8_PROMOTE], 0);
    ck_assert_int_gt(block_tail, 0); /* partial 128-K blocks are drawn */
    /* A backend that cannot run a listed variant is refused, naming it. */
    qv_backend gpu;
    qv_backend_init(&gpu, QV_BACKEND_GPU);
    ck_assert_int_eq(qv_gen_init_list(&gen, vs, 3, &gpu), QV_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), specs[0]));
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
        size_t es = qv_fmt_storage_bytes(v->sfmt);
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

/* The commit the provenance line names: the one qvet was built from (the
 * Makefile's QV_GIT_COMMIT, "+changes" when tracked files differed from it,
 * given to this suite too), also when qvet runs inside another git
 * repository, a user's project, whose HEAD it once recorded instead. */
START_TEST(run_line_names_the_build_commit)
{
#ifdef QV_GIT_COMMIT
    const char *built = QV_GIT_COMMIT;
#else
    const char *built = "unknown";
#endif
    const int sha = strspn(built, "0123456789abcdef") == 40 && (!built[40] || !strcmp(built + 40, "+changes"));
    const char *want = sha ? built : "unknown";
    ck_assert_str_eq(qv_build_commit(), want);

    char dir[256], repo[300], out[600], cmd[1024], cwd[4096], head[64] = "";
    temp_dir(dir, sizeof dir);
    snprintf(repo, sizeof repo, "%s/project", dir);
    snprintf(out, sizeof out, "%s/fuzz.jsonl", dir);
    /* Without git nothing could read a repository's HEAD: the run alone. */
    snprintf(cmd, sizeof cmd,
             "git init -q '%s' 2>/dev/null && git -C '%s' -c user.name=t -c user.email=t@example.org "
             "commit -q --allow-empty -m t 2>/dev/null",
             repo, repo);
    const int has_git = system(cmd) == 0;
    if (has_git) {
        snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse HEAD", repo);
        FILE *p = popen(cmd, "r");
        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(fgets(head, sizeof head, p));
        pclose(p);
        head[strcspn(head, "\n")] = '\0';
        ck_assert_int_eq(strlen(head), 40);
    }
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(has_git ? repo : dir), 0);
    run_result r = run_qvet(
        (const char *[]){"fuzz", "--cpu", "--cases", "1", "--seed", "5", "--variant", "w8a8-i8-tensor", "--out", out, NULL});
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_msg(r.rc == 0, "rc %d: %s", r.rc, r.err);
    int n;
    char **lines = read_lines(out, &n);
    ck_assert_int_ge(n, 1);
    qv_json *run;
    ck_assert_int_eq(qv_json_parse(lines[0], strlen(lines[0]), &run), QV_OK);
    ck_assert_str_eq(qv_json_str(qv_json_get(run, "commit")), want);
    if (has_git) ck_assert_str_ne(qv_json_str(qv_json_get(run, "commit")), head);
    qv_json_free(run);
    free_lines(lines, n);
    run_free(&r);
    remove_tree(dir);

    /* The driver's version: "" without a device; the kernel module's where
     * /proc has it, else the CUDA driver API version as major.minor. */
    char drv[64] = "x";
    qv_driver_version(0, drv, sizeof drv);
    ck_assert_str_eq(drv, "");
    qv_driver_version(12040, drv, sizeof drv);
    if (access("/proc/driver/nvidia/version", R_OK) != 0) ck_assert_str_eq(drv, "12.4");
    else ck_assert_msg(drv[0] >= '0' && drv[0] <= '9' && strchr(drv, '.'), "driver version '%s'", drv);
}
END_TEST

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

/* ---- specs: every value of the grammar on the CPU model ---- */

/* A spec's uint4 codes never take the checkpoint route (its kernel reads the
 * logical arrays); the registry row with the same arithmetic does. */
START_TEST(spec_not_routed_through_checkpoints)
{
    const qv_variant *spec, *row = qv_variant_find("marlin-w4a16-g128-f16");
    ck_assert_int_eq(qv_spec_parse("w=u4b8,ws=f16/g128", &spec), QV_OK);
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, row, 4, 64, 256), QV_OK);
    ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 5), QV_OK);
    ck_assert_int_eq(qv_ckpt_choose(&p), QV_CKPT_GPTQ);
    p.v = spec; /* the same buffers: the spec's logical arrays have the row's shapes */
    ck_assert_int_eq(qv_ckpt_choose(&p), QV_CKPT_NONE);
    p.v = row;
    qv_problem_destroy(&p);
}
END_TEST

/* Specs that together use every value of every key of the spec grammar v1
 * (docs/design.md §2): spec_list_covers_the_grammar checks that they do. Each runs
 * as its own `qvet fuzz --cpu --spec` campaign and must not FAIL. */
static const char *const grammar_specs[] = {
    "w=u4b8,ws=f16/g128,dq=rn,a=f16,acc=f32,red=f32,out=f16",
    "w=u4,ws=bf16/g64,wz=int/g64,a=bf16",
    "w=i4,ws=f32/c,wmul=16,a=i8,as=f32/tok,acc=i32,out=f16",
    "w=u8b128,ws=f16/c,dq=exact",
    "w=u8,ws=f16/g32,wz=float/g32,dq=rn2",
    "w=i8,ws=f32/t,a=i8,as=f32/t,az=i32/t,acc=i32,out=f32",
    "w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16",
    "w=e5m2,ws=f32/c,a=e4m3,as=f32/tok,acc=f8fast,out=f32",
    "w=e2m1,ws=e8m0/g32,a=bf16",
    "w=e2m1,ws=ue4m3/g16,ws2=f32/t",
    "w=u4b8,ws=f16/g128,ws2=f32/c,dq=i8,a=i8,as=f32/tok,acc=i32,out=f16",
    "w=u4b8,ws=f16/g128,act=gidx",
    "w=bf16,a=bf16,acc=fma32,red=none,bias=bf16",
    "w=f16,bias=f16",
    "w=i8,ws=f32/c,a=i8,as=f32/tok,az=i32/tok,acc=i32,bias=f32,ep=as:ws:bias,out=f16",
    "w=i8,a=i8,acc=i32,out=i32",
    "w=e2m1,ws=ue4m3/g16,ws2=f32/t,dq=f32,a=bf16",
};
#define N_GRAMMAR_SPECS ((int)(sizeof grammar_specs / sizeof grammar_specs[0]))
/* Cases per spec: enough to reach edge, random and real shapes, probes and
 * regimes, few enough that the whole list takes seconds. */
#define SPEC_CASES "8"

START_TEST(spec_list_covers_the_grammar)
{
    /* Every value of every key, as the parsed fields hold it. */
    int w[QV_FMT_COUNT] = {0}, sf[QV_FMT_COUNT] = {0}, a[QV_FMT_COUNT] = {0}, bias[QV_FMT_COUNT] = {0},
        out[QV_FMT_COUNT] = {0};
    int gran[QV_SCALE_BLOCK + 1] = {0}, s2[QV_SCALE_BLOCK + 1] = {0}, zp[3] = {0}, dq[QV_DQ_F32 + 1] = {0};
    int as[QV_ASCALE_TOKEN_BLOCK + 1] = {0}, az[QV_AZP_TOKEN + 1] = {0}, red[2] = {0};
    int wmul = 0, act = 0, ep = 0, f8p = 0, f8fast = 0, acc[QV_ACC_FMA_F32 + 1] = {0};
    for (int i = 0; i < N_GRAMMAR_SPECS; i++) {
        const qv_variant *v;
        ck_assert_msg(qv_spec_parse(grammar_specs[i], &v) == QV_OK, "%s: %s", grammar_specs[i], qv_errmsg());
        /* u4 and u8 are written for integer zero points (their code has no bias). */
        w[v->wfmt]++;
        sf[v->sfmt]++;
        gran[v->scale_layout]++;
        s2[v->s2_layout]++;
        zp[v->zero_point]++;
        dq[v->arith.dequant]++;
        a[v->afmt]++;
        as[v->act_scale]++;
        az[v->azp]++;
        acc[v->arith.accum]++;
        f8p += v->arith.accum == QV_ACC_TC_FP8 && v->arith.promote_nc == 128;
        f8fast += v->arith.accum == QV_ACC_TC_FP8 && v->arith.promote_nc == 0;
        red[v->arith.reduce]++;
        bias[v->bias_fmt]++;
        out[v->ofmt]++;
        wmul += v->arith.w_mul > 1;
        act += v->act_order;
        qv_ep_step dflt[QV_EP_MAX];
        qv_spec_default_epilogue(v, dflt);
        for (int e = 0; e < QV_EP_MAX; e++) ep += v->arith.epilogue[e] != dflt[e];
    }
    static const qv_fmt wf[] = {QV_FMT_U4, QV_FMT_UINT4, QV_FMT_I4, QV_FMT_U8, QV_FMT_UINT8, QV_FMT_I8,
                                QV_FMT_E4M3, QV_FMT_E5M2, QV_FMT_E2M1, QV_FMT_F16, QV_FMT_BF16};
    for (size_t i = 0; i < sizeof wf / sizeof wf[0]; i++) ck_assert_msg(w[wf[i]], "w=%s unused", qv_fmt_get(wf[i])->name);
    static const qv_fmt sfs[] = {QV_FMT_F16, QV_FMT_BF16, QV_FMT_F32, QV_FMT_E8M0, QV_FMT_UE4M3};
    for (size_t i = 0; i < sizeof sfs / sizeof sfs[0]; i++) ck_assert_msg(sf[sfs[i]], "ws=%s unused", qv_fmt_get(sfs[i])->name);
    ck_assert(gran[QV_SCALE_TENSOR] && gran[QV_SCALE_CHANNEL] && gran[QV_SCALE_GROUP] && gran[QV_SCALE_BLOCK]);
    ck_assert(s2[QV_SCALE_TENSOR] && s2[QV_SCALE_CHANNEL]);
    ck_assert(zp[QV_ZP_INT] && zp[QV_ZP_FLOAT]);
    ck_assert(wmul && act && ep);
    /* dq=exact with nothing to apply reads as NONE: an explicit exact is counted apart. */
    ck_assert(dq[QV_DQ_EXACT] && dq[QV_DQ_MUL_RN] && dq[QV_DQ_MUL_RN2] && dq[QV_DQ_INT8_RNE] && dq[QV_DQ_F32]);
    ck_assert(a[QV_FMT_F16] && a[QV_FMT_BF16] && a[QV_FMT_I8] && a[QV_FMT_E4M3]);
    ck_assert(as[QV_ASCALE_TENSOR] && as[QV_ASCALE_TOKEN] && as[QV_ASCALE_TOKEN_BLOCK]);
    ck_assert(az[QV_AZP_TENSOR] && az[QV_AZP_TOKEN]);
    ck_assert(acc[QV_ACC_TC_F32] && acc[QV_ACC_FMA_F32] && acc[QV_ACC_INT32] && f8p && f8fast);
    ck_assert(red[QV_RED_F32] && red[QV_RED_NONE]);
    ck_assert(bias[QV_FMT_F16] && bias[QV_FMT_BF16] && bias[QV_FMT_F32]);
    ck_assert(out[QV_FMT_F16] && out[QV_FMT_BF16] && out[QV_FMT_F32] && out[QV_FMT_I32]);
}
END_TEST

/* `qvet fuzz --cpu --spec S`: exit 0, no FAIL, and every case line names the
 * canonical spec, family "spec" and a replay command quoting it. */
START_TEST(spec_campaign_passes)
{
    const char *spec = grammar_specs[_i];
    const qv_variant *v;
    ck_assert_msg(qv_spec_parse(spec, &v) == QV_OK, "%s", qv_errmsg());
    char dir[256], out[600], fails[600], seed[32], line[512];
    temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/spec.jsonl", dir);
    snprintf(fails, sizeof fails, "%s/failures", dir);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)SEED);
    run_result r = run_qvet((const char *[]){"fuzz", "--cpu", "--spec", spec, "--cases", SPEC_CASES, "--seed", seed,
                                             "--out", out, "--fail-dir", fails, "--quiet", NULL});
    ck_assert_msg(r.rc == 0, "%s: rc %d\n%s%s", spec, r.rc, r.out, r.err);
    ck_assert_str_eq(last_line(r.out, line, sizeof line), "fuzz: " SPEC_CASES " cases, 0 failed");
    run_free(&r);
    int n;
    char **lines = read_lines(out, &n);
    ck_assert_int_eq(n, 1 + atoi(SPEC_CASES));
    char quoted[QV_SPEC_MAX + 16];
    snprintf(quoted, sizeof quoted, "--spec '%s'", v->name);
    for (int i = 1; i < n; i++) {
        qv_json *j;
        ck_assert_int_eq(qv_json_parse(lines[i], strlen(lines[i]), &j), QV_OK);
        ck_assert_str_eq(qv_json_str(qv_json_get(j, "variant")), v->name);
        ck_assert_str_eq(qv_json_str(qv_json_get(j, "family")), "spec");
        ck_assert_msg(strstr(qv_json_str(qv_json_get(j, "replay")), quoted) != NULL, "%s",
                      qv_json_str(qv_json_get(j, "replay")));
        ck_assert_str_ne(qv_json_str(qv_json_get(j, "verdict")), "FAIL");
        qv_json_free(j);
    }
    free_lines(lines, n);
    remove_tree(dir);
}
END_TEST

/* Runs a case line's replay command (its leading "qvet" replaced by this
 * build's binary) through the shell; returns its last output line in buf. */
static int run_replay(const char *replay, char *buf, size_t len)
{
    ck_assert(!strncmp(replay, "qvet ", 5));
    char cmd[QV_REPLAY_MAX + 4200];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", qvet_bin, replay + 5);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    static char all[1 << 16];
    size_t got = fread(all, 1, sizeof all - 1, f);
    all[got] = '\0';
    int st = pclose(f);
    last_line(all, buf, len);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Two specs in one campaign: cases draw among both; the replay command of a
 * case names both in order and reproduces its line bit for bit, and the
 * `qvet check --spec` suite of one of them runs its fixed cases. */
START_TEST(spec_replay_bit_for_bit)
{
    const char *s0 = grammar_specs[1], *s1 = grammar_specs[14];
    char dir[256], out[600], line[256];
    temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/two.jsonl", dir);
    run_result r = run_qvet((const char *[]){"fuzz", "--cpu", "--spec", s0, "--spec", s1, "--cases", "6", "--seed", "41",
                                             "--out", out, "--quiet", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_str_eq(last_line(r.out, line, sizeof line), "fuzz: 6 cases, 0 failed");
    run_free(&r);
    int n;
    char **lines = read_lines(out, &n);
    ck_assert_int_eq(n, 7);
    qv_json *run;
    ck_assert_int_eq(qv_json_parse(lines[0], strlen(lines[0]), &run), QV_OK);
    ck_assert_int_eq(qv_json_len(qv_json_get(run, "specs")), 2);
    qv_json_free(run);
    static char replay[QV_REPLAY_MAX], want[1 << 15], got[1 << 15], last[1 << 15];
    int seen0 = 0, seen1 = 0;
    for (int i = 1; i < n; i++) {
        qv_json *j;
        ck_assert_int_eq(qv_json_parse(lines[i], strlen(lines[i]), &j), QV_OK);
        const char *var = qv_json_str(qv_json_get(j, "variant"));
        seen0 += !strcmp(var, s0);
        seen1 += strcmp(var, s0) != 0;
        snprintf(replay, sizeof replay, "%s", qv_json_str(qv_json_get(j, "replay")));
        qv_json_free(j);
        char both[2 * QV_SPEC_MAX + 32];
        snprintf(both, sizeof both, "--spec '%s' --spec '%s'", s0, s1);
        ck_assert_msg(strstr(replay, both) != NULL, "%s", replay);
    }
    ck_assert(seen0 > 0 && seen1 > 0);
    /* The last case, replayed through the shell from its own command. */
    ck_assert_int_eq(run_replay(replay, last, sizeof last), 0);
    strip_time(last, got, sizeof got);
    strip_time(lines[n - 1], want, sizeof want);
    ck_assert_str_eq(got, want);
    free_lines(lines, n);

    /* The fixed suite of one spec, and its replay of suite case 3. */
    snprintf(out, sizeof out, "%s/check.jsonl", dir);
    r = run_qvet((const char *[]){"check", "--cpu", "--spec", s1, "--cap", "65536", "--out", out, "--quiet", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    const qv_variant *v1;
    ck_assert_int_eq(qv_spec_parse(s1, &v1), QV_OK);
    char want_last[128];
    snprintf(want_last, sizeof want_last, "check: %d cases, 0 failed", qv_suite_count(v1, 65536));
    ck_assert_str_eq(last_line(r.out, line, sizeof line), want_last);
    run_free(&r);
    lines = read_lines(out, &n);
    ck_assert_int_eq(n, 1 + qv_suite_count(v1, 65536));
    qv_json *j;
    ck_assert_int_eq(qv_json_parse(lines[4], strlen(lines[4]), &j), QV_OK);
    snprintf(replay, sizeof replay, "%s", qv_json_str(qv_json_get(j, "replay")));
    qv_json_free(j);
    ck_assert_msg(strstr(replay, "--check") && strstr(replay, "--case 3"), "%s", replay);
    ck_assert_int_eq(run_replay(replay, last, sizeof last), 0);
    strip_time(last, got, sizeof got);
    strip_time(lines[4], want, sizeof want);
    ck_assert_str_eq(got, want);
    free_lines(lines, n);
    remove_tree(dir);
}
END_TEST

/* The options around --spec: refusals name the cause and exit 2. */
START_TEST(spec_option_errors)
{
    static const struct {
        const char *args[14];
        const char *needle;
    } bad[] = {
        {{"fuzz", "--cpu", "--spec", "w=u4b8,ws=f16/g128", "--variant", "w8a8-*", NULL}, "exclude each other"},
        {{"fuzz", "--cpu", "--spec", "w=u4b8,ws=f16/q128", "--cases", "1", NULL}, "granularity"},
        {{"fuzz", "--cpu", "--spec", "no-such-row", "--cases", "1", NULL}, "unknown variant"},
        {{"check", "--gpu", "--spec", "w=u4b8,ws=f16/g128", NULL}, "--plugin"},
        {{"replay", "--seed", "1", "--case", "0", "--check", "--cpu", "--spec", "w=f16", "--spec", "w=bf16,a=bf16",
          NULL},
         "exactly one"},
        {{"fuzz", "--cpu", "--spec", NULL}, "needs a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_result r = run_qvet(bad[i].args);
        ck_assert_msg(r.rc == 2, "case %zu: rc %d: %s", i, r.rc, r.err);
        ck_assert_msg(strstr(r.err, bad[i].needle) != NULL, "case %zu: '%s' not in: %s", i, bad[i].needle, r.err);
        run_free(&r);
    }
    /* A registry row's name is accepted where a spec is taken. */
    run_result r = run_qvet((const char *[]){"fuzz", "--cpu", "--spec", "w8a8-i8-tensor", "--cases", "2", "--quiet", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s", r.rc, r.err);
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
    tcase_add_test(g, spec_generator_draws_legal_cases);
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
    tcase_add_test(c, run_line_names_the_build_commit);
    tcase_add_test(c, fuzz_shards_and_replay);
    tcase_set_timeout(c, 60);
    suite_add_tcase(s, c);
    TCase *sp = tcase_create("specs");
    tcase_add_test(sp, spec_list_covers_the_grammar);
    tcase_add_test(sp, spec_not_routed_through_checkpoints);
    tcase_add_loop_test(sp, spec_campaign_passes, 0, N_GRAMMAR_SPECS);
    tcase_add_test(sp, spec_replay_bit_for_bit);
    tcase_add_test(sp, spec_option_errors);
    tcase_set_timeout(sp, 60);
    suite_add_tcase(s, sp);
    return s;
}

int main(void)
{
    find_qvet();
    printf("t_campaign: seed %llu\n", (unsigned long long)SEED);
    return suite_run(campaign_suite());
}
