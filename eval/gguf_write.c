/* gguf_write.c: a small GGUF writer (gguf.h) for tests and tiny generated
 * models. Metadata and tensor infos go to one buffer, tensor data to another;
 * the image is header + metadata + infos, padded to the alignment, + data. The
 * quantizers round to nearest; the reader's tests decode the result
 * independently, so the writer needs no particular rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/gguf.h"
#include "qvet/formats.h"

/* The writer always uses the GGUF default alignment. */
#define W_ALIGN 32

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf;

struct qv_gguf_writer {
    wbuf kv, info, data, image;
    uint64_t n_kv, n_tensors;
};

static void wb_put(wbuf *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        QV_ASSERT(np != NULL, "out of memory while writing a GGUF image");
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void wb_le(wbuf *b, uint64_t v, int bytes)
{
    uint8_t t[8];
    for (int i = 0; i < bytes; i++) t[i] = (uint8_t)(v >> (8 * i));
    wb_put(b, t, (size_t)bytes);
}

static void wb_str(wbuf *b, const char *s)
{
    size_t n = strlen(s);
    wb_le(b, n, 8);
    wb_put(b, s, n);
}

qv_gguf_writer *qv_gguf_writer_create(void)
{
    qv_gguf_writer *w = calloc(1, sizeof *w);
    QV_ASSERT(w != NULL, "out of memory");
    return w;
}

void qv_gguf_writer_destroy(qv_gguf_writer *w)
{
    if (!w) return;
    free(w->kv.p);
    free(w->info.p);
    free(w->data.p);
    free(w->image.p);
    free(w);
}

static void key_type(qv_gguf_writer *w, const char *key, qv_gguf_vtype t)
{
    wb_str(&w->kv, key);
    wb_le(&w->kv, (uint64_t)t, 4);
    w->n_kv++;
}

void qv_gguf_w_u32(qv_gguf_writer *w, const char *key, uint32_t v)
{
    key_type(w, key, QV_GGUF_U32);
    wb_le(&w->kv, v, 4);
}

void qv_gguf_w_f32(qv_gguf_writer *w, const char *key, float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    key_type(w, key, QV_GGUF_F32);
    wb_le(&w->kv, b, 4);
}

void qv_gguf_w_bool(qv_gguf_writer *w, const char *key, int v)
{
    key_type(w, key, QV_GGUF_BOOL);
    wb_le(&w->kv, v ? 1 : 0, 1);
}

void qv_gguf_w_str(qv_gguf_writer *w, const char *key, const char *v)
{
    key_type(w, key, QV_GGUF_STRING);
    wb_str(&w->kv, v);
}

void qv_gguf_w_str_array(qv_gguf_writer *w, const char *key, const char *const *strs, uint64_t count)
{
    key_type(w, key, QV_GGUF_ARRAY);
    wb_le(&w->kv, QV_GGUF_STRING, 4);
    wb_le(&w->kv, count, 8);
    for (uint64_t i = 0; i < count; i++) wb_str(&w->kv, strs[i]);
}

void qv_gguf_w_i32_array(qv_gguf_writer *w, const char *key, const int32_t *vals, uint64_t count)
{
    key_type(w, key, QV_GGUF_ARRAY);
    wb_le(&w->kv, QV_GGUF_I32, 4);
    wb_le(&w->kv, count, 8);
    for (uint64_t i = 0; i < count; i++) wb_le(&w->kv, (uint32_t)vals[i], 4);
}

static float amax_of(const float *x, int n)
{
    float a = 0;
    for (int i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

/* One block of 32 values x into `type`'s block bytes. */
static void quant_block(qv_ggml_type type, const float *x, uint8_t *out)
{
    if (type == QV_GGML_Q8_0) {
        float a = amax_of(x, 32);
        uint16_t dh = qv_f32_to_f16(a / 127.0f); /* 127: the largest int8 magnitude used */
        float d = qv_f16_to_f32(dh);
        out[0] = (uint8_t)dh; out[1] = (uint8_t)(dh >> 8);
        for (int j = 0; j < 32; j++) {
            long q = d > 0 ? lrintf(x[j] / d) : 0;
            if (q > 127) q = 127;
            if (q < -127) q = -127;
            out[2 + j] = (uint8_t)(int8_t)q;
        }
    } else if (type == QV_GGML_Q4_0) {
        float a = amax_of(x, 32);
        uint16_t dh = qv_f32_to_f16(a / 7.0f); /* 7: symmetric int4 magnitude, stored q+8 */
        float d = qv_f16_to_f32(dh);
        out[0] = (uint8_t)dh; out[1] = (uint8_t)(dh >> 8);
        for (int j = 0; j < 16; j++) {
            long lo = d > 0 ? lrintf(x[j] / d) + 8 : 8, hi = d > 0 ? lrintf(x[j + 16] / d) + 8 : 8;
            lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
            hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
            out[2 + j] = (uint8_t)(lo | (hi << 4));
        }
    } else {
        float mn = x[0], mx = x[0];
        for (int j = 1; j < 32; j++) { mn = fminf(mn, x[j]); mx = fmaxf(mx, x[j]); }
        uint16_t dh = qv_f32_to_f16((mx - mn) / 15.0f); /* 15: the largest 4-bit code */
        uint16_t mh = qv_f32_to_f16(mn);
        float d = qv_f16_to_f32(dh), m = qv_f16_to_f32(mh);
        out[0] = (uint8_t)dh; out[1] = (uint8_t)(dh >> 8);
        out[2] = (uint8_t)mh; out[3] = (uint8_t)(mh >> 8);
        for (int j = 0; j < 16; j++) {
            long lo = d > 0 ? lrintf((x[j] - m) / d) : 0, hi = d > 0 ? lrintf((x[j + 16] - m) / d) : 0;
            lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
            hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
            out[4 + j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

qv_status qv_gguf_w_tensor(qv_gguf_writer *w, const char *name, qv_ggml_type type, int n_dims,
                           const int64_t *ne, const float *x)
{
    size_t bb = qv_ggml_block_bytes(type);
    int bv = qv_ggml_block_values(type);
    if (bb == 0) return qv_fail(QV_ERR_DTYPE, "GGUF writer: unsupported tensor type %d", (int)type);
    if (n_dims < 1 || n_dims > 4) return qv_fail(QV_ERR_SHAPE, "GGUF writer: %d dimensions", n_dims);
    int64_t nelem = 1;
    for (int i = 0; i < n_dims; i++) nelem *= ne[i];
    if (ne[0] % bv != 0)
        return qv_fail(QV_ERR_SHAPE, "GGUF writer: row length %lld not a multiple of %d", (long long)ne[0], bv);
    while (w->data.len % W_ALIGN) wb_le(&w->data, 0, 1);
    wb_str(&w->info, name);
    wb_le(&w->info, (uint64_t)n_dims, 4);
    for (int i = 0; i < n_dims; i++) wb_le(&w->info, (uint64_t)ne[i], 8);
    wb_le(&w->info, (uint64_t)type, 4);
    wb_le(&w->info, w->data.len, 8);
    w->n_tensors++;
    for (int64_t i = 0; i < nelem; i += bv) {
        uint8_t blk[64];
        if (type == QV_GGML_F32) {
            uint32_t b;
            memcpy(&b, &x[i], 4);
            wb_le(&w->data, b, 4);
            continue;
        }
        if (type == QV_GGML_F16) { wb_le(&w->data, qv_f32_to_f16(x[i]), 2); continue; }
        if (type == QV_GGML_BF16) { wb_le(&w->data, qv_f32_to_bf16(x[i]), 2); continue; }
        quant_block(type, &x[i], blk);
        wb_put(&w->data, blk, bb);
    }
    return QV_OK;
}

const uint8_t *qv_gguf_writer_bytes(qv_gguf_writer *w, size_t *len)
{
    w->image.len = 0;
    wb_le(&w->image, 0x46554747u, 4); /* "GGUF" */
    wb_le(&w->image, 3, 4);           /* version 3 */
    wb_le(&w->image, w->n_tensors, 8);
    wb_le(&w->image, w->n_kv, 8);
    if (w->kv.len) wb_put(&w->image, w->kv.p, w->kv.len);
    if (w->info.len) wb_put(&w->image, w->info.p, w->info.len);
    while (w->image.len % W_ALIGN) wb_le(&w->image, 0, 1);
    if (w->data.len) wb_put(&w->image, w->data.p, w->data.len);
    *len = w->image.len;
    return w->image.p;
}

qv_status qv_gguf_writer_save(qv_gguf_writer *w, const char *path)
{
    size_t len;
    const uint8_t *img = qv_gguf_writer_bytes(w, &len);
    FILE *f = fopen(path, "wb");
    if (!f) return qv_fail(QV_ERR_IO, "cannot create '%s'", path);
    size_t put = fwrite(img, 1, len, f);
    if (fclose(f) != 0 || put != len) return qv_fail(QV_ERR_IO, "short write on '%s'", path);
    return QV_OK;
}
