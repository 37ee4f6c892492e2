/* cmd_list.c: `qvet list`, the variant registry as a table or as JSON (cli.h).
 * Everything printed comes from the registry rows (variant.h); nothing here
 * names a variant. */
#include <stdio.h>
#include <string.h>

#include "internal/cli.h"
#include <fnmatch.h>

#include "internal/json.h"
#include "internal/route.h"
#include "qvet/moe.h"
#include "qvet/spec.h"
#include "qvet/variant.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: qvet list [--json | --spec] [--routed] [PATTERN]\n"
               "       qvet list --spec SPEC\n"
               "       qvet list --paths [PATTERN]\n\n"
               "Prints every variant of the registry: its weight, activation and output formats,\n"
               "scale layout, group size g, zero points, act_order, packed layout, accumulation,\n"
               "and whether a GPU kernel and a CPU model exist (a row without a GPU kernel runs\n"
               "on --cpu and --plugin; qvet check and fuzz --gpu leave it out).\n\n"
               "Then the routed (mixture-of-experts) rows: router experts, shared experts, top-k,\n"
               "route and the experts' spec (docs/moe.md).\n\n"
               "  PATTERN   only variants whose name matches this glob (e.g. 'marlin-*', 'moe-*')\n"
               "  --routed  only the routed rows (with --json: their JSON array)\n"
               "  --paths   the route table of each GPU family the rows belong to: its kernel\n"
               "            paths in the order a launch asks them, what each covers (rows,\n"
               "            shapes, M) and the launch options that move it; then, per row,\n"
               "            the paths that can run it (docs/kernel-paths.md)\n"
               "  --json    a JSON array with one object per variant, for scripts\n"
               "  --spec    each row's declared arithmetic as a spec (docs/spec.md), one per line:\n"
               "            NAME SPEC; given a spec instead of a pattern, its canonical form\n"
               "            (or why it is refused)\n"
               "  -h, --help  this text\n");
}

static const char *fmt_name(qv_fmt f) { return f == QV_FMT_NONE ? "none" : qv_fmt_get(f)->name; }

static const char *ep_step_name(qv_ep_step s)
{
    switch (s) {
    case QV_EP_END: return "end";
    case QV_EP_SUB_AZP: return "sub-azp";
    case QV_EP_TO_F32: return "to-f32";
    case QV_EP_MUL_WSCALE: return "mul-wscale";
    case QV_EP_MUL_WSCALE2: return "mul-wscale2";
    case QV_EP_MUL_ASCALE: return "mul-ascale";
    case QV_EP_ADD_BIAS: return "add-bias";
    }
    return "?";
}

static const char *azp_name(qv_azp a)
{
    switch (a) {
    case QV_AZP_NONE: return "none";
    case QV_AZP_TENSOR: return "tensor";
    case QV_AZP_TOKEN: return "token";
    }
    return "?";
}

static const char *reduce_name(qv_reduce r) { return r == QV_RED_F32 ? "f32" : "none"; }

static const char *sat_name(qv_sat s) { return s == QV_SAT_FINITE ? "finite" : "none"; }

static void print_table(const char *glob)
{
    printf("%-29s %-5s %-5s %-4s %-13s %4s %-3s %-9s %-14s %-15s %-8s %-3s %-3s\n", "name", "w", "a", "out",
           "scales", "g", "zp", "act_order", "act_scale", "layout", "accum", "gpu", "cpu");
    int no_gpu = 0;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!qv_variant_match(v, glob)) continue;
        printf("%-29s %-5s %-5s %-4s %-13s %4d %-3s %-9s %-14s %-15s %-8s %-3s %-3s\n", v->name,
               fmt_name(v->wfmt), fmt_name(v->afmt), fmt_name(v->ofmt), qv_scale_layout_name(v->scale_layout),
               v->g, v->zero_point ? "yes" : "no", v->act_order ? "yes" : "no", qv_act_scale_name(v->act_scale),
               qv_layout_name(v->layout),
               qv_accum_name(v->arith.accum), v->gpu_kernel ? "yes" : "no", v->cpu_model ? "yes" : "no");
        no_gpu += !v->gpu_kernel;
    }
    /* One line after the table when some listed row has no kernel. */
    if (no_gpu)
        printf("gpu no: %d row%s without a qvet GPU kernel yet; qvet check/fuzz --gpu leave%s them out, --cpu runs "
               "the CPU model on the packed layout, --plugin runs your kernel\n",
               no_gpu, no_gpu == 1 ? "" : "s", no_gpu == 1 ? "s" : "");
}

/* One "key": value member; first tells whether a comma is needed before it. */
static void key(const char *k, int first)
{
    fputs(first ? "    " : ",\n    ", stdout);
    qv_json_fput_str(stdout, k);
    fputs(": ", stdout);
}

static void kv_str(const char *k, const char *v)
{
    key(k, 0);
    qv_json_fput_str(stdout, v);
}

static void kv_int(const char *k, long v)
{
    key(k, 0);
    printf("%ld", v);
}

static void kv_bool(const char *k, int v)
{
    key(k, 0);
    fputs(v ? "true" : "false", stdout);
}

static void print_json_row(const qv_variant *v)
{
    const qv_arith *a = &v->arith;
    fputs("  {\n", stdout);
    key("name", 1);
    qv_json_fput_str(stdout, v->name);
    char spec[QV_SPEC_MAX];
    if (qv_spec_format(v, spec, sizeof spec) >= 0) kv_str("spec", spec);
    kv_str("family", v->family);
    kv_str("summary", v->summary);
    kv_str("weight_format", fmt_name(v->wfmt));
    kv_str("act_format", fmt_name(v->afmt));
    kv_str("out_format", fmt_name(v->ofmt));
    kv_str("scale_format", fmt_name(v->sfmt));
    kv_str("scale_layout", qv_scale_layout_name(v->scale_layout));
    /* group_size is 0 unless the scales are grouped along K. */
    int grouped = v->scale_layout == QV_SCALE_GROUP || v->scale_layout == QV_SCALE_GROUP_CHANNEL;
    kv_int("group_size", grouped ? v->g : 0);
    kv_bool("zero_point", v->zero_point);
    kv_bool("act_order", v->act_order);
    kv_str("act_scale", qv_act_scale_name(v->act_scale));
    kv_str("act_zero_point", azp_name(v->azp));
    kv_str("layout", qv_layout_name(v->layout));
    kv_int("n_tile", v->n_tile);
    kv_int("k_tile", v->k_tile);
    kv_str("dequant", qv_dequant_name(a->dequant));
    kv_int("w_mul", a->w_mul ? a->w_mul : 1);
    kv_str("accumulate", qv_accum_name(a->accum));
    kv_int("block_b", a->block_b);
    kv_int("promote_nc", a->promote_nc);
    kv_int("acc_bits", a->acc_bits);
    kv_str("reduce", reduce_name(a->reduce));
    key("epilogue", 0);
    fputc('[', stdout);
    for (int s = 0; s < QV_EP_MAX && a->epilogue[s] != QV_EP_END; s++) {
        if (s) fputs(", ", stdout);
        qv_json_fput_str(stdout, ep_step_name(a->epilogue[s]));
    }
    fputc(']', stdout);
    kv_str("out_saturation", sat_name(a->out_sat));
    kv_bool("gpu", v->gpu_kernel);
    kv_bool("cpu_model", v->cpu_model);
    fputs("\n  }", stdout);
}

static void print_json(const char *glob)
{
    int first = 1;
    fputs("[", stdout);
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!qv_variant_match(v, glob)) continue;
        fputs(first ? "\n" : ",\n", stdout);
        print_json_row(v);
        first = 0;
    }
    fputs(first ? "]\n" : "\n]\n", stdout);
}

/* NAME SPEC per row; a row whose arithmetic has no spelling is an error. */
static int print_specs(const char *glob)
{
    int rc = 0;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!qv_variant_match(v, glob)) continue;
        char spec[QV_SPEC_MAX];
        if (qv_spec_format(v, spec, sizeof spec) < 0) {
            fprintf(stderr, "qvet list: %s: %s\n", v->name, spec);
            rc = 3;
            continue;
        }
        printf("%-29s %s\n", v->name, spec);
    }
    return rc;
}

static int routed_match(const qv_moe_row *r, const char *glob)
{
    return !glob || !*glob || fnmatch(glob, r->name, 0) == 0;
}

static void print_routed_table(const char *glob)
{
    printf("%-36s %7s %6s %4s %-20s %-11s %-4s %-12s %-3s %-3s  %s\n", "routed", "experts", "shared", "topk", "route",
           "selection", "rsf", "combine", "gpu", "cpu", "experts' spec");
    for (int i = 0; i < qv_moe_row_count(); i++) {
        const qv_moe_row *r = qv_moe_row_get(i);
        const qv_moe_spec *s;
        if (!routed_match(r, glob) || qv_moe_row_spec(r, &s) != QV_OK) continue;
        char ex[QV_SPEC_MAX];
        if (qv_spec_format(s->expert, ex, sizeof ex) < 0) snprintf(ex, sizeof ex, "%s", s->expert->name);
        /* the group limit (groups kept / groups) and the selection bias, "-" for neither */
        char sel[32] = "-";
        if (s->groups && s->sbias) snprintf(sel, sizeof sel, "%d/%d,sbias", s->gtopk, s->groups);
        else if (s->groups) snprintf(sel, sizeof sel, "%d/%d", s->gtopk, s->groups);
        else if (s->sbias) snprintf(sel, sizeof sel, "sbias");
        /* where the weight applies / how the terms are summed, and the shared experts' gate */
        char comb[32];
        snprintf(comb, sizeof comb, "%s/%s%s", qv_rw_name(s->rw), qv_moe_sum_name(s->sum), s->sgate ? ",gate" : "");
        printf("%-36s %7d %6d %4d %-20s %-11s %-4g %-12s %-3s %-3s  %s\n", r->name, r->experts, r->shared, s->topk,
               qv_route_name(s->route), sel, (double)s->rsf, comb, r->gpu_kernel ? "yes" : "no", "yes", ex);
    }
}

static void print_routed_json(const char *glob)
{
    int first = 1;
    fputs("[", stdout);
    for (int i = 0; i < qv_moe_row_count(); i++) {
        const qv_moe_row *r = qv_moe_row_get(i);
        const qv_moe_spec *s;
        if (!routed_match(r, glob) || qv_moe_row_spec(r, &s) != QV_OK) continue;
        fputs(first ? "\n  {\n" : ",\n  {\n", stdout);
        key("name", 1);
        qv_json_fput_str(stdout, r->name);
        kv_str("spec", s->text);
        kv_str("summary", r->summary);
        kv_str("expert", s->expert->name);
        kv_str("route", qv_route_name(s->route));
        kv_int("topk", s->topk);
        kv_int("groups", s->groups);
        kv_int("gtopk", s->gtopk);
        kv_bool("sbias", s->sbias);
        kv_str("rw", qv_rw_name(s->rw));
        kv_str("sum", qv_moe_sum_name(s->sum));
        kv_bool("sgate", s->sgate);
        key("rsf", 0);
        qv_json_fput_num(stdout, (double)s->rsf);
        kv_int("experts", r->experts);
        kv_int("shared", r->shared);
        kv_int("n", (long)r->n);
        kv_int("k", (long)r->k);
        kv_bool("gpu", r->gpu_kernel);
        kv_bool("cpu_model", 1);
        fputs("\n  }", stdout);
        first = 0;
    }
    fputs(first ? "]\n" : "\n]\n", stdout);
}

/* A set of enum values (route.h: QV_ROUTE_BIT) as names; nothing for 0 (any value). */
static void print_set(const char *what, uint32_t bits, const char *(*name)(int))
{
    if (!bits) return;
    printf(" %s", what);
    for (int e = 0; e < 32; e++)
        if ((bits >> e) & 1u) printf(" %s", name(e));
    printf(";");
}

static const char *layout_of(int e) { return qv_layout_name((qv_layout)e); }
static const char *fmt_of(int e) { return fmt_name((qv_fmt)e); }
static const char *scale_of(int e) { return qv_scale_layout_name((qv_scale_layout)e); }
static const char *ascale_of(int e) { return qv_act_scale_name((qv_act_scale)e); }

static void print_route(int i, const qv_route_row *r)
{
    printf("  %d. %-13s %s (%s)%s\n", i + 1, r->name, r->kernel, r->isa,
           r->may_decline ? ", may decline to the next row that covers the problem" : "");
    printf("     rows:   ");
    const int any = !r->layouts && !r->wfmts && !r->afmts && !r->scales && !r->act_scales && !r->zero_points &&
                    !r->act_order && !r->g_min && !r->g_mult;
    if (any) printf(" every row of the table's families;");
    print_set("layouts", r->layouts, layout_of);
    print_set("weights", r->wfmts, fmt_of);
    print_set("activations", r->afmts, fmt_of);
    print_set("scales", r->scales, scale_of);
    print_set("activation scales", r->act_scales, ascale_of);
    if (r->zero_points) printf(" zero points %s;", r->zero_points == QV_ROUTE_YES ? "only" : "none");
    if (r->act_order) printf(" act_order %s;", r->act_order == QV_ROUTE_YES ? "only" : "none");
    if (r->g_min) printf(" group scales g >= %d or g = K;", r->g_min);
    if (r->g_mult) printf(" group scales g a multiple of %d dividing K;", r->g_mult);
    printf("\n     shapes:  N >= %d", r->n_min > 1 ? r->n_min : 1);
    if (r->n_mult > 1) printf(", N %% %d = 0", r->n_mult);
    printf("; K >= %d", r->k_min > 1 ? r->k_min : 1);
    if (r->k_mult > 1) printf(", K %% %d = 0", r->k_mult);
    if (r->rule_doc) printf("; %s", r->rule_doc);
    printf("\n     M:       %s\n     options: %s\n", r->m_doc, r->opts_doc);
}

/* qvet list --paths: the route table of every family a row matching glob
 * belongs to, then each such row's paths. */
static void print_paths(const char *glob)
{
    int nt = 0;
    const qv_route_table *tables = qv_route_tables(&nt);
    int first = 1;
    for (int ti = 0; ti < nt; ti++) {
        const qv_route_table *t = &tables[ti];
        int used = 0;
        for (int i = 0; i < qv_registry_count(); i++) {
            const qv_variant *v = qv_registry_get(i);
            used += qv_variant_match(v, glob) && qv_route_table_of(v) == t;
        }
        if (!used) continue;
        printf("%sroute table %s: %s\n", first ? "" : "\n", t->name, t->doc);
        printf("  a launch runs the first path that covers its problem under its options\n");
        first = 0;
        for (int i = 0; i < t->n_rows; i++) print_route(i, &t->rows[i]);
        printf("  the paths of each row, in that order:\n");
        for (int i = 0; i < qv_registry_count(); i++) {
            const qv_variant *v = qv_registry_get(i);
            if (!qv_variant_match(v, glob) || qv_route_table_of(v) != t) continue;
            printf("    %-28s", v->name);
            for (int j = 0; j < t->n_rows; j++)
                if (qv_route_covers_row(&t->rows[j], v)) printf(" %s", t->rows[j].name);
            printf("\n");
        }
    }
    int none = 0;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!qv_variant_match(v, glob) || qv_route_table_of(v)) continue;
        if (!none++) printf("%srows without a GPU kernel (qvet check --cpu or --plugin):", first ? "" : "\n");
        printf(" %s", v->name);
    }
    if (none) printf("\n");
}

int qv_cmd_list(int argc, char **argv)
{
    int json = 0, specs = 0, routed = 0, paths = 0;
    const char *glob = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--spec")) {
            specs = 1;
        } else if (!strcmp(argv[i], "--routed")) {
            routed = 1;
        } else if (!strcmp(argv[i], "--paths")) {
            paths = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "qvet list: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!glob) {
            glob = argv[i];
        } else {
            fprintf(stderr, "qvet list: only one PATTERN is accepted ('%s' is a second)\n\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (json && specs) {
        fprintf(stderr, "qvet list: --json already holds each row's spec; give one of --json and --spec\n");
        return 2;
    }
    if (paths && (json || specs || routed)) {
        fprintf(stderr, "qvet list: --paths prints the route tables alone; give it without --json, --spec and "
                        "--routed\n");
        return 2;
    }
    /* a routed spec first: its expert part is a spec too (qv_is_spec holds) */
    if (specs && qv_moe_is_spec(glob)) {
        qv_moe_spec s;
        if (qv_moe_spec_parse(glob, &s) != QV_OK) {
            fprintf(stderr, "qvet list: %s\n", qv_errmsg());
            return 2;
        }
        printf("%s\n", s.text);
        return fflush(stdout) ? 3 : 0;
    }
    if (specs && qv_is_spec(glob)) {
        const qv_variant *v;
        qv_status st = qv_spec_parse(glob, &v);
        if (st != QV_OK) {
            fprintf(stderr, "qvet list: %s\n", qv_errmsg());
            return 2;
        }
        printf("%s\n", v->name);
        return fflush(stdout) ? 3 : 0;
    }
    int matched = 0, matched_routed = 0;
    for (int i = 0; i < qv_registry_count(); i++) matched += qv_variant_match(qv_registry_get(i), glob);
    for (int i = 0; i < qv_moe_row_count(); i++) matched_routed += routed_match(qv_moe_row_get(i), glob);
    if (routed) matched = 0;
    if (paths) matched_routed = 0;
    if (!matched && !matched_routed) {
        fprintf(stderr, "qvet list: no %svariant matches '%s' (qvet list shows them all)\n", routed ? "routed " : "",
                glob);
        return 2;
    }
    int rc = 0;
    if (paths) {
        print_paths(glob);
    } else if (json) {
        /* the GEMM rows' array as before; the routed rows' with --routed */
        if (routed) print_routed_json(glob);
        else print_json(glob);
    } else if (specs) {
        if (matched) rc = print_specs(glob);
        for (int i = 0; i < qv_moe_row_count(); i++) {
            const qv_moe_row *r = qv_moe_row_get(i);
            const qv_moe_spec *s;
            if (routed_match(r, glob) && qv_moe_row_spec(r, &s) == QV_OK) printf("%-28s %s\n", r->name, s->text);
        }
    } else {
        if (matched) print_table(glob);
        if (matched && matched_routed) printf("\n");
        if (matched_routed) print_routed_table(glob);
    }
    return fflush(stdout) ? 3 : rc;
}
