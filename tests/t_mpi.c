/* t_mpi.c: MPI campaigns (src/mpi/qvet_mpi.c), run as a user runs them:
 * `mpirun -np 2 --oversubscribe qvet-mpi fuzz|check --cpu ...` on this one
 * machine. The merged results must hold exactly the case lines of a single
 * `qvet` process run with the same seed (time_ms aside, and the run line,
 * which describes the run), sorted as that process writes them; a rank whose
 * campaign process is killed (QVET_MPI_TEST_KILL_RANK) must be named with its
 * rank and host while the other rank's results are kept; ranks must get
 * GPUs by local rank (QVET_MPI_TEST_DEVICES simulates them); a routed plugin
 * (plugins/example_moe, ../plugins/ next to qvet) runs over ranks too.
 *
 * The binaries are $QVET_BIN and $QVET_MPI_BIN, or ../qvet and ../qvet-mpi
 * next to this test's folder (BUILD/tests/t_mpi). The seed is printed and
 * replayed with QVET_SEED=<seed>. mpirun runs as root here (CI is root), so
 * the test sets OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1. */
#include <check.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal/json.h"
#include "qvet/status.h"

static char g_qvet[1024], g_mpi[1024], g_moe_plugin[1100];
static char g_tmp[256];
static char g_host[256];
static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */

/* Runs a shell command line (stdout to g_tmp/NAME.out, stderr to
 * g_tmp/NAME.err); returns the exit status, -1 when it did not exit. */
static int run(const char *name, const char *line)
{
    char cmd[12288];
    snprintf(cmd, sizeof cmd, "%s >'%s/%s.out' 2>'%s/%s.err'", line, g_tmp, name, g_tmp, name);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Runs qvet-mpi under mpirun with `np` ranks and `args`. Ranks are left
 * unbound, as the single process is: OpenBLAS picks its thread count from the
 * cores it may use, and the reference's alpha*G (a BLAS product) can differ in
 * its last bit between one thread and two on large cases. */
static int run_mpi(const char *name, int np, const char *env, const char *args)
{
    char line[8192];
    snprintf(line, sizeof line, "%s mpirun --oversubscribe --allow-run-as-root --bind-to none -np %d '%s' %s </dev/null",
             env, np, g_mpi, args);
    return run(name, line);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

static char *read_tmp(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    return read_all(path);
}

/* The last non-empty line of text, into buf. */
static void last_line(const char *text, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!text) return;
    const char *end = text + strlen(text);
    while (end > text && end[-1] == '\n') end--;
    const char *start = end;
    while (start > text && start[-1] != '\n') start--;
    snprintf(buf, len, "%.*s", (int)(end - start), start);
}

/* The case lines of a results file, each with its "time_ms" member removed
 * (wall time differs from run to run), in file order. */
typedef struct lines {
    char **v;
    int n;
    char *run;   /* the run line, as written */
} lines;

static void strip_time(char *s)
{
    char *t = strstr(s, ",\"time_ms\":");
    if (!t) return;
    char *end = t + strlen(",\"time_ms\":");
    end += strcspn(end, ",}"); /* a JSON number holds neither */
    memmove(t, end, strlen(end) + 1);
}

static lines case_lines(const char *file)
{
    lines L = {0};
    char *text = read_tmp(file);
    ck_assert_msg(text != NULL, "cannot read %s/%s", g_tmp, file);
    L.v = malloc(sizeof *L.v * (strlen(text) / 16 + 1));
    for (char *save = NULL, *s = strtok_r(text, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
        if (strstr(s, "\"kind\":\"run\"")) {
            ck_assert_msg(L.run == NULL, "%s holds more than one run line", file);
            L.run = strdup(s);
            continue;
        }
        ck_assert_msg(strstr(s, "\"kind\":\"case\"") != NULL || strstr(s, "\"kind\":\"routed\"") != NULL,
                      "%s: not a case line: %.200s", file, s);
        char *c = strdup(s);
        strip_time(c);
        L.v[L.n++] = c;
    }
    free(text);
    return L;
}

static void lines_free(lines *L)
{
    for (int i = 0; i < L->n; i++) free(L->v[i]);
    free(L->v);
    free(L->run);
}

/* Asserts that got holds exactly want's case lines, in want's order. */
static void assert_same_cases(const lines *got, const lines *want, const char *what)
{
    ck_assert_msg(want->n > 0, "%s: the single-process run wrote no case line", what);
    ck_assert_msg(got->n == want->n, "%s: %d merged case lines, %d from one process", what, got->n, want->n);
    for (int i = 0; i < want->n; i++) {
        const char *g = got->v[i], *w = want->v[i];
        size_t at = 0;
        while (g[at] && g[at] == w[at]) at++;
        size_t from = at > 60 ? at - 60 : 0; /* show the first difference with some context */
        ck_assert_msg(!g[at] && !w[at], "%s: case line %d differs at byte %zu:\n  merged: ...%.160s\n  single: ...%.160s",
                      what, i, at, g + from, w + from);
    }
}

static long long count_fail(const lines *L)
{
    long long n = 0;
    for (int i = 0; i < L->n; i++) n += strstr(L->v[i], "\"verdict\":\"FAIL\"") != NULL;
    return n;
}

/* The merged run line's "mpi" object: ranks, and per rank its case count. */
static void check_run_line(const char *run, int ranks, const long long *cases_per_rank, int dead_rank)
{
    ck_assert_msg(run != NULL, "the merged file has no run line");
    qv_json *root;
    ck_assert_msg(qv_json_parse(run, strlen(run), &root) == QV_OK, "run line: %s", qv_errmsg());
    const qv_json *mpi = qv_json_get(root, "mpi");
    int64_t n = 0;
    ck_assert(qv_json_int64(qv_json_get(mpi, "ranks"), &n) == QV_OK);
    ck_assert_int_eq(n, ranks);
    const qv_json *hosts = qv_json_get(mpi, "hosts");
    ck_assert_int_eq(qv_json_len(hosts), 1);
    ck_assert_str_eq(qv_json_str(qv_json_at(hosts, 0)), g_host);
    const qv_json *per = qv_json_get(mpi, "per_rank");
    ck_assert_int_eq(qv_json_len(per), ranks);
    for (int r = 0; r < ranks; r++) {
        const qv_json *p = qv_json_at(per, r);
        int64_t rank = -1, cases = -1;
        ck_assert(qv_json_int64(qv_json_get(p, "rank"), &rank) == QV_OK);
        ck_assert_int_eq(rank, r);
        ck_assert_str_eq(qv_json_str(qv_json_get(p, "host")), g_host);
        ck_assert(qv_json_int64(qv_json_get(p, "cases"), &cases) == QV_OK);
        if (cases_per_rank) ck_assert_int_eq(cases, cases_per_rank[r]);
        ck_assert_int_eq(qv_json_bool(qv_json_get(p, "ok"), -1), r != dead_rank);
    }
    qv_json_free(root);
}

/* The case indices of L, which must rise. */
static void assert_case_order(const lines *L, int64_t first, int64_t step)
{
    for (int i = 0; i < L->n; i++) {
        qv_json *root;
        ck_assert(qv_json_parse(L->v[i], strlen(L->v[i]), &root) == QV_OK);
        int64_t c = -1;
        ck_assert(qv_json_int64(qv_json_get(root, "case"), &c) == QV_OK);
        ck_assert_msg(c == first + step * i, "line %d holds case %" PRId64 ", expected %" PRId64, i, c,
                      first + step * i);
        qv_json_free(root);
    }
}

/* fuzz over 2 ranks: 24 CPU-model cases (12 a rank) equal one process's. */
START_TEST(fuzz_two_ranks_equal_one_process)
{
    char a[4096];
    snprintf(a, sizeof a, "'%s' fuzz --cpu --cases 24 --seed %" PRIu64 " --no-shrink --out '%s/single.jsonl'", g_qvet,
             g_seed, g_tmp);
    int rc1 = run("single", a);
    ck_assert_msg(rc1 == 0 || rc1 == 1, "single fuzz exited %d", rc1);
    snprintf(a, sizeof a, "fuzz --cpu --cases 24 --seed %" PRIu64 " --no-shrink --out '%s/merged.jsonl'", g_seed, g_tmp);
    int rc2 = run_mpi("merged", 2, "", a);
    ck_assert_int_eq(rc2, rc1);
    lines one = case_lines("single.jsonl"), two = case_lines("merged.jsonl");
    assert_same_cases(&two, &one, "fuzz");
    assert_case_order(&two, 0, 1);
    long long per[2] = {12, 12};
    check_run_line(two.run, 2, per, -1);
    char *out = read_tmp("merged.out"), want[128], got[512];
    snprintf(want, sizeof want, "fuzz: 24 cases, %lld failed", count_fail(&one));
    last_line(out, got, sizeof got);
    ck_assert_str_eq(got, want);
    free(out);
    lines_free(&one);
    lines_free(&two);
}
END_TEST

/* A user shard composes with the ranks: --shard 1/3 over 3 ranks (more ranks
 * than cores: --oversubscribe) runs the same cases 1, 4, 7, ... as one process. */
START_TEST(fuzz_user_shard_composes)
{
    char a[4096];
    snprintf(a, sizeof a, "'%s' fuzz --cpu --cases 7 --shard 1/3 --seed %" PRIu64 " --no-shrink --out '%s/s1.jsonl'",
             g_qvet, g_seed + 1, g_tmp);
    int rc1 = run("s1", a);
    ck_assert_msg(rc1 == 0 || rc1 == 1, "single fuzz exited %d", rc1);
    snprintf(a, sizeof a, "fuzz --cpu --cases 7 --shard 1/3 --seed %" PRIu64 " --no-shrink --out '%s/m1.jsonl'",
             g_seed + 1, g_tmp);
    ck_assert_int_eq(run_mpi("m1", 3, "", a), rc1);
    lines one = case_lines("s1.jsonl"), three = case_lines("m1.jsonl");
    assert_same_cases(&three, &one, "fuzz --shard 1/3");
    assert_case_order(&three, 1, 3);
    long long per[3] = {3, 2, 2}; /* 7 cases dealt over 3 ranks */
    check_run_line(three.run, 3, per, -1);
    ck_assert_msg(strstr(three.run, "\"shard\":\"1/3\"") != NULL, "run line: %s", three.run);
    lines_free(&one);
    lines_free(&three);
}
END_TEST

/* check --spec over 2 ranks: one spec a child (before, every child got the
 * user's --spec beside its own --variant and refused both), merged in the
 * user's order: the single process's case lines, and its run line's specs. */
START_TEST(check_specs_over_ranks)
{
    const char *specs = "--spec 'w=u4b8,ws=f16/g128' --spec 'w=u8b128,ws=bf16/c,a=bf16'";
    char a[4096];
    snprintf(a, sizeof a, "'%s' check --cpu --cap 65536 %s --no-shrink --out '%s/s1.jsonl'", g_qvet, specs, g_tmp);
    int rc1 = run("s1", a);
    ck_assert_msg(rc1 == 0 || rc1 == 1, "single check exited %d", rc1);
    snprintf(a, sizeof a, "check --cpu --cap 65536 %s --no-shrink --out '%s/s2.jsonl'", specs, g_tmp);
    ck_assert_int_eq(run_mpi("s2", 2, "", a), rc1);
    lines one = case_lines("s1.jsonl"), two = case_lines("s2.jsonl");
    ck_assert_msg(strstr(one.v[0], "\"variant\":\"w=u4b8,ws=f16/g128\"") != NULL, "first case: %.200s", one.v[0]);
    assert_same_cases(&two, &one, "check --spec");
    ck_assert_msg(two.run && strstr(two.run, "\"specs\":[\"w=u4b8,ws=f16/g128\",\"w=u8b128,ws=bf16/c,a=bf16\"]"),
                  "merged run line: %s", two.run ? two.run : "(none)");
    check_run_line(two.run, 2, NULL, -1);
    lines_free(&one);
    lines_free(&two);
}
END_TEST

/* check over 2 ranks on a glob of a registry row and a routed row (as one
 * process runs them: the GEMM row's suite, then the routed row's), and on a
 * glob of routed rows alone, which match no registry row: the same case
 * lines, routed ones included, in the same order. */
START_TEST(check_routed_rows_over_ranks)
{
    const char *globs[2] = {"*w4a16-ch*-f16", "moe-w4a16-*"};
    for (int gi = 0; gi < 2; gi++) {
        char a[4096], n1[16], n2[16], f1[32], f2[32];
        snprintf(n1, sizeof n1, "r1_%d", gi);
        snprintf(n2, sizeof n2, "r2_%d", gi);
        snprintf(f1, sizeof f1, "%s.jsonl", n1);
        snprintf(f2, sizeof f2, "%s.jsonl", n2);
        snprintf(a, sizeof a, "'%s' check --cpu --cap 65536 --variant '%s' --no-shrink --out '%s/%s'", g_qvet,
                 globs[gi], g_tmp, f1);
        int rc1 = run(n1, a);
        ck_assert_msg(rc1 == 0 || rc1 == 1, "single check of '%s' exited %d", globs[gi], rc1);
        snprintf(a, sizeof a, "check --cpu --cap 65536 --variant '%s' --no-shrink --out '%s/%s'", globs[gi], g_tmp,
                 f2);
        ck_assert_int_eq(run_mpi(n2, 2, "", a), rc1);
        lines one = case_lines(f1), two = case_lines(f2);
        int routed = 0;
        for (int i = 0; i < one.n; i++) routed += strstr(one.v[i], "\"kind\":\"routed\"") != NULL;
        ck_assert_msg(routed > 0 && (gi == 1 || routed < one.n), "'%s': %d routed lines of %d", globs[gi], routed,
                      one.n);
        assert_same_cases(&two, &one, "check");
        lines_free(&one);
        lines_free(&two);
    }
}
END_TEST

/* A routed plugin (ABI version 3, plugins/example_moe) under 2 ranks: check
 * and fuzz give the case lines one process gives. */
START_TEST(routed_plugin_over_ranks)
{
    char a[4096];
    const char *cmds[2] = {"check --no-shrink", "fuzz --cases 24 --seed 11 --no-shrink"};
    for (int ci = 0; ci < 2; ci++) {
        char n1[16], n2[16];
        snprintf(n1, sizeof n1, "p1_%d", ci);
        snprintf(n2, sizeof n2, "p2_%d", ci);
        snprintf(a, sizeof a, "'%s' %s --plugin '%s' --out '%s/%s.jsonl'", g_qvet, cmds[ci], g_moe_plugin, g_tmp, n1);
        ck_assert_int_eq(run(n1, a), 0);
        snprintf(a, sizeof a, "%s --plugin '%s' --out '%s/%s.jsonl'", cmds[ci], g_moe_plugin, g_tmp, n2);
        ck_assert_int_eq(run_mpi(n2, 2, "", a), 0);
        char f1[32], f2[32];
        snprintf(f1, sizeof f1, "%s.jsonl", n1);
        snprintf(f2, sizeof f2, "%s.jsonl", n2);
        lines one = case_lines(f1), two = case_lines(f2);
        ck_assert_int_eq(one.n, 24); /* the row's suite, or the 24 fuzz cases */
        for (int i = 0; i < one.n; i++)
            ck_assert_msg(strstr(one.v[i], "\"backend\":\"plugin:example-moe\"") != NULL, "%s", one.v[i]);
        assert_same_cases(&two, &one, cmds[ci]);
        lines_free(&one);
        lines_free(&two);
    }
}
END_TEST

/* check over 2 ranks: three variants dealt 0,2 / 1 come back in registry
 * order, each suite whole. */
START_TEST(check_two_ranks_equal_one_process)
{
    const char *glob = "marlin-fp8a16-*-f16";
    char a[4096];
    snprintf(a, sizeof a, "'%s' check --cpu --cap 65536 --variant '%s' --no-shrink --out '%s/c1.jsonl'", g_qvet, glob,
             g_tmp);
    int rc1 = run("c1", a);
    ck_assert_msg(rc1 == 0 || rc1 == 1, "single check exited %d", rc1);
    snprintf(a, sizeof a, "check --cpu --cap 65536 --variant '%s' --no-shrink --out '%s/c2.jsonl' --report '%s/rep'", glob,
             g_tmp, g_tmp);
    ck_assert_int_eq(run_mpi("c2", 2, "", a), rc1);
    char index[512];
    snprintf(index, sizeof index, "%s/rep/index.md", g_tmp);
    ck_assert_msg(access(index, F_OK) == 0, "--report wrote no %s", index);
    lines one = case_lines("c1.jsonl"), two = case_lines("c2.jsonl");
    assert_same_cases(&two, &one, "check");
    check_run_line(two.run, 2, NULL, -1);
    char *out = read_tmp("c2.out"), want[128], got[512];
    snprintf(want, sizeof want, "check: %d cases, %lld failed", one.n, count_fail(&one));
    last_line(out, got, sizeof got);
    ck_assert_str_eq(got, want);
    free(out);
    lines_free(&one);
    lines_free(&two);
}
END_TEST

/* Rank 1's campaign process is killed: the run says so with rank and host,
 * exits 3, and keeps rank 0's cases (the even ones) exactly. */
START_TEST(killed_rank_is_reported_and_others_kept)
{
    char a[4096];
    snprintf(a, sizeof a, "'%s' fuzz --cpu --cases 12 --seed %" PRIu64 " --no-shrink --out '%s/k1.jsonl'", g_qvet,
             g_seed + 2, g_tmp);
    int rc1 = run("k1", a);
    ck_assert_msg(rc1 == 0 || rc1 == 1, "single fuzz exited %d", rc1);
    snprintf(a, sizeof a, "fuzz --cpu --cases 12 --seed %" PRIu64 " --no-shrink --out '%s/k2.jsonl'", g_seed + 2, g_tmp);
    ck_assert_int_eq(run_mpi("k2", 2, "QVET_MPI_TEST_KILL_RANK=1", a), 3);
    char *err = read_tmp("k2.err"), want[512];
    snprintf(want, sizeof want, "rank 1 on host %s: shard 1/2: the campaign process was killed by signal 9", g_host);
    ck_assert_msg(err && strstr(err, want), "stderr lacks '%s':\n%s", want, err ? err : "(none)");
    free(err);
    lines one = case_lines("k1.jsonl"), two = case_lines("k2.jsonl");
    lines even = {0};
    even.v = malloc(sizeof *even.v * (size_t)one.n);
    for (int i = 0; i < one.n; i += 2) even.v[even.n++] = one.v[i];
    assert_same_cases(&two, &even, "rank 0's half");
    long long per[2] = {6, 0};
    check_run_line(two.run, 2, per, 1);
    ck_assert_msg(strstr(two.run, "killed by signal 9") != NULL, "run line: %s", two.run);
    free(even.v);
    lines_free(&one);
    lines_free(&two);
}
END_TEST

/* Devices: local rank % devices, through the scheduler's CUDA_VISIBLE_DEVICES
 * list; 3 ranks on 2 (simulated) GPUs get entries 5, 7, 5 and a warning. */
START_TEST(gpus_dealt_by_local_rank)
{
    char a[4096];
    snprintf(a, sizeof a, "fuzz --cases 3 --seed %" PRIu64 " --no-shrink --out '%s/g.jsonl'", g_seed + 3, g_tmp);
    int rc = run_mpi("g", 3, "CUDA_VISIBLE_DEVICES=5,7 QVET_MPI_TEST_DEVICES=2", a);
    ck_assert_msg(rc == 0 || rc == 1, "exit %d", rc);
    lines L = case_lines("g.jsonl");
    ck_assert_int_eq(L.n, 3);
    qv_json *root;
    ck_assert(qv_json_parse(L.run, strlen(L.run), &root) == QV_OK);
    const qv_json *per = qv_json_get(qv_json_get(root, "mpi"), "per_rank");
    static const char *const want_vis[] = {"5", "7", "5"};
    for (int r = 0; r < 3; r++) {
        const qv_json *p = qv_json_at(per, r);
        int64_t gpu = -1;
        ck_assert(qv_json_int64(qv_json_get(p, "gpu"), &gpu) == QV_OK);
        ck_assert_int_eq(gpu, r % 2);
        const char *vis = qv_json_str(qv_json_get(p, "cuda_visible_devices"));
        ck_assert_msg(vis && !strcmp(vis, want_vis[r]), "rank %d: CUDA_VISIBLE_DEVICES %s, want %s", r,
                      vis ? vis : "(none)", want_vis[r]);
    }
    qv_json_free(root);
    char *err = read_tmp("g.err"), want[512];
    snprintf(want, sizeof want, "3 ranks on %s share 2 GPUs", g_host);
    ck_assert_msg(err && strstr(err, want), "stderr lacks '%s'", want);
    free(err);
    lines_free(&L);
}
END_TEST

/* Refusals: check takes no --shard, --out=FILE is refused, --report needs
 * --out; every rank exits 2 and nothing is written. */
static const char *const refusals[] = {
    "check --cpu --shard 0/2 --out REFUSED",
    "fuzz --cpu --cases 4 --out=REFUSED",
    "fuzz --cpu --cases 4 --report REFUSED",
    "fuzz --cpu --cases 4 --minutes 1 --out REFUSED",
    "fuzz --cpu --cases 0 --out REFUSED",
};

START_TEST(refusals_exit_two)
{
    char a[4096], path[512];
    snprintf(path, sizeof path, "%s/REFUSED", g_tmp);
    unlink(path);
    const char *r = refusals[_i];
    snprintf(a, sizeof a, "%s", r);
    char *at = strstr(a, "REFUSED");
    snprintf(at, sizeof a - (size_t)(at - a), "%s", path);
    ck_assert_int_eq(run_mpi("ref", 2, "", a), 2);
    char *err = read_tmp("ref.err");
    ck_assert_msg(err && strstr(err, "qvet"), "no message for '%s'", r);
    free(err);
    ck_assert_msg(access(path, F_OK) != 0, "'%s' wrote %s", r, path);
}
END_TEST

/* Outside mpirun the MPI binary is the plain qvet. */
START_TEST(without_mpirun_it_is_plain_qvet)
{
    char a[4096];
    snprintf(a, sizeof a, "'%s' list --json", g_mpi);
    ck_assert_int_eq(run("plain_mpi", a), 0);
    snprintf(a, sizeof a, "'%s' list --json", g_qvet);
    ck_assert_int_eq(run("plain", a), 0);
    char *x = read_tmp("plain_mpi.out"), *y = read_tmp("plain.out");
    ck_assert(x && y && strlen(y) > 0);
    ck_assert_msg(!strcmp(x, y), "qvet-mpi list --json (%zu bytes) differs from qvet list --json (%zu bytes)",
                  strlen(x), strlen(y));
    free(x);
    free(y);
}
END_TEST

static Suite *mpi_suite(void)
{
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("mpi");
    /* Each test starts mpirun (about 0.3 s) and runs a few dozen CPU-model cases. */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fuzz_two_ranks_equal_one_process);
    tcase_add_test(tc, fuzz_user_shard_composes);
    tcase_add_test(tc, check_two_ranks_equal_one_process);
    tcase_add_test(tc, check_routed_rows_over_ranks);
    tcase_add_test(tc, routed_plugin_over_ranks);
    tcase_add_test(tc, check_specs_over_ranks);
    tcase_add_test(tc, killed_rank_is_reported_and_others_kept);
    tcase_add_test(tc, gpus_dealt_by_local_rank);
    tcase_add_loop_test(tc, refusals_exit_two, 0, (int)(sizeof refusals / sizeof refusals[0]));
    tcase_add_test(tc, without_mpirun_it_is_plain_qvet);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *bin = getenv("QVET_BIN"), *mbin = getenv("QVET_MPI_BIN");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *dir = dirname(self);
    snprintf(g_qvet, sizeof g_qvet, "%s", bin && *bin ? bin : "");
    if (!g_qvet[0]) snprintf(g_qvet, sizeof g_qvet, "%s/../qvet", dir);
    snprintf(g_mpi, sizeof g_mpi, "%s", mbin && *mbin ? mbin : "");
    if (!g_mpi[0]) snprintf(g_mpi, sizeof g_mpi, "%s/../qvet-mpi", dir);
    snprintf(g_moe_plugin, sizeof g_moe_plugin, "%s/../plugins/libqvet_example_moe_plugin.so", dir);
    const char *seed = getenv("QVET_SEED");
    if (seed && *seed) g_seed = strtoull(seed, NULL, 0);
    if (gethostname(g_host, sizeof g_host)) snprintf(g_host, sizeof g_host, "unknown");
    snprintf(g_tmp, sizeof g_tmp, "/tmp/t_mpi-XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("t_mpi: mkdtemp");
        return 1;
    }
    /* CI runs as root; Open MPI refuses root without these. Shared-memory
     * single-copy needs ptrace rights that containers often withhold, and
     * the messages here are small. The mpirun of a plain `mpirun` is meant. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    unsetenv("QVET_MPI");
    unsetenv("QVET_MPI_TEST_KILL_RANK");
    unsetenv("QVET_MPI_TEST_DEVICES");
    printf("t_mpi: seed %" PRIu64 " (replay with QVET_SEED=%" PRIu64 "), qvet %s, qvet-mpi %s, scratch %s\n", g_seed,
           g_seed, g_qvet, g_mpi, g_tmp);
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        printf("t_mpi: mpirun is not on PATH (tools/deps.sh installs openmpi-bin); every MPI test will fail\n");
    if (access(g_mpi, X_OK) != 0) printf("t_mpi: %s is not executable; every MPI test will fail\n", g_mpi);
    SRunner *sr = srunner_create(mpi_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (!failed) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) printf("t_mpi: could not remove %s\n", g_tmp);
    }
    (void)argv;
    return failed ? 1 : 0;
}
