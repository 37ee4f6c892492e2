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
 * bf16 reinterprets it. In .safetensors "BF16" maps to QV_DT_BF16. Likewise
 * the fp8 codes QV_DT_E4M3 / QV_DT_E5M2 go to .npy as '|u1' raw codes and come
 * back as QV_DT_U1. A numpy bool array ('|b1') is read as QV_DT_U1 after
 * checking that every byte is 0 or 1 (it is written back as '|u1'). */
typedef enum qv_dtype {
    QV_DT_INVALID = 0,
    QV_DT_I1, QV_DT_U1, QV_DT_I2, QV_DT_U2, QV_DT_I4, QV_DT_U4, QV_DT_I8, QV_DT_U8,
    QV_DT_F2, QV_DT_F4, QV_DT_F8, QV_DT_BF16,
    QV_DT_E4M3, QV_DT_E5M2,   /* safetensors F8_E4M3 / F8_E5M2 (raw codes) */
    QV_DT_COUNT
} qv_dtype;

size_t      qv_dtype_size(qv_dtype dt);
const char *qv_dtype_name(qv_dtype dt);   /* numpy-style: "int8", "float16", "bfloat16" */
/* The .npy descr qvet writes ("<f4", "|i1"; "<u2" for bf16) and the
 * .safetensors dtype ("F32", "BF16", "F8_E4M3"); NULL for an invalid dtype. */
const char *qv_dtype_npy_descr(qv_dtype dt);
const char *qv_dtype_st_name(qv_dtype dt);
qv_dtype    qv_dtype_from_st_name(const char *s); /* QV_DT_INVALID if unknown */

/* Element count and byte size of a shape (shape: (ndim) int64), refusing
 * ndim outside 0..QV_MAX_DIMS, negative dimensions and any overflow
 * (QV_ERR_SHAPE). A shape with a zero dimension has count 0. */
qv_status qv_shape_count(int ndim, const int64_t *shape, size_t elem_size, int64_t *count,
                         size_t *nbytes);

typedef struct qv_array {
    qv_dtype dtype;
    int ndim;
    int64_t shape[QV_MAX_DIMS];
    int64_t count;   /* product of shape (1 for ndim 0) */
    size_t nbytes;   /* count * element size */
    void *data;      /* C order, little-endian, owned unless `borrowed` */
    int borrowed;
} qv_array;

/* Allocates a zeroed array; refuses shapes whose size overflows.
 * shape: (ndim) int64 dimensions, copied. */
qv_status qv_array_create(qv_array *a, qv_dtype dt, int ndim, const int64_t *shape);
void      qv_array_destroy(qv_array *a);
/* "(16, 4096) int8" into buf (len bytes, always terminated); returns buf. */
const char *qv_array_describe(const qv_array *a, char *buf, size_t len);

/* .npy: versions 1.0, 2.0 and 3.0, little-endian, C order. Fortran order and
 * big-endian data are refused with a clear message, as are structured,
 * complex, string and object dtypes, and trailing bytes after the data.
 * Accepted descrs: i1 u1 (with '|', '<', '>' or '=' byte order, which mean
 * nothing for one byte), '<i2' '<u2' '<i4' '<u4' '<i8' '<u8' '<f2' '<f4' '<f8',
 * and '|b1' (read as u1, see above). The loaded array owns a copy of the data.
 * The writer produces the bytes numpy's np.save produces: format 1.0 (2.0 is
 * never needed: an 8-dimension header is far below 64 KiB), the same dict
 * text, the same growth padding after it, and the preamble plus header padded
 * to a multiple of 64 bytes. */
/* out: filled on success (it owns a copy of the data; qv_array_destroy it),
 * all zero on failure. buf: (len) bytes of a whole .npy file, not kept. */
qv_status qv_npy_load(const char *path, qv_array *out);
qv_status qv_npy_parse(const void *buf, size_t len, qv_array *out);
/* a: any valid array, owned or borrowed; bf16 and fp8 go out as raw bits. */
qv_status qv_npy_save(const char *path, const qv_array *a);

/* .safetensors: an 8-byte little-endian header length, a JSON header, then the
 * data. The reader accepts dtypes F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16
 * U8 F8_E4M3 F8_E5M2 and an optional "__metadata__" object of strings, and
 * refuses a header past the end, a header that is not a JSON object, unknown
 * keys, duplicate names, shapes with negative or too many dimensions, and
 * data_offsets that are out of bounds, overlap, leave a gap or disagree with
 * shape x dtype. The writer orders tensors as the reference implementation
 * does (larger element size first, then by name) and pads the header with
 * spaces so the data starts 8-byte aligned. */
typedef struct qv_st_file qv_st_file;
/* *out: the opened file on success, NULL on failure. buf: (len) bytes of a
 * whole .safetensors file, copied (the caller keeps its buffer). */
qv_status qv_st_open(const char *path, qv_st_file **out);
qv_status qv_st_parse(const void *buf, size_t len, qv_st_file **out);
void      qv_st_close(qv_st_file *f);                /* NULL is a no-op */
int       qv_st_count(const qv_st_file *f);
/* Name of tensor i (0 <= i < count) in header order; NULL out of range. */
const char *qv_st_name(const qv_st_file *f, int i);
/* A view (borrowed = 1) of tensor `name`, aligned to its element size; valid
 * until qv_st_close. An unknown name is refused (QV_ERR_FORMAT). */
qv_status qv_st_get(const qv_st_file *f, const char *name, qv_array *view);
/* The value of "__metadata__"[key], or NULL if absent. */
const char *qv_st_metadata(const qv_st_file *f, const char *key);
/* Writes tensors to a .safetensors file (for tests and tools); names and
 * arrays: (n) each. Refuses duplicate or empty names and "__metadata__". */
qv_status qv_st_save(const char *path, int n, const char *const *names, const qv_array *arrays);

/* Whole-file helpers. qv_file_read gives a malloc'ed copy of the file (*buf,
 * *len bytes; free() it). qv_file_write_atomic writes the concatenation of
 * parts[0..nparts) (sizes[i] bytes each) to a temporary file in the same
 * folder, syncs it and renames it over path, so path is either the old file
 * or the complete new one, never a partial write. */
qv_status qv_file_read(const char *path, void **buf, size_t *len);
qv_status qv_file_write_atomic(const char *path, int nparts, const void *const *parts,
                               const size_t *sizes);

#ifdef __cplusplus
}
#endif
#endif
