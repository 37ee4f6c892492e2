/* cmd_campaign.c: `qvet check`, `qvet fuzz` and `qvet replay` (cli.h). check
 * runs the fixed suite of every selected variant, fuzz runs generated cases
 * within a budget (shrinking and dumping each failure), replay re-runs one case
 * of either bit for bit. All three write JSON Lines (docs/results-format.md): a
 * "run" provenance line, then one "case" (a routed row's: "routed") line per
 * case. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal/campaign.h"
#include "internal/cli.h"
#include "internal/gpu.h"
#include "internal/json.h"
#include "internal/launch_env.h"
#include "qvet/plugin.h"
#include "qvet/spec.h"

/* ---- options ---- */

enum {
    OPT_VARIANT = 1 << 0, OPT_BACKEND = 1 << 1, OPT_OUT = 1 << 2, OPT_PLUGIN = 1 << 3,
    OPT_SEED = 1 << 4, OPT_BUDGET = 1 << 5, OPT_SHARD = 1 << 6, OPT_CASE = 1 << 7,
    OPT_CAP = 1 << 8, OPT_FAILDIR = 1 << 9, OPT_DUMP = 1 << 10, OPT_JOBS = 1 << 11
};

typedef struct camp_opts {
    const char *cmd;            /* "check", "fuzz", "replay" */
    const char *glob;
    const char *specs[QV_GEN_MAX_SPECS]; /* --spec, in the order given */
    int n_specs;
    int want_gpu, want_cpu;
    const char *out_path;
    const char *plugin_path;
    uint64_t seed;
    int seed_set;
    long long cases;            /* fuzz: cases of this shard; 0 with minutes: time-bounded */
    double minutes;
    long long shard_i, shard_n;
    long long case_index;       /* replay */
    int case_set;
    int suite;                  /* replay --check */
    long long cap;              /* CPU m*n*k cap */
    int cap_set;
    const char *fail_dir;       /* fuzz/check: where shrunk failures go */
    const char *dump_dir;       /* replay: dump inputs and output here */
    int shrink;                 /* replay --shrink; check/fuzz: 0 with --no-shrink */
    int quiet;
    int jobs;                   /* check/fuzz: cases run on this many threads */
    qv_launch_opts launch;      /* the GPU backend's launch options (the QVET_* variables) */
} camp_opts;

/* The check seed: fixed, so `qvet check` draws the same data on every run. */
#define QV_CHECK_SEED 20261129ull

/* What --spec means, in the check and fuzz help. */
#define SPEC_HELP                                                                      \
    "--spec SPEC runs a declared arithmetic (docs/spec.md, e.g. 'w=u4b8,ws=f16/g128')\n"   \
    "instead of registry rows: on its CPU model (the default), or with --plugin on the\n"  \
    "plugin's launch, which must declare it. Give --spec once per spec; it excludes\n"      \
    "--variant. Without --spec, a plugin's own specs run beside its rows.\n"

/* What --jobs means, in the check and fuzz help. */
#define JOBS_HELP                                                                          \
    "--jobs N runs cases on N threads (default: the cores online): each case is made,\n"  \
    "run and verified on one, one launch at a time on the GPU or a plugin; lines are\n"  \
    "written in case order and are the same bits as with --jobs 1.\n"

static void usage(FILE *f, const char *cmd)
{
    if (!strcmp(cmd, "check"))
        fprintf(f,
                "usage: qvet check [--variant GLOB | --spec SPEC...] [--gpu|--cpu] [--out FILE]\n"
                "                  [--plugin LIB.so] [--seed S] [--cap MNK] [--fail-dir DIR]\n"
                "                  [--no-shrink] [--quiet] [--jobs N]\n\n"
                "Runs the fixed suite of every selected variant: the M edges, N x K tile edges,\n"
                "exact, one-hot and random probes, the extreme scale regimes, the precision\n"
                "witnesses and one large-K slice of a real layer. Without a CUDA device (or with\n"
                "--cpu) it runs the CPU models, with shapes capped at m*n*k <= %lld (--cap).\n"
                "Prints a summary table; the last line is `check: N cases, F failed`.\n"
                "%s%s"
                "Exit 0 when nothing FAILs, 1 on a FAIL, 2 on a usage error, 3 without a device.\n",
                (long long)QV_CPU_CAP_CHECK, SPEC_HELP, JOBS_HELP);
    else if (!strcmp(cmd, "fuzz"))
        fprintf(f,
                "usage: qvet fuzz [--variant GLOB | --spec SPEC...] [--cases N | --minutes M] [--seed S]\n"
                "                 [--shard I/N] [--out FILE] [--gpu|--cpu] [--plugin LIB.so] [--cap MNK]\n"
                "                 [--fail-dir DIR] [--no-shrink] [--quiet] [--jobs N]\n\n"
                "Runs generated cases J = I, I+N, I+2N, ... of campaign S (default: 1000 cases).\n"
                "Each case is a pure function of (S, J). A FAIL is shrunk and its inputs are\n"
                "written as .npy into DIR/seedS-caseJ/ (default qvet-failures) with a replay command.\n"
                "CPU-model cases are capped at m*n*k <= %lld (--cap).\n"
                "%s%s"
                "The last line is `fuzz: N cases, F failed`; exit 1 if any case FAILed.\n",
                (long long)QV_CPU_CAP_MNK, SPEC_HELP, JOBS_HELP);
    else
        fprintf(f,
                "usage: qvet replay --seed S --case J [--check] [--variant GLOB | --spec SPEC...]\n"
                "                   [--gpu|--cpu] [--plugin LIB.so] [--cap MNK] [--out FILE] [--dump DIR]\n"
                "                   [--shrink]\n\n"
                "Re-runs case J of campaign S (with --check: case J of the variant's fixed suite)\n"
                "bit for bit and prints its JSONL line. Use the same --variant (or the same --spec\n"
                "options in the same order), backend and --cap as the original run (the replay\n"
                "command in each JSONL line does). --dump writes the inputs, the output and the\n"
                "reference as .npy, with a `spec` file; --shrink shrinks a FAIL first.\n");
}

/* The options that take a string, and the field it goes to. */
static const struct str_opt {
    const char *name;
    unsigned flag;      /* the OPT_ bit that allows it */
    size_t field;       /* offsetof(camp_opts, ...): a const char * */
} str_opts[] = {
    {"--variant", OPT_VARIANT, offsetof(camp_opts, glob)},
    {"--out", OPT_OUT, offsetof(camp_opts, out_path)},
    {"--plugin", OPT_PLUGIN, offsetof(camp_opts, plugin_path)},
    {"--fail-dir", OPT_FAILDIR, offsetof(camp_opts, fail_dir)},
    {"--dump", OPT_DUMP, offsetof(camp_opts, dump_dir)},
};

/* The options without a value, and the value they set. */
static const struct flag_opt {
    const char *name;
    unsigned flag;      /* the OPT_ bit that allows it */
    size_t field;       /* offsetof(camp_opts, ...): an int */
    int value;
} flag_opts[] = {
    {"--gpu", OPT_BACKEND, offsetof(camp_opts, want_gpu), 1},
    {"--cpu", OPT_BACKEND, offsetof(camp_opts, want_cpu), 1},
    {"--check", OPT_CASE, offsetof(camp_opts, suite), 1},
    {"--shrink", OPT_DUMP, offsetof(camp_opts, shrink), 1},
    {"--no-shrink", OPT_FAILDIR, offsetof(camp_opts, shrink), 0},
    {"--quiet", OPT_FAILDIR, offsetof(camp_opts, quiet), 1},
};

#define N_OF(table) (sizeof table / sizeof table[0])

/* Parses the options `allowed` lets through; returns -1 after printing the
 * usage for a bad one, 1 for --help, 0 otherwise. */
static int parse_opts(int argc, char **argv, unsigned allowed, camp_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        double d;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, o->cmd);
            return 1;
        }
        const struct str_opt *so = NULL;
        const struct flag_opt *fo = NULL;
        for (size_t t = 0; t < N_OF(str_opts); t++)
            if (!strcmp(a, str_opts[t].name)) so = &str_opts[t];
        for (size_t t = 0; t < N_OF(flag_opts); t++)
            if (!strcmp(a, flag_opts[t].name)) fo = &flag_opts[t];
#define NEEDS(flag)                                                            \
    if (!(allowed & (flag))) goto bad;
        if (so) {
            NEEDS(so->flag);
            if (!val) goto missing;
            *(const char **)((char *)o + so->field) = val;
            i++;
        } else if (fo) {
            NEEDS(fo->flag);
            *(int *)((char *)o + fo->field) = fo->value;
        } else if (!strcmp(a, "--spec")) {
            NEEDS(OPT_VARIANT);
            if (!val) goto missing;
            if (o->n_specs >= QV_GEN_MAX_SPECS) {
                fprintf(stderr, "qvet %s: at most %d --spec options\n", o->cmd, QV_GEN_MAX_SPECS);
                goto fail;
            }
            o->specs[o->n_specs++] = val;
            i++;
        } else if (!strcmp(a, "--seed")) {
            NEEDS(OPT_SEED);
            if (!val) goto missing;
            char *end;
            o->seed = strtoull(val, &end, 0);
            if (end == val || *end || *val == '-') {
                fprintf(stderr, "qvet %s: --seed: '%s' is not a non-negative integer\n", o->cmd, val);
                goto fail;
            }
            o->seed_set = 1;
            i++;
        } else if (!strcmp(a, "--cases")) {
            NEEDS(OPT_BUDGET);
            if (qv_opt_long("--cases", val, 1, (long long)1 << 40, &x)) goto fail;
            o->cases = x;
            i++;
        } else if (!strcmp(a, "--minutes")) {
            NEEDS(OPT_BUDGET);
            if (qv_opt_double("--minutes", val, &d)) goto fail;
            if (!(d > 0 && d <= 1e6)) {
                fprintf(stderr, "qvet %s: --minutes must be in (0, 1e6]\n", o->cmd);
                goto fail;
            }
            o->minutes = d;
            i++;
        } else if (!strcmp(a, "--shard")) {
            NEEDS(OPT_SHARD);
            char tail;
            if (!val || sscanf(val, "%lld/%lld%c", &o->shard_i, &o->shard_n, &tail) != 2 || o->shard_n < 1 ||
                o->shard_i < 0 || o->shard_i >= o->shard_n) {
                fprintf(stderr, "qvet %s: --shard wants I/N with 0 <= I < N (e.g. 0/4), got '%s'\n", o->cmd,
                        val ? val : "");
                goto fail;
            }
            i++;
        } else if (!strcmp(a, "--case")) {
            NEEDS(OPT_CASE);
            if (qv_opt_long("--case", val, 0, INT64_MAX, &x)) goto fail;
            o->case_index = x;
            o->case_set = 1;
            i++;
        } else if (!strcmp(a, "--jobs")) {
            NEEDS(OPT_JOBS);
            if (qv_opt_long("--jobs", val, 1, 1024, &x)) goto fail;
            o->jobs = (int)x;
            i++;
        } else if (!strcmp(a, "--cap")) {
            NEEDS(OPT_CAP);
            if (qv_opt_long("--cap", val, 1, (long long)1 << 50, &x)) goto fail;
            o->cap = x;
            o->cap_set = 1;
            i++;
        } else {
            goto bad;
        }
#undef NEEDS
        continue;
    missing:
        fprintf(stderr, "qvet %s: option %s needs a value\n\n", o->cmd, a);
        usage(stderr, o->cmd);
        return -1;
    bad:
        fprintf(stderr, "qvet %s: unknown option '%s'\n\n", o->cmd, a);
        usage(stderr, o->cmd);
        return -1;
    }
    if (o->want_gpu && o->want_cpu) {
        fprintf(stderr, "qvet %s: --gpu and --cpu exclude each other\n", o->cmd);
        return -1;
    }
    if (o->n_specs && o->glob) {
        fprintf(stderr, "qvet %s: --spec and --variant exclude each other\n", o->cmd);
        return -1;
    }
    if (o->cases && o->minutes > 0) {
        fprintf(stderr, "qvet %s: give --cases or --minutes, not both\n", o->cmd);
        return -1;
    }
    /* The kernel paths' variables (docs/launch-options.md), refused like a bad option. */
    if (qv_cli_launch_env(o->cmd, &o->launch)) return -1;
    return 0;
fail:
    return -1;
}

/* ---- backend selection ---- */

/* Fills b from the options; a loaded plugin lives in *pl. Returns an exit code
 * (0 ok, 2 bad plugin, 3 no device) after printing why. */
static int pick_backend(const camp_opts *o, qv_backend *b, qv_plugin *pl)
{
    int have_gpu = qv_gpu_info_get(NULL);
    if (o->plugin_path) {
        qv_status st = qv_plugin_open(o->plugin_path, pl);
        if (st != QV_OK) {
            fprintf(stderr, "qvet %s: %s\n", o->cmd, qv_errmsg());
            return qv_status_exit_code(st);
        }
        int device = pl->pointers == QV_PLUGIN_DEVICE;
        if (device && !have_gpu) {
            fprintf(stderr, "qvet %s: plugin %s takes device pointers, but no CUDA device is present\n", o->cmd,
                    pl->path);
            return 3;
        }
        if (device && o->want_cpu) {
            fprintf(stderr, "qvet %s: plugin %s takes device pointers; --cpu cannot run it\n", o->cmd, pl->path);
            return 2;
        }
        qv_backend_init(b, device ? QV_BACKEND_DEVICE_FN : QV_BACKEND_HOST_FN);
        snprintf(b->name, sizeof b->name, "plugin:%s", pl->name);
        snprintf(b->plugin_path, sizeof b->plugin_path, "%s", pl->path);
        b->launch = pl->launch;
        b->moe_launch = pl->moe_launch;
        b->only = pl->variants;
        b->n_only = pl->n_variants;
    } else if (o->n_specs && o->want_gpu) {
        /* qvet's kernels are registry rows; a spec runs on its CPU model or a plugin. */
        int rows = 1;
        for (int i = 0; i < o->n_specs; i++) rows &= !qv_is_spec(o->specs[i]);
        if (!rows) {
            fprintf(stderr, "qvet %s: --gpu runs qvet's own kernels, which are registry rows; run a spec with --cpu "
                            "(its CPU model) or --plugin LIB.so (your kernel)\n", o->cmd);
            return 2;
        }
        if (!have_gpu) {
            fprintf(stderr, "qvet %s: --gpu: no CUDA device is present (use --cpu for the CPU models)\n", o->cmd);
            return 3;
        }
        qv_backend_init(b, QV_BACKEND_GPU);
    } else if (o->want_gpu || (!o->want_cpu && !o->n_specs && have_gpu)) {
        if (!have_gpu) {
            fprintf(stderr, "qvet %s: --gpu: no CUDA device is present (use --cpu for the CPU models)\n", o->cmd);
            return 3;
        }
        qv_backend_init(b, QV_BACKEND_GPU);
    } else {
        qv_backend_init(b, QV_BACKEND_CPU);
    }
    b->opts = &o->launch;
    /* The fixed suite (check, replay --check) keeps larger CPU shapes than fuzz. */
    b->cap_mnk = qv_backend_default_cap(b->kind, !strcmp(o->cmd, "check") || o->suite);
    if (o->cap_set) b->cap_mnk = o->cap;
    return 0;
}

/* ---- provenance ---- */

/* The member ,"key":"s" of a JSON object being written. */
static void json_member(FILE *f, const char *key, const char *s)
{
    fprintf(f, ",\"%s\":", key);
    qv_json_fput_str(f, s);
}

/* The same, with null for a missing or empty s. */
static void json_member_or_null(FILE *f, const char *key, const char *s)
{
    if (s && *s) json_member(f, key, s);
    else fprintf(f, ",\"%s\":null", key);
}

static void write_run_line(FILE *f, int argc, char **argv, const camp_opts *o, const qv_backend *b,
                           const qv_gen *gen)
{
    char cmd[QV_REPLAY_MAX];
    size_t at = (size_t)snprintf(cmd, sizeof cmd, "qvet");
    for (int i = 0; i < argc && at < sizeof cmd; i++) at += (size_t)snprintf(cmd + at, sizeof cmd - at, " %s", argv[i]);
    char host[256] = "", date[64], drv[64] = "", cuda[32] = "";
    if (gethostname(host, sizeof host)) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    qv_gpu_info gi;
    qv_gpu_info_get(&gi);
    if (gi.present) {
        qv_driver_version(gi.driver, drv, sizeof drv);
        snprintf(cuda, sizeof cuda, "%d.%d", gi.runtime / 1000, gi.runtime % 1000 / 10);
    }
    fputs("{\"kind\":\"run\"", f);
    json_member(f, "command", cmd);
    json_member(f, "qvet_version", QV_VERSION);
    json_member(f, "commit", qv_build_commit());
    json_member(f, "date", date);
    json_member(f, "host", host);
    json_member(f, "backend", b->name);
    json_member_or_null(f, "gpu", gi.present ? gi.name : NULL);
    json_member_or_null(f, "driver", drv);
    json_member_or_null(f, "cuda", cuda);
    fprintf(f, ",\"seed\":%llu,\"shard\":\"%lld/%lld\"", (unsigned long long)o->seed, o->shard_i, o->shard_n);
    json_member(f, "suite", o->cmd);
    json_member_or_null(f, "variant_glob", o->glob);
    if (gen->listed) {
        fputs(",\"specs\":[", f);
        for (int i = 0; i < gen->n_variants; i++) {
            if (i) fputc(',', f);
            qv_json_fput_str(f, gen->variants[i]->name);
        }
        fputc(']', f);
    }
    fprintf(f, ",\"cpu_cap_mnk\":%lld", (long long)b->cap_mnk);
    if (b->plugin_path[0]) json_member(f, "plugin", b->plugin_path);
    fputs("}\n", f);
}

/* ---- results file: written as FILE.partial, renamed when complete, so a
 * results file is never half-written. ---- */

typedef struct results {
    FILE *f;
    char final[1024], tmp[1040];
} results;

static int results_open(results *r, const char *path, const char *cmd)
{
    memset(r, 0, sizeof *r);
    if (!path) return 0;
    snprintf(r->final, sizeof r->final, "%s", path);
    snprintf(r->tmp, sizeof r->tmp, "%s.partial", path);
    /* The results folder is created when missing (make run's BUILD/results). */
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (qv_mkdirs(parent) != QV_OK) {
            fprintf(stderr, "qvet %s: %s\n", cmd, qv_errmsg());
            return -1;
        }
    }
    r->f = fopen(r->tmp, "w");
    if (!r->f) {
        fprintf(stderr, "qvet %s: cannot write %s: ", cmd, r->tmp);
        perror(NULL);
        return -1;
    }
    return 0;
}

static int results_close(results *r, const char *cmd)
{
    if (!r->f) return 0;
    int bad = ferror(r->f) | fclose(r->f);
    r->f = NULL;
    if (bad || rename(r->tmp, r->final)) {
        fprintf(stderr, "qvet %s: cannot complete %s\n", cmd, r->final);
        return -1;
    }
    return 0;
}

/* ---- per-variant tallies for the summary table ---- */

typedef struct tally {
    const qv_variant *v;
    long long cases, pass, marginal, fail;
    double worst_eb, worst_ulp;
} tally;

static void tally_result(tally *t, const qv_result *r)
{
    t->cases++;
    if (r->grade == QV_PASS) t->pass++;
    else if (r->grade == QV_MARGINAL) t->marginal++;
    else t->fail++;
    if (isfinite(r->max_err_over_bound) && r->max_err_over_bound > t->worst_eb) t->worst_eb = r->max_err_over_bound;
    if (isfinite(r->max_ulp) && r->max_ulp > t->worst_ulp) t->worst_ulp = r->max_ulp;
}

static void tally_add(tally *t, const qv_outcome *o) { tally_result(t, &o->res); }

/* names: the routed rows' names for t (NULL: each tally's variant). */
static void print_rows(FILE *f, const tally *t, int n, const qv_moe_row *const *names)
{
    for (int i = 0; i < n; i++) {
        if (!t[i].cases) continue;
        fprintf(f, "%-28s %7lld %7lld %8lld %6lld %12.4g %10.4g\n", names ? names[i]->name : t[i].v->name,
                t[i].cases, t[i].pass, t[i].marginal, t[i].fail, t[i].worst_eb, t[i].worst_ulp);
    }
}

static void print_table(FILE *f, const tally *t, int n, const tally *mt, const qv_moe_row *const *moe, int n_moe)
{
    fprintf(f, "%-28s %7s %7s %8s %6s %12s %10s\n", "variant", "cases", "PASS", "MARGINAL", "FAIL",
            "worst err/E", "worst ULP");
    print_rows(f, t, n, NULL);
    print_rows(f, mt, n_moe, moe);
}

/* ---- one case, end to end ---- */

/* How many failures per run are shrunk and dumped: a kernel that fails
 * everywhere must not spend the whole budget shrinking. */
#define MAX_SHRUNK_FAILURES 8
/* Runs per shrink: halving from 4096 to 1 in each of three dimensions takes
 * under 40 accepted steps; the rest leaves room for rejected candidates. */
#define SHRINK_TRIES 120

typedef struct campaign {
    camp_opts *o;
    qv_backend *b;
    results res;
    tally tallies[QV_GEN_MAX_VARIANTS];
    qv_gen gen;
    long long n_cases, n_fail, n_shrunk;
    double macs; /* sum of m n k over the finished cases */
    /* check: the suite's cases in run order, variant by variant */
    int *check_variant;
    int *check_index;
    long long check_total;
    /* the routed rows of the run (CPU: all; GPU: those with a kernel), with their tallies */
    const qv_moe_row *moe[QV_GEN_MAX_VARIANTS];
    tally moe_tally[QV_GEN_MAX_VARIANTS];
    int n_moe;
} campaign;

/* A variant's name as one folder name: a spec's '/' and ',' become '-' and '_'. */
static void file_name(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s", name);
    for (char *c = buf; *c; c++)
        if (*c == '/') *c = '-';
        else if (*c == ',') *c = '_';
}

/* The folder under --fail-dir of a failing case: seedS-caseJ for a generated
 * case, check-NAME-caseJ for case J of variant NAME's fixed suite. */
static void fail_dir_of(const campaign *cp, int suite, const char *name, uint64_t seed, long long index, char *buf,
                        size_t len)
{
    char fname[QV_SPEC_MAX];
    file_name(name, fname, sizeof fname);
    if (suite) snprintf(buf, len, "%s/check-%s-case%lld", cp->o->fail_dir, fname, index);
    else snprintf(buf, len, "%s/seed%llu-case%lld", cp->o->fail_dir, (unsigned long long)seed, index);
}

/* Finishes case c, made into p and run into out (by a worker): shrinks a
 * FAIL, tallies it, writes its JSONL line, frees both. In case order, on the
 * main thread, so the shrink budget and the lines are those of a run on one
 * thread. */
static void finish_case(campaign *cp, const qv_case *c, qv_problem *p, qv_outcome *out, int print_fail)
{
    char replay[QV_REPLAY_MAX];
    qv_case_replay_cmd(c, cp->b, &cp->gen, cp->o->glob, replay, sizeof replay);
    int unique = ref_probe_is_unique(c->probe);
    qv_shrunk sh, *shp = NULL;
    if (out->res.grade == QV_FAIL) {
        cp->n_fail++;
        if (print_fail)
            fprintf(stdout, "%sFAIL %s m=%lld n=%lld k=%lld %s/%s: %s\n  replay: %s\n",
                    isatty(STDOUT_FILENO) ? "\r\033[K" : "", c->v->name, (long long)c->m, (long long)c->n,
                    (long long)c->k, qv_probe_name(c->probe), qv_regime_name(c->regime), out->res.reason, replay);
        if (cp->o->shrink && cp->n_shrunk < MAX_SHRUNK_FAILURES) {
            qv_problem small;
            if (qv_shrink(cp->b, p, unique, SHRINK_TRIES, &small, &sh) == QV_OK) {
                fail_dir_of(cp, c->suite, c->v->name, c->seed, (long long)c->index, sh.dir, sizeof sh.dir);
                if (qv_case_dump(cp->b, &small, unique, sh.dir, replay) != QV_OK) {
                    fprintf(stderr, "qvet %s: dumping the shrunk case: %s\n", cp->o->cmd, qv_errmsg());
                    sh.dir[0] = '\0';
                }
                shp = &sh;
                cp->n_shrunk++;
                if (print_fail)
                    fprintf(stdout, "  shrunk to m=%lld n=%lld k=%lld in %d runs; inputs in %s/\n", (long long)sh.m,
                            (long long)sh.n, (long long)sh.k, sh.tries, sh.dir[0] ? sh.dir : "(not written)");
                qv_problem_destroy(&small);
            }
        }
        fflush(stdout);
    }
    for (int i = 0; i < cp->gen.n_variants; i++)
        if (cp->gen.variants[i] == c->v) tally_add(&cp->tallies[i], out);
    if (cp->res.f) {
        qv_case_json(cp->res.f, c, cp->b, out, replay, shp);
        fflush(cp->res.f);
    }
    cp->n_cases++;
    cp->macs += (double)c->m * (double)c->n * (double)c->k;
    qv_outcome_clear(out);
    qv_problem_destroy(p);
}

/* ---- routed cases ---- */

/* Routed cases run on cp->o->jobs threads in batches; their lines are
 * written in case order, as with one thread. */
typedef struct routed_batch {
    const qv_backend *b;
    const qv_moe_case *cases;
    qv_moe_outcome *out;
    char (*err)[512];
    int n;
    int next;
    pthread_mutex_t mu;
} routed_batch;

static void *routed_worker(void *arg)
{
    routed_batch *rb = arg;
    for (;;) {
        pthread_mutex_lock(&rb->mu);
        int i = rb->next++;
        pthread_mutex_unlock(&rb->mu);
        if (i >= rb->n) return NULL;
        if (qv_moe_case_run(rb->b, &rb->cases[i], &rb->out[i]) != QV_OK)
            snprintf(rb->err[i], sizeof rb->err[i], "%s", qv_errmsg());
    }
}

/* Tallies routed case c with outcome o and writes its line. Returns 0, or an
 * exit code when the case could not be run. */
static int finish_routed(campaign *cp, const qv_moe_case *c, const qv_moe_outcome *o, const char *err)
{
    if (o->st != QV_OK) {
        fprintf(stderr, "qvet %s: routed case %lld (%s t=%lld n=%lld k=%lld, logits %s) could not be run: %s\n",
                cp->o->cmd, (long long)c->index, c->row->name, (long long)c->t, (long long)c->n, (long long)c->k,
                qv_moe_logits_name(c->logits), err);
        return qv_status_exit_code(o->st) == 3 ? 3 : 2;
    }
    for (int i = 0; i < cp->n_moe; i++)
        if (cp->moe[i] == c->row) tally_result(&cp->moe_tally[i], &o->res.out);
    if (o->res.out.grade == QV_FAIL) {
        char replay[512];
        qv_moe_case_replay_cmd(c, cp->b, replay, sizeof replay);
        cp->n_fail++;
        printf("%sFAIL %s t=%lld n=%lld k=%lld logits %s, %s: %s\n  replay: %s\n",
               isatty(STDOUT_FILENO) ? "\r\033[K" : "", c->row->name, (long long)c->t, (long long)c->n,
               (long long)c->k, qv_moe_logits_name(c->logits), qv_probe_name(c->probe), o->res.out.reason, replay);
        if (cp->o->shrink && cp->n_shrunk < MAX_SHRUNK_FAILURES) {
            /* the inputs as `qvet verify` reads them, the failing token alone where it fails alone */
            char dir[1100];
            fail_dir_of(cp, c->suite, c->row->name, c->seed, (long long)c->index, dir, sizeof dir);
            int64_t token;
            if (qv_moe_case_dump(cp->b, c, 1, dir, replay, &token) == QV_OK) {
                cp->n_shrunk++;
                if (token >= 0) printf("  shrunk to token %lld alone; inputs in %s/\n", (long long)token, dir);
                else printf("  inputs in %s/\n", dir);
            } else {
                fprintf(stderr, "qvet %s: dumping the routed case: %s\n", cp->o->cmd, qv_errmsg());
            }
        }
        fflush(stdout);
    }
    if (cp->res.f) {
        qv_moe_case_json(cp->res.f, c, cp->b, o);
        fflush(cp->res.f);
    }
    cp->n_cases++;
    const qv_moe_spec *s;
    int per = qv_moe_row_spec(c->row, &s) == QV_OK ? s->topk + c->shared : 1;
    cp->macs += (double)c->t * per * (double)c->n * (double)c->k;
    return 0;
}

/* Runs cases[0..n) on the run's threads and finishes them in order. */
static int run_routed(campaign *cp, const qv_moe_case *cases, int n)
{
    int jobs = cp->o->jobs > 0 ? cp->o->jobs : 1;
    if (jobs > n) jobs = n;
    routed_batch rb = {.b = cp->b, .cases = cases, .n = n};
    rb.out = calloc((size_t)n, sizeof *rb.out);
    rb.err = calloc((size_t)n, sizeof *rb.err);
    pthread_t *th = calloc((size_t)(jobs ? jobs : 1), sizeof *th);
    if (!rb.out || !rb.err || !th) {
        free(rb.out), free(rb.err), free(th);
        fprintf(stderr, "qvet %s: out of memory for routed cases\n", cp->o->cmd);
        return 3;
    }
    pthread_mutex_init(&rb.mu, NULL);
    /* one GPU launch at a time, as in pool_run (the fixed suite runs here, after it) */
    pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;
    void *outer_lock = cp->b->launch_lock;
    if (!outer_lock) cp->b->launch_lock = &launch_lock;
    int started = 0;
    for (; started < jobs; started++)
        if (pthread_create(&th[started], NULL, routed_worker, &rb)) break;
    if (!started) routed_worker(&rb);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    cp->b->launch_lock = outer_lock;
    pthread_mutex_destroy(&rb.mu);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = finish_routed(cp, &cases[i], &rb.out[i], rb.err[i]);
    free(rb.out), free(rb.err), free(th);
    return rc;
}

/* The routed rows' fixed suites, row by row. */
static int check_routed(campaign *cp)
{
    for (int i = 0; i < cp->n_moe; i++) {
        int n = qv_moe_suite_count(cp->moe[i]);
        qv_moe_case *cases = calloc((size_t)n, sizeof *cases);
        if (!cases) return 3;
        for (int j = 0; j < n; j++) qv_moe_suite_case(cp->moe[i], cp->o->seed, j, &cases[j]);
        int rc = run_routed(cp, cases, n);
        free(cases);
        if (rc) return rc;
        if (!cp->o->quiet) {
            printf("  %-28s %3lld cases, %lld failed\n", cp->moe[i]->name, cp->moe_tally[i].cases,
                   cp->moe_tally[i].fail);
            fflush(stdout);
        }
    }
    return 0;
}

/* ---- cases on several threads ---- */

/* One case of a run: a GEMM case, or a routed one. */
typedef struct work {
    int routed;
    qv_case c;
    qv_moe_case mc;
} work;

/* Case number ord of the run into *w; 0 past the last one. A pure function
 * of its arguments (the generator is read-only), so any thread may call it. */
typedef int (*case_at_fn)(const campaign *cp, int64_t ord, work *w);

/* A case in flight: made and run by a worker, finished by the main thread. */
typedef struct slot {
    work w;
    qv_problem p;
    qv_outcome out;
    qv_moe_outcome mo;  /* a routed case's */
    qv_status st;   /* QV_OK, or why the case could not be made or run */
    int built;      /* the case was made: p holds it, or held it (released) */
    int released;   /* not a FAIL: p and the outcome's arrays are freed already */
    char err[1024]; /* the worker's message when st is not QV_OK */
    int state;      /* SLOT_FREE, SLOT_ISSUED, SLOT_DONE */
} slot;
enum { SLOT_FREE = 0, SLOT_ISSUED, SLOT_DONE };

typedef struct pool {
    campaign *cp;
    case_at_fn case_at;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int64_t next_issue, next_emit;
    int64_t end;     /* the first case number past the last, once a worker met it; -1 before */
    int stop;        /* issue no more cases */
    int window;      /* the slots of the ring: finished cases waiting for their turn */
    int window_fail; /* cases in flight at most while a FAIL waits to be written */
    int fails_held;  /* finished FAILs not yet written (each holds its whole case) */
    slot *ring;
} pool;

/* How far issuing may run ahead of writing. A case that is not a FAIL is kept
 * small (its results line's fields only) until its turn, so one slow case
 * does not stall the others; a FAIL keeps its arrays for shrinking, so while
 * one waits the pool runs no further ahead than a few cases per worker. */
static int pool_full(const pool *pl)
{
    int64_t ahead = pl->next_issue - pl->next_emit;
    return ahead >= pl->window || (pl->fails_held && ahead >= pl->window_fail);
}

/* What a campaign worker keeps of its last case's decoded weights (reference.h). */
#define WORKER_KEEP_BYTES ((size_t)2 << 30)

static void *pool_worker(void *arg)
{
    pool *pl = arg;
    const campaign *cp = pl->cp;
    ref_keep_weight_buffer(WORKER_KEEP_BYTES);
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        while (!pl->stop && pl->end < 0 && pool_full(pl)) pthread_cond_wait(&pl->work, &pl->mu);
        if (pl->stop || pl->end >= 0) {
            pthread_mutex_unlock(&pl->mu);
            return NULL;
        }
        int64_t ord = pl->next_issue;
        slot *s = &pl->ring[ord % pl->window];
        if (!pl->case_at(cp, ord, &s->w)) {
            pl->end = ord;
            pthread_cond_broadcast(&pl->done);
            pthread_cond_broadcast(&pl->work);
            pthread_mutex_unlock(&pl->mu);
            return NULL;
        }
        pl->next_issue++;
        s->state = SLOT_ISSUED;
        pthread_mutex_unlock(&pl->mu);

        s->built = 0;
        s->released = 0;
        if (s->w.routed) {
            s->st = qv_moe_case_run(cp->b, &s->w.mc, &s->mo);
            s->built = 1;
        } else {
            s->st = qv_case_build(&s->w.c, &s->p);
            if (s->st == QV_OK) {
                s->built = 1;
                s->st = qv_case_run(cp->b, &s->p, ref_probe_is_unique(s->w.c.probe), &s->out);
            }
            if (s->st == QV_OK && s->out.res.grade != QV_FAIL) {
                qv_outcome_release(&s->out);
                qv_problem_destroy(&s->p);
                s->released = 1;
            }
        }
        if (s->st != QV_OK) snprintf(s->err, sizeof s->err, "%s", qv_errmsg());

        pthread_mutex_lock(&pl->mu);
        if (s->built && !s->w.routed && !s->released) pl->fails_held++;
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&pl->done);
        pthread_mutex_unlock(&pl->mu);
    }
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What the main thread does after each finished case: 0 to go on, 1 to stop
 * issuing cases (the ones in flight are still finished), or an exit code >= 2
 * to stop at once. */
typedef int (*after_fn)(campaign *cp, const qv_case *c, void *ctx);

/* Runs cases 0, 1, ... (case_at) on cp->o->jobs workers and finishes each in
 * order. deadline (wall_s() time, 0 for none): no case is issued past it, even
 * while the main thread waits on a slow case. Returns 0 or an exit code for an
 * environment error. */
static int pool_run(campaign *cp, case_at_fn case_at, after_fn after, void *ctx, double deadline)
{
    int jobs = cp->o->jobs > 0 ? cp->o->jobs : 1;
    pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;
    cp->b->launch_lock = &launch_lock;
    pool pl = {.cp = cp, .case_at = case_at, .end = -1, .window = 64 * jobs, .window_fail = 2 * jobs};
    pl.ring = calloc((size_t)pl.window, sizeof *pl.ring);
    pthread_t *th = calloc((size_t)jobs, sizeof *th);
    if (!pl.ring || !th) {
        free(pl.ring);
        free(th);
        fprintf(stderr, "qvet %s: out of memory for %d jobs\n", cp->o->cmd, jobs);
        return 2;
    }
    pthread_mutex_init(&pl.mu, NULL);
    pthread_cond_init(&pl.work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the clock of wall_s and the deadline */
    pthread_cond_init(&pl.done, &ca);
    pthread_condattr_destroy(&ca);
    struct timespec until = {.tv_sec = (time_t)deadline, .tv_nsec = (long)((deadline - floor(deadline)) * 1e9)};
    int started = 0;
    for (; started < jobs; started++)
        if (pthread_create(&th[started], NULL, pool_worker, &pl)) break;
    int rc = started ? 0 : 3;
    if (!started) fprintf(stderr, "qvet %s: cannot start a worker thread\n", cp->o->cmd);
    for (;;) {
        pthread_mutex_lock(&pl.mu);
        slot *s = &pl.ring[pl.next_emit % pl.window];
        while (started && s->state != SLOT_DONE && !(pl.end >= 0 && pl.next_emit >= pl.end) &&
               !(pl.stop && pl.next_emit >= pl.next_issue)) {
            if (deadline > 0 && !pl.stop) {
                if (pthread_cond_timedwait(&pl.done, &pl.mu, &until) == ETIMEDOUT || wall_s() >= deadline) {
                    pl.stop = 1; /* the cases in flight are still finished */
                    pthread_cond_broadcast(&pl.work);
                }
            } else {
                pthread_cond_wait(&pl.done, &pl.mu);
            }
        }
        int over = !started || (pl.end >= 0 && pl.next_emit >= pl.end) || (pl.stop && pl.next_emit >= pl.next_issue);
        pthread_mutex_unlock(&pl.mu);
        if (over) break;
        int r = 0;
        if (s->w.routed) {
            if (!rc) {
                r = finish_routed(cp, &s->w.mc, &s->mo, s->err);
                if (!r && after) r = after(cp, NULL, ctx);
            }
        } else if (rc) {
            /* an environment error: the cases in flight are dropped */
            if (s->built) {
                qv_outcome_clear(&s->out);
                qv_problem_destroy(&s->p);
            }
        } else if (!s->built) {
            /* the generator made a case the library refuses: a qvet bug, said loudly */
            fprintf(stderr, "qvet %s: case %lld (%s m=%lld n=%lld k=%lld) could not be built: %s\n", cp->o->cmd,
                    (long long)s->w.c.index, s->w.c.v->name, (long long)s->w.c.m, (long long)s->w.c.n,
                    (long long)s->w.c.k,
                    s->err);
            r = qv_status_exit_code(s->st) == 3 ? 3 : 2;
        } else if (s->st != QV_OK) {
            fprintf(stderr, "qvet %s: %s\n", cp->o->cmd, s->err);
            qv_outcome_clear(&s->out);
            qv_problem_destroy(&s->p);
            r = qv_status_exit_code(s->st);
        } else {
            qv_case c = s->w.c;
            finish_case(cp, &c, &s->p, &s->out, 1);
            r = after ? after(cp, &c, ctx) : 0;
        }
        pthread_mutex_lock(&pl.mu);
        if (s->built && !s->w.routed && !s->released) pl.fails_held--;
        s->state = SLOT_FREE;
        pl.next_emit++;
        if (r) pl.stop = 1;
        pthread_cond_broadcast(&pl.work);
        pthread_mutex_unlock(&pl.mu);
        if (r >= 2 && !rc) rc = r;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&pl.mu);
    pthread_cond_destroy(&pl.work);
    pthread_cond_destroy(&pl.done);
    free(pl.ring);
    free(th);
    cp->b->launch_lock = NULL;
    return rc;
}

/* Common start: options, backend, generator, results file. Returns -1 to go
 * on, or the exit code (the plugin then closed). */
static int campaign_start(campaign *cp, camp_opts *o, qv_backend *b, qv_plugin *pl, int argc, char **argv)
{
    memset(cp, 0, sizeof *cp);
    cp->o = o;
    cp->b = b;
    /* One OpenBLAS thread: the reference's dgemm path then sums in one fixed
     * order, so a case line replays to the same bits whatever the core count
     * (or the ranks of an MPI campaign); the cases that take that path cost
     * tens of milliseconds of dgemm on one core. */
    openblas_set_num_threads(1);
    int rc = pick_backend(o, b, pl);
    if (!rc && o->n_specs) {
        const qv_variant *vs[QV_GEN_MAX_SPECS];
        for (int i = 0; i < o->n_specs && !rc; i++)
            if (qv_variant_resolve(o->specs[i], &vs[i]) != QV_OK) {
                fprintf(stderr, "qvet %s: --spec '%s': %s\n", o->cmd, o->specs[i], qv_errmsg());
                rc = 2;
            }
        if (!rc && qv_gen_init_list(&cp->gen, vs, o->n_specs, b) != QV_OK) {
            fprintf(stderr, "qvet %s: %s\n", o->cmd, qv_errmsg());
            rc = 2;
        }
    } else if (!rc) {
        /* routed rows: the CPU models, and the grouped kernels on the GPU */
        cp->n_moe = qv_moe_rows_match(o->glob, b, cp->moe, QV_GEN_MAX_VARIANTS);
        if (qv_gen_init(&cp->gen, o->glob, b) != QV_OK && !cp->n_moe) {
            fprintf(stderr, "qvet %s: %s\n", o->cmd, qv_errmsg());
            rc = 2;
        }
    }
    if (!rc) {
        for (int i = 0; i < cp->gen.n_variants; i++) cp->tallies[i].v = cp->gen.variants[i];
        for (int i = 0; i < cp->n_moe; i++) cp->moe_tally[i].v = NULL;
        if (results_open(&cp->res, o->out_path, o->cmd)) rc = 2;
    }
    if (rc) {
        qv_plugin_close(pl);
        return rc;
    }
    if (cp->res.f) write_run_line(cp->res.f, argc, argv, o, b, &cp->gen);
    return -1;
}

/* The end of check and fuzz: the summary table, the results file and the
 * last line ("<cmd>: N cases, F failed"); closes the plugin and returns the
 * exit code: rc when an error stopped the run, else 1 when a case FAILed. */
static int campaign_end(campaign *cp, qv_plugin *pl, int rc)
{
    print_table(stdout, cp->tallies, cp->gen.n_variants, cp->moe_tally, cp->moe, cp->n_moe);
    if (cp->o->out_path) printf("results: %s\n", cp->o->out_path);
    printf("%s: %lld cases, %lld failed\n", cp->o->cmd, cp->n_cases, cp->n_fail);
    qv_plugin_close(pl);
    if (rc) return rc;
    return cp->n_fail ? 1 : 0;
}

static void opts_defaults(camp_opts *o, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->shard_n = 1;
    o->shrink = strcmp(cmd, "replay") != 0;
    o->fail_dir = "qvet-failures";
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->jobs = cores > 0 && cores <= 1024 ? (int)cores : 1;
}

/* The throughput line of every check and fuzz run, printed before the
 * summary table and the closing line (campaign_end). */
static void print_rate(const campaign *cp, double secs)
{
    double s = secs > 1e-9 ? secs : 1e-9;
    printf("%.1f s on %d threads: %.1f cases/min, %.3g verified multiply-adds/s\n", secs, cp->o->jobs,
           60.0 * (double)cp->n_cases / s, cp->macs / s);
}

/* ---- qvet check ---- */

static int check_case_at(const campaign *cp, int64_t ord, work *w)
{
    if (ord >= cp->check_total) return 0;
    w->routed = 0;
    qv_suite_case(cp->gen.variants[cp->check_variant[ord]], cp->b->cap_mnk, cp->o->seed, cp->check_index[ord], &w->c);
    return 1;
}

/* After a variant's last case: its line. */
static int check_after(campaign *cp, const qv_case *c, void *ctx)
{
    (void)ctx;
    int64_t ord = cp->n_cases - 1;
    int i = cp->check_variant[ord];
    if (!cp->o->quiet && (ord + 1 == cp->check_total || cp->check_variant[ord + 1] != i)) {
        printf("  %-28s %3lld cases, %lld failed\n", c->v->name, cp->tallies[i].cases, cp->tallies[i].fail);
        fflush(stdout);
    }
    return 0;
}

int qv_cmd_check(int argc, char **argv)
{
    camp_opts o;
    opts_defaults(&o, "check");
    int pr = parse_opts(argc, argv,
                        OPT_VARIANT | OPT_BACKEND | OPT_OUT | OPT_PLUGIN | OPT_SEED | OPT_CAP | OPT_FAILDIR | OPT_JOBS, &o);
    if (pr) return pr > 0 ? 0 : 2;
    if (!o.seed_set) o.seed = QV_CHECK_SEED;
    qv_backend b;
    qv_plugin pl = {0};
    campaign cp;
    int rc = campaign_start(&cp, &o, &b, &pl, argc, argv);
    if (rc >= 0) return rc;
    long long total = 0, routed = 0;
    for (int i = 0; i < cp.gen.n_variants; i++) total += qv_suite_count(cp.gen.variants[i], b.cap_mnk);
    for (int i = 0; i < cp.n_moe; i++) routed += qv_moe_suite_count(cp.moe[i]);
    printf("qvet check: %d variants, %lld cases on %s, seed %llu", cp.gen.n_variants + cp.n_moe, total + routed,
           b.name, (unsigned long long)o.seed);
    if (b.cap_mnk > 0) printf(", m*n*k capped at %lld", (long long)b.cap_mnk);
    printf("\n");
    fflush(stdout);
    cp.check_variant = malloc(sizeof(int) * (size_t)(total > 0 ? total : 1));
    cp.check_index = malloc(sizeof(int) * (size_t)(total > 0 ? total : 1));
    if (!cp.check_variant || !cp.check_index) {
        fprintf(stderr, "qvet check: out of memory\n");
        free(cp.check_variant);
        free(cp.check_index);
        return campaign_end(&cp, &pl, 2);
    }
    for (int i = 0; i < cp.gen.n_variants; i++)
        for (int j = 0; j < qv_suite_count(cp.gen.variants[i], b.cap_mnk); j++) {
            cp.check_variant[cp.check_total] = i;
            cp.check_index[cp.check_total++] = j;
        }
    double t0 = wall_s();
    rc = pool_run(&cp, check_case_at, check_after, NULL, 0);
    if (!rc) rc = check_routed(&cp);
    double secs = wall_s() - t0;
    free(cp.check_variant);
    free(cp.check_index);
    if (results_close(&cp.res, o.cmd) && !rc) rc = 2;
    printf("\n");
    print_rate(&cp, secs);
    return campaign_end(&cp, &pl, rc);
}

/* ---- qvet fuzz ---- */

static volatile sig_atomic_t fuzz_stop;
static void on_sigint(int sig)
{
    (void)sig;
    fuzz_stop = 1;
}

/* What the fuzz loop tracks between cases. */
typedef struct fuzz_ctx {
    double t0, last, deadline;
    int tty;
} fuzz_ctx;

/* With routed rows in the run, case J is routed when J % 8 == 7 (every case
 * without GEMM rows): a property of J, so any sharding runs the same cases. */
#define ROUTED_EVERY 8

static int fuzz_case_at(const campaign *cp, int64_t ord, work *w)
{
    if (cp->o->cases && ord >= cp->o->cases) return 0;
    int64_t j = cp->o->shard_i + ord * cp->o->shard_n;
    w->routed = cp->n_moe && (!cp->gen.n_variants || j % ROUTED_EVERY == ROUTED_EVERY - 1);
    if (w->routed) qv_moe_gen_case(cp->moe, cp->n_moe, cp->o->seed, j, &w->mc);
    else qv_gen_case(&cp->gen, cp->o->seed, j, &w->c);
    return 1;
}

/* The live progress line, and the budget: 1 stops issuing cases. */
static int fuzz_after(campaign *cp, const qv_case *c, void *ctx)
{
    (void)c;
    fuzz_ctx *f = ctx;
    const camp_opts *o = cp->o;
    double now = wall_s();
    /* A live line on a terminal (several a second), a plain line every 10 s otherwise. */
    if (!o->quiet && (now - f->last >= (f->tty ? 0.25 : 10.0))) {
        f->last = now;
        double rate = cp->n_cases / (now - f->t0 > 1e-9 ? now - f->t0 : 1e-9);
        double eta = o->cases ? (double)(o->cases - cp->n_cases) / (rate > 0 ? rate : 1) : f->deadline - now;
        printf("%s%lld cases, %.1f cases/s, %lld failed, ETA %.0f s%s", f->tty ? "\r\033[K" : "", cp->n_cases, rate,
               cp->n_fail, eta > 0 ? eta : 0, f->tty ? "" : "\n");
        fflush(stdout);
    }
    return fuzz_stop || (f->deadline && now >= f->deadline) ? 1 : 0;
}

int qv_cmd_fuzz(int argc, char **argv)
{
    camp_opts o;
    opts_defaults(&o, "fuzz");
    int pr = parse_opts(argc, argv,
                        OPT_VARIANT | OPT_BACKEND | OPT_OUT | OPT_PLUGIN | OPT_SEED | OPT_BUDGET | OPT_SHARD | OPT_CAP |
                            OPT_FAILDIR | OPT_JOBS,
                        &o);
    if (pr) return pr > 0 ? 0 : 2;
    if (!o.seed_set) {
        /* A fresh campaign: the seed comes from the clock and is printed. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* The prime spreads the seconds past the nanoseconds' 30 bits; the pid
         * separates campaigns started in the same nanosecond on one host. */
        uint64_t s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        o.seed = qv_splitmix64(&s) >> 16; /* 48 bits: short enough to type */
    }
    if (!o.cases && !(o.minutes > 0)) o.cases = 1000;
    qv_backend b;
    qv_plugin pl = {0};
    campaign cp;
    int rc = campaign_start(&cp, &o, &b, &pl, argc, argv);
    if (rc >= 0) return rc;
    printf("qvet fuzz: seed %llu, shard %lld/%lld, %d variants on %s, ", (unsigned long long)o.seed, o.shard_i,
           o.shard_n, cp.gen.n_variants + cp.n_moe, b.name);
    if (o.cases) printf("%lld cases", o.cases);
    else printf("%g minutes", o.minutes);
    if (b.cap_mnk > 0) printf(", m*n*k capped at %lld", (long long)b.cap_mnk);
    printf("\n");
    fflush(stdout);

    fuzz_stop = 0;
    void (*old)(int) = signal(SIGINT, on_sigint);
    fuzz_ctx f = {.tty = isatty(STDOUT_FILENO)};
    f.t0 = f.last = wall_s();
    f.deadline = o.minutes > 0 ? f.t0 + o.minutes * 60 : 0;
    rc = pool_run(&cp, fuzz_case_at, fuzz_after, &f, f.deadline);
    signal(SIGINT, old);
    if (f.tty && !o.quiet) printf("\r\033[K");
    if (fuzz_stop) printf("interrupted\n");
    if (results_close(&cp.res, o.cmd) && !rc) rc = 2;
    print_rate(&cp, wall_s() - f.t0);
    return campaign_end(&cp, &pl, rc);
}

/* ---- qvet replay ---- */

/* A routed case of the fixed suite (--check, one row) or of a fuzz run. */
static int replay_routed(campaign *cp)
{
    const camp_opts *o = cp->o;
    qv_moe_case c;
    if (o->suite) {
        if (cp->n_moe != 1) {
            fprintf(stderr, "qvet replay: --check needs --variant naming exactly one routed row (%d match)\n",
                    cp->n_moe);
            return 2;
        }
        if (o->case_index >= qv_moe_suite_count(cp->moe[0])) {
            fprintf(stderr, "qvet replay: %s's check suite has %d cases; --case %lld is past it\n", cp->moe[0]->name,
                    qv_moe_suite_count(cp->moe[0]), o->case_index);
            return 2;
        }
        qv_moe_suite_case(cp->moe[0], o->seed, (int)o->case_index, &c);
    } else {
        qv_moe_gen_case(cp->moe, cp->n_moe, o->seed, o->case_index, &c);
    }
    qv_moe_outcome out;
    if (qv_moe_case_run(cp->b, &c, &out) != QV_OK) {
        fprintf(stderr, "qvet replay: %s\n", qv_errmsg());
        return 2;
    }
    printf("%s t=%lld n=%lld k=%lld logits %s, %s on %s: %s%s%s\n", c.row->name, (long long)c.t, (long long)c.n,
           (long long)c.k, qv_moe_logits_name(c.logits), qv_probe_name(c.probe), cp->b->name,
           qv_grade_name(out.res.out.grade), out.res.out.reason[0] ? ": " : "", out.res.out.reason);
    if (o->dump_dir) {
        char replay[512];
        qv_moe_case_replay_cmd(&c, cp->b, replay, sizeof replay);
        int64_t token;
        if (qv_moe_case_dump(cp->b, &c, o->shrink, o->dump_dir, replay, &token) != QV_OK) {
            fprintf(stderr, "qvet replay: %s\n", qv_errmsg());
            return 2;
        }
        if (token >= 0) printf("shrunk to token %lld alone\n", (long long)token);
        printf("inputs in %s/\n", o->dump_dir);
    }
    qv_moe_case_json(stdout, &c, cp->b, &out);
    if (cp->res.f) qv_moe_case_json(cp->res.f, &c, cp->b, &out);
    return out.res.out.grade == QV_FAIL ? 1 : 0;
}


int qv_cmd_replay(int argc, char **argv)
{
    camp_opts o;
    opts_defaults(&o, "replay");
    int pr = parse_opts(argc, argv,
                        OPT_VARIANT | OPT_BACKEND | OPT_OUT | OPT_PLUGIN | OPT_SEED | OPT_CASE | OPT_CAP | OPT_DUMP, &o);
    if (pr) return pr > 0 ? 0 : 2;
    if (!o.seed_set || !o.case_set) {
        fprintf(stderr, "qvet replay: --seed and --case are required\n\n");
        usage(stderr, "replay");
        return 2;
    }
    qv_backend b;
    qv_plugin pl = {0};
    campaign cp;
    int rc = campaign_start(&cp, &o, &b, &pl, argc, argv);
    if (rc >= 0) return rc;
    rc = 0;
    if (!cp.gen.n_variants && cp.n_moe) {
        rc = replay_routed(&cp);
        goto done;
    }
    qv_case c;
    if (o.suite) {
        if (cp.gen.n_variants != 1) {
            fprintf(stderr, "qvet replay: --check needs --variant or --spec naming exactly one variant (%d given)\n",
                    cp.gen.n_variants);
            rc = 2;
            goto done;
        }
        const qv_variant *v = cp.gen.variants[0];
        if (o.case_index >= qv_suite_count(v, b.cap_mnk)) {
            fprintf(stderr, "qvet replay: %s's check suite has %d cases; --case %lld is past it\n", v->name,
                    qv_suite_count(v, b.cap_mnk), o.case_index);
            rc = 2;
            goto done;
        }
        qv_suite_case(v, b.cap_mnk, o.seed, (int)o.case_index, &c);
    } else {
        qv_gen_case(&cp.gen, o.seed, o.case_index, &c);
    }
    qv_problem p;
    if (qv_case_build(&c, &p) != QV_OK) {
        fprintf(stderr, "qvet replay: %s\n", qv_errmsg());
        rc = 2;
        goto done;
    }
    qv_outcome out;
    int unique = ref_probe_is_unique(c.probe);
    qv_status st = qv_case_run(&b, &p, unique, &out);
    if (st != QV_OK) {
        fprintf(stderr, "qvet replay: %s\n", qv_errmsg());
        qv_problem_destroy(&p);
        rc = qv_status_exit_code(st);
        goto done;
    }
    char replay[QV_REPLAY_MAX];
    qv_case_replay_cmd(&c, &b, &cp.gen, o.glob, replay, sizeof replay);
    printf("%s m=%lld n=%lld k=%lld %s/%s on %s: %s%s%s\n", c.v->name, (long long)c.m, (long long)c.n,
           (long long)c.k, qv_probe_name(c.probe), qv_regime_name(c.regime), b.name, qv_grade_name(out.res.grade),
           out.res.reason[0] ? ": " : "", out.res.reason);
    qv_shrunk sh, *shp = NULL;
    if (out.res.grade == QV_FAIL && o.shrink) {
        qv_problem small;
        if (qv_shrink(&b, &p, unique, SHRINK_TRIES, &small, &sh) == QV_OK) {
            snprintf(sh.dir, sizeof sh.dir, "%s", o.dump_dir ? o.dump_dir : "");
            if (o.dump_dir && qv_case_dump(&b, &small, unique, o.dump_dir, replay) != QV_OK) {
                fprintf(stderr, "qvet replay: %s\n", qv_errmsg());
                rc = 2;
            }
            printf("shrunk to m=%lld n=%lld k=%lld in %d runs\n", (long long)sh.m, (long long)sh.n, (long long)sh.k,
                   sh.tries);
            shp = &sh;
            qv_problem_destroy(&small);
        }
    } else if (o.dump_dir && qv_case_dump(&b, &p, unique, o.dump_dir, replay) != QV_OK) {
        fprintf(stderr, "qvet replay: %s\n", qv_errmsg());
        rc = 2;
    }
    qv_case_json(stdout, &c, &b, &out, replay, shp);
    if (cp.res.f) qv_case_json(cp.res.f, &c, &b, &out, replay, shp);
    if (!rc && out.res.grade == QV_FAIL) rc = 1;
    qv_outcome_clear(&out);
    qv_problem_destroy(&p);
done:
    if (results_close(&cp.res, o.cmd) && !rc) rc = 2;
    qv_plugin_close(&pl);
    return rc;
}
