/* cmd_report.c: `qvet report RESULTS.jsonl [MORE.jsonl ...] -o DIR`.
 *
 * Reads any mix of JSONL result lines (docs/results-format.md) and writes
 * DIR/index.md plus SVG plots drawn by gnuplot. Malformed lines are reported
 * with file and line number and skipped. The output is a pure function of the
 * input lines: the same input gives the same bytes (no clock, no host, sorted
 * tables), so reports can be diffed and kept under review. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qvet/cli.h"
#include "qvet/json.h"

/* ---- the records we keep from the input ----------------------------------- */

typedef struct rep_case {
    char *variant, *probe, *shape_class, *verdict, *replay, *backend, *reason;
    double k, m, n, err_over_bound, max_abs_err, alpha_g, max_ulp;
    double hist_eb[21], hist_ulp[7];
    int has_hist_eb, has_hist_ulp;
} rep_case;

typedef struct rep_bench {
    char *variant, *model, *layer;
    double m, median_us, floor_us, floor_fraction, vs_cublas;
} rep_bench;

typedef struct rep_mutant {
    char *mutant, *cites, *killed_by, *variant, *backend;
    double bug_class, cases_to_kill;
    int killed, marlin_pass, vllm_pass, cosine_pass, nmse_pass;
} rep_mutant;

typedef struct rep_ppl {
    char *variant, *backend, *model, *model_sha, *text_sha;
    double tokens, ctx, chunks, ppl, ppl_se, dppl, dppl_se, kld, kld_se, kld_p99, kld_max,
        top1, rms_dp;
} rep_ppl;

typedef struct rep_run {
    char *command, *commit, *date, *backend, *gpu, *driver, *cuda, *seed, *source;
} rep_run;

typedef struct report {
    rep_case *cases;
    int n_cases, cap_cases;
    rep_bench *bench;
    int n_bench, cap_bench;
    rep_mutant *mutants;
    int n_mutants, cap_mutants;
    rep_ppl *ppl;
    int n_ppl, cap_ppl;
    rep_run *runs;
    int n_runs, cap_runs;
    int bad_lines;
} report;

/* arr (n records of `size` bytes, room for *cap) with room for one more:
 * the capacity doubles, from 64. */
static void *grow(void *arr, int n, int *cap, size_t size)
{
    if (n < *cap) return arr;
    *cap = *cap ? 2 * *cap : 64;
    void *grown = realloc(arr, (size_t)*cap * size);
    if (!grown) {
        fprintf(stderr, "qvet report: out of memory\n");
        exit(3);
    }
    return grown;
}

/* A new record at the end of arr (n records, room for cap), zeroed. */
#define APPEND(arr, n, cap)                                                                                   \
    ((arr) = grow((arr), (n), &(cap), sizeof *(arr)), memset(&(arr)[(n)], 0, sizeof *(arr)), &(arr)[(n)++])

/* A string member as an owned copy; "" when absent or not a string. Numbers
 * and booleans are rendered as their JSON text so provenance keeps them. */
static char *dup_member(const qv_json *o, const char *key)
{
    const qv_json *j = qv_json_get(o, key);
    const char *s = qv_json_str(j);
    if (!s && qv_json_type_of(j) == QV_JSON_NUMBER) s = j->text;
    if (!s && qv_json_type_of(j) == QV_JSON_BOOL) s = j->boolean ? "true" : "false";
    char *d = strdup(s ? s : "");
    if (!d) {
        fprintf(stderr, "qvet report: out of memory\n");
        exit(3);
    }
    return d;
}

static double num(const qv_json *o, const char *key) { return qv_json_num(qv_json_get(o, key), NAN); }

static void read_hist(const qv_json *o, const char *key, double *h, int n, int *has)
{
    const qv_json *a = qv_json_get(o, key);
    *has = qv_json_type_of(a) == QV_JSON_ARRAY && qv_json_len(a) == n;
    for (int i = 0; i < n; i++) h[i] = *has ? qv_json_num(qv_json_at(a, i), 0) : 0;
}

/* The next key of the space-separated list *keys, copied into key (64 bytes);
 * *keys moves past it. A record that lists more fields than keys is a
 * programmer error. */
static const char *next_key(const char **keys, char *key)
{
    int len = 0;
    const int found = sscanf(*keys, " %63s%n", key, &len);
    QV_ASSERT(found == 1, "a record lists more fields than keys");
    *keys += len;
    return key;
}

/* Reads the members named in `keys` into the fields listed in dst (NULL
 * ends it), in the same order: strings as owned copies (dup_member). */
static void read_strs(const qv_json *o, const char *keys, char **const *dst)
{
    char key[64];
    for (int i = 0; dst[i]; i++) *dst[i] = dup_member(o, next_key(&keys, key));
    QV_ASSERT(keys[strspn(keys, " ")] == '\0', "a record lists fewer fields than keys");
}

/* The same for numbers: doubles, NaN when absent or not a number. */
static void read_nums(const qv_json *o, const char *keys, double *const *dst)
{
    char key[64];
    for (int i = 0; dst[i]; i++) *dst[i] = num(o, next_key(&keys, key));
    QV_ASSERT(keys[strspn(keys, " ")] == '\0', "a record lists fewer fields than keys");
}

static void add_line(report *r, const qv_json *o, const char *source)
{
    const char *kind = qv_json_str(qv_json_get(o, "kind"));
    if (!kind) kind = "";
    if (!strcmp(kind, "case")) {
        rep_case *c = APPEND(r->cases, r->n_cases, r->cap_cases);
        read_strs(o, "variant probe shape_class verdict replay backend reason",
                  (char **[]){&c->variant, &c->probe, &c->shape_class, &c->verdict, &c->replay, &c->backend,
                              &c->reason, NULL});
        read_nums(o, "m n k max_err_over_bound max_abs_err alpha_g_max max_ulp",
                  (double *[]){&c->m, &c->n, &c->k, &c->err_over_bound, &c->max_abs_err, &c->alpha_g, &c->max_ulp,
                               NULL});
        read_hist(o, "hist_err_over_bound", c->hist_eb, 21, &c->has_hist_eb);
        read_hist(o, "hist_ulp", c->hist_ulp, 7, &c->has_hist_ulp);
    } else if (!strcmp(kind, "bench")) {
        rep_bench *b = APPEND(r->bench, r->n_bench, r->cap_bench);
        read_strs(o, "variant model layer", (char **[]){&b->variant, &b->model, &b->layer, NULL});
        read_nums(o, "m median_us floor_us floor_fraction vs_cublas",
                  (double *[]){&b->m, &b->median_us, &b->floor_us, &b->floor_fraction, &b->vs_cublas, NULL});
    } else if (!strcmp(kind, "mutant")) {
        rep_mutant *mu = APPEND(r->mutants, r->n_mutants, r->cap_mutants);
        read_strs(o, "mutant cites killed_by variant backend",
                  (char **[]){&mu->mutant, &mu->cites, &mu->killed_by, &mu->variant, &mu->backend, NULL});
        read_nums(o, "bug_class cases_to_kill", (double *[]){&mu->bug_class, &mu->cases_to_kill, NULL});
        mu->killed = qv_json_bool(qv_json_get(o, "killed"), 0);
        /* -1: the line does not say (the table shows "–"). */
        mu->marlin_pass = qv_json_bool(qv_json_get(o, "marlin_pass"), -1);
        mu->vllm_pass = qv_json_bool(qv_json_get(o, "vllm_pass"), -1);
        mu->cosine_pass = qv_json_bool(qv_json_get(o, "cosine_pass"), -1);
        mu->nmse_pass = qv_json_bool(qv_json_get(o, "nmse_pass"), -1);
    } else if (!strcmp(kind, "ppl")) {
        rep_ppl *p = APPEND(r->ppl, r->n_ppl, r->cap_ppl);
        read_strs(o, "variant backend model model_sha256 text_sha256",
                  (char **[]){&p->variant, &p->backend, &p->model, &p->model_sha, &p->text_sha, NULL});
        read_nums(o, "tokens ctx chunks ppl ppl_stderr dppl dppl_stderr kld_mean kld_stderr kld_p99 kld_max "
                     "same_top1 rms_dp",
                  (double *[]){&p->tokens, &p->ctx, &p->chunks, &p->ppl, &p->ppl_se, &p->dppl, &p->dppl_se,
                               &p->kld, &p->kld_se, &p->kld_p99, &p->kld_max, &p->top1, &p->rms_dp, NULL});
    } else if (!strcmp(kind, "run")) {
        rep_run *u = APPEND(r->runs, r->n_runs, r->cap_runs);
        read_strs(o, "command commit date backend gpu driver cuda seed",
                  (char **[]){&u->command, &u->commit, &u->date, &u->backend, &u->gpu, &u->driver, &u->cuda,
                              &u->seed, NULL});
        u->source = strdup(source);
    }
}

/* Reads one JSONL file; returns 0, or -1 when the file cannot be opened. */
static int read_file(report *r, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "qvet report: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len == 0) continue;
        qv_json *o = NULL;
        if (qv_json_parse(line, (size_t)len, &o) != QV_OK) {
            fprintf(stderr, "qvet report: %s:%ld: malformed JSON line skipped: %s\n", path, lineno,
                    qv_errmsg());
            r->bad_lines++;
            continue;
        }
        if (qv_json_type_of(o) != QV_JSON_OBJECT || !qv_json_str(qv_json_get(o, "kind"))) {
            fprintf(stderr, "qvet report: %s:%ld: not a result object with a \"kind\"; skipped\n",
                    path, lineno);
            r->bad_lines++;
        } else {
            add_line(r, o, base);
        }
        qv_json_free(o);
    }
    free(line);
    fclose(f);
    return 0;
}

/* ---- helpers for deterministic output -------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted distinct values of a string field over n records of size `stride`. */
static int distinct(const void *recs, int n, size_t stride, size_t offset, const char ***out)
{
    const char **v = malloc(((size_t)n + 1) * sizeof *v);
    int nv = 0;
    for (int i = 0; i < n; i++) {
        const char *s = *(char *const *)((const char *)recs + (size_t)i * stride + offset);
        int seen = 0;
        for (int j = 0; j < nv && !seen; j++) seen = !strcmp(v[j], s);
        if (!seen) v[nv++] = s;
    }
    qsort(v, (size_t)nv, sizeof *v, cmp_str);
    *out = v;
    return nv;
}

/* A file-name-safe version of a variant name. */
static void slug(const char *s, char *out, size_t cap)
{
    size_t j = 0;
    for (; *s && j + 1 < cap; s++)
        out[j++] = ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                    *s == '-' || *s == '_')
                       ? *s
                       : '_';
    out[j] = '\0';
}

/* Markdown table cells must not contain '|' or newlines. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) fputs(*s == '|' ? "\\|" : (*s == '\n' ? " " : (char[2]){*s, 0}), f);
}

static void fmt_num(FILE *f, double x, const char *fmt)
{
    if (isnan(x))
        fputs("–", f);
    else
        fprintf(f, fmt, x);
}

/* Runs gnuplot on `script`; 0 on success. */
static int gnuplot(const char *plots_dir, const char *script_name)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* gnuplot's chatter (e.g. "empty x range" warnings for a single K)
         * is not the report's business; failure shows in its exit status. */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        /* Run inside the plots folder with relative names, so no absolute path
         * leaks into the SVG and the bytes depend on the input alone. */
        if (chdir(plots_dir)) _exit(126);
        execlp("gnuplot", "gnuplot", script_name, (char *)NULL);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

typedef struct plot_ctx {
    const char *dir;
    int failed;
} plot_ctx;

/* Writes `script` to DIR/plots/NAME.gp, runs it, checks that NAME.svg exists
 * and is non-empty. Returns 1 when the plot exists. */
static int render(plot_ctx *pc, const char *name, const char *script)
{
    char gp[8192], svg[8192], plots[4096], gp_name[512];
    snprintf(plots, sizeof plots, "%s/plots", pc->dir);
    snprintf(gp, sizeof gp, "%s/%s.gp", plots, name);
    snprintf(gp_name, sizeof gp_name, "%s.gp", name);
    snprintf(svg, sizeof svg, "%s/%s.svg", plots, name);
    FILE *f = fopen(gp, "w");
    if (!f) {
        pc->failed = 1;
        return 0;
    }
    fprintf(f, "set terminal svg size %s dynamic font 'sans,11'\nset output '%s.svg'\n%s",
            strncmp(name, "speed_", 6) ? "960,360" : "960,640", name, script);
    fclose(f);
    struct stat st;
    if (gnuplot(plots, gp_name) != 0 || stat(svg, &st) != 0 || st.st_size == 0) {
        fprintf(stderr, "qvet report: gnuplot failed on %s\n", gp);
        unlink(svg);
        pc->failed = 1;
        return 0;
    }
    return 1;
}

/* Opens DIR/plots/NAME.dat for writing and names it in data_name (cap bytes)
 * as the scripts, run inside the plots folder, refer to it: "NAME.dat". NULL
 * (the report marked failed) when it cannot be created. */
static FILE *open_plot_data(plot_ctx *pc, const char *name, char *data_name, size_t cap)
{
    char data[4096];
    snprintf(data, sizeof data, "%s/plots/%s.dat", pc->dir, name);
    snprintf(data_name, cap, "%s.dat", name);
    FILE *d = fopen(data, "w");
    if (!d) pc->failed = 1;
    return d;
}

/* ---- sections --------------------------------------------------------------- */

static const char *const verdicts[] = {"PASS", "MARGINAL", "FAIL"};

static void section_verdicts(FILE *md, report *r)
{
    const char **vars, **probes, **classes;
    int nv = distinct(r->cases, r->n_cases, sizeof(rep_case), offsetof(rep_case, variant), &vars);
    int np = distinct(r->cases, r->n_cases, sizeof(rep_case), offsetof(rep_case, probe), &probes);
    int nc = distinct(r->cases, r->n_cases, sizeof(rep_case), offsetof(rep_case, shape_class), &classes);
    int tot[3] = {0, 0, 0};
    for (int i = 0; i < r->n_cases; i++)
        for (int g = 0; g < 3; g++) tot[g] += !strcmp(r->cases[i].verdict, verdicts[g]);
    fprintf(md, "## Verdicts\n\n%d cases: %d PASS, %d MARGINAL, %d FAIL.\n\n", r->n_cases, tot[0], tot[1],
            tot[2]);
    fprintf(md, "Each cell is PASS/MARGINAL/FAIL case counts; **bold** marks a cell with a FAIL.\n\n");
    fprintf(md, "| variant | cases | worst err/E | worst ulp |");
    for (int p = 0; p < np; p++) fprintf(md, " %s |", probes[p]);
    for (int c = 0; c < nc; c++) fprintf(md, " %s |", classes[c]);
    fprintf(md, "\n|---|---:|---:|---:|");
    for (int p = 0; p < np + nc; p++) fprintf(md, ":---:|");
    fputc('\n', md);
    for (int v = 0; v < nv; v++) {
        int cnt = 0;
        double worst = 0, worst_ulp = 0;
        for (int i = 0; i < r->n_cases; i++) {
            rep_case *c = &r->cases[i];
            if (strcmp(c->variant, vars[v])) continue;
            cnt++;
            if (c->err_over_bound > worst) worst = c->err_over_bound;
            if (c->max_ulp > worst_ulp) worst_ulp = c->max_ulp;
        }
        fprintf(md, "| `%s` | %d | %.3g | %.3g |", vars[v], cnt, worst, worst_ulp);
        for (int col = 0; col < np + nc; col++) {
            int k[3] = {0, 0, 0};
            for (int i = 0; i < r->n_cases; i++) {
                rep_case *c = &r->cases[i];
                const char *key = col < np ? c->probe : c->shape_class;
                const char *want = col < np ? probes[col] : classes[col - np];
                if (strcmp(c->variant, vars[v]) || strcmp(key, want)) continue;
                for (int g = 0; g < 3; g++) k[g] += !strcmp(c->verdict, verdicts[g]);
            }
            if (k[0] + k[1] + k[2] == 0)
                fprintf(md, " · |");
            else if (k[2])
                fprintf(md, " **%d/%d/%d** |", k[0], k[1], k[2]);
            else
                fprintf(md, " %d/%d/%d |", k[0], k[1], k[2]);
        }
        fputc('\n', md);
    }
    fputc('\n', md);
    free(vars);
    free(probes);
    free(classes);
}

static void section_variant_plots(FILE *md, report *r, plot_ctx *pc)
{
    const char **vars;
    int nv = distinct(r->cases, r->n_cases, sizeof(rep_case), offsetof(rep_case, variant), &vars);
    if (!nv) {
        free(vars);
        return;
    }
    fprintf(md, "## Per variant: error against the bound, ULPs, and error against K\n\n"
                "Left: the distribution of per-case max |err|/E (a correct kernel stays below 1). "
                "Middle: per-case max distance in output ulps to the correctly rounded exact value. "
                "Right: max |err| against K beside the model's α·G; an accumulator cheaper than the "
                "declared one shows up as points climbing towards or above the α·G line.\n\n");
    for (int v = 0; v < nv; v++) {
        char name[256], data_name[300];
        slug(vars[v], name, sizeof name);
        /* Histograms: bins of err/E in [0, 1) by 0.05 plus >= 1; ulps 0,1,2,3,4-7,8-15,>=16. */
        double eb[21] = {0}, ulp[7] = {0};
        FILE *d = open_plot_data(pc, name, data_name, sizeof data_name);
        if (!d) continue;
        int have_k = 0;
        for (int i = 0; i < r->n_cases; i++) {
            rep_case *c = &r->cases[i];
            if (strcmp(c->variant, vars[v])) continue;
            if (c->has_hist_eb)
                for (int b = 0; b < 21; b++) eb[b] += c->hist_eb[b];
            else if (!isnan(c->err_over_bound))
                eb[c->err_over_bound >= 1 ? 20 : (int)(c->err_over_bound * 20)] += 1;
            if (c->has_hist_ulp)
                for (int b = 0; b < 7; b++) ulp[b] += c->hist_ulp[b];
            else if (!isnan(c->max_ulp)) {
                double u = c->max_ulp;
                ulp[u < 1 ? 0 : u < 2 ? 1 : u < 3 ? 2 : u < 4 ? 3 : u < 8 ? 4 : u < 16 ? 5 : 6] += 1;
            }
            if (!isnan(c->k) && c->max_abs_err > 0) {
                fprintf(d, "%.17g %.17g %.17g\n", c->k, c->max_abs_err,
                        isnan(c->alpha_g) || c->alpha_g <= 0 ? NAN : c->alpha_g);
                have_k = 1;
            }
        }
        fprintf(d, "\n\n");
        for (int b = 0; b < 21; b++) fprintf(d, "%d %.17g\n", b, eb[b]);
        fprintf(d, "\n\n");
        for (int b = 0; b < 7; b++) fprintf(d, "%d %.17g\n", b, ulp[b]);
        fclose(d);
        char script[8192];
        int off = snprintf(script, sizeof script,
                           "set multiplot layout 1,3 title '%s'\n"
                           "set style fill solid 0.6\nset boxwidth 0.8\nunset key\n"
                           "set xlabel '|err|/E'\nset ylabel 'elements (log)'\nset logscale y\nset yrange [0.8:*]\n"
                           "set xtics ('0' 0, '.25' 5, '.5' 10, '.75' 15, '>=1' 20)\n"
                           "plot '%s' index 1 using 1:2 with boxes lc rgb '#3b6ea8'\n"
                           "set xlabel 'ulps to RN(y)'\n"
                           "set xtics ('0' 0, '1' 1, '2' 2, '3' 3, '4-7' 4, '8-15' 5, '>=16' 6)\n"
                           "plot '%s' index 2 using 1:2 with boxes lc rgb '#5a9a5a'\n",
                           vars[v], data_name, data_name);
        if (have_k)
            snprintf(script + off, sizeof script - (size_t)off,
                     "set xtics auto\nset logscale xy\nset xlabel 'K'\nset ylabel '|err|'\n"
                     "set format y '%%.0e'\nset yrange [*:*]\nset key top left font ',9'\n"
                     "plot '%s' index 0 using 1:2 with points pt 7 ps 0.4 lc rgb '#3b6ea8' title 'max |err|', "
                     "'' index 0 using 1:3 with points pt 6 ps 0.5 lc rgb '#c0392b' title 'α·G'\n"
                     "unset multiplot\n",
                     data_name);
        else
            snprintf(script + off, sizeof script - (size_t)off,
                     "set xtics auto\nunset xlabel\nunset ylabel\nset key off\n"
                     "set label 1 'no nonzero error: exact' at graph 0.5,0.5 center\n"
                     "plot [0:1][0:1] NaN\nunset multiplot\n");
        if (render(pc, name, script)) fprintf(md, "### `%s`\n\n![%s](plots/%s.svg)\n\n", vars[v], vars[v], name);
    }
    free(vars);
}

static int cmp_case_worst(const void *a, const void *b)
{
    const rep_case *x = *(const rep_case *const *)a, *y = *(const rep_case *const *)b;
    int fx = !strcmp(x->verdict, "FAIL"), fy = !strcmp(y->verdict, "FAIL");
    if (fx != fy) return fy - fx;
    double ex = isnan(x->err_over_bound) ? INFINITY : x->err_over_bound;
    double ey = isnan(y->err_over_bound) ? INFINITY : y->err_over_bound;
    if (ex != ey) return ex < ey ? 1 : -1;
    int c = strcmp(x->variant, y->variant);
    return c ? c : strcmp(x->replay, y->replay);
}

static void section_worst(FILE *md, report *r)
{
    if (!r->n_cases) return;
    const rep_case **v = malloc((size_t)r->n_cases * sizeof *v);
    for (int i = 0; i < r->n_cases; i++) v[i] = &r->cases[i];
    qsort(v, (size_t)r->n_cases, sizeof *v, cmp_case_worst);
    int n = r->n_cases < 15 ? r->n_cases : 15;
    fprintf(md, "## Worst cases\n\nFailures first, then by |err|/E. Each replays bit for bit.\n\n"
                "| verdict | variant | m×n×k | probe | err/E | ulp | replay |\n|---|---|---|---|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        const rep_case *c = v[i];
        fprintf(md, "| %s | `%s` | %.0f×%.0f×%.0f | %s | ", c->verdict, c->variant, c->m, c->n, c->k, c->probe);
        fmt_num(md, c->err_over_bound, "%.3g");
        fputs(" | ", md);
        fmt_num(md, c->max_ulp, "%.3g");
        fputs(" | `", md);
        md_cell(md, c->replay);
        fputs("` |\n", md);
    }
    fputc('\n', md);
    free(v);
}

static const char *crit_cell(int b) { return b < 0 ? "–" : b ? "passes (misses it)" : "fails (catches it)"; }

static void section_mutants(FILE *md, report *r)
{
    if (!r->n_mutants) return;
    int killed = 0;
    for (int i = 0; i < r->n_mutants; i++) killed += r->mutants[i].killed;
    fprintf(md, "## Mutation testing\n\n%d killed of %d mutants. For each mutant, the field's usual "
                "criteria on the same outputs: Marlin's mean relative error < 1e-3, vLLM's < 0.04, a "
                "global cosine similarity ≥ 0.99, llama.cpp's NMSE < 5e-4.\n\n"
                "| mutant | class | cites | killed | by | cases | Marlin | vLLM | cosine | NMSE |\n"
                "|---|---:|---|---|---|---:|---|---|---|---|\n",
            killed, r->n_mutants);
    for (int i = 0; i < r->n_mutants; i++) {
        rep_mutant *m = &r->mutants[i];
        fprintf(md, "| `%s` | %.0f | ", m->mutant, m->bug_class);
        md_cell(md, m->cites);
        fprintf(md, " | %s | ", m->killed ? "yes" : "**no**");
        md_cell(md, m->killed_by);
        fputs(" | ", md);
        fmt_num(md, m->cases_to_kill, "%.0f");
        fprintf(md, " | %s | %s | %s | %s |\n", crit_cell(m->marlin_pass), crit_cell(m->vllm_pass), crit_cell(m->cosine_pass),
                crit_cell(m->nmse_pass));
    }
    fputc('\n', md);
}

static void section_ppl(FILE *md, report *r)
{
    if (!r->n_ppl) return;
    fprintf(md, "## Perplexity and KL divergence\n\n");
    const char **models;
    int nm = distinct(r->ppl, r->n_ppl, sizeof(rep_ppl), offsetof(rep_ppl, model), &models);
    for (int mi = 0; mi < nm; mi++) {
        const rep_ppl *first = NULL;
        for (int i = 0; i < r->n_ppl && !first; i++)
            if (!strcmp(r->ppl[i].model, models[mi])) first = &r->ppl[i];
        fprintf(md, "Model `%s` (sha256 `%s`), text sha256 `%s`, %.0f tokens, context %.0f, %.0f chunks "
                    "(second half of each chunk scored).\n\n",
                models[mi], first->model_sha, first->text_sha, first->tokens, first->ctx, first->chunks);
        fprintf(md, "| variant | backend | PPL | ΔPPL | KLD mean | KLD p99 | KLD max | same top-1 | RMS Δp |\n"
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < r->n_ppl; i++) {
            rep_ppl *p = &r->ppl[i];
            if (strcmp(p->model, models[mi])) continue;
            fprintf(md, "| `%s` | %s | %.4f ± %.4f | %+.4f ± %.4f | %.3g ± %.2g | %.3g | %.3g | %.2f %% | %.3g |\n",
                    p->variant, p->backend, p->ppl, p->ppl_se, p->dppl, p->dppl_se, p->kld, p->kld_se,
                    p->kld_p99, p->kld_max, p->top1, p->rms_dp);
        }
        fputc('\n', md);
    }
    free(models);
}

static void section_bench(FILE *md, report *r, plot_ctx *pc)
{
    if (!r->n_bench) return;
    fprintf(md, "## Speed\n\nMedian time of the whole block (qkv, o, gate_up, down) against M, with "
                "cuBLAS fp16 measured in the same run and the weight-read floor at the measured copy "
                "bandwidth.\n\n");
    const char **models, **vars;
    int nm = distinct(r->bench, r->n_bench, sizeof(rep_bench), offsetof(rep_bench, model), &models);
    int nv = distinct(r->bench, r->n_bench, sizeof(rep_bench), offsetof(rep_bench, variant), &vars);
    for (int mi = 0; mi < nm; mi++) {
        char name[256], data_name[300];
        snprintf(name, sizeof name, "speed_");
        slug(models[mi], name + 6, sizeof name - 6);
        FILE *d = open_plot_data(pc, name, data_name, sizeof data_name);
        if (!d) continue;
        char plot[8192];
        int off = snprintf(plot, sizeof plot,
                           "set title 'block time, %s'\nset logscale xy\nset xlabel 'M'\n"
                           "set ylabel 'median µs'\nset key below maxcols 3 font ',9'\nplot ",
                           models[mi]);
        int series = 0;
        for (int v = 0; v < nv; v++) {
            int any = 0;
            for (int i = 0; i < r->n_bench; i++) {
                rep_bench *b = &r->bench[i];
                if (strcmp(b->model, models[mi]) || strcmp(b->variant, vars[v]) || strcmp(b->layer, "block"))
                    continue;
                fprintf(d, "%.17g %.17g %.17g\n", b->m, b->median_us, b->floor_us);
                any = 1;
            }
            if (!any) continue;
            fprintf(d, "\n\n");
            off += snprintf(plot + off, sizeof plot - (size_t)off,
                            "%s'%s' index %d using 1:2 with linespoints %s title '%s'", series ? ", " : "",
                            data_name, series, strncmp(vars[v], "cublas", 6) ? "" : "lw 3 lc rgb 'black'", vars[v]);
            if (!strcmp(vars[v], "cublas-f16"))
                off += snprintf(plot + off, sizeof plot - (size_t)off,
                                ", '%s' index %d using 1:3 with lines dt 2 lc rgb 'gray' title 'fp16 weight floor'",
                                data_name, series);
            if (!strcmp(vars[v], "marlin-w4a16-g128-f16"))
                off += snprintf(plot + off, sizeof plot - (size_t)off,
                                ", '%s' index %d using 1:3 with lines dt 3 lc rgb 'black' title 'int4 weight floor'",
                                data_name, series);
            series++;
        }
        fclose(d);
        snprintf(plot + off, sizeof plot - (size_t)off, "\n");
        if (series && render(pc, name, plot))
            fprintf(md, "![speed %s](plots/%s.svg)\n\n", models[mi], name);
        fprintf(md, "| variant | M | block µs | floor fraction | vs cuBLAS fp16 |\n|---|---:|---:|---:|---:|\n");
        for (int v = 0; v < nv; v++)
            for (int i = 0; i < r->n_bench; i++) {
                rep_bench *b = &r->bench[i];
                if (strcmp(b->model, models[mi]) || strcmp(b->variant, vars[v]) || strcmp(b->layer, "block"))
                    continue;
                fprintf(md, "| `%s` | %.0f | %.1f | ", b->variant, b->m, b->median_us);
                fmt_num(md, b->floor_fraction, "%.2f");
                fputs(" | ", md);
                fmt_num(md, b->vs_cublas, "%.2f×");
                fputs(" |\n", md);
            }
        fputc('\n', md);
    }
    free(models);
    free(vars);
}

static void section_provenance(FILE *md, report *r, char **inputs, int n_inputs)
{
    fprintf(md, "## Provenance\n\nInputs:");
    for (int i = 0; i < n_inputs; i++) {
        const char *base = strrchr(inputs[i], '/') ? strrchr(inputs[i], '/') + 1 : inputs[i];
        fprintf(md, " `%s`", base);
    }
    fprintf(md, ".\n\n");
    if (r->bad_lines) fprintf(md, "%d malformed input lines were skipped.\n\n", r->bad_lines);
    if (!r->n_runs) return;
    fprintf(md, "| file | date | commit | backend | GPU | driver | CUDA | seed | command |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < r->n_runs; i++) {
        rep_run *u = &r->runs[i];
        const char *cells[] = {u->source, u->date, u->commit, u->backend, u->gpu, u->driver, u->cuda, u->seed};
        fputc('|', md);
        for (size_t c = 0; c < sizeof cells / sizeof cells[0]; c++) {
            fputc(' ', md);
            md_cell(md, *cells[c] ? cells[c] : "–");
            fputs(" |", md);
        }
        fputs(" `", md);
        md_cell(md, u->command);
        fputs("` |\n", md);
    }
    fputc('\n', md);
}

/* ---- the command ------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: qvet report RESULTS.jsonl [MORE.jsonl ...] -o DIR\n\n"
               "Renders DIR/index.md and SVG plots (DIR/plots/, drawn with gnuplot) from JSONL\n"
               "results of qvet check, fuzz, replay, bench, ppl and mutants. Malformed lines are\n"
               "reported with their line number and skipped. The same input gives the same bytes.\n");
}

static int mkdir_p(const char *dir)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

int qv_cmd_report(int argc, char **argv)
{
    const char *outdir = NULL;
    char **inputs = calloc((size_t)argc, sizeof *inputs);
    int n_inputs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            free(inputs);
            return 0;
        } else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "qvet report: %s needs a folder\n", argv[i]);
                free(inputs);
                return 2;
            }
            outdir = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "qvet report: unknown option '%s'\n", argv[i]);
            usage(stderr);
            free(inputs);
            return 2;
        } else {
            inputs[n_inputs++] = argv[i];
        }
    }
    if (!outdir || !n_inputs) {
        fprintf(stderr, "qvet report: need at least one results file and -o DIR\n");
        usage(stderr);
        free(inputs);
        return 2;
    }
    report r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < n_inputs; i++)
        if (read_file(&r, inputs[i])) {
            free(inputs);
            return 2;
        }
    char plots[4096];
    snprintf(plots, sizeof plots, "%s/plots", outdir);
    if (mkdir_p(plots)) {
        fprintf(stderr, "qvet report: cannot create %s: %s\n", plots, strerror(errno));
        free(inputs);
        return 2;
    }
    /* index.md is written to a temporary name and renamed, so a reader never
     * sees half a report. */
    char md_path[4096], tmp_path[4096];
    snprintf(md_path, sizeof md_path, "%s/index.md", outdir);
    snprintf(tmp_path, sizeof tmp_path, "%s/.index.md.tmp", outdir);
    FILE *md = fopen(tmp_path, "w");
    if (!md) {
        fprintf(stderr, "qvet report: cannot write %s: %s\n", tmp_path, strerror(errno));
        free(inputs);
        return 2;
    }
    plot_ctx pc = {.dir = outdir, .failed = 0};
    fprintf(md, "# qvet accuracy report\n\n");
    if (!r.n_cases && !r.n_bench && !r.n_mutants && !r.n_ppl)
        fprintf(md, "The inputs hold no results.\n\n");
    if (r.n_cases) section_verdicts(md, &r);
    section_worst(md, &r);
    section_mutants(md, &r);
    section_ppl(md, &r);
    section_bench(md, &r, &pc);
    section_variant_plots(md, &r, &pc);
    section_provenance(md, &r, inputs, n_inputs);
    int werr = ferror(md);
    if (fclose(md) || werr || rename(tmp_path, md_path)) {
        fprintf(stderr, "qvet report: writing %s failed\n", md_path);
        unlink(tmp_path);
        free(inputs);
        return 2;
    }
    printf("report: %s (%d cases, %d bench, %d mutants, %d ppl rows, %d lines skipped)\n", md_path, r.n_cases,
           r.n_bench, r.n_mutants, r.n_ppl, r.bad_lines);
    free(inputs);
    if (pc.failed) {
        fprintf(stderr, "qvet report: some plots could not be drawn (is gnuplot installed?)\n");
        return 3;
    }
    return 0;
}
