/* layout.h: packing logical weights into the layouts published kernels read
 * (Marlin, vLLM Marlin variants, QQQ), byte for byte. Included by the CLI
 * (`qvet pack`), the GPU runner, kernels' launchers and tests. Rule: packers are
 * written from the recipes in docs/design.md §7; the independent decoder in
 * reference/unpack.c (ref_unpack) never runs these tables backwards.
 *
 * ==== The packed layouts, for kernel writers ====
 *
 * Notation: q[k][n] is the stored code of the logical (K, N) weight matrix
 * (row k of W multiplies column k of A). lane = %laneid (0..31), gid = lane/4,
 * tig = lane%4. With act_order, "k" below is the *sorted* row (see perm).
 *
 * -- Marlin-family weights (MARLIN_W4, MARLIN_W4_ZP, QQQ_W4_*: 4-bit; MARLIN_W8,
 *    MARLIN_FP8: 8-bit). K % 16 == 0, N % 64 == 0.
 *   B is int32 (K/16, 16N*bits/32): (K/16, 2N) for 4-bit, (K/16, 4N) for 8-bit.
 *   Row kb of B holds k = 16kb..16kb+15. Along a row, each 16x64 block
 *   ("chunk" c: n = 64c..64c+63) occupies 128 words (4-bit) or 256 words
 *   (8-bit), the chunks in order of n. A chunk holds, for lane 0..31 in order,
 *   that lane's mma B-fragment values of the four 16x16 tiles j = 0..3
 *   (n = 64c + 16j + ...), each tile being two n8 halves h = 0,1
 *   (n = 64c + 16j + 8h + gid). The lane's fragment rows are
 *     Marlin/vLLM (f16/bf16 m16n8k16): element i = 0..3 at k = 2*tig + (i&1) + 8*(i>>1)
 *     QQQ (s8 m16n8k16):                element i = 0..3 at k = 4*tig + i
 *
 *   MARLIN_W4 / MARLIN_W4_ZP (u4 code, value q-8 or q-z) and QQQ_W4_GROUP (u4, q-8):
 *     word  = 128c + 4*lane + j          (4 words per lane, one per tile)
 *     nibble t (bits 4t..4t+3) holds h = (t%4)/2, element i = 2*((t%4)%2) + t/4,
 *     i.e.  t: 0     1     2     3     4     5     6     7
 *           h0,i0 h0,i2 h1,i0 h1,i2 h0,i1 h0,i3 h1,i1 h1,i3
 *     so nibbles t and t+4 form one half2 (rows k, k+1) after the lop3 dequant.
 *     Example: q[0][0] -> B[0][0] nibble 0; q[1][0] -> nibble 4; q[8][0] -> nibble 1;
 *     q[0][8] -> nibble 2; q[2][0] -> word 4; q[0][1] -> word 16; q[0][16] -> word 1.
 *   QQQ_W4_CHANNEL (signed int4 stored as q & 0xF):
 *     word  = 128c + 4*lane + j; nibble t holds h = 1 - t%2, element i = t/2:
 *           t: 0     1     2     3     4     5     6     7
 *              h1,i0 h0,i0 h1,i1 h0,i1 h1,i2 h0,i2 h1,i3 h0,i3
 *     so (w << 4) & 0xF0F0F0F0 is the s8 register of half 1 (bytes = 16*q of
 *     elements 0..3) and w & 0xF0F0F0F0 that of half 0.
 *     Example: q[0][0] -> B[0][0] nibble 1; q[0][8] -> nibble 0; q[4][0] -> word 4.
 *   MARLIN_W8 (u8 code, value q-128) and MARLIN_FP8 (e4m3 code):
 *     word  = 256c + 8*lane + 2j + h  (one word per n8 half)
 *     byte t holds element i = 2*(t%2) + t/2: bytes {0,2} = rows k, k+1 and
 *     bytes {1,3} = rows k+8, k+9 (the two half2 registers after prmt).
 *     Example: q[0][0] -> B[0][0] byte 0; q[8][0] -> byte 1; q[1][0] -> byte 2;
 *     q[0][8] -> word 1; q[0][16] -> word 2; q[2][0] -> word 8; q[0][1] -> word 32.
 *
 * -- Scales (same shape and dtype as the logical ones; s_order says which order):
 *   QV_SORDER_GROUP64 (scale_perm): in every row, each 64-wide block is stored
 *     as packed[64b + 8a + h] = logical[64b + a + 8h] (a = gid 0..7, h = n8 half
 *     0..7 of the block): the 8 scales one gid needs form one 16-byte vector.
 *   QV_SORDER_CHANNEL32 (scale_perm_single): each 32-wide block is stored as
 *     packed[32b + 8t + 2h + e] = logical[32b + 2t + e + 8h] (t = tig 0..3,
 *     h = 0..3, e = 0..1): the output columns 2*tig, 2*tig+1 of each n8 half.
 *   Which one: CHANNEL scales use CHANNEL32. GROUP scales use GROUP64, except
 *   that a single group (g == K) uses CHANNEL32, as Marlin and vLLM do (their
 *   kernels then treat the problem as channelwise). QQQ_W4_GROUP's f16 group
 *   scales always use GROUP64 and its f32 channel scales (scales2) CHANNEL32.
 *   QQQ_W4_CHANNEL's f32 scales use CHANNEL32. TENSOR scales (1, 1) are copied.
 *   MARLIN_FP8: the scales hold s * 2^s_pow2, s_pow2 = 8 for f16 activations and
 *     120 for bf16 (vLLM's fp8_fused_exponent_bias_into_scales): the kernel's
 *     bit-shift e4m3 -> f16/bf16 conversion yields value * 2^-8 (2^-120). The
 *     multiplication is exact; a scale that would overflow is refused.
 *
 * -- Zero points (MARLIN_W4_ZP, vLLM marlin_zero_points): int32 (K/g, N/8).
 *   In each row, word w nibble t holds the zero point of column
 *   64*(w/8) + (w%8) + 8*(2*(t%4) + t/4): gid w%8 of 64-wide block w/8, with
 *   the 4-bit nibble pairing above (nibbles t, t+4 = n8 halves 2(t%4), 2(t%4)+1).
 *   Always this order, even for a single group.
 *
 * -- act_order: the rows of q are sorted by g_idx (stable: rows of one group keep
 *   their order) before packing. perm[i] is the logical row that became sorted
 *   row i; the kernel must read A's column perm[i] as column i. g_idx[i] (in
 *   qv_packed) is the group of sorted row i, non-decreasing.
 *
 * -- Marlin FP4 (MARLIN_FP4_MX, MARLIN_FP4_NV; vLLM's marlin_utils_fp4.py and
 *    the Marlin kernel's kFE2M1f path). K % 16 == 0, N % 64 == 0, no act_order.
 *   Weights: e2m1 codes 0..15 (bit 3 the sign) in exactly the MARLIN_W4 words
 *     above (vLLM repacks them with gptq_marlin_repack, 4 bits): the kernel's
 *     fp4 dequant of q << 8 and of q pairs nibbles t and t + 4 as the lop3 path
 *     does. Example: q[1][0] -> B[0][0] nibble 4.
 *   Scales: one byte per (group, column), (K/g, N), g = 32 (MX) or 16 (NV),
 *     always QV_SORDER_GROUP64_FP8: scale_perm on every row, then inside
 *     every 4 bytes the order [0,2,1,3] (dequant_fp8_scales builds one half2
 *     from bytes {0,2} and one from {1,3}). Bytes:
 *     MX: the e8m0 code itself (2^(c-127)); codes 0 and 255 are refused, the
 *       kernel reads them as 0 and +Inf.
 *     NV: the S0E5M3 byte of s * 2^s_pow2: bits 14..7 of the f16 form of
 *       s * 2^s_pow2 (5 exponent bits, bias 15, and 3 mantissa bits; no sign).
 *       s_pow2 = 7 for f16 activations; for bf16, 7 + j with j >= 0 the
 *       smallest power that lifts the smallest nonzero s * 2^(7+j) to >= 2,
 *       because the bf16 kernel widens the byte's top exponent bit into
 *       bf16's top exponent bit and reads a byte below 0x80 as 2^-112 times
 *       its value. A scale whose s * 2^s_pow2 reaches 2^16 (the f16 form
 *       overflows) is refused.
 *   scales2 (NV only): (1) f32, g * 2^(bias - s_pow2), bias = 14 for f16 and
 *     126 for bf16 (the fp4 dequant moves e2m1 bits into the activation
 *     format and leaves the value 2^-bias too small). The kernel multiplies
 *     the fp32 accumulator by it before the output cast. Refused when it
 *     overflows or loses bits in f32.
 *   bias (optional): (N) codes of bias_fmt through scale_perm_single, the
 *     order in which the kernel's epilogue reads it (vLLM marlin_permute_bias).
 *
 * -- PLAIN_NK: the (N, K) transpose, row-major, codes packed along K lowest
 *   first: int32 (N, K*bits/32), i.e. exactly the little-endian bytes of the
 *   (N, K) code matrix (uint8 codes 4 per word, 16-bit codes 2 per word, 4-bit
 *   codes 8 per word). K must be a multiple of 32/bits. Scales (and scales2)
 *   are unpermuted copies of the logical ones (block scales included).
 */
#ifndef QVET_LAYOUT_H
#define QVET_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/problem.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 for MARLIN_FP4_MX and MARLIN_FP4_NV. */
int qv_layout_is_fp4(qv_layout l);

/* Which permutation the packed scales went through (see the layout notes above). */
typedef enum qv_scale_order {
    QV_SORDER_PLAIN = 0,   /* unpermuted: tensor scales, PLAIN_NK */
    QV_SORDER_GROUP64,     /* scale_perm, in 64-wide blocks */
    QV_SORDER_CHANNEL32,   /* scale_perm_single, in 32-wide blocks */
    QV_SORDER_GROUP64_FP8  /* 8-bit scales: scale_perm, then each 4 bytes in the order [0,2,1,3] */
} qv_scale_order;

/* The packed form of a problem's weights: what a kernel reads. */
typedef struct qv_packed {
    qv_layout layout;
    int64_t k, n;
    int g;               /* group size, 0 when the scales are not grouped */
    int32_t *b;          /* packed weights, b_rows x b_cols int32 (Marlin: (k/16, 2n) for 4-bit) */
    int64_t b_rows, b_cols;
    void *scales;        /* permuted scales, same shape and dtype as the logical ones */
    int64_t s_rows, s_cols;
    size_t s_elem;       /* bytes per scale element */
    qv_scale_order s_order;
    int s_pow2;          /* MARLIN_FP8: the scales hold s * 2^s_pow2 (8 for f16 activations,
                            120 for bf16), the exponent bias the kernel's fp8 conversion omits;
                            MARLIN_FP4_NV: the S0E5M3 bytes hold s * 2^s_pow2 (7, or more for
                            bf16 when small scales are lifted; see the layout notes) */
    void *scales2;       /* permuted second-level scales (QQQ group: (1, n) f32) or NULL; for
                            128x128 block scales (plain-nk), the same scales in the two
                            layouts cuBLASLt's fp8 scaling reads (qv_block_scales2_cols) */
    int64_t s2_cols;
    void *zeros;         /* packed zero points (marlin-w4-zp): (k/g, n/8) int32, or NULL */
    int64_t z_bytes;
    int64_t z_rows, z_cols;
    int32_t *perm;       /* act_order: (k) logical row of each sorted row, or NULL */
    int32_t *g_idx;      /* act_order: (k) group of each sorted row, g_idx[perm[i]]
                            (non-decreasing; what vLLM passes the kernel), or NULL */
    void *bias;          /* FP4 layouts with a bias: (n) codes of the row's bias_fmt (2 or 4
                            bytes each) in scale_perm_single order; else NULL */
    int64_t bias_cols;
    size_t bias_elem;    /* bytes per bias element */
} qv_packed;

/* Packs p's weights into p->v->layout. Validates shape, q range and dtypes
 * first; on any refusal *out is left zeroed (nothing to destroy). On success
 * the caller frees it with qv_packed_destroy. */
qv_status qv_pack(const qv_problem *p, qv_packed *out);
void      qv_packed_destroy(qv_packed *pk);

/* Columns of the (1, ...) f32 scales2 that qv_pack derives from (kb, nb) =
 * (ceil(k/128), ceil(n/128)) block scales s: first (kb, n), one scale per
 * 128 K of every weight row (cuBLASLt's VEC128: index b n + j holds s[b][j /
 * 128]); then (nb, kb4), kb4 = kb rounded up to 4, the blocks of each 128
 * rows with their K blocks contiguous (cuBLASLt's BLK128x128: index c kb4 +
 * b holds s[b][c], 0 for b >= kb). kb n + nb kb4 in all. The weights' scales
 * stay in `scales` as they are; these are what the cuBLASLt path of the
 * block row reads instead of expanding them at every launch. */
int64_t qv_block_scales2_cols(int64_t n, int64_t k);

/* Packs from logical arrays (qvet pack), whose dtypes name the formats: q (K, N)
 * int8/uint8 codes (int8 -8..7 for qqq-w4-channel; uint8 for marlin-w8 and
 * marlin-fp8; int8, uint8, f16 or bf16 '<u2' for plain-nk); scales (K/g, N),
 * (1, N) or (1, 1) in f16, bf16 ('<u2') or f32, the group size being K / rows;
 * scales2 (1, N) f32 (qqq-w4-group only); zeros (K/g, N) int8/uint8
 * (marlin-w4-zp only); g_idx (K) int32/int64 (turns on act_order). Any of the
 * optional arrays may be NULL. Refuses like qv_pack. */
struct qv_array;
qv_status qv_pack_arrays(qv_layout layout, const struct qv_array *q, const struct qv_array *scales,
                         const struct qv_array *scales2, const struct qv_array *zeros,
                         const struct qv_array *g_idx, qv_packed *out);

/* Packs the FP4 layouts from logical arrays (qvet pack): q (K, N) uint8 e2m1
 * codes 0..15; scales (K/g, N) uint8 codes, e8m0 for marlin-fp4-mx (g = 32)
 * and ue4m3 for marlin-fp4-nv (g = 16); scales2 the NV global scale, f32 of
 * one element ((1) or (1, 1)), NULL for MX; bias (N) or (1, N) in float16,
 * bf16 ('<u2') or float32, or NULL; afmt the activation format the kernel
 * runs with (F16 or BF16: NV's scale bytes and global scale depend on it).
 * Refuses like qv_pack. */
qv_status qv_pack_arrays_fp4(qv_layout layout, qv_fmt afmt, const struct qv_array *q, const struct qv_array *scales,
                             const struct qv_array *scales2, const struct qv_array *bias, qv_packed *out);

/* The order qv_pack stores a layout's scales in (see the notes above), for a
 * scale layout whose logical scales have `scale_rows` rows; and the power of
 * two folded into them (MARLIN_FP8: 8 for f16 activations, 120 for bf16; 0
 * otherwise, MARLIN_FP4_NV included: its power depends on the scales and
 * travels in qv_packed.s_pow2). Readers of packed files use these instead of
 * re-deriving them. */
qv_scale_order qv_layout_scale_order(qv_layout layout, qv_scale_layout sl, int64_t scale_rows);
int            qv_layout_scale_pow2(qv_layout layout, qv_fmt afmt);

/* The scale permutations of Marlin/QQQ (docs/design.md §7), as tables. */
void qv_scale_perm(int perm[64]);         /* grouped: scale_perm[8i+j] = i + 8j */
void qv_scale_perm_single(int perm[32]);  /* channelwise: {2i+j : j in {0,1,8,9,16,17,24,25}} */

/* Checkpoint readers into logical form (src/checkpoint.c). GPTQ: qweight
 * (k/8, n) int32 packed along K, qzeros (k/g, n/8) int32 packed along N storing
 * z-1 (v1_zeros = 1; a stored 15, i.e. z = 16, is refused) or z (v2). AWQ:
 * qweight (k, n/8) packed along N in the order [0,2,4,6,1,3,5,7] (nibble i holds
 * column 8c + order[i]), qzeros (k/g, n/8) likewise. Every nibble is masked
 * with & 0xF on the unsigned word. Outputs: q_out (k, n) u4 codes; z_out
 * (k/g, n) u4 zero points, written only when qzeros is not NULL. */
qv_status qv_gptq_unpack(const int32_t *qweight, const int32_t *qzeros, int64_t k, int64_t n, int g,
                         int v1_zeros, uint8_t *q_out, uint8_t *z_out);
qv_status qv_awq_unpack(const int32_t *qweight, const int32_t *qzeros, int64_t k, int64_t n, int g,
                        uint8_t *q_out, uint8_t *z_out);

#ifdef __cplusplus
}
#endif
#endif
