/* t_plugin.c: the plugin ABI (plugin.h). The example plugin (built by the
 * Makefile next to this test, in BUILD/plugins/) loads, declares its rows and
 * host pointers, and its kernels PASS the campaign's cases through the
 * host-pointer path and through `qvet check|fuzz --plugin`; a plugin with
 * another ABI version and one without qv_plugin_launch are refused with a
 * message naming the cause, and the CLI exits 2 for them. */
#include <check.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qvet/campaign.h"
#include "qvet/json.h"
#include "qvet/plugin.h"

#include "support/run.h"
#include "support/suite.h"

#define SEED 20261129ull /* the date the suite was written */

static char build_dir[4096];

/* BUILD, from this binary's path BUILD/tests/t_plugin. */
static void find_build(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(build_dir, sizeof build_dir, "build");
        return;
    }
    self[n] = '\0';
    snprintf(build_dir, sizeof build_dir, "%s/..", dirname(self));
}

static void plugin_path(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/plugins/libqvet_%s_plugin.so", build_dir, name);
    ck_assert_msg(access(buf, R_OK) == 0, "%s is not built (make builds every plugin)", buf);
}

/* Runs qvet with args (NULL-terminated, without argv[0]). */
static run_result run_qvet(const char *const *args)
{
    char bin[4200];
    snprintf(bin, sizeof bin, "%s/qvet", build_dir);
    return run_program(bin, args);
}

START_TEST(example_loads)
{
    char path[4300];
    plugin_path("example", path, sizeof path);
    qv_plugin pl;
    ck_assert_msg(qv_plugin_open(path, &pl) == QV_OK, "%s", qv_errmsg());
    ck_assert_str_eq(pl.name, "example");
    ck_assert_int_eq(pl.pointers, QV_PLUGIN_HOST);
    ck_assert_int_eq(pl.n_variants, 2);
    for (int i = 0; i < pl.n_variants; i++) ck_assert_ptr_nonnull(qv_variant_find(pl.variants[i]));
    ck_assert_ptr_nonnull(pl.launch);
    /* An unknown variant is refused by the plugin itself. */
    qv_gemm_args none = {0};
    ck_assert_int_ne(pl.launch("cublas-f16", &none), 0);
    qv_plugin_close(&pl);
}
END_TEST

START_TEST(example_passes_cases)
{
    char path[4300];
    plugin_path("example", path, sizeof path);
    qv_plugin pl;
    ck_assert_msg(qv_plugin_open(path, &pl) == QV_OK, "%s", qv_errmsg());
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_HOST_FN);
    snprintf(b.name, sizeof b.name, "plugin:%s", pl.name);
    b.launch = pl.launch;
    b.only = pl.variants;
    b.n_only = pl.n_variants;
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, NULL, &b), QV_OK);
    ck_assert_int_eq(gen.n_variants, 2);
    int ran[2] = {0, 0};
    for (int64_t j = 0; j < 40; j++) {
        qv_case c;
        qv_gen_case(&gen, SEED, j, &c);
        qv_problem p;
        ck_assert_int_eq(qv_case_build(&c, &p), QV_OK);
        qv_outcome o;
        ck_assert_int_eq(qv_case_run(&b, &p, ref_probe_is_unique(c.probe), &o), QV_OK);
        ck_assert_msg(o.res.grade != QV_FAIL, "seed %llu case %lld (%s %lld x %lld x %lld %s): %s",
                      (unsigned long long)SEED, (long long)j, c.v->name, (long long)c.m, (long long)c.n,
                      (long long)c.k, qv_probe_name(c.probe), o.res.reason);
        ck_assert_int_eq(o.res.n_unwritten, 0);
        ran[c.v == gen.variants[1]]++;
        qv_outcome_clear(&o);
        qv_problem_destroy(&p);
    }
    ck_assert(ran[0] > 0 && ran[1] > 0);
    qv_plugin_close(&pl);
}
END_TEST

START_TEST(wrong_abi_refused)
{
    char path[4300];
    plugin_path("bad_abi", path, sizeof path);
    qv_plugin pl;
    qv_status st = qv_plugin_open(path, &pl);
    ck_assert_int_ne(st, QV_OK);
    ck_assert_int_eq(qv_status_exit_code(st), 2);
    ck_assert_msg(strstr(qv_errmsg(), "ABI version 2") && strstr(qv_errmsg(), "version 1"), "%s", qv_errmsg());
    ck_assert_ptr_null(pl.handle);
    run_result r = run_qvet((const char *[]){"check", "--plugin", path, NULL});
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "ABI version"));
    run_free(&r);
}
END_TEST

START_TEST(missing_symbol_refused)
{
    char path[4300];
    plugin_path("missing_sym", path, sizeof path);
    qv_plugin pl;
    qv_status st = qv_plugin_open(path, &pl);
    ck_assert_int_ne(st, QV_OK);
    ck_assert_int_eq(qv_status_exit_code(st), 2);
    ck_assert_msg(strstr(qv_errmsg(), "missing symbol qv_plugin_launch") != NULL, "%s", qv_errmsg());
    run_result r = run_qvet((const char *[]){"fuzz", "--cases", "3", "--plugin", path, NULL});
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "qv_plugin_launch"));
    run_free(&r);
    ck_assert_int_ne(qv_plugin_open("/nonexistent/libnothing.so", &pl), QV_OK);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "cannot load"));
}
END_TEST

START_TEST(cli_runs_the_plugin)
{
    char path[4300], out[] = "/tmp/qvet-t_plugin-jsonl-XXXXXX";
    plugin_path("example", path, sizeof path);
    int fd = mkstemp(out);
    ck_assert_int_ge(fd, 0);
    close(fd);
    run_result r = run_qvet((const char *[]){"fuzz", "--plugin", path, "--cases", "10", "--seed", "5", "--out", out, NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    const char *last = strstr(r.out, "fuzz: 10 cases, 0 failed\n");
    ck_assert_msg(last && last[strlen("fuzz: 10 cases, 0 failed\n")] == '\0', "%s", r.out);
    run_free(&r);
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    char line[1 << 14];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        qv_json *j;
        ck_assert_int_eq(qv_json_parse(line, strlen(line), &j), QV_OK);
        ck_assert_str_eq(qv_json_str(qv_json_get(j, "backend")), "plugin:example");
        if (!strcmp(qv_json_str(qv_json_get(j, "kind")), "case")) {
            cases++;
            ck_assert_ptr_nonnull(strstr(qv_json_str(qv_json_get(j, "replay")), "--plugin"));
        }
        qv_json_free(j);
    }
    fclose(f);
    unlink(out);
    ck_assert_int_eq(cases, 10);
    r = run_qvet((const char *[]){"check", "--plugin", path, "--variant", "w8a8-i8-tensor", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "plugin:example"));
    run_free(&r);
}
END_TEST

int main(void)
{
    find_build();
    printf("t_plugin: seed %llu, plugins in %s/plugins\n", (unsigned long long)SEED, build_dir);
    Suite *s = suite_create("plugin");
    TCase *t = tcase_create("abi");
    tcase_add_test(t, example_loads);
    tcase_add_test(t, example_passes_cases);
    tcase_add_test(t, wrong_abi_refused);
    tcase_add_test(t, missing_symbol_refused);
    tcase_add_test(t, cli_runs_the_plugin);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);
    return suite_run(s);
}
