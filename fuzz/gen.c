/* gen.c: the campaign's case generator (campaign.h). A case is a pure function
 * of (seed, index): the variant, the shape (edge / random / real layer), the
 * probe, the scale regime, the g_idx permutation and the data all come from a
 * counter-based splitmix64 stream, so case J never depends on case J-1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/campaign.h"
#include "qvet/formats.h"
#include "qvet/spec.h"

/* ---- splitmix64 (Steele, Lea, Flood 2014): a counter-based generator whose
 * every output is a bijective mix of the counter, so streams seeded from
 * seed ^ f(index) are independent for practical purposes. ---- */

uint64_t qv_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull); /* the golden-ratio increment */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t qv_case_stream(uint64_t seed, int64_t index)
{
    /* An odd multiplier spreads consecutive indices over the whole 64-bit
     * space; one mixing step decorrelates seed and index. */
    uint64_t s = seed ^ ((uint64_t)index * 0xD1B54A32D192ED03ull);
    (void)qv_splitmix64(&s);
    return s;
}

double qv_rng_unit(uint64_t *state)
{
    return (double)(qv_splitmix64(state) >> 11) * 0x1p-53; /* 53 bits: every double in [0,1) grid */
}

uint64_t qv_rng_below(uint64_t *state, uint64_t n)
{
    if (n <= 1) return 0;
    /* Rejection of the top partial bucket removes modulo bias. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = qv_splitmix64(state);
    while (x >= limit);
    return x % n;
}

/* Log-uniform double in [lo, hi]. */
static double rng_logu(uint64_t *s, double lo, double hi)
{
    return exp(log(lo) + qv_rng_unit(s) * (log(hi) - log(lo)));
}

const char *qv_shape_class_name(qv_shape_class c)
{
    switch (c) {
    case QV_SHAPE_EDGE: return "edge";
    case QV_SHAPE_RANDOM: return "random";
    case QV_SHAPE_REAL: return "real";
    default: return "?";
    }
}

/* ---- backends ---- */

void qv_backend_init(qv_backend *b, qv_backend_kind kind)
{
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->repeat = kind == QV_BACKEND_CPU ? 1 : 2; /* a model is deterministic by construction */
    b->cap_mnk = qv_backend_default_cap(kind, 0);
    snprintf(b->name, sizeof b->name, "%s", kind == QV_BACKEND_GPU ? "gpu" : "cpu");
}

int64_t qv_backend_default_cap(qv_backend_kind kind, int suite)
{
    if (kind == QV_BACKEND_GPU || kind == QV_BACKEND_DEVICE_FN) return QV_GPU_CAP_MNK;
    return suite ? QV_CPU_CAP_CHECK : QV_CPU_CAP_MNK;
}

/* 1 when entry `name` of a plugin's list (a row name or a spec) means v. */
static int names_variant(const char *name, const qv_variant *v)
{
    if (!strcmp(name, v->name)) return 1;
    const qv_variant *s;
    return qv_is_spec(name) && qv_spec_parse(name, &s) == QV_OK && s == v;
}

int qv_backend_has(const qv_backend *b, const qv_variant *v)
{
    switch (b->kind) {
    case QV_BACKEND_CPU: return v->cpu_model;
    case QV_BACKEND_GPU: return v->gpu_kernel;
    case QV_BACKEND_HOST_FN:
    case QV_BACKEND_DEVICE_FN:
        for (int i = 0; i < b->n_only; i++)
            if (names_variant(b->only[i], v)) return 1;
        return 0;
    }
    return 0;
}

const char *qv_backend_launch_name(const qv_backend *b, const qv_variant *v)
{
    if (b->kind == QV_BACKEND_HOST_FN || b->kind == QV_BACKEND_DEVICE_FN)
        for (int i = 0; i < b->n_only; i++)
            if (names_variant(b->only[i], v)) return b->only[i];
    return v->name;
}

static void gen_add(qv_gen *gen, const qv_variant *v)
{
    for (int i = 0; i < gen->n_variants; i++)
        if (gen->variants[i] == v) return;
    QV_ASSERT(gen->n_variants < QV_GEN_MAX_VARIANTS, "raise QV_GEN_MAX_VARIANTS");
    gen->variants[gen->n_variants++] = v;
}

qv_status qv_gen_init(qv_gen *gen, const char *glob, const qv_backend *b)
{
    memset(gen, 0, sizeof *gen);
    gen->cap_mnk = b->cap_mnk;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (qv_variant_match(v, glob) && qv_backend_has(b, v)) gen_add(gen, v);
    }
    /* A plugin's specs: they are no registry row, so they come from its list. */
    if (b->kind == QV_BACKEND_HOST_FN || b->kind == QV_BACKEND_DEVICE_FN)
        for (int i = 0; i < b->n_only; i++) {
            const qv_variant *v;
            if (qv_is_spec(b->only[i]) && qv_spec_parse(b->only[i], &v) == QV_OK && qv_variant_match(v, glob))
                gen_add(gen, v);
        }
    if (!gen->n_variants) {
        /* rows that match but have no qvet kernel: say so, with what runs them */
        int no_kernel = 0;
        for (int i = 0; b->kind == QV_BACKEND_GPU && i < qv_registry_count(); i++)
            no_kernel += qv_variant_match(qv_registry_get(i), glob) && !qv_registry_get(i)->gpu_kernel;
        if (no_kernel)
            return qv_fail(QV_ERR_USAGE, "'%s' matches %d row%s without a qvet GPU kernel (gpu no in qvet list): run "
                           "%s with --cpu (the CPU model) or --plugin LIB.so (your kernel)", glob && *glob ? glob : "*",
                           no_kernel, no_kernel == 1 ? "" : "s", no_kernel == 1 ? "it" : "them");
        return qv_fail(QV_ERR_USAGE, "no variant matches '%s' on the %s backend (see qvet list)",
                       glob && *glob ? glob : "*", b->name);
    }
    return QV_OK;
}

qv_status qv_gen_init_list(qv_gen *gen, const qv_variant *const *vs, int n, const qv_backend *b)
{
    memset(gen, 0, sizeof *gen);
    gen->cap_mnk = b->cap_mnk;
    gen->listed = 1;
    if (n < 1) return qv_fail(QV_ERR_USAGE, "no spec given");
    if (n > QV_GEN_MAX_SPECS) return qv_fail(QV_ERR_USAGE, "%d specs; one campaign takes at most %d", n, QV_GEN_MAX_SPECS);
    for (int i = 0; i < n; i++) {
        if (!qv_backend_has(b, vs[i])) {
            if (b->kind == QV_BACKEND_GPU)
                return qv_fail(QV_ERR_USAGE, "%s has no qvet GPU kernel: run it with --cpu (the CPU model) or "
                               "--plugin LIB.so (your kernel)", vs[i]->name);
            if (b->kind == QV_BACKEND_CPU)
                return qv_fail(QV_ERR_USAGE, "%s has no CPU model", vs[i]->name);
            return qv_fail(QV_ERR_USAGE, "%s does not declare %s (qv_plugin_variant lists what it implements)",
                           b->name, vs[i]->name);
        }
        gen_add(gen, vs[i]);
    }
    return QV_OK;
}

/* ---- shapes ---- */

/* docs/design.md §5's M edge set: around powers of two and the 16-row mma tile. */
static const int64_t m_edges[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65,
                                  127, 128, 129, 255, 256, 257};
#define N_M_EDGES ((int)(sizeof m_edges / sizeof m_edges[0]))

/* Real linear layers (n = output features, k = input features), from the
 * models' published configs: Llama-2-7B (hidden 4096, MLP 11008, 32 heads),
 * Llama-3-8B (4096, 14336, 8 KV heads of 128), Llama-3-70B (8192, 28672, 8 KV
 * heads), Qwen2-7B (3584, 18944, 4 KV heads of 128). qkv and gate_up are the
 * fused projections inference engines run. */
static const struct real_layer {
    const char *name;
    int64_t n, k;
} real_layers[] = {
    {"llama2-7b.qkv", 12288, 4096},   {"llama2-7b.o", 4096, 4096},
    {"llama2-7b.gate_up", 22016, 4096}, {"llama2-7b.down", 4096, 11008},
    {"llama3-8b.qkv", 6144, 4096},    {"llama3-8b.o", 4096, 4096},
    {"llama3-8b.gate_up", 28672, 4096}, {"llama3-8b.down", 4096, 14336},
    {"llama3-70b.qkv", 10240, 8192},  {"llama3-70b.o", 8192, 8192},
    {"llama3-70b.gate_up", 57344, 8192}, {"llama3-70b.down", 8192, 28672},
    {"qwen2-7b.qkv", 4608, 3584},     {"qwen2-7b.o", 3584, 3584},
    {"qwen2-7b.gate_up", 37888, 3584}, {"qwen2-7b.down", 3584, 18944},
};
#define N_REAL ((int)(sizeof real_layers / sizeof real_layers[0]))

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The smallest legal K step of v: K must be a multiple of k_tile, of the
 * scales' group size g and of the zero points' (block scales need nothing:
 * the last block may be partial). */
static int64_t k_step(const qv_variant *v)
{
    int64_t s = v->k_tile > 0 ? v->k_tile : 1;
    if (v->g > 0) s = s / gcd64(s, v->g) * v->g;
    if (v->zero_point && v->zp_layout == QV_SCALE_GROUP && v->zp_g > 0) s = s / gcd64(s, v->zp_g) * v->zp_g;
    return s;
}

static int64_t n_step(const qv_variant *v) { return v->n_tile > 0 ? v->n_tile : 1; }

/* Largest multiple of step <= x, at least step. */
static int64_t snap_down(int64_t x, int64_t step)
{
    int64_t r = x / step * step;
    return r < step ? step : r;
}

/* Kernel tile edges docs/design.md §5 asks for: N on 64, 128, 256 or 512 and
 * K on 128, 256, 512 or 1024 (grouped rows: an odd number of groups),
 * snapped to the row's legal step or one step past it; else the smallest
 * step or twice it. */
static int64_t edge_n(const qv_variant *v, uint64_t *s)
{
    static const int64_t bases[] = {64, 128, 256, 512};
    int64_t st = n_step(v);
    uint64_t r = qv_rng_below(s, 10);
    if (r < 2) return st * (int64_t)(1 + r); /* the smallest legal N and twice it */
    int64_t base = snap_down(bases[qv_rng_below(s, 4)], st);
    return (r & 1) ? base + st : base;
}

static int64_t edge_k(const qv_variant *v, uint64_t *s)
{
    int64_t st = k_step(v);
    if (v->g > 0) {
        /* K/g odd: one group, three, five... exposes a group index computed from
         * the wrong k and an unpaired last group. */
#ifdef QV_MUTANT_orc_gen_fuzz_one_group_never
        /* Oracle mutant: one group (K = g) never drawn. */
        static const int64_t odd[] = {3, 3, 5, 7, 9};
#else
        static const int64_t odd[] = {1, 3, 5, 7, 9};
#endif
        return st * odd[qv_rng_below(s, 5)];
    }
    static const int64_t bases[] = {128, 256, 512, 1024};
    uint64_t r = qv_rng_below(s, 10);
    if (r < 2) return st * (int64_t)(1 + r);
    int64_t base = snap_down(bases[qv_rng_below(s, 4)], st);
    return (r & 1) ? base + st : base;
}

/* Applies the size cap: halves the dimensions in `order` (each snapped to its
 * step) until m*n*k <= cap or nothing can shrink. */
static void cap_shape(const qv_variant *v, int64_t cap, const char *order, int64_t *m, int64_t *n,
                      int64_t *k)
{
    if (cap <= 0) return;
    int64_t ns = n_step(v), ks = k_step(v);
    while ((double)*m * (double)*n * (double)*k > (double)cap) {
        int moved = 0;
        for (const char *o = order; *o && !moved; o++) {
            if (*o == 'm' && *m > 1) {
                int64_t want = cap / (*n * *k);
                *m = want >= 1 && want < *m ? want : (*m + 1) / 2;
                if (*m < 1) *m = 1;
                moved = 1;
            } else if (*o == 'n' && *n > ns) {
                *n = snap_down(*n / 2, ns);
                moved = 1;
            } else if (*o == 'k' && *k > ks) {
                *k = snap_down(*k / 2, ks);
                moved = 1;
            }
        }
        if (!moved) break;
    }
}

/* Makes the shape legal for the row's int32 overflow proof by shrinking K. */
static void legalize(const qv_variant *v, int64_t m, int64_t n, int64_t *k)
{
    while (*k > k_step(v) && qv_variant_check_shape(v, m, n, *k) != QV_OK)
        *k = snap_down(*k / 2, k_step(v));
}

static void draw_shape(const qv_variant *v, int64_t cap, uint64_t *s, qv_case *c)
{
    double u = qv_rng_unit(s);
    int64_t m, n, k;
    const char *order;
    c->layer[0] = '\0';
    if (u < 0.5) {
        c->shape_class = QV_SHAPE_EDGE;
        m = m_edges[qv_rng_below(s, N_M_EDGES)];
        n = edge_n(v, s);
        k = edge_k(v, s);
        order = "nkm"; /* keep the M edge; N, K edges are kept while they fit */
    } else if (u < 0.8) {
        c->shape_class = QV_SHAPE_RANDOM;
        m = (int64_t)floor(rng_logu(s, 1, 4609)); /* "up to 4096+": a little past 4096 */
        n = snap_down((int64_t)rng_logu(s, (double)n_step(v), 16384), n_step(v));
        k = snap_down((int64_t)rng_logu(s, (double)k_step(v), 16384), k_step(v));
        order = "mnk";
    } else {
        c->shape_class = QV_SHAPE_REAL;
        const struct real_layer *L = &real_layers[qv_rng_below(s, N_REAL)];
        snprintf(c->layer, sizeof c->layer, "%s", L->name);
        /* Decode (M = 1..257 edges) or prefill (log-uniform up to 4096). */
        m = qv_rng_below(s, 2) ? m_edges[qv_rng_below(s, N_M_EDGES)]
                               : (int64_t)floor(rng_logu(s, 1, 4097));
        n = snap_down(L->n, n_step(v));
        k = snap_down(L->k, k_step(v));
        order = "nm"; /* the real K is what exercises accumulation: keep it */
    }
    legalize(v, m, n, &k);
    c->m0 = m;
    c->n0 = n;
    c->k0 = k;
    cap_shape(v, cap, order, &m, &n, &k);
    if ((double)m * (double)n * (double)k > (double)cap && cap > 0)
        cap_shape(v, cap, "mnk", &m, &n, &k);
    c->m = m;
    c->n = n;
    c->k = k;
    c->capped = (m != c->m0 || n != c->n0 || k != c->k0);
}


/* ---- probes ---- */

/* The precision witnesses of probe.h that apply to v at this shape, in
 * probe.h order, into out[]; returns how many. */
static int witnesses(const qv_variant *v, int64_t m, int64_t n, int64_t k, qv_probe_kind out[QV_PROBE_COUNT])
{
    int c = 0;
    for (int w = QV_PROBE_WITNESS_FP8_PROMOTE; w < QV_PROBE_COUNT; w++)
        if (ref_probe_applies(v, (qv_probe_kind)w, m, n, k)) out[c++] = (qv_probe_kind)w;
    return c;
}

void qv_gen_case(const qv_gen *gen, uint64_t seed, int64_t index, qv_case *c)
{
    memset(c, 0, sizeof *c);
    uint64_t s = qv_case_stream(seed, index);
    c->seed = seed;
    c->index = index;
    c->v = gen->variants[qv_rng_below(&s, (uint64_t)gen->n_variants)];
    draw_shape(c->v, gen->cap_mnk, &s, c);

    /* Probes: mostly random data under a regime; exact and one-hot probes
     * catch layout bugs bit for bit; witnesses catch cheaper arithmetic. */
    qv_probe_kind w[QV_PROBE_COUNT];
    int nw = witnesses(c->v, c->m, c->n, c->k, w);
    double u = qv_rng_unit(&s);
    uint64_t wi = qv_rng_below(&s, nw > 0 ? (uint64_t)nw : 1);
    if (u < 0.20) c->probe = QV_PROBE_EXACT;
    else if (u < 0.30) c->probe = QV_PROBE_ONEHOT;
#ifdef QV_MUTANT_orc_gen_fuzz_witnesses_never
    /* Oracle mutant: the fuzz never draws a witness. */
    else if (0) c->probe = w[wi];
#else
    else if (u < 0.45 && nw > 0) c->probe = w[wi];
#endif
    else c->probe = QV_PROBE_RANDOM;
    if (!ref_probe_applies(c->v, c->probe, c->m, c->n, c->k)) c->probe = QV_PROBE_RANDOM;

    /* Regimes: half log-uniform, the four extremes share the other half. */
    if (qv_rng_unit(&s) < 0.5) c->regime = QV_REGIME_LOGUNIFORM;
    else c->regime = (qv_regime)(1 + qv_rng_below(&s, QV_REGIME_COUNT - 1));
    if (c->probe != QV_PROBE_RANDOM) c->regime = QV_REGIME_LOGUNIFORM;
    c->data_seed = qv_splitmix64(&s);
}

/* ---- the fixed suite of `qvet check` ----
 * Per variant, every case of these blocks, in this order:
 *   A. the 19 M edges, each with an edge N and K (random probe, log-uniform);
 *   B. N edges x K edges at M = 17 (one past the 16-row mma tile);
 *   C. exact probes at M = 1, 16, 65 over three (N, K) pairs;
 *   D. one-hot probes at M = 1, 8, 64;
 *   E. every extreme regime on two shapes (M = 7 and 33);
 *   F. every precision witness that applies to the variant, at M = 16 and
 *      K = 1024 (past several fp8 promotion intervals, docs/design.md §3's example);
 *   G. one large-K slice of a real layer (K = 4096, N = 2 N tiles, M = 16):
 *      the representative for large K, with N small so that the CPU models
 *      stay fast (`qvet fuzz` runs whole real layers on the GPU).
 * Under a CPU cap, shapes above it are reduced N first, then K, then M. */

#define SUITE_A N_M_EDGES
#define SUITE_NE 5 /* N edges in block B */
#define SUITE_KE 4 /* K edges in block B */
#define SUITE_B (SUITE_NE * SUITE_KE)
#define SUITE_C 9
#define SUITE_D 3
#define SUITE_E (2 * (QV_REGIME_COUNT - 1))

static void suite_n_edges(const qv_variant *v, int64_t out[SUITE_NE])
{
    int64_t st = n_step(v);
    out[0] = st;
    out[1] = snap_down(128, st);
    out[2] = snap_down(128, st) + st;
    out[3] = snap_down(256, st);
    out[4] = snap_down(256, st) + st;
}

static void suite_k_edges(const qv_variant *v, int64_t out[SUITE_KE])
{
    int64_t st = k_step(v);
    if (v->g > 0) {
        out[0] = st;
        out[1] = 3 * st;
        out[2] = 5 * st;
        out[3] = 2 * st;
        return;
    }
    out[0] = st;
    out[1] = snap_down(128, st);
    out[2] = snap_down(128, st) + st;
    out[3] = snap_down(512, st) + st;
}

/* The shape of block F (witnesses), after the cap. */
static void witness_shape(const qv_variant *v, int64_t cap, int64_t *m, int64_t *n, int64_t *k)
{
    *m = 16;
    *n = 2 * n_step(v);
    *k = snap_down(1024, k_step(v));
    legalize(v, *m, *n, k);
    cap_shape(v, cap, "nmk", m, n, k);
}

static int suite_witnesses(const qv_variant *v, int64_t cap, qv_probe_kind out[QV_PROBE_COUNT])
{
    int64_t m, n, k;
    witness_shape(v, cap, &m, &n, &k);
    return witnesses(v, m, n, k, out);
}

int qv_suite_count(const qv_variant *v, int64_t cap_mnk)
{
    qv_probe_kind w[QV_PROBE_COUNT];
    return SUITE_A + SUITE_B + SUITE_C + SUITE_D + SUITE_E + suite_witnesses(v, cap_mnk, w) + 1;
}

void qv_suite_case(const qv_variant *v, int64_t cap_mnk, uint64_t seed, int j, qv_case *c)
{
    memset(c, 0, sizeof *c);
    c->seed = seed;
    c->index = j;
    c->suite = 1;
    c->v = v;
    c->shape_class = QV_SHAPE_EDGE;
    c->probe = QV_PROBE_RANDOM;
    c->regime = QV_REGIME_LOGUNIFORM;
    int64_t ne[SUITE_NE], ke[SUITE_KE];
    suite_n_edges(v, ne);
    suite_k_edges(v, ke);
    qv_probe_kind w[QV_PROBE_COUNT];
#ifdef QV_MUTANT_orc_gen_suite_witnesses_dropped
    /* Oracle mutant: block F left empty (its cases become block G's). */
    int nw = 0;
    (void)suite_witnesses;
#else
    int nw = suite_witnesses(v, cap_mnk, w);
#endif
    int64_t m = 16, n = ne[0], k = ke[0];
    int r = j;
    if (r < SUITE_A) {
        m = m_edges[r];
        n = ne[r % SUITE_NE];
        k = ke[r % SUITE_KE];
    } else if ((r -= SUITE_A) < SUITE_B) {
        m = 17;
        n = ne[r / SUITE_KE];
        k = ke[r % SUITE_KE];
    } else if ((r -= SUITE_B) < SUITE_C) {
        static const int64_t cm[] = {1, 16, 65};
        c->probe = QV_PROBE_EXACT;
        m = cm[r / 3];
        n = ne[(r % 3) * 2];
        k = ke[r % 3];
    } else if ((r -= SUITE_C) < SUITE_D) {
        static const int64_t dm[] = {1, 8, 64};
        c->probe = QV_PROBE_ONEHOT;
        m = dm[r];
        n = ne[r + 1];
        k = ke[r + 1];
    } else if ((r -= SUITE_D) < SUITE_E) {
        c->regime = (qv_regime)(1 + r / 2);
        m = r % 2 ? 33 : 7;
        n = ne[r % 2 ? 2 : 1];
        k = ke[r % 2 ? 2 : 1];
    } else if ((r -= SUITE_E) < nw) {
        c->probe = w[r];
        witness_shape(v, cap_mnk, &m, &n, &k);
    } else {
        c->shape_class = QV_SHAPE_REAL;
        snprintf(c->layer, sizeof c->layer, "%s", "llama2-7b.o");
        m = 16;
        n = 2 * n_step(v);
        k = snap_down(4096, k_step(v));
    }
    legalize(v, m, n, &k);
    c->m0 = m;
    c->n0 = n;
    c->k0 = k;
    cap_shape(v, cap_mnk, "nkm", &m, &n, &k);
    c->m = m;
    c->n = n;
    c->k = k;
    c->capped = (m != c->m0 || n != c->n0 || k != c->k0);
    if (!ref_probe_applies(v, c->probe, m, n, k)) c->probe = QV_PROBE_RANDOM;
    /* The data seed mixes the variant's registry position (a spec: a hash of
     * its canonical text), so two variants' suites draw different data under
     * one seed. */
    int vi = -1;
    for (int i = 0; i < qv_registry_count(); i++)
        if (qv_registry_get(i) == v) vi = i;
    uint64_t mix = vi >= 0 ? (uint64_t)(vi + 1) << 40 : qv_fnv1a64(v->name, strlen(v->name));
    uint64_t s = qv_case_stream(seed ^ mix, j);
    c->data_seed = qv_splitmix64(&s);
}

qv_status qv_case_build(const qv_case *c, qv_problem *p)
{
    QV_TRY(qv_problem_create(p, c->v, c->m, c->n, c->k));
    qv_status st = ref_probe_fill(p, c->probe, c->regime, c->data_seed);
    if (st != QV_OK) qv_problem_destroy(p);
    return st;
}
