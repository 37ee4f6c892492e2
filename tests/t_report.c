/* t_report.c: `qvet report` renders a fixture, links only to files that exist,
 * writes well-formed non-empty SVG, skips malformed lines with their line
 * numbers, and is deterministic (same input, same bytes). It renders
 * degenerate results too (one case, all exact, all FAIL, one element, bench or
 * ppl alone, null fields, odd variant names, an empty file) with exit 0 and
 * well-formed SVG, and keeps exit 3 for a missing or failing gnuplot. */
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/suite.h"

static char qvet_bin[4096];
static const char *fixture = "tests/data/report_fixture.jsonl";

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = '\0';
    if (len) *len = got;
    return buf;
}

/* Runs `qvet report ARGS` with stderr captured into err_path; returns the exit code. */
static int run_report(const char *args, const char *err_path)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s report %s 2>%s >/dev/null", qvet_bin, args, err_path);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void make_tmpdir(char *buf, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, cap, "%s/qvet_report_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

/* ---- a minimal XML well-formedness checker --------------------------------- */

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == ':';
}

/* Returns NULL when s is well-formed XML with exactly one root element, an
 * <svg>, else a short description of the first problem. */
static const char *xml_check(const char *s)
{
    const char *stack[256];
    size_t lens[256];
    int depth = 0, roots = 0;
    /* XML 1.0 admits no control character but tab, newline and carriage return. */
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 0x20 && *c != '\t' && *c != '\n' && *c != '\r') return "control character";
    while (*s) {
        if (*s == '&') {
            const char *e = strchr(s, ';');
            if (!e || e - s > 10) return "bad entity";
            if (!(s[1] == '#' || !strncmp(s, "&amp;", 5) || !strncmp(s, "&lt;", 4) || !strncmp(s, "&gt;", 4) ||
                  !strncmp(s, "&quot;", 6) || !strncmp(s, "&apos;", 6)))
                return "unknown entity";
            s = e + 1;
        } else if (*s != '<') {
            s++;
        } else if (!strncmp(s, "<?", 2)) {
            const char *e = strstr(s, "?>");
            if (!e) return "unterminated processing instruction";
            s = e + 2;
        } else if (!strncmp(s, "<!--", 4)) {
            const char *e = strstr(s + 4, "-->");
            if (!e) return "unterminated comment";
            s = e + 3;
        } else if (!strncmp(s, "<![CDATA[", 9)) {
            const char *e = strstr(s, "]]>");
            if (!e) return "unterminated CDATA";
            s = e + 3;
        } else if (!strncmp(s, "<!", 2)) {
            const char *e = strchr(s, '>');
            if (!e) return "unterminated declaration";
            s = e + 1;
        } else if (s[1] == '/') {
            const char *n = s + 2, *e = n;
            while (is_name_char(*e)) e++;
            if (depth == 0 || (size_t)(e - n) != lens[depth - 1] || strncmp(n, stack[depth - 1], (size_t)(e - n)))
                return "mismatched end tag";
            depth--;
            while (*e == ' ' || *e == '\n' || *e == '\t' || *e == '\r') e++;
            if (*e != '>') return "bad end tag";
            s = e + 1;
        } else {
            const char *n = s + 1, *e = n;
            while (is_name_char(*e)) e++;
            if (e == n) return "empty tag name";
            if (depth == 0 && (roots++ || e - n != 3 || strncmp(n, "svg", 3))) return "root element is not one <svg>";
            for (;;) {
                while (*e == ' ' || *e == '\n' || *e == '\t' || *e == '\r') e++;
                if (*e == '>' || (e[0] == '/' && e[1] == '>')) break;
                const char *an = e;
                while (is_name_char(*e)) e++;
                if (e == an) return "bad attribute name";
                while (*e == ' ' || *e == '\n' || *e == '\t') e++;
                if (*e++ != '=') return "attribute without value";
                while (*e == ' ' || *e == '\n' || *e == '\t') e++;
                char q = *e++;
                if (q != '"' && q != '\'') return "unquoted attribute";
                while (*e && *e != q) {
                    if (*e == '<') return "'<' in attribute";
                    e++;
                }
                if (!*e) return "unterminated attribute";
                e++;
            }
            if (*e == '/') {
                s = e + 2;
            } else {
                if (depth == 256) return "too deep";
                stack[depth] = n;
                lens[depth++] = (size_t)(strcspn(n, " \t\r\n/>"));
                s = e + 1;
            }
        }
    }
    if (depth) return "unclosed element";
    if (roots != 1) return "not exactly one root element";
    return NULL;
}

START_TEST(xml_checker_can_fail)
{
    /* The checker itself must reject broken documents, or the SVG test is vacuous. */
    ck_assert_ptr_null(xml_check("<svg a=\"1\"><g></g><path d='x'/></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg><g></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg a=1></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg>&bogus;</svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg></svg><svg></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg>"));
    ck_assert_ptr_nonnull(xml_check("<html></html>"));
    ck_assert_ptr_nonnull(xml_check("<svg><text>a < b</text></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg><text>a\001b</text></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg a=\"x<y\"></svg>"));
    ck_assert_ptr_null(
        xml_check("<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg><text>a &amp; b &gt; c</text></svg>\n"));
}
END_TEST

START_TEST(fixture_renders_links_exist_svgs_wellformed)
{
    char dir[256], err[300], args[1024];
    make_tmpdir(dir, sizeof dir);
    snprintf(err, sizeof err, "%s.err", dir);
    snprintf(args, sizeof args, "%s -o %s", fixture, dir);
    ck_assert_int_eq(run_report(args, err), 0);

    char path[512];
    snprintf(path, sizeof path, "%s/index.md", dir);
    char *md = slurp(path, NULL);
    ck_assert_ptr_nonnull(md);
    /* Every section the fixture feeds is present. */
    ck_assert_ptr_nonnull(strstr(md, "## Verdicts"));
    ck_assert_ptr_nonnull(strstr(md, "## Worst cases"));
    ck_assert_ptr_nonnull(strstr(md, "## Mutation testing"));
    ck_assert_ptr_nonnull(strstr(md, "## Perplexity"));
    ck_assert_ptr_nonnull(strstr(md, "## Speed"));
    ck_assert_ptr_nonnull(strstr(md, "## Provenance"));
    ck_assert_ptr_nonnull(strstr(md, "qvet replay --seed 7 --case 2 --cpu"));
    ck_assert_ptr_nonnull(strstr(md, "**0/0/1**")); /* the FAIL cell is marked */

    /* Every link "](target)" names a file that exists and, for SVG, is well-formed. */
    int links = 0;
    for (const char *p = md; (p = strstr(p, "](")) != NULL; p += 2) {
        const char *e = strchr(p + 2, ')');
        ck_assert_ptr_nonnull(e);
        char target[512];
        snprintf(target, sizeof target, "%s/%.*s", dir, (int)(e - p - 2), p + 2);
        struct stat st;
        ck_assert_msg(stat(target, &st) == 0, "link to missing file %s", target);
        ck_assert_msg(st.st_size > 0, "empty file %s", target);
        if (strstr(target, ".svg")) {
            char *svg = slurp(target, NULL);
            const char *why = xml_check(svg);
            ck_assert_msg(why == NULL, "%s is not well-formed XML: %s", target, why);
            ck_assert_ptr_nonnull(strstr(svg, "<svg"));
            free(svg);
        }
        links++;
    }
    ck_assert_int_ge(links, 3); /* two variant plots and one speed plot */

    /* Malformed lines are named with their line numbers, and skipped. */
    char *errs = slurp(err, NULL);
    ck_assert_ptr_nonnull(strstr(errs, "report_fixture.jsonl:4:"));
    ck_assert_ptr_nonnull(strstr(errs, "report_fixture.jsonl:6:"));
    ck_assert_ptr_nonnull(strstr(errs, "report_fixture.jsonl:7:"));
    ck_assert_ptr_null(strstr(errs, "report_fixture.jsonl:2:"));
    free(errs);
    free(md);
}
END_TEST

/* Compares every regular file of two folders (one level plus plots/). */
static void same_tree(const char *a, const char *b, const char *sub)
{
    char da[512], db[512];
    snprintf(da, sizeof da, "%s/%s", a, sub);
    snprintf(db, sizeof db, "%s/%s", b, sub);
    DIR *d = opendir(da);
    ck_assert_ptr_nonnull(d);
    struct dirent *ent;
    int files = 0;
    while ((ent = readdir(d))) {
        if (ent->d_name[0] == '.') continue;
        char pa[1024], pb[1024];
        snprintf(pa, sizeof pa, "%s/%s", da, ent->d_name);
        snprintf(pb, sizeof pb, "%s/%s", db, ent->d_name);
        struct stat st;
        if (stat(pa, &st) || !S_ISREG(st.st_mode)) continue;
        size_t la, lb;
        char *ca = slurp(pa, &la), *cb = slurp(pb, &lb);
        ck_assert_msg(cb != NULL, "%s missing in the second run", ent->d_name);
        ck_assert_msg(la == lb && !memcmp(ca, cb, la), "%s differs between runs", ent->d_name);
        free(ca);
        free(cb);
        files++;
    }
    closedir(d);
    ck_assert_int_gt(files, 0);
}

START_TEST(deterministic_bytes)
{
    char d1[256], d2[256], err[300], args[1024];
    make_tmpdir(d1, sizeof d1);
    make_tmpdir(d2, sizeof d2);
    snprintf(err, sizeof err, "%s.err", d1);
    snprintf(args, sizeof args, "%s -o %s", fixture, d1);
    ck_assert_int_eq(run_report(args, err), 0);
    snprintf(args, sizeof args, "%s -o %s", fixture, d2);
    ck_assert_int_eq(run_report(args, err), 0);
    same_tree(d1, d2, ".");
    same_tree(d1, d2, "plots");
}
END_TEST

START_TEST(bad_invocations_exit_2)
{
    char dir[256], err[300], args[1024];
    make_tmpdir(dir, sizeof dir);
    snprintf(err, sizeof err, "%s.err", dir);
    snprintf(args, sizeof args, "/nonexistent/results.jsonl -o %s", dir);
    ck_assert_int_eq(run_report(args, err), 2);
    char *e = slurp(err, NULL);
    ck_assert_ptr_nonnull(strstr(e, "cannot open"));
    free(e);
    /* A folder is not a results file: refused by name, not read as empty. */
    snprintf(args, sizeof args, "tests/data -o %s", dir);
    ck_assert_int_eq(run_report(args, err), 2);
    e = slurp(err, NULL);
    ck_assert_msg(strstr(e, "tests/data") != NULL, "the message does not name the input: %s", e);
    free(e);
    snprintf(args, sizeof args, "%s", fixture); /* no -o */
    ck_assert_int_eq(run_report(args, err), 2);
    snprintf(args, sizeof args, "--bogus %s -o %s", fixture, dir);
    ck_assert_int_eq(run_report(args, err), 2);
    /* Nothing half-written: a refused run leaves no index.md behind. */
    char path[512];
    snprintf(path, sizeof path, "%s/index.md", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

/* ---- degenerate inputs, in the record formats qvet writes ------------------- */

/* s as a JSON string: quotes, backslashes and control characters escaped. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* The provenance line every command writes first (fuzz/cmd_campaign.c,
 * bench/cmd_bench.c, eval/cmd_ppl.c). */
static void run_line(FILE *f, const char *command, const char *backend)
{
    fputs("{\"kind\":\"run\",\"command\":", f);
    json_str(f, command);
    fprintf(f, ",\"qvet_version\":\"0.1.0\",\"commit\":\"unknown\",\"date\":\"2026-12-04T00:00:00Z\","
               "\"host\":\"ci\",\"backend\":\"%s\",\"gpu\":null,\"driver\":null,\"cuda\":null,\"seed\":4242,"
               "\"shard\":\"0/1\"}\n",
            backend);
}

/* One "kind":"case" line with every member fuzz/runner.c (qv_case_json) and
 * src/result.c write. Numbers are JSON text, so any of them can be "null";
 * hist_eb / hist_ulp are JSON arrays, or NULL for a case without exact truth
 * (then the line has neither histograms nor criteria). */
typedef struct case_rec {
    const char *variant, *verdict, *probe;
    const char *m, *n, *k;
    const char *eb, *abs_err, *ulp, *alpha_g;
    const char *hist_eb, *hist_ulp;
} case_rec;

static void case_line(FILE *f, int index, const case_rec *c)
{
    const long long elements = atoll(c->m) * atoll(c->n);
    fprintf(f, "{\"kind\":\"case\",\"seed\":4242,\"case\":%d,\"suite\":\"fuzz\",\"variant\":", index);
    json_str(f, c->variant);
    fprintf(f, ",\"family\":\"w8a8\",\"backend\":\"cpu\",\"m\":%s,\"n\":%s,\"k\":%s,\"g\":0,"
               "\"shape_class\":\"random\",\"probe\":\"%s\",\"regime\":\"loguniform\",\"verdict\":\"%s\","
               "\"reason\":\"%s\",\"ref_path\":\"fixed128\",\"ref_why\":\"exact __int128 sum\","
               "\"n_elements\":%lld,\"n_fail\":%lld,\"n_nan\":0,\"n_inf\":0,\"n_unwritten\":0,"
               "\"max_err_over_bound\":%s,\"p99_err_over_bound\":%s,\"max_abs_err\":%s,\"max_ulp\":%s,"
               "\"p99_ulp\":%s,\"nmse\":0,\"norm_rel\":0,\"bias_z\":0,"
               "\"worst\":{\"m\":0,\"n\":0,\"out\":1,\"y\":1,\"bound\":136.03}",
            c->m, c->n, c->k, c->probe, c->verdict, strcmp(c->verdict, "FAIL") ? "" : "out of bound at (0, 0)",
            elements, strcmp(c->verdict, "FAIL") ? 0 : elements, c->eb, c->eb, c->abs_err, c->ulp, c->ulp);
    if (c->hist_eb)
        fputs(",\"criteria\":{\"mean_rel\":0,\"cosine\":1,\"nmse\":0,\"marlin_pass\":true,\"vllm_pass\":true,"
              "\"cosine_pass\":true,\"nmse_pass\":true}",
              f);
    fprintf(f, ",\"alpha_g_max\":%s,\"time_ms\":8.6", c->alpha_g);
    if (c->hist_eb) fprintf(f, ",\"hist_err_over_bound\":%s,\"hist_ulp\":%s", c->hist_eb, c->hist_ulp);
    fprintf(f, ",\"out_fnv1a64\":\"654068e5b47b4325\",\"replay\":\"qvet replay --seed 4242 --case %d --cpu\"}\n",
            index);
}

/* A histogram of `bins` counts (JSON text in buf) with `count` in bin `at`
 * and zero elsewhere. */
static const char *hist_at(char *buf, size_t cap, int bins, int at, long long count)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int b = 0; b < bins; b++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", b ? "," : "", b == at ? count : 0);
    snprintf(buf + len, cap - len, "]");
    return buf;
}

/* One "kind":"bench" line as bench/cmd_bench.c (emit) writes it; numbers are
 * JSON text, so any of them can be "null". */
static void bench_line(FILE *f, const char *variant, const char *model, const char *layer, const char *m,
                       const char *median_us, const char *floor_us, const char *vs_cublas)
{
    fputs("{\"kind\":\"bench\",\"variant\":", f);
    json_str(f, variant);
    fprintf(f, ",\"model\":\"%s\",\"layer\":\"%s\",\"m\":%s,\"n\":0,\"k\":0,\"median_us\":%s,\"p10_us\":null,"
               "\"p90_us\":null,\"runs\":50,\"floor_bytes\":1.7e9,\"floor_us\":%s,\"floor_fraction\":null,"
               "\"vs_cublas\":%s}\n",
            model, layer, m, median_us, floor_us, vs_cublas);
}

/* One "kind":"ppl" line as eval/cmd_ppl.c (emit) writes it. */
static void ppl_line(FILE *f, const char *variant, const char *ppl, const char *dppl, const char *kld,
                     const char *top1)
{
    fputs("{\"kind\":\"ppl\",\"variant\":", f);
    json_str(f, variant);
    fprintf(f, ",\"backend\":\"cpu-fast\",\"model\":\"SmolLM2-135M-Instruct.Q4_1.gguf\",\"model_sha256\":\"b179\","
               "\"text\":\"pride-and-prejudice.txt\",\"text_sha256\":\"dfc6\",\"tokens\":167892,\"ctx\":512,"
               "\"chunks\":4,\"scored\":1020,\"ppl\":%s,\"ppl_stderr\":1.47,\"ppl_base\":17.396,\"dppl\":%s,"
               "\"dppl_stderr\":0,\"kld_mean\":%s,\"kld_stderr\":0,\"kld_p99\":%s,\"kld_max\":%s,"
               "\"same_top1\":%s,\"same_top1_stderr\":0,\"rms_dp\":0,\"layer_nmse\":[0,%s,0]}\n",
            ppl, dppl, kld, kld, kld, top1, kld);
}

/* Each scenario writes one results file and says how many SVG plots the
 * report must hold: one per case variant and one per bench model with data. */
typedef struct scenario {
    const char *name;
    void (*write)(FILE *f);
    int svgs;           /* plots the report draws; -1: not counted */
    const char *md_has; /* text index.md must hold */
} scenario;

static void sc_one_case(FILE *f)
{
    run_line(f, "qvet fuzz --cpu --cases 1 --seed 4242", "cpu");
    /* 4096 elements: most exact, some a few ulps away, all inside the bound. */
    case_line(f, 0,
              &(case_rec){"marlin-w4a16-g128-f16", "PASS", "random", "16", "256", "512", "0.12", "0.0009", "1",
                          "0.008", "[4000,60,30,6,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]", "[4000,96,0,0,0,0,0]"});
}

/* Every element of every case exact: all errors 0, the histograms one bin
 * (what `qvet fuzz --cpu --cases 300 --seed 4242` gives w8a8-fp8-block128). */
static void sc_all_exact(FILE *f)
{
    static const char *const variants[] = {"w8a8-fp8-block128", "qqq-w4a8-ch-f16", "w8a8-i8-tok-ch-f16"};
    static const char *const ks[] = {"864", "128", "4096"};
    char he[256], hu[128];
    run_line(f, "qvet fuzz --cpu --cases 300 --seed 4242", "cpu");
    int index = 0;
    for (int v = 0; v < 3; v++)
        for (int i = 0; i < 3; i++)
            case_line(f, index++,
                      &(case_rec){variants[v], "PASS", "exact", "4", "128", ks[i], "0", "0", "0", "136.04",
                                  hist_at(he, sizeof he, 21, 0, 512), hist_at(hu, sizeof hu, 7, 0, 512)});
}

/* Every case FAILs: every element past the bound and 16 ulps or more away. */
static void sc_all_fail(FILE *f)
{
    char he[256], hu[128];
    run_line(f, "qvet check --cpu", "cpu");
    case_line(f, 0,
              &(case_rec){"w8a8-fp8-tok-ch", "FAIL", "witness-fp8-promotion", "33", "128", "1024", "41.5", "127",
                          "64", "3.06", hist_at(he, sizeof he, 21, 20, 33 * 128),
                          hist_at(hu, sizeof hu, 7, 6, 33 * 128)});
    case_line(f, 1,
              &(case_rec){"w8a8-fp8-tok-ch", "FAIL", "witness-fp8-promotion", "1", "128", "4096", "1e6", "65504",
                          "1024", "0.5", hist_at(he, sizeof he, 21, 20, 128), hist_at(hu, sizeof hu, 7, 6, 128)});
    case_line(f, 2,
              &(case_rec){"marlin-w4a16-ch-f16", "FAIL", "onehot", "1", "64", "64", "3.5", "2", "20", "0.25",
                          hist_at(he, sizeof he, 21, 20, 64), hist_at(hu, sizeof hu, 7, 6, 64)});
}

/* A variant whose only case has a single output element (m = n = k = 1). */
static void sc_single_element(FILE *f)
{
    char he[256], hu[128];
    run_line(f, "qvet check --cpu --variant w8a8-i8-ch-f16", "cpu");
    case_line(f, 0,
              &(case_rec){"w8a8-i8-ch-f16", "PASS", "random", "1", "1", "1", "0.5", "0.001", "0",
                          "0.002", hist_at(he, sizeof he, 21, 10, 1), hist_at(hu, sizeof hu, 7, 0, 1)});
}

/* Timings only: one model with two rows at a single M (a one-point x range),
 * another with one row whose floor and cuBLAS ratio are unmeasured. */
static void sc_bench_only(FILE *f)
{
    run_line(f, "qvet bench --m 1", "gpu");
    bench_line(f, "cublas-f16", "llama3-70b", "qkv", "1", "120.5", "101.2", "1");
    bench_line(f, "cublas-f16", "llama3-70b", "block", "1", "470", "405", "1");
    bench_line(f, "marlin-w4a16-g128-f16", "llama3-70b", "block", "1", "150", "101", "3.13");
    bench_line(f, "act-quant-i8", "llama2-7b", "block", "16", "12.5", "null", "null");
}

/* Perplexity only: the fp32 baseline against itself (all differences 0) and one variant. */
static void sc_ppl_only(FILE *f)
{
    run_line(f, "qvet ppl --cpu-fast --variant all", "cpu-fast");
    ppl_line(f, "fp32", "17.396", "0", "0", "1");
    ppl_line(f, "marlin-w4a16-g128-f16", "17.52", "0.124", "0.0031", "0.97");
}

/* Null wherever a number may be missing: cases verified without exact truth
 * (no histograms), null errors, bounds, ulps and K, histograms holding null,
 * a bench row with null times and M = 0, ppl rows with null statistics. */
static void sc_nan_null(FILE *f)
{
    run_line(f, "qvet verify --cpu", "cpu");
    case_line(f, 0,
              &(case_rec){"w8a8-fp8-tensor", "PASS", "random", "8", "64", "256", "null", "null", "null", "null", NULL,
                          NULL});
    case_line(f, 1,
              &(case_rec){"w8a8-fp8-tensor", "MARGINAL", "random", "8", "64", "null", "0.9", "0.01", "null", "null",
                          NULL, NULL});
    case_line(f, 2,
              &(case_rec){"w8a8-fp8-tensor", "FAIL", "random", "8", "64", "512", "null", "1e-3", "3", "null",
                          "[1,null,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]", "[null,0,0,0,0,0,0]"});
    case_line(f, 3,
              &(case_rec){"qqq-w4a8-g128-f16", "PASS", "exact", "null", "null", "null", "null", "null", "null", "null",
                          NULL, NULL});
    bench_line(f, "cublas-f16", "llama2-7b", "block", "0", "null", "null", "null");
    bench_line(f, "cublas-f16", "llama2-7b", "block", "null", "-5", "0", "null");
    ppl_line(f, "marlin-w4a16-g128-f16", "null", "null", "null", "null");
}

/* Variant names that are hostile to gnuplot's quoting, to XML, to Markdown
 * and to file names: quotes, markup, a newline, a control character, an
 * empty name, and two names that read the same as file names. */
static void sc_odd_names(FILE *f)
{
    static const char *const names[] = {"it's \"quoted\"", "a<b>&c", "two\nlines", "ctl\001x", "",
                                        "x/y",           "x_y",     "back`tick|pipe"};
    char he[256], hu[128];
    run_line(f, "qvet check --plugin ./libodd.so", "plugin:odd");
    for (int i = 0; i < 8; i++)
        case_line(f, i,
                  &(case_rec){names[i], i % 2 ? "FAIL" : "PASS", "random", "4", "64", "128", i % 2 ? "2" : "0.25",
                              "0.001", "1", "0.004", hist_at(he, sizeof he, 21, i % 2 ? 20 : 5, 256),
                              hist_at(hu, sizeof hu, 7, 1, 256)});
    bench_line(f, "it's <odd>", "llama3-70b", "block", "1", "100", "50", "2");
}

static void sc_empty(FILE *f) { (void)f; }

/* Routed lines only: two rows, one failing with a routing reason. */
static void sc_routed_only(FILE *f)
{
    fputs("{\"kind\":\"routed\",\"seed\":1,\"case\":0,\"suite\":\"check\",\"variant\":\"moe-a\",\"spec\":\"s\","
          "\"backend\":\"cpu\",\"t\":37,\"n\":128,\"k\":256,\"experts\":8,\"local\":8,\"shared\":0,"
          "\"logits\":\"ties\",\"probe\":\"exact\",\"route_bad\":0,\"weight_bad\":0,\"ambiguous\":3,"
          "\"verdict\":\"PASS\",\"reason\":\"\",\"max_err_over_bound\":0.25,\"time_ms\":1,"
          "\"out_fnv1a64\":\"0\",\"replay\":\"qvet replay --check --seed 1 --case 0 --variant moe-a --cpu\"}\n", f);
    fputs("{\"kind\":\"routed\",\"seed\":1,\"case\":5,\"suite\":\"fuzz\",\"variant\":\"moe-b\",\"spec\":\"s\","
          "\"backend\":\"cpu\",\"t\":1,\"n\":64,\"k\":128,\"experts\":256,\"local\":192,\"shared\":1,"
          "\"logits\":\"random\",\"probe\":\"random\",\"route_bad\":1,\"weight_bad\":0,\"ambiguous\":null,"
          "\"verdict\":\"FAIL\",\"reason\":\"routing: token 0 took expert 3 | 5\",\"max_err_over_bound\":null,"
          "\"time_ms\":1,\"out_fnv1a64\":\"0\",\"replay\":\"qvet replay --seed 1 --case 5 --variant moe-b --cpu\"}\n",
          f);
}

static void sc_everything(FILE *f)
{
    sc_one_case(f);
    sc_all_exact(f);
    sc_all_fail(f);
    sc_single_element(f);
    sc_bench_only(f);
    sc_ppl_only(f);
    sc_nan_null(f);
    sc_odd_names(f);
    sc_routed_only(f);
}

static const scenario scenarios[] = {
    {"one_case", sc_one_case, 1, "## Verdicts"},
    {"all_exact", sc_all_exact, 3, "9 cases: 9 PASS"},
    {"all_fail", sc_all_fail, 2, "3 cases: 0 PASS, 0 MARGINAL, 3 FAIL"},
    {"single_element", sc_single_element, 1, "## Verdicts"},
    {"bench_only", sc_bench_only, 2, "## Speed"},
    {"ppl_only", sc_ppl_only, 0, "## Perplexity"},
    {"nan_null", sc_nan_null, 2, "not plotted"},
    {"odd_names", sc_odd_names, 9, "## Verdicts"},
    {"empty", sc_empty, 0, "hold no results"},
    {"routed_only", sc_routed_only, 0, "| `moe-b` | 1 | 0 | 0 | 1 | 0 | 1 | 0 | 0 |"},
    {"everything", sc_everything, -1, "## Speed"},
};

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *at)
{
    (void)st, (void)flag, (void)at;
    return remove(path);
}

/* Removes dir and everything under it: the output of a test that passed. */
static void remove_tree(const char *dir) { ck_assert_int_eq(nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0); }

static int ends_with(const char *s, const char *tail)
{
    size_t ls = strlen(s), lt = strlen(tail);
    return ls >= lt && !strcmp(s + ls - lt, tail);
}

/* Asserts that every link "](target)" of index.md names an existing non-empty
 * file, and that every SVG in DIR/plots is well-formed; returns the SVG count. */
static int check_report_files(const char *dir, const char *md)
{
    for (const char *p = md; (p = strstr(p, "](")) != NULL; p += 2) {
        const char *e = strchr(p + 2, ')');
        ck_assert_ptr_nonnull(e);
        char target[1024];
        snprintf(target, sizeof target, "%s/%.*s", dir, (int)(e - p - 2), p + 2);
        struct stat st;
        ck_assert_msg(stat(target, &st) == 0 && st.st_size > 0, "link to a missing or empty file %s", target);
    }
    char plots[600];
    snprintf(plots, sizeof plots, "%s/plots", dir);
    DIR *d = opendir(plots);
    ck_assert_ptr_nonnull(d);
    int svgs = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (!ends_with(ent->d_name, ".svg")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", plots, ent->d_name);
        size_t len;
        char *svg = slurp(path, &len);
        ck_assert_ptr_nonnull(svg);
        ck_assert_msg(strlen(svg) == len, "%s holds a NUL byte", path);
        const char *why = xml_check(svg);
        ck_assert_msg(why == NULL, "%s is not well-formed XML: %s", path, why);
        free(svg);
        svgs++;
    }
    closedir(d);
    return svgs;
}

START_TEST(degenerate_inputs_render)
{
    const scenario *sc = &scenarios[_i];
    char dir[256], input[300], err[300], args[1024];
    make_tmpdir(dir, sizeof dir);
    snprintf(input, sizeof input, "%s.%s.jsonl", dir, sc->name);
    snprintf(err, sizeof err, "%s.err", dir);
    FILE *f = fopen(input, "w");
    ck_assert_ptr_nonnull(f);
    sc->write(f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(args, sizeof args, "%s -o %s", input, dir);
    const int rc = run_report(args, err);
    char *errs = slurp(err, NULL);
    ck_assert_msg(rc == 0, "%s: qvet report exited %d: %s", sc->name, rc, errs);
    /* Every line above is a well-formed record: nothing is skipped. */
    ck_assert_msg(strstr(errs, "skipped") == NULL, "%s: %s", sc->name, errs);
    free(errs);

    char path[512];
    snprintf(path, sizeof path, "%s/index.md", dir);
    char *md = slurp(path, NULL);
    ck_assert_ptr_nonnull(md);
    ck_assert_msg(strstr(md, sc->md_has) != NULL, "%s: index.md lacks \"%s\"", sc->name, sc->md_has);
    const int svgs = check_report_files(dir, md);
    if (sc->svgs >= 0) ck_assert_msg(svgs == sc->svgs, "%s: %d SVG plots, expected %d", sc->name, svgs, sc->svgs);
    free(md);
    remove_tree(dir);
    unlink(input);
    unlink(err);
}
END_TEST

/* Writes an executable `gnuplot` into dir that prints a message to stderr and
 * fails, as a broken installation would. */
static void fake_gnuplot(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gnuplot", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#!/bin/sh\necho 'fake gnuplot: cannot open terminal svg' >&2\nexit 1\n", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, 0755), 0);
}

START_TEST(gnuplot_missing_or_failing_exits_3)
{
    char dir[256], bin[256], err[300], args[1024];
    make_tmpdir(dir, sizeof dir);
    make_tmpdir(bin, sizeof bin);
    snprintf(err, sizeof err, "%s.err", dir);

    /* No gnuplot on PATH: an environment error, said as such; index.md is still written. */
    snprintf(args, sizeof args, "%s -o %s", fixture, dir);
    char full[8192];
    snprintf(full, sizeof full, "PATH=%s %s report %s 2>%s >/dev/null", bin, qvet_bin, args, err);
    int rc = system(full);
    ck_assert_int_eq(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 3);
    char *e = slurp(err, NULL);
    ck_assert_msg(strstr(e, "gnuplot") != NULL && strstr(e, "not found") != NULL, "no clear message: %s", e);
    free(e);
    char path[512];
    snprintf(path, sizeof path, "%s/index.md", dir);
    char *md = slurp(path, NULL);
    ck_assert_ptr_nonnull(md);
    check_report_files(dir, md);
    free(md);

    /* A gnuplot that fails: exit 3, and its own stderr reaches the message. */
    fake_gnuplot(bin);
    snprintf(full, sizeof full, "PATH=%s:/usr/bin:/bin %s report %s 2>%s >/dev/null", bin, qvet_bin, args, err);
    rc = system(full);
    ck_assert_int_eq(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 3);
    e = slurp(err, NULL);
    ck_assert_msg(strstr(e, "fake gnuplot: cannot open terminal svg") != NULL, "gnuplot's stderr not shown: %s", e);
    free(e);
    md = slurp(path, NULL);
    ck_assert_ptr_nonnull(md);
    check_report_files(dir, md);
    free(md);
    remove_tree(dir);
    remove_tree(bin);
    unlink(err);
}
END_TEST

int main(int argc, char **argv)
{
    /* The qvet binary sits one folder above the test binary: BUILD/tests/t_report -> BUILD/qvet. */
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(qvet_bin, sizeof qvet_bin, "%s/../qvet", dirname(self));
    if (access(qvet_bin, X_OK)) {
        fprintf(stderr, "t_report: %s not found; build it with make first\n", qvet_bin);
        return 1;
    }
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("render");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, xml_checker_can_fail);
    tcase_add_test(tc, fixture_renders_links_exist_svgs_wellformed);
    tcase_add_test(tc, deterministic_bytes);
    tcase_add_test(tc, bad_invocations_exit_2);
    tcase_add_loop_test(tc, degenerate_inputs_render, 0, (int)(sizeof scenarios / sizeof scenarios[0]));
    tcase_add_test(tc, gnuplot_missing_or_failing_exits_3);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
