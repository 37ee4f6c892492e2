/* t_cli.c: the `qvet` binary as a user runs it: exit codes, where usage goes,
 * and `qvet list --json` checked row by row against the registry it prints.
 * The binary is $QVET_BIN, or ../qvet next to this test's folder (BUILD/qvet
 * for BUILD/tests/t_cli), so `make check` tests the qvet it just built. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/json.h"
#include "internal/route.h"
#include "qvet/moe.h"
#include "qvet/variant.h"

#include "support/cli.h"
#include "support/suite.h"


/* Help on stdout with exit 0; usage errors on stderr with exit 2; the other
 * stream stays empty (qvet_expect). */
START_TEST(test_help)
{
    qvet_expect((const char *[]){"--help", NULL}, 0, (const char *[]){"usage: qvet", "list", NULL});
}
END_TEST

START_TEST(test_no_arguments)
{
    qvet_expect((const char *[]){NULL}, 2, (const char *[]){"usage: qvet", NULL});
}
END_TEST

START_TEST(test_unknown_subcommand)
{
    qvet_expect((const char *[]){"frobnicate", NULL}, 2,
                (const char *[]){"unknown subcommand 'frobnicate'", "usage: qvet", NULL});
}
END_TEST

START_TEST(test_list_help)
{
    qvet_expect((const char *[]){"list", "--help", NULL}, 0, (const char *[]){"usage: qvet list", NULL});
}
END_TEST

START_TEST(test_list_bad_option)
{
    qvet_expect((const char *[]){"list", "--bogus", NULL}, 2,
                (const char *[]){"unknown option '--bogus'", "usage: qvet list", NULL});
    run_result r = qvet_run((const char *[]){"list", "no-such-variant-*", NULL});
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "no variant matches"));
    run_free(&r);
}
END_TEST

/* qvet list --paths: the tables of the matching rows, every path of each as
 * a numbered line in the table's order, then each row's paths (derived by
 * hand from the rows' declarations: QQQ channelwise has int4 weights and
 * int8 activations, no e4m3, so every path of the table but cuBLASLt fp8;
 * the FP4 rows take every weight-only path). */
START_TEST(test_list_paths)
{
    run_result r = qvet_run((const char *[]){"list", "--paths", "qqq-w4a8-ch", NULL});
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "route table aq:"));
    ck_assert_ptr_null(strstr(r.out, "route table marlin"));
    int nt = 0;
    const qv_route_table *t = qv_route_tables(&nt);
    const qv_route_table *aq = NULL;
    for (int i = 0; i < nt; i++)
        if (!strcmp(t[i].name, "aq")) aq = &t[i];
    ck_assert_ptr_nonnull(aq);
    const char *at = r.out;
    for (int i = 0; i < aq->n_rows; i++) {
        char line[64];
        snprintf(line, sizeof line, "  %d. %-13s %s", i + 1, aq->rows[i].name, aq->rows[i].kernel);
        const char *hit = strstr(at, line);
        ck_assert_msg(hit != NULL, "no line '%s' after the previous row in:\n%s", line, r.out);
        at = hit;
    }
    ck_assert_ptr_nonnull(strstr(r.out, "    qqq-w4a8-ch                  wgmma cublaslt-i8 mma\n"));
    run_free(&r);
    /* the FP4 rows: every weight-only path */
    r = qvet_run((const char *[]){"list", "--paths", "marlin-nvfp4a16-g16-f16", NULL});
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "    marlin-nvfp4a16-g16-f16      wgmma small-m dq-cublas mma\n"));
    ck_assert_ptr_null(strstr(r.out, "rows without a GPU kernel"));
    run_free(&r);
    qvet_expect((const char *[]){"list", "--paths", "--json", NULL}, 2,
                (const char *[]){"--paths prints the route tables alone", NULL});
}
END_TEST

/* The rows without a GPU kernel. */
static int rows_without_gpu(const char *glob)
{
    int n = 0;
    for (int i = 0; i < qv_registry_count(); i++)
        n += qv_variant_match(qv_registry_get(i), glob) && !qv_registry_get(i)->gpu_kernel;
    return n;
}

/* The table has a header line and one line per variant, each starting with its
 * name, then, when some listed row has no GPU kernel, one line that counts
 * them and says what runs them (a pattern of rows that all have one prints no
 * such line); then a blank line and the routed rows' table, likewise. */
START_TEST(test_list_table)
{
    run_result r = qvet_run((const char *[]){"list", NULL});
    ck_assert_int_eq(r.rc, 0);
    int lines = 0;
    for (char *p = r.out; *p; p++) lines += *p == '\n';
    int no_gpu = rows_without_gpu(NULL);
    ck_assert_int_eq(lines, qv_registry_count() + 1 + (no_gpu > 0) + 1 + qv_moe_row_count() + 1);
    for (int i = 0; i < qv_registry_count(); i++) {
        char want[128];
        snprintf(want, sizeof want, "\n%s ", qv_registry_get(i)->name);
        ck_assert_msg(strstr(r.out, want), "table lacks a line for %s", qv_registry_get(i)->name);
    }
    char line[160];
    snprintf(line, sizeof line, "\ngpu no: %d rows without a qvet GPU kernel yet; qvet check/fuzz --gpu leave them out",
             no_gpu);
    if (no_gpu)
        ck_assert_msg(strstr(r.out, line), "no line says which rows have no GPU kernel:\n%s", r.out);
    else
        ck_assert_msg(!strstr(r.out, "\ngpu no:"), "a line counts rows without a GPU kernel, and there are none:\n%s",
                      r.out);
    for (int i = 0; i < qv_moe_row_count(); i++) {
        char want[128];
        snprintf(want, sizeof want, "\n%s ", qv_moe_row_get(i)->name);
        ck_assert_msg(strstr(r.out, want), "table lacks a line for %s", qv_moe_row_get(i)->name);
    }
    run_free(&r);
    /* the routed rows alone, and as JSON with their specs parsing back */
    r = qvet_run((const char *[]){"list", "moe-*", NULL});
    ck_assert_int_eq(r.rc, 0);
    lines = 0;
    for (char *p = r.out; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, qv_moe_row_count() + 1);
    run_free(&r);
    r = qvet_run((const char *[]){"list", "--routed", "--json", NULL});
    ck_assert_int_eq(r.rc, 0);
    qv_json *j;
    ck_assert(qv_json_parse(r.out, strlen(r.out), &j) == QV_OK);
    ck_assert_int_eq(qv_json_len(j), qv_moe_row_count());
    for (int i = 0; i < qv_json_len(j); i++) {
        qv_moe_spec s;
        const char *spec = qv_json_str(qv_json_get(qv_json_at(j, i), "spec"));
        ck_assert_ptr_nonnull(spec);
        ck_assert_msg(qv_moe_spec_parse(spec, &s) == QV_OK, "%s: %s", spec, qv_errmsg());
        ck_assert_str_eq(s.text, spec);
    }
    qv_json_free(j);
    run_free(&r);
    ck_assert_int_eq(rows_without_gpu("qqq-*"), 0);
    r = qvet_run((const char *[]){"list", "qqq-*", NULL});
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_null(strstr(r.out, "gpu no:"));
    run_free(&r);
}
END_TEST

static qv_json *list_json(const char *pattern)
{
    run_result r = qvet_run((const char *[]){"list", "--json", pattern, NULL});
    ck_assert_msg(r.rc == 0, "qvet list --json exited %d: %s", r.rc, r.err);
    qv_json *j;
    ck_assert_msg(qv_json_parse(r.out, strlen(r.out), &j) == QV_OK, "qvet list --json is not JSON: %s",
                  qv_errmsg());
    run_free(&r);
    ck_assert_int_eq(qv_json_type_of(j), QV_JSON_ARRAY);
    return j;
}

static const char *fmt_name(qv_fmt f) { return f == QV_FMT_NONE ? "none" : qv_fmt_get(f)->name; }

static void expect_str(const qv_json *row, const char *key, const char *want)
{
    const char *got = qv_json_str(qv_json_get(row, key));
    ck_assert_msg(got, "key \"%s\" missing or not a string", key);
    if (want) ck_assert_msg(!strcmp(got, want), "\"%s\": \"%s\", expected \"%s\"", key, got, want);
}

static void expect_bool(const qv_json *row, const char *key, int want)
{
    const qv_json *b = qv_json_get(row, key);
    ck_assert_msg(qv_json_type_of(b) == QV_JSON_BOOL, "key \"%s\" missing or not a bool", key);
    ck_assert_msg(b->boolean == !!want, "\"%s\": %d, expected %d", key, b->boolean, !!want);
}

/* Registry invariants: names are unique, the Marlin and cuBLAS ones end in
 * the output format; every row has a CPU model; a row without a GPU kernel
 * is no baseline (bench compares against the cuBLAS rows); the FP4 layouts
 * hold e2m1 codes and nothing else does. */
START_TEST(test_registry_invariants)
{
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        for (int j = 0; j < i; j++) ck_assert_msg(strcmp(v->name, qv_registry_get(j)->name), "%s twice", v->name);
        /* README "Variant names": the cuBLAS and Marlin rows end in their output format */
        if (!strcmp(v->family, "marlin") || !strcmp(v->family, "cublas")) {
            const char *dash = strrchr(v->name, '-');
            ck_assert_msg(dash && !strcmp(dash + 1, fmt_name(v->ofmt)), "%s: name does not end in its output format %s",
                          v->name, fmt_name(v->ofmt));
        }
        ck_assert_msg(v->cpu_model, "%s has no CPU model", v->name);
        ck_assert_msg(v->gpu_kernel || strcmp(v->family, "cublas"), "%s: a baseline without a kernel", v->name);
        int fp4_layout = v->layout == QV_LAYOUT_MARLIN_FP4_MX || v->layout == QV_LAYOUT_MARLIN_FP4_NV;
        ck_assert_msg(fp4_layout == (v->wfmt == QV_FMT_E2M1), "%s: layout %s with %s codes", v->name,
                      qv_layout_name(v->layout), fmt_name(v->wfmt));
    }
}
END_TEST

/* Row _i of `qvet list --json` describes registry row _i, field by field. */
START_TEST(test_list_json_row)
{
    const qv_variant *v = qv_registry_get(_i);
    qv_json *j = list_json(NULL);
    ck_assert_int_eq(qv_json_len(j), qv_registry_count());
    const qv_json *row = qv_json_at(j, _i);
    ck_assert_int_eq(qv_json_type_of(row), QV_JSON_OBJECT);
    expect_str(row, "name", v->name);
    expect_str(row, "summary", v->summary);
    expect_str(row, "weight_format", fmt_name(v->wfmt));
    expect_str(row, "act_format", fmt_name(v->afmt));
    expect_str(row, "out_format", fmt_name(v->ofmt));
    static const char *const layouts[] = {"tensor", "channel", "group", "group+channel", "block", "none"};
    const char *sl = qv_json_str(qv_json_get(row, "scale_layout"));
    int known = 0;
    for (size_t k = 0; sl && k < sizeof layouts / sizeof layouts[0]; k++) known |= !strcmp(sl, layouts[k]);
    ck_assert_msg(known, "%s: scale_layout \"%s\" is not one of the documented names", v->name, sl ? sl : "");
    expect_str(row, "scale_layout", qv_scale_layout_name(v->scale_layout));
    int64_t g;
    ck_assert(qv_json_int64(qv_json_get(row, "group_size"), &g) == QV_OK);
    int grouped = v->scale_layout == QV_SCALE_GROUP || v->scale_layout == QV_SCALE_GROUP_CHANNEL;
    ck_assert_int_eq(g, grouped ? v->g : 0);
    if (grouped) ck_assert_int_gt(g, 0);
    expect_bool(row, "zero_point", v->zero_point);
    expect_bool(row, "act_order", v->act_order);
    expect_str(row, "layout", qv_layout_name(v->layout));
    expect_str(row, "accumulate", qv_accum_name(v->arith.accum));
    expect_bool(row, "gpu", v->gpu_kernel);
    expect_bool(row, "cpu_model", v->cpu_model);
    expect_str(row, "dequant", qv_dequant_name(v->arith.dequant));
    expect_str(row, "act_scale", qv_act_scale_name(v->act_scale));
    const qv_json *ep = qv_json_get(row, "epilogue");
    ck_assert_int_eq(qv_json_type_of(ep), QV_JSON_ARRAY);
    int steps = 0;
    while (steps < QV_EP_MAX && v->arith.epilogue[steps] != QV_EP_END) steps++;
    ck_assert_int_eq(qv_json_len(ep), steps);
    for (int s = 0; s < steps; s++) ck_assert_ptr_nonnull(qv_json_str(qv_json_at(ep, s)));
    qv_json_free(j);
}
END_TEST

/* Every family the project verifies is listed. */
START_TEST(test_list_json_families)
{
    static const char *const families[] = {"cublas-", "marlin-w4a16-", "marlin-w8a16-", "marlin-fp8a16-",
                                           "marlin-mxfp4a16-", "marlin-nvfp4a16-", "qqq-w4a8-", "w8a8-i8-",
                                           "w8a8-fp8-"};
    qv_json *j = list_json(NULL);
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        int found = 0;
        for (int i = 0; i < qv_json_len(j); i++) {
            const char *name = qv_json_str(qv_json_get(qv_json_at(j, i), "name"));
            found += name && !strncmp(name, families[f], strlen(families[f]));
        }
        ck_assert_msg(found > 0, "no variant of family %s* in qvet list --json", families[f]);
    }
    qv_json_free(j);
    /* A pattern selects exactly the rows whose names match it. */
    j = list_json("qqq-*");
    int want = 0;
    for (int i = 0; i < qv_registry_count(); i++) want += qv_variant_match(qv_registry_get(i), "qqq-*");
    ck_assert_int_eq(qv_json_len(j), want);
    for (int i = 0; i < qv_json_len(j); i++)
        ck_assert(!strncmp(qv_json_str(qv_json_get(qv_json_at(j, i), "name")), "qqq-", 4));
    qv_json_free(j);
}
END_TEST

int main(void)
{
    printf("qvet binary: %s\n", qvet_path());
    TCase *tc;
    Suite *s = suite_single("cli", "cli", 60, &tc);
    tcase_add_test(tc, test_help);
    tcase_add_test(tc, test_no_arguments);
    tcase_add_test(tc, test_unknown_subcommand);
    tcase_add_test(tc, test_list_help);
    tcase_add_test(tc, test_list_bad_option);
    tcase_add_test(tc, test_list_table);
    tcase_add_test(tc, test_list_paths);
    tcase_add_test(tc, test_registry_invariants);
    tcase_add_loop_test(tc, test_list_json_row, 0, qv_registry_count());
    tcase_add_test(tc, test_list_json_families);
    return suite_run(s);
}
