/* qvet_mpi.c: the MPI entry of the qvet binary (BUILD/qvet-mpi, or BUILD/qvet
 * with `make MPI=1`). Under mpirun, or a scheduler that starts the ranks
 * through PMIx/PMI, `qvet fuzz|check|ppl|mutants ...` is split over the ranks:
 *
 *   fuzz   rank r of R runs shard (I + N*r)/(N*R) of the user's shard I/N (0/1
 *          by default) and its share of --cases, so the union of the ranks'
 *          cases is exactly the cases one process would run;
 *   check  the selected variants are dealt round-robin over the ranks; each
 *          variant's fixed suite runs whole on one rank;
 *   ppl    the variants of --variant are dealt round-robin over the ranks;
 *   mutants  the rows of mutants/catalogue.tsv are dealt round-robin; each
 *          rank runs tools/mutants.py --run-only on its rows, with the
 *          binaries that tools/mutants.py --build-only made beforehand.
 *
 * Each rank gets one GPU (its local rank modulo the devices it sees, through
 * CUDA_VISIBLE_DEVICES) and runs its share as child processes of the plain
 * qvet (this same binary with QVET_MPI=0). Rank 0 gathers every rank's JSONL
 * and log through MPI, merges the lines in a deterministic order (fuzz: case
 * index; check: registry order of the variant, the routed rows after it in
 * their table's order (with --spec: the user's order of the specs), then
 * suite index; ppl:
 * registry order; mutants: catalogue order) under one "run" line that
 * describes the whole MPI run, and prints the closing line summed over the
 * ranks (`fuzz: N cases, F failed`, `check: ...`, `mutants: K killed of N`).
 *
 * Rule: a rank never runs a campaign in its own process. A child that
 * crashes, is killed or hits a CUDA error costs only its unfinished cases; it
 * is reported with its rank and host, and every other result is kept.
 *
 * The binary is linked with -Wl,--wrap=main, so the C runtime enters
 * __wrap_main below and __real_main is src/qvet.c's dispatcher: outside an MPI
 * launch (or with QVET_MPI=0) this binary is the plain qvet.
 *
 * Environment: QVET_MPI=0 disables the MPI entry, QVET_MPI=1 forces it.
 * Two test hooks (tests/t_mpi.c): QVET_MPI_TEST_KILL_RANK=R makes rank R kill
 * its first campaign child with SIGKILL right after starting it (the dead-rank
 * path); QVET_MPI_TEST_DEVICES=N makes every rank see N CUDA devices (the
 * device assignment, on machines without any). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "internal/campaign.h"
#include "internal/cli.h"
#include "internal/json.h"
#include "qvet/plugin.h"
#include "qvet/spec.h"
#include "qvet/variant.h"

int __real_main(int argc, char **argv);

/* Host names as gethostname() gives them; POSIX guarantees 255 bytes. */
#define HOST_LEN 256
/* The text a rank sends about its failed children. */
#define PROBLEM_LEN 2048
/* MPI counts are int: bulk data travels in chunks well below INT_MAX. */
#define CHUNK_BYTES ((size_t)64 << 20)
/* Where tools/mutants.py keeps its catalogue and, by default, its output
 * (both relative to the repository root, where `qvet mutants` runs). */
#define MUTANT_CATALOGUE "mutants/catalogue.tsv"
#define MUTANT_SCRIPT "tools/mutants.py"
#define MUTANT_OUT "mutants/out"
/* The most catalogue rows the MPI entry deals out. */
#define MAX_MUTANTS 512
/* How often a waiting rank looks for a message: MPI's blocking receive spins
 * a core, which would slow the children still running on this host. */
#define POLL_NS 20000000L
/* fuzz's own default budget when neither --cases nor --minutes is given
 * (`qvet fuzz --help`); the MPI entry splits it over the ranks. */
#define FUZZ_DEFAULT_CASES 1000
/* Message tags, one per kind of payload. */
enum { TAG_REPORT = 1, TAG_JSONL, TAG_LOG };

typedef enum job_kind { JOB_FUZZ, JOB_CHECK, JOB_PPL, JOB_MUTANTS } job_kind;

typedef struct mpi_job {
    job_kind kind;
    const char *cmd;           /* "fuzz", "check", "ppl", "mutants" */
    int argc;                  /* the user's subcommand arguments, argv[0] = cmd */
    char **argv;
    int rank, size, local_rank, local_size;
    char host[HOST_LEN];
    /* The options the MPI entry interprets; everything else passes through. */
    const char *out_path;      /* --out: the merged results file, or NULL */
    const char *report_dir;    /* --report DIR: `qvet report` on the merged file */
    const char *glob;          /* --variant */
    /* check --spec: each spec whole on one rank, merged in the user's order
     * (spec_names: the canonical text its case lines carry as "variant") */
    int n_specs;
    const char *specs[QV_GEN_MAX_SPECS];
    const char *spec_names[QV_GEN_MAX_SPECS];
    const char *plugin_path;   /* --plugin */
    int want_cpu;              /* --cpu (or ppl's --cpu-fast): no GPU is given out */
    long long shard_i, shard_n;/* the user's --shard, 0/1 without one */
    long long cases;           /* fuzz: --cases of the user's shard; 0 with --minutes */
    int minutes_set;
    uint64_t seed;
    int seed_set;
    char exe[4096];            /* this binary, for the children */
    char tmp[512];             /* this rank's scratch folder */
    int gpu;                   /* CUDA device the children see, -1 for none */
    /* mutants: the catalogue rows of the backend (and --only), in order */
    const char *only;          /* --only a,b,c */
    int n_mutants;
    char *mutants[MAX_MUTANTS];
    char merged[4200];         /* the merged results file (mutants: OUT/BACKEND/kill.jsonl) */
} mpi_job;

/* What a rank tells rank 0 once its children are done. Sent as bytes: every
 * rank runs this same binary on hosts of one architecture. */
typedef struct rank_report {
    int32_t rank, gpu, units, units_bad;
    int32_t worst_exit;        /* the largest exit code of a child that exited */
    int32_t signal;            /* the first signal that ended a child, 0 for none */
    int64_t jsonl_bytes, log_bytes;
    char shard[64];            /* fuzz: the shard this rank ran, "" otherwise */
    char visible[64];          /* CUDA_VISIBLE_DEVICES of its children, "" for none */
    char host[HOST_LEN];
    char problem[PROBLEM_LEN]; /* one line per failed child, "" when all went well */
} rank_report;

/* One child run: argument vector and where its JSONL goes. */
typedef struct unit {
    char **argv;               /* NULL-terminated, owned */
    char out[1024];            /* its --out file in the rank's scratch folder */
} unit;

/* ---- small helpers ---- */

static int mpi_launched(void)
{
    const char *force = getenv("QVET_MPI");
    if (force && !strcmp(force, "0")) return 0;
    if (force && !strcmp(force, "1")) return 1;
    /* Open MPI's mpirun, PMIx launchers (srun --mpi=pmix, prterun), PMI-1/2. */
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "qvet: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

/* Sleeps POLL_NS. */
static void nap(void)
{
    struct timespec ts = {0, POLL_NS};
    nanosleep(&ts, NULL);
}

/* MPI_Recv that sleeps between probes instead of spinning. */
static void recv_polite(void *buf, int count, int src, int tag)
{
    int ready = 0;
    while (!ready) {
        MPI_Iprobe(src, tag, MPI_COMM_WORLD, &ready, MPI_STATUS_IGNORE);
        if (!ready) nap();
    }
    MPI_Recv(buf, count, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Broadcast from rank 0 that sleeps while it waits. */
static void bcast_polite(void *buf, int count)
{
    MPI_Request rq;
    MPI_Ibcast(buf, count, MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
    int done = 0;
    while (!done) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (!done) nap();
    }
}

/* Sends a file's bytes (n of them, announced in the report) in chunks. */
static void send_file(const char *path, int64_t n, int tag)
{
    FILE *f = n > 0 ? fopen(path, "rb") : NULL;
    char *buf = xmalloc(CHUNK_BYTES);
    for (int64_t at = 0; at < n;) {
        size_t want = (size_t)(n - at) < CHUNK_BYTES ? (size_t)(n - at) : CHUNK_BYTES;
        size_t got = f ? fread(buf, 1, want, f) : 0;
        /* A file that shrank under us: pad with newlines so the counts hold. */
        memset(buf + got, '\n', want - got);
        MPI_Send(buf, (int)want, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
        at += (int64_t)want;
    }
    free(buf);
    if (f) fclose(f);
}

/* Receives n bytes from src into a file at path (created). */
static int recv_file(const char *path, int64_t n, int src, int tag)
{
    FILE *f = fopen(path, "wb");
    char *buf = xmalloc(CHUNK_BYTES);
    int bad = !f;
    for (int64_t at = 0; at < n;) {
        size_t want = (size_t)(n - at) < CHUNK_BYTES ? (size_t)(n - at) : CHUNK_BYTES;
        recv_polite(buf, (int)want, src, tag);
        if (f && fwrite(buf, 1, want, f) != want) bad = 1;
        at += (int64_t)want;
    }
    free(buf);
    if (f && fclose(f)) bad = 1;
    return bad ? -1 : 0;
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

static int registry_index(const char *name);

/* 1 for a ppl line of the fp32 baseline (a "variant" outside the registry). */
static int is_ppl_baseline(const char *line, size_t len)
{
    if (!strstr(line, "\"kind\":\"ppl\"")) return 0;
    qv_json *root;
    if (qv_json_parse(line, len, &root) != QV_OK) return 0;
    int base = registry_index(qv_json_str(qv_json_get(root, "variant"))) == qv_registry_count();
    qv_json_free(root);
    return base;
}

/* Appends the complete lines of src (those ending in '\n') to dst. A child
 * killed while writing leaves a last line without its newline: dropped. With
 * drop_baseline, ppl's fp32 baseline lines are left out (every ppl child
 * scores the baseline; the rank keeps its first child's). */
static void append_lines(FILE *dst, const char *src, int drop_baseline)
{
    FILE *f = fopen(src, "rb");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0)
        if (line[n - 1] == '\n' && !(drop_baseline && is_ppl_baseline(line, (size_t)n)))
            fwrite(line, 1, (size_t)n, dst);
    free(line);
    fclose(f);
}

/* Removes the scratch folder and everything in it (links, not their targets). */
static void remove_tree(const char *dir)
{
    char cmd[1200];
    size_t at = (size_t)snprintf(cmd, sizeof cmd, "rm -rf -- '");
    for (const char *c = dir; *c && at + 8 < sizeof cmd; c++)
        at += (size_t)(*c == '\'' ? snprintf(cmd + at, sizeof cmd - at, "'\\''")
                                  : snprintf(cmd + at, sizeof cmd - at, "%c", *c));
    snprintf(cmd + at, sizeof cmd - at, "'");
    if (system(cmd) != 0) fprintf(stderr, "qvet: could not remove %s\n", dir);
}

/* Adds one line (printf-style) to the report's problem text. */
static void put_problem(rank_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_problem(rank_report *rep, const char *fmt, ...)
{
    size_t at = strlen(rep->problem);
    if (at && at + 1 < sizeof rep->problem) rep->problem[at++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->problem + at, sizeof rep->problem - at, fmt, ap);
    va_end(ap);
}

/* ---- options ---- */

/* Options that take a value in the campaign commands and in ppl: their value
 * must be skipped when the arguments are scanned. */
static int takes_value(const char *a)
{
    static const char *const with_value[] = {"--variant", "--spec", "--out", "--plugin", "--seed", "--cases",
                                             "--minutes", "--shard", "--cap", "--fail-dir", "--report",
                                             "--model", "--text", "--ctx", "--chunks", "--only"};
    for (size_t i = 0; i < sizeof with_value / sizeof with_value[0]; i++)
        if (!strcmp(a, with_value[i])) return 1;
    return 0;
}

/* mutants: the backend's catalogue rows (less those --only leaves out), the
 * binaries' folder and the merged file. Returns 0, or 2 after a message. */
static int scan_mutants(mpi_job *j, int say)
{
    int gpu = 0, cpu = 0;
    for (int i = 1; i < j->argc; i++) {
        gpu |= !strcmp(j->argv[i], "--gpu");
        cpu |= !strcmp(j->argv[i], "--cpu");
        if (takes_value(j->argv[i])) i++;
    }
    if (gpu == cpu) {
        if (say) fprintf(stderr, "qvet mutants: give --cpu or --gpu\n");
        return 2;
    }
    const char *backend = gpu ? "gpu" : "cpu";
    const char *out = j->out_path ? j->out_path : MUTANT_OUT;
    snprintf(j->merged, sizeof j->merged, "%s/%s/kill.jsonl", out, backend);
    char bin[4200];
    snprintf(bin, sizeof bin, "%s/%s/bin/qvet-base", out, backend);
    if (access(bin, X_OK) != 0) {
        if (say)
            fprintf(stderr, "qvet mutants: %s is missing: build the mutants first with "
                            "tools/mutants.py --%s --build-only%s%s\n", bin, backend, j->out_path ? " --out " : "",
                    j->out_path ? j->out_path : "");
        return 2;
    }
    FILE *f = fopen(MUTANT_CATALOGUE, "r");
    if (!f) {
        if (say) fprintf(stderr, "qvet mutants: cannot read %s (run from the repository root)\n", MUTANT_CATALOGUE);
        return 2;
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0 && j->n_mutants < MAX_MUTANTS) {
        if (line[0] == '#' || line[0] == '\n') continue;
        /* name \t bug class \t backends (comma list) \t ... */
        char *name = line, *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = '\0';
        char *cls = tab + 1, *backends = strchr(cls, '\t');
        if (!backends) continue;
        backends++;
        backends[strcspn(backends, "\t\n")] = '\0';
        int match = 0;
        for (char *save = NULL, *b = strtok_r(backends, ",", &save); b; b = strtok_r(NULL, ",", &save))
            match |= !strcmp(b, backend);
        if (match && j->only) {
            char padded[600], list[4200];
            snprintf(padded, sizeof padded, ",%s,", name);
            snprintf(list, sizeof list, ",%s,", j->only);
            match = strstr(list, padded) != NULL;
        }
        if (match) j->mutants[j->n_mutants++] = xstrdup(name);
    }
    free(line);
    fclose(f);
    if (!j->n_mutants) {
        if (say) fprintf(stderr, "qvet mutants: no %s row of %s is selected\n", backend, MUTANT_CATALOGUE);
        return 2;
    }
    return 0;
}

/* Reads the options the MPI entry interprets. Returns 0, or 2 after a
 * message (printed by rank 0 only). */
static int scan_opts(mpi_job *j)
{
    static const char *const interpreted[] = {"--out=", "--variant=", "--shard=", "--seed=", "--cases=",
                                              "--report="};
    int say = j->rank == 0;
    j->shard_n = 1;
    for (int i = 1; i < j->argc; i++) {
        const char *a = j->argv[i];
        const char *val = i + 1 < j->argc ? j->argv[i + 1] : NULL;
        for (size_t k = 0; k < sizeof interpreted / sizeof interpreted[0]; k++)
            if (!strncmp(a, interpreted[k], strlen(interpreted[k]))) {
                if (say)
                    fprintf(stderr, "qvet %s: under MPI write '%.*s VALUE' as two words\n", j->cmd,
                            (int)strlen(interpreted[k]) - 1, interpreted[k]);
                return 2;
            }
        if (takes_value(a) && !val) {
            if (say) fprintf(stderr, "qvet %s: option %s needs a value\n", j->cmd, a);
            return 2;
        }
        if (!strcmp(a, "--out")) j->out_path = val;
        else if (!strcmp(a, "--report")) j->report_dir = val;
        else if (!strcmp(a, "--variant")) j->glob = val;
        else if (!strcmp(a, "--spec") && j->kind == JOB_CHECK) {
            const qv_variant *sv;
            if (j->n_specs == QV_GEN_MAX_SPECS) {
                if (say) fprintf(stderr, "qvet check: at most %d --spec options\n", QV_GEN_MAX_SPECS);
                return 2;
            }
            if (qv_variant_resolve(val, &sv) != QV_OK) {
                if (say) fprintf(stderr, "qvet check: --spec '%s': %s\n", val, qv_errmsg());
                return 2;
            }
            j->specs[j->n_specs] = val;
            j->spec_names[j->n_specs++] = sv->name;
        } else if (!strcmp(a, "--plugin")) j->plugin_path = val;
        else if (!strcmp(a, "--cpu") || !strcmp(a, "--cpu-fast")) j->want_cpu = 1;
        else if (!strcmp(a, "--only")) j->only = val;
        else if (j->kind == JOB_MUTANTS && (!strcmp(a, "--build-only") || !strcmp(a, "--run-only"))) {
            if (say)
                fprintf(stderr, "qvet mutants: under MPI the ranks only run the mutants; build them once "
                                "beforehand with tools/mutants.py --cpu|--gpu --build-only\n");
            return 2;
        }
        else if (!strcmp(a, "--minutes")) j->minutes_set = 1;
        else if (!strcmp(a, "--cases") && j->kind == JOB_FUZZ) {
            if (qv_opt_long("--cases", val, 1, (long long)1 << 40, &j->cases)) return 2;
        } else if (!strcmp(a, "--seed") && j->kind == JOB_FUZZ) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 0);
            if (errno || end == val || *end || val[0] == '-') {
                if (say) fprintf(stderr, "qvet fuzz: --seed wants a non-negative integer, got '%s'\n", val);
                return 2;
            }
            j->seed = s;
            j->seed_set = 1;
        } else if (!strcmp(a, "--shard")) {
            char tail;
            if (j->kind != JOB_FUZZ) {
                if (say)
                    fprintf(stderr, "qvet %s: --shard is a fuzz option; under MPI the variants are dealt "
                                    "over the ranks\n", j->cmd);
                return 2;
            }
            if (sscanf(val, "%lld/%lld%c", &j->shard_i, &j->shard_n, &tail) != 2 || j->shard_n < 1 ||
                j->shard_i < 0 || j->shard_i >= j->shard_n) {
                if (say) fprintf(stderr, "qvet fuzz: --shard wants I/N with 0 <= I < N (e.g. 0/4), got '%s'\n", val);
                return 2;
            }
        }
        if (takes_value(a)) i++;
    }
    if (j->report_dir && !j->out_path && j->kind != JOB_MUTANTS) {
        if (say) fprintf(stderr, "qvet %s: --report DIR needs --out FILE (the merged results it reads)\n", j->cmd);
        return 2;
    }
    if (j->n_specs && j->glob) {
        if (say) fprintf(stderr, "qvet check: --spec and --variant exclude each other\n");
        return 2;
    }
    if (j->kind == JOB_PPL && !j->glob) {
        if (say) fprintf(stderr, "qvet ppl: under MPI give --variant GLOB: the variants are what the ranks share\n");
        return 2;
    }
    if (j->kind == JOB_FUZZ && j->cases && j->minutes_set) {
        if (say) fprintf(stderr, "qvet fuzz: give --cases or --minutes, not both\n");
        return 2;
    }
    if (j->kind == JOB_FUZZ && !j->cases && !j->minutes_set) j->cases = FUZZ_DEFAULT_CASES;
    if (j->kind == JOB_MUTANTS) return scan_mutants(j, say);
    snprintf(j->merged, sizeof j->merged, "%s", j->out_path ? j->out_path : "");
    return 0;
}

/* The user's arguments less the ones the MPI entry rewrites, then `extra`
 * (NULL-terminated), as a fresh NULL-terminated vector headed by the binary. */
static char **child_argv(const mpi_job *j, const char *const *extra)
{
    static const char *const dropped[] = {"--out", "--report", "--shard", "--cases", "--seed", "--variant", "--only"};
    int n_extra = 0;
    while (extra[n_extra]) n_extra++;
    char **v = xmalloc(sizeof *v * (size_t)(j->argc + n_extra + 3));
    int n = 0;
    if (j->kind == JOB_MUTANTS) {
        v[n++] = xstrdup("python3");
        v[n++] = xstrdup(MUTANT_SCRIPT);
    } else {
        v[n++] = xstrdup(j->exe);
        v[n++] = xstrdup(j->cmd);
    }
    for (int i = 1; i < j->argc; i++) {
        const char *a = j->argv[i];
        int drop = 0;
        for (size_t k = 0; k < sizeof dropped / sizeof dropped[0]; k++) drop |= !strcmp(a, dropped[k]);
        /* fuzz keeps its --variant (the same glob on every rank); check and ppl
         * get one variant per child; check's --seed passes through. */
        if (!strcmp(a, "--variant") && j->kind == JOB_FUZZ) drop = 0;
        if (!strcmp(a, "--seed") && j->kind != JOB_FUZZ) drop = 0;
        if (!strcmp(a, "--cases") && j->kind != JOB_FUZZ) drop = 0;
        /* check gets one --spec per child (fuzz keeps them all) */
        if (!strcmp(a, "--spec") && j->kind == JOB_CHECK) drop = 1;
        if (drop) {
            i += takes_value(a);
            continue;
        }
        v[n++] = xstrdup(a);
    }
    for (int i = 0; i < n_extra; i++) v[n++] = xstrdup(extra[i]);
    v[n] = NULL;
    return v;
}

static void free_argv(char **v)
{
    for (int i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

/* A glob matching exactly `name`: fnmatch's metacharacters escaped. */
static void exact_glob(const char *name, char *buf, size_t len)
{
    size_t at = 0;
    for (const char *c = name; *c && at + 3 < len; c++) {
        if (strchr("*?[]\\", *c)) buf[at++] = '\\';
        buf[at++] = *c;
    }
    buf[at] = '\0';
}

/* ---- the device of this rank ---- */

/* Picks local rank % (devices this rank sees) and writes the device's entry
 * of CUDA_VISIBLE_DEVICES (or its index) into vis. The runtime call counts
 * devices without creating a context on any of them. */
static void pick_gpu(mpi_job *j, char *vis, size_t len)
{
    vis[0] = '\0';
    j->gpu = -1;
    if (j->want_cpu) return;
    int count = 0;
    const char *fake = getenv("QVET_MPI_TEST_DEVICES");
    if (fake && *fake) count = atoi(fake);
    else if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    if (count < 1) return;
    j->gpu = j->local_rank % count;
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    if (env && *env) {
        /* The gpu-th comma-separated entry of the list the scheduler gave. */
        const char *p = env;
        for (int i = 0; i < j->gpu && p; i++) {
            p = strchr(p, ',');
            if (p) p++;
        }
        if (p) {
            size_t n = strcspn(p, ",");
            snprintf(vis, len, "%.*s", (int)n, p);
        }
    } else {
        snprintf(vis, len, "%d", j->gpu);
    }
    if (j->local_rank == 0 && j->local_size > count)
        fprintf(stderr, "qvet %s: %d ranks on %s share %d GPU%s\n", j->cmd, j->local_size, j->host, count,
                count > 1 ? "s" : "");
}

/* ---- running this rank's share ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Copies the complete lines the log gained since *off to stderr, each headed
 * by the rank and host: live progress while the log itself waits for rank 0,
 * which prints every log whole, in rank order, on stdout at the end. */
static void forward_progress(const mpi_job *j, const char *log_path, long *off)
{
    FILE *f = fopen(log_path, "rb");
    if (!f) return;
    if (fseek(f, *off, SEEK_SET) == 0) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0 && line[n - 1] == '\n') {
            fprintf(stderr, "[rank %d %s] %s", j->rank, j->host, line);
            *off += (long)n;
        }
        free(line);
    }
    fclose(f);
    fflush(stderr);
}

/* Runs one child: stdout appended to log_path, stderr shared with the rank,
 * QVET_MPI=0 and the rank's device in its environment. With `live`, the
 * log's new lines go to stderr as they come (forward_progress). Returns the
 * wait() status, or -1 when it could not start. */
static int run_child(const mpi_job *j, char **argv, const char *log_path, const char *vis, int kill_it, int live)
{
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* The child must not outlive a rank that mpirun or the scheduler ends. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127);
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(127);
        close(fd);
        setenv("QVET_MPI", "0", 1);
        if (vis[0]) setenv("CUDA_VISIBLE_DEVICES", vis, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "qvet: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (kill_it) kill(pid, SIGKILL);
    int status;
    long off = (long)file_size(log_path);
    double last = now_s();
    for (;;) {
        pid_t w = waitpid(pid, &status, live ? WNOHANG : 0);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) return -1;
        /* Progress once a second is plenty; the child's own lines come every 10 s. */
        if (live && now_s() - last >= 1.0) {
            forward_progress(j, log_path, &off);
            last = now_s();
        }
        if (live) nap();
    }
    if (live) forward_progress(j, log_path, &off);
    return status;
}

/* This rank's share as a list of children. Returns how many (0: none). */
static int plan_units(const mpi_job *j, unit **out_units, rank_report *rep)
{
    unit *u = NULL;
    int n = 0;
    rep->shard[0] = '\0';
    if (j->kind == JOB_FUZZ) {
        long long R = j->size, r = j->rank;
        long long sn = j->shard_n * R, si = j->shard_i + j->shard_n * r;
        /* Case t of the user's shard runs on rank t mod R as that rank's case
         * t div R, so rank r runs ceil((C - r) / R) of the C cases. */
        long long my = j->cases ? j->cases / R + (r < j->cases % R) : 0;
        snprintf(rep->shard, sizeof rep->shard, "%lld/%lld", si, sn);
        if (j->cases && !my) {
            *out_units = NULL;
            return 0;
        }
        u = xmalloc(sizeof *u);
        snprintf(u[0].out, sizeof u[0].out, "%s/unit0.jsonl", j->tmp);
        char seed[32], cases[32];
        snprintf(seed, sizeof seed, "%" PRIu64, j->seed);
        snprintf(cases, sizeof cases, "%lld", my);
        /* With --minutes (no case count) the list ends before "--cases". */
        const char *extra[] = {"--shard", rep->shard, "--seed", seed, "--out", u[0].out,
                               j->cases ? "--cases" : NULL, cases, NULL};
        u[0].argv = child_argv(j, extra);
        n = 1;
    } else if (j->kind == JOB_MUTANTS) {
        /* One tools/mutants.py --run-only a rank, on its rows, writing into
         * the scratch folder, whose BACKEND/bin links to the built binaries. */
        int gpu = 0;
        for (int i = 1; i < j->argc; i++) gpu |= !strcmp(j->argv[i], "--gpu");
        const char *backend = gpu ? "gpu" : "cpu";
        const char *out = j->out_path ? j->out_path : MUTANT_OUT;
        char only[8192] = "", dir[700], link[800], bin[4300];
        size_t at = 0;
        for (int i = j->rank; i < j->n_mutants; i += j->size)
            at += (size_t)snprintf(only + at, sizeof only - at, "%s%s", at ? "," : "", j->mutants[i]);
        if (!at) {
            *out_units = NULL;
            return 0;
        }
        snprintf(dir, sizeof dir, "%s/mut/%s", j->tmp, backend);
        snprintf(link, sizeof link, "%s/bin", dir);
        if (out[0] == '/') snprintf(bin, sizeof bin, "%s/%s/bin", out, backend);
        else {
            char cwd[2048];
            if (!getcwd(cwd, sizeof cwd)) return -1;
            snprintf(bin, sizeof bin, "%s/%s/%s/bin", cwd, out, backend);
        }
        char mut[700];
        snprintf(mut, sizeof mut, "%s/mut", j->tmp);
        if ((mkdir(mut, 0755) && errno != EEXIST) || (mkdir(dir, 0755) && errno != EEXIST) || symlink(bin, link))
            return -1;
        u = xmalloc(sizeof *u);
        snprintf(u[0].out, sizeof u[0].out, "%s/kill.jsonl", dir);
        const char *extra[] = {"--run-only", "--only", only, "--out", mut, NULL};
        u[0].argv = child_argv(j, extra);
        n = 1;
    } else {
        /* check and ppl: one child per variant, dealt round-robin in the
         * order of the variants the command would run (check: the registry
         * rows, then the routed rows, as one process runs them; with --spec,
         * the specs in the user's order). */
        const char *sel[2 * QV_GEN_MAX_VARIANTS];
        int n_sel = 0;
        const int by_spec = j->kind == JOB_CHECK && j->n_specs;
        if (by_spec) {
            for (int i = 0; i < j->n_specs; i++) sel[n_sel++] = j->specs[i];
        } else if (j->kind == JOB_CHECK) {
            qv_backend b;
            qv_plugin pl = {0};
            int have_gpu = 0, count = 0;
            if (!j->want_cpu && cudaGetDeviceCount(&count) == cudaSuccess && count > 0) have_gpu = 1;
            if (j->plugin_path) {
                if (qv_plugin_open(j->plugin_path, &pl) != QV_OK) return -1;
                qv_backend_init(&b, pl.pointers == QV_PLUGIN_DEVICE ? QV_BACKEND_DEVICE_FN : QV_BACKEND_HOST_FN);
                b.only = pl.variants;
                b.n_only = pl.n_variants;
                b.moe_launch = pl.moe_launch;
            } else {
                qv_backend_init(&b, have_gpu ? QV_BACKEND_GPU : QV_BACKEND_CPU);
            }
            qv_gen gen;
            qv_status st = qv_gen_init(&gen, j->glob, &b);
            if (st == QV_OK)
                for (int i = 0; i < gen.n_variants; i++) sel[n_sel++] = gen.variants[i]->name;
            /* routed rows: qvet's, or those the plugin names (ABI version 3) */
            const qv_moe_row *moe[QV_GEN_MAX_VARIANTS];
            const int n_moe = qv_moe_rows_match(j->glob, &b, moe, QV_GEN_MAX_VARIANTS);
            for (int i = 0; i < n_moe; i++) sel[n_sel++] = moe[i]->name;
            if (j->plugin_path) qv_plugin_close(&pl);
            if (st != QV_OK && !n_moe) return -1;
        } else {
            const char *g = strcmp(j->glob, "all") ? j->glob : "*";
            for (int i = 0; i < qv_registry_count() && n_sel < QV_GEN_MAX_VARIANTS; i++)
                if (qv_variant_match(qv_registry_get(i), g)) sel[n_sel++] = qv_registry_get(i)->name;
            if (!n_sel) return -1;
        }
        u = xmalloc(sizeof *u * (size_t)(n_sel + 1));
        for (int i = j->rank; i < n_sel; i += j->size) {
            char glob[256];
            if (!by_spec) exact_glob(sel[i], glob, sizeof glob);
            snprintf(u[n].out, sizeof u[n].out, "%s/unit%d.jsonl", j->tmp, n);
            const char *extra[] = {by_spec ? "--spec" : "--variant", by_spec ? sel[i] : glob, "--out", u[n].out,
                                   NULL};
            u[n].argv = child_argv(j, extra);
            n++;
        }
    }
    *out_units = u;
    return n;
}

/* Runs this rank's children one after the other and collects their JSONL
 * (complete lines only, in order) into j->tmp/rank.jsonl. */
static void run_share(mpi_job *j, rank_report *rep)
{
    char vis[64], log_path[600], jsonl[600];
    pick_gpu(j, vis, sizeof vis);
    rep->rank = j->rank;
    rep->gpu = j->gpu;
    snprintf(rep->visible, sizeof rep->visible, "%s", vis);
    memcpy(rep->host, j->host, sizeof rep->host);
    snprintf(log_path, sizeof log_path, "%s/log.txt", j->tmp);
    snprintf(jsonl, sizeof jsonl, "%s/rank.jsonl", j->tmp);
    FILE *lf = fopen(log_path, "w");
    if (lf) fclose(lf);

    unit *u = NULL;
    int n = plan_units(j, &u, rep);
    if (n < 0) {
        put_problem(rep, "could not list the variants: %s", qv_errmsg());
        rep->worst_exit = 2;
        rep->units_bad = 1;
        n = 0;
    }
    const char *kill_env = getenv("QVET_MPI_TEST_KILL_RANK");
    int kill_rank = kill_env && *kill_env ? atoi(kill_env) : -1;
    FILE *all = fopen(jsonl, "wb");
    for (int i = 0; i < n; i++) {
        int status = run_child(j, u[i].argv, log_path, vis, j->rank == kill_rank && i == 0, 1);
        rep->units++;
        char label[300];
        if (j->kind == JOB_FUZZ) {
            snprintf(label, sizeof label, "shard %s", rep->shard);
        } else if (j->kind == JOB_MUTANTS) {
            snprintf(label, sizeof label, "%s", MUTANT_SCRIPT);
        } else {
            /* the variant: the word after --variant */
            const char *name = "?";
            for (int k = 2; u[i].argv[k]; k++)
                if (!strcmp(u[i].argv[k], "--variant") && u[i].argv[k + 1]) name = u[i].argv[k + 1];
            snprintf(label, sizeof label, "variant %s", name);
        }
        if (status < 0) {
            put_problem(rep, "%s: could not start the campaign process", label);
            rep->units_bad++;
            if (rep->worst_exit < 3) rep->worst_exit = 3;
        } else if (WIFSIGNALED(status)) {
            put_problem(rep, "%s: the campaign process was killed by signal %d (%s)", label, WTERMSIG(status),
                        strsignal(WTERMSIG(status)));
            if (!rep->signal) rep->signal = WTERMSIG(status);
            rep->units_bad++;
        } else {
            int rc = WEXITSTATUS(status);
            if (rc > rep->worst_exit) rep->worst_exit = rc;
            if (rc > 1) {
                put_problem(rep, "%s: the campaign process exited with status %d%s", label, rc,
                            rc == 3 ? " (environment error: device or CUDA)" : rc == 2 ? " (usage or input error)" : "");
                rep->units_bad++;
            }
        }
        if (all) {
            char partial[1100];
            snprintf(partial, sizeof partial, "%s.partial", u[i].out);
            /* A child that did not finish leaves FILE.partial (the campaign
             * renames it only when complete): its finished cases count too. */
            append_lines(all, access(u[i].out, F_OK) == 0 ? u[i].out : partial, j->kind == JOB_PPL && i > 0);
        }
        free_argv(u[i].argv);
    }
    free(u);
    if (all) fclose(all);
    rep->jsonl_bytes = file_size(jsonl);
    rep->log_bytes = file_size(log_path);
}

/* ---- merging on rank 0 ---- */

/* One rank's JSONL, read line by line in the k-way merge. */
typedef struct stream {
    FILE *f;
    char *line;
    size_t cap;
    int has;                   /* line holds the next record */
    int64_t key1, key2;        /* its sort key */
    long long cases, failed;   /* case lines and FAIL verdicts read so far */
} stream;

/* A variant's place in the merged order: its registry index, then the
 * routed rows in their table's order after every registry row; an unknown
 * name (ppl's fp32 baseline) sorts as the registry's count. */
static int registry_index(const char *name)
{
    const qv_variant *v = name ? qv_variant_find(name) : NULL;
    for (int i = 0; v && i < qv_registry_count(); i++)
        if (qv_registry_get(i) == v) return i;
    for (int i = 0; name && i < qv_moe_row_count(); i++)
        if (!strcmp(qv_moe_row_get(i)->name, name)) return qv_registry_count() + 1 + i;
    return qv_registry_count();
}

/* check --spec: a case line's place in the merged order, the index of its
 * spec in the user's list (its "variant" is the spec's canonical text);
 * n_specs for any other name. */
static int spec_index(const mpi_job *j, const char *name)
{
    for (int i = 0; name && i < j->n_specs; i++)
        if (!strcmp(name, j->spec_names[i])) return i;
    return j->n_specs;
}

/* Writes a parsed JSON value back as JSON (numbers by their source text). */
static void json_write(FILE *f, const qv_json *j)
{
    switch (qv_json_type_of(j)) {
    case QV_JSON_NULL: fputs("null", f); break;
    case QV_JSON_BOOL: fputs(j->boolean ? "true" : "false", f); break;
    case QV_JSON_NUMBER: fputs(j->text, f); break;
    case QV_JSON_STRING: qv_json_fput_str(f, j->text); break;
    case QV_JSON_ARRAY:
    case QV_JSON_OBJECT:
        fputc(j->type == QV_JSON_ARRAY ? '[' : '{', f);
        for (int i = 0; i < j->count; i++) {
            if (i) fputc(',', f);
            if (j->type == QV_JSON_OBJECT) {
                qv_json_fput_str(f, j->keys[i]);
                fputc(':', f);
            }
            json_write(f, &j->items[i]);
        }
        fputc(j->type == QV_JSON_ARRAY ? ']' : '}', f);
        break;
    }
}

/* Advances s to its next record. The first "run" line seen anywhere becomes
 * the template of the merged run line (*run_tpl, owned). */
static void stream_next(stream *s, const mpi_job *j, char **run_tpl)
{
    s->has = 0;
    ssize_t n;
    while (s->f && (n = getline(&s->line, &s->cap, s->f)) > 0) {
        if (n == 1 && s->line[0] == '\n') continue;
        qv_json *root;
        if (qv_json_parse(s->line, (size_t)n, &root) != QV_OK) {
            fprintf(stderr, "qvet %s: skipping a malformed results line: %s\n", j->cmd, qv_errmsg());
            continue;
        }
        const char *kind = qv_json_str(qv_json_get(root, "kind"));
        if (kind && !strcmp(kind, "run")) {
            if (!*run_tpl) *run_tpl = xstrdup(s->line);
            qv_json_free(root);
            continue;
        }
        int64_t idx = 0;
        qv_json_int64(qv_json_get(root, "case"), &idx);
        const char *variant = qv_json_str(qv_json_get(root, "variant"));
        s->key1 = j->kind == JOB_FUZZ ? 0 : j->n_specs ? spec_index(j, variant) : registry_index(variant);
        s->key2 = idx;
        if (kind && !strcmp(kind, "mutant")) {
            /* catalogue order; "failed" counts the killed mutants */
            const char *name = qv_json_str(qv_json_get(root, "mutant"));
            s->key1 = j->n_mutants;
            for (int i = 0; name && i < j->n_mutants; i++)
                if (!strcmp(j->mutants[i], name)) s->key1 = i;
            s->cases++;
            s->failed += qv_json_bool(qv_json_get(root, "killed"), 0) == 1;
        } else if (kind && (!strcmp(kind, "case") || !strcmp(kind, "routed"))) {
            s->cases++;
            const char *verdict = qv_json_str(qv_json_get(root, "verdict"));
            s->failed += verdict && !strcmp(verdict, "FAIL");
        } else if (kind && !strcmp(kind, "ppl")) {
            /* Every ppl child scores the fp32 baseline first: it sorts first,
             * and the merge keeps one copy. */
            if (s->key1 == qv_registry_count()) s->key1 = -1;
            else s->cases++;
        }
        qv_json_free(root);
        s->has = 1;
        return;
    }
}

/* The merged "run" line: the first child's provenance with the user's
 * command, glob and shard, plus an "mpi" object describing every rank. */
static void write_run_line(FILE *f, const mpi_job *j, const char *tpl, const rank_report *reps, const stream *st)
{
    char cmd[4096];
    size_t at = (size_t)snprintf(cmd, sizeof cmd, "qvet");
    for (int i = 0; i < j->argc && at < sizeof cmd; i++)
        at += (size_t)snprintf(cmd + at, sizeof cmd - at, " %s", j->argv[i]);
    fputs("{\"kind\":\"run\",\"command\":", f);
    qv_json_fput_str(f, cmd);
    qv_json *root = NULL;
    if (tpl && qv_json_parse(tpl, strlen(tpl), &root) == QV_OK) {
        for (int i = 0; i < qv_json_len(root); i++) {
            const char *k = qv_json_key(root, i);
            if (!strcmp(k, "kind") || !strcmp(k, "command") || !strcmp(k, "shard") || !strcmp(k, "host") ||
                !strcmp(k, "variant_glob") || (j->n_specs && !strcmp(k, "specs")))
                continue;
            fputc(',', f);
            qv_json_fput_str(f, k);
            fputc(':', f);
            json_write(f, qv_json_at(root, i));
        }
        qv_json_free(root);
    }
    fputs(",\"host\":", f);
    qv_json_fput_str(f, j->host);
    if (j->n_specs) {
        /* every child ran one of them: the run's specs are the user's list */
        fputs(",\"specs\":[", f);
        for (int i = 0; i < j->n_specs; i++) {
            if (i) fputc(',', f);
            qv_json_fput_str(f, j->specs[i]);
        }
        fputc(']', f);
    }
    fprintf(f, ",\"shard\":\"%lld/%lld\",\"variant_glob\":", j->shard_i, j->shard_n);
    if (j->glob) qv_json_fput_str(f, j->glob);
    else fputs("null", f);
    fprintf(f, ",\"mpi\":{\"ranks\":%d,\"hosts\":[", j->size);
    int n_hosts = 0;
    for (int r = 0; r < j->size; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++) seen |= !strcmp(reps[q].host, reps[r].host);
        if (seen) continue;
        if (n_hosts++) fputc(',', f);
        qv_json_fput_str(f, reps[r].host);
    }
    fputs("],\"per_rank\":[", f);
    for (int r = 0; r < j->size; r++) {
        const rank_report *p = &reps[r];
        fprintf(f, "%s{\"rank\":%d,\"host\":", r ? "," : "", r);
        qv_json_fput_str(f, p->host);
        fputs(",\"gpu\":", f);
        if (p->gpu >= 0) fprintf(f, "%d", p->gpu);
        else fputs("null", f);
        if (p->shard[0]) fprintf(f, ",\"shard\":\"%s\"", p->shard);
        if (p->visible[0]) {
            fputs(",\"cuda_visible_devices\":", f);
            qv_json_fput_str(f, p->visible);
        }
        fprintf(f, ",\"processes\":%d,\"processes_failed\":%d,\"cases\":%lld,\"failed\":%lld,\"ok\":%s", p->units,
                p->units_bad, st[r].cases, st[r].failed, p->units_bad ? "false" : "true");
        if (p->problem[0]) {
            fputs(",\"problem\":", f);
            qv_json_fput_str(f, p->problem);
        }
        fputc('}', f);
    }
    fputs("]}}\n", f);
}

/* Merges the ranks' JSONL files (paths[r]) into body (records only, sorted),
 * filling per-rank counts and the run-line template. */
static void merge(const mpi_job *j, char **paths, stream *st, FILE *body, char **run_tpl)
{
    for (int r = 0; r < j->size; r++) {
        st[r].f = fopen(paths[r], "rb");
        stream_next(&st[r], j, run_tpl);
    }
    int have_last = 0;
    int64_t last1 = 0, last2 = 0;
    for (;;) {
        int best = -1;
        for (int r = 0; r < j->size; r++) {
            if (!st[r].has) continue;
            if (best < 0 || st[r].key1 < st[best].key1 ||
                (st[r].key1 == st[best].key1 && st[r].key2 < st[best].key2))
                best = r;
        }
        if (best < 0) break;
        int dup = j->kind == JOB_PPL && have_last && st[best].key1 == last1 && st[best].key2 == last2;
        if (!dup) fputs(st[best].line, body);
        have_last = 1;
        last1 = st[best].key1;
        last2 = st[best].key2;
        stream_next(&st[best], j, run_tpl);
    }
    for (int r = 0; r < j->size; r++) {
        if (st[r].f) fclose(st[r].f);
        free(st[r].line);
    }
}

/* Copies the whole file at src to dst. */
static int copy_into(FILE *dst, const char *src)
{
    FILE *f = fopen(src, "rb");
    if (!f) return -1;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        if (fwrite(buf, 1, n, dst) != n) break;
    int bad = ferror(f);
    fclose(f);
    return bad ? -1 : 0;
}

/* Prints a rank's log, less the children's "results: FILE" lines, which
 * name scratch files that the merged file replaces. */
static void print_log(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0)
        if (strncmp(line, "results: ", strlen("results: ")) || !strstr(line, "/qvet-mpi-r"))
            fwrite(line, 1, (size_t)n, stdout);
    free(line);
    fclose(f);
}

/* Rank 0: receives every rank's report, log and JSONL, prints the logs in
 * rank order, writes the merged results and the summary. Returns the exit
 * code of the whole run. */
static int gather_and_merge(mpi_job *j, rank_report *mine)
{
    int R = j->size;
    rank_report *reps = xmalloc(sizeof *reps * (size_t)R);
    char **paths = xmalloc(sizeof *paths * (size_t)R);
    char **logs = xmalloc(sizeof *logs * (size_t)R);
    reps[0] = *mine;
    for (int r = 0; r < R; r++) {
        paths[r] = xmalloc(700);
        logs[r] = xmalloc(700);
        snprintf(paths[r], 700, r ? "%s/from%d.jsonl" : "%s/rank.jsonl", j->tmp, r);
        snprintf(logs[r], 700, r ? "%s/from%d.log" : "%s/log.txt", j->tmp, r);
    }
    for (int r = 1; r < R; r++) {
        recv_polite(&reps[r], (int)sizeof reps[r], r, TAG_REPORT);
        reps[r].host[HOST_LEN - 1] = '\0';
        reps[r].problem[PROBLEM_LEN - 1] = '\0';
        reps[r].shard[sizeof reps[r].shard - 1] = '\0';
        reps[r].visible[sizeof reps[r].visible - 1] = '\0';
        int bad = recv_file(logs[r], reps[r].log_bytes, r, TAG_LOG);
        bad |= recv_file(paths[r], reps[r].jsonl_bytes, r, TAG_JSONL);
        if (bad) {
            put_problem(&reps[r], "rank 0 could not store this rank's results in %s", j->tmp);
            reps[r].units_bad++;
        }
    }
    for (int r = 0; r < R; r++) {
        printf("==== rank %d on %s", r, reps[r].host);
        if (reps[r].gpu >= 0) printf(", GPU %d", reps[r].gpu);
        if (reps[r].shard[0]) printf(", shard %s", reps[r].shard);
        printf(" ====\n");
        fflush(stdout);
        print_log(logs[r]);
    }

    stream *st = calloc((size_t)R, sizeof *st);
    char body_path[700], *run_tpl = NULL;
    snprintf(body_path, sizeof body_path, "%s/merged.body", j->tmp);
    FILE *body = fopen(body_path, "wb");
    if (!st || !body) {
        fprintf(stderr, "qvet %s: cannot write in %s\n", j->cmd, j->tmp);
        return 3;
    }
    merge(j, paths, st, body, &run_tpl);
    int rc = 0;
    if (fclose(body)) rc = 3;
    long long cases = 0, failed = 0;
    for (int r = 0; r < R; r++) {
        cases += st[r].cases;
        failed += st[r].failed;
    }
    if (j->merged[0]) {
        /* FILE.partial first, renamed when complete, as the campaign does. */
        char tmp_out[4300];
        snprintf(tmp_out, sizeof tmp_out, "%s.partial", j->merged);
        FILE *o = fopen(tmp_out, "wb");
        int bad = !o;
        if (o) {
            write_run_line(o, j, run_tpl, reps, st);
            bad |= copy_into(o, body_path);
            bad |= ferror(o);
            bad |= fclose(o) != 0;
        }
        if (bad || rename(tmp_out, j->merged)) {
            fprintf(stderr, "qvet %s: cannot write %s\n", j->cmd, j->merged);
            rc = 2;
        }
    }
    free(run_tpl);

    printf("==== %d ranks ====\n", R);
    int bad_ranks = 0, worst = 0;
    for (int r = 0; r < R; r++) {
        const rank_report *p = &reps[r];
        char dev[32];
        if (p->gpu >= 0) snprintf(dev, sizeof dev, "GPU %d", p->gpu);
        else snprintf(dev, sizeof dev, "no GPU");
        printf("rank %-3d %-20s %-7s %8lld %s %6lld failed  %s\n", r, p->host, dev, st[r].cases,
               j->kind == JOB_PPL ? "variants" : j->kind == JOB_MUTANTS ? "mutants" : "cases", st[r].failed,
               p->units_bad ? "FAILED" : "ok");
        if (p->worst_exit > worst) worst = p->worst_exit;
        if (p->units_bad) {
            bad_ranks++;
            /* One message line per failed child, on stderr, naming rank and host. */
            const char *line = p->problem;
            while (*line) {
                size_t len = strcspn(line, "\n");
                fprintf(stderr, "qvet %s: rank %d on host %s: %.*s\n", j->cmd, r, p->host, (int)len, line);
                line += len + (line[len] == '\n');
            }
        }
    }
    if (bad_ranks == R)
        fprintf(stderr, "qvet %s: no rank finished\n", j->cmd);
    else if (bad_ranks)
        fprintf(stderr, "qvet %s: %d of %d ranks did not finish; the results of the others are kept%s\n", j->cmd,
                bad_ranks, R, j->merged[0] ? " in the merged file" : "");

    if (j->report_dir && !rc) {
        char *argv[] = {j->exe, "report", (char *)j->merged, "-o", (char *)j->report_dir, NULL};
        int status = run_child(j, argv, "/dev/stdout", "", 0, 0);
        if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "qvet %s: qvet report on %s failed\n", j->cmd, j->merged);
            rc = 2;
        }
    }
    if (j->merged[0] && !rc) printf("results: %s\n", j->merged);
    if (j->kind == JOB_PPL) printf("ppl: %lld variants on %d ranks, %d ranks failed\n", cases, R, bad_ranks);
    else if (j->kind == JOB_MUTANTS) printf("mutants: %lld killed of %lld\n", failed, cases);
    else printf("%s: %lld cases, %lld failed\n", j->cmd, cases, failed);
    fflush(stdout);

    /* Exit: 2 for a usage error, 3 when a rank did not finish, 1 for a FAIL. */
    if (!rc) {
        if (worst == 2) rc = 2;
        else if (bad_ranks) rc = 3;
        else if (j->kind == JOB_MUTANTS) rc = worst == 1 || failed < cases ? 1 : 0;
        else if (failed || worst == 1) rc = 1;
    }
    for (int r = 0; r < R; r++) {
        free(paths[r]);
        free(logs[r]);
    }
    free(paths);
    free(logs);
    free(reps);
    free(st);
    return rc;
}

/* ---- the MPI run ---- */

static void mpi_usage(FILE *f)
{
    fprintf(f,
            "\nUnder MPI (mpirun -np R qvet fuzz|check|ppl|mutants ...):\n"
            "  each rank runs its share in a child qvet on GPU (local rank %% devices);\n"
            "  fuzz: rank r runs shard (I + N*r)/(N*R) of --shard I/N and its part of --cases;\n"
            "  check, ppl: the variants are dealt round-robin over the ranks;\n"
            "  rank 0 writes the merged, sorted results to --out FILE; --report DIR then runs\n"
            "  qvet report on it. A rank whose child dies is named with its host; exit 3.\n"
            "  mutants --cpu|--gpu [--only A,B] [--cases N] [--seed S] [--out DIR]: the rows of\n"
            "  %s are dealt over the ranks, each running %s --run-only on the\n"
            "  binaries that %s --build-only made; merged into DIR/BACKEND/kill.jsonl.\n",
            MUTANT_CATALOGUE, MUTANT_SCRIPT, MUTANT_SCRIPT);
}

static int mpi_main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    mpi_job job, *j = &job;
    memset(j, 0, sizeof *j);
    MPI_Comm_rank(MPI_COMM_WORLD, &j->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &j->size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, j->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &j->local_rank);
    MPI_Comm_size(node, &j->local_size);
    MPI_Comm_free(&node);
    if (gethostname(j->host, sizeof j->host)) snprintf(j->host, sizeof j->host, "unknown");
    j->host[HOST_LEN - 1] = '\0';

    int rc = 0;
    const char *cmd = argc >= 2 ? argv[1] : "";
    int help = 0;
    for (int i = 2; i < argc; i++) help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
    if (!strcmp(cmd, "fuzz")) j->kind = JOB_FUZZ;
    else if (!strcmp(cmd, "check")) j->kind = JOB_CHECK;
    else if (!strcmp(cmd, "ppl")) j->kind = JOB_PPL;
    else if (!strcmp(cmd, "mutants")) j->kind = JOB_MUTANTS;
    else help = 1;
    if (help && !strcmp(cmd, "mutants")) {
        if (j->rank == 0) mpi_usage(stdout);
        MPI_Finalize();
        return 0;
    }
    if (help) {
        /* Not a distributed command: rank 0 runs it as the plain qvet. */
        if (j->rank == 0) {
            rc = __real_main(argc, argv);
            if (argc >= 2 && (!strcmp(cmd, "fuzz") || !strcmp(cmd, "check") || !strcmp(cmd, "ppl"))) mpi_usage(stdout);
            fflush(stdout);
        }
        bcast_polite(&rc, (int)sizeof rc);
        MPI_Finalize();
        return rc;
    }
    j->cmd = cmd;
    j->argc = argc - 1;
    j->argv = argv + 1;
    rc = scan_opts(j);
    ssize_t n = readlink("/proc/self/exe", j->exe, sizeof j->exe - 1);
    if (n <= 0) {
        if (j->rank == 0) fprintf(stderr, "qvet %s: cannot find this program's path\n", cmd);
        rc = 3;
    } else {
        j->exe[n] = '\0';
    }
    if (j->kind == JOB_FUZZ && !j->seed_set && j->rank == 0) {
        /* One fresh seed for the whole run, drawn by rank 0 like fuzz draws it. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        j->seed = qv_splitmix64(&s) >> 16; /* 48 bits, as fuzz draws them: short enough to type */
    }
    MPI_Bcast(&j->seed, (int)sizeof j->seed, MPI_BYTE, 0, MPI_COMM_WORLD);
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (worst) {
        MPI_Finalize();
        return worst;
    }

    const char *tdir = getenv("TMPDIR");
    snprintf(j->tmp, sizeof j->tmp, "%s/qvet-mpi-r%d-XXXXXX", tdir && *tdir ? tdir : "/tmp", j->rank);
    rank_report rep;
    memset(&rep, 0, sizeof rep);
    if (!mkdtemp(j->tmp)) {
        fprintf(stderr, "qvet %s: rank %d on %s: cannot create a scratch folder: %s\n", cmd, j->rank, j->host,
                strerror(errno));
        j->tmp[0] = '\0';
        rep.rank = j->rank;
        rep.gpu = -1;
        memcpy(rep.host, j->host, sizeof rep.host);
        snprintf(rep.problem, sizeof rep.problem, "no scratch folder");
        rep.units_bad = 1;
        rep.worst_exit = 3;
    } else {
        if (j->rank == 0) {
            printf("qvet %s under MPI: %d ranks", cmd, j->size);
            if (j->kind == JOB_FUZZ) {
                printf(", seed %" PRIu64 ", shard %lld/%lld, ", j->seed, j->shard_i, j->shard_n);
                if (j->cases) printf("%lld cases", j->cases);
                else printf("time-bounded");
            }
            printf("\n");
            fflush(stdout);
        }
        run_share(j, &rep);
    }
    if (j->rank == 0) {
        rc = gather_and_merge(j, &rep);
    } else {
        char jsonl[600], log_path[600];
        snprintf(jsonl, sizeof jsonl, "%s/rank.jsonl", j->tmp);
        snprintf(log_path, sizeof log_path, "%s/log.txt", j->tmp);
        MPI_Send(&rep, (int)sizeof rep, MPI_BYTE, 0, TAG_REPORT, MPI_COMM_WORLD);
        send_file(log_path, rep.log_bytes, TAG_LOG);
        send_file(jsonl, rep.jsonl_bytes, TAG_JSONL);
    }
    if (j->tmp[0]) remove_tree(j->tmp);
    bcast_polite(&rc, (int)sizeof rc);
    MPI_Finalize();
    return rc;
}

/* The process entry (see the header: -Wl,--wrap=main). */
int __wrap_main(int argc, char **argv)
{
    if (!mpi_launched()) return __real_main(argc, argv);
    return mpi_main(argc, argv);
}
