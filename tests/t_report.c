/* t_report.c: `qvet report` renders a fixture, links only to files that exist,
 * writes well-formed non-empty SVG, skips malformed lines with their line
 * numbers, and is deterministic (same input, same bytes). */
#include <check.h>
#include <dirent.h>
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

/* Returns NULL when s is well-formed XML with exactly one root element, else a
 * short description of the first problem. */
static const char *xml_check(const char *s)
{
    const char *stack[256];
    size_t lens[256];
    int depth = 0, roots = 0;
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
            if (depth == 0) roots++;
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
    suite_add_tcase(s, tc);
    return suite_run(s);
}
