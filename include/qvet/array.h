/* array.h: n-dimensional host arrays and their files (.npy, .safetensors).
 * Included by the CLI, the reference, the generator and tests. Rule: a file is
 * either read whole and validated, or refused with a qv_status and a message;
 * nothing is ever read past the bytes that exist, and a written file appears
 * whole (written to a temporary name, then renamed) or not at all. */
#ifndef QVET_ARRAY_H
#define QVET_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QV_MAX_DIMS 8

/* Element types of arrays on disk. QV_DT_BF16 has no numpy dtype: in .npy it is
 * written as '<u2' holding the raw bf16 bit patterns (the documented qvet
 * convention); a '<u2' array is read as QV_DT_U2 and the caller that expects
 * bf16 reinterprets it. In .safetensors "BF16" maps to QV_DT_BF16. */
typedef enum qv_dtype {
    QV_DT_INVALID = 0,
    QV_DT_I1, QV_DT_U1, QV_DT_I2, QV_DT_U2, QV_DT_I4, QV_DT_U4, QV_DT_I8, QV_DT_U8,
    QV_DT_F2, QV_DT_F4, QV_DT_F8, QV_DT_BF16,
    QV_DT_E4M3, QV_DT_E5M2,   /* safetensors F8_E4M3 / F8_E5M2 (raw codes) */
    QV_DT_COUNT
} qv_dtype;

size_t      qv_dtype_size(qv_dtype dt);
const char *qv_dtype_name(qv_dtype dt);   /* numpy-style: "int8", "float16", "bfloat16" */

typedef struct qv_array {
    qv_dtype dtype;
    int ndim;
    int64_t shape[QV_MAX_DIMS];
    int64_t count;   /* product of shape (1 for ndim 0) */
    size_t nbytes;   /* count * element size */
    void *data;      /* C order, little-endian, owned unless `borrowed` */
    int borrowed;
} qv_array;

/* Allocates a zeroed array; refuses shapes whose size overflows. */
qv_status qv_array_create(qv_array *a, qv_dtype dt, int ndim, const int64_t *shape);
void      qv_array_destroy(qv_array *a);
/* "(16, 4096) int8" into buf; returns buf. */
const char *qv_array_describe(const qv_array *a, char *buf, size_t len);

/* .npy: versions 1.0, 2.0 and 3.0, little-endian, C order. Fortran order and
 * big-endian data are refused with a clear message. */
qv_status qv_npy_load(const char *path, qv_array *out);
qv_status qv_npy_parse(const void *buf, size_t len, qv_array *out); /* from memory */
qv_status qv_npy_save(const char *path, const qv_array *a);         /* writes v1.0 */

/* .safetensors: an 8-byte header length, a JSON header, then the data. */
typedef struct qv_st_file qv_st_file;
qv_status qv_st_open(const char *path, qv_st_file **out);
qv_status qv_st_parse(const void *buf, size_t len, qv_st_file **out); /* copies buf */
void      qv_st_close(qv_st_file *f);
int       qv_st_count(const qv_st_file *f);
const char *qv_st_name(const qv_st_file *f, int i);
/* A view (borrowed = 1) of tensor `name`; valid until qv_st_close. */
qv_status qv_st_get(const qv_st_file *f, const char *name, qv_array *view);
/* Writes tensors to a .safetensors file (for tests and tools). */
qv_status qv_st_save(const char *path, int n, const char *const *names, const qv_array *arrays);

#ifdef __cplusplus
}
#endif
#endif
