/* t_mutants.c: the mutant catalogue (mutants/catalogue.tsv) is well formed and
 * every switch it names is placed in the sources, so `make mutants-cpu` and
 * `make mutants` never report a mutant as "placed nowhere": six tab-separated
 * columns, a bug class of docs/design.md §6 (its numbered rows), backends among cpu/gpu or the
 * single word none (with a reason), every class present but those whose code
 * has yet to land (ABSENT below), and
 * for each built mutant the token QV_MUTANT_<name> in some file under src/,
 * reference/, kernels/, fuzz/, eval/ or bench/. The oracle catalogue
 * (mutants/oracle.tsv) likewise: six columns, a known part of the oracle,
 * checks among the suites and check/fuzz (a glob when those run), every part
 * present, at least 40 mutants run, each switch placed, and each row argued
 * equivalent saying why. The catalogues are found from the working directory
 * or by walking up from the test binary. */
#include <check.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/suite.h"

#define MAX_CLASSES 64
/* Classes without a row: the in-flight tensor-core operand (30, a kernel
 * race) comes with its code. */
static const int absent[] = {30};
#define MAX_ROWS 256

typedef struct row {
    char name[128];
    int cls;
    char backends[32];
    int lineno;
} row;

static row rows[MAX_ROWS];
static int n_rows;
static char root[PATH_MAX];

/* Finds the repository root: the first of cwd and the binary's ancestors that
 * holds mutants/catalogue.tsv. */
static int find_root(void)
{
    char path[PATH_MAX + 32];
    if (getcwd(root, sizeof root)) {
        snprintf(path, sizeof path, "%s/mutants/catalogue.tsv", root);
        if (access(path, R_OK) == 0) return 1;
    }
    ssize_t n = readlink("/proc/self/exe", root, sizeof root - 1);
    if (n <= 0) return 0;
    root[n] = '\0';
    while (strcmp(root, "/") != 0) {
        snprintf(root, sizeof root, "%s", dirname(root));
        snprintf(path, sizeof path, "%s/mutants/catalogue.tsv", root);
        if (access(path, R_OK) == 0) return 1;
    }
    return 0;
}

/* Splits line at its tabs into at most six columns, in place; returns how
 * many (a sixth that still holds a tab means more than six). */
static int split_columns(char *line, char *col[6])
{
    int nc = 0;
    for (char *s = line, *tab; nc < 6; s = tab + 1) {
        col[nc++] = s;
        tab = strchr(s, '\t');
        if (!tab) break;
        *tab = '\0';
    }
    return nc;
}

/* Reads the catalogue into rows[], asserting the column count of each row. */
static void read_catalogue(void)
{
    char path[PATH_MAX + 32], line[4096];
    ck_assert_msg(find_root(), "mutants/catalogue.tsv not found from the working directory or the binary");
    snprintf(path, sizeof path, "%s/mutants/catalogue.tsv", root);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    n_rows = 0;
    for (int lineno = 1; fgets(line, sizeof line, f); lineno++) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *col[6];
        int nc = split_columns(line, col);
        ck_assert_msg(nc == 6 && !strchr(col[5], '\t'), "catalogue line %d: expected 6 tab-separated columns", lineno);
        ck_assert_msg(n_rows < MAX_ROWS, "more than %d catalogue rows", MAX_ROWS);
        row *r = &rows[n_rows++];
        snprintf(r->name, sizeof r->name, "%s", col[0]);
        r->cls = atoi(col[1]);
        snprintf(r->backends, sizeof r->backends, "%s", col[2]);
        r->lineno = lineno;
        ck_assert_msg(strlen(col[5]) > 10, "catalogue line %d: the last column says what the switch does (or why none)",
                      lineno);
    }
    fclose(f);
    ck_assert_int_gt(n_rows, 0);
}

/* The bug classes docs/design.md §6 numbers: its table's rows "| N | ...",
 * which must run 1, 2, ... without a gap. */
static int design_classes(void)
{
    char path[PATH_MAX + 32], line[4096];
    snprintf(path, sizeof path, "%s/docs/design.md", root);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s is missing", path);
    int in6 = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "## ", 3)) in6 = !strncmp(line, "## 6.", 5);
        int c;
        if (in6 && sscanf(line, "| %d |", &c) == 1) {
            ck_assert_msg(c == n + 1, "docs/design.md §6: class %d follows class %d", c, n);
            n = c;
        }
    }
    fclose(f);
    ck_assert_msg(n >= 1 && n <= MAX_CLASSES, "docs/design.md §6 numbers %d classes", n);
    return n;
}

START_TEST(rows_are_well_formed)
{
    read_catalogue();
    const int n_classes = design_classes();
    int seen[MAX_CLASSES + 1] = {0};
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        ck_assert_msg(r->cls >= 1 && r->cls <= n_classes, "line %d: class %d is not one of docs/design.md §6's 1..%d",
                      r->lineno, r->cls, n_classes);
        seen[r->cls] = 1;
        int ok = !strcmp(r->backends, "none") || !strcmp(r->backends, "cpu") || !strcmp(r->backends, "gpu") ||
                 !strcmp(r->backends, "cpu,gpu");
        ck_assert_msg(ok, "line %d: backends '%s' must be cpu, gpu, cpu,gpu or none", r->lineno, r->backends);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(rows[j].name, r->name), "line %d: mutant %s listed twice", r->lineno, r->name);
    }
    for (int c = 1; c <= n_classes; c++) {
        int skip = 0;
        for (size_t a = 0; a < sizeof absent / sizeof absent[0]; a++) skip |= absent[a] == c;
        if (!skip) ck_assert_msg(seen[c], "bug class %d has no catalogue row", c);
    }
}
END_TEST

/* nftw state: the token searched for and whether a file holds it. */
static char token[160];
static int found;

static int scan_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type != FTW_F) return 0;
    size_t len = strlen(path);
    int src = (len > 2 && (!strcmp(path + len - 2, ".c") || !strcmp(path + len - 2, ".h"))) ||
              (len > 3 && !strcmp(path + len - 3, ".cu")) || (len > 4 && !strcmp(path + len - 4, ".cuh"));
    if (!src) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096];
    size_t tl = strlen(token);
    while (fgets(line, sizeof line, f)) {
        /* The token must end there: QV_MUTANT_x is not QV_MUTANT_x_y. */
        for (char *at = strstr(line, token); at; at = strstr(at + 1, token)) {
            char next = at[tl];
            if (!(next == '_' || (next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') ||
                  (next >= '0' && next <= '9'))) {
                found = 1;
                break;
            }
        }
        if (found) break;
    }
    fclose(f);
    return found; /* non-zero stops the walk */
}

/* ---- the oracle catalogue ---- */

static const char *const parts[] = {"decode", "sum", "bound", "spec", "window", "verdict", "monitor", "generator",
                                    "campaign", "route"};
static const char *const checks[] = {"t_formats", "t_truth", "t_verify", "t_spec", "t_model", "t_campaign",
                                     "t_sharp", "t_moe", "check", "fuzz"};
#define N_PARTS ((int)(sizeof parts / sizeof parts[0]))
#define N_CHECKS ((int)(sizeof checks / sizeof checks[0]))

typedef struct orow {
    char name[128];
    int part, equivalent, lineno;
} orow;

static orow orows[MAX_ROWS];
static int n_orows;

static int index_of(const char *const *list, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], s)) return i;
    return -1;
}

static void read_oracle(void)
{
    char path[PATH_MAX + 32], line[4096];
    ck_assert_msg(find_root(), "mutants/catalogue.tsv not found from the working directory or the binary");
    snprintf(path, sizeof path, "%s/mutants/oracle.tsv", root);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s cannot be read", path);
    n_orows = 0;
    for (int lineno = 1; fgets(line, sizeof line, f); lineno++) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *col[6];
        int nc = split_columns(line, col);
        ck_assert_msg(nc == 6 && !strchr(col[5], '\t'), "oracle.tsv line %d: expected 6 tab-separated columns", lineno);
        ck_assert_msg(n_orows < MAX_ROWS, "more than %d oracle rows", MAX_ROWS);
        orow *r = &orows[n_orows++];
        snprintf(r->name, sizeof r->name, "%s", col[0]);
        r->lineno = lineno;
        ck_assert_msg(!strncmp(col[0], "orc_", 4), "oracle.tsv line %d: %s does not start with orc_", lineno, col[0]);
        r->part = index_of(parts, N_PARTS, col[1]);
        ck_assert_msg(r->part >= 0, "oracle.tsv line %d: part '%s' is unknown", lineno, col[1]);
        r->equivalent = !strcmp(col[2], "equivalent");
        int runs_case = 0;
        if (!r->equivalent) {
            char list[512];
            snprintf(list, sizeof list, "%s", col[2]);
            int n = 0;
            for (char *save = NULL, *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save), n++) {
                ck_assert_msg(index_of(checks, N_CHECKS, c) >= 0, "oracle.tsv line %d: check '%s' is unknown", lineno, c);
                runs_case |= !strcmp(c, "check") || !strcmp(c, "fuzz");
            }
            ck_assert_msg(n > 0, "oracle.tsv line %d: no check", lineno);
        } else {
            ck_assert_msg(strstr(col[5], "Equivalent:") != NULL,
                          "oracle.tsv line %d: an equivalent row says why after 'Equivalent:'", lineno);
        }
        ck_assert_msg(!runs_case || strcmp(col[3], "-"), "oracle.tsv line %d: check and fuzz need a variants glob",
                      lineno);
        ck_assert_msg(strlen(col[4]) > 10, "oracle.tsv line %d: the fifth column names the oracle failure it models",
                      lineno);
        ck_assert_msg(strlen(col[5]) > 10, "oracle.tsv line %d: the last column says what the switch does", lineno);
        for (int j = 0; j < n_orows - 1; j++)
            ck_assert_msg(strcmp(orows[j].name, r->name), "oracle.tsv line %d: %s listed twice", lineno, r->name);
    }
    fclose(f);
}

START_TEST(oracle_rows_are_well_formed)
{
    read_oracle();
    int seen[N_PARTS] = {0}, run = 0;
    for (int i = 0; i < n_orows; i++) {
        seen[orows[i].part] = 1;
        run += !orows[i].equivalent;
    }
    for (int p = 0; p < N_PARTS; p++) ck_assert_msg(seen[p], "no oracle mutant for the part '%s'", parts[p]);
    ck_assert_msg(run >= 40, "%d oracle mutants run; at least 40", run);
    read_catalogue();
    for (int i = 0; i < n_orows; i++)
        for (int j = 0; j < n_rows; j++)
            ck_assert_msg(strcmp(orows[i].name, rows[j].name), "%s is in both catalogues", orows[i].name);
}
END_TEST

START_TEST(every_switch_is_placed)
{
    read_catalogue();
    static const char *const dirs[] = {"src", "reference", "kernels", "fuzz", "eval", "bench"};
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        if (!strcmp(r->backends, "none")) continue;
        snprintf(token, sizeof token, "QV_MUTANT_%s", r->name);
        found = 0;
        for (size_t d = 0; d < sizeof dirs / sizeof dirs[0] && !found; d++) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/%s", root, dirs[d]);
            nftw(path, scan_file, 16, FTW_PHYS);
        }
        ck_assert_msg(found, "line %d: switch %s is placed in no source file", r->lineno, token);
    }
    read_oracle();
    for (int i = 0; i < n_orows; i++) {
        const orow *r = &orows[i];
        if (r->equivalent) continue;
        snprintf(token, sizeof token, "QV_MUTANT_%.127s", r->name);
        found = 0;
        for (size_t d = 0; d < sizeof dirs / sizeof dirs[0] && !found; d++) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/%s", root, dirs[d]);
            nftw(path, scan_file, 16, FTW_PHYS);
        }
        ck_assert_msg(found, "oracle.tsv line %d: switch %s is placed in no source file", r->lineno, token);
    }
}
END_TEST

static Suite *mutants_suite(void)
{
    Suite *s = suite_create("mutants");
    TCase *t = tcase_create("catalogue");
    tcase_add_test(t, rows_are_well_formed);
    tcase_add_test(t, oracle_rows_are_well_formed);
    tcase_add_test(t, every_switch_is_placed);
    tcase_set_timeout(t, 30);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return suite_run(mutants_suite());
}
