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

/* `qvet check --plugin LIB` (with --fail-dir DIR when given): exit rc, and
 * the FAIL count of each variant's table row zero or not as said. */
static run_result check_plugin(const char *lib, const char *fail_dir, int rc, int spec_fails, int row_fails)
{
    run_result r = fail_dir ? qvet_run((const char *[]){"check", "--plugin", lib, "--fail-dir", fail_dir, NULL})
                            : qvet_run((const char *[]){"check", "--plugin", lib, NULL});
    ck_assert_msg(r.rc == rc, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "plugin:example-cuda"));
    int cases, fails;
    table_row(r.out, SPEC, &cases, &fails);
    ck_assert_int_gt(cases, 20);
    ck_assert_msg(spec_fails ? fails > 0 : fails == 0, "%s: %d of %d cases fail", SPEC, fails, cases);
    table_row(r.out, ROW, &cases, &fails);
    ck_assert_int_eq(cases, 24); /* the routed row's suite */
    ck_assert_msg(row_fails ? fails > 0 : fails == 0, "%s: %d of %d cases fail", ROW, fails, cases);
    return r;
}

START_TEST(check_and_fuzz_pass)
{
    char lib[4400];
    cuda_plugin(NULL, lib, sizeof lib);
    run_result r = check_plugin(lib, NULL, 0, 0, 0);
    run_free(&r);
    r = qvet_run((const char *[]){"fuzz", "--plugin", lib, "--cases", "60", "--seed", "9", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "fuzz: 60 cases, 0 failed"));
    run_free(&r);
}
END_TEST

/* Every column reading column 0's scale: both variants FAIL, and the first
 * failure's printed replay command FAILs again on its own. */
START_TEST(scale_col0_fails)
{
    char lib[4400];
    cuda_plugin("scale_col0", lib, sizeof lib);
    run_result r = check_plugin(lib, NULL, 1, 1, 1);
    qvet_replay_expect(r.out, "--plugin", 1, "FAIL");
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
    run_result r = check_plugin(lib, fails_dir, 1, 0, 1);
    char line[8192];
    const char *words[64];
    qvet_dump_verify_words(r.out, fails_dir, line, sizeof line, words, 64);
    run_free(&r);
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
