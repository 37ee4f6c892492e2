/* gguf.c: the GGUF reader (gguf.h). A file is parsed in one pass through a
 * bounds-checked cursor: header, metadata, tensor infos, then the aligned data
 * section. Every count is checked against the bytes that remain before anything
 * is allocated, and every size product against overflow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/gguf.h"
#include "qvet/array.h"
#include "qvet/formats.h"

#include "eval_internal.h"

/* 'G' 'G' 'U' 'F' read as a little-endian uint32. */
#define GGUF_MAGIC 0x46554747u
/* ggml's GGML_MAX_DIMS: a tensor has at most 4 dimensions. */
#define GGUF_MAX_DIMS 4
/* The default data alignment when general.alignment is absent (GGUF spec). */
#define GGUF_DEFAULT_ALIGN 32
/* Arrays nested deeper than this are refused (no real file nests at all). */
#define GGUF_MAX_NEST 4

typedef struct cursor {
    const uint8_t *p;
    size_t len, pos;
} cursor;

static uint64_t rd_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static qv_status cur_take(cursor *c, size_t n, const uint8_t **out, const char *what)
{
    if (n > c->len - c->pos)
        return qv_fail(QV_ERR_FORMAT, "GGUF: truncated file: %s needs %zu bytes at offset %zu, %zu left",
                       what, n, c->pos, c->len - c->pos);
    *out = c->p + c->pos;
    c->pos += n;
    return QV_OK;
}

static qv_status cur_uint(cursor *c, int bytes, uint64_t *v, const char *what)
{
    const uint8_t *p = NULL;
    QV_TRY(cur_take(c, (size_t)bytes, &p, what));
    *v = rd_le(p, bytes);
    return QV_OK;
}

static qv_status cur_str(cursor *c, qv_gguf_str *s, const char *what)
{
    uint64_t n;
    const uint8_t *p = NULL;
    QV_TRY(cur_uint(c, 8, &n, what));
    if (n > c->len - c->pos)
        return qv_fail(QV_ERR_FORMAT, "GGUF: %s: string length %llu runs past the end of the file",
                       what, (unsigned long long)n);
    QV_TRY(cur_take(c, (size_t)n, &p, what));
    s->p = (const char *)p;
    s->len = n;
    return QV_OK;
}

/* Bytes of one scalar of a metadata type (0 for STRING and ARRAY). */
static int vtype_size(uint32_t t)
{
    switch (t) {
    case QV_GGUF_U8: case QV_GGUF_I8: case QV_GGUF_BOOL: return 1;
    case QV_GGUF_U16: case QV_GGUF_I16: return 2;
    case QV_GGUF_U32: case QV_GGUF_I32: case QV_GGUF_F32: return 4;
    case QV_GGUF_U64: case QV_GGUF_I64: case QV_GGUF_F64: return 8;
    default: return 0;
    }
}

static int vtype_is_signed(uint32_t t)
{
    return t == QV_GGUF_I8 || t == QV_GGUF_I16 || t == QV_GGUF_I32 || t == QV_GGUF_I64;
}

static double num_value(uint32_t t, const uint8_t *p)
{
    uint64_t raw = rd_le(p, vtype_size(t));
    switch (t) {
    case QV_GGUF_I8: return (double)(int8_t)raw;
    case QV_GGUF_I16: return (double)(int16_t)raw;
    case QV_GGUF_I32: return (double)(int32_t)raw;
    case QV_GGUF_I64: return (double)(int64_t)raw;
    case QV_GGUF_F32: { uint32_t b = (uint32_t)raw; float f; memcpy(&f, &b, 4); return f; }
    case QV_GGUF_F64: { double d; memcpy(&d, &raw, 8); return d; }
    default: return (double)raw;
    }
}

double qv_gguf_arr_num(const qv_gguf_kv *kv, uint64_t i)
{
    QV_ASSERT(kv->type == QV_GGUF_ARRAY && vtype_size(kv->arr_type) > 0 && i < kv->arr_count,
              "qv_gguf_arr_num needs a numeric array and an index below its count");
    return num_value(kv->arr_type, kv->arr_data + i * (uint64_t)vtype_size(kv->arr_type));
}

/* Skips (validating) one array body of element type t; used for nested arrays. */
static qv_status skip_array(cursor *c, int depth, uint64_t *count_out)
{
    uint64_t t, n;
    if (depth > GGUF_MAX_NEST) return qv_fail(QV_ERR_FORMAT, "GGUF: arrays nested deeper than %d", GGUF_MAX_NEST);
    QV_TRY(cur_uint(c, 4, &t, "array element type"));
    QV_TRY(cur_uint(c, 8, &n, "array count"));
    if (count_out) *count_out = n;
    if (t >= QV_GGUF_VTYPE_COUNT) return qv_fail(QV_ERR_FORMAT, "GGUF: unknown array element type %llu", (unsigned long long)t);
    int sz = vtype_size((uint32_t)t);
    if (sz > 0) {
        const uint8_t *p;
        if (n > (c->len - c->pos) / (uint64_t)sz)
            return qv_fail(QV_ERR_FORMAT, "GGUF: array of %llu elements runs past the end of the file", (unsigned long long)n);
        return cur_take(c, (size_t)(n * (uint64_t)sz), &p, "array data");
    }
    /* Strings need 8 bytes each at least, nested arrays 12: refuse absurd counts early. */
    if (n > (c->len - c->pos) / 8)
        return qv_fail(QV_ERR_FORMAT, "GGUF: array count %llu exceeds the bytes left", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        if (t == QV_GGUF_STRING) {
            qv_gguf_str s;
            QV_TRY(cur_str(c, &s, "array string"));
        } else {
            QV_TRY(skip_array(c, depth + 1, NULL));
        }
    }
    return QV_OK;
}

static qv_status read_kv(cursor *c, qv_gguf_kv *kv)
{
    uint64_t t;
    QV_TRY(cur_str(c, &kv->key, "metadata key"));
    QV_TRY(cur_uint(c, 4, &t, "metadata value type"));
    if (t >= QV_GGUF_VTYPE_COUNT)
        return qv_fail(QV_ERR_FORMAT, "GGUF: key '%.*s' has unknown value type %llu",
                       (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.p, (unsigned long long)t);
    kv->type = (qv_gguf_vtype)t;
    if (t == QV_GGUF_STRING) return cur_str(c, &kv->v.s, "metadata string");
    if (t != QV_GGUF_ARRAY) {
        uint64_t raw;
        QV_TRY(cur_uint(c, vtype_size((uint32_t)t), &raw, "metadata value"));
        const uint8_t *p = c->p + c->pos - vtype_size((uint32_t)t);
        if (t == QV_GGUF_F32 || t == QV_GGUF_F64) kv->v.f = num_value((uint32_t)t, p);
        else if (vtype_is_signed((uint32_t)t)) kv->v.i = (int64_t)num_value((uint32_t)t, p);
        else if (t == QV_GGUF_BOOL) {
            if (raw > 1) return qv_fail(QV_ERR_FORMAT, "GGUF: bool value %llu is neither 0 nor 1", (unsigned long long)raw);
            kv->v.u = raw;
        } else kv->v.u = raw;
        return QV_OK;
    }
    /* ARRAY: element type, count, elements. */
    size_t start = c->pos;
    uint64_t et;
    QV_TRY(cur_uint(c, 4, &et, "array element type"));
    c->pos = start;
    if (et != QV_GGUF_STRING && et < QV_GGUF_VTYPE_COUNT && et != QV_GGUF_ARRAY) {
        QV_TRY(skip_array(c, 0, &kv->arr_count));
        kv->arr_type = (qv_gguf_vtype)et;
        kv->arr_data = c->p + start + 12; /* 12: element type (4) and count (8) */
        return QV_OK;
    }
    if (et == QV_GGUF_STRING) {
        uint64_t n;
        QV_TRY(cur_uint(c, 4, &et, "array element type"));
        QV_TRY(cur_uint(c, 8, &n, "array count"));
        if (n > (c->len - c->pos) / 8)
            return qv_fail(QV_ERR_FORMAT, "GGUF: string array count %llu exceeds the bytes left", (unsigned long long)n);
        kv->arr_type = QV_GGUF_STRING;
        kv->arr_count = n;
        kv->arr_str = calloc(n ? n : 1, sizeof *kv->arr_str);
        if (!kv->arr_str) return qv_fail(QV_ERR_NOMEM, "GGUF: no memory for %llu strings", (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) QV_TRY(cur_str(c, &kv->arr_str[i], "array string"));
        return QV_OK;
    }
    kv->arr_type = (qv_gguf_vtype)et;
    return skip_array(c, 0, &kv->arr_count);
}

int qv_ggml_block_values(qv_ggml_type t)
{
    switch (t) {
    case QV_GGML_F32: case QV_GGML_F16: case QV_GGML_BF16: return 1;
    case QV_GGML_Q4_0: case QV_GGML_Q4_1: case QV_GGML_Q8_0: return 32; /* ggml's QK4_0/QK4_1/QK8_0 */
    }
    return 0;
}

size_t qv_ggml_block_bytes(qv_ggml_type t)
{
    switch (t) {
    case QV_GGML_F32: return 4;
    case QV_GGML_F16: case QV_GGML_BF16: return 2;
    case QV_GGML_Q4_0: return 2 + 16;      /* f16 d + 32 nibbles */
    case QV_GGML_Q4_1: return 2 + 2 + 16;  /* f16 d, f16 m + 32 nibbles */
    case QV_GGML_Q8_0: return 2 + 32;      /* f16 d + 32 int8 */
    }
    return 0;
}

const char *qv_ggml_type_name(qv_ggml_type t)
{
    switch (t) {
    case QV_GGML_F32: return "F32";
    case QV_GGML_F16: return "F16";
    case QV_GGML_BF16: return "BF16";
    case QV_GGML_Q4_0: return "Q4_0";
    case QV_GGML_Q4_1: return "Q4_1";
    case QV_GGML_Q8_0: return "Q8_0";
    }
    return "unknown";
}

/* 2^62: far above any real tensor, low enough that byte products cannot overflow. */
#define GGUF_MAX_ELEMS ((int64_t)1 << 62)

static qv_status read_tensor_info(cursor *c, qv_gguf_tensor *t)
{
    uint64_t nd, ty, off;
    QV_TRY(cur_str(c, &t->name, "tensor name"));
    int nl = (int)(t->name.len > 200 ? 200 : t->name.len);
    QV_TRY(cur_uint(c, 4, &nd, "tensor n_dims"));
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return qv_fail(QV_ERR_FORMAT, "GGUF: tensor '%.*s' has %llu dimensions (1..4 allowed)", nl, t->name.p,
                       (unsigned long long)nd);
    t->n_dims = (int)nd;
    t->nelem = 1;
    for (int i = 0; i < GGUF_MAX_DIMS; i++) t->ne[i] = 1;
    for (int i = 0; i < t->n_dims; i++) {
        uint64_t d;
        QV_TRY(cur_uint(c, 8, &d, "tensor dimension"));
        if (d == 0 || d > (uint64_t)GGUF_MAX_ELEMS || (uint64_t)t->nelem > (uint64_t)GGUF_MAX_ELEMS / d)
            return qv_fail(QV_ERR_FORMAT, "GGUF: tensor '%.*s' dimension %d = %llu is zero or overflows", nl,
                           t->name.p, i, (unsigned long long)d);
        t->ne[i] = (int64_t)d;
        t->nelem *= (int64_t)d;
    }
    QV_TRY(cur_uint(c, 4, &ty, "tensor type"));
    size_t bb = ty <= 64 ? qv_ggml_block_bytes((qv_ggml_type)ty) : 0; /* 64: well past ggml's last type */
    if (bb == 0)
        return qv_fail(QV_ERR_DTYPE, "GGUF: tensor '%.*s' has ggml type %llu, which qvet does not decode", nl,
                       t->name.p, (unsigned long long)ty);
    t->type = (qv_ggml_type)ty;
    int bv = qv_ggml_block_values(t->type);
    if (t->ne[0] % bv != 0)
        return qv_fail(QV_ERR_FORMAT, "GGUF: tensor '%.*s' row length %lld is not a multiple of the %s block (%d)",
                       nl, t->name.p, (long long)t->ne[0], qv_ggml_type_name(t->type), bv);
    t->nbytes = (uint64_t)(t->nelem / bv) * bb;
    QV_TRY(cur_uint(c, 8, &off, "tensor offset"));
    t->offset = off;
    return QV_OK;
}

void qv_gguf_close(qv_gguf *g)
{
    if (!g) return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) free(g->kv[i].arr_str);
    free(g->kv);
    free(g->tensors);
    if (g->owned) free((void *)g->image);
    free(g);
}

static qv_status parse_into(qv_gguf *g)
{
    cursor c = {g->image, g->image_len, 0};
    uint64_t magic, ver;
    QV_TRY(cur_uint(&c, 4, &magic, "magic"));
    if (magic != GGUF_MAGIC) return qv_fail(QV_ERR_FORMAT, "GGUF: bad magic (not a GGUF file)");
    QV_TRY(cur_uint(&c, 4, &ver, "version"));
    if (ver != 2 && ver != 3)
        return qv_fail(QV_ERR_FORMAT, "GGUF: version %llu is not supported (2 and 3 are)", (unsigned long long)ver);
    g->version = (uint32_t)ver;
    QV_TRY(cur_uint(&c, 8, &g->n_tensors, "tensor count"));
    QV_TRY(cur_uint(&c, 8, &g->n_kv, "metadata count"));
    /* A key-value pair takes at least 8+4+1 bytes and a tensor info 8+4+8+4+8. */
    size_t left = c.len - c.pos;
    if (g->n_kv > left / 13 || g->n_tensors > left / 32)
        return qv_fail(QV_ERR_FORMAT, "GGUF: absurd counts (%llu keys, %llu tensors) for a %zu-byte file",
                       (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors, g->image_len);
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return qv_fail(QV_ERR_NOMEM, "GGUF: no memory for the tables");
    for (uint64_t i = 0; i < g->n_kv; i++) QV_TRY(read_kv(&c, &g->kv[i]));
    g->alignment = GGUF_DEFAULT_ALIGN;
    const qv_gguf_kv *al = qv_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != QV_GGUF_U32 || al->v.u == 0 || (al->v.u & (al->v.u - 1)) != 0)
            return qv_fail(QV_ERR_FORMAT, "GGUF: general.alignment must be a power-of-two uint32");
        g->alignment = (uint32_t)al->v.u;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) QV_TRY(read_tensor_info(&c, &g->tensors[i]));
    size_t data_start = c.pos + (g->alignment - c.pos % g->alignment) % g->alignment;
    if (data_start > c.len && g->n_tensors > 0)
        return qv_fail(QV_ERR_FORMAT, "GGUF: data section starts past the end of the file");
    size_t data_len = data_start <= c.len ? c.len - data_start : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        qv_gguf_tensor *t = &g->tensors[i];
        int nl = (int)(t->name.len > 200 ? 200 : t->name.len);
        if (t->offset % g->alignment != 0)
            return qv_fail(QV_ERR_FORMAT, "GGUF: tensor '%.*s' offset %llu is not aligned to %u", nl, t->name.p,
                           (unsigned long long)t->offset, g->alignment);
        if (t->offset > data_len || t->nbytes > data_len - t->offset)
            return qv_fail(QV_ERR_FORMAT, "GGUF: tensor '%.*s' (%llu bytes at offset %llu) runs past the end of the file",
                           nl, t->name.p, (unsigned long long)t->nbytes, (unsigned long long)t->offset);
        t->data = g->image + data_start + t->offset;
        for (uint64_t j = 0; j < i; j++)
            if (g->tensors[j].name.len == t->name.len && memcmp(g->tensors[j].name.p, t->name.p, t->name.len) == 0)
                return qv_fail(QV_ERR_FORMAT, "GGUF: tensor name '%.*s' appears twice", nl, t->name.p);
    }
    return QV_OK;
}

qv_status qv_gguf_parse(const uint8_t *buf, size_t len, int copy, qv_gguf **out)
{
    *out = NULL;
    qv_gguf *g = calloc(1, sizeof *g);
    if (!g) return qv_fail(QV_ERR_NOMEM, "GGUF: no memory");
    if (copy) {
        uint8_t *img = malloc(len ? len : 1);
        if (!img) { free(g); return qv_fail(QV_ERR_NOMEM, "GGUF: no memory for a %zu-byte image", len); }
        if (len) memcpy(img, buf, len);
        g->image = img;
        g->owned = 1;
    } else {
        g->image = buf;
    }
    g->image_len = len;
    qv_status st = parse_into(g);
    if (st != QV_OK) { qv_gguf_close(g); return st; }
    *out = g;
    return QV_OK;
}

qv_status qv_gguf_open(const char *path, qv_gguf **out)
{
    *out = NULL;
    /* a regular file only (a directory opens, and its size would read as
     * LONG_MAX), sized by fstat */
    void *img;
    size_t sz;
    QV_TRY(qv_file_read(path, &img, &sz));
    qv_gguf *g = calloc(1, sizeof *g);
    if (!g) { free(img); return qv_fail(QV_ERR_NOMEM, "GGUF: no memory"); }
    g->image = img;
    g->image_len = sz;
    g->owned = 1;
    qv_status st = parse_into(g);
    if (st != QV_OK) {
        qv_gguf_close(g);
        return ev_prefix(st, path);
    }
    *out = g;
    return QV_OK;
}

const qv_gguf_kv *qv_gguf_find(const qv_gguf *g, const char *key)
{
    size_t kl = strlen(key);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key.len == kl && memcmp(g->kv[i].key.p, key, kl) == 0) return &g->kv[i];
    return NULL;
}

qv_status qv_gguf_get_u64(const qv_gguf *g, const char *key, uint64_t *out)
{
    const qv_gguf_kv *kv = qv_gguf_find(g, key);
    if (!kv) return qv_fail(QV_ERR_FORMAT, "GGUF: missing metadata key '%s'", key);
    if (vtype_size(kv->type) == 0 || kv->type == QV_GGUF_F32 || kv->type == QV_GGUF_F64 || kv->type == QV_GGUF_BOOL)
        return qv_fail(QV_ERR_FORMAT, "GGUF: metadata key '%s' is not an integer", key);
    if (vtype_is_signed(kv->type)) {
        if (kv->v.i < 0) return qv_fail(QV_ERR_FORMAT, "GGUF: metadata key '%s' is negative", key);
        *out = (uint64_t)kv->v.i;
    } else {
        *out = kv->v.u;
    }
    return QV_OK;
}

qv_status qv_gguf_get_f64(const qv_gguf *g, const char *key, double *out)
{
    const qv_gguf_kv *kv = qv_gguf_find(g, key);
    if (!kv) return qv_fail(QV_ERR_FORMAT, "GGUF: missing metadata key '%s'", key);
    if (kv->type == QV_GGUF_F32 || kv->type == QV_GGUF_F64) *out = kv->v.f;
    else if (vtype_is_signed(kv->type)) *out = (double)kv->v.i;
    else if (vtype_size(kv->type) > 0 && kv->type != QV_GGUF_BOOL) *out = (double)kv->v.u;
    else return qv_fail(QV_ERR_FORMAT, "GGUF: metadata key '%s' is not a number", key);
    return QV_OK;
}

qv_status qv_gguf_get_str(const qv_gguf *g, const char *key, qv_gguf_str *out)
{
    const qv_gguf_kv *kv = qv_gguf_find(g, key);
    if (!kv) return qv_fail(QV_ERR_FORMAT, "GGUF: missing metadata key '%s'", key);
    if (kv->type != QV_GGUF_STRING) return qv_fail(QV_ERR_FORMAT, "GGUF: metadata key '%s' is not a string", key);
    *out = kv->v.s;
    return QV_OK;
}

const qv_gguf_tensor *qv_gguf_tensor_find(const qv_gguf *g, const char *name)
{
    size_t nl = strlen(name);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].name.len == nl && memcmp(g->tensors[i].name.p, name, nl) == 0) return &g->tensors[i];
    return NULL;
}

static float f16_at(const uint8_t *p)
{
    return qv_f16_to_f32((uint16_t)rd_le(p, 2));
}

qv_status qv_gguf_tensor_f32(const qv_gguf_tensor *t, float *out)
{
    const uint8_t *p = t->data;
    int64_t nb = t->nelem / qv_ggml_block_values(t->type);
    switch (t->type) {
    case QV_GGML_F32:
        for (int64_t i = 0; i < t->nelem; i++) {
            uint32_t b = (uint32_t)rd_le(p + 4 * i, 4);
            memcpy(&out[i], &b, 4);
        }
        return QV_OK;
    case QV_GGML_F16:
        for (int64_t i = 0; i < t->nelem; i++) out[i] = f16_at(p + 2 * i);
        return QV_OK;
    case QV_GGML_BF16:
        for (int64_t i = 0; i < t->nelem; i++) out[i] = qv_bf16_to_f32((uint16_t)rd_le(p + 2 * i, 2));
        return QV_OK;
    case QV_GGML_Q8_0:
        /* block: f16 d, then 32 int8 q; x[j] = q[j] * d */
        for (int64_t b = 0; b < nb; b++, p += 34) {
            float d = f16_at(p);
            for (int j = 0; j < 32; j++) out[32 * b + j] = (float)(int8_t)p[2 + j] * d;
        }
        return QV_OK;
    case QV_GGML_Q4_0:
        /* block: f16 d, then 16 bytes; byte j holds value j (low nibble) and
         * value j+16 (high nibble); x = (q - 8) * d */
        for (int64_t b = 0; b < nb; b++, p += 18) {
            float d = f16_at(p);
            for (int j = 0; j < 16; j++) {
                out[32 * b + j] = (float)((p[2 + j] & 0xF) - 8) * d;
                out[32 * b + j + 16] = (float)((p[2 + j] >> 4) - 8) * d;
            }
        }
        return QV_OK;
    case QV_GGML_Q4_1:
        /* block: f16 d, f16 m, then 16 bytes as in Q4_0; x = q * d + m
         * (computed as ggml does: one product then one sum, both in f32) */
        for (int64_t b = 0; b < nb; b++, p += 20) {
            float d = f16_at(p), m = f16_at(p + 2);
            for (int j = 0; j < 16; j++) {
                float lo = (float)(p[4 + j] & 0xF) * d;
                float hi = (float)(p[4 + j] >> 4) * d;
                out[32 * b + j] = lo + m;
                out[32 * b + j + 16] = hi + m;
            }
        }
        return QV_OK;
    }
    return qv_fail(QV_ERR_DTYPE, "GGUF: cannot decode tensor type %d", (int)t->type);
}
