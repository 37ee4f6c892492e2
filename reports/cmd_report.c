/* cmd_report.c: `qvet report RESULTS.jsonl [MORE.jsonl ...] -o DIR`.
 *
 * Reads any mix of JSONL result lines (docs/results-format.md) and writes
 * DIR/index.md plus SVG plots drawn by gnuplot. Malformed lines are reported
 * with file and line number and skipped. The output is a pure function of the
 * input lines: the same input gives the same bytes (no clock, no host, sorted
 * tables), so reports can be diffed and kept under review. Any data renders:
 * every plot range is set here (see "plots" below), so a plot can fail only
 * when gnuplot is missing or broken. Exit codes: 0; 2 for bad arguments or
 * an input that cannot be read; 3 when a plot could not be drawn. */
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

#include "internal/cli.h"
#include "internal/json.h"

/* ---- the records we keep from the input ----------------------------------- */

typedef struct rep_case {
    char *variant, *probe, *shape_class, *verdict, *replay, *backend, *reason;
    double k, m, n, err_over_bound, max_abs_err, alpha_g, max_ulp;
    double hist_eb[21], hist_ulp[7];
    int has_hist_eb, has_hist_ulp;
} rep_case;

typedef struct rep_routed {
    char *variant, *verdict, *replay, *logits, *reason;
    double t, n, k, experts, local, shared, err_over_bound, route_bad, weight_bad, ambiguous;
} rep_routed;

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
    rep_routed *routed;
    int n_routed, cap_routed;
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

/* A histogram member into h (n counts). *has: it is an array of n counts,
 * each a number in [0, 1e15] (no case has more output elements). One with a
 * null, negative or absurd count is set aside, and the case is binned by its
 * scalar maximum instead. */
static void read_hist(const qv_json *o, const char *key, double *h, int n, int *has)
{
    const qv_json *a = qv_json_get(o, key);
    *has = qv_json_type_of(a) == QV_JSON_ARRAY && qv_json_len(a) == n;
    for (int i = 0; i < n; i++) {
        h[i] = *has ? qv_json_num(qv_json_at(a, i), NAN) : 0;
        if (!(h[i] >= 0 && h[i] <= 1e15)) *has = 0;
    }
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
    } else if (!strcmp(kind, "routed")) {
        rep_routed *c = APPEND(r->routed, r->n_routed, r->cap_routed);
        read_strs(o, "variant verdict replay logits reason",
                  (char **[]){&c->variant, &c->verdict, &c->replay, &c->logits, &c->reason, NULL});
        read_nums(o, "t n k experts local shared max_err_over_bound route_bad weight_bad ambiguous",
                  (double *[]){&c->t, &c->n, &c->k, &c->experts, &c->local, &c->shared, &c->err_over_bound,
                               &c->route_bad, &c->weight_bad, &c->ambiguous, NULL});
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

/* Reads one JSONL file; returns 0, or -1 when the file cannot be opened or
 * read (a folder, an I/O error). */
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
    const int read_failed = ferror(f), read_errno = errno;
    free(line);
    fclose(f);
    if (read_failed) {
        if (lineno)
            fprintf(stderr, "qvet report: cannot read %s after line %ld: %s\n", path, lineno, strerror(read_errno));
        else
            fprintf(stderr, "qvet report: cannot read %s: %s\n", path, strerror(read_errno));
        return -1;
    }
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

/* Markdown table cells must not contain '|' or newlines. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) fputs(*s == '|' ? "\\|" : (*s == '\n' ? " " : (char[2]){*s, 0}), f);
}

/* s as inline code: a backtick inside becomes a quote (it would end the span),
 * control characters become spaces, and in a table cell '|' is escaped. An
 * empty s (an empty code span is no code span) is written "–". */
static void md_code(FILE *f, const char *s, int in_table)
{
    if (!*s) {
        fputs("–", f);
        return;
    }
    fputc('`', f);
    for (; *s; s++) {
        if (*s == '`')
            fputc('\'', f);
        else if ((unsigned char)*s < 0x20)
            fputc(' ', f);
        else if (*s == '|' && in_table)
            fputs("\\|", f);
        else
            fputc(*s, f);
    }
    fputc('`', f);
}

static void fmt_num(FILE *f, double x, const char *fmt)
{
    if (!isfinite(x))
        fputs("–", f);
    else
        fprintf(f, fmt, x);
}

/* ---- plots -------------------------------------------------------------------
 *
 * Every panel of every plot gets both of its ranges from here, never from
 * gnuplot's autoscaling, which fails on data a report must take: an empty
 * data set ("x range is invalid"), a single value, a log axis given zero or a
 * negative number. Values that cannot sit on a log axis (null, NaN, Inf,
 * zero, negative, or beyond LOG_MIN..LOG_MAX, where gnuplot's log mapping
 * breaks down) are left out of the data and counted in the Markdown; a panel
 * left with nothing shows a "no data" label over fixed ranges. Data travel
 * inside the script as named datablocks, one per series, so that no series
 * depends on another one's position in a shared file. */

#define LOG_MIN 1e-300
#define LOG_MAX 1e300

/* 1 when x can sit on a log axis (false for NaN). */
static int on_log_axis(double x) { return x >= LOG_MIN && x <= LOG_MAX; }

/* The values seen on one log axis: their extremes and how many. */
typedef struct log_span {
    double lo, hi;
    int n;
} log_span;

static void span_add(log_span *sp, double x)
{
    if (!sp->n || x < sp->lo) sp->lo = x;
    if (!sp->n || x > sp->hi) sp->hi = x;
    sp->n++;
}

/* The power of ten at or below x / 1.5 (down) or at or above x * 1.5 (up):
 * a range from one to the other always holds a margin and two labelled
 * tics, even around a single value (lo = hi), where gnuplot's own range
 * would be empty. For x in LOG_MIN..LOG_MAX the result stays finite. */
static double decade(double x, int up)
{
    return up ? pow(10, ceil(log10(x * 1.5))) : pow(10, floor(log10(x / 1.5)));
}

/* A log scale on axis ("x" or "y") with the range of the values seen. */
static void gp_log_range(FILE *g, const char *axis, log_span sp)
{
    fprintf(g, "set logscale %s\nset %srange [%.6g:%.6g]\n", axis, axis, decade(sp.lo, 0), decade(sp.hi, 1));
}

/* s as a gnuplot single-quoted string: a quote doubled, control characters
 * (a newline would end the command) as spaces. */
static void gp_str(FILE *g, const char *s)
{
    fputc('\'', g);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("''", g);
        else
            fputc((unsigned char)*s < 0x20 ? ' ' : *s, g);
    }
    fputc('\'', g);
}

/* A panel with nothing to plot: fixed linear ranges, no tics, and `why` in
 * the middle. The next panel sets its own tics. */
static void gp_no_data(FILE *g, const char *why)
{
    fputs("unset logscale\nset xrange [0:1]\nset yrange [0:1]\nunset xtics\nunset ytics\nset label 1 ", g);
    gp_str(g, why);
    fputs(" at graph 0.5,0.5 center\nplot NaN notitle\nunset label 1\n", g);
}

typedef enum { GP_OK, GP_MISSING, GP_FAILED } gp_status;

/* Runs `gnuplot SCRIPT` inside plots_dir (relative names, so no absolute path
 * leaks into the SVG and the bytes depend on the input alone), with stdin and
 * stdout on /dev/null. Gnuplot's stderr goes to err (cap bytes, its last
 * cap - 1 bytes when longer, NUL-terminated): its warnings are no business
 * of a report that was drawn, its errors are what a failure must show.
 * GP_MISSING: gnuplot could not be started (a close-on-exec pipe carries
 * the exec's errno back, so this never reads a gnuplot exit code). */
static gp_status gnuplot(const char *plots_dir, const char *script_name, char *err, size_t cap)
{
    int err_pipe[2], exec_pipe[2];
    err[0] = '\0';
    if (pipe(err_pipe)) return GP_FAILED;
    if (pipe2(exec_pipe, O_CLOEXEC)) {
        close(err_pipe[0]);
        close(err_pipe[1]);
        return GP_FAILED;
    }
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        dup2(err_pipe[1], 2);
        close(err_pipe[0]);
        close(err_pipe[1]);
        close(exec_pipe[0]);
        int why = 0;
        if (chdir(plots_dir) == 0) {
            execlp("gnuplot", "gnuplot", script_name, (char *)NULL);
            why = errno;
        } else {
            fprintf(stderr, "cannot enter %s: %s\n", plots_dir, strerror(errno));
        }
        if (why && write(exec_pipe[1], &why, sizeof why) < 0) _exit(126);
        _exit(127);
    }
    close(err_pipe[1]);
    close(exec_pipe[1]);
    if (pid < 0) {
        close(err_pipe[0]);
        close(exec_pipe[0]);
        snprintf(err, cap, "fork: %s", strerror(errno));
        return GP_FAILED;
    }
    size_t len = 0;
    char chunk[1024];
    ssize_t got;
    while ((got = read(err_pipe[0], chunk, sizeof chunk)) != 0) {
        if (got < 0) {
            if (errno == EINTR) continue;
            break;
        }
        /* Keep the tail: drop the oldest bytes to make room. */
        size_t take = (size_t)got < cap - 1 ? (size_t)got : cap - 1;
        if (len + take > cap - 1) {
            size_t drop = len + take - (cap - 1);
            memmove(err, err + drop, len - drop);
            len -= drop;
        }
        memcpy(err + len, chunk + (size_t)got - take, take);
        len += take;
    }
    err[len] = '\0';
    close(err_pipe[0]);
    int exec_errno = 0;
    const ssize_t n_exec = read(exec_pipe[0], &exec_errno, sizeof exec_errno);
    close(exec_pipe[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return GP_FAILED;
    if (n_exec == (ssize_t)sizeof exec_errno) {
        snprintf(err, cap, "cannot run gnuplot: %s", strerror(exec_errno));
        return GP_MISSING;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? GP_OK : GP_FAILED;
}

typedef struct plot_ctx {
    const char *dir;
    int missing;   /* gnuplot could not be started: no further plot is tried */
    int n_failed;  /* plots not drawn */
    char **names;  /* (n_names) plot names taken so far, each unique */
    int n_names, cap_names;
} plot_ctx;

/* A unique file name for a plot, into out (cap bytes): prefix plus the
 * file-name-safe letters of label (other bytes as '_', at most 100 of
 * them; "unnamed" when empty), and "-2", "-3", ... when two labels read
 * the same, so no plot overwrites another. */
static void plot_name(plot_ctx *pc, const char *prefix, const char *label, char *out, size_t cap)
{
    char base[160];
    size_t j = (size_t)snprintf(base, sizeof base, "%s", prefix);
    for (const char *s = label; *s && j < sizeof base - 1 && s - label < 100; s++)
        base[j++] = ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                     *s == '-' || *s == '_')
                        ? *s
                        : '_';
    base[j] = '\0';
    if (!*label) snprintf(base + j, sizeof base - j, "unnamed");
    snprintf(out, cap, "%s", base);
    for (int suffix = 2;; suffix++) {
        int taken = 0;
        for (int i = 0; i < pc->n_names && !taken; i++) taken = !strcmp(pc->names[i], out);
        if (!taken) break;
        snprintf(out, cap, "%s-%d", base, suffix);
    }
    char **slot = APPEND(pc->names, pc->n_names, pc->cap_names);
    *slot = strdup(out);
    QV_ASSERT(*slot, "out of memory");
}

/* Opens DIR/plots/NAME.gp with the terminal lines written: an SVG of the
 * given height, text without enhanced markup (a '_' or '^' in a variant's
 * name prints as itself). NULL (a failed plot, said on stderr) when the
 * file cannot be created. */
static FILE *plot_begin(plot_ctx *pc, const char *name, int height)
{
    char gp[4096];
    snprintf(gp, sizeof gp, "%s/plots/%s.gp", pc->dir, name);
    FILE *g = fopen(gp, "w");
    if (!g) {
        fprintf(stderr, "qvet report: cannot write %s: %s\n", gp, strerror(errno));
        pc->n_failed++;
        return NULL;
    }
    fprintf(g, "set terminal svg size 960,%d dynamic font 'sans,11'\nset termoption noenhanced\nset output '%s.svg'\n",
            height, name);
    return g;
}

/* Closes the script g, runs it, and checks that NAME.svg exists and is not
 * empty. Returns 1 when it does; otherwise says why, on stderr with
 * gnuplot's own messages and in the Markdown, and returns 0. */
static int plot_end(plot_ctx *pc, FILE *md, FILE *g, const char *name)
{
    char gp[4096], svg[4096], gp_name[512], err[4096];
    snprintf(gp, sizeof gp, "%s/plots/%s.gp", pc->dir, name);
    snprintf(svg, sizeof svg, "%s/plots/%s.svg", pc->dir, name);
    snprintf(gp_name, sizeof gp_name, "%s.gp", name);
    const int werr = ferror(g);
    if (fclose(g) || werr) {
        fprintf(stderr, "qvet report: writing %s failed\n", gp);
        pc->n_failed++;
        fprintf(md, "*(plot `%s` not drawn: its script could not be written)*\n\n", name);
        return 0;
    }
    if (pc->missing) {
        pc->n_failed++;
        fprintf(md, "*(plot `%s` not drawn: gnuplot not found; `plots/%s.gp` draws it)*\n\n", name, name);
        return 0;
    }
    char plots[4096];
    snprintf(plots, sizeof plots, "%s/plots", pc->dir);
    const gp_status st = gnuplot(plots, gp_name, err, sizeof err);
    struct stat sb;
    if (st == GP_OK && stat(svg, &sb) == 0 && sb.st_size > 0) return 1;
    unlink(svg);
    pc->n_failed++;
    if (st == GP_MISSING) {
        pc->missing = 1;
        fprintf(stderr, "qvet report: %s; the plots are not drawn\n", err);
        fprintf(md, "*(plot `%s` not drawn: gnuplot not found; `plots/%s.gp` draws it)*\n\n", name, name);
        return 0;
    }
    size_t len = strlen(err);
    while (len && (err[len - 1] == '\n' || err[len - 1] == ' ')) err[--len] = '\0';
    if (st == GP_OK)
        fprintf(stderr, "qvet report: gnuplot wrote no %s\n", svg);
    else
        fprintf(stderr, "qvet report: gnuplot failed on %s:\n%s\n", gp, len ? err : "(no message)");
    fprintf(md, "*(plot `%s` not drawn: gnuplot failed on `plots/%s.gp`)*\n\n", name, name);
    return 0;
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
    for (int p = 0; p < np + nc; p++) {
        fputc(' ', md);
        md_cell(md, p < np ? probes[p] : classes[p - np]);
        fputs(" |", md);
    }
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
        fputs("| ", md);
        md_code(md, vars[v], 1);
        fprintf(md, " | %d | %.3g | %.3g |", cnt, worst, worst_ulp);
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

/* Writes the counts h (n bins) of one histogram panel: bins 0..n-1 on a
 * linear x axis with the given tic labels, nonzero counts as boxes on a log y
 * axis (a zero count has no place there). With every count zero, a "no data"
 * panel saying `none`. */
static void gp_hist_panel(FILE *g, const char *block, const double *h, int n, const char *xlabel,
                          const char *xtics, const char *color, const char *none)
{
    log_span counts = {0};
    for (int b = 0; b < n; b++)
        if (h[b] > 0) span_add(&counts, h[b]);
    fprintf(g, "set xlabel '%s'\nset ylabel 'elements (log)'\n", xlabel);
    if (!counts.n) {
        gp_no_data(g, none);
        return;
    }
    fprintf(g, "%s << EOD\n", block);
    for (int b = 0; b < n; b++)
        if (h[b] > 0) fprintf(g, "%d %.17g\n", b, h[b]);
    /* The bottom below the smallest count, so a bar of one element still shows. */
    fprintf(g, "EOD\nunset logscale\nset logscale y\nset xrange [-0.6:%d.6]\nset yrange [%.6g:%.6g]\n"
               "set xtics (%s)\nset ytics auto\nplot %s using 1:2 with boxes lc rgb '%s' notitle\n",
            n - 1, counts.lo < 1 ? decade(counts.lo, 0) : 0.8, decade(counts.hi, 1), xtics, block, color);
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
                "Right: max |err| against K beside the model's α·G (on its log scale, |err| = 0 of an "
                "exact case and α·G = 0 of an exact accumulator have no point); an accumulator cheaper "
                "than the declared one shows up as points climbing towards or above the α·G line.\n\n");
    for (int v = 0; v < nv; v++) {
        char name[256];
        plot_name(pc, "", vars[v], name, sizeof name);
        /* Histograms: bins of err/E in [0, 1) by 0.05 plus >= 1; ulps 0,1,2,3,4-7,8-15,>=16.
         * Cases left out, per panel: no histogram and no usable scalar (eb_out,
         * ulp_out), K or |err| unusable (k_out), α·G unusable beside a plotted
         * |err| (bound_out). Zero, which a log axis cannot hold either, is a
         * value and not a defect: |err| = 0 (exact) or α·G = 0 (an exact
         * accumulator) has no point, and the section's text says so. */
        double eb[21] = {0}, ulp[7] = {0};
        int eb_out = 0, ulp_out = 0, k_out = 0, bound_out = 0, exact = 0, n_bound = 0;
        log_span ks = {0}, errs = {0};
        for (int i = 0; i < r->n_cases; i++) {
            const rep_case *c = &r->cases[i];
            if (strcmp(c->variant, vars[v])) continue;
            if (c->has_hist_eb)
                for (int b = 0; b < 21; b++) eb[b] += c->hist_eb[b];
            else if (c->err_over_bound >= 0 && isfinite(c->err_over_bound))
                eb[c->err_over_bound >= 1 ? 20 : (int)(c->err_over_bound * 20)] += 1;
            else
                eb_out++;
            if (c->has_hist_ulp)
                for (int b = 0; b < 7; b++) ulp[b] += c->hist_ulp[b];
            else if (c->max_ulp >= 0 && isfinite(c->max_ulp)) {
                double u = c->max_ulp;
                ulp[u < 1 ? 0 : u < 2 ? 1 : u < 3 ? 2 : u < 4 ? 3 : u < 8 ? 4 : u < 16 ? 5 : 6] += 1;
            } else {
                ulp_out++;
            }
            if (on_log_axis(c->k) && on_log_axis(c->max_abs_err)) {
                span_add(&ks, c->k);
                span_add(&errs, c->max_abs_err);
                if (on_log_axis(c->alpha_g)) {
                    span_add(&errs, c->alpha_g);
                    n_bound++;
                } else if (c->alpha_g != 0) {
                    bound_out++;
                }
            } else if (on_log_axis(c->k) && c->max_abs_err == 0) {
                exact++;
            } else {
                k_out++;
            }
        }
        FILE *g = plot_begin(pc, name, 360);
        if (!g) continue;
        fputs("set multiplot layout 1,3 title ", g);
        gp_str(g, vars[v]);
        fputs("\nset style fill solid 0.6\nset boxwidth 0.8\nunset key\n", g);
        gp_hist_panel(g, "$eb", eb, 21, "|err|/E", "'0' 0, '.25' 5, '.5' 10, '.75' 15, '>=1' 20", "#3b6ea8",
                      "no data: no finite |err|/E");
        gp_hist_panel(g, "$ulp", ulp, 7, "ulps to RN(y)", "'0' 0, '1' 1, '2' 2, '3' 3, '4-7' 4, '8-15' 5, '>=16' 6",
                      "#5a9a5a", "no data: no finite ulp distance");
        fputs("set xlabel 'K'\nset ylabel '|err|'\n", g);
        if (ks.n) {
            /* The same filter as above, one datablock per series. */
            fputs("$err << EOD\n", g);
            for (int i = 0; i < r->n_cases; i++) {
                const rep_case *c = &r->cases[i];
                if (!strcmp(c->variant, vars[v]) && on_log_axis(c->k) && on_log_axis(c->max_abs_err))
                    fprintf(g, "%.17g %.17g\n", c->k, c->max_abs_err);
            }
            fputs("EOD\n$bound << EOD\n", g);
            for (int i = 0; i < r->n_cases; i++) {
                const rep_case *c = &r->cases[i];
                if (!strcmp(c->variant, vars[v]) && on_log_axis(c->k) && on_log_axis(c->max_abs_err) &&
                    on_log_axis(c->alpha_g))
                    fprintf(g, "%.17g %.17g\n", c->k, c->alpha_g);
            }
            fputs("EOD\nunset logscale\n", g);
            gp_log_range(g, "x", ks);
            gp_log_range(g, "y", errs);
            fputs("set xtics auto\nset ytics auto\nset format y '%.0e'\nset key top left font ',9'\n"
                  "plot $err using 1:2 with points pt 7 ps 0.4 lc rgb '#3b6ea8' title 'max |err|'",
                  g);
            if (n_bound) fputs(", $bound using 1:2 with points pt 6 ps 0.5 lc rgb '#c0392b' title 'α·G'", g);
            fputc('\n', g);
        } else {
            gp_no_data(g, exact ? "no nonzero error: exact" : "no data: no finite K and |err|");
        }
        fputs("unset multiplot\n", g);
        fputs("### ", md);
        md_code(md, vars[v], 0);
        fputs("\n\n", md);
        if (plot_end(pc, md, g, name)) fprintf(md, "![%s](plots/%s.svg)\n\n", name, name);
        if (eb_out || ulp_out || k_out || bound_out) {
            fputs("Values not plotted (null, NaN, Inf, negative or beyond 1e±300), in cases:", md);
            const char *sep = " ";
            const struct {
                int n;
                const char *what;
            } outs[] = {{eb_out, "|err|/E"}, {ulp_out, "ulps"}, {k_out, "K or |err|"}, {bound_out, "α·G"}};
            for (int o = 0; o < 4; o++)
                if (outs[o].n) {
                    fprintf(md, "%s%s %d", sep, outs[o].what, outs[o].n);
                    sep = ", ";
                }
            fputs(".\n\n", md);
        }
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
        fputs("| ", md);
        md_cell(md, c->verdict);
        fputs(" | ", md);
        md_code(md, c->variant, 1);
        fputs(" | ", md);
        fmt_num(md, c->m, "%.0f");
        fputs("×", md);
        fmt_num(md, c->n, "%.0f");
        fputs("×", md);
        fmt_num(md, c->k, "%.0f");
        fputs(" | ", md);
        md_cell(md, c->probe);
        fputs(" | ", md);
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

/* Routed rows: verdicts per row, routing counts, and the failures with
 * their replay commands. */
static void section_routed(FILE *md, report *r)
{
    if (!r->n_routed) return;
    const char **rows;
    int nr = distinct(r->routed, r->n_routed, sizeof(rep_routed), offsetof(rep_routed, variant), &rows);
    int fails = 0;
    for (int i = 0; i < r->n_routed; i++) fails += r->routed[i].verdict && !strcmp(r->routed[i].verdict, "FAIL");
    fprintf(md, "## Routed (mixture-of-experts) cases\n\n%d cases, %d FAIL. Routing is exact; a near tie is "
                "allowed only where fp32 scores can reorder (docs/moe.md).\n\n"
                "| routed row | cases | PASS | MARGINAL | FAIL | near ties | bad routes | bad weights | worst err/E |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            r->n_routed, fails);
    for (int v = 0; v < nr; v++) {
        int n = 0, g[3] = {0, 0, 0};
        double amb = 0, bad = 0, wbad = 0, worst = 0;
        for (int i = 0; i < r->n_routed; i++) {
            const rep_routed *c = &r->routed[i];
            if (!c->variant || strcmp(c->variant, rows[v])) continue;
            n++;
            g[c->verdict && !strcmp(c->verdict, "FAIL") ? 2 : c->verdict && !strcmp(c->verdict, "MARGINAL") ? 1 : 0]++;
            if (isfinite(c->ambiguous)) amb += c->ambiguous;
            if (isfinite(c->route_bad)) bad += c->route_bad;
            if (isfinite(c->weight_bad)) wbad += c->weight_bad;
            if (isfinite(c->err_over_bound) && c->err_over_bound > worst) worst = c->err_over_bound;
        }
        fputs("| ", md);
        md_code(md, rows[v], 1);
        fprintf(md, " | %d | %d | %d | %d | %.0f | %.0f | %.0f | %.3g |\n", n, g[0], g[1], g[2], amb, bad, wbad, worst);
    }
    fputc('\n', md);
    int shown = 0;
    for (int i = 0; i < r->n_routed && shown < 15; i++) {
        const rep_routed *c = &r->routed[i];
        if (!c->verdict || strcmp(c->verdict, "FAIL")) continue;
        if (!shown++) fputs("| failing case | t×n×k | logits | reason | replay |\n|---|---|---|---|---|\n", md);
        fputs("| ", md);
        md_code(md, c->variant, 1);
        fputs(" | ", md);
        fmt_num(md, c->t, "%.0f");
        fputs("×", md);
        fmt_num(md, c->n, "%.0f");
        fputs("×", md);
        fmt_num(md, c->k, "%.0f");
        fputs(" | ", md);
        md_cell(md, c->logits);
        fputs(" | ", md);
        md_cell(md, c->reason);
        fputs(" | `", md);
        md_cell(md, c->replay);
        fputs("` |\n", md);
    }
    if (shown) fputc('\n', md);
    free((void *)rows);
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
        fputs("Model ", md);
        md_code(md, models[mi], 0);
        fputs(" (sha256 ", md);
        md_code(md, first->model_sha, 0);
        fputs("), text sha256 ", md);
        md_code(md, first->text_sha, 0);
        fputs(", ", md);
        fmt_num(md, first->tokens, "%.0f");
        fputs(" tokens, context ", md);
        fmt_num(md, first->ctx, "%.0f");
        fputs(", ", md);
        fmt_num(md, first->chunks, "%.0f");
        fputs(" chunks (second half of each chunk scored).\n\n", md);
        fprintf(md, "| variant | backend | PPL | ΔPPL | KLD mean | KLD p99 | KLD max | same top-1 | RMS Δp |\n"
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < r->n_ppl; i++) {
            rep_ppl *p = &r->ppl[i];
            if (strcmp(p->model, models[mi])) continue;
            fputs("| ", md);
            md_code(md, p->variant, 1);
            fputs(" | ", md);
            md_cell(md, p->backend);
            /* same_top1 is a fraction (eval/cmd_ppl.c), shown in percent. */
            const struct {
                const char *before, *fmt;
                double x;
            } cells[] = {{" | ", "%.4f", p->ppl},       {" ± ", "%.4f", p->ppl_se},  {" | ", "%+.4f", p->dppl},
                         {" ± ", "%.4f", p->dppl_se},   {" | ", "%.3g", p->kld},     {" ± ", "%.2g", p->kld_se},
                         {" | ", "%.3g", p->kld_p99},   {" | ", "%.3g", p->kld_max}, {" | ", "%.2f %%", 100 * p->top1},
                         {" | ", "%.3g", p->rms_dp}};
            for (size_t ci = 0; ci < sizeof cells / sizeof cells[0]; ci++) {
                fputs(cells[ci].before, md);
                fmt_num(md, cells[ci].x, cells[ci].fmt);
            }
            fputs(" |\n", md);
        }
        fputc('\n', md);
    }
    free(models);
}

/* 1 when bench line b is a block line of `model` and `variant`. */
static int is_block(const rep_bench *b, const char *model, const char *variant)
{
    return !strcmp(b->model, model) && !strcmp(b->variant, variant) && !strcmp(b->layer, "block");
}

/* The weight-read floor drawn beside a baseline row, or NULL. */
static const char *floor_title(const char *variant)
{
    if (!strcmp(variant, "cublas-f16")) return "fp16 weight floor";
    if (!strcmp(variant, "marlin-w4a16-g128-f16")) return "int4 weight floor";
    return NULL;
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
        /* Block lines whose M or time cannot sit on the log axes are left out
         * and counted; a series is drawn when one of its lines is left. */
        log_span ms = {0}, us = {0};
        int blocks = 0, left_out = 0;
        for (int i = 0; i < r->n_bench; i++) {
            const rep_bench *b = &r->bench[i];
            if (strcmp(b->model, models[mi]) || strcmp(b->layer, "block")) continue;
            blocks++;
            if (!on_log_axis(b->m) || !on_log_axis(b->median_us)) {
                left_out++;
                continue;
            }
            span_add(&ms, b->m);
            span_add(&us, b->median_us);
            if (floor_title(b->variant) && on_log_axis(b->floor_us)) span_add(&us, b->floor_us);
        }
        /* Only layer lines (or lines without a model, such as "copy"): nothing to plot or tabulate. */
        if (!blocks) continue;
        char name[256];
        plot_name(pc, "speed_", models[mi], name, sizeof name);
        FILE *g = ms.n ? plot_begin(pc, name, 640) : NULL;
        if (g) {
            fputs("set title ", g);
            char title[512];
            snprintf(title, sizeof title, "block time, %s", models[mi]);
            gp_str(g, title);
            fputs("\nset xlabel 'M'\nset ylabel 'median µs'\nset key below maxcols 3 font ',9'\n", g);
            gp_log_range(g, "x", ms);
            gp_log_range(g, "y", us);
            /* One datablock per series: $tV the times of variant V, $fV its floor. */
            for (int v = 0; v < nv; v++) {
                for (int fl = 0; fl < 2; fl++) {
                    if (fl && !floor_title(vars[v])) continue;
                    int rows = 0;
                    for (int i = 0; i < r->n_bench; i++) {
                        const rep_bench *b = &r->bench[i];
                        if (!is_block(b, models[mi], vars[v]) || !on_log_axis(b->m) || !on_log_axis(b->median_us) ||
                            (fl && !on_log_axis(b->floor_us)))
                            continue;
                        if (!rows++) fprintf(g, "$%c%d << EOD\n", fl ? 'f' : 't', v);
                        fprintf(g, "%.17g %.17g\n", b->m, fl ? b->floor_us : b->median_us);
                    }
                    if (rows) fputs("EOD\n", g);
                }
            }
            fputs("plot ", g);
            int series = 0;
            for (int v = 0; v < nv; v++) {
                int have_t = 0, have_f = 0;
                for (int i = 0; i < r->n_bench; i++) {
                    const rep_bench *b = &r->bench[i];
                    if (!is_block(b, models[mi], vars[v]) || !on_log_axis(b->m) || !on_log_axis(b->median_us))
                        continue;
                    have_t = 1;
                    have_f |= floor_title(vars[v]) && on_log_axis(b->floor_us);
                }
                if (!have_t) continue;
                fprintf(g, "%s$t%d using 1:2 with linespoints %s title ", series++ ? ", " : "", v,
                        strncmp(vars[v], "cublas", 6) ? "" : "lw 3 lc rgb 'black'");
                gp_str(g, vars[v]);
                if (have_f)
                    fprintf(g, ", $f%d using 1:2 with lines dt %d lc rgb '%s' title '%s'", v,
                            strcmp(vars[v], "cublas-f16") ? 3 : 2, strcmp(vars[v], "cublas-f16") ? "black" : "gray",
                            floor_title(vars[v]));
            }
            fputc('\n', g);
            if (plot_end(pc, md, g, name)) fprintf(md, "![speed %s](plots/%s.svg)\n\n", name + 6, name);
        } else if (!ms.n) {
            fputs("No speed plot for ", md);
            md_code(md, models[mi], 0);
            fputs(": no block line has a positive, finite M and time.\n\n", md);
        }
        if (left_out)
            fprintf(md, "%d block lines not plotted (M or time null, NaN, Inf, not positive or beyond 1e±300).\n\n",
                    left_out);
        fprintf(md, "| variant | M | block µs | floor fraction | vs cuBLAS fp16 |\n|---|---:|---:|---:|---:|\n");
        for (int v = 0; v < nv; v++)
            for (int i = 0; i < r->n_bench; i++) {
                const rep_bench *b = &r->bench[i];
                if (!is_block(b, models[mi], vars[v])) continue;
                fputs("| ", md);
                md_code(md, b->variant, 1);
                fputs(" | ", md);
                fmt_num(md, b->m, "%.0f");
                fputs(" | ", md);
                fmt_num(md, b->median_us, "%.1f");
                fputs(" | ", md);
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
               "reported with their line number and skipped. The same input gives the same bytes.\n"
               "Exit status: 0 done, 2 bad arguments or an unreadable input, 3 gnuplot missing or\n"
               "failing (index.md is still written, and says which plots are missing).\n");
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
    plot_ctx pc = {.dir = outdir};
    fprintf(md, "# qvet accuracy report\n\n");
    if (!r.n_cases && !r.n_routed && !r.n_bench && !r.n_mutants && !r.n_ppl)
        fprintf(md, "The inputs hold no results.\n\n");
    if (r.n_cases) section_verdicts(md, &r);
    section_worst(md, &r);
    section_routed(md, &r);
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
    for (int i = 0; i < pc.n_names; i++) free(pc.names[i]);
    free(pc.names);
    /* Exit 3 is an environment failure: the data cannot make a plot fail, so
     * a plot not drawn means gnuplot is missing or cannot draw SVG. */
    if (pc.missing) {
        fprintf(stderr, "qvet report: gnuplot not found: %s has no plots; install gnuplot, or run the scripts "
                        "in %s with it\n",
                md_path, plots);
        return 3;
    }
    if (pc.n_failed) {
        fprintf(stderr, "qvet report: %d plots could not be drawn (gnuplot's messages above)\n", pc.n_failed);
        return 3;
    }
    return 0;
}
