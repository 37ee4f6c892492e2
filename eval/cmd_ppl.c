/* cmd_ppl.c: `qvet ppl`, perplexity and KL divergence of a real model through
 * quantized variants (cli.h, docs/design.md §10). Loads a llama GGUF and a text,
 * tokenizes the text, then for the fp32 baseline and each selected variant runs
 * the llama.cpp protocol (eval.h, qv_ppl_eval) and prints a table row and a
 * JSONL "ppl" line (docs/results-format.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal/campaign.h"
#include "internal/cli.h"
#include "internal/eval.h"
#include "internal/gpu.h"
#include "internal/json.h"
#include "internal/launch_env.h"

#include "eval_internal.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qvet ppl --model M.gguf --text T.txt [--variant GLOB|all] [--ctx 512] [--chunks N]\n"
            "                [--gpu | --cpu | --cpu-fast] [--max-seconds S] [--out FILE.jsonl]\n\n"
            "Perplexity and KL divergence of a llama-architecture GGUF model on a text, the way\n"
            "llama.cpp's perplexity tool measures them: non-overlapping chunks of --ctx tokens, the\n"
            "second half of each chunk scored. The fp32 forward pass (OpenBLAS) is the baseline;\n"
            "each variant runs every linear layer of every block through the variant, with weights\n"
            "quantized round-to-nearest per its scale layout and activations per its format.\n\n"
            "  --model M       GGUF file (llama architecture; F32/F16/BF16/Q8_0/Q4_0/Q4_1 tensors)\n"
            "  --text T        UTF-8 text file\n"
            "  --variant GLOB  variants to evaluate (glob over names, or 'all'); none: baseline only\n"
            "  --ctx N         chunk length in tokens (default 512)\n"
            "  --chunks N      at most N chunks (default: all the text holds)\n"
            "  --gpu           run the variants' kernels on the GPU (default when a GPU is present)\n"
            "  --cpu           run the variants' CPU models (reference.h ref_model_run), exact but slow\n"
            "  --cpu-fast      dequantize and use sgemm, rounding each output to the variant's format\n"
            "  --max-seconds S start no chunk that would end after S seconds of wall time (the\n"
            "                  JSONL then records the chunks done); at least one chunk always runs\n"
            "  --out FILE      append JSONL results to FILE\n"
            "  -h, --help      this text\n");
}

/* Whole file into memory (NUL-terminated); a pipe is read to its end, a
 * directory refused. */
static qv_status read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return qv_fail(QV_ERR_IO, "cannot open '%s'", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) || S_ISDIR(sb.st_mode)) {
        fclose(f);
        return qv_fail(QV_ERR_IO, "'%s' is a directory, not a text file", path);
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) { fclose(f); return qv_fail(QV_ERR_NOMEM, "no memory to read '%s'", path); }
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(b, cap);
        if (!nb) free(b);
        b = nb;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(b); return qv_fail(QV_ERR_IO, "read error on '%s'", path); }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return QV_OK;
}

typedef struct ppl_run {
    const char *model_path, *text_path;
    char model_sha[65], text_sha[65];
    int64_t tokens;
    int ctx, chunks_done;
    double max_s;           /* --max-seconds: no new chunk past this wall time (0: no limit) */
    double t_start;         /* monotonic seconds when the command started */
    const char *backend;
    FILE *out;
    qv_launch_opts launch;  /* the GPU backend's launch options (the QVET_* variables) */
} ppl_run;

static void print_header(void)
{
    printf("%-28s %-9s %9s %9s %10s %9s %10s %9s %9s %8s %8s %9s\n", "variant", "backend", "PPL", "+-", "dPPL", "+-",
           "KLD", "+-", "KLD p99", "top1 %", "RMS dp", "NMSE out");
}

static void emit(const ppl_run *r, const char *variant, const char *backend, const qv_ppl_stats *s,
                 const double *err, const double *ref, int n_layers)
{
    /* "NMSE out": the last block's output against the baseline's (all layers go to the JSONL) */
    double nmse_last = ref[n_layers - 1] > 0 ? err[n_layers - 1] / ref[n_layers - 1] : 0.0;
    printf("%-28s %-9s %9.4f %9.4f %10.5f %9.5f %10.3e %9.2e %9.3e %8.3f %8.5f %9.2e\n", variant, backend, s->ppl,
           s->ppl_stderr, s->dppl, s->dppl_stderr, s->kld_mean, s->kld_stderr, s->kld_p99, 100 * s->same_top1, s->rms_dp,
           nmse_last);
    fflush(stdout);
    if (!r->out) return;
    FILE *f = r->out;
    fprintf(f, "{\"kind\":\"ppl\",\"variant\":");
    qv_json_fput_str(f, variant);
    fprintf(f, ",\"backend\":");
    qv_json_fput_str(f, backend);
    fprintf(f, ",\"model\":");
    const char *base = strrchr(r->model_path, '/');
    qv_json_fput_str(f, base ? base + 1 : r->model_path);
    fprintf(f, ",\"model_sha256\":\"%s\",\"text\":", r->model_sha);
    const char *tb = strrchr(r->text_path, '/');
    qv_json_fput_str(f, tb ? tb + 1 : r->text_path);
    fprintf(f, ",\"text_sha256\":\"%s\",\"tokens\":%lld,\"ctx\":%d,\"chunks\":%d,\"scored\":%lld", r->text_sha,
            (long long)r->tokens, r->ctx, r->chunks_done, (long long)s->n);
    const struct { const char *k; double v; } nums[] = {
        {"ppl", s->ppl}, {"ppl_stderr", s->ppl_stderr}, {"ppl_base", s->ppl_base}, {"dppl", s->dppl},
        {"dppl_stderr", s->dppl_stderr}, {"kld_mean", s->kld_mean}, {"kld_stderr", s->kld_stderr},
        {"kld_p99", s->kld_p99}, {"kld_max", s->kld_max}, {"same_top1", s->same_top1},
        {"same_top1_stderr", s->same_top1_stderr}, {"rms_dp", s->rms_dp}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        fprintf(f, ",\"%s\":", nums[i].k);
        qv_json_fput_num(f, nums[i].v);
    }
    fprintf(f, ",\"layer_nmse\":[");
    for (int l = 0; l < n_layers; l++) {
        if (l) fputc(',', f);
        qv_json_fput_num(f, ref[l] > 0 ? err[l] / ref[l] : 0.0);
    }
    fprintf(f, "]}\n");
    fflush(f);
}

static void emit_run_line(FILE *f, int argc, char **argv, const char *backend, const qv_gpu_info *gi)
{
    char cmd[2048] = "qvet ppl"; /* argv[0] is the subcommand's own name */
    for (int i = 1; i < argc; i++) {
        size_t l = strlen(cmd);
        snprintf(cmd + l, sizeof cmd - l, " %s", argv[i]);
    }
    char date[32], host[128] = "unknown";
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    gethostname(host, sizeof host - 1);
    fprintf(f, "{\"kind\":\"run\",\"command\":");
    qv_json_fput_str(f, cmd);
    fprintf(f, ",\"qvet_version\":\"%s\",\"commit\":", QV_VERSION);
    qv_json_fput_str(f, qv_build_commit());
    fprintf(f, ",\"date\":\"%s\",\"host\":", date);
    qv_json_fput_str(f, host);
    fprintf(f, ",\"backend\":\"%s\",\"gpu\":", backend);
    if (gi->present) qv_json_fput_str(f, gi->name);
    else fprintf(f, "null");
    if (gi->present) {
        char drv[64];
        qv_driver_version(gi->driver, drv, sizeof drv);
        fprintf(f, ",\"driver\":");
        qv_json_fput_str(f, drv);
        fprintf(f, ",\"cuda\":\"%d.%d\"", gi->runtime / 1000, gi->runtime % 1000 / 10);
    } else {
        fprintf(f, ",\"driver\":null,\"cuda\":null");
    }
    fprintf(f, ",\"seed\":0,\"shard\":\"0/1\"}\n");
}

enum { BK_AUTO, BK_GPU, BK_CPU, BK_CPU_FAST };

static int fail_exit(qv_status st)
{
    fprintf(stderr, "qvet ppl: %s\n", qv_errmsg());
    return qv_status_exit_code(st);
}

/* One row of the table: the fp32 baseline (v NULL) or a variant. */
typedef struct ppl_row {
    const qv_variant *v;
    qv_linear_backend lb;   /* lb.run NULL: the baseline against itself, or no backend */
    int state;              /* ROW_OK, ROW_SKIPPED (no backend), ROW_FAILED (a chunk failed) */
    char why[256];          /* the message of a skipped or failed row */
    qv_ppl_acc acc;
    double *err, *ref;      /* (n_layers) block output error and baseline norm */
    double setup_s, run_s;  /* wall time: backend creation, then all chunks */
    double acts_s, gemm_s;  /* of run_s: activation quantization, the GEMMs (qv_linear_backend_times) */
} ppl_row;

enum { ROW_OK, ROW_SKIPPED, ROW_FAILED };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Creates a row's backend, ready for chunks of ctx tokens; a variant without
 * one is skipped, not an error. */
static void row_setup(ppl_row *w, const qv_llama *m, int backend, int ctx, const qv_launch_opts *launch)
{
    if (!w->v) return;
    qv_status st = backend == BK_GPU ? qv_linear_variant_gpu(w->v, m, launch, &w->lb)
                                     : qv_linear_variant_cpu(w->v, m, backend == BK_CPU, &w->lb);
    if (st == QV_OK && (st = qv_linear_backend_prepare(&w->lb, ctx)) != QV_OK) qv_linear_backend_free(&w->lb);
    if (st != QV_OK) {
        w->state = ROW_SKIPPED;
        snprintf(w->why, sizeof w->why, "%s", qv_errmsg());
    }
}

/* The baseline and the selected variants over the chunks, chunk by chunk:
 * each chunk's baseline runs once and every variant is compared with it, so
 * only one chunk's baseline is held at a time. GPU backends are built once and
 * all kept (their weights live on the device); a CPU backend holds its
 * dequantized weights in f32 (about 0.5 GB for a 135M model), so it is built
 * for each chunk and released after it, and only one is held at a time: the
 * quantization repeats per chunk, costing about what the baseline runs that
 * are no longer repeated per variant saved. Rows are printed (and written to
 * the JSONL) at the end, in registry order. Returns the exit code. */
static int evaluate(ppl_run *r, const qv_llama *m, const char *glob, int backend, const int32_t *tokens,
                    int64_t n_tokens, int bos)
{
    int L = m->c.n_layers, n_rows = 1, rc = 0;
    for (int i = 0; glob && i < qv_registry_count(); i++) n_rows += qv_variant_match(qv_registry_get(i), glob);
    ppl_row *rows = calloc((size_t)n_rows, sizeof *rows);
    if (!rows) return fail_exit(qv_fail(QV_ERR_NOMEM, "no memory"));
    for (int i = 0, k = 1; glob && i < qv_registry_count(); i++)
        if (qv_variant_match(qv_registry_get(i), glob)) rows[k++].v = qv_registry_get(i);
    double t0 = now_s();
    int keep = backend == BK_GPU;
    for (int k = 0; k < n_rows; k++) {
        ppl_row *w = &rows[k];
        qv_ppl_acc_init(&w->acc);
        w->err = calloc((size_t)L, sizeof(double));
        w->ref = calloc((size_t)L, sizeof(double));
        if (!w->err || !w->ref) { rc = fail_exit(qv_fail(QV_ERR_NOMEM, "no memory")); goto done; }
        if (!keep || !w->v) continue;
        double ts = now_s();
        row_setup(w, m, backend, r->ctx, &r->launch);
        w->setup_s = now_s() - ts;
        fprintf(stderr, "ppl: [%d/%d] %s: %s in %.2f s (elapsed %.1f s)\n", k, n_rows - 1, w->v->name,
                w->state == ROW_OK ? "ready" : "skipped", w->setup_s, now_s() - t0);
    }
    int planned = r->chunks_done;
    for (int ci = 0; ci < planned; ci++) {
        double tc = now_s();
        qv_ppl_base b;
        qv_status st = qv_ppl_base_compute(m, tokens, n_tokens, r->ctx, ci, bos, &b);
        if (st != QV_OK) { rc = fail_exit(st); goto done; }
        double base_s = now_s() - tc;
        rows[0].run_s += base_s;
        for (int k = 0; k < n_rows; k++) {
            ppl_row *w = &rows[k];
            if (w->state != ROW_OK) continue;
            double ts = now_s();
            if (!keep && w->v) {
                row_setup(w, m, backend, r->ctx, &r->launch);
                w->setup_s += now_s() - ts;
                if (ci == 0)
                    fprintf(stderr, "ppl: [%d/%d] %s: %s in %.2f s (elapsed %.1f s)\n", k, n_rows - 1, w->v->name,
                            w->state == ROW_OK ? "ready" : "skipped", now_s() - ts, now_s() - t0);
                if (w->state != ROW_OK) continue;
                ts = now_s();
            }
            double a0, g0, a1, g1;
            qv_linear_backend_times(&w->lb, &a0, &g0);
            st = qv_ppl_eval_chunk(m, w->v ? &w->lb : NULL, &b, &w->acc, w->err, w->ref);
            w->run_s += now_s() - ts;
            qv_linear_backend_times(&w->lb, &a1, &g1);
            w->acts_s += a1 - a0;
            w->gemm_s += g1 - g0;
            if (st != QV_OK) {
                w->state = ROW_FAILED;
                snprintf(w->why, sizeof w->why, "%s", qv_errmsg());
                rc = qv_status_exit_code(st);
            }
            if (st != QV_OK || !keep) qv_linear_backend_free(&w->lb);
        }
        qv_ppl_base_free(&b);
        double chunk_s = now_s() - tc;
        fprintf(stderr, "ppl: chunk %d/%d: baseline %.2f s, %d variants %.2f s (elapsed %.1f s)\n", ci + 1,
                planned, base_s, n_rows - 1, chunk_s - base_s, now_s() - t0);
        /* Stop when one more chunk, as long as this one, would pass the limit. */
        if (r->max_s > 0 && ci + 1 < planned && now_s() - r->t_start + chunk_s > r->max_s) {
            r->chunks_done = ci + 1;
            printf("stopped after %d of %d chunks: --max-seconds %g\n", r->chunks_done, planned, r->max_s);
            fprintf(stderr, "ppl: stopped after %d of %d chunks (--max-seconds %g)\n", r->chunks_done, planned,
                    r->max_s);
            break;
        }
    }
    for (int k = 0; k < n_rows; k++) {
        ppl_row *w = &rows[k];
        const char *name = w->v ? w->v->name : "fp32";
        if (w->state == ROW_SKIPPED) { printf("%-28s skipped: %s\n", name, w->why); continue; }
        if (w->state == ROW_FAILED) { printf("%-28s failed: %s\n", name, w->why); continue; }
        qv_ppl_stats s;
        qv_ppl_stats_compute(&w->acc, &s);
        emit(r, name, w->v ? r->backend : "cpu-blas", &s, w->err, w->ref, L);
    }
    /* Per row: setup, then the chunks split into activation quantization, the
     * GEMMs, and the rest (the f32 host work of the forward pass: attention,
     * norms, output projection; and the statistics). */
    for (int k = 0; k < n_rows; k++) {
        const ppl_row *w = &rows[k];
        fprintf(stderr, "ppl: time %-28s %7.2f s: setup %5.2f, %d chunks %6.2f (acts %5.2f, gemm %5.2f, rest %6.2f)\n",
                w->v ? w->v->name : "fp32", w->setup_s + w->run_s, w->setup_s, r->chunks_done, w->run_s, w->acts_s,
                w->gemm_s, w->run_s - w->acts_s - w->gemm_s);
    }
    fprintf(stderr, "ppl: total %.1f s\n", now_s() - t0);
done:
    for (int k = 0; k < n_rows; k++) {
        qv_linear_backend_free(&rows[k].lb);
        qv_ppl_acc_clear(&rows[k].acc);
        free(rows[k].err);
        free(rows[k].ref);
    }
    free(rows);
    return rc;
}

int qv_cmd_ppl(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"text", required_argument, 0, 't'},
        {"variant", required_argument, 0, 'v'}, {"ctx", required_argument, 0, 'c'},
        {"chunks", required_argument, 0, 'n'}, {"gpu", no_argument, 0, 'G'}, {"cpu", no_argument, 0, 'C'},
        {"cpu-fast", no_argument, 0, 'F'}, {"out", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'},
        {"max-seconds", required_argument, 0, 'S'},
        {0, 0, 0, 0}};
    ppl_run r;
    memset(&r, 0, sizeof r);
    r.t_start = now_s();
    const char *glob = NULL, *out_path = NULL;
    long long ctx = 512, chunks = 0, max_s = 0;
    int backend = BK_AUTO, nb = 0;
    optind = 1;
    opterr = 0;
    for (;;) {
        int o = getopt_long(argc, argv, "h", opts, NULL);
        if (o == -1) break;
        switch (o) {
        case 'm': r.model_path = optarg; break;
        case 't': r.text_path = optarg; break;
        case 'v': glob = optarg; break;
        case 'c': if (qv_opt_long("--ctx", optarg, 4, 1 << 16, &ctx)) return 2; break;
        case 'n': if (qv_opt_long("--chunks", optarg, 1, 1 << 30, &chunks)) return 2; break;
        case 'G': backend = BK_GPU; nb++; break;
        case 'C': backend = BK_CPU; nb++; break;
        case 'F': backend = BK_CPU_FAST; nb++; break;
        case 'o': out_path = optarg; break;
        case 'S': if (qv_opt_long("--max-seconds", optarg, 1, 1 << 30, &max_s)) return 2; r.max_s = (double)max_s; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "qvet ppl: unknown option or missing value: %s\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) { fprintf(stderr, "qvet ppl: unexpected argument '%s'\n", argv[optind]); usage(stderr); return 2; }
    if (!r.model_path || !r.text_path) { fprintf(stderr, "qvet ppl: --model and --text are required\n"); usage(stderr); return 2; }
    if (nb > 1) { fprintf(stderr, "qvet ppl: choose one of --gpu, --cpu, --cpu-fast\n"); return 2; }
    int env_rc = qv_cli_launch_env("ppl", &r.launch);
    if (env_rc) return env_rc;
    /* QVET_THREADS: the CPU pool's threads (a process setting of this command). */
    const char *threads = getenv("QVET_THREADS");
    if (threads) {
        long long nt;
        if (qv_opt_long("QVET_THREADS", threads, 1, 4096, &nt)) return 2;
        qv_eval_threads_request((int)nt);
    }
    if (glob && !strcmp(glob, "all")) glob = "*";
    int n_sel = 0;
    for (int i = 0; glob && i < qv_registry_count(); i++) n_sel += qv_variant_match(qv_registry_get(i), glob);
    if (glob && n_sel == 0) { fprintf(stderr, "qvet ppl: no variant matches '%s' (see qvet list)\n", glob); return 2; }

    qv_gpu_info gi;
    memset(&gi, 0, sizeof gi);
    if (backend == BK_GPU || (backend == BK_AUTO && glob)) qv_gpu_info_get(&gi);
    if (backend == BK_AUTO) backend = gi.present ? BK_GPU : BK_CPU;
    if (backend == BK_GPU && glob && !gi.present) {
        fprintf(stderr, "qvet ppl: --gpu: no CUDA device present (use --cpu or --cpu-fast)\n");
        return 3;
    }
    r.backend = backend == BK_GPU ? "gpu" : backend == BK_CPU ? "cpu-model" : "cpu-fast";
    r.ctx = (int)ctx;

    qv_status st;
    qv_gguf *g = NULL;
    qv_tokenizer *tok = NULL;
    qv_llama model;
    memset(&model, 0, sizeof model);
    char *text = NULL;
    size_t text_len = 0;
    int32_t *ids = NULL, *all = NULL;
    size_t n_ids = 0;
    int rc = 0;
    if ((st = qv_gguf_open(r.model_path, &g)) != QV_OK) return fail_exit(st);
    if ((st = qv_tokenizer_create(g, &tok)) != QV_OK || (st = qv_llama_load(g, &model)) != QV_OK) {
        rc = fail_exit(st);
        goto done;
    }
    if (qv_tokenizer_vocab(tok) != model.c.vocab) {
        fprintf(stderr, "qvet ppl: the tokenizer has %d tokens but the model %d\n", qv_tokenizer_vocab(tok), model.c.vocab);
        rc = 2;
        goto done;
    }
    qv_sha256_hex(g->image, g->image_len, r.model_sha);
    if ((st = read_file(r.text_path, &text, &text_len)) != QV_OK) { rc = fail_exit(st); goto done; }
    qv_sha256_hex(text, text_len, r.text_sha);
    if ((st = qv_tokenizer_encode(tok, text, text_len, &ids, &n_ids)) != QV_OK) { rc = fail_exit(st); goto done; }
    /* As llama.cpp: BOS first when the model asks for it, and BOS again at the
     * start of every chunk (qv_ppl_eval). */
    int bos = qv_tokenizer_add_bos(tok) ? qv_tokenizer_bos(tok) : -1;
    all = malloc(sizeof(int32_t) * (n_ids + 1));
    if (!all) { rc = fail_exit(qv_fail(QV_ERR_NOMEM, "no memory")); goto done; }
    size_t n_all = 0;
    if (bos >= 0) all[n_all++] = bos;
    memcpy(all + n_all, ids, sizeof(int32_t) * n_ids);
    n_all += n_ids;
    r.tokens = (int64_t)n_all;
    int64_t avail = (int64_t)n_all / ctx;
    if (avail < 1) {
        fprintf(stderr, "qvet ppl: the text has %zu tokens, fewer than one chunk of %lld\n", n_all, ctx);
        rc = 2;
        goto done;
    }
    r.chunks_done = (int)(chunks > 0 && chunks < avail ? chunks : avail);
    if (out_path) {
        r.out = fopen(out_path, "a");
        if (!r.out) { fprintf(stderr, "qvet ppl: cannot open '%s' for writing\n", out_path); rc = 2; goto done; }
        emit_run_line(r.out, argc, argv, r.backend, &gi);
    }
    printf("model %s (sha256 %s)\ntext %s (sha256 %s)\n%lld tokens, ctx %d, %d chunks, %d scored per chunk\n",
           r.model_path, r.model_sha, r.text_path, r.text_sha, (long long)r.tokens, r.ctx, r.chunks_done,
           r.ctx - 1 - r.ctx / 2);
    print_header();
    rc = evaluate(&r, &model, glob, backend, all, (int64_t)n_all, bos);
done:
    if (r.out && fclose(r.out) != 0) { fprintf(stderr, "qvet ppl: write error on '%s'\n", out_path); rc = 2; }
    free(all); free(ids); free(text);
    qv_llama_free(&model);
    qv_tokenizer_destroy(tok);
    qv_gguf_close(g);
    return rc;
}
