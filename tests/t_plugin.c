/* t_plugin.c: the plugin ABI (plugin.h). The example plugin (built by the
 * Makefile next to this test, in BUILD/plugins/) loads, declares its rows, its
 * spec and host pointers, and its kernels PASS the campaign's cases through the
 * host-pointer path and through `qvet check|fuzz --plugin [--spec]`; a copy of
 * it that drops the bias FAILs; a plugin with another ABI version and one
 * without qv_plugin_launch are refused with a message naming the cause, and
 * the CLI exits 2 for them. Tiny plugins compiled here check ABI version 1,
 * specs spelled otherwise than their canonical form, and the refusal of a
 * malformed spec or an unknown row. Version 3: the routed example plugin
 * passes, its fp16-cast copy fails, and routed rows declared without version
 * 3 or without the routed launch are refused. */
#include <check.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal/campaign.h"
#include "internal/json.h"
#include "qvet/array.h"
#include "qvet/plugin.h"
#include "qvet/spec.h"

#include "support/cli.h"
#include "support/run.h"
#include "support/suite.h"

#define SEED 20261129ull /* the date the suite was written */

/* The spec the example plugin implements beside its two rows. */
#define EXAMPLE_SPEC "w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,bias=f32,out=bf16"

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
    ck_assert_int_eq(pl.abi_version, QV_PLUGIN_ABI_VERSION);
    ck_assert_int_eq(pl.n_variants, 3);
    for (int i = 0; i < 2; i++) ck_assert_ptr_eq(pl.resolved[i], qv_variant_find(pl.variants[i]));
    const qv_variant *spec;
    ck_assert_int_eq(qv_spec_parse(EXAMPLE_SPEC, &spec), QV_OK);
    ck_assert_ptr_eq(pl.resolved[2], spec);
    ck_assert_int_eq(spec->layout, QV_LAYOUT_LOGICAL);
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
    /* The two rows in registry order, then the plugin's spec. */
    ck_assert_int_eq(gen.n_variants, 3);
    ck_assert_ptr_eq(gen.variants[2], pl.resolved[2]);
    ck_assert_str_eq(qv_backend_launch_name(&b, gen.variants[2]), EXAMPLE_SPEC);
    int ran[3] = {0, 0, 0};
    for (int64_t j = 0; j < 60; j++) {
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
        ran[c.v == gen.variants[1] ? 1 : c.v == gen.variants[2] ? 2 : 0]++;
        qv_outcome_clear(&o);
        qv_problem_destroy(&p);
    }
    ck_assert(ran[0] > 0 && ran[1] > 0 && ran[2] > 0);
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
    char want[64], range[64];
    snprintf(want, sizeof want, "ABI version %d", QV_PLUGIN_ABI_VERSION + 1);
    snprintf(range, sizeof range, "versions %d to %d", QV_PLUGIN_ABI_OLDEST, QV_PLUGIN_ABI_VERSION);
    ck_assert_msg(strstr(qv_errmsg(), want) && strstr(qv_errmsg(), range), "%s", qv_errmsg());
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

/* ---- the spec of the example plugin, and a copy that drops its bias ---- */

/* A C compiler for the plugins built here: $CC when it is an absolute path,
 * else /usr/bin/cc. */
static const char *compiler(void)
{
    const char *cc = getenv("CC");
    return cc && cc[0] == '/' ? cc : "/usr/bin/cc";
}

/* Compiles `src` (a path) with the extra flags (NULL-terminated, at most 8)
 * into a shared library at out. */
static void build_plugin(const char *src, const char *const *flags, const char *out)
{
    const char *args[20];
    int n = 0;
    const char *fixed[] = {"-std=c11", "-O1", "-ffp-contract=off", "-Iinclude", "-fPIC", "-shared"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) args[n++] = fixed[i];
    for (int i = 0; flags && flags[i]; i++) args[n++] = flags[i];
    args[n++] = src;
    args[n++] = "-o";
    args[n++] = out;
    args[n] = NULL;
    run_result r = run_program(compiler(), args);
    ck_assert_msg(r.rc == 0, "%s %s: rc %d: %s", compiler(), src, r.rc, r.err);
    run_free(&r);
}

static void temp_dir(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/qvet-t_plugin-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

static void remove_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* `qvet check --spec S --plugin L` runs the example's spec: every case passes;
 * the same source built with the bias dropped FAILs (exit 1) under the same
 * command, and the dump of a failure holds the spec and the bias. */
START_TEST(spec_passes_and_dropped_bias_fails)
{
    char path[4300], dir[256], bad[512], fails[512], line[4096];
    plugin_path("example", path, sizeof path);
    run_result r = run_qvet((const char *[]){"check", "--plugin", path, "--spec", EXAMPLE_SPEC, "--quiet", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, ", 0 failed\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "plugin:example"));
    run_free(&r);
    /* Spelled with the keys in another order: the same variant. */
    r = run_qvet((const char *[]){"fuzz", "--plugin", path, "--spec", "out=bf16,bias=f32,acc=i32,as=f32/tok,a=i8,ws=f32/c,w=i8",
                                  "--cases", "4", "--seed", "3", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    run_free(&r);
    /* A spec the plugin does not declare. */
    r = run_qvet((const char *[]){"check", "--plugin", path, "--spec", "w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,out=bf16",
                                  NULL});
    ck_assert_int_eq(r.rc, 2);
    ck_assert_msg(strstr(r.err, "does not declare") != NULL, "%s", r.err);
    run_free(&r);

    temp_dir(dir, sizeof dir);
    snprintf(bad, sizeof bad, "%s/libqvet_example_nobias_plugin.so", dir);
    snprintf(fails, sizeof fails, "%s/failures", dir);
    build_plugin("plugins/example/example_plugin.c", (const char *[]){"-DQV_MUTANT_example_bias_ignored", NULL}, bad);
    r = run_qvet((const char *[]){"check", "--plugin", bad, "--spec", EXAMPLE_SPEC, "--fail-dir", fails, "--quiet", NULL});
    ck_assert_msg(r.rc == 1, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_null(strstr(r.out, ", 0 failed\n"));
    run_free(&r);
    /* The first failure's dump: its spec file and its bias. */
    char d0[700], p[800];
    snprintf(d0, sizeof d0, "%s/check-w=i8_ws=f32-c_a=i8_as=f32-tok_acc=i32_bias=f32_out=bf16-case0", fails);
    snprintf(p, sizeof p, "%s/spec", d0);
    FILE *f = fopen(p, "r");
    ck_assert_msg(f != NULL, "%s missing", p);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    ck_assert_str_eq(line, EXAMPLE_SPEC "\n");
    snprintf(p, sizeof p, "%s/bias.npy", d0);
    qv_array bias;
    ck_assert_int_eq(qv_npy_load(p, &bias), QV_OK);
    ck_assert_int_eq(bias.dtype, QV_DT_F4);
    qv_array_destroy(&bias);
    /* `qvet verify --spec "$(cat spec)"` on the dump gives the same FAIL. */
    char a[800], q[800], s_[800], sa[800], o[800];
    snprintf(a, sizeof a, "%s/A.npy", d0);
    snprintf(q, sizeof q, "%s/q.npy", d0);
    snprintf(s_, sizeof s_, "%s/scales.npy", d0);
    snprintf(sa, sizeof sa, "%s/a_scale.npy", d0);
    snprintf(o, sizeof o, "%s/out.npy", d0);
    r = run_qvet((const char *[]){"verify", "--spec", EXAMPLE_SPEC, "--a", a, "--a-scale", sa, "--q", q, "--scales", s_,
                                  "--bias", p, "--out", o, NULL});
    ck_assert_msg(r.rc == 1, "rc %d: %s%s", r.rc, r.out, r.err);
    run_free(&r);
    remove_dir(dir);
}
END_TEST

/* A tiny plugin: ABI version ABI, one variant VARIANT; its launch computes
 * w=i8,a=i8,acc=i32 (exact int32 sums, int32 output) on the logical arrays
 * and refuses any other name than its own. */
static const char tiny_src[] =
    "#include <string.h>\n"
    "#include \"qvet/plugin.h\"\n"
    "int qv_plugin_abi_version(void) { return ABI; }\n"
    "const char *qv_plugin_name(void) { return \"tiny\"; }\n"
    "int qv_plugin_variant_count(void) { return 1; }\n"
    "const char *qv_plugin_variant(int i) { return i == 0 ? VARIANT : 0; }\n"
    "int qv_plugin_pointers(void) { return QV_PLUGIN_HOST; }\n"
    "int qv_plugin_launch(const char *variant, const qv_gemm_args *x)\n"
    "{\n"
    "    if (strcmp(variant, VARIANT)) return 1;\n"
    "    const signed char *a = x->a, *b = x->b;\n"
    "    int *c = x->c;\n"
    "    for (int i = 0; i < x->m; i++)\n"
    "        for (int j = 0; j < x->n; j++) {\n"
    "            int acc = 0;\n"
    "            for (int kk = 0; kk < x->k; kk++) acc += a[(long)i * x->k + kk] * b[(long)kk * x->n + j];\n"
    "            c[(long)i * x->n + j] = acc;\n"
    "        }\n"
    "    return 0;\n"
    "}\n";

/* Builds the tiny plugin with ABI version abi naming `variant`, into dir. */
static void build_tiny(const char *dir, int abi, const char *variant, char *out, size_t len)
{
    static int serial;
    char src[512], dabi[32], dvar[600];
    snprintf(src, sizeof src, "%s/tiny.c", dir);
    FILE *f = fopen(src, "w");
    ck_assert_ptr_nonnull(f);
    fputs(tiny_src, f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(out, len, "%s/libtiny%d.so", dir, serial++);
    snprintf(dabi, sizeof dabi, "-DABI=%d", abi);
    snprintf(dvar, sizeof dvar, "-DVARIANT=\"%s\"", variant);
    build_plugin(src, (const char *[]){dabi, dvar, NULL}, out);
}

START_TEST(abi_versions_and_declared_names)
{
    char dir[256], lib[600];
    temp_dir(dir, sizeof dir);
    qv_plugin pl;
    /* Version 1 still loads, naming a registry row. */
    build_tiny(dir, 1, "w8a8-i8-tensor", lib, sizeof lib);
    ck_assert_msg(qv_plugin_open(lib, &pl) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(pl.abi_version, 1);
    ck_assert_ptr_eq(pl.resolved[0], qv_variant_find("w8a8-i8-tensor"));
    qv_plugin_close(&pl);
    /* Version 1 cannot name a spec. */
    build_tiny(dir, 1, "w=i8,a=i8,acc=i32", lib, sizeof lib);
    ck_assert_int_ne(qv_plugin_open(lib, &pl), QV_OK);
    ck_assert_msg(strstr(qv_errmsg(), "version 2") && strstr(qv_errmsg(), "w=i8,a=i8,acc=i32"), "%s", qv_errmsg());
    /* A malformed spec and an unknown row are refused with the parser's word. */
    build_tiny(dir, 2, "w=i8,a=i8,acc=i32,ws=f32/q7", lib, sizeof lib);
    ck_assert_int_eq(qv_plugin_open(lib, &pl), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), lib) && strstr(qv_errmsg(), "'w=i8,a=i8,acc=i32,ws=f32/q7'") &&
                      strstr(qv_errmsg(), "granularity"),
                  "%s", qv_errmsg());
    run_result r = run_qvet((const char *[]){"fuzz", "--plugin", lib, "--cases", "1", NULL});
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "granularity"));
    run_free(&r);
    build_tiny(dir, 2, "no-such-row", lib, sizeof lib);
    ck_assert_int_ne(qv_plugin_open(lib, &pl), QV_OK);
    ck_assert_msg(strstr(qv_errmsg(), "'no-such-row'") && strstr(qv_errmsg(), "unknown variant"), "%s", qv_errmsg());
    /* A spec spelled otherwise: matched by its canonical form, launched under
     * the plugin's own spelling, on the logical (k, n) codes; int32 outputs. */
    build_tiny(dir, 2, "acc=i32,a=i8,w=i8", lib, sizeof lib);
    ck_assert_msg(qv_plugin_open(lib, &pl) == QV_OK, "%s", qv_errmsg());
    ck_assert_str_eq(pl.resolved[0]->name, "w=i8,a=i8,acc=i32");
    qv_plugin_close(&pl);
    r = run_qvet((const char *[]){"fuzz", "--plugin", lib, "--spec", "w=i8,a=i8,acc=i32", "--cases", "12", "--seed", "9",
                                  NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "fuzz: 12 cases, 0 failed"));
    run_free(&r);
    remove_dir(dir);
}
END_TEST

/* ABI version 3: the routed example plugin (moe-mixtral-w4a16-g128-f16 on
 * host pointers) loads with its seventh symbol and passes `qvet check` and a
 * bounded `qvet fuzz`; the same source weighing each product after its fp16
 * cast FAILs (exit 1), its first failure's token alone is dumped where
 * --fail-dir says and the dump's `qvet verify` command FAILs, and its replay
 * command gives the same FAIL; a routed
 * row declared under version 2, or under 3 without qv_plugin_moe_launch, is
 * refused with the cause named. */
#define MOE_ROW "moe-mixtral-w4a16-g128-f16"
START_TEST(routed_plugin)
{
    char path[4300], dir[256], bad[512], lib[600];
    plugin_path("example_moe", path, sizeof path);
    qv_plugin pl;
    ck_assert_msg(qv_plugin_open(path, &pl) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(pl.abi_version, 3);
    ck_assert_int_eq(pl.n_variants, 1);
    ck_assert_ptr_eq(pl.routed[0], qv_moe_row_find(MOE_ROW));
    ck_assert_ptr_null(pl.resolved[0]);
    ck_assert_ptr_nonnull(pl.moe_launch);
    qv_plugin_close(&pl);
    run_result r = run_qvet((const char *[]){"check", "--plugin", path, "--quiet", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "check: 24 cases, 0 failed"));
    ck_assert_ptr_nonnull(strstr(r.out, "plugin:example-moe"));
    run_free(&r);
    r = run_qvet((const char *[]){"fuzz", "--plugin", path, "--cases", "40", "--seed", "5", NULL});
    ck_assert_msg(r.rc == 0, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "fuzz: 40 cases, 0 failed"));
    run_free(&r);

    temp_dir(dir, sizeof dir);
    snprintf(bad, sizeof bad, "%s/libqvet_example_moe_cast_plugin.so", dir);
    build_plugin("plugins/example_moe/example_moe_plugin.c",
                 (const char *[]){"-DQV_MUTANT_example_moe_weight_after_cast", NULL}, bad);
    char fails[600];
    snprintf(fails, sizeof fails, "%s/failures", dir);
    r = run_qvet((const char *[]){"check", "--plugin", bad, "--fail-dir", fails, NULL});
    ck_assert_msg(r.rc == 1, "rc %d: %s%s", r.rc, r.out, r.err);
    ck_assert_ptr_null(strstr(r.out, ", 0 failed\n"));
    /* the first failure's inputs, its failing token alone, and their verify command: FAIL */
    const char *sh = strstr(r.out, "  shrunk to token ");
    ck_assert_msg(sh != NULL, "%s", r.out);
    char line[8192];
    const char *words[64];
    qvet_dump_verify_words(sh, fails, line, sizeof line, words, 64);
    run_result v = run_qvet(words + 1);
    ck_assert_msg(v.rc == 1 && strstr(v.out, "(t=1 ") && strstr(v.out, ": FAIL"), "rc %d: %s%s", v.rc, v.out, v.err);
    run_free(&v);
    /* the first failure's replay command, run as printed */
    qvet_replay_expect(r.out, "--plugin", 1, "FAIL");
    run_free(&r);

    build_tiny(dir, 2, MOE_ROW, lib, sizeof lib);
    ck_assert_int_eq(qv_plugin_open(lib, &pl), QV_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(qv_errmsg(), "routed row") && strstr(qv_errmsg(), "version 3"), "%s", qv_errmsg());
    build_tiny(dir, 3, MOE_ROW, lib, sizeof lib);
    ck_assert_int_eq(qv_plugin_open(lib, &pl), QV_ERR_FORMAT);
    ck_assert_msg(strstr(qv_errmsg(), "lacks qv_plugin_moe_launch"), "%s", qv_errmsg());
    r = run_qvet((const char *[]){"check", "--plugin", lib, NULL});
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "qv_plugin_moe_launch"));
    run_free(&r);
    remove_dir(dir);
}
END_TEST

/* The CUDA example plugin (device pointers, ABI version 3) loads with its
 * spec and its routed row, whose launch takes device pointers too; where no
 * device is present `qvet check` refuses it with exit 3 and the reason.
 * Its cases on a GPU are t_gpu_plugin's. */
START_TEST(cuda_plugin_loads)
{
    char path[4300];
    plugin_path("example_cuda", path, sizeof path);
    qv_plugin pl;
    ck_assert_msg(qv_plugin_open(path, &pl) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(pl.abi_version, 3);
    ck_assert_int_eq(pl.pointers, QV_PLUGIN_DEVICE);
    ck_assert_int_eq(pl.n_variants, 2);
    ck_assert_ptr_nonnull(pl.resolved[0]);
    ck_assert_ptr_null(pl.routed[0]);
    ck_assert_ptr_eq(pl.routed[1], qv_moe_row_find(MOE_ROW));
    ck_assert_ptr_nonnull(pl.moe_launch);
    qv_plugin_close(&pl);
    if (access("/dev/nvidia0", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0) return; /* a GPU: t_gpu_plugin */
    run_result r = run_qvet((const char *[]){"check", "--plugin", path, NULL});
    ck_assert_int_eq(r.rc, 3);
    ck_assert_msg(strstr(r.err, "takes device pointers, but no CUDA device is present"), "%s", r.err);
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
    tcase_add_test(t, spec_passes_and_dropped_bias_fails);
    tcase_add_test(t, abi_versions_and_declared_names);
    tcase_add_test(t, routed_plugin);
    tcase_add_test(t, cuda_plugin_loads);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);
    return suite_run(s);
}
