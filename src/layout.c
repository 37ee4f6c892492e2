/* layout.c: the packers of layout.h. Each Marlin-family layout is built the
 * way the published packers build it (docs/design.md §7): tile K x N into 16x16
 * tiles, gather every 1024-value chunk of a tiled row through a table, then
 * pack 8 nibbles or 4 bytes per int32, lowest first. The tables are built here
 * from the recipe; reference/unpack.c decodes the result from the mma fragment
 * definition instead, so a wrong table cannot cancel itself out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/array.h"
#include "qvet/layout.h"

/* One 16x64 block of a tiled row: four 16x16 tiles of 256 values each. */
#define CHUNK 1024
/* Scale permutation widths: scale_perm covers 64 columns, scale_perm_single 32. */
#define SP_GROUP 64
#define SP_SINGLE 32

void qv_scale_perm(int perm[64])
{
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) perm[8 * i + j] = i + 8 * j;
}

void qv_scale_perm_single(int perm[32])
{
    static const int offs[8] = {0, 1, 8, 9, 16, 17, 24, 25};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) perm[8 * i + j] = 2 * i + offs[j];
}

/* The gather table of one 1024-value chunk (docs/design.md §7). For lane i of a
 * warp, col = i/4; for block 0 and 1 (the two n8 halves of a 16x16 tile) and
 * the lane's four rows, the entry is 16*row + col + 8*block; those 8 entries
 * repeat for the four tiles of the chunk (offset 256*j). Then every group of
 * `ilen` entries is reordered by `interleave`. `int8_rows` selects QQQ's row
 * set {4(i%4)+0..3} instead of Marlin's {2(i%4), 2(i%4)+1, 2(i%4)+8, 2(i%4)+9}. */
static void build_perm(int int8_rows, const int *interleave, int ilen, int perm[CHUNK])
{
    int pre[CHUNK];
    int idx = 0;
    for (int i = 0; i < 32; i++) {
        int col = i / 4;
        int rows[4];
        for (int r = 0; r < 4; r++)
            rows[r] = int8_rows ? 4 * (i % 4) + r : 2 * (i % 4) + (r & 1) + 8 * (r >> 1);
        for (int j = 0; j < 4; j++)
            for (int block = 0; block < 2; block++)
                for (int r = 0; r < 4; r++) pre[idx++] = 16 * rows[r] + col + 8 * block + 256 * j;
    }
    for (int grp = 0; grp < CHUNK / ilen; grp++)
        for (int t = 0; t < ilen; t++) perm[grp * ilen + t] = pre[grp * ilen + interleave[t]];
}

static const int interleave_w4[8] = {0, 2, 4, 6, 1, 3, 5, 7};
static const int interleave_qqq_ch[8] = {4, 0, 5, 1, 6, 2, 7, 3};
static const int interleave_w8[4] = {0, 2, 1, 3};

/* Bytes of one scale element as the problem stores it. */
static size_t scale_bytes(qv_fmt sfmt, qv_scale_layout sl)
{
    if (sl == QV_SCALE_BLOCK) return sizeof(float);
    switch (sfmt) {
    case QV_FMT_F16:
    case QV_FMT_BF16: return 2;
    case QV_FMT_F32: return 4;
    case QV_FMT_E8M0:
    case QV_FMT_UE4M3: return 1;
    default: return 0;
    }
}

int qv_layout_is_fp4(qv_layout l) { return l == QV_LAYOUT_MARLIN_FP4_MX || l == QV_LAYOUT_MARLIN_FP4_NV; }

static int is_marlin_family(qv_layout l)
{
    return l == QV_LAYOUT_MARLIN_W4 || l == QV_LAYOUT_MARLIN_W4_ZP || l == QV_LAYOUT_MARLIN_W8 ||
           l == QV_LAYOUT_MARLIN_FP8 || l == QV_LAYOUT_QQQ_W4_CHANNEL || l == QV_LAYOUT_QQQ_W4_GROUP ||
           qv_layout_is_fp4(l);
}

/* The weight code format each layout stores. */
static qv_fmt layout_wfmt(qv_layout l)
{
    if (qv_layout_is_fp4(l)) return QV_FMT_E2M1;
    switch (l) {
    case QV_LAYOUT_MARLIN_W4:
    case QV_LAYOUT_MARLIN_W4_ZP:
    case QV_LAYOUT_QQQ_W4_GROUP: return QV_FMT_U4;
    case QV_LAYOUT_MARLIN_W8: return QV_FMT_U8;
    case QV_LAYOUT_MARLIN_FP8: return QV_FMT_E4M3;
    case QV_LAYOUT_QQQ_W4_CHANNEL: return QV_FMT_I4;
    default: return QV_FMT_NONE;
    }
}

static int64_t scale_rows(const qv_problem *p)
{
    switch (p->v->scale_layout) {
    case QV_SCALE_NONE: return 0;
    case QV_SCALE_TENSOR:
    case QV_SCALE_CHANNEL: return 1;
    case QV_SCALE_GROUP:
    case QV_SCALE_GROUP_CHANNEL: return p->k / p->g;
    case QV_SCALE_BLOCK: return (p->k + 127) / 128; /* 128: the block edge of the layout */
    }
    return 0;
}

static int64_t scale_cols(const qv_problem *p)
{
    switch (p->v->scale_layout) {
    case QV_SCALE_NONE: return 0;
    case QV_SCALE_TENSOR: return 1;
    case QV_SCALE_BLOCK: return (p->n + 127) / 128;
    default: return p->n;
    }
}

/* ---- Marlin FP4: the host-side preparation of vLLM's marlin_utils_fp4.py ---- */

/* The power of two the kernel's fp4 dequant leaves out of every weight: it
 * moves the e2m1 bits into the low exponent bits of an f16 (bf16), which
 * reads w * 2^-(2^4 - 2^1) = w * 2^-14 (w * 2^-(2^7 - 2^1) = w * 2^-126). The
 * NVFP4 global scale carries it back (nvfp4_marlin_process_global_scale). */
static int fp4_weight_bias(qv_fmt afmt) { return afmt == QV_FMT_BF16 ? 126 : 14; }

/* The power of two folded into NVFP4 scales (qv_packed.s_pow2): 7, so that
 * the f16 form of every ue4m3 value has a normal exponent the S0E5M3 byte
 * holds; with bf16 activations, plus the smallest j >= 0 that lifts the
 * smallest nonzero scale to s * 2^(7+j) >= 2 (_nvfp4_compute_scale_factor):
 * the bf16 kernel turns the byte's top bit into bf16's top exponent bit, so a
 * byte below 0x80 would read 2^-112 times its value. p->scales holds (K/16, N)
 * ue4m3 codes already checked to be finite and non-negative. */
static int fp4_nv_pow2(const qv_problem *p)
{
    int pow2 = 7;
#ifdef QV_MUTANT_fp4_nv_scale_underflow
    /* Mutant (class 21, vLLM #34577): no lift for bf16, as before the fix:
     * scales below 2^-6 (global scale 1 checkpoints) read as ~0 in bf16. */
    return pow2;
#endif
    if (p->v->afmt != QV_FMT_BF16) return pow2; /* vLLM never lifts for f16 */
    const uint8_t *sc = p->scales;
    double lo = INFINITY;
    for (int64_t i = 0; i < p->k / p->g * p->n; i++)
        if (sc[i] != 0 && qv_decode(QV_FMT_UE4M3, sc[i]) < lo) lo = qv_decode(QV_FMT_UE4M3, sc[i]);
    while (isfinite(lo) && ldexp(lo, pow2) < 2.0) pow2++;
    return pow2;
}

/* The S0E5M3 byte of ue4m3 code c at power pow2: bits 14..7 of the f16 code
 * of s * 2^pow2 (vLLM: (s * 2^7).view(int16) << 1, high byte). s * 2^pow2 has
 * at most 4 significant bits and is at least 2^-2, so the f16 code is normal
 * with its low 7 bits zero; the caller has refused values of 2^16 and more. */
static uint8_t nv_scale_byte(uint8_t c, int pow2)
{
    uint16_t h = qv_f64_to_f16(ldexp(qv_decode(QV_FMT_UE4M3, c), pow2));
    QV_ASSERT((h & 0x7F) == 0 && (h & 0x7C00) != 0x7C00, "an S0E5M3 byte holds the f16 form exactly");
    return (uint8_t)(h >> 7);
}

/* NVFP4's global scale as the kernel reads it: g * 2^(bias - 7) / 2^(pow2 - 7),
 * two f32 operations as vLLM does them (nvfp4_marlin_process_global_scale,
 * then the division by the lift). *ok is 0 when either step overflows, lands
 * in f32's subnormal range (where a reader cannot tell whether bits were
 * lost) or no longer holds g exactly. */
static float nv_global(float g, int pow2, qv_fmt afmt, int *ok)
{
    float t = ldexpf(g, fp4_weight_bias(afmt) - 7);
    float G = ldexpf(t, -(pow2 - 7));
    *ok = isfinite(t) && isfinite(G) && fpclassify(t) != FP_SUBNORMAL && fpclassify(G) != FP_SUBNORMAL &&
          ldexp(G, pow2 - fp4_weight_bias(afmt)) == (double)g;
    return G;
}

/* The Marlin FP4 kernel's fixed arithmetic (marlin_template.h): e2m1 codes,
 * 8-bit group scales of one fixed group (group_blocks 2 for e8m0, 1 for
 * ue4m3), the fp32 global scale only with ue4m3, f16 or bf16 activations, no
 * zero points and no act_order (static_assert group_blocks != 0). */
static qv_status check_fp4_row(const qv_variant *v, const char *ln)
{
    const int nv = v->layout == QV_LAYOUT_MARLIN_FP4_NV;
    const qv_fmt sfmt = nv ? QV_FMT_UE4M3 : QV_FMT_E8M0;
    const int g = nv ? 16 : 32;
    if (v->scale_layout != QV_SCALE_GROUP || v->sfmt != sfmt)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s needs %s group scales (got %s %s)", ln, qv_fmt_get(sfmt)->name,
                       qv_scale_layout_name(v->scale_layout), qv_fmt_get(v->sfmt)->name);
    if (v->g != g)
        return qv_fail(QV_ERR_SHAPE, "%s: group size g=%d; the kernel reads one %s scale per %d rows", ln, v->g,
                       qv_fmt_get(sfmt)->name, g);
    if (nv ? (v->s2fmt != QV_FMT_F32 || v->s2_layout != QV_SCALE_TENSOR) : v->s2_layout != QV_SCALE_NONE)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: %s", ln,
                       nv ? "NVFP4 needs the f32 global scale (ws2=f32/t)" : "MXFP4 has no second-level scale");
    if (v->afmt != QV_FMT_F16 && v->afmt != QV_FMT_BF16)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: activations must be f16 or bf16, not %s", ln,
                       qv_fmt_get(v->afmt)->name);
    if (v->zero_point || v->act_order)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s has no place for zero points or act_order", ln);
    if (v->bias_fmt != QV_FMT_NONE && v->bias_fmt != QV_FMT_F16 && v->bias_fmt != QV_FMT_BF16 &&
        v->bias_fmt != QV_FMT_F32)
        return qv_fail(QV_ERR_DTYPE, "%s: bias must be f16, bf16 or f32, not %s", ln, qv_fmt_get(v->bias_fmt)->name);
    return QV_OK;
}

/* The values an FP4 preparation cannot carry: MX scale codes the kernel
 * misreads, NV scale codes that are not finite non-negative ue4m3 values or
 * whose lifted form overflows the S0E5M3 byte, a global scale the rewrite
 * loses, and a bias its format cannot hold. */
static qv_status check_fp4_values(const qv_problem *p, const char *ln)
{
    const qv_variant *v = p->v;
    const int nv = v->layout == QV_LAYOUT_MARLIN_FP4_NV;
    const int64_t n = p->n, ns = p->k / p->g * n;
    const uint8_t *sc = p->scales;
    QV_ASSERT(!nv || p->scales2 != NULL, "NVFP4 needs the problem's global scale (scales2)");
    QV_ASSERT(v->bias_fmt == QV_FMT_NONE || p->bias != NULL, "a bias row needs the problem's bias");
    for (int64_t i = 0; i < ns; i++) {
        if (!nv && sc[i] == 0)
            return qv_fail(QV_ERR_RANGE, "%s: e8m0 scale [%lld][%lld] = 0 (2^-127): the kernel widens the code into "
                           "a bf16 exponent field, where 0 reads as zero", ln, (long long)(i / n), (long long)(i % n));
        if (!nv && sc[i] == 0xFF)
            return qv_fail(QV_ERR_RANGE, "%s: e8m0 scale [%lld][%lld] = 0xFF (NaN): the kernel reads it as +Inf", ln,
                           (long long)(i / n), (long long)(i % n));
        if (nv && sc[i] > 0x7E)
            return qv_fail(QV_ERR_RANGE, "%s: ue4m3 scale [%lld][%lld] = 0x%02X is not a finite non-negative ue4m3 code "
                           "(0x7F is NaN, the sign bit must be 0)", ln, (long long)(i / n), (long long)(i % n), sc[i]);
    }
    if (nv) {
        const int pow2 = fp4_nv_pow2(p);
        for (int64_t i = 0; i < ns; i++) {
            double x = ldexp(qv_decode(QV_FMT_UE4M3, sc[i]), pow2);
            if (x >= 65536.0) /* 2^16: the f16 form is Inf, the S0E5M3 byte has no such value */
                return qv_fail(QV_ERR_RANGE, "%s: ue4m3 scale [%lld][%lld] = %g times 2^%d = %g overflows the kernel's "
                               "S0E5M3 byte (f16 exponent, at most 61440)%s", ln, (long long)(i / n),
                               (long long)(i % n), qv_decode(QV_FMT_UE4M3, sc[i]), pow2, x,
                               pow2 > 7 ? "; bf16 lifts every scale until the smallest nonzero one is >= 2^-6, so "
                                          "these scales span too many binades" : "");
        }
        int ok;
        float g = p->scales2[0];
        float G = nv_global(g, pow2, v->afmt, &ok);
        if (!isfinite(g) || !ok)
            return qv_fail(QV_ERR_RANGE, "%s: global scale %g becomes %g times 2^%d = %g in f32 and cannot be read back "
                           "exactly (overflow or lost bits)", ln, (double)g, (double)g,
                           fp4_weight_bias(v->afmt) - pow2, (double)G);
    }
    if (v->bias_fmt != QV_FMT_NONE)
        for (int64_t j = 0; j < n; j++) {
            double x = p->bias[j];
            if (!(qv_decode(v->bias_fmt, qv_encode(v->bias_fmt, x, QV_SAT_NONE)) == x))
                return qv_fail(QV_ERR_RANGE, "%s: bias[%lld] = %g is not a %s value", ln, (long long)j, x,
                               qv_fmt_get(v->bias_fmt)->name);
        }
    return QV_OK;
}

/* Refuses anything the layout cannot hold, before a byte is written. */
static qv_status check_problem(const qv_problem *p)
{
    const qv_variant *v = p->v;
    qv_layout l = v->layout;
    const char *ln = qv_layout_name(l);
    if (l < 0 || l >= QV_LAYOUT_COUNT)
        return qv_fail(QV_ERR_UNSUPPORTED, "unknown packed layout %d", (int)l);
    if (l == QV_LAYOUT_LOGICAL)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: a spec has no packed layout; its kernel reads the logical arrays "
                       "(plugin.h)", v->name);
    if (p->k < 1 || p->n < 1)
        return qv_fail(QV_ERR_SHAPE, "%s: K=%lld, N=%lld: both must be >= 1", ln, (long long)p->k,
                       (long long)p->n);
    /* Every index of the packed buffers must fit the kernels' int arithmetic. */
    if (p->k > ((int64_t)1 << 30) || p->n > ((int64_t)1 << 30))
        return qv_fail(QV_ERR_SHAPE, "%s: dimensions above 2^30 are not supported", ln);
    int bits = qv_fmt_code_bits(v->wfmt);
    if (is_marlin_family(l)) {
        if (v->wfmt != layout_wfmt(l))
            return qv_fail(QV_ERR_DTYPE, "%s stores %s weight codes, not %s", ln,
                           qv_fmt_get(layout_wfmt(l))->name, qv_fmt_get(v->wfmt)->name);
        /* 16: the K edge of an mma tile; 64: four 16-wide tiles per 1024-value chunk. */
        if (p->k % 16)
            return qv_fail(QV_ERR_SHAPE, "%s: K=%lld is not a multiple of 16 (the tile's K edge)", ln,
                           (long long)p->k);
        if (p->n % 64)
            return qv_fail(QV_ERR_SHAPE, "%s: N=%lld is not a multiple of 64 (the layout's N tile)", ln,
                           (long long)p->n);
    } else {
        if (!bits) return qv_fail(QV_ERR_DTYPE, "%s: weight format %s has no plain packing", ln,
                                  qv_fmt_get(v->wfmt)->name);
        int per = 32 / bits;
        if (p->k % per)
            return qv_fail(QV_ERR_SHAPE, "%s: K=%lld is not a multiple of %d (%d-bit codes, %d per int32)", ln,
                           (long long)p->k, per, bits, per);
        if (v->zero_point) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no place for zero points", ln);
    }

    qv_scale_layout sl = v->scale_layout;
    int grouped = sl == QV_SCALE_GROUP || sl == QV_SCALE_GROUP_CHANNEL;
    if (qv_layout_is_fp4(l)) QV_TRY(check_fp4_row(v, ln));
    if (grouped) {
        if (p->g < 1) return qv_fail(QV_ERR_SHAPE, "%s: group size g=%d must be >= 1", ln, p->g);
        if (is_marlin_family(l) && p->g % 16)
            return qv_fail(QV_ERR_SHAPE, "%s: group size g=%d is not a multiple of 16 (a group is whole tiles)",
                           ln, p->g);
        if (p->k % p->g)
            return qv_fail(QV_ERR_SHAPE, "%s: group size g=%d does not divide K=%lld (the last scale group would be "
                           "partial)", ln, p->g, (long long)p->k);
    }
    /* The FP4 layouts were checked by check_fp4_row; the switch covers the others. */
    if (!qv_layout_is_fp4(l)) switch (l) {
    case QV_LAYOUT_MARLIN_W4:
    case QV_LAYOUT_MARLIN_W4_ZP:
    case QV_LAYOUT_MARLIN_W8:
    case QV_LAYOUT_MARLIN_FP8:
        if (sl != QV_SCALE_TENSOR && sl != QV_SCALE_CHANNEL && sl != QV_SCALE_GROUP)
            return qv_fail(QV_ERR_UNSUPPORTED, "%s: scale layout %s is not one Marlin reads", ln,
                           qv_scale_layout_name(sl));
        if (v->sfmt != QV_FMT_F16 && v->sfmt != QV_FMT_BF16 && v->sfmt != QV_FMT_F32)
            return qv_fail(QV_ERR_DTYPE, "%s: scales must be f16, bf16 or f32, not %s", ln,
                           qv_fmt_get(v->sfmt)->name);
        if (l == QV_LAYOUT_MARLIN_W4_ZP && (!v->zero_point || sl != QV_SCALE_GROUP))
            return qv_fail(QV_ERR_UNSUPPORTED, "%s needs grouped scales and zero points", ln);
        if (l != QV_LAYOUT_MARLIN_W4_ZP && v->zero_point)
            return qv_fail(QV_ERR_UNSUPPORTED, "%s has no place for zero points (use marlin-w4-zp)", ln);
        break;
    case QV_LAYOUT_QQQ_W4_CHANNEL:
        if (sl != QV_SCALE_CHANNEL || v->sfmt != QV_FMT_F32)
            return qv_fail(QV_ERR_DTYPE, "%s needs channel scales in f32 (got %s %s)", ln,
                           qv_scale_layout_name(sl), qv_fmt_get(v->sfmt)->name);
        break;
    case QV_LAYOUT_QQQ_W4_GROUP:
        if (sl != QV_SCALE_GROUP_CHANNEL || v->sfmt != QV_FMT_F16)
            return qv_fail(QV_ERR_DTYPE, "%s needs f16 group scales plus f32 channel scales (got %s %s)", ln,
                           qv_scale_layout_name(sl), qv_fmt_get(v->sfmt)->name);
        break;
    default:
        if (sl != QV_SCALE_NONE && !scale_bytes(v->sfmt, sl))
            return qv_fail(QV_ERR_DTYPE, "%s: scales must be f16, bf16 or f32, not %s", ln, qv_fmt_get(v->sfmt)->name);
        break;
    }
    if (v->zero_point && l != QV_LAYOUT_MARLIN_W4_ZP)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s has no place for zero points", ln);
    if (v->act_order && !grouped)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: act_order needs grouped scales", ln);

    QV_ASSERT(p->q != NULL, "a problem to pack needs its q buffer");
    QV_ASSERT(sl == QV_SCALE_NONE || p->scales != NULL, "a problem to pack needs its scales buffer");
    QV_ASSERT(sl != QV_SCALE_GROUP_CHANNEL || p->scales2 != NULL, "group+channel needs scales2");
    QV_ASSERT(!v->zero_point || p->zeros != NULL, "zero-point variants need the zeros buffer");
    QV_ASSERT(!v->act_order || p->g_idx != NULL, "act_order variants need g_idx");

    int64_t kn = p->k * p->n;
    if (v->wfmt == QV_FMT_U4 || v->wfmt == QV_FMT_UINT4 || v->wfmt == QV_FMT_E2M1) {
        const uint8_t *q = p->q;
        for (int64_t i = 0; i < kn; i++)
            if (q[i] > 15)
                return qv_fail(QV_ERR_RANGE, "%s: q[%lld][%lld] = %d is outside the 4-bit code range 0..15", ln,
                               (long long)(i / p->n), (long long)(i % p->n), q[i]);
    } else if (v->wfmt == QV_FMT_I4) {
        const int8_t *q = p->q;
        for (int64_t i = 0; i < kn; i++)
            if (q[i] < -8 || q[i] > 7)
                return qv_fail(QV_ERR_RANGE, "%s: q[%lld][%lld] = %d is outside the int4 range -8..7", ln,
                               (long long)(i / p->n), (long long)(i % p->n), q[i]);
    }
    if (v->zero_point) {
        int64_t nz = p->k / p->g * p->n;
        for (int64_t i = 0; i < nz; i++)
            if (p->zeros[i] > 15)
                return qv_fail(QV_ERR_RANGE, "%s: zero point [%lld][%lld] = %d is outside 0..15", ln,
                               (long long)(i / p->n), (long long)(i % p->n), p->zeros[i]);
    }
    if (v->act_order) {
        int64_t groups = p->k / p->g;
        for (int64_t i = 0; i < p->k; i++)
            if (p->g_idx[i] < 0 || p->g_idx[i] >= groups)
                return qv_fail(QV_ERR_RANGE, "%s: g_idx[%lld] = %d is outside [0, %lld)", ln, (long long)i,
                               p->g_idx[i], (long long)groups);
    }
    if (qv_layout_is_fp4(l)) QV_TRY(check_fp4_values(p, ln));
    return QV_OK;
}

/* Stable counting sort of the rows by g_idx: perm[i] is the logical row that
 * becomes sorted row i (rows of one group keep their order). g_idx (k) holds
 * values in [0, groups); perm and g_sorted are (k) outputs, g_sorted[i] =
 * g_idx[perm[i]]. */
static void sort_rows(const int32_t *g_idx, int64_t k, int64_t groups, int32_t *perm, int32_t *g_sorted)
{
    int64_t *start = calloc((size_t)groups + 1, sizeof *start);
    QV_ASSERT(start != NULL, "out of memory sorting g_idx");
    for (int64_t i = 0; i < k; i++) start[g_idx[i] + 1]++;
    for (int64_t gr = 0; gr < groups; gr++) start[gr + 1] += start[gr];
    for (int64_t i = 0; i < k; i++) {
        int64_t at = start[g_idx[i]]++;
        perm[at] = (int32_t)i;
        g_sorted[at] = g_idx[i];
    }
    free(start);
}

/* The stored code of weight (row, col) as an unsigned bit pattern. */
static uint32_t code_at(const qv_problem *p, int64_t row, int64_t col)
{
    int64_t i = row * p->n + col;
    switch (qv_fmt_code_bits(p->v->wfmt)) {
#ifdef QV_MUTANT_int4_mask_missing
    /* Mutant (class 10, AutoGPTQ #484): a signed nibble widened without & 0xF
     * sign-extends into every higher nibble of the word. */
    case 4: return p->v->wfmt == QV_FMT_I4 ? (uint32_t)((const int8_t *)p->q)[i] : ((const uint8_t *)p->q)[i];
#else
    case 4: return (uint32_t)((const uint8_t *)p->q)[i] & 0xFu; /* I4: two's complement nibble */
#endif
    case 8: return ((const uint8_t *)p->q)[i];
    default: return ((const uint16_t *)p->q)[i];
    }
}

/* Marlin-family weights into b: (k/16, b_cols) words, b_cols = 16n*bits/32,
 * zeroed by the caller. `rows` (k) maps a sorted row to its logical row, or is
 * NULL for the identity (no act_order). */
static void pack_marlin_weights(const qv_problem *p, const int32_t *rows, uint32_t *b, int64_t b_cols)
{
    qv_layout l = p->v->layout;
    int perm[CHUNK];
    if (l == QV_LAYOUT_MARLIN_W8 || l == QV_LAYOUT_MARLIN_FP8)
        build_perm(0, interleave_w8, 4, perm);
    else if (l == QV_LAYOUT_QQQ_W4_CHANNEL) {
#ifdef QV_MUTANT_qqq_channel_interleave
        /* Mutant (docs/design.md §6 class 3): the per-group interleave on channelwise QQQ. */
        build_perm(1, interleave_w4, 8, perm);
        (void)interleave_qqq_ch;
#else
        build_perm(1, interleave_qqq_ch, 8, perm);
#endif
    } else if (l == QV_LAYOUT_QQQ_W4_GROUP)
        build_perm(1, interleave_w4, 8, perm);
    else
        build_perm(0, interleave_w4, 8, perm);
    int bits = qv_fmt_code_bits(p->v->wfmt);
    int per = 32 / bits;
    int64_t row_len = 16 * p->n; /* values in one tiled row */
    for (int64_t kb = 0; kb < p->k / 16; kb++) {
        uint32_t *out = b + kb * b_cols;
        for (int64_t idx = 0; idx < row_len; idx++) {
            int64_t src = idx - idx % CHUNK + perm[idx % CHUNK];
            int64_t tile = src / 256, r = src % 256 / 16, c = src % 16;
            int64_t srow = 16 * kb + r;
#ifdef QV_MUTANT_fp4_nibble_order_swapped
            /* Mutant (class 3, sglang #23625): the two e2m1 codes of each
             * checkpoint byte read in the other nibble order: rows 2i and
             * 2i+1 trade places. */
            if (qv_layout_is_fp4(l)) srow ^= 1;
#endif
            int64_t row = rows ? rows[srow] : srow;
            out[idx / per] |= code_at(p, row, 16 * tile + c) << (bits * (idx % per));
        }
    }
}

/* PLAIN_NK into b: (n, b_cols) words, b_cols = k*bits/32, zeroed by the
 * caller; the (n, k) transpose, codes packed along k, lowest first. `rows` as
 * for pack_marlin_weights. */
static void pack_plain_weights(const qv_problem *p, const int32_t *rows, uint32_t *b, int64_t b_cols)
{
    int bits = qv_fmt_code_bits(p->v->wfmt);
    int per = 32 / bits;
    for (int64_t j = 0; j < p->n; j++)
        for (int64_t kk = 0; kk < p->k; kk++) {
            int64_t row = rows ? rows[kk] : kk;
            b[j * b_cols + kk / per] |= code_at(p, row, j) << (bits * (kk % per));
        }
}

/* Gathers each `width`-wide block of every row through `perm`:
 * dst[r][c] = src[r][c - c%width + perm[c%width]]. src and dst are (rows, cols)
 * row-major arrays of `elem`-byte elements; perm has `width` entries. */
static void gather_cols(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, size_t elem,
                        const int *perm, int width)
{
    QV_ASSERT(cols % width == 0, "scale permutations cover whole blocks (N is checked first)");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t from = c - c % width + perm[c % width];
            memcpy(dst + (size_t)(r * cols + c) * elem, src + (size_t)(r * cols + from) * elem, elem);
        }
}

static void *zalloc(size_t n, int *fail);

/* The Marlin FP4 layouts (layout.h), from a problem check_problem accepted:
 * the weights as MARLIN_W4 words, the scale bytes in GROUP64_FP8 order (MX:
 * the e8m0 codes; NV: S0E5M3 bytes of s * 2^s_pow2), NV's global scale, and
 * the bias through scale_perm_single. */
static qv_status pack_fp4(const qv_problem *p, qv_packed *out)
{
    const qv_variant *v = p->v;
    const int nv = v->layout == QV_LAYOUT_MARLIN_FP4_NV;
    const int64_t n = p->n, rows = p->k / p->g;
    out->layout = v->layout;
    out->k = p->k;
    out->n = n;
    out->g = p->g;
    out->b_rows = p->k / 16;
    out->b_cols = 2 * n; /* 16 n nibbles per tiled row, 8 per word */
    out->s_rows = rows;
    out->s_cols = n;
    out->s_elem = 1;
    out->s_order = QV_SORDER_GROUP64_FP8;
    out->s_pow2 = nv ? fp4_nv_pow2(p) : 0;
    out->s2_cols = nv ? 1 : 0;
    if (v->bias_fmt != QV_FMT_NONE) {
        out->bias_cols = n;
        out->bias_elem = qv_fmt_storage_bytes(v->bias_fmt);
    }
    int fail = 0;
    out->b = zalloc((size_t)(out->b_rows * out->b_cols) * sizeof(int32_t), &fail);
    out->scales = zalloc((size_t)(rows * n), &fail);
    out->scales2 = zalloc((size_t)out->s2_cols * sizeof(float), &fail);
    out->bias = zalloc((size_t)out->bias_cols * out->bias_elem, &fail);
    if (fail) {
        qv_packed_destroy(out);
        return qv_fail(QV_ERR_NOMEM, "%s: out of memory packing K=%lld N=%lld", qv_layout_name(v->layout),
                       (long long)p->k, (long long)n);
    }
    pack_marlin_weights(p, NULL, (uint32_t *)out->b, out->b_cols);

    /* Packed byte c of a row: vLLM permutes the (f16-converted) scales with
     * scale_perm, then reorders every 4 by [0,2,1,3], because
     * dequant_fp8_scales builds the first half2 of a lane's scales from
     * bytes 0 and 2 of a word and the second from bytes 1 and 3. */
    static const int pair4[4] = {0, 2, 1, 3};
    int sp[SP_GROUP];
    qv_scale_perm(sp);
    const uint8_t *sc = p->scales;
    uint8_t *ps = out->scales;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) {
            int64_t e = c - c % 4 + pair4[c % 4];
            int64_t from = e - e % SP_GROUP + sp[e % SP_GROUP];
            int64_t srow = r;
#ifdef QV_MUTANT_fp4_mx_group16
            /* Mutant (class 18): the row of group r computed from k = 16 r, the
             * NVFP4 group, over MXFP4's group of 32: group r takes group r/2's scales. */
            if (!nv) srow = r / 2;
#endif
            uint8_t code = sc[srow * n + from];
#ifdef QV_MUTANT_fp4_mx_scale_exp_off_by_one
            /* Mutant (class 8, vLLM #47315): the e8m0 exponent re-biased by one
             * too many, so every MXFP4 block scale doubles. */
            if (!nv) code = (uint8_t)(code + 1);
#endif
            ps[r * n + c] = nv ? nv_scale_byte(code, out->s_pow2) : code;
        }
    if (nv) {
        int ok;
        ((float *)out->scales2)[0] = nv_global(p->scales2[0], out->s_pow2, v->afmt, &ok);
        QV_ASSERT(ok, "check_fp4_values refused a global scale the rewrite loses");
#ifdef QV_MUTANT_fp4_nv_global_lift_kept
        /* Mutant (class 21, vLLM #34577): the global scale rewritten as
         * g 2^(bias - 7) without the division by the lift the block scales
         * took, so lifted (bf16) outputs come out 2^(s_pow2 - 7) too large. */
        ((float *)out->scales2)[0] = ldexpf(p->scales2[0], fp4_weight_bias(v->afmt) - 7);
#endif
    }
    if (out->bias) {
        int sps[SP_SINGLE];
        qv_scale_perm_single(sps);
        for (int64_t c = 0; c < n; c++) {
            int64_t from = c - c % SP_SINGLE + sps[c % SP_SINGLE];
#ifdef QV_MUTANT_fp4_bias_unpermuted
            /* Mutant (class 24, sglang #35020): the bias left in column order
             * where the epilogue reads it through scale_perm_single. */
            from = c;
#endif
            double x = p->bias[from];
            uint8_t *to = (uint8_t *)out->bias + (size_t)c * out->bias_elem;
            if (v->bias_fmt == QV_FMT_F32) {
                float f = (float)x;
                memcpy(to, &f, 4);
            } else {
                uint16_t h = v->bias_fmt == QV_FMT_F16 ? qv_f64_to_f16(x) : qv_f64_to_bf16(x);
                memcpy(to, &h, 2);
            }
        }
#ifdef QV_MUTANT_fp4_bias_dropped
        /* Mutant (class 24, flashinfer #3423): the bias never reaches the
         * kernel's buffer, which stays zero. */
        memset(out->bias, 0, (size_t)n * out->bias_elem);
#endif
    }
    return QV_OK;
}

/* Multiplies one scale element (elem: one code of sfmt, 2 or 4 bytes) by 2^e
 * in place (exact: only the exponent moves). Refuses a result beyond the
 * format's range; Inf and NaN stay as they are. */
static qv_status scale_times_pow2(qv_fmt sfmt, void *elem, int e)
{
    if (sfmt == QV_FMT_F32) {
        float x;
        memcpy(&x, elem, 4);
        if (!isfinite(x)) return QV_OK;
        float y = ldexpf(x, e);
        if (!isfinite(y)) return qv_fail(QV_ERR_RANGE, "marlin-fp8: scale %g times 2^%d overflows f32", x, e);
        memcpy(elem, &y, 4);
    } else if (sfmt == QV_FMT_BF16) {
        uint16_t h;
        memcpy(&h, elem, 2);
        uint32_t bits = (uint32_t)h << 16;
        float x;
        memcpy(&x, &bits, 4);
        if (!isfinite(x)) return QV_OK;
        float y = ldexpf(x, e);
        if (!isfinite(y)) return qv_fail(QV_ERR_RANGE, "marlin-fp8: scale %g times 2^%d overflows bf16", x, e);
        memcpy(&bits, &y, 4);
        h = (uint16_t)(bits >> 16); /* exact: scaling up keeps the 8 significant bits */
        memcpy(elem, &h, 2);
    } else {
        uint16_t h;
        memcpy(&h, elem, 2);
        if (((h >> 10) & 0x1F) == 0x1F) return QV_OK; /* Inf or NaN stays */
        const double x = qv_decode(QV_FMT_F16, h), y = ldexp(x, e);
        if (fabs(y) > 65504.0) /* 65504: the largest finite f16 */
            return qv_fail(QV_ERR_RANGE, "marlin-fp8: scale %g times 2^%d = %g overflows f16 (max 65504)", x, e, y);
        h = qv_f64_to_f16(y); /* exact: only the exponent moved */
        memcpy(elem, &h, 2);
    }
    return QV_OK;
}

qv_scale_order qv_layout_scale_order(qv_layout layout, qv_scale_layout sl, int64_t scale_rows)
{
    /* The FP4 kernel always reads group scales (group_blocks 1 or 2, never the
     * channelwise -1), 8 bytes per lane, through dequant_fp8_scales. */
    if (qv_layout_is_fp4(layout)) return QV_SORDER_GROUP64_FP8;
    if (!is_marlin_family(layout) || sl == QV_SCALE_NONE || sl == QV_SCALE_TENSOR || sl == QV_SCALE_BLOCK)
        return QV_SORDER_PLAIN;
    /* Marlin and vLLM treat a single group (g == K) as channelwise and use
     * scale_perm_single for it; QQQ's per-group format always reads its group
     * scales through scale_perm. */
    int grouped = sl == QV_SCALE_GROUP || sl == QV_SCALE_GROUP_CHANNEL;
#ifdef QV_MUTANT_single_group_scale_perm
    /* Mutant (class 2): a single group (g == K) stored through scale_perm,
     * where the kernel reads it as channelwise, through scale_perm_single. */
    if (grouped) return QV_SORDER_GROUP64;
#endif
    if (layout == QV_LAYOUT_QQQ_W4_GROUP || (grouped && scale_rows > 1)) return QV_SORDER_GROUP64;
    return QV_SORDER_CHANNEL32;
}

int qv_layout_scale_pow2(qv_layout layout, qv_fmt afmt)
{
    /* The kernel turns an e4m3 byte into f16 (bf16) by moving its bits, which
     * leaves the value 2^-8 (2^-120) too small: the difference of the exponent
     * biases, 15-7 (127-7). vLLM folds it into the scales. */
    if (layout != QV_LAYOUT_MARLIN_FP8) return 0;
#ifdef QV_MUTANT_fp8_scale_pow2_swapped
    /* Mutant (class 8, vLLM #47315): the f16 and bf16 re-biases swapped, so
     * bf16 scales carry 2^8 where the kernel leaves 2^120 out of every weight. */
    return afmt == QV_FMT_BF16 ? 8 : 120;
#endif
    return afmt == QV_FMT_BF16 ? 120 : 8;
}

void qv_packed_destroy(qv_packed *pk)
{
    if (!pk) return;
    free(pk->b);
    free(pk->scales);
    free(pk->scales2);
    free(pk->zeros);
    free(pk->perm);
    free(pk->g_idx);
    free(pk->bias);
    memset(pk, 0, sizeof *pk);
}

int64_t qv_block_scales2_cols(int64_t n, int64_t k)
{
    const int64_t kb = (k + 127) / 128, nb = (n + 127) / 128, kb4 = (kb + 3) / 4 * 4;
    return kb * n + nb * kb4;
}

/* The two forms of the (kb, nb) block scales s that cuBLASLt's fp8 scaling
 * modes read (layout.h, QV_SCALE_BLOCK's scales2), into s2: first (kb, n),
 * s2[b n + j] = s[b nb + j / 128]; then (nb, kb4), s2[kb n + c kb4 + b] =
 * s[b nb + c] for b < kb and 0 in the padding. Pure copies. */
static void block_scales2(const float *s, int64_t n, int64_t k, float *s2)
{
    const int64_t kb = (k + 127) / 128, nb = (n + 127) / 128, kb4 = (kb + 3) / 4 * 4;
    for (int64_t b = 0; b < kb; b++)
        for (int64_t j = 0; j < n; j++) s2[b * n + j] = s[b * nb + j / 128];
    float *blk = s2 + kb * n;
    for (int64_t c = 0; c < nb; c++)
        for (int64_t b = 0; b < kb4; b++)
#ifdef QV_MUTANT_blk_scales_unpadded
            /* Mutant (class 12): the block form laid out with a row stride of
             * kb, not kb rounded up to 4 as cuBLASLt's BLK128x128 reads it. */
            if (b < kb) blk[c * kb + b] = s[b * nb + c];
#else
            blk[c * kb4 + b] = b < kb ? s[b * nb + c] : 0.0f;
#endif
}

static void *zalloc(size_t n, int *fail)
{
    if (!n) return NULL;
    void *x = calloc(1, n);
    if (!x) *fail = 1;
    return x;
}

qv_status qv_pack(const qv_problem *p, qv_packed *out)
{
    QV_ASSERT(p != NULL && p->v != NULL && out != NULL, "qv_pack needs a problem with a registry row");
    memset(out, 0, sizeof *out);
    QV_TRY(check_problem(p));
    if (qv_layout_is_fp4(p->v->layout)) return pack_fp4(p, out);
    const qv_variant *v = p->v;
    qv_layout l = v->layout;
    int grouped = v->scale_layout == QV_SCALE_GROUP || v->scale_layout == QV_SCALE_GROUP_CHANNEL;
    int bits = qv_fmt_code_bits(v->wfmt);

    out->layout = l;
    out->k = p->k;
    out->n = p->n;
    out->g = grouped ? p->g : 0;
    if (is_marlin_family(l)) {
        out->b_rows = p->k / 16;
        out->b_cols = 16 * p->n * bits / 32;
    } else {
        out->b_rows = p->n;
        out->b_cols = p->k * bits / 32;
    }
    out->s_rows = scale_rows(p);
    out->s_cols = scale_cols(p);
    out->s_elem = scale_bytes(v->sfmt, v->scale_layout);
    if (v->scale_layout == QV_SCALE_GROUP_CHANNEL) out->s2_cols = p->n;
    if (v->scale_layout == QV_SCALE_BLOCK) out->s2_cols = qv_block_scales2_cols(p->n, p->k);
    if (v->zero_point) {
        out->z_rows = p->k / p->g;
        out->z_cols = p->n / 8; /* 8 nibbles per int32 */
        out->z_bytes = out->z_rows * out->z_cols * (int64_t)sizeof(int32_t);
    }

    int fail = 0;
    out->b = zalloc((size_t)(out->b_rows * out->b_cols) * sizeof(int32_t), &fail);
    out->scales = zalloc((size_t)(out->s_rows * out->s_cols) * out->s_elem, &fail);
    out->scales2 = zalloc((size_t)out->s2_cols * sizeof(float), &fail);
    out->zeros = zalloc((size_t)out->z_bytes, &fail);
    if (v->act_order) {
        out->perm = zalloc((size_t)p->k * sizeof(int32_t), &fail);
        out->g_idx = zalloc((size_t)p->k * sizeof(int32_t), &fail);
    }
    if (fail) {
        qv_packed_destroy(out);
        return qv_fail(QV_ERR_NOMEM, "%s: out of memory packing K=%lld N=%lld", qv_layout_name(l),
                       (long long)p->k, (long long)p->n);
    }

    if (v->act_order) sort_rows(p->g_idx, p->k, p->k / p->g, out->perm, out->g_idx);
#ifdef QV_MUTANT_act_order_group_shift
    /* Mutant (class 18): the group of each sorted row is taken from the row before it. */
    for (int64_t i = (v->act_order ? p->k : 0) - 1; i > 0; i--) out->g_idx[i] = out->g_idx[i - 1];
#endif
#ifdef QV_MUTANT_pack_buffer_not_cleared
    /* Mutant (class 15, llama.cpp #10032): the words are OR-ed into a buffer
     * that was never cleared; stale bytes 0x7F (an e4m3 NaN) stand for garbage. */
    memset(out->b, 0x7F, (size_t)(out->b_rows * out->b_cols) * sizeof(int32_t));
#endif
    const int32_t *rows = out->perm;
#ifdef QV_MUTANT_act_order_rows_unsorted
    /* Mutant (class 13): perm is handed out but q's rows keep their logical order. */
    rows = NULL;
#endif
    /* int32 and uint32 may alias (C11 6.5p7); the words are built unsigned. */
    if (is_marlin_family(l))
        pack_marlin_weights(p, rows, (uint32_t *)out->b, out->b_cols);
    else
        pack_plain_weights(p, rows, (uint32_t *)out->b, out->b_cols);

    size_t s_total = (size_t)(out->s_rows * out->s_cols) * out->s_elem;
    int sp[SP_GROUP], sps[SP_SINGLE];
    qv_scale_perm(sp);
    qv_scale_perm_single(sps);
    out->s_order = qv_layout_scale_order(l, v->scale_layout, out->s_rows);
    qv_scale_order applied = out->s_order;
#ifdef QV_MUTANT_channel_scales_unpermuted
    /* Mutant (class 1, optimum-quanto PR #241): channelwise scales left in logical order. */
    if (applied == QV_SORDER_CHANNEL32) applied = QV_SORDER_PLAIN;
#endif
#ifdef QV_MUTANT_scale_perm_swapped
    /* Mutant (class 2): scale_perm and scale_perm_single swapped. */
    if (applied != QV_SORDER_PLAIN) applied = applied == QV_SORDER_GROUP64 ? QV_SORDER_CHANNEL32 : QV_SORDER_GROUP64;
#endif
    if (applied == QV_SORDER_GROUP64)
        gather_cols(p->scales, out->scales, out->s_rows, out->s_cols, out->s_elem, sp, SP_GROUP);
    else if (applied == QV_SORDER_CHANNEL32)
        gather_cols(p->scales, out->scales, out->s_rows, out->s_cols, out->s_elem, sps, SP_SINGLE);
    else if (s_total)
        memcpy(out->scales, p->scales, s_total);
    if (out->scales2 && v->scale_layout == QV_SCALE_BLOCK)
        block_scales2(p->scales, p->n, p->k, out->scales2);
    else if (out->scales2 && is_marlin_family(l))
        gather_cols((const uint8_t *)p->scales2, out->scales2, 1, p->n, sizeof(float), sps, SP_SINGLE);
    else if (out->scales2)
        memcpy(out->scales2, p->scales2, (size_t)p->n * sizeof(float));

    out->s_pow2 = qv_layout_scale_pow2(l, v->afmt);
#ifdef QV_MUTANT_fp8_scale_bias_unfolded
    /* Mutant (class 8, vLLM #47315): the kernel's fp8 conversion omits the
     * exponent re-bias (2^8 / 2^120) and the packer forgets to fold it. */
    if (0)
#else
    if (out->s_pow2)
#endif
    {
        for (int64_t i = 0; i < out->s_rows * out->s_cols; i++) {
            qv_status st = scale_times_pow2(v->sfmt, (uint8_t *)out->scales + (size_t)i * out->s_elem,
                                            out->s_pow2);
            if (st != QV_OK) {
                qv_packed_destroy(out);
                return st;
            }
        }
    }

    if (v->zero_point) {
        /* vLLM marlin_zero_points: scale_perm on each row (never the single
         * one: zero points are applied on every mma), then the 4-bit
         * interleave in groups of 8, then 8 nibbles per int32 along N. */
        uint8_t *zp = malloc((size_t)(out->z_rows * p->n));
        QV_ASSERT(zp != NULL, "out of memory permuting zero points");
        gather_cols(p->zeros, zp, out->z_rows, p->n, 1, sp, SP_GROUP);
        uint32_t *zw = out->zeros;
        for (int64_t r = 0; r < out->z_rows; r++)
            for (int64_t c = 0; c < p->n; c++) {
                int64_t from = c - c % 8 + interleave_w4[c % 8];
#ifdef QV_MUTANT_zero_point_off_by_one
                /* Mutant (class 9, AutoGPTQ #325, vLLM #38966): GPTQ v1's z-1 stored where z is read. */
                zw[r * out->z_cols + c / 8] |= ((uint32_t)(zp[r * p->n + from] - 1) & 0xFu) << (4 * (c % 8));
#else
                zw[r * out->z_cols + c / 8] |= (uint32_t)zp[r * p->n + from] << (4 * (c % 8));
#endif
            }
        free(zp);
    }
    return QV_OK;
}

/* ---- qvet pack: logical arrays to a packed layout ---- */

static qv_status want_2d(const char *what, const qv_array *a, int64_t rows, int64_t cols)
{
    char buf[96];
    if (a->ndim != 2 || (rows >= 0 && a->shape[0] != rows) || (cols >= 0 && a->shape[1] != cols))
        return qv_fail(QV_ERR_SHAPE, "%s is %s; expected (%lld, %lld)", what, qv_array_describe(a, buf, sizeof buf),
                       (long long)rows, (long long)cols);
    return QV_OK;
}

/* The scale format an array's dtype stands for ('<u2' holds bf16 bits). */
static qv_fmt scale_fmt_of(qv_dtype dt)
{
    switch (dt) {
    case QV_DT_F2: return QV_FMT_F16;
    case QV_DT_U2:
    case QV_DT_BF16: return QV_FMT_BF16;
    case QV_DT_F4: return QV_FMT_F32;
    default: return QV_FMT_NONE;
    }
}

qv_status qv_pack_arrays(qv_layout layout, const qv_array *q, const qv_array *scales, const qv_array *scales2,
                         const qv_array *zeros, const qv_array *g_idx, qv_packed *out)
{
    QV_ASSERT(q != NULL && out != NULL, "qv_pack_arrays needs q and an output");
    memset(out, 0, sizeof *out);
    char buf[96];
    if (qv_layout_is_fp4(layout))
        return qv_fail(QV_ERR_USAGE, "%s packs through qv_pack_arrays_fp4 (8-bit scale codes, and the activation "
                       "format the kernel runs with)", qv_layout_name(layout));
    if (layout < 0 || layout >= QV_LAYOUT_COUNT) return qv_fail(QV_ERR_USAGE, "unknown layout");
    if (layout == QV_LAYOUT_LOGICAL)
        return qv_fail(QV_ERR_USAGE, "logical is the arrays as they are, not a packed layout (qvet pack --help lists "
                       "the layouts)");
    const char *ln = qv_layout_name(layout);
    if (q->ndim != 2)
        return qv_fail(QV_ERR_SHAPE, "%s: q is %s; expected a 2-D (K, N) array", ln,
                       qv_array_describe(q, buf, sizeof buf));
    int64_t k = q->shape[0], n = q->shape[1];

    qv_variant v = {.name = "qvet pack", .layout = layout, .afmt = QV_FMT_F16};
    /* The weight format follows from the layout; the dtype must hold it. */
    v.wfmt = layout_wfmt(layout);
    if (layout == QV_LAYOUT_PLAIN_NK) {
        switch (q->dtype) {
        case QV_DT_I1: v.wfmt = QV_FMT_I8; break;
        case QV_DT_U1: v.wfmt = QV_FMT_U8; break;
        case QV_DT_E4M3: v.wfmt = QV_FMT_E4M3; break;
        case QV_DT_F2: v.wfmt = QV_FMT_F16; break;
        case QV_DT_U2:
        case QV_DT_BF16: v.wfmt = QV_FMT_BF16; break;
        default:
            return qv_fail(QV_ERR_DTYPE, "%s: q must be int8, uint8, float16 or bf16 (<u2), not %s", ln,
                           qv_dtype_name(q->dtype));
        }
    } else if (v.wfmt == QV_FMT_I4) {
        if (q->dtype != QV_DT_I1)
            return qv_fail(QV_ERR_DTYPE, "%s: q must be int8 holding -8..7, not %s", ln, qv_dtype_name(q->dtype));
    } else if (v.wfmt == QV_FMT_U4) {
        if (q->dtype != QV_DT_I1 && q->dtype != QV_DT_U1)
            return qv_fail(QV_ERR_DTYPE, "%s: q must be int8 or uint8 holding 0..15, not %s", ln,
                           qv_dtype_name(q->dtype));
        if (q->dtype == QV_DT_I1)
            for (int64_t i = 0; i < q->count; i++)
                if (((const int8_t *)q->data)[i] < 0)
                    return qv_fail(QV_ERR_RANGE, "%s: q[%lld][%lld] = %d is outside the uint4 range 0..15", ln,
                                   (long long)(i / n), (long long)(i % n), ((const int8_t *)q->data)[i]);
    } else if (v.wfmt == QV_FMT_U8) {
        if (q->dtype != QV_DT_U1)
            return qv_fail(QV_ERR_DTYPE, "%s: q must be uint8 holding q+128, not %s", ln, qv_dtype_name(q->dtype));
    } else if (v.wfmt == QV_FMT_E4M3) {
        if (q->dtype != QV_DT_U1 && q->dtype != QV_DT_E4M3)
            return qv_fail(QV_ERR_DTYPE, "%s: q must be uint8 e4m3 codes, not %s", ln, qv_dtype_name(q->dtype));
    }

    /* Scales: (groups, N), (1, N) or (1, 1); the group size is K / groups. */
    if (scales) {
        v.sfmt = scale_fmt_of(scales->dtype);
        if (v.sfmt == QV_FMT_NONE)
            return qv_fail(QV_ERR_DTYPE, "%s: scales must be float16, bf16 (<u2) or float32, not %s", ln,
                           qv_dtype_name(scales->dtype));
        if (scales->ndim != 2)
            return qv_fail(QV_ERR_SHAPE, "%s: scales are %s; expected (K/g, N), (1, N) or (1, 1)", ln,
                           qv_array_describe(scales, buf, sizeof buf));
        int64_t rows = scales->shape[0], cols = scales->shape[1];
        if (rows == 1 && cols == 1 && n != 1) {
            v.scale_layout = QV_SCALE_TENSOR;
        } else {
            if (cols != n)
                return qv_fail(QV_ERR_SHAPE, "%s: scales are %s but q has N=%lld columns", ln,
                               qv_array_describe(scales, buf, sizeof buf), (long long)n);
            if (rows < 1 || k % rows)
                return qv_fail(QV_ERR_SHAPE, "%s: %lld scale rows do not divide K=%lld into groups", ln,
                               (long long)rows, (long long)k);
            if (rows > 1 || scales2 || zeros || g_idx || layout == QV_LAYOUT_QQQ_W4_GROUP) {
                v.scale_layout = QV_SCALE_GROUP;
                v.g = (int)(k / rows);
            } else {
                v.scale_layout = QV_SCALE_CHANNEL;
            }
        }
        if (v.sfmt == QV_FMT_BF16) v.afmt = QV_FMT_BF16; /* Marlin's scales share the activation dtype */
    } else if (layout != QV_LAYOUT_PLAIN_NK) {
        return qv_fail(QV_ERR_USAGE, "%s needs scales", ln);
    }
    if (scales2) {
        if (layout != QV_LAYOUT_QQQ_W4_GROUP)
            return qv_fail(QV_ERR_USAGE, "%s has no second-level scales (only qqq-w4-group)", ln);
        if (scales2->dtype != QV_DT_F4)
            return qv_fail(QV_ERR_DTYPE, "%s: scales2 must be float32, not %s", ln, qv_dtype_name(scales2->dtype));
        QV_TRY(want_2d("scales2", scales2, 1, n));
        v.scale_layout = QV_SCALE_GROUP_CHANNEL;
        v.s2fmt = QV_FMT_F32;
        v.s2_layout = QV_SCALE_CHANNEL;
    } else if (layout == QV_LAYOUT_QQQ_W4_GROUP) {
        return qv_fail(QV_ERR_USAGE, "%s needs the f32 channel scales as scales2", ln);
    }
    if (zeros) {
        if (layout != QV_LAYOUT_MARLIN_W4_ZP)
            return qv_fail(QV_ERR_USAGE, "%s has no zero points (only marlin-w4-zp)", ln);
        if (zeros->dtype != QV_DT_I1 && zeros->dtype != QV_DT_U1)
            return qv_fail(QV_ERR_DTYPE, "%s: zeros must be int8 or uint8 holding 0..15, not %s", ln,
                           qv_dtype_name(zeros->dtype));
        QV_TRY(want_2d("zeros", zeros, v.g > 0 ? k / v.g : 1, n));
        v.zero_point = QV_ZP_INT;
        v.zp_layout = QV_SCALE_GROUP;
        v.zp_g = v.g;
    } else if (layout == QV_LAYOUT_MARLIN_W4_ZP) {
        return qv_fail(QV_ERR_USAGE, "%s needs zero points", ln);
    }
    int32_t *gi = NULL;
    if (g_idx) {
        if (g_idx->ndim != 1 || g_idx->shape[0] != k)
            return qv_fail(QV_ERR_SHAPE, "%s: g_idx is %s; expected (%lld,)", ln,
                           qv_array_describe(g_idx, buf, sizeof buf), (long long)k);
        if (g_idx->dtype != QV_DT_I4 && g_idx->dtype != QV_DT_I8)
            return qv_fail(QV_ERR_DTYPE, "%s: g_idx must be int32 or int64, not %s", ln, qv_dtype_name(g_idx->dtype));
        gi = malloc((size_t)k * sizeof *gi);
        QV_ASSERT(gi != NULL, "out of memory reading g_idx");
        for (int64_t i = 0; i < k; i++) {
            int64_t x = g_idx->dtype == QV_DT_I4 ? ((const int32_t *)g_idx->data)[i]
                                                 : ((const int64_t *)g_idx->data)[i];
            if (x < 0 || x >= (v.g > 0 ? k / v.g : 1)) {
                free(gi);
                return qv_fail(QV_ERR_RANGE, "%s: g_idx[%lld] = %lld is outside [0, %lld)", ln, (long long)i,
                               (long long)x, (long long)(v.g > 0 ? k / v.g : 1));
            }
            gi[i] = (int32_t)x;
        }
        v.act_order = 1;
    }
    v.n_tile = is_marlin_family(layout) ? 64 : 1;
    v.k_tile = is_marlin_family(layout) ? 16 : 1;

    qv_problem p = {.v = &v, .m = 0, .n = n, .k = k, .g = v.g, .q = q->data,
                    .scales = scales ? scales->data : NULL,
                    .scales2 = scales2 ? scales2->data : NULL,
                    .zeros = zeros ? zeros->data : NULL, .g_idx = gi};
    qv_status st = qv_pack(&p, out);
    free(gi);
    return st;
}

/* A float16, bf16 ('<u2') or float32 bias of n elements, (n) or (1, n), into
 * f32 values (exact), with its format. */
static qv_status read_bias(const char *ln, const qv_array *b, int64_t n, float *out, qv_fmt *fmt)
{
    char buf[96];
    int64_t len = b->ndim == 1 ? b->shape[0] : b->ndim == 2 && b->shape[0] == 1 ? b->shape[1] : -1;
    if (len != n)
        return qv_fail(QV_ERR_SHAPE, "%s: bias is %s; expected (%lld) or (1, %lld)", ln,
                       qv_array_describe(b, buf, sizeof buf), (long long)n, (long long)n);
    for (int64_t j = 0; j < n; j++)
        switch (b->dtype) {
        case QV_DT_F2: out[j] = qv_f16_to_f32(((const uint16_t *)b->data)[j]); break;
        case QV_DT_U2:
        case QV_DT_BF16: out[j] = qv_bf16_to_f32(((const uint16_t *)b->data)[j]); break;
        case QV_DT_F4: out[j] = ((const float *)b->data)[j]; break;
        default:
            return qv_fail(QV_ERR_DTYPE, "%s: bias must be float16, bf16 (<u2) or float32, not %s", ln,
                           qv_dtype_name(b->dtype));
        }
    *fmt = b->dtype == QV_DT_F2 ? QV_FMT_F16 : b->dtype == QV_DT_F4 ? QV_FMT_F32 : QV_FMT_BF16;
    return QV_OK;
}

qv_status qv_pack_arrays_fp4(qv_layout layout, qv_fmt afmt, const qv_array *q, const qv_array *scales,
                             const qv_array *scales2, const qv_array *bias, qv_packed *out)
{
    QV_ASSERT(q != NULL && out != NULL, "qv_pack_arrays_fp4 needs q and an output");
    memset(out, 0, sizeof *out);
    char buf[96];
    if (!qv_layout_is_fp4(layout))
        return qv_fail(QV_ERR_USAGE, "qv_pack_arrays_fp4 packs marlin-fp4-mx and marlin-fp4-nv, not %s",
                       qv_layout_name(layout));
    const int nv = layout == QV_LAYOUT_MARLIN_FP4_NV;
    const char *ln = qv_layout_name(layout);
    const int g = nv ? 16 : 32;
    const qv_fmt sfmt = nv ? QV_FMT_UE4M3 : QV_FMT_E8M0;
    if (afmt != QV_FMT_F16 && afmt != QV_FMT_BF16)
        return qv_fail(QV_ERR_USAGE, "%s: activations must be f16 or bf16", ln);
    if (q->ndim != 2 || (q->dtype != QV_DT_U1 && q->dtype != QV_DT_I1))
        return qv_fail(q->ndim != 2 ? QV_ERR_SHAPE : QV_ERR_DTYPE, "%s: q is %s; expected a 2-D (K, N) uint8 array of "
                       "e2m1 codes 0..15", ln, qv_array_describe(q, buf, sizeof buf));
    const int64_t k = q->shape[0], n = q->shape[1];
    if (!scales) return qv_fail(QV_ERR_USAGE, "%s needs its %s scales", ln, qv_fmt_get(sfmt)->name);
    if (scales->dtype != QV_DT_U1 && scales->dtype != QV_DT_E4M3)
        return qv_fail(QV_ERR_DTYPE, "%s: scales must be uint8 %s codes, not %s", ln, qv_fmt_get(sfmt)->name,
                       qv_dtype_name(scales->dtype));
    if (k % g)
        return qv_fail(QV_ERR_SHAPE, "%s: K=%lld is not a multiple of the group size %d", ln, (long long)k, g);
    QV_TRY(want_2d("scales", scales, k / g, n));
    if (nv != (scales2 != NULL))
        return qv_fail(QV_ERR_USAGE, "%s: %s", ln, nv ? "needs the f32 global scale as scales2"
                                                       : "MXFP4 has no global scale (scales2)");
    if (scales2 && (scales2->dtype != QV_DT_F4 || scales2->count != 1 || scales2->ndim > 2))
        return qv_fail(QV_ERR_SHAPE, "%s: scales2 is %s; expected one float32 (the global scale)", ln,
                       qv_array_describe(scales2, buf, sizeof buf));
    for (int64_t i = 0; i < q->count; i++)
        if (((const uint8_t *)q->data)[i] > 15)
            return qv_fail(QV_ERR_RANGE, "%s: q[%lld][%lld] = %d is outside the e2m1 code range 0..15", ln,
                           (long long)(i / n), (long long)(i % n), ((const int8_t *)q->data)[i]);

    qv_variant v = {.name = "qvet pack", .layout = layout, .wfmt = QV_FMT_E2M1, .afmt = afmt, .ofmt = afmt,
                    .sfmt = sfmt, .scale_layout = QV_SCALE_GROUP, .g = g, .n_tile = 64, .k_tile = 16};
    if (nv) {
        v.s2fmt = QV_FMT_F32;
        v.s2_layout = QV_SCALE_TENSOR;
    }
    float g2 = scales2 ? ((const float *)scales2->data)[0] : 0.0f;
    float *bv = NULL;
    if (bias) {
        bv = malloc((size_t)(n > 0 ? n : 1) * sizeof *bv);
        QV_ASSERT(bv != NULL, "out of memory reading the bias");
        qv_status st = read_bias(ln, bias, n, bv, &v.bias_fmt);
        if (st != QV_OK) {
            free(bv);
            return st;
        }
    }
    qv_problem p = {.v = &v, .m = 0, .n = n, .k = k, .g = g, .q = q->data, .scales = scales->data,
                    .scales2 = scales2 ? &g2 : NULL, .bias = bv};
    qv_status st = qv_pack(&p, out);
    free(bv);
    return st;
}
