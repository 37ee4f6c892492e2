/* lf_pack.c: libFuzzer target for the packers (qv_pack) and the independent
 * decoder (ref_unpack). Built by `make fuzz-parsers` with ASan and UBSan.
 *
 * The first 6 bytes of an input choose a problem (layout, K, N, scale layout
 * and dtype, group size, act_order, whether codes may leave their range); the
 * rest are cycled into the codes, scales, zero points and g_idx. qv_pack must
 * either refuse with a message and leave nothing allocated, or succeed; then
 * ref_unpack must give back every buffer bit for bit, or the target aborts. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/layout.h"
#include "qvet/reference.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Header bytes that choose the problem. */
#define HDR 6

typedef struct bytes {
    const uint8_t *p;
    size_t n, at;
} bytes;

/* The next byte of the body, cycled (0 when the body is empty). */
static uint8_t next(bytes *b)
{
    if (!b->n) return 0;
    uint8_t x = b->p[b->at % b->n];
    b->at++;
    /* Mix the position in, so that a short body still gives varied values. */
    return (uint8_t)(x ^ (uint8_t)(b->at * 0x9Du));
}

static size_t storage(qv_fmt f)
{
    return f == QV_FMT_F16 || f == QV_FMT_BF16 ? 2 : f == QV_FMT_F32 ? 4 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HDR) return 0;
    static const qv_fmt wfmts[QV_LAYOUT_COUNT] = {
        [QV_LAYOUT_MARLIN_W4] = QV_FMT_U4,      [QV_LAYOUT_MARLIN_W4_ZP] = QV_FMT_U4,
        [QV_LAYOUT_MARLIN_W8] = QV_FMT_U8,      [QV_LAYOUT_MARLIN_FP8] = QV_FMT_E4M3,
        [QV_LAYOUT_QQQ_W4_CHANNEL] = QV_FMT_I4, [QV_LAYOUT_QQQ_W4_GROUP] = QV_FMT_U4,
        [QV_LAYOUT_MARLIN_FP4_MX] = QV_FMT_E2M1, [QV_LAYOUT_MARLIN_FP4_NV] = QV_FMT_E2M1,
    };
    static const qv_fmt plain_fmts[4] = {QV_FMT_I8, QV_FMT_U8, QV_FMT_F16, QV_FMT_BF16};
    static const qv_fmt sfmts[4] = {QV_FMT_F16, QV_FMT_BF16, QV_FMT_F32, QV_FMT_F16};
    static const qv_scale_layout sls[4] = {QV_SCALE_TENSOR, QV_SCALE_CHANNEL, QV_SCALE_GROUP,
                                           QV_SCALE_GROUP_CHANNEL};

    qv_variant v = {.name = "lf_pack"};
    v.layout = (qv_layout)(data[0] % QV_LAYOUT_COUNT);
    int plain = v.layout == QV_LAYOUT_PLAIN_NK;
    /* High bit set: any small size (mostly illegal); clear: a legal tile multiple. */
    int64_t k = (data[1] & 0x80) ? (data[1] & 0x7F) + 1 : 16 * (1 + (data[1] & 0x1F));
    int64_t n = (data[2] & 0x80) ? (data[2] & 0x7F) + 1 : (plain ? 8 : 64) * (1 + (data[2] & 3));
    v.scale_layout = sls[data[3] & 3];
    v.sfmt = sfmts[(data[3] >> 2) & 3];
    v.wfmt = plain ? plain_fmts[(data[3] >> 4) & 3] : wfmts[v.layout];
    if (data[3] & 0x40) v.wfmt = QV_FMT_U8; /* sometimes the wrong code format for the layout */
    v.g = (data[4] & 0x80) ? (data[4] & 0x7F) : 16 * (1 + (data[4] & 7));
    v.act_order = data[5] & 1;
    v.zero_point = (v.layout == QV_LAYOUT_MARLIN_W4_ZP || (data[5] & 2)) ? QV_ZP_INT : QV_ZP_NONE;
    v.afmt = (data[5] & 4) ? QV_FMT_BF16 : QV_FMT_F16;
    int raw_codes = data[5] & 8;   /* codes may leave their range */
    int raw_gidx = data[5] & 16;   /* g_idx may leave its range */
    /* data[5] & 32: scales keep every exponent (the fp8 fold may overflow). */
    int grouped = v.scale_layout == QV_SCALE_GROUP || v.scale_layout == QV_SCALE_GROUP_CHANNEL;
    if (!grouped) v.g = 0;
    if (v.zero_point) {
        v.zp_layout = QV_SCALE_GROUP;
        v.zp_g = v.g;
    }
    if (v.scale_layout == QV_SCALE_GROUP_CHANNEL) {
        v.s2fmt = QV_FMT_F32;
        v.s2_layout = QV_SCALE_CHANNEL;
    }
    /* The FP4 layouts: one-byte e8m0 (g 32) or ue4m3 (g 16, with the f32
     * global scale) group scales, mostly the group size the layout fixes,
     * and a bias of the activation format when bit 1 of data[5] is set. */
    int fp4 = qv_layout_is_fp4(v.layout), nv = v.layout == QV_LAYOUT_MARLIN_FP4_NV;
    if (fp4) {
        v.sfmt = nv ? QV_FMT_UE4M3 : QV_FMT_E8M0;
        v.scale_layout = QV_SCALE_GROUP;
        grouped = 1;
        if (!(data[4] & 0x80)) v.g = nv ? 16 : 32;
        v.zero_point = QV_ZP_NONE;
        v.s2fmt = nv ? QV_FMT_F32 : QV_FMT_NONE;
        v.s2_layout = nv ? QV_SCALE_TENSOR : QV_SCALE_NONE;
        v.bias_fmt = (data[5] & 2) ? v.afmt : QV_FMT_NONE;
        if (v.g < 1) v.g = 1;
    }
    int64_t groups = grouped && v.g > 0 ? (k + v.g - 1) / v.g : 1;
    int64_t s2_count = v.s2_layout == QV_SCALE_TENSOR ? 1 : n;

    bytes body = {data + HDR, size - HDR, 0};
    qv_problem p = {.v = &v, .m = 1, .n = n, .k = k, .g = v.g};
    size_t qb = (size_t)(k * n) * storage(v.wfmt);
    int64_t s_rows = v.scale_layout == QV_SCALE_TENSOR ? 1 : groups;
    int64_t s_cols = v.scale_layout == QV_SCALE_TENSOR ? 1 : n;
    size_t sb = (size_t)(s_rows * s_cols) * storage(v.sfmt);
    p.q = malloc(qb);
    p.scales = malloc(sb);
    p.scales2 = v.s2_layout != QV_SCALE_NONE ? malloc((size_t)s2_count * 4) : NULL;
    p.bias = v.bias_fmt != QV_FMT_NONE ? malloc((size_t)n * 4) : NULL;
    p.zeros = v.zero_point ? malloc((size_t)(groups * n)) : NULL;
    p.g_idx = v.act_order ? malloc((size_t)k * 4) : NULL;
    QV_ASSERT(p.q && p.scales, "out of memory in lf_pack");

    uint8_t *q8 = p.q;
    for (size_t i = 0; i < qb; i++) {
        uint8_t x = next(&body);
        if ((v.wfmt == QV_FMT_U4 || v.wfmt == QV_FMT_E2M1) && !raw_codes) x &= 0x0F;
        if (v.wfmt == QV_FMT_I4 && !raw_codes) x = (uint8_t)(int8_t)((int8_t)x >> 4); /* -8..7 */
        q8[i] = x;
    }
    for (size_t i = 0; i < sb; i++) ((uint8_t *)p.scales)[i] = next(&body);
    if (!(data[5] & 32) && !fp4) {
        /* Clear the top exponent bit (bit 14 of f16/bf16, 30 of f32): |s| < 2,
         * so the fp8 exponent fold (x 2^8, x 2^120) never overflows and most
         * inputs reach the round trip. */
        size_t es = storage(v.sfmt);
        for (size_t i = es - 1; i < sb; i += es) ((uint8_t *)p.scales)[i] &= 0xBF;
    }
    if (p.scales2)
        for (size_t i = 0; i < (size_t)s2_count * 4; i++) ((uint8_t *)p.scales2)[i] = next(&body);
    /* a bias of bias_fmt values (exact in f32), from two body bytes each */
    for (int64_t j = 0; p.bias && j < n; j++) {
        uint32_t c = (uint32_t)next(&body) | (uint32_t)next(&body) << 8;
        p.bias[j] = (float)qv_decode(v.bias_fmt, c);
    }
    if (p.zeros)
        for (int64_t i = 0; i < groups * n; i++) p.zeros[i] = (uint8_t)(next(&body) & (raw_codes ? 0xFF : 0x0F));
    if (p.g_idx)
        for (int64_t i = 0; i < k; i++) {
            uint8_t x = next(&body);
            p.g_idx[i] = raw_gidx ? (int32_t)(int8_t)x : (int32_t)(x % groups);
        }

    qv_packed pk;
    qv_status st = qv_pack(&p, &pk);
    if (st != QV_OK) {
        QV_ASSERT(qv_errmsg()[0] != '\0', "every refusal carries a message");
        QV_ASSERT(pk.b == NULL && pk.scales == NULL && pk.zeros == NULL && pk.perm == NULL && pk.bias == NULL,
                  "a refusal leaves nothing allocated");
    } else {
        qv_problem d = p;
        d.q = malloc(qb);
        d.scales = malloc(sb);
        d.scales2 = p.scales2 ? malloc((size_t)s2_count * 4) : NULL;
        d.bias = p.bias ? malloc((size_t)n * 4) : NULL;
        d.zeros = p.zeros ? malloc((size_t)(groups * n)) : NULL;
        d.g_idx = p.g_idx ? malloc((size_t)k * 4) : NULL;
        QV_ASSERT(d.q && d.scales, "out of memory in lf_pack");
        /* Poison: 0xA5 is no valid u4 code, so a missed position shows. */
        memset(d.q, 0xA5, qb);
        memset(d.scales, 0xA5, sb);
        if (d.scales2) memset(d.scales2, 0xA5, (size_t)s2_count * 4);
        if (d.bias) memset(d.bias, 0xA5, (size_t)n * 4);
        if (d.zeros) memset(d.zeros, 0xA5, (size_t)(groups * n));
        if (d.g_idx) memset(d.g_idx, 0xA5, (size_t)k * 4);
        st = ref_unpack(&pk, &d);
        QV_ASSERT(st == QV_OK, "ref_unpack decodes whatever qv_pack produced");
        QV_ASSERT(memcmp(d.q, p.q, qb) == 0, "pack -> ref_unpack gives q back");
        QV_ASSERT(memcmp(d.scales, p.scales, sb) == 0, "pack -> ref_unpack gives the scales back");
        QV_ASSERT(!d.scales2 || memcmp(d.scales2, p.scales2, (size_t)s2_count * 4) == 0, "scales2 come back");
        for (int64_t j = 0; d.bias && j < n; j++)
            QV_ASSERT(d.bias[j] == p.bias[j] || (d.bias[j] != d.bias[j] && p.bias[j] != p.bias[j]), "the bias comes back");
        QV_ASSERT(!d.zeros || memcmp(d.zeros, p.zeros, (size_t)(groups * n)) == 0, "zero points come back");
        QV_ASSERT(!d.g_idx || memcmp(d.g_idx, p.g_idx, (size_t)k * 4) == 0, "g_idx comes back");
        free(d.q);
        free(d.scales);
        free(d.scales2);
        free(d.bias);
        free(d.zeros);
        free(d.g_idx);
        qv_packed_destroy(&pk);
    }
    free(p.q);
    free(p.scales);
    free(p.scales2);
    free(p.bias);
    free(p.zeros);
    free(p.g_idx);
    return 0;
}
