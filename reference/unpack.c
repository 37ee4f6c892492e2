/* unpack.c: the independent decoder of the packed layouts (reference.h:
 * ref_unpack). It never uses the packer's gather tables: for every packed word
 * and every nibble or byte in it, a closed-form position function names the
 * logical (k, n) it holds, derived from three published definitions:
 *
 *  1. The mma fragment of operand B (PTX ISA, "Matrix Fragments for mma.m16n8k16").
 *     With lane = %laneid, groupID = lane/4 and tig = lane%4 (thread in group):
 *     - f16/bf16 m16n8k16: a lane holds b0..b3 of a 16x8 (k x n) tile at
 *       n = groupID and k = 2*tig + (i&1) + 8*(i>=2) for b_i.
 *     - s8 m16n8k16 (QQQ): a lane holds b0..b3 at n = groupID and
 *       k = 4*tig + i.
 *  2. The warp's arrangement of a 16x64 block (one 1024-value chunk of a row of
 *     16x16 tiles): a lane's 32 values are its fragment elements in four 16x16
 *     tiles j = 0..3 (n offset 16j), each made of two n8 halves ("block" 0/1,
 *     n offset 8*block). The chunk stores the lanes in order, 32 values each;
 *     inside a lane, tile j, then block, then fragment element i.
 *  3. How each kernel turns one int32 into registers (the nibble order):
 *     - Marlin 4-bit (and QQQ per-group): nibbles t and t+4 become one half2
 *       (lop3 on the masks 0x000f000f / 0x00f000f0), so half2 number t%4 holds
 *       fragment elements {2(t%4), 2(t%4)+1} of the lane's 8 (block = (t%4)/2),
 *       and t/4 picks the element of the pair: element e = 2(t%4) + t/4.
 *     - QQQ channelwise: byte b of the word holds two nibbles; (w << 4) & 0xF0F0F0F0
 *       yields 16*q of the low nibbles and w & 0xF0F0F0F0 16*q of the high ones,
 *       each an s8 B register whose byte b is fragment element b. The high
 *       nibbles form block 0 and the low nibbles block 1: nibble t holds
 *       element e = 4*(1 - t%2) + t/2.
 *     - 8-bit (vLLM Marlin W8 and FP8): a prmt builds one half2 from bytes
 *       {0, 2} and one from bytes {1, 3}, so byte t holds fragment element
 *       2*(t%2) + t/2 of the word's block, and each word holds one n8 half.
 *     - FP4 (e2m1, vLLM's dequant for kFE2M1f): the kernel dequantizes q << 8
 *       into the block-0 registers and q into the block-1 ones; each call
 *       moves the nibbles at bits 12..15 and 28..31 into the second half2
 *       and, after a further << 4, those at 8..11 and 24..27 into the first.
 *       So q << 8 gives half2s (n0, n4) and (n1, n5), q gives (n2, n6) and
 *       (n3, n7): nibble t holds element 2(t%4) + t/4, the 4-bit pairing.
 *  Scales are placed by the thread that applies them: in a 64-wide block the
 *  lanes of groupID a need the scales of columns a + 8*b (b = 0..7, one per n8
 *  half-tile), stored together at positions 8a..8a+7 (scale_perm); in the
 *  epilogue a lane owns output columns 2*tig and 2*tig+1 of each n8 half of a
 *  32-wide warp tile, stored together at positions 8*tig..8*tig+7
 *  (scale_perm_single). FP4 scales are 8 bits: a lane loads the 8 bytes of its
 *  groupID (scale_perm placement) and dequant_fp8_scales turns each 4-byte word
 *  into two half2, the first from bytes 0 and 2, the second from bytes 1 and 3;
 *  so byte b of the 8 is the lane's scale number 4(b/4) + {0,2,1,3}[b%4], the
 *  scale of n8 half number 2j + h. The same lanes read the bias in the
 *  epilogue at scale_perm_single positions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/reference.h"

/* Fragment element e (0..7) of a lane's 8 values in one 16x16 tile: block
 * (the n8 half) is e/4, and element e%4 of the n8 fragment. Rows of that
 * element in the tile: */
static int frag_row_f16(int lane, int el) { return 2 * (lane % 4) + (el & 1) + 8 * (el >> 1); }
static int frag_row_s8(int lane, int el) { return 4 * (lane % 4) + el; }

/* Where the value in (tiled row kb, word w, slot t) of a Marlin-family layout
 * lives: sorted row *kk and column *nn. */
static void marlin_pos(qv_layout l, int64_t kb, int64_t w, int t, int64_t *kk, int64_t *nn)
{
    int64_t chunk, lane, tile, block;
    int el, row;
    if (l == QV_LAYOUT_MARLIN_W8 || l == QV_LAYOUT_MARLIN_FP8) {
        /* 256 words per chunk: lane (8 words), tile j (2 words), block (1 word). */
        chunk = w / 256;
        lane = w % 256 / 8;
        tile = w % 8 / 2;
        block = w % 2;
        el = 2 * (t % 2) + t / 2;
        row = frag_row_f16((int)lane, el);
    } else {
        /* 128 words per chunk: lane (4 words), tile j (1 word), 8 nibbles. */
        chunk = w / 128;
        lane = w % 128 / 4;
        tile = w % 4;
        int e = l == QV_LAYOUT_QQQ_W4_CHANNEL ? 4 * (1 - t % 2) + t / 2 : 2 * (t % 4) + t / 4;
        block = e / 4;
        el = e % 4;
        row = (l == QV_LAYOUT_QQQ_W4_CHANNEL || l == QV_LAYOUT_QQQ_W4_GROUP) ? frag_row_s8((int)lane, el)
                                                                              : frag_row_f16((int)lane, el);
    }
    *kk = 16 * kb + row;
    *nn = 64 * chunk + 16 * tile + 8 * block + lane / 4;
}

/* Logical column of packed scale position c (scale_perm, 64 wide). */
static int64_t group64_col(int64_t c) { return c - c % 64 + 8 * (c % 8) + c % 64 / 8; }
/* Logical column of packed scale position c (scale_perm_single, 32 wide). */
static int64_t channel32_col(int64_t c) { return c - c % 32 + 2 * (c % 32 / 8) + c % 2 + 8 * (c % 8 / 2); }

/* The scale order a kernel of layout l reads, from the kernels' own rule, not
 * the packer's: Marlin reads a single group (g == K) or channelwise scales
 * through scale_perm_single (group_blocks == -1) and several groups through
 * scale_perm; QQQ's per-group kernel always reads scale_perm; tensor and
 * block-128 scales, and PLAIN_NK, are unpermuted. s_rows: rows of scales. */
static qv_scale_order kernel_scale_order(const qv_variant *v, int64_t s_rows)
{
    qv_scale_layout sl = v->scale_layout;
    if (qv_layout_is_fp4(v->layout)) return QV_SORDER_GROUP64_FP8; /* group_blocks 1 or 2, 8-bit scales */
    if (v->layout == QV_LAYOUT_PLAIN_NK || sl == QV_SCALE_NONE || sl == QV_SCALE_TENSOR || sl == QV_SCALE_BLOCK)
        return QV_SORDER_PLAIN;
    if (v->layout == QV_LAYOUT_QQQ_W4_GROUP) return QV_SORDER_GROUP64;
    int grouped = sl == QV_SCALE_GROUP || sl == QV_SCALE_GROUP_CHANNEL;
    return grouped && s_rows > 1 ? QV_SORDER_GROUP64 : QV_SORDER_CHANNEL32;
}

static const char *order_name(qv_scale_order o)
{
    return o == QV_SORDER_GROUP64       ? "scale_perm"
           : o == QV_SORDER_CHANNEL32   ? "scale_perm_single"
           : o == QV_SORDER_GROUP64_FP8 ? "scale_perm with bytes [0,2,1,3]"
                                        : "unpermuted";
}

/* The power of two an fp8 Marlin kernel's byte-move conversion leaves out of
 * every weight, which the scales must carry: 2^(15-7) for f16 activations and
 * 2^(127-7) for bf16, the differences of the exponent biases; 0 elsewhere. */
static int kernel_scale_pow2(const qv_variant *v)
{
    if (v->layout != QV_LAYOUT_MARLIN_FP8) return 0;
    return v->afmt == QV_FMT_BF16 ? 127 - 7 : 15 - 7;
}

/* Stores code c (already masked to its bits) at logical (row, col) of p->q,
 * the (k, n) row-major code matrix (int8 for I4, uint16 bits for F16/BF16,
 * uint8 otherwise). */
static void put_code(const qv_problem *p, int64_t row, int64_t col, uint32_t c)
{
    int64_t i = row * p->n + col;
    switch (p->v->wfmt) {
    case QV_FMT_I4: ((int8_t *)p->q)[i] = (int8_t)((int)c - ((c & 8) ? 16 : 0)); break;
    case QV_FMT_F16:
    case QV_FMT_BF16: ((uint16_t *)p->q)[i] = (uint16_t)c; break;
    default: ((uint8_t *)p->q)[i] = (uint8_t)c; break;
    }
}

/* Divides one scale (elem: one code of sfmt, 2 or 4 bytes) by 2^e in place,
 * undoing the fp8 exponent fold; exact because the packer multiplied a value
 * of the same format by 2^e. */
static void scale_div_pow2(qv_fmt sfmt, void *elem, int e)
{
    if (sfmt == QV_FMT_F32) {
        float x;
        memcpy(&x, elem, 4);
        if (isfinite(x)) x = ldexpf(x, -e);
        memcpy(elem, &x, 4);
    } else if (sfmt == QV_FMT_BF16) {
        uint16_t h;
        memcpy(&h, elem, 2);
        uint32_t bits = (uint32_t)h << 16;
        float x;
        memcpy(&x, &bits, 4);
        if (isfinite(x)) x = ldexpf(x, -e);
        memcpy(&bits, &x, 4);
        h = (uint16_t)(bits >> 16);
        memcpy(elem, &h, 2);
    } else {
        uint16_t h;
        memcpy(&h, elem, 2);
        if (((h >> 10) & 0x1F) != 0x1F) h = qv_f64_to_f16(ldexp(qv_decode(QV_FMT_F16, h), -e));
        memcpy(elem, &h, 2);
    }
}

/* The cuBLASLt forms of 128x128 block scales in scales2 (layout.h): their
 * length, and every element against the block scale it must copy (bit for
 * bit; 0 in the padding), read position by position. A mismatch would make
 * the cuBLASLt path scale with other numbers than the problem's. */
static qv_status check_block_scales2(const qv_packed *pk, const char *ln)
{
    const int64_t kb = pk->s_rows, nb = pk->s_cols, n = pk->n;
    const int64_t kb4 = kb % 4 ? kb + 4 - kb % 4 : kb, want = kb * n + nb * kb4;
    if (pk->s2_cols != want)
        return qv_fail(QV_ERR_SHAPE, "%s: packed scales2 has %lld columns; (%lld, %lld) block scales need %lld", ln,
                       (long long)pk->s2_cols, (long long)kb, (long long)nb, (long long)want);
    const float *sc = pk->scales, *s2 = pk->scales2;
    for (int64_t e = 0; e < want; e++) {
        float expect = 0.0f;
        if (e < kb * n) {
            expect = sc[(e / n) * nb + (e % n) / 128];
        } else {
            const int64_t c = (e - kb * n) / kb4, b = (e - kb * n) % kb4;
            if (b < kb) expect = sc[b * nb + c];
        }
        if (memcmp(&expect, &s2[e], sizeof expect))
            return qv_fail(QV_ERR_FORMAT, "%s: packed scales2[%lld] = %g is not the block scale %g it must copy (%s form)",
                           ln, (long long)e, (double)s2[e], (double)expect, e < kb * n ? "per-row" : "per-block");
    }
    return QV_OK;
}

/* ---- Marlin FP4 ---- */

/* The value the kernel's dequant_fp8_scales gives NVFP4 byte b in the
 * activation format. f16: (q & 0xFF00) >> 1 places b at bits 14..7, an f16
 * with exponent b >> 3 and mantissa (b & 7) << 7. bf16: ((q & 0x8000) >> 1) |
 * ((q & 0x7F00) >> 4) gives exponent field 128 (b >> 7) + ((b >> 3) & 15) and
 * mantissa (b & 7) << 4. */
static double nv_byte_value(uint8_t b, qv_fmt afmt)
{
    if (afmt == QV_FMT_BF16) {
        int e = 128 * (b >> 7) + ((b >> 3) & 15), m = (b & 7) << 4;
        return e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134); /* bf16: bias 127, 7 mantissa bits */
    }
    int e = b >> 3, m = (b & 7) << 7;
    if (e == 31) return m ? NAN : INFINITY;
    return e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25); /* f16: bias 15, 10 mantissa bits */
}

/* The power the fp4 weight dequant leaves out (2^-14 in f16, 2^-126 in bf16:
 * the e2m1 exponent field lands in the low bits of the wider one). */
static int fp4_dequant_bias(qv_fmt afmt) { return afmt == QV_FMT_BF16 ? 126 : 14; }

/* Decodes the side buffers of an FP4 operand (the weights are decoded by the
 * caller): the scale bytes through the kernel's reading, NV's global scale
 * through the kernel's exponent arithmetic, and the bias. Refuses what the
 * kernel would read as another value than the one the row declares. */
static qv_status unpack_fp4_side(const qv_packed *pk, qv_problem *p, const char *ln)
{
    const qv_variant *v = p->v;
    const int nv = pk->layout == QV_LAYOUT_MARLIN_FP4_NV;
    const int g = nv ? 16 : 32;
    const qv_fmt sfmt = nv ? QV_FMT_UE4M3 : QV_FMT_E8M0;
    const int64_t n = pk->n, rows = pk->k / g;
    if (v->wfmt != QV_FMT_E2M1 || v->sfmt != sfmt || v->scale_layout != QV_SCALE_GROUP || v->g != g || p->g != g ||
        (v->afmt != QV_FMT_F16 && v->afmt != QV_FMT_BF16))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the kernel reads e2m1 weights with %s scales per %d rows and f16 or bf16 "
                       "activations; the problem's row declares otherwise", ln, qv_fmt_get(sfmt)->name, g);
    if (pk->k % g) return qv_fail(QV_ERR_SHAPE, "%s: K=%lld is not a multiple of %d", ln, (long long)pk->k, g);
    if (!pk->scales || pk->s_rows != rows || pk->s_cols != n || pk->s_elem != 1)
        return qv_fail(QV_ERR_SHAPE, "%s: packed scales are (%lld, %lld) x %zu bytes; the kernel reads (%lld, %lld) x 1",
                       ln, (long long)pk->s_rows, (long long)pk->s_cols, pk->s_elem, (long long)rows, (long long)n);
    if (pk->s_order != QV_SORDER_GROUP64_FP8)
        return qv_fail(QV_ERR_FORMAT, "%s: packed scales declare the %s order; the kernel reads them %s", ln,
                       order_name(pk->s_order), order_name(QV_SORDER_GROUP64_FP8));
    if (pk->zeros || pk->perm || pk->g_idx || v->zero_point || v->act_order)
        return qv_fail(QV_ERR_FORMAT, "%s has no zero points and no act_order", ln);
    /* NV bytes hold s * 2^s_pow2; vLLM folds 2^7 and lifts bf16 scales by at
     * most 2^3 (the smallest ue4m3 value, 2^-9, times 2^10 reaches 2). */
    if (nv ? (pk->s_pow2 < 7 || pk->s_pow2 > 10) : pk->s_pow2 != 0)
        return qv_fail(QV_ERR_FORMAT, "%s: packed scales carry 2^%d; %s", ln, pk->s_pow2,
                       nv ? "NVFP4 bytes carry 2^7 to 2^10" : "MXFP4 bytes are the e8m0 codes themselves");
    if (nv != (pk->scales2 != NULL) || (nv && pk->s2_cols != 1) || (nv && !p->scales2))
        return qv_fail(QV_ERR_FORMAT, "%s: %s", ln, nv ? "NVFP4 needs one f32 global scale in scales2"
                                                       : "MXFP4 has no second-level scale");
    if ((v->bias_fmt != QV_FMT_NONE) != (pk->bias != NULL))
        return qv_fail(QV_ERR_FORMAT, "%s: the packed operand %s a bias but the problem %s", ln,
                       pk->bias ? "has" : "lacks", pk->bias ? "has none" : "adds one");
    if (pk->bias && (pk->bias_cols != n || pk->bias_elem != qv_fmt_storage_bytes(v->bias_fmt)))
        return qv_fail(QV_ERR_SHAPE, "%s: packed bias is %lld x %zu bytes; the problem needs %lld %s values", ln,
                       (long long)pk->bias_cols, pk->bias_elem, (long long)n, qv_fmt_get(v->bias_fmt)->name);
    QV_ASSERT(p->scales != NULL, "ref_unpack needs the problem's scales buffer");

    const uint8_t *src = pk->scales;
    uint8_t *dst = p->scales;
    static const int pair4[4] = {0, 2, 1, 3};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) {
            /* The lane of groupID (c%64)/8 holds scale number x of its 8 (n8
             * half x of the 64-wide block): column 64(c/64) + (c%64)/8 + 8x. */
            int x = 4 * (int)(c % 8 / 4) + pair4[c % 4];
            int64_t col = c - c % 64 + c % 64 / 8 + 8 * x;
            uint8_t b = src[r * n + c];
            uint8_t code;
            if (!nv) {
                /* dequant_fp8_scales<bf16, e8m0> moves the code into a bf16
                 * exponent field: 0 reads as zero and 0xFF as +Inf. */
                if (b == 0 || b == 0xFF)
                    return qv_fail(QV_ERR_RANGE, "%s: packed e8m0 scale [%lld][%lld] = 0x%02X: the kernel reads it as %s",
                                   ln, (long long)r, (long long)c, b, b ? "+Inf, not NaN" : "zero, not 2^-127");
                code = b;
            } else {
                double kv = nv_byte_value(b, v->afmt);
                if (v->afmt == QV_FMT_BF16 && kv != nv_byte_value(b, QV_FMT_F16))
                    return qv_fail(QV_ERR_RANGE, "%s: packed scale [%lld][%lld] = 0x%02X: the bf16 kernel reads it as "
                                   "%g, not the %g its f16 form stands for (%s)", ln, (long long)r, (long long)c, b, kv,
                                   nv_byte_value(b, QV_FMT_F16),
                                   b >> 7 ? "an f16 Inf or NaN: the rescaled scale overflowed"
                                          : "top bit clear: the scale underflowed the rescale that should lift it "
                                            "to >= 2");
                double s = ldexp(kv, -pk->s_pow2);
                uint32_t cs = qv_encode(QV_FMT_UE4M3, s, QV_SAT_NONE);
                if (!isfinite(kv) || cs > 0x7E || qv_decode(QV_FMT_UE4M3, cs) != s)
                    return qv_fail(QV_ERR_RANGE, "%s: packed scale [%lld][%lld] = 0x%02X reads as %g = %g * 2^%d, and %g "
                                   "is not a ue4m3 value: the preparation lost the scale", ln, (long long)r,
                                   (long long)c, b, kv, s, pk->s_pow2, s);
                code = (uint8_t)cs;
            }
            dst[r * n + col] = code;
        }
    if (nv) {
        /* The kernel multiplies the fp32 accumulator, which holds the weights
         * times 2^-(bias) * 2^s_pow2, by this global scale. */
        float G = ((const float *)pk->scales2)[0];
        double gd = ldexp(G, pk->s_pow2 - fp4_dequant_bias(v->afmt));
        if (!isfinite(G) || fpclassify(G) == FP_SUBNORMAL || (double)(float)gd != gd)
            return qv_fail(QV_ERR_RANGE, "%s: packed global scale %g (the logical one times 2^%d) does not give a "
                           "global scale back exactly in f32", ln, (double)G,
                           fp4_dequant_bias(v->afmt) - pk->s_pow2);
        p->scales2[0] = (float)gd;
    }
    if (pk->bias) {
        QV_ASSERT(p->bias != NULL, "ref_unpack needs the problem's bias buffer");
        for (int64_t c = 0; c < n; c++) {
            const uint8_t *at = (const uint8_t *)pk->bias + (size_t)c * pk->bias_elem;
            uint32_t code = 0;
            memcpy(&code, at, pk->bias_elem); /* little-endian: the low bytes */
            p->bias[channel32_col(c)] = (float)qv_decode(v->bias_fmt, code);
        }
    }
    return QV_OK;
}

/* Every code of the packed weights into p->q at the (k, n) its position
 * function names; perm (k) maps a sorted row to its logical row, or is NULL. */
static void decode_weights(const qv_packed *pk, qv_problem *p, const int32_t *perm, int bits)
{
    const qv_layout l = pk->layout;
    const int per = 32 / bits, marlin = l != QV_LAYOUT_PLAIN_NK;
    const uint32_t *b = (const uint32_t *)pk->b;
    uint32_t mask = bits == 32 ? 0xFFFFFFFFu : (1u << bits) - 1;
    for (int64_t r = 0; r < pk->b_rows; r++)
        for (int64_t w = 0; w < pk->b_cols; w++) {
            uint32_t word = b[r * pk->b_cols + w];
            for (int t = 0; t < per; t++) {
                int64_t kk, nn;
                if (marlin) {
                    marlin_pos(l, r, w, t, &kk, &nn);
                } else {
                    kk = w * per + t;
                    nn = r;
                }
                if (perm) kk = perm[kk];
                put_code(p, kk, nn, (word >> (bits * t)) & mask);
            }
        }
}

qv_status ref_unpack(const qv_packed *pk, qv_problem *p)
{
    QV_ASSERT(pk != NULL && p != NULL && p->v != NULL, "ref_unpack needs a packed operand and a problem");
    const qv_variant *v = p->v;
    qv_layout l = pk->layout;
    const char *ln = qv_layout_name(l);
    if (l != v->layout)
        return qv_fail(QV_ERR_UNSUPPORTED, "packed layout %s does not match the problem's %s", ln,
                       qv_layout_name(v->layout));
    const int fp4 = qv_layout_is_fp4(l);
    if (pk->bias && !fp4) return qv_fail(QV_ERR_FORMAT, "%s: only the FP4 layouts pack a bias", ln);
    if (pk->k != p->k || pk->n != p->n)
        return qv_fail(QV_ERR_SHAPE, "%s: packed K=%lld N=%lld, problem K=%lld N=%lld", ln, (long long)pk->k,
                       (long long)pk->n, (long long)p->k, (long long)p->n);
    int bits = qv_fmt_code_bits(v->wfmt);
    if (!bits) return qv_fail(QV_ERR_DTYPE, "%s: no packed form of %s codes", ln, qv_fmt_get(v->wfmt)->name);
    int per = 32 / bits;
    int marlin = l != QV_LAYOUT_PLAIN_NK;
    if (marlin ? (pk->k % 16 || pk->n % 64) : (pk->k % per))
        return qv_fail(QV_ERR_SHAPE, "%s: K=%lld N=%lld is not a legal shape", ln, (long long)pk->k,
                       (long long)pk->n);
    int64_t want_rows = marlin ? pk->k / 16 : pk->n;
    int64_t want_cols = marlin ? 16 * pk->n / per : pk->k / per;
    if (pk->b_rows != want_rows || pk->b_cols != want_cols)
        return qv_fail(QV_ERR_SHAPE, "%s: packed weights are (%lld, %lld); K=%lld N=%lld needs (%lld, %lld)", ln,
                       (long long)pk->b_rows, (long long)pk->b_cols, (long long)pk->k, (long long)pk->n,
                       (long long)want_rows, (long long)want_cols);
    if (fp4) {
        QV_TRY(unpack_fp4_side(pk, p, ln));
        QV_ASSERT(p->q != NULL, "ref_unpack needs the problem's q buffer");
        decode_weights(pk, p, NULL, bits);
        return QV_OK;
    }
    /* Every side buffer must have the shape the problem's row declares. */
    int64_t srows = qv_problem_scale_rows(p), scols = qv_problem_scale_cols(p);
    size_t selem = v->scale_layout == QV_SCALE_BLOCK ? sizeof(float) : qv_fmt_storage_bytes(v->sfmt);
    if (srows * scols > 0 && !pk->scales)
        return qv_fail(QV_ERR_FORMAT, "%s: the problem has scales but the packed operand has none", ln);
    if ((srows * scols > 0 || pk->s_rows * pk->s_cols > 0) &&
        (pk->s_rows != srows || pk->s_cols != scols || pk->s_elem != selem))
        return qv_fail(QV_ERR_SHAPE, "%s: packed scales are (%lld, %lld) x %zu bytes; the problem needs (%lld, %lld) x %zu",
                       ln, (long long)pk->s_rows, (long long)pk->s_cols, pk->s_elem, (long long)srows,
                       (long long)scols, selem);
    /* The kernel reads the scales in its own order and with its own exponent
     * fold, whatever the operand declares: a declaration that differs is a
     * packer bug the kernel would read wrongly. */
    if (srows * scols > 0 && pk->s_order != kernel_scale_order(v, srows))
        return qv_fail(QV_ERR_FORMAT, "%s: packed scales declare the %s order; the kernel reads them %s", ln,
                       order_name(pk->s_order), order_name(kernel_scale_order(v, srows)));
    if (pk->s_pow2 != kernel_scale_pow2(v))
        return qv_fail(QV_ERR_FORMAT, "%s: packed scales carry 2^%d; the kernel's fp8 conversion needs 2^%d for %s activations",
                       ln, pk->s_pow2, kernel_scale_pow2(v), qv_fmt_get(v->afmt)->name);
    /* Block scales may carry their cuBLASLt forms in scales2 (checked below). */
    const int blk2 = v->scale_layout == QV_SCALE_BLOCK && pk->scales2 != NULL;
    if (!blk2 && (v->scale_layout == QV_SCALE_GROUP_CHANNEL) != (pk->scales2 != NULL))
        return qv_fail(QV_ERR_FORMAT, "%s: the packed operand %s second-level scales but the problem %s", ln,
                       pk->scales2 ? "has" : "lacks", pk->scales2 ? "has none" : "needs them");
    if ((v->zero_point != 0) != (pk->zeros != NULL))
        return qv_fail(QV_ERR_FORMAT, "%s: the packed operand %s zero points but the problem %s", ln,
                       pk->zeros ? "has" : "lacks", pk->zeros ? "has none" : "needs them");
    if (blk2) QV_TRY(check_block_scales2(pk, ln));
    else if (pk->scales2 && (v->scale_layout != QV_SCALE_GROUP_CHANNEL || pk->s2_cols != pk->n))
        return qv_fail(QV_ERR_SHAPE, "%s: packed scales2 has %lld columns; the problem needs %s", ln,
                       (long long)pk->s2_cols, v->scale_layout == QV_SCALE_GROUP_CHANNEL ? "N" : "none");
    if (pk->zeros && (!v->zero_point || p->g < 1 || pk->z_rows != p->k / p->g || pk->z_cols * 8 != pk->n))
        return qv_fail(QV_ERR_SHAPE, "%s: packed zero points are (%lld, %lld) int32; the problem needs (K/g, N/8)", ln,
                       (long long)pk->z_rows, (long long)pk->z_cols);
    if (v->act_order && (!pk->perm || !pk->g_idx))
        return qv_fail(QV_ERR_FORMAT, "%s: act_order problem but the packed operand has no perm/g_idx", ln);
    QV_ASSERT(p->q != NULL, "ref_unpack needs the problem's q buffer");

    /* The sorted row s holds logical row perm[s]; check perm is a permutation. */
    const int32_t *perm = v->act_order ? pk->perm : NULL;
    if (perm) {
        uint8_t *seen = calloc((size_t)pk->k, 1);
        QV_ASSERT(seen != NULL, "out of memory checking perm");
        for (int64_t s = 0; s < pk->k; s++) {
            if (perm[s] < 0 || perm[s] >= pk->k || seen[perm[s]]) {
                free(seen);
                return qv_fail(QV_ERR_FORMAT, "%s: perm is not a permutation of 0..K-1 (entry %lld)", ln,
                               (long long)s);
            }
            seen[perm[s]] = 1;
        }
        free(seen);
        for (int64_t s = 0; s < pk->k; s++) p->g_idx[perm[s]] = pk->g_idx[s];
    }

    decode_weights(pk, p, perm, bits);

    /* Scales: undo the permutation named by s_order, position by position. */
    if (pk->s_rows * pk->s_cols > 0) {
        QV_ASSERT(p->scales != NULL, "ref_unpack needs the problem's scales buffer");
        const uint8_t *src = pk->scales;
        uint8_t *dst = p->scales;
        for (int64_t r = 0; r < pk->s_rows; r++)
            for (int64_t c = 0; c < pk->s_cols; c++) {
                int64_t col = pk->s_order == QV_SORDER_GROUP64     ? group64_col(c)
                              : pk->s_order == QV_SORDER_CHANNEL32 ? channel32_col(c)
                                                                   : c;
                uint8_t *to = dst + (size_t)(r * pk->s_cols + col) * pk->s_elem;
                memcpy(to, src + (size_t)(r * pk->s_cols + c) * pk->s_elem, pk->s_elem);
                if (pk->s_pow2) scale_div_pow2(v->sfmt, to, pk->s_pow2);
            }
    }
    if (pk->scales2 && !blk2) {
        QV_ASSERT(p->scales2 != NULL, "ref_unpack needs the problem's scales2 buffer");
        const float *s2 = pk->scales2;
        /* PLAIN_NK keeps scales2 unpermuted; the Marlin family uses scale_perm_single. */
        for (int64_t c = 0; c < pk->s2_cols; c++) p->scales2[marlin ? channel32_col(c) : c] = s2[c];
    }
    if (pk->zeros) {
        /* Zero points: word w of a row, nibble t holds the zero point the lanes
         * of groupID (w%8) use in n8 half 2(t%4) + t/4 of their 64-wide block
         * (scale_perm placement, then the 4-bit nibble pairing of the
         * dequantizer): column 64*(w/8) + w%8 + 8*(2(t%4) + t/4). */
        QV_ASSERT(p->zeros != NULL, "ref_unpack needs the problem's zeros buffer");
        const uint32_t *z = pk->zeros;
        for (int64_t r = 0; r < pk->z_rows; r++)
            for (int64_t w = 0; w < pk->z_cols; w++)
                for (int t = 0; t < 8; t++) {
                    int64_t col = 64 * (w / 8) + w % 8 + 8 * (2 * (t % 4) + t / 4);
                    p->zeros[r * pk->n + col] = (uint8_t)((z[r * pk->z_cols + w] >> (4 * t)) & 0xF);
                }
    }
    return QV_OK;
}
