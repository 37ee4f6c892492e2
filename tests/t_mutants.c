/* t_mutants.c: the mutant catalogue (mutants/catalogue.tsv) is well formed and
 * every switch it names is placed in the sources, so `make mutants-cpu` and
 * `make mutants` never report a mutant as "placed nowhere": six tab-separated
 * columns, a bug class of DESIGN.md §6 (1..20), backends among cpu/gpu or the
 * single word none (with a reason), every one of the 20 classes present, and
 * for each built mutant the token QV_MUTANT_<name> in some file under src/,
 * reference/, kernels/, fuzz/, eval/ or bench/. The catalogue is found from
 * the working directory or by walking up from the test binary. */
#include <check.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/suite.h"

#define N_CLASSES 20 /* the rows of DESIGN.md §6 */
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
        int nc = 0;
        for (char *s = line, *tab; nc < 6; s = tab + 1) {
            col[nc++] = s;
            tab = strchr(s, '\t');
            if (!tab) break;
            *tab = '\0';
        }
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

START_TEST(rows_are_well_formed)
{
    read_catalogue();
    int seen[N_CLASSES + 1] = {0};
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        ck_assert_msg(r->cls >= 1 && r->cls <= N_CLASSES, "line %d: class %d is not one of DESIGN.md §6's 1..20",
                      r->lineno, r->cls);
        seen[r->cls] = 1;
        int ok = !strcmp(r->backends, "none") || !strcmp(r->backends, "cpu") || !strcmp(r->backends, "gpu") ||
                 !strcmp(r->backends, "cpu,gpu");
        ck_assert_msg(ok, "line %d: backends '%s' must be cpu, gpu, cpu,gpu or none", r->lineno, r->backends);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(rows[j].name, r->name), "line %d: mutant %s listed twice", r->lineno, r->name);
    }
    for (int c = 1; c <= N_CLASSES; c++) ck_assert_msg(seen[c], "bug class %d has no catalogue row", c);
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
}
END_TEST

static Suite *mutants_suite(void)
{
    Suite *s = suite_create("mutants");
    TCase *t = tcase_create("catalogue");
    tcase_add_test(t, rows_are_well_formed);
    tcase_add_test(t, every_switch_is_placed);
    tcase_set_timeout(t, 30);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return suite_run(mutants_suite());
}
