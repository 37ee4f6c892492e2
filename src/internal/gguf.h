/* gguf.h: reading (and, for tests, writing) GGUF model files: metadata of every
 * value type and tensors dequantized to f32 (F32, F16, BF16, Q8_0, Q4_0, Q4_1).
 * Included by eval/ (model loader, tokenizer), the GGUF tests and the libFuzzer
 * target. Rule: every read goes through a bounds-checked cursor and every size
 * is overflow-checked; a malformed file is refused with QV_ERR_FORMAT and a
 * message naming the offending field, never read past its end. */
#ifndef QVET_GGUF_H
#define QVET_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata value types, numbered as the GGUF specification numbers them. */
typedef enum qv_gguf_vtype {
    QV_GGUF_U8 = 0, QV_GGUF_I8 = 1, QV_GGUF_U16 = 2, QV_GGUF_I16 = 3,
    QV_GGUF_U32 = 4, QV_GGUF_I32 = 5, QV_GGUF_F32 = 6, QV_GGUF_BOOL = 7,
    QV_GGUF_STRING = 8, QV_GGUF_ARRAY = 9, QV_GGUF_U64 = 10, QV_GGUF_I64 = 11,
    QV_GGUF_F64 = 12,
    QV_GGUF_VTYPE_COUNT
} qv_gguf_vtype;

/* Tensor element types, numbered as ggml numbers them (only those qvet decodes). */
typedef enum qv_ggml_type {
    QV_GGML_F32 = 0,
    QV_GGML_F16 = 1,
    QV_GGML_Q4_0 = 2,   /* 32 values: f16 d, 16 bytes of nibbles; x = (q - 8) * d */
    QV_GGML_Q4_1 = 3,   /* 32 values: f16 d, f16 m, 16 bytes of nibbles; x = q * d + m */
    QV_GGML_Q8_0 = 8,   /* 32 values: f16 d, 32 int8; x = q * d */
    QV_GGML_BF16 = 30
} qv_ggml_type;

/* A string inside the file: not NUL-terminated. */
typedef struct qv_gguf_str {
    const char *p;
    uint64_t len;
} qv_gguf_str;

/* One metadata value. Arrays keep their element type and count; string arrays
 * are exposed as an allocated table of qv_gguf_str, numeric arrays as a
 * pointer to their little-endian elements inside the file image. Arrays of
 * arrays are validated and kept as a count only. */
typedef struct qv_gguf_kv {
    qv_gguf_str key;
    qv_gguf_vtype type;
    union {
        uint64_t u;     /* U8..U64 and BOOL (0 or 1) */
        int64_t i;      /* I8..I64 */
        double f;       /* F32, F64 */
        qv_gguf_str s;  /* STRING */
    } v;
    qv_gguf_vtype arr_type;     /* ARRAY: element type */
    uint64_t arr_count;         /* ARRAY: element count */
    const uint8_t *arr_data;    /* ARRAY of numbers: arr_count elements, little-endian */
    qv_gguf_str *arr_str;       /* ARRAY of STRING: arr_count entries (owned) */
} qv_gguf_kv;

typedef struct qv_gguf_tensor {
    qv_gguf_str name;
    int n_dims;                 /* 1..4 */
    int64_t ne[4];              /* ggml order: ne[0] is the contiguous (row) length; unused = 1 */
    int64_t nelem;
    qv_ggml_type type;
    uint64_t offset;            /* from the start of the data section */
    uint64_t nbytes;
    const uint8_t *data;        /* nbytes inside the file image */
} qv_gguf_tensor;

typedef struct qv_gguf {
    uint32_t version;           /* 2 or 3 */
    uint64_t n_kv, n_tensors;
    qv_gguf_kv *kv;             /* (n_kv) */
    qv_gguf_tensor *tensors;    /* (n_tensors) */
    uint32_t alignment;         /* general.alignment, default 32 */
    const uint8_t *image;       /* the whole file (owned when `owned`) */
    size_t image_len;
    int owned;
} qv_gguf;

/* Parses a GGUF image of len bytes. With copy=1 the image is copied and owned;
 * with copy=0 the caller keeps buf alive for the lifetime of *out. */
qv_status qv_gguf_parse(const uint8_t *buf, size_t len, int copy, qv_gguf **out);
/* Reads and parses a file (missing file: QV_ERR_IO). */
qv_status qv_gguf_open(const char *path, qv_gguf **out);
void      qv_gguf_close(qv_gguf *g);

/* Metadata look-ups. find returns NULL when the key is absent. The typed
 * getters return QV_ERR_FORMAT naming the key when it is absent or of a type
 * that cannot hold the request (get_u64 accepts any non-negative integer). */
const qv_gguf_kv *qv_gguf_find(const qv_gguf *g, const char *key);
qv_status qv_gguf_get_u64(const qv_gguf *g, const char *key, uint64_t *out);
qv_status qv_gguf_get_f64(const qv_gguf *g, const char *key, double *out);
qv_status qv_gguf_get_str(const qv_gguf *g, const char *key, qv_gguf_str *out);
/* Element i of a numeric array as a double (integers exactly up to 2^53). */
double    qv_gguf_arr_num(const qv_gguf_kv *kv, uint64_t i);

const qv_gguf_tensor *qv_gguf_tensor_find(const qv_gguf *g, const char *name);
/* Decodes all t->nelem elements to f32, in ggml order (row ne[0] contiguous). */
qv_status qv_gguf_tensor_f32(const qv_gguf_tensor *t, float *out);

/* Per-type block geometry: values per block and bytes per block (0 if unknown). */
int    qv_ggml_block_values(qv_ggml_type t);
size_t qv_ggml_block_bytes(qv_ggml_type t);
const char *qv_ggml_type_name(qv_ggml_type t);

/* --- Writer (tests, tiny models) ------------------------------------------- */
typedef struct qv_gguf_writer qv_gguf_writer;

qv_gguf_writer *qv_gguf_writer_create(void);
void qv_gguf_writer_destroy(qv_gguf_writer *w);
void qv_gguf_w_u32(qv_gguf_writer *w, const char *key, uint32_t v);
void qv_gguf_w_f32(qv_gguf_writer *w, const char *key, float v);
void qv_gguf_w_bool(qv_gguf_writer *w, const char *key, int v);
void qv_gguf_w_str(qv_gguf_writer *w, const char *key, const char *v);
/* strs: (count) NUL-terminated strings */
void qv_gguf_w_str_array(qv_gguf_writer *w, const char *key, const char *const *strs, uint64_t count);
/* vals: (count) int32 */
void qv_gguf_w_i32_array(qv_gguf_writer *w, const char *key, const int32_t *vals, uint64_t count);
/* Adds a tensor of ggml dims ne[0..n_dims) encoded from f32 values x (nelem,
 * ggml order) into `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1: round to nearest). */
qv_status qv_gguf_w_tensor(qv_gguf_writer *w, const char *name, qv_ggml_type type, int n_dims,
                           const int64_t *ne, const float *x);
/* The finished file image (owned by the writer until destroy). */
const uint8_t *qv_gguf_writer_bytes(qv_gguf_writer *w, size_t *len);
qv_status qv_gguf_writer_save(qv_gguf_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif
