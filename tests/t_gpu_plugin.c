/* t_gpu_plugin.c: a CUDA plugin on device pointers, as a user runs one
 * (plugins/example_cuda: a W4A16 spec and the Mixtral routed row as plain
 * kernels). `qvet check` and a bounded `qvet fuzz` PASS it; its two mutants
 * FAIL where their bug is (a column-0 scale in both variants, the router
 * weight after the fp16 cast in the routed row alone), a printed replay
 * command FAILs again, and a routed failure's dump re-verifies as a FAIL.
 * Without a CUDA device the suite prints exactly "SKIP: no CUDA device"; the
 * plugin's loading and its refusal without a device are t_plugin's. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/cli.h"
#include "support/files.h"
#include "support/gpu.h"

static uint64_t g_seed = 20261207; /* the date the suite was written; QVET_SEED replaces it */

#define SPEC "w=u4b8,ws=f16/g128"
#define ROW "moe-mixtral-w4a16-g128-f16"

/* BUILD/plugins/libqvet_example_cuda{_MUTANT}_plugin.so beside the qvet binary. */
static void cuda_plugin(const char *mutant, char *buf, size_t len)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", qvet_path());
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    snprintf(buf, len, "%s/plugins/libqvet_example_cuda%s%s_plugin.so", dir, mutant ? "_" : "", mutant ? mutant : "");
    ck_assert_msg(access(buf, R_OK) == 0, "%s is not built (make builds every plugin)", buf);
}

/* The summary row of `name` in a campaign's table: its cases and FAILs. */
static void table_row(const char *out, const char *name, int *cases, int *fails)
{
    const char *p = out;
    *cases = *fails = -1;
    size_t len = strlen(name);
    while ((p = strstr(p, name)) != NULL) {
        if ((p == out || p[-1] == '\n') && p[len] == ' ') {
            int pass, marg;
            ck_assert_int_eq(sscanf(p + len, "%d %d %d %d", cases, &pass, &marg, fails), 4);
            return;
        }
        p += len;
    }
    ck_abort_msg("no table row for %s in:\n%s", name, out);
}

START_TEST(check_and_fuzz_pass)
{
    char lib[4400];
    cuda_plugin(NULL, lib, sizeof lib);
    run_result r = qvet_run((const char *[]){"check", "--plugin", lib, "--quiet", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "plugin:example-cuda"));
    int cases, fails;
    table_row(r.out, SPEC, &cases, &fails);
    ck_assert_int_gt(cases, 20);
    ck_assert_int_eq(fails, 0);
    table_row(r.out, ROW, &cases, &fails);
    ck_assert_int_eq(cases, 24); /* the routed row's suite */
    ck_assert_int_eq(fails, 0);
    run_free(&r);
    r = qvet_run((const char *[]){"fuzz", "--plugin", lib, "--cases", "60", "--seed", "9", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "fuzz: 60 cases, 0 failed"));
    run_free(&r);
}
END_TEST

/* Every column reading column 0's scale: both variants FAIL, and the GEMM's
 * printed replay command FAILs again on its own. */
START_TEST(scale_col0_fails)
{
    char lib[4400];
    cuda_plugin("scale_col0", lib, sizeof lib);
    run_result r = qvet_run((const char *[]){"check", "--plugin", lib, NULL});
    ck_assert_msg(r.rc == 1, "rc %d: %s%s", r.rc, r.out, r.err);
    int cases, fails;
    table_row(r.out, SPEC, &cases, &fails);
    ck_assert_int_gt(fails, 0);
    table_row(r.out, ROW, &cases, &fails);
    ck_assert_int_gt(fails, 0);
    const char *rp = strstr(r.out, "replay: qvet replay ");
    ck_assert_ptr_nonnull(rp);
    char cmd[2048];
    rp += strlen("replay: qvet ");
    snprintf(cmd, sizeof cmd, "%.*s", (int)strcspn(rp, "\n"), rp);
    run_free(&r);
    const char *args[32];
    int na = 0;
    for (char *save = NULL, *tok = strtok_r(cmd, " ", &save); tok && na < 31; tok = strtok_r(NULL, " ", &save))
        args[na++] = tok;
    args[na] = NULL;
    ck_assert_str_eq(args[0], "replay");
    ck_assert_str_eq(args[na - 2], "--plugin");
    r = qvet_run(args);
    ck_assert_msg(r.rc == 1 && strstr(r.out, "FAIL"), "replay rc %d: %s%s", r.rc, r.out, r.err);
    run_free(&r);
}
END_TEST

/* The router weight after the fp16 cast: the routed row FAILs, the GEMM spec
 * (untouched by the bug) PASSes; the first routed failure is dumped where
 * --fail-dir says, and the dump's `qvet verify` command FAILs on the CPU. */
START_TEST(weight_after_cast_fails)
{
    char lib[4400], dir[256], fails_dir[400];
    cuda_plugin("weight_after_cast", lib, sizeof lib);
    tmpdir_create(dir, sizeof dir, "t_gpu_plugin");
    snprintf(fails_dir, sizeof fails_dir, "%s/failures", dir);
    run_result r = qvet_run((const char *[]){"check", "--plugin", lib, "--fail-dir", fails_dir, NULL});
    ck_assert_msg(r.rc == 1, "rc %d: %s%s", r.rc, r.out, r.err);
    int cases, fails;
    table_row(r.out, SPEC, &cases, &fails);
    ck_assert_int_eq(fails, 0);
    table_row(r.out, ROW, &cases, &fails);
    ck_assert_int_gt(fails, 0);
    const char *in = strstr(r.out, "inputs in ");
    ck_assert_msg(in != NULL, "%s", r.out);
    const char *end = strstr(in, "/\n");
    ck_assert_ptr_nonnull(end);
    char dump[800], file[900], line[8192];
    snprintf(dump, sizeof dump, "%.*s", (int)(end - (in + 10)), in + 10);
    ck_assert_msg(strncmp(dump, fails_dir, strlen(fails_dir)) == 0, "%s is not under %s", dump, fails_dir);
    run_free(&r);
    snprintf(file, sizeof file, "%s/replay.txt", dump);
    const char *words[64];
    qvet_command_words(file, line, sizeof line, words, 64);
    ck_assert_str_eq(words[1], "verify");
    run_result v = qvet_run(words + 1);
    ck_assert_msg(v.rc == 1 && strstr(v.out, ": FAIL"), "rc %d: %s%s", v.rc, v.out, v.err);
    run_free(&v);
    tmpdir_remove(dir);
}
END_TEST

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_plugin", gpu, g_seed, 3, &tc);
    if (gpu) {
        tcase_add_test(tc, check_and_fuzz_pass);
        tcase_add_test(tc, scale_col0_fails);
        tcase_add_test(tc, weight_after_cast_fails);
    }
    return gpu_suite_run(s);
}
