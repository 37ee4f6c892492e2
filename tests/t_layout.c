/* t_layout.c: the packers (layout.h), the independent decoder (ref_unpack) and
 * the GPTQ/AWQ checkpoint readers.
 *
 * Three independent witnesses:
 *  - the published vectors in tests/data/golden (QVET_GOLDEN overrides the
 *    folder): packing their logical q and scales gives their bytes exactly, and
 *    decoding their bytes gives their logical arrays back;
 *  - one-hot positions worked out by hand from the mma fragment tables (which
 *    nibble of which word holds q[k][n]), written down below as numbers;
 *  - pack -> ref_unpack is the identity on random data, for every registry
 *    row, many shapes and every legal group size.
 * Checkpoint readers are checked against a bit-level construction written here
 * from the format descriptions (GPTQ along K, AWQ along N in order
 * [0,2,4,6,1,3,5,7]).
 *
 * Random cases come from (seed, index); the seed is printed and can be replayed
 * with QVET_SEED=<seed>. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/array.h"
#include "qvet/layout.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "support/cases.h"
#include "support/ckpt.h"
#include "support/golden.h"
#include "support/rand.h"
#include "support/suite.h"

static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */

/* The i-th random word of stream `stream`: a pure function of (seed, stream, i). */
static uint64_t rnd(uint64_t stream, uint64_t i) { return test_rnd(g_seed, stream, i); }

/* ---- random problems --------------------------------------------------- */

/* A random scale code of `sfmt` whose value stays below 2^8 in magnitude, so
 * that the fp8 exponent fold (x 2^8 in f16, x 2^120 in bf16) cannot overflow:
 * f16 exponent field 1..22 (2^-14 .. 2^8), bf16/f32 exponent field 1..134. */
static void random_scale(qv_fmt sfmt, uint64_t r, void *out)
{
    if (sfmt == QV_FMT_F16) {
        uint16_t h = (uint16_t)(((r >> 20) & 1) << 15 | (1 + r % 22) << 10 | ((r >> 8) & 0x3FF));
        memcpy(out, &h, 2);
    } else if (sfmt == QV_FMT_BF16) {
        uint16_t h = (uint16_t)(((r >> 20) & 1) << 15 | (1 + r % 134) << 7 | ((r >> 8) & 0x7F));
        memcpy(out, &h, 2);
    } else {
        uint32_t f = (uint32_t)(((r >> 40) & 1) << 31 | (1 + r % 134) << 23 | ((r >> 8) & 0x7FFFFF));
        memcpy(out, &f, 4);
    }
}

/* A random 8-bit scale code: e8m0 1..254 (0 and 255 are refused by the MXFP4
 * layout), ue4m3 0 or 0x20..0x5F (2^-3 .. 30: a span every NVFP4 preparation
 * can carry, bf16's lift included). */
static uint8_t random_scale8(qv_fmt sfmt, uint64_t r)
{
    if (sfmt == QV_FMT_E8M0) return (uint8_t)(1 + r % 254);
    return r % 17 == 0 ? 0 : (uint8_t)(0x20 + (r >> 8) % 0x40);
}

/* A random bias value exact in bias_fmt: a random code, NaN and Inf avoided. */
static float random_bias(qv_fmt bf, uint64_t r)
{
    if (bf == QV_FMT_F16) return qv_f16_to_f32((uint16_t)(((r >> 20) & 1) << 15 | (r % 30) << 10 | ((r >> 8) & 0x3FF)));
    if (bf == QV_FMT_BF16) return qv_bf16_to_f32((uint16_t)(((r >> 20) & 1) << 15 | (r % 254) << 7 | ((r >> 8) & 0x7F)));
    return (float)ldexp((double)(int64_t)(r % 2000001) - 1000000.0, (int)((r >> 32) % 40) - 30);
}

static void fill_random(qv_problem *p, uint64_t stream)
{
    const qv_variant *v = p->v;
    int64_t kn = p->k * p->n;
    for (int64_t i = 0; i < kn; i++) {
        uint64_t r = rnd(stream, (uint64_t)i);
        switch (v->wfmt) {
        case QV_FMT_U4:
        case QV_FMT_E2M1: ((uint8_t *)p->q)[i] = (uint8_t)(r % 16); break;
        case QV_FMT_I4: ((int8_t *)p->q)[i] = (int8_t)((int)(r % 16) - 8); break;
        case QV_FMT_F16:
        case QV_FMT_BF16: ((uint16_t *)p->q)[i] = (uint16_t)r; break;
        default: ((uint8_t *)p->q)[i] = (uint8_t)r; break;
        }
    }
    int64_t ns = qv_problem_scale_rows(p) * qv_problem_scale_cols(p);
    size_t se = v->scale_layout == QV_SCALE_BLOCK ? 4 : qv_fmt_storage_bytes(v->sfmt);
    qv_fmt sf = v->scale_layout == QV_SCALE_BLOCK ? QV_FMT_F32 : v->sfmt;
    for (int64_t i = 0; i < ns; i++) {
        uint64_t r = rnd(stream + 1, (uint64_t)i);
        if (se == 1) ((uint8_t *)p->scales)[i] = random_scale8(sf, r);
        else random_scale(sf, r, (uint8_t *)p->scales + i * se);
    }
    if (p->scales2 && v->s2_layout == QV_SCALE_TENSOR) {
        /* A global scale in [2^-20, 2^8): NVFP4's rewrite (x 2^7 or 2^119) stays in f32. */
        uint64_t r = rnd(stream + 2, 0);
        p->scales2[0] = (float)ldexp(1.0 + (double)(r % 256) / 256.0, (int)((r >> 16) % 28) - 20);
    } else if (p->scales2) {
        for (int64_t i = 0; i < p->n; i++) random_scale(QV_FMT_F32, rnd(stream + 2, (uint64_t)i), &p->scales2[i]);
    }
    if (p->bias)
        for (int64_t i = 0; i < p->n; i++) p->bias[i] = random_bias(v->bias_fmt, rnd(stream + 5, (uint64_t)i));
    if (p->zeros)
        for (int64_t i = 0; i < p->k / p->g * p->n; i++) p->zeros[i] = (uint8_t)(rnd(stream + 3, (uint64_t)i) % 16);
    if (p->g_idx)
        for (int64_t i = 0; i < p->k; i++) p->g_idx[i] = (int32_t)(rnd(stream + 4, (uint64_t)i) % (uint64_t)(p->k / p->g));
}

/* Packs p, decodes it into a fresh problem poisoned with 0xA5 bytes (never a
 * valid u4 code, so a position the decoder misses shows up), and compares every
 * buffer byte for byte. Returns the number of differing buffers. */
static int roundtrip(const qv_problem *p, const char *what)
{
    qv_packed pk;
    qv_status st = qv_pack(p, &pk);
    ck_assert_msg(st == QV_OK, "%s: qv_pack: %s", what, qv_errmsg());
    qv_problem d;
    ck_assert_msg(qv_problem_create(&d, p->v, p->m, p->n, p->k) == QV_OK, "%s: %s", what, qv_errmsg());
    d.g = p->g;
    size_t qb = (size_t)(p->k * p->n) * qv_fmt_storage_bytes(p->v->wfmt);
    int64_t ns = qv_problem_scale_rows(p) * qv_problem_scale_cols(p);
    size_t sb = (size_t)ns * (p->v->scale_layout == QV_SCALE_BLOCK ? 4 : qv_fmt_storage_bytes(p->v->sfmt));
    const size_t s2b = (size_t)qv_problem_scale2_count(p) * 4;
    /* Only the FP4 layouts pack a bias; elsewhere the kernel reads it logically. */
    const size_t bb = d.bias && qv_layout_is_fp4(p->v->layout) ? (size_t)p->n * 4 : 0;
    memset(d.q, 0xA5, qb);
    if (sb) memset(d.scales, 0xA5, sb);
    if (d.scales2) memset(d.scales2, 0xA5, s2b);
    if (bb) memset(d.bias, 0xA5, bb);
    if (d.zeros) memset(d.zeros, 0xA5, (size_t)(p->k / p->g * p->n));
    if (d.g_idx) memset(d.g_idx, 0xA5, (size_t)p->k * 4);
    st = ref_unpack(&pk, &d);
    ck_assert_msg(st == QV_OK, "%s: ref_unpack: %s", what, qv_errmsg());
    int bad = 0;
    if (memcmp(d.q, p->q, qb)) bad++, fprintf(stderr, "%s: q differs\n", what);
    if (sb && memcmp(d.scales, p->scales, sb)) bad++, fprintf(stderr, "%s: scales differ\n", what);
    if (d.scales2 && memcmp(d.scales2, p->scales2, s2b)) bad++, fprintf(stderr, "%s: scales2 differ\n", what);
    if (bb && memcmp(d.bias, p->bias, bb)) bad++, fprintf(stderr, "%s: bias differs\n", what);
    if (d.zeros && memcmp(d.zeros, p->zeros, (size_t)(p->k / p->g * p->n))) bad++, fprintf(stderr, "%s: zeros differ\n", what);
    if (d.g_idx && memcmp(d.g_idx, p->g_idx, (size_t)p->k * 4)) bad++, fprintf(stderr, "%s: g_idx differs\n", what);
    if (pk.perm) {
        /* act_order: groups of the sorted rows never decrease, and rows of one
         * group keep their logical order (a stable sort). */
        for (int64_t i = 1; i < p->k; i++) {
            ck_assert_msg(pk.g_idx[i - 1] <= pk.g_idx[i], "%s: sorted g_idx decreases at %lld", what, (long long)i);
            if (pk.g_idx[i - 1] == pk.g_idx[i])
                ck_assert_msg(pk.perm[i - 1] < pk.perm[i], "%s: sort is not stable at %lld", what, (long long)i);
        }
    }
    qv_problem_destroy(&d);
    qv_packed_destroy(&pk);
    return bad;
}

/* Every registry row, at many legal shapes (n up to 256+64, k from 16 to 512). */
START_TEST(roundtrip_registry)
{
    const qv_variant *v = qv_registry_get(_i);
    static const int64_t ns[] = {8, 64, 128, 192, 320};
    static const int64_t ks[] = {16, 32, 48, 80, 128, 256, 384, 512};
    int cases = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
            int64_t n = ns[a], k = ks[b];
            if (n % v->n_tile || k % v->k_tile || (v->g && k % v->g)) continue;
            qv_problem p;
            if (qv_problem_create(&p, v, 1, n, k) != QV_OK) continue; /* e.g. int32 overflow rule */
            uint64_t stream = (uint64_t)_i * 1000 + a * 10 + b;
            fill_random(&p, stream * 8);
            char what[160];
            snprintf(what, sizeof what, "%s n=%lld k=%lld (seed %" PRIu64 ", stream %" PRIu64 ")", v->name,
                     (long long)n, (long long)k, g_seed, stream * 8);
            ck_assert_msg(roundtrip(&p, what) == 0, "%s: pack -> ref_unpack is not the identity", what);
            qv_problem_destroy(&p);
            cases++;
        }
    ck_assert_msg(cases >= 3, "%s: only %d shapes were legal", v->name, cases);
}
END_TEST

/* The cuBLASLt forms of 128x128 block scales that qv_pack puts in scales2
 * (layout.h): K = 384 and N = 136 give 3 x 2 blocks, s[b][c] = 1 + 10 b + c.
 * Expected positions from the layout's definition: the (kb, n) form repeats
 * s[b][j / 128] along each row; the (nb, kb4) form holds block column c's
 * K blocks contiguous, padded to 4 with zeros. ref_unpack must refuse a
 * scales2 with one element changed, or of another length. */
START_TEST(block_scales2)
{
    const qv_variant *v = qv_variant_find("w8a8-fp8-block128");
    ck_assert_ptr_nonnull(v);
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, 1, 136, 384), QV_OK);
    fill_random(&p, 77);
    float *s = p.scales;
    for (int b = 0; b < 3; b++)
        for (int c = 0; c < 2; c++) s[b * 2 + c] = (float)(1 + 10 * b + c);
    qv_packed pk;
    ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(pk.s2_cols, 3 * 136 + 2 * 4);
    ck_assert_int_eq(qv_block_scales2_cols(136, 384), 3 * 136 + 2 * 4);
    const float *s2 = pk.scales2;
    /* (kb, n): row b, columns 0..127 block 0, 128..135 block 1 */
    ck_assert(s2[0] == 1.0f && s2[127] == 1.0f && s2[128] == 2.0f && s2[135] == 2.0f);
    ck_assert(s2[136] == 11.0f && s2[136 + 128] == 12.0f && s2[2 * 136 + 5] == 21.0f && s2[2 * 136 + 135] == 22.0f);
    /* (nb, kb4): column block 0 = 1, 11, 21, 0; column block 1 = 2, 12, 22, 0 */
    const float *blk = s2 + 3 * 136;
    static const float want[8] = {1, 11, 21, 0, 2, 12, 22, 0};
    for (int i = 0; i < 8; i++) ck_assert_msg(blk[i] == want[i], "block form [%d] = %g, expected %g", i, blk[i], want[i]);

    qv_problem d;
    ck_assert_int_eq(qv_problem_create(&d, v, 1, 136, 384), QV_OK);
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
    ((float *)pk.scales2)[136 + 130] = 11.0f; /* block (1, 1) is 12 */
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
    ck_assert_msg(strstr(qv_errmsg(), "scales2[266]") != NULL, "%s", qv_errmsg());
    ((float *)pk.scales2)[136 + 130] = 12.0f;
    ((float *)pk.scales2)[3 * 136 + 3] = 5.0f; /* padding must stay 0 */
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
    ((float *)pk.scales2)[3 * 136 + 3] = 0.0f;
    pk.s2_cols--;
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_SHAPE);
    pk.s2_cols++;
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
    qv_problem_destroy(&d);
    qv_packed_destroy(&pk);
    qv_problem_destroy(&p);
}
END_TEST

/* Every group size that is a multiple of 16 and divides K, on each grouped
 * Marlin-family layout, with and without act_order. */
START_TEST(roundtrip_every_g)
{
    static const char *const rows[] = {"marlin-w4a16-g128-f16", "marlin-w4a16-g128-zp-f16", "marlin-w4a16-g128-act-f16",
                                       "marlin-w8a16-g128-bf16", "marlin-fp8a16-g128-f16", "marlin-fp8a16-g128-bf16",
                                       "qqq-w4a8-g128"};
    int cases = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const qv_variant *base = qv_variant_find(rows[r]);
        ck_assert_msg(base != NULL, "registry row %s is missing", rows[r]);
        for (int64_t k = 16; k <= 512; k += 16)
            for (int g = 16; g <= k; g += 16) {
                if (k % g) continue;
                qv_variant v = *base;
                v.g = g;
                if (v.zero_point) v.zp_g = g;
                int64_t n = 64 * (int64_t)(1 + rnd(78, (uint64_t)(k * 1000 + g)) % 3);
                qv_problem p;
                ck_assert_msg(qv_problem_create(&p, &v, 1, n, k) == QV_OK, "%s: %s", rows[r], qv_errmsg());
                uint64_t stream = 500000 + r * 100000 + (uint64_t)k * 600 + (uint64_t)g;
                fill_random(&p, stream * 8);
                char what[160];
                snprintf(what, sizeof what, "%s g=%d n=%lld k=%lld (seed %" PRIu64 ", stream %" PRIu64 ")", rows[r], g,
                         (long long)n, (long long)k, g_seed, stream * 8);
                ck_assert_msg(roundtrip(&p, what) == 0, "%s: pack -> ref_unpack is not the identity", what);
                qv_problem_destroy(&p);
                cases++;
            }
    }
    ck_assert_msg(cases > 700, "only %d group-size cases ran", cases);
}
END_TEST

/* plain-nk with 4-bit codes (fp4 e2m1, no registry row yet): 8 codes per
 * int32 along K; q[k][n] sits in word (n, k/8), nibble k%8. */
START_TEST(plain_4bit)
{
    const qv_variant *base = qv_variant_find("cublas-f16");
    ck_assert(base != NULL);
    qv_variant v = *base;
    v.wfmt = QV_FMT_E2M1;
    qv_problem p;
    ck_assert(qv_problem_create(&p, &v, 1, 24, 40) == QV_OK);
    fill_random(&p, 70000);
    ck_assert_msg(roundtrip(&p, "plain-nk e2m1 n=24 k=40") == 0, "pack -> ref_unpack is not the identity");
    qv_packed pk;
    ck_assert(qv_pack(&p, &pk) == QV_OK);
    ck_assert_int_eq(pk.b_rows, 24);
    ck_assert_int_eq(pk.b_cols, 5);
    const uint8_t *q = p.q;
    for (int64_t kk = 0; kk < 40; kk++)
        for (int64_t j = 0; j < 24; j++)
            ck_assert_uint_eq(((uint32_t)pk.b[j * 5 + kk / 8] >> (4 * (kk % 8))) & 0xFu, q[kk * 24 + j]);
    qv_packed_destroy(&pk);
    ((uint8_t *)p.q)[3] = 16;
    ck_assert_int_eq(qv_pack(&p, &pk), QV_ERR_RANGE);
    qv_problem_destroy(&p);
}
END_TEST

/* ---- hand-derived one-hot positions ------------------------------------ */

/* Where q[k][n] lands, worked out on paper from the fragment tables (see the
 * derivation in reference/unpack.c and layout.h): B row, word, slot. */
typedef struct onehot {
    qv_layout layout;
    int k, n;
    int row, word, slot;
} onehot;

static const onehot onehots[] = {
    /* Marlin W4: f16 B fragment, nibble t holds element 2(t%4) + t/4. */
    {QV_LAYOUT_MARLIN_W4, 0, 0, 0, 0, 0},     {QV_LAYOUT_MARLIN_W4, 1, 0, 0, 0, 4},
    {QV_LAYOUT_MARLIN_W4, 8, 0, 0, 0, 1},     {QV_LAYOUT_MARLIN_W4, 9, 0, 0, 0, 5},
    {QV_LAYOUT_MARLIN_W4, 0, 8, 0, 0, 2},     {QV_LAYOUT_MARLIN_W4, 9, 8, 0, 0, 7},
    {QV_LAYOUT_MARLIN_W4, 2, 0, 0, 4, 0},     {QV_LAYOUT_MARLIN_W4, 0, 1, 0, 16, 0},
    {QV_LAYOUT_MARLIN_W4, 0, 16, 0, 1, 0},    {QV_LAYOUT_MARLIN_W4, 0, 64, 0, 128, 0},
    {QV_LAYOUT_MARLIN_W4, 16, 0, 1, 0, 0},    {QV_LAYOUT_MARLIN_W4, 15, 63, 0, 127, 7},
    /* Marlin W8 / FP8: byte t holds element 2(t%2) + t/2, one word per n8 half. */
    {QV_LAYOUT_MARLIN_W8, 0, 0, 0, 0, 0},     {QV_LAYOUT_MARLIN_W8, 8, 0, 0, 0, 1},
    {QV_LAYOUT_MARLIN_W8, 1, 0, 0, 0, 2},     {QV_LAYOUT_MARLIN_W8, 9, 0, 0, 0, 3},
    {QV_LAYOUT_MARLIN_W8, 0, 8, 0, 1, 0},     {QV_LAYOUT_MARLIN_W8, 0, 16, 0, 2, 0},
    {QV_LAYOUT_MARLIN_W8, 2, 0, 0, 8, 0},     {QV_LAYOUT_MARLIN_W8, 0, 1, 0, 32, 0},
    {QV_LAYOUT_MARLIN_W8, 0, 64, 0, 256, 0},  {QV_LAYOUT_MARLIN_FP8, 9, 8, 0, 1, 3},
    /* QQQ channelwise: s8 fragment rows 4*tig + i; nibble t holds element 4(1 - t%2) + t/2. */
    {QV_LAYOUT_QQQ_W4_CHANNEL, 0, 0, 0, 0, 1}, {QV_LAYOUT_QQQ_W4_CHANNEL, 0, 8, 0, 0, 0},
    {QV_LAYOUT_QQQ_W4_CHANNEL, 1, 0, 0, 0, 3}, {QV_LAYOUT_QQQ_W4_CHANNEL, 3, 8, 0, 0, 6},
    {QV_LAYOUT_QQQ_W4_CHANNEL, 4, 0, 0, 4, 1}, {QV_LAYOUT_QQQ_W4_CHANNEL, 0, 1, 0, 16, 1},
    /* QQQ per-group: s8 fragment rows, Marlin's 4-bit nibble pairing. */
    {QV_LAYOUT_QQQ_W4_GROUP, 0, 0, 0, 0, 0},  {QV_LAYOUT_QQQ_W4_GROUP, 1, 0, 0, 0, 4},
    {QV_LAYOUT_QQQ_W4_GROUP, 2, 0, 0, 0, 1},  {QV_LAYOUT_QQQ_W4_GROUP, 0, 8, 0, 0, 2},
    {QV_LAYOUT_QQQ_W4_GROUP, 4, 0, 0, 4, 0},  {QV_LAYOUT_QQQ_W4_GROUP, 3, 8, 0, 0, 7},
};

static const qv_variant *row_for_layout(qv_layout l)
{
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (v->layout == l && !v->act_order) return v;
    }
    return NULL;
}

START_TEST(onehot_positions)
{
    const onehot *o = &onehots[_i];
    const qv_variant *v = row_for_layout(o->layout);
    ck_assert(v != NULL);
    qv_problem p;
    int64_t k = 128, n = 128;
    ck_assert_msg(qv_problem_create(&p, v, 1, n, k) == QV_OK, "%s", qv_errmsg());
    /* Background code 0, the target code 5 (a valid code in every format). */
    ((uint8_t *)p.q)[o->k * n + o->n] = 5;
    int64_t ns = qv_problem_scale_rows(&p) * qv_problem_scale_cols(&p);
    for (int64_t i = 0; i < ns; i++) {
        uint16_t one16 = 0x3C00; /* 1.0 in f16 */
        float one32 = 1.0f;
        if (v->sfmt == QV_FMT_F32) memcpy((float *)p.scales + i, &one32, 4);
        else memcpy((uint16_t *)p.scales + i, &one16, 2);
    }
    if (p.scales2)
        for (int64_t i = 0; i < n; i++) p.scales2[i] = 1.0f;
    qv_packed pk;
    ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s", qv_errmsg());
    int bits = (o->layout == QV_LAYOUT_MARLIN_W8 || o->layout == QV_LAYOUT_MARLIN_FP8) ? 8 : 4;
    for (int64_t r = 0; r < pk.b_rows; r++)
        for (int64_t w = 0; w < pk.b_cols; w++) {
            uint32_t got = (uint32_t)pk.b[r * pk.b_cols + w];
            uint32_t want = (r == o->row && w == o->word) ? 5u << (bits * o->slot) : 0u;
            ck_assert_msg(got == want, "%s q[%d][%d]: B[%lld][%lld] = 0x%08x, expected 0x%08x",
                          qv_layout_name(o->layout), o->k, o->n, (long long)r, (long long)w, got, want);
        }
    qv_packed_destroy(&pk);
    qv_problem_destroy(&p);
}
END_TEST

/* Zero points of marlin-w4-zp: where z[0][col] lands, worked out by hand
 * (word col%8 + 8*(col/64) of the row, nibble t with 2(t%4) + t/4 = (col%64)/8). */
START_TEST(onehot_zeros)
{
    static const int cases[][3] = {/* col, word, nibble */
                                   {0, 0, 0}, {1, 1, 0}, {8, 0, 4}, {16, 0, 1}, {9, 1, 4},
                                   {24, 0, 5}, {63, 7, 7}, {64, 8, 0}, {127, 15, 7}};
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-zp-f16");
    ck_assert(v != NULL);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        qv_problem p;
        ck_assert(qv_problem_create(&p, v, 1, 128, 256) == QV_OK);
        p.zeros[cases[c][0]] = 11;
        qv_packed pk;
        ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s", qv_errmsg());
        ck_assert_int_eq(pk.z_rows, 2);
        ck_assert_int_eq(pk.z_cols, 16);
        const uint32_t *z = (const uint32_t *)pk.zeros;
        for (int64_t w = 0; w < pk.z_rows * pk.z_cols; w++) {
            uint32_t want = w == cases[c][1] ? 11u << (4 * cases[c][2]) : 0u;
            ck_assert_msg(z[w] == want, "z[0][%d]: zeros word %lld = 0x%08x, expected 0x%08x", cases[c][0],
                          (long long)w, z[w], want);
        }
        qv_packed_destroy(&pk);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* The scale permutations against docs/design.md §7's closed forms. */
START_TEST(scale_perm_tables)
{
    int sp[64], sps[32], seen[64] = {0};
    qv_scale_perm(sp);
    qv_scale_perm_single(sps);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) ck_assert_int_eq(sp[8 * i + j], i + 8 * j);
    static const int offs[8] = {0, 1, 8, 9, 16, 17, 24, 25};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) ck_assert_int_eq(sps[8 * i + j], 2 * i + offs[j]);
    for (int i = 0; i < 32; i++) seen[sps[i]]++;
    for (int i = 0; i < 32; i++) ck_assert_int_eq(seen[i], 1);
}
END_TEST

/* ---- the published vectors ---------------------------------------------- */

typedef struct golden_case {
    const char *dir;
    qv_layout layout;
    const char *q, *s, *s_packed, *s2, *s2_packed;
} golden_case;

static const golden_case goldens[] = {
    {"marlin_w4a16_k128_n256_g-1", QV_LAYOUT_MARLIN_W4, "q_logical_kxn_uint4", "scales_logical_gxn_f16",
     "scales_packed_f16", NULL, NULL},
    {"marlin_w4a16_k256_n256_g128", QV_LAYOUT_MARLIN_W4, "q_logical_kxn_uint4", "scales_logical_gxn_f16",
     "scales_packed_f16", NULL, NULL},
    {"qqq_w4a8_k128_n256_g-1", QV_LAYOUT_QQQ_W4_CHANNEL, "q_logical_kxn_int4", "s_channel_logical_1xn_f32",
     "s_channel_packed_f32", NULL, NULL},
    {"qqq_w4a8_k256_n256_g128", QV_LAYOUT_QQQ_W4_GROUP, "q_logical_kxn_uint4", "s_group_logical_gxn_f16",
     "s_group_packed_f16", "s_channel_logical_1xn_f32", "s_channel_packed_f32"},
};

/* The published arrays of one golden case: logical q and scales, their packed
 * bytes, and for QQQ g128 the channel scales, logical and packed (zeroed
 * arrays elsewhere, so that releasing them is a no-op). */
typedef struct golden_set {
    qv_array q, s, sp, b, s2, s2p;
} golden_set;

static void golden_set_load(const golden_case *gc, golden_set *g)
{
    *g = (golden_set){0};
    golden_load(gc->dir, gc->q, &g->q);
    golden_load(gc->dir, gc->s, &g->s);
    golden_load(gc->dir, gc->s_packed, &g->sp);
    golden_load(gc->dir, "B_packed_int32", &g->b);
    if (gc->s2) {
        golden_load(gc->dir, gc->s2, &g->s2);
        golden_load(gc->dir, gc->s2_packed, &g->s2p);
    }
}

static void golden_set_free(golden_set *g)
{
    qv_array_destroy(&g->q);
    qv_array_destroy(&g->s);
    qv_array_destroy(&g->sp);
    qv_array_destroy(&g->b);
    qv_array_destroy(&g->s2);
    qv_array_destroy(&g->s2p);
}

START_TEST(golden_pack_bytes)
{
    const golden_case *gc = &goldens[_i];
    golden_set g;
    golden_set_load(gc, &g);
    qv_packed pk;
    qv_status st = qv_pack_arrays(gc->layout, &g.q, &g.s, gc->s2 ? &g.s2 : NULL, NULL, NULL, &pk);
    ck_assert_msg(st == QV_OK, "%s: %s", gc->dir, qv_errmsg());
    ck_assert_int_eq(g.b.ndim, 2);
    ck_assert_int_eq(pk.b_rows, g.b.shape[0]);
    ck_assert_int_eq(pk.b_cols, g.b.shape[1]);
    ck_assert_msg(memcmp(pk.b, g.b.data, g.b.nbytes) == 0, "%s: packed B differs from the published bytes", gc->dir);
    ck_assert_int_eq((int64_t)(pk.s_rows * pk.s_cols * (int64_t)pk.s_elem), (int64_t)g.sp.nbytes);
    ck_assert_msg(memcmp(pk.scales, g.sp.data, g.sp.nbytes) == 0, "%s: packed scales differ", gc->dir);
    if (gc->s2) {
        ck_assert_int_eq(pk.s2_cols * 4, (int64_t)g.s2p.nbytes);
        ck_assert_msg(memcmp(pk.scales2, g.s2p.data, g.s2p.nbytes) == 0, "%s: packed channel scales differ", gc->dir);
    }
    qv_packed_destroy(&pk);
    golden_set_free(&g);
}
END_TEST

/* Decodes the published bytes with ref_unpack alone (no packer involved). */
START_TEST(golden_decode)
{
    const golden_case *gc = &goldens[_i];
    golden_set g;
    golden_set_load(gc, &g);
    int64_t k = g.q.shape[0], n = g.q.shape[1];
    int grouped = g.s.shape[0] > 1;
    qv_variant v = {.name = gc->dir, .layout = gc->layout, .afmt = QV_FMT_F16, .n_tile = 64, .k_tile = 16};
    v.wfmt = gc->layout == QV_LAYOUT_QQQ_W4_CHANNEL ? QV_FMT_I4 : QV_FMT_U4;
    v.sfmt = g.s.dtype == QV_DT_F4 ? QV_FMT_F32 : QV_FMT_F16;
    v.scale_layout = gc->s2 ? QV_SCALE_GROUP_CHANNEL : grouped ? QV_SCALE_GROUP : QV_SCALE_CHANNEL;
    v.g = grouped ? (int)(k / g.s.shape[0]) : 0;
    if (gc->s2) {
        v.s2fmt = QV_FMT_F32;
        v.s2_layout = QV_SCALE_CHANNEL;
    }

    qv_packed pk = {.layout = gc->layout, .k = k, .n = n, .g = v.g, .b = g.b.data, .b_rows = g.b.shape[0],
                    .b_cols = g.b.shape[1], .scales = g.sp.data, .s_rows = g.sp.shape[0], .s_cols = g.sp.shape[1],
                    .s_elem = qv_dtype_size(g.sp.dtype),
                    .s_order = grouped ? QV_SORDER_GROUP64 : QV_SORDER_CHANNEL32,
                    .scales2 = gc->s2 ? g.s2p.data : NULL, .s2_cols = gc->s2 ? n : 0};
    uint8_t *qd = malloc((size_t)(k * n));
    uint8_t *sd = malloc(g.s.nbytes);
    float *s2d = gc->s2 ? malloc((size_t)n * 4) : NULL;
    memset(qd, 0xA5, (size_t)(k * n));
    qv_problem p = {.v = &v, .m = 1, .n = n, .k = k, .g = v.g, .q = qd, .scales = sd, .scales2 = s2d};
    qv_status st = ref_unpack(&pk, &p);
    ck_assert_msg(st == QV_OK, "%s: %s", gc->dir, qv_errmsg());
    ck_assert_msg(memcmp(qd, g.q.data, g.q.nbytes) == 0, "%s: decoded q differs from the logical q", gc->dir);
    ck_assert_msg(memcmp(sd, g.s.data, g.s.nbytes) == 0, "%s: decoded scales differ from the logical ones", gc->dir);
    if (gc->s2) ck_assert_msg(memcmp(s2d, g.s2.data, g.s2.nbytes) == 0, "%s: decoded channel scales differ", gc->dir);
    free(qd);
    free(sd);
    free(s2d);
    golden_set_free(&g);
}
END_TEST

/* ---- refusals ----------------------------------------------------------- */

static qv_array arr2(qv_dtype dt, int64_t r, int64_t c)
{
    qv_array a;
    int64_t shape[2] = {r, c};
    ck_assert(qv_array_create(&a, dt, 2, shape) == QV_OK);
    return a;
}

static void fill_f16_ones(qv_array *a)
{
    for (int64_t i = 0; i < a->count; i++) ((uint16_t *)a->data)[i] = 0x3C00; /* 1.0 */
}

static void fill_f32(qv_array *a, float x)
{
    for (int64_t i = 0; i < a->count; i++) ((float *)a->data)[i] = x;
}

/* qv_pack_arrays on a (k, n) problem whose pieces the caller spoils. */
typedef struct bad_case {
    const char *what;
    qv_layout layout;
    int64_t k, n;
    qv_dtype qdt, sdt;
    int64_t s_rows, s_cols;
    int q_poke;        /* value written at q[0][0] (when nonzero) */
    int with_s2, s2_cols;
    qv_dtype s2dt;
    int with_z, z_rows, z_poke;
    int with_gidx, gidx_len, gidx_poke;
    qv_dtype gidx_dt;
    float s_value;     /* f16/f32 value of every scale (0: 1.0) */
    qv_status want;
} bad_case;

static const bad_case bads[] = {
    {"K=8 not a multiple of 16", QV_LAYOUT_MARLIN_W4, 8, 64, QV_DT_U1, QV_DT_F2, 1, 64, .want = QV_ERR_SHAPE},
    {"K=40 not a multiple of 16", QV_LAYOUT_MARLIN_W4, 40, 64, QV_DT_U1, QV_DT_F2, 1, 64, .want = QV_ERR_SHAPE},
    {"N=32 not a multiple of 64", QV_LAYOUT_MARLIN_W4, 64, 32, QV_DT_U1, QV_DT_F2, 1, 32, .want = QV_ERR_SHAPE},
    {"N=96 not a multiple of 64", QV_LAYOUT_QQQ_W4_CHANNEL, 64, 96, QV_DT_I1, QV_DT_F4, 1, 96, .want = QV_ERR_SHAPE},
    {"3 scale rows do not divide K=64", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_F2, 3, 64, .want = QV_ERR_SHAPE},
    {"g=8 not a multiple of 16", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_F2, 8, 64, .want = QV_ERR_SHAPE},
    {"u4 q=16", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_F2, 1, 64, .q_poke = 16, .want = QV_ERR_RANGE},
    {"u4 q=-1 in int8", QV_LAYOUT_QQQ_W4_GROUP, 64, 64, QV_DT_I1, QV_DT_F2, 1, 64, .q_poke = -1, .with_s2 = 1,
     .s2_cols = 64, .s2dt = QV_DT_F4, .want = QV_ERR_RANGE},
    {"i4 q=8", QV_LAYOUT_QQQ_W4_CHANNEL, 64, 64, QV_DT_I1, QV_DT_F4, 1, 64, .q_poke = 8, .want = QV_ERR_RANGE},
    {"i4 q=-9", QV_LAYOUT_QQQ_W4_CHANNEL, 64, 64, QV_DT_I1, QV_DT_F4, 1, 64, .q_poke = -9, .want = QV_ERR_RANGE},
    {"q float16", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_F2, QV_DT_F2, 1, 64, .want = QV_ERR_DTYPE},
    {"w8 q int8", QV_LAYOUT_MARLIN_W8, 64, 64, QV_DT_I1, QV_DT_F2, 1, 64, .want = QV_ERR_DTYPE},
    {"qqq channel scales f16", QV_LAYOUT_QQQ_W4_CHANNEL, 64, 64, QV_DT_I1, QV_DT_F2, 1, 64, .want = QV_ERR_DTYPE},
    {"qqq group scales f32", QV_LAYOUT_QQQ_W4_GROUP, 64, 64, QV_DT_U1, QV_DT_F4, 1, 64, .with_s2 = 1, .s2_cols = 64,
     .s2dt = QV_DT_F4, .want = QV_ERR_DTYPE},
    {"scales int32", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_I4, 1, 64, .want = QV_ERR_DTYPE},
    {"scales2 f16", QV_LAYOUT_QQQ_W4_GROUP, 64, 64, QV_DT_U1, QV_DT_F2, 1, 64, .with_s2 = 1, .s2_cols = 64,
     .s2dt = QV_DT_F2, .want = QV_ERR_DTYPE},
    {"scales N disagrees", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_F2, 1, 128, .want = QV_ERR_SHAPE},
    {"scales2 N disagrees", QV_LAYOUT_QQQ_W4_GROUP, 64, 64, QV_DT_U1, QV_DT_F2, 1, 64, .with_s2 = 1, .s2_cols = 32,
     .s2dt = QV_DT_F4, .want = QV_ERR_SHAPE},
    {"zeros rows disagree", QV_LAYOUT_MARLIN_W4_ZP, 64, 64, QV_DT_U1, QV_DT_F2, 2, 64, .with_z = 1, .z_rows = 1,
     .want = QV_ERR_SHAPE},
    {"zero point 16", QV_LAYOUT_MARLIN_W4_ZP, 64, 64, QV_DT_U1, QV_DT_F2, 2, 64, .with_z = 1, .z_rows = 2,
     .z_poke = 16, .want = QV_ERR_RANGE},
    {"g_idx length", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_F2, 2, 64, .with_gidx = 1, .gidx_len = 63,
     .gidx_dt = QV_DT_I4, .want = QV_ERR_SHAPE},
    {"g_idx out of range", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_F2, 2, 64, .with_gidx = 1, .gidx_len = 64,
     .gidx_poke = 2, .gidx_dt = QV_DT_I4, .want = QV_ERR_RANGE},
    {"g_idx float", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_F2, 2, 64, .with_gidx = 1, .gidx_len = 64,
     .gidx_dt = QV_DT_F4, .want = QV_ERR_DTYPE},
    {"fp8 f16 scale 1000 overflows when x 2^8", QV_LAYOUT_MARLIN_FP8, 64, 64, QV_DT_U1, QV_DT_F2, 1, 64,
     .s_value = 1000.0f, .want = QV_ERR_RANGE},
    {"zeros on marlin-w4", QV_LAYOUT_MARLIN_W4, 64, 64, QV_DT_U1, QV_DT_F2, 2, 64, .with_z = 1, .z_rows = 2,
     .want = QV_ERR_USAGE},
    {"qqq group without channel scales", QV_LAYOUT_QQQ_W4_GROUP, 64, 64, QV_DT_U1, QV_DT_F2, 1, 64,
     .want = QV_ERR_USAGE},
    {"zp without zeros", QV_LAYOUT_MARLIN_W4_ZP, 64, 64, QV_DT_U1, QV_DT_F2, 2, 64, .want = QV_ERR_USAGE},
};

START_TEST(refusals)
{
    const bad_case *bc = &bads[_i];
    qv_array q = arr2(bc->qdt, bc->k, bc->n);
    if (bc->q_poke) ((int8_t *)q.data)[0] = (int8_t)bc->q_poke;
    qv_array s = arr2(bc->sdt, bc->s_rows, bc->s_cols);
    if (bc->sdt == QV_DT_F2) {
        fill_f16_ones(&s);
        if (bc->s_value == 1000.0f) ((uint16_t *)s.data)[0] = 0x63D0; /* 1000.0 in f16 */
    } else if (bc->sdt == QV_DT_F4) {
        fill_f32(&s, 1.0f);
    }
    qv_array s2 = {0}, z = {0}, gi = {0};
    if (bc->with_s2) {
        s2 = arr2(bc->s2dt, 1, bc->s2_cols);
        if (bc->s2dt == QV_DT_F4) fill_f32(&s2, 1.0f);
    }
    if (bc->with_z) {
        z = arr2(QV_DT_U1, bc->z_rows, bc->n);
        if (bc->z_poke) ((uint8_t *)z.data)[0] = (uint8_t)bc->z_poke;
    }
    if (bc->with_gidx) {
        int64_t len = bc->gidx_len;
        ck_assert(qv_array_create(&gi, bc->gidx_dt, 1, &len) == QV_OK);
        if (bc->gidx_poke) ((int32_t *)gi.data)[0] = bc->gidx_poke;
    }
    qv_packed pk;
    qv_status st = qv_pack_arrays(bc->layout, &q, &s, bc->with_s2 ? &s2 : NULL, bc->with_z ? &z : NULL,
                                  bc->with_gidx ? &gi : NULL, &pk);
    ck_assert_msg(st == bc->want, "%s: got %s (%s), expected %s", bc->what, qv_status_str(st), qv_errmsg(),
                  qv_status_str(bc->want));
    ck_assert_msg(strlen(qv_errmsg()) > 0, "%s: refused without a message", bc->what);
    ck_assert_msg(pk.b == NULL && pk.scales == NULL, "%s: a refusal left buffers behind", bc->what);
    qv_array_destroy(&q);
    qv_array_destroy(&s);
    qv_array_destroy(&s2);
    qv_array_destroy(&z);
    qv_array_destroy(&gi);
}
END_TEST

/* Creates p, a 1 x 64 x k problem of row v, packs it into pk, and creates d,
 * the same shape again for ref_unpack to fill; asserts all three succeed. */
static void packed_pair(const qv_variant *v, int64_t k, qv_problem *p, qv_packed *pk, qv_problem *d)
{
    ck_assert(v != NULL);
    ck_assert(qv_problem_create(p, v, 1, 64, k) == QV_OK);
    ck_assert_int_eq(qv_pack(p, pk), QV_OK);
    ck_assert(qv_problem_create(d, v, 1, 64, k) == QV_OK);
}

/* Releases what packed_pair made. */
static void release_pair(qv_problem *p, qv_packed *pk, qv_problem *d)
{
    qv_packed_destroy(pk);
    qv_problem_destroy(d);
    qv_problem_destroy(p);
}

/* qv_pack on problems whose row declares what the layout cannot hold. */
START_TEST(refusals_problem)
{
    const qv_variant *base = qv_variant_find("marlin-w4a16-g128-f16");
    ck_assert(base != NULL);
    qv_variant v = *base;
    qv_problem p;
    v.g = 64;
    ck_assert(qv_problem_create(&p, &v, 1, 64, 128) == QV_OK);
    qv_packed pk;
    p.g = 48; /* does not divide K=128 */
    ck_assert_int_eq(qv_pack(&p, &pk), QV_ERR_SHAPE);
    p.g = 64;
    v.wfmt = QV_FMT_U8; /* a u8 row on the 4-bit layout */
    ck_assert_int_eq(qv_pack(&p, &pk), QV_ERR_DTYPE);
    v.wfmt = QV_FMT_U4;
    v.scale_layout = QV_SCALE_BLOCK;
    ck_assert_int_eq(qv_pack(&p, &pk), QV_ERR_UNSUPPORTED);
    v.scale_layout = QV_SCALE_GROUP;
    ck_assert_int_eq(qv_pack(&p, &pk), QV_OK);

    /* ref_unpack refuses a packed operand whose shape disagrees, or a bad perm. */
    qv_problem d;
    ck_assert(qv_problem_create(&d, &v, 1, 64, 128) == QV_OK);
    pk.b_cols--;
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_SHAPE);
    pk.b_cols++;
    pk.s_rows++; /* more scale rows than the problem holds */
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_SHAPE);
    pk.s_rows--;
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
    release_pair(&p, &pk, &d);

    /* A zero-point problem decoded from an operand without zero points, and
     * scales that the operand lacks, are refused, not read from NULL. */
    packed_pair(qv_variant_find("marlin-w4a16-g128-zp-f16"), 128, &p, &pk, &d);
    void *keep = pk.zeros;
    pk.zeros = NULL;
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
    pk.zeros = keep;
    keep = pk.scales;
    pk.scales = NULL;
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
    pk.scales = keep;
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
    release_pair(&p, &pk, &d);

    packed_pair(qv_variant_find("marlin-w4a16-g128-act-f16"), 256, &p, &pk, &d);
    pk.perm[1] = pk.perm[0]; /* no longer a permutation */
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
    release_pair(&p, &pk, &d);
}
END_TEST

/* ---- Marlin FP4 (marlin-fp4-mx, marlin-fp4-nv) ------------------------- */

/* The value of an NVFP4 scale byte read as bits 14..7 of an f16 (5 exponent
 * bits, bias 15, 3 mantissa bits), written from the f16 definition. */
static double nv_value(uint8_t b)
{
    int e = b >> 3, m = b & 7;
    return e == 0 ? ldexp(m, -17) : ldexp(8 + m, e - 18);
}

/* A weight-only FP4 row built here (the registry rows come later): MXFP4
 * `w=e2m1,ws=e8m0/g32,a=AFMT` or NVFP4 `w=e2m1,ws=ue4m3/g16,ws2=f32/t,a=AFMT`,
 * with `bias=BF` when bf is not NONE. */
static qv_variant fp4_variant(int nv, qv_fmt afmt, qv_fmt bf)
{
    qv_variant v = {.name = nv ? "test-nvfp4" : "test-mxfp4", .summary = "FP4 test row", .family = "marlin",
                    .wfmt = QV_FMT_E2M1, .afmt = afmt, .ofmt = afmt, .sfmt = nv ? QV_FMT_UE4M3 : QV_FMT_E8M0,
                    .scale_layout = QV_SCALE_GROUP, .g = nv ? 16 : 32, .bias_fmt = bf,
                    .layout = nv ? QV_LAYOUT_MARLIN_FP4_NV : QV_LAYOUT_MARLIN_FP4_MX, .n_tile = 64, .k_tile = 16};
    if (nv) {
        v.s2fmt = QV_FMT_F32;
        v.s2_layout = QV_SCALE_TENSOR;
    }
    v.arith.dequant = QV_DQ_MUL_RN;
    v.arith.accum = QV_ACC_TC_F32;
    v.arith.block_b = 16;
    v.arith.reduce = QV_RED_F32;
    return v;
}

/* Every FP4 row shape: both layouts x f16/bf16 x bias none/f16-or-bf16/f32, at
 * the smallest legal K (one group) and N (64), a few fixed shapes and random
 * ones from (seed, index). */
START_TEST(fp4_roundtrip)
{
    const int nv = _i / 6, bi = _i % 3;
    const qv_fmt afmt = _i / 3 % 2 ? QV_FMT_BF16 : QV_FMT_F16;
    const qv_fmt bf = bi == 0 ? QV_FMT_NONE : bi == 1 ? afmt : QV_FMT_F32;
    const qv_variant v = fp4_variant(nv, afmt, bf);
    const int64_t g = v.g;
    int64_t shapes[12][2] = {{g, 64}, {64, 64}, {128, 128}, {256, 192}};
    for (int s = 4; s < 12; s++) {
        uint64_t r = rnd(7100 + (uint64_t)_i, (uint64_t)s);
        shapes[s][0] = g * (int64_t)(1 + r % 24);
        shapes[s][1] = 64 * (int64_t)(1 + (r >> 20) % 5);
    }
    for (int s = 0; s < 12; s++) {
        qv_problem p;
        ck_assert_msg(qv_problem_create(&p, &v, 1, shapes[s][1], shapes[s][0]) == QV_OK, "%s", qv_errmsg());
        uint64_t stream = 80000 + (uint64_t)_i * 100 + (uint64_t)s;
        fill_random(&p, stream * 8);
        char what[200];
        snprintf(what, sizeof what, "%s a=%s bias=%s k=%lld n=%lld (seed %" PRIu64 ", stream %" PRIu64 ")", v.name,
                 qv_fmt_get(afmt)->name, qv_fmt_get(bf)->name, (long long)p.k, (long long)p.n, g_seed, stream * 8);
        ck_assert_msg(roundtrip(&p, what) == 0, "%s: pack -> ref_unpack is not the identity", what);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* Every e2m1 code at every position of a 16-row tile, and every scale code
 * the layouts carry: all 127 finite ue4m3 codes in one f16 tensor (x 2^7 stays
 * below 2^16), e8m0 1..254 in one tensor. */
START_TEST(fp4_every_code)
{
    for (int nv = 0; nv < 2; nv++) {
        const qv_variant v = fp4_variant(nv, QV_FMT_F16, QV_FMT_NONE);
        const int64_t k = 128, n = 128;
        qv_problem p;
        ck_assert(qv_problem_create(&p, &v, 1, n, k) == QV_OK);
        for (int64_t i = 0; i < k * n; i++) ((uint8_t *)p.q)[i] = (uint8_t)((i / n + 3 * (i % n)) % 16);
        const int64_t ns = k / v.g * n;
        for (int64_t i = 0; i < ns; i++) ((uint8_t *)p.scales)[i] = nv ? (uint8_t)(i % 127) : (uint8_t)(1 + i % 254);
        if (nv) p.scales2[0] = 1.0f;
        ck_assert_msg(roundtrip(&p, v.name) == 0, "%s: every code: pack -> ref_unpack is not the identity", v.name);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* Where things land, from the definitions by hand. Weights: the MARLIN_W4
 * positions (the fp4 dequant pairs nibbles as the lop3 path does). Scales:
 * logical column col of a row sits at packed byte c with col = 64(c/64) +
 * (c%64)/8 + 8x, x = 4((c%8)/4) + [0,2,1,3][c%4]. Bias: scale_perm_single.
 * Values: ue4m3 1.0 (0x38) at f16 is 1.0 * 2^7, f16 0x5800, byte 0xB0. */
START_TEST(fp4_onehot)
{
    const qv_variant v = fp4_variant(1, QV_FMT_F16, QV_FMT_F16);
    for (size_t o = 0; o < sizeof onehots / sizeof onehots[0]; o++) {
        if (onehots[o].layout != QV_LAYOUT_MARLIN_W4) continue;
        qv_problem p;
        ck_assert(qv_problem_create(&p, &v, 1, 128, 128) == QV_OK);
        ((uint8_t *)p.q)[onehots[o].k * 128 + onehots[o].n] = 0xD; /* e2m1 -3 */
        p.scales2[0] = 1.0f;
        qv_packed pk;
        ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s", qv_errmsg());
        for (int64_t r = 0; r < pk.b_rows; r++)
            for (int64_t w = 0; w < pk.b_cols; w++) {
                uint32_t want = (r == onehots[o].row && w == onehots[o].word) ? 0xDu << (4 * onehots[o].slot) : 0u;
                ck_assert_msg((uint32_t)pk.b[r * pk.b_cols + w] == want, "q[%d][%d]: B[%lld][%lld] = 0x%08x, expected 0x%08x",
                              onehots[o].k, onehots[o].n, (long long)r, (long long)w, (uint32_t)pk.b[r * pk.b_cols + w],
                              want);
            }
        qv_packed_destroy(&pk);
        qv_problem_destroy(&p);
    }
    static const int scol[][2] = {/* logical column, packed byte */
                                  {0, 0}, {1, 8}, {8, 2}, {9, 10}, {16, 1}, {24, 3}, {32, 4},
                                  {40, 6}, {48, 5}, {56, 7}, {63, 63}, {64, 64}, {65, 72}};
    for (size_t i = 0; i < sizeof scol / sizeof scol[0]; i++) {
        qv_problem p;
        ck_assert(qv_problem_create(&p, &v, 1, 128, 32) == QV_OK);
        ((uint8_t *)p.scales)[128 + scol[i][0]] = 0x38; /* row 1 */
        p.scales2[0] = 1.0f;
        qv_packed pk;
        ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s", qv_errmsg());
        ck_assert_int_eq(pk.s_pow2, 7);
        for (int64_t c = 0; c < 256; c++) {
            uint8_t want = c == 128 + scol[i][1] ? 0xB0 : 0;
            ck_assert_msg(((uint8_t *)pk.scales)[c] == want, "scale [1][%d]: packed byte %lld = 0x%02x, expected 0x%02x",
                          scol[i][0], (long long)c, ((uint8_t *)pk.scales)[c], want);
        }
        qv_packed_destroy(&pk);
        qv_problem_destroy(&p);
    }
    static const int bcol[][2] = {{0, 0}, {1, 1}, {2, 8}, {8, 2}, {9, 3}, {10, 10}, {17, 5}, {31, 31}, {32, 32}};
    for (size_t i = 0; i < sizeof bcol / sizeof bcol[0]; i++) {
        qv_problem p;
        ck_assert(qv_problem_create(&p, &v, 1, 64, 16) == QV_OK);
        p.bias[bcol[i][0]] = -2.5f; /* f16 0xC100 */
        p.scales2[0] = 1.0f;
        qv_packed pk;
        ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s", qv_errmsg());
        ck_assert_int_eq(pk.bias_cols, 64);
        ck_assert_int_eq((int)pk.bias_elem, 2);
        for (int64_t c = 0; c < 64; c++) {
            uint16_t want = c == bcol[i][1] ? 0xC100 : 0, got = ((uint16_t *)pk.bias)[c];
            ck_assert_msg(got == want, "bias[%d]: packed %lld = 0x%04x, expected 0x%04x", bcol[i][0], (long long)c, got,
                          want);
        }
        qv_packed_destroy(&pk);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* NVFP4's preparation at its edges, each expectation from the definition:
 * f16 never lifts (s_pow2 7, global x 2^7); bf16 lifts until the smallest
 * nonzero scale times 2^s_pow2 is >= 2, and the global scale carries
 * 2^(126 - s_pow2). A global scale of 1 with tiny block scales (the
 * checkpoints of vLLM #34577) keeps every scale. */
START_TEST(fp4_nv_edges)
{
    static const struct {
        qv_fmt afmt;
        uint8_t lo, hi;  /* scale codes lo..hi fill the tensor (plus zeros) */
        int pow2;        /* expected s_pow2, 0: expected refusal */
        uint8_t lo_byte; /* expected byte of code lo */
    } cases[] = {
        {QV_FMT_F16, 0x01, 0x7E, 7, 0x68},  /* 2^-9 * 2^7 = 2^-2: f16 exponent 13 */
        {QV_FMT_BF16, 0x08, 0x7E, 7, 0x80}, /* 2^-6 * 2^7 = 2: no lift */
        {QV_FMT_BF16, 0x07, 0x40, 8, 0x86}, /* 7 * 2^-9 * 2^8 = 3.5 = 1.75 * 2: exponent 16, mantissa 6/8 */
        {QV_FMT_BF16, 0x04, 0x40, 8, 0x80}, /* 2^-7 * 2^8 = 2 */
        {QV_FMT_BF16, 0x03, 0x40, 9, 0x84}, /* 3 * 2^-9 * 2^9 = 3 */
        {QV_FMT_BF16, 0x01, 0x67, 10, 0x80}, /* 2^-9 * 2^10 = 2; 60 * 2^10 = 61440 still fits */
        {QV_FMT_BF16, 0x01, 0x68, 0, 0},    /* 64 * 2^10 = 2^16 overflows the byte */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const qv_variant v = fp4_variant(1, cases[i].afmt, QV_FMT_NONE);
        qv_problem p;
        ck_assert(qv_problem_create(&p, &v, 1, 128, 256) == QV_OK);
        fill_random(&p, 90000 + i);
        const int span = cases[i].hi - cases[i].lo + 1;
        for (int64_t j = 0; j < 16 * 128; j++)
            ((uint8_t *)p.scales)[j] = j % 5 == 4 ? 0 : (uint8_t)(cases[i].lo + j % span);
        ((uint8_t *)p.scales)[0] = cases[i].lo;
        ((uint8_t *)p.scales)[1] = cases[i].hi;
        p.scales2[0] = 1.0f;
        qv_packed pk;
        qv_status st = qv_pack(&p, &pk);
        if (!cases[i].pow2) {
            ck_assert_msg(st == QV_ERR_RANGE, "case %zu: expected a refusal, got %s", i, qv_status_str(st));
            ck_assert_msg(strstr(qv_errmsg(), "overflows") != NULL, "%s", qv_errmsg());
            qv_problem_destroy(&p);
            continue;
        }
        ck_assert_msg(st == QV_OK, "case %zu: %s", i, qv_errmsg());
        ck_assert_int_eq(pk.s_pow2, cases[i].pow2);
        ck_assert_uint_eq(((uint8_t *)pk.scales)[0], cases[i].lo_byte); /* logical [0][0] stays at byte 0 */
        const int bias = cases[i].afmt == QV_FMT_BF16 ? 126 : 14;
        ck_assert_msg(((float *)pk.scales2)[0] == (float)ldexp(1.0, bias - cases[i].pow2), "case %zu: global %g", i,
                      (double)((float *)pk.scales2)[0]);
        for (int64_t j = 0; j < 16 * 128; j++) {
            uint8_t b = ((uint8_t *)pk.scales)[j];
            if (cases[i].afmt == QV_FMT_BF16) ck_assert_msg(b == 0 || b >= 0x80, "case %zu: byte %lld = 0x%02x", i, (long long)j, b);
        }
        qv_packed_destroy(&pk);
        char what[64];
        snprintf(what, sizeof what, "nv edge case %zu", i);
        ck_assert_msg(roundtrip(&p, what) == 0, "%s: pack -> ref_unpack is not the identity", what);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* The bf16 preparation without the lift (vLLM before #34577): the bytes of
 * s * 2^7 for scales below 2^-6 have their top bit clear, which the bf16
 * kernel reads as 2^-112 times their value. ref_unpack must refuse them;
 * the same bytes under f16 activations are what the f16 kernel reads. */
START_TEST(fp4_nv_unlifted_refused)
{
    const qv_variant v = fp4_variant(1, QV_FMT_BF16, QV_FMT_NONE);
    qv_problem p, d;
    ck_assert(qv_problem_create(&p, &v, 1, 64, 64) == QV_OK);
    ck_assert(qv_problem_create(&d, &v, 1, 64, 64) == QV_OK);
    for (int64_t i = 0; i < 4 * 64; i++) ((uint8_t *)p.scales)[i] = (uint8_t)(1 + i % 0x30); /* 2^-9 .. 0.75 */
    p.scales2[0] = 1.0f;
    qv_packed pk;
    ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(pk.s_pow2, 10);
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
    /* Rebuild the bytes as the unlifted preparation makes them: f16 of s * 2^7, bits 14..7. */
    uint8_t *b = pk.scales;
    for (int64_t c = 0; c < 4 * 64; c++) {
        uint16_t h = qv_f64_to_f16(ldexp(nv_value(b[c]), -3)); /* s * 2^10 -> s * 2^7 */
        b[c] = (uint8_t)(h >> 7);
    }
    pk.s_pow2 = 7;
    ((float *)pk.scales2)[0] = (float)ldexp(1.0, 119);
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_RANGE);
    ck_assert_msg(strstr(qv_errmsg(), "top bit clear") != NULL, "%s", qv_errmsg());
    /* Under f16 activations the same bytes and 2^7 are exact (the f16 kernel
     * reads every byte as its f16 form): they decode to the same scales. */
    const qv_variant v16 = fp4_variant(1, QV_FMT_F16, QV_FMT_NONE);
    qv_problem d16;
    ck_assert(qv_problem_create(&d16, &v16, 1, 64, 64) == QV_OK);
    pk.layout = v16.layout;
    ((float *)pk.scales2)[0] = (float)ldexp(1.0, 7);
    ck_assert_msg(ref_unpack(&pk, &d16) == QV_OK, "%s", qv_errmsg());
    ck_assert(memcmp(d16.scales, p.scales, 4 * 64) == 0);
    ck_assert(d16.scales2[0] == 1.0f);
    qv_problem_destroy(&d16);
    qv_packed_destroy(&pk);
    qv_problem_destroy(&d);
    qv_problem_destroy(&p);
}
END_TEST

/* Packed operands that were broken on purpose: each is refused, or decodes
 * to other logical arrays (never silently to the same ones). */
START_TEST(fp4_broken_packed)
{
    for (int nv = 0; nv < 2; nv++) {
        const qv_variant v = fp4_variant(nv, QV_FMT_BF16, QV_FMT_BF16);
        qv_problem p, d;
        ck_assert(qv_problem_create(&p, &v, 1, 128, 128) == QV_OK);
        ck_assert(qv_problem_create(&d, &v, 1, 128, 128) == QV_OK);
        fill_random(&p, 95000 + (uint64_t)nv);
        ((uint8_t *)p.scales)[0] = nv ? 0x30 : 127; /* nonzero */
        qv_packed pk;
        ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s", qv_errmsg());
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
        const size_t sb = (size_t)(128 / v.g * 128);
        uint8_t *b = pk.scales;
        const uint8_t keep = b[0];
        /* Scale bytes the kernel misreads. */
        b[0] = nv ? (uint8_t)(keep & 0x7F) : 0;
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_RANGE);
        b[0] = nv ? 0xF8 : 0xFF;
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_RANGE);
        /* A byte one step off decodes to another scale. */
        b[0] = (uint8_t)(keep + 1);
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
        ck_assert(memcmp(d.scales, p.scales, sb) != 0);
        b[0] = keep;
        /* Two nibbles of a weight word swapped (rows k and k+1 of a column). */
        const uint32_t w0 = (uint32_t)pk.b[0];
        uint32_t w = w0;
        if ((w & 0xF) == ((w >> 16) & 0xF)) w ^= 1u; /* make nibbles 0 and 4 differ */
        pk.b[0] = (int32_t)((w & 0xFFF0FFF0u) | ((w >> 16) & 0xFu) | ((w & 0xFu) << 16));
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
        ck_assert(memcmp(d.q, p.q, 128 * 128) != 0);
        pk.b[0] = (int32_t)w0;
        /* The declared scale order, the power and the side buffers. */
        pk.s_order = QV_SORDER_GROUP64;
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
        pk.s_order = QV_SORDER_GROUP64_FP8;
        pk.s_pow2 += nv ? 4 : 1;
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
        pk.s_pow2 -= nv ? 4 : 1;
        void *keep_bias = pk.bias;
        pk.bias = NULL;
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
        pk.bias = keep_bias;
        ((uint16_t *)pk.bias)[1] ^= 0x0100;
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
        ck_assert(memcmp(d.bias, p.bias, 128 * 4) != 0);
        ((uint16_t *)pk.bias)[1] ^= 0x0100;
        if (nv) {
            float *G = pk.scales2, keepG = G[0];
            G[0] = INFINITY;
            ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_RANGE);
            G[0] = 1e-40f; /* subnormal */
            ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_RANGE);
            G[0] = keepG;
            pk.scales2 = NULL;
            ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_FORMAT);
            pk.scales2 = G;
            /* One more power on the bytes' side and one less on the global:
             * the same products, but other logical arrays (or refused when
             * a scale leaves ue4m3). */
            pk.s_pow2 += 1;
            qv_status st = ref_unpack(&pk, &d);
            ck_assert(st == QV_ERR_RANGE ||
                      (st == QV_OK && (memcmp(d.scales, p.scales, sb) != 0 || d.scales2[0] != p.scales2[0])));
            pk.s_pow2 -= 1;
        }
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
        ck_assert(memcmp(d.scales, p.scales, sb) == 0 && memcmp(d.q, p.q, 128 * 128) == 0);
        qv_packed_destroy(&pk);
        qv_problem_destroy(&d);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* What qv_pack refuses for the FP4 layouts, each with a message and nothing left behind. */
START_TEST(fp4_refusals)
{
    static const struct {
        const char *what;
        int nv;
        qv_fmt afmt;
        int poke;       /* 0 q, 1 scale code, 2 global scale, 3 bias, 4 row */
        double value;
        qv_status want;
    } cases[] = {
        {"e2m1 code 16", 1, QV_FMT_F16, 0, 16, QV_ERR_RANGE},
        {"e8m0 code 0", 0, QV_FMT_BF16, 1, 0, QV_ERR_RANGE},
        {"e8m0 code 255 (NaN)", 0, QV_FMT_BF16, 1, 255, QV_ERR_RANGE},
        {"ue4m3 NaN", 1, QV_FMT_F16, 1, 0x7F, QV_ERR_RANGE},
        {"ue4m3 sign bit", 1, QV_FMT_F16, 1, 0x80, QV_ERR_RANGE},
        {"global Inf", 1, QV_FMT_F16, 2, INFINITY, QV_ERR_RANGE},
        {"global 2^10 overflows x 2^119 (bf16)", 1, QV_FMT_BF16, 2, 1024.0, QV_ERR_RANGE},
        {"global 2^-140 is subnormal x 2^7 (f16)", 1, QV_FMT_F16, 2, 0x1p-140, QV_ERR_RANGE},
        {"bias 1/3 is not an f16 value", 1, QV_FMT_F16, 3, 1.0 / 3.0, QV_ERR_RANGE},
        {"NV with g = 32", 1, QV_FMT_F16, 4, 1, QV_ERR_SHAPE},
        {"MX with ue4m3 scales", 0, QV_FMT_F16, 4, 2, QV_ERR_UNSUPPORTED},
        {"NV without its global scale", 1, QV_FMT_F16, 4, 3, QV_ERR_UNSUPPORTED},
        {"act_order", 1, QV_FMT_F16, 4, 4, QV_ERR_UNSUPPORTED},
        {"e4m3 activations", 0, QV_FMT_E4M3, 4, 5, QV_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qv_variant v = fp4_variant(cases[i].nv, cases[i].afmt, QV_FMT_F16);
        qv_problem p;
        ck_assert(qv_problem_create(&p, &v, 1, 64, 64) == QV_OK);
        fill_random(&p, 96000 + i);
        if (p.scales2) p.scales2[0] = 1.0f;
        switch (cases[i].poke) {
        case 0: ((uint8_t *)p.q)[5] = (uint8_t)cases[i].value; break;
        case 1: ((uint8_t *)p.scales)[7] = (uint8_t)cases[i].value; break;
        case 2: p.scales2[0] = (float)cases[i].value; break;
        case 3: p.bias[3] = (float)cases[i].value; break;
        default:
            if (cases[i].value == 1) v.g = 32, p.g = 32;
            if (cases[i].value == 2) v.sfmt = QV_FMT_UE4M3;
            if (cases[i].value == 3) v.s2_layout = QV_SCALE_NONE;
            if (cases[i].value == 4) v.act_order = 1;
            break;
        }
        qv_packed pk;
        qv_status st = qv_pack(&p, &pk);
        ck_assert_msg(st == cases[i].want, "%s: got %s (%s), expected %s", cases[i].what, qv_status_str(st), qv_errmsg(),
                      qv_status_str(cases[i].want));
        ck_assert_msg(strlen(qv_errmsg()) > 0, "%s: refused without a message", cases[i].what);
        ck_assert_msg(pk.b == NULL && pk.scales == NULL && pk.bias == NULL, "%s: a refusal left buffers", cases[i].what);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* qv_pack_arrays_fp4 packs what qv_pack packs, and refuses bad arrays. */
START_TEST(fp4_pack_arrays)
{
    const qv_variant v = fp4_variant(1, QV_FMT_BF16, QV_FMT_BF16);
    qv_problem p;
    ck_assert(qv_problem_create(&p, &v, 1, 128, 64) == QV_OK);
    fill_random(&p, 97000);
    qv_array q = arr2(QV_DT_U1, 64, 128), s = arr2(QV_DT_U1, 4, 128), s2 = arr2(QV_DT_F4, 1, 1), b = arr2(QV_DT_U2, 1, 128);
    memcpy(q.data, p.q, 64 * 128);
    memcpy(s.data, p.scales, 4 * 128);
    ((float *)s2.data)[0] = p.scales2[0];
    for (int j = 0; j < 128; j++) ((uint16_t *)b.data)[j] = qv_f32_to_bf16(p.bias[j]);
    qv_packed a, c;
    ck_assert_msg(qv_pack(&p, &a) == QV_OK, "%s", qv_errmsg());
    ck_assert_msg(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_FP4_NV, QV_FMT_BF16, &q, &s, &s2, &b, &c) == QV_OK, "%s",
                  qv_errmsg());
    ck_assert(memcmp(a.b, c.b, (size_t)(a.b_rows * a.b_cols) * 4) == 0);
    ck_assert(memcmp(a.scales, c.scales, 4 * 128) == 0 && a.s_pow2 == c.s_pow2);
    ck_assert(memcmp(a.scales2, c.scales2, 4) == 0 && memcmp(a.bias, c.bias, 256) == 0);
    qv_packed_destroy(&a);
    qv_packed_destroy(&c);
    ck_assert_int_eq(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_FP4_NV, QV_FMT_F16, &q, &s, NULL, NULL, &c), QV_ERR_USAGE);
    qv_array smx = arr2(QV_DT_U1, 2, 128); /* MX: one row per 32 */
    for (int j = 0; j < 2 * 128; j++) ((uint8_t *)smx.data)[j] = 127;
    ck_assert_int_eq(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_FP4_MX, QV_FMT_F16, &q, &smx, &s2, NULL, &c), QV_ERR_USAGE);
    ck_assert_int_eq(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_FP4_MX, QV_FMT_F16, &q, &smx, NULL, NULL, &c), QV_OK);
    qv_packed_destroy(&c);
    ck_assert_int_eq(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_FP4_MX, QV_FMT_F16, &q, &s, NULL, NULL, &c), QV_ERR_SHAPE);
    ck_assert_int_eq(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_FP4_NV, QV_FMT_E4M3, &q, &s, &s2, NULL, &c), QV_ERR_USAGE);
    ck_assert_int_eq(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_W4, QV_FMT_F16, &q, &s, &s2, NULL, &c), QV_ERR_USAGE);
    ck_assert_int_eq(qv_pack_arrays(QV_LAYOUT_MARLIN_FP4_NV, &q, &s, &s2, NULL, NULL, &c), QV_ERR_USAGE);
    qv_array sf = arr2(QV_DT_F2, 4, 128), b3 = arr2(QV_DT_F4, 1, 96);
    ck_assert_int_eq(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_FP4_NV, QV_FMT_F16, &q, &sf, &s2, NULL, &c), QV_ERR_DTYPE);
    ck_assert_int_eq(qv_pack_arrays_fp4(QV_LAYOUT_MARLIN_FP4_NV, QV_FMT_F16, &q, &s, &s2, &b3, &c), QV_ERR_SHAPE);
    ck_assert(c.b == NULL);
    ck_assert_str_eq(qv_layout_name(QV_LAYOUT_MARLIN_FP4_MX), "marlin-fp4-mx");
    ck_assert(qv_layout_from_name("marlin-fp4-nv") == QV_LAYOUT_MARLIN_FP4_NV);
    ck_assert(qv_layout_from_name("marlin-w4") == QV_LAYOUT_MARLIN_W4);
    qv_array_destroy(&q), qv_array_destroy(&s), qv_array_destroy(&s2), qv_array_destroy(&b);
    qv_array_destroy(&sf), qv_array_destroy(&b3), qv_array_destroy(&smx);
    qv_problem_destroy(&p);
}
END_TEST

/* ---- GPTQ / AWQ checkpoint readers -------------------------------------- */

START_TEST(gptq_reader)
{
    int64_t k = 256, n = 64;
    int g = 64;
    int64_t groups = k / g;
    uint8_t *q = malloc((size_t)(k * n)), *z = malloc((size_t)(groups * n));
    int32_t *qw = calloc((size_t)(k / 8 * n), 4), *qz1 = calloc((size_t)(groups * n / 8), 4),
            *qz2 = calloc((size_t)(groups * n / 8), 4);
    for (int64_t i = 0; i < k * n; i++) q[i] = (uint8_t)(rnd(900, (uint64_t)i) % 16);
    q[7 * n] = 0xF; /* the top nibble of word (0, 0) is >= 8: a sign-extending reader fails */
    for (int64_t i = 0; i < groups * n; i++) z[i] = (uint8_t)(1 + rnd(901, (uint64_t)i) % 15); /* v1 needs z >= 1 */
    z[7] = 15;
    ckpt_pack_along_k(q, k, n, qw);
    ckpt_pack_along_n(z, groups, n, NULL, 1, qz1); /* v1 stores z - 1 */
    ckpt_pack_along_n(z, groups, n, NULL, 0, qz2);
    uint8_t *qo = malloc((size_t)(k * n)), *zo = malloc((size_t)(groups * n));
    ck_assert_int_eq(qv_gptq_unpack(qw, qz1, k, n, g, 1, qo, zo), QV_OK);
    ck_assert_msg(memcmp(qo, q, (size_t)(k * n)) == 0, "gptq qweight decoded wrong (seed %" PRIu64 ")", g_seed);
    ck_assert_msg(memcmp(zo, z, (size_t)(groups * n)) == 0, "gptq v1 zeros (z-1) decoded wrong");
    memset(zo, 0, (size_t)(groups * n));
    ck_assert_int_eq(qv_gptq_unpack(qw, qz2, k, n, g, 0, qo, zo), QV_OK);
    ck_assert_msg(memcmp(zo, z, (size_t)(groups * n)) == 0, "gptq v2 zeros (z) decoded wrong");
    /* Reading v2 zeros as v1 must not give z back: refused (a stored 15) or off by one. */
    memset(zo, 0, (size_t)(groups * n));
    qv_status st = qv_gptq_unpack(qw, qz2, k, n, g, 1, qo, zo);
    ck_assert(st == QV_ERR_RANGE || (st == QV_OK && memcmp(zo, z, (size_t)(groups * n)) != 0));
    /* v1 stores z-1: a stored 15 would be z = 16, which uint4 cannot hold. */
    ckpt_put_nibble(qz1, 0, 3, 0xF);
    ck_assert_int_eq(qv_gptq_unpack(qw, qz1, k, n, g, 1, qo, zo), QV_ERR_RANGE);
    ck_assert_int_eq(qv_gptq_unpack(qw, qz2, 250, n, g, 0, qo, zo), QV_ERR_SHAPE);
    ck_assert_int_eq(qv_gptq_unpack(qw, qz2, k, 60, g, 0, qo, zo), QV_ERR_SHAPE);
    ck_assert_int_eq(qv_gptq_unpack(qw, qz2, k, n, 96, 0, qo, zo), QV_ERR_SHAPE);
    free(q), free(z), free(qw), free(qz1), free(qz2), free(qo), free(zo);
}
END_TEST

START_TEST(awq_reader)
{
    int64_t k = 128, n = 128;
    int g = 32;
    int64_t groups = k / g;
    uint8_t *q = malloc((size_t)(k * n)), *z = malloc((size_t)(groups * n));
    int32_t *qw = calloc((size_t)(k * n / 8), 4), *qz = calloc((size_t)(groups * n / 8), 4);
    for (int64_t i = 0; i < k * n; i++) q[i] = (uint8_t)(rnd(910, (uint64_t)i) % 16);
    for (int64_t i = 0; i < groups * n; i++) z[i] = (uint8_t)(rnd(911, (uint64_t)i) % 16);
    q[7] = 0xC; /* column 7 sits in the top nibble: sign extension would show */
    z[7] = 0xF;
    ckpt_pack_along_n(q, k, n, ckpt_awq_order, 0, qw);
    ckpt_pack_along_n(z, groups, n, ckpt_awq_order, 0, qz);
    uint8_t *qo = malloc((size_t)(k * n)), *zo = malloc((size_t)(groups * n));
    ck_assert_int_eq(qv_awq_unpack(qw, qz, k, n, g, qo, zo), QV_OK);
    ck_assert_msg(memcmp(qo, q, (size_t)(k * n)) == 0, "awq qweight decoded wrong (seed %" PRIu64 ")", g_seed);
    ck_assert_msg(memcmp(zo, z, (size_t)(groups * n)) == 0, "awq qzeros decoded wrong");
    ck_assert_int_eq(qv_awq_unpack(qw, qz, k, 100, g, qo, zo), QV_ERR_SHAPE);
    ck_assert_int_eq(qv_awq_unpack(qw, qz, k, n, 48, qo, zo), QV_ERR_SHAPE);
    free(q), free(z), free(qw), free(qz), free(qo), free(zo);
}
END_TEST

static Suite *layout_suite(void)
{
    TCase *tc;
    Suite *s = suite_single("layout", "layout", 120, &tc);
    tcase_add_test(tc, scale_perm_tables);
    tcase_add_test(tc, onehot_zeros);
    tcase_add_loop_test(tc, golden_pack_bytes, 0, (int)(sizeof goldens / sizeof goldens[0]));
    tcase_add_loop_test(tc, golden_decode, 0, (int)(sizeof goldens / sizeof goldens[0]));
    tcase_add_loop_test(tc, onehot_positions, 0, (int)(sizeof onehots / sizeof onehots[0]));
    tcase_add_loop_test(tc, roundtrip_registry, 0, qv_registry_count());
    tcase_add_test(tc, roundtrip_every_g);
    tcase_add_test(tc, block_scales2);
    tcase_add_test(tc, plain_4bit);
    tcase_add_loop_test(tc, refusals, 0, (int)(sizeof bads / sizeof bads[0]));
    tcase_add_test(tc, refusals_problem);
    tcase_add_loop_test(tc, fp4_roundtrip, 0, 12);
    tcase_add_test(tc, fp4_every_code);
    tcase_add_test(tc, fp4_onehot);
    tcase_add_test(tc, fp4_nv_edges);
    tcase_add_test(tc, fp4_nv_unlifted_refused);
    tcase_add_test(tc, fp4_broken_packed);
    tcase_add_test(tc, fp4_refusals);
    tcase_add_test(tc, fp4_pack_arrays);
    tcase_add_test(tc, gptq_reader);
    tcase_add_test(tc, awq_reader);
    return s;
}

int main(void)
{
    g_seed = case_seed(g_seed);
    printf("t_layout: seed %" PRIu64 " (replay with QVET_SEED=%" PRIu64 ")\n", g_seed, g_seed);
    return suite_run(layout_suite());
}
