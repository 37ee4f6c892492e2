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
    for (int64_t i = 0; i < ns; i++) random_scale(sf, rnd(stream + 1, (uint64_t)i), (uint8_t *)p->scales + i * se);
    if (p->scales2)
        for (int64_t i = 0; i < p->n; i++) random_scale(QV_FMT_F32, rnd(stream + 2, (uint64_t)i), &p->scales2[i]);
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
    memset(d.q, 0xA5, qb);
    if (sb) memset(d.scales, 0xA5, sb);
    if (d.scales2) memset(d.scales2, 0xA5, (size_t)p->n * 4);
    if (d.zeros) memset(d.zeros, 0xA5, (size_t)(p->k / p->g * p->n));
    if (d.g_idx) memset(d.g_idx, 0xA5, (size_t)p->k * 4);
    st = ref_unpack(&pk, &d);
    ck_assert_msg(st == QV_OK, "%s: ref_unpack: %s", what, qv_errmsg());
    int bad = 0;
    if (memcmp(d.q, p->q, qb)) bad++, fprintf(stderr, "%s: q differs\n", what);
    if (sb && memcmp(d.scales, p->scales, sb)) bad++, fprintf(stderr, "%s: scales differ\n", what);
    if (d.scales2 && memcmp(d.scales2, p->scales2, (size_t)p->n * 4)) bad++, fprintf(stderr, "%s: scales2 differ\n", what);
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

/* The scale permutations against DESIGN.md §7's closed forms. */
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
