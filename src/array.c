/* array.c: host arrays and the dtype tables shared by the .npy and
 * .safetensors readers (array.h). */
#include "qvet/array.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One row per dtype: size in bytes, numpy-style name, the .npy descr qvet
 * writes, and the .safetensors dtype string. bf16 and the fp8 codes have no
 * numpy dtype: they go to .npy as raw bits ('<u2', '|u1'). */
typedef struct dtype_info {
    size_t size;
    const char *name;
    const char *npy_descr;
    const char *st_name;
} dtype_info;

static const dtype_info dtypes[QV_DT_COUNT] = {
    [QV_DT_INVALID] = {0, "invalid", NULL, NULL},
    [QV_DT_I1] = {1, "int8", "|i1", "I8"},
    [QV_DT_U1] = {1, "uint8", "|u1", "U8"},
    [QV_DT_I2] = {2, "int16", "<i2", "I16"},
    [QV_DT_U2] = {2, "uint16", "<u2", "U16"},
    [QV_DT_I4] = {4, "int32", "<i4", "I32"},
    [QV_DT_U4] = {4, "uint32", "<u4", "U32"},
    [QV_DT_I8] = {8, "int64", "<i8", "I64"},
    [QV_DT_U8] = {8, "uint64", "<u8", "U64"},
    [QV_DT_F2] = {2, "float16", "<f2", "F16"},
    [QV_DT_F4] = {4, "float32", "<f4", "F32"},
    [QV_DT_F8] = {8, "float64", "<f8", "F64"},
    [QV_DT_BF16] = {2, "bfloat16", "<u2", "BF16"},
    [QV_DT_E4M3] = {1, "float8_e4m3fn", "|u1", "F8_E4M3"},
    [QV_DT_E5M2] = {1, "float8_e5m2", "|u1", "F8_E5M2"},
};

static int valid_dtype(qv_dtype dt) { return dt > QV_DT_INVALID && dt < QV_DT_COUNT; }

size_t qv_dtype_size(qv_dtype dt) { return valid_dtype(dt) ? dtypes[dt].size : 0; }

const char *qv_dtype_name(qv_dtype dt) { return valid_dtype(dt) ? dtypes[dt].name : "invalid"; }

const char *qv_dtype_npy_descr(qv_dtype dt) { return valid_dtype(dt) ? dtypes[dt].npy_descr : NULL; }

const char *qv_dtype_st_name(qv_dtype dt) { return valid_dtype(dt) ? dtypes[dt].st_name : NULL; }

qv_dtype qv_dtype_from_st_name(const char *s)
{
    for (int dt = QV_DT_INVALID + 1; dt < QV_DT_COUNT; dt++)
        if (!strcmp(dtypes[dt].st_name, s)) return (qv_dtype)dt;
    return QV_DT_INVALID;
}

qv_status qv_shape_count(int ndim, const int64_t *shape, size_t elem_size, int64_t *count,
                         size_t *nbytes)
{
    if (ndim < 0 || ndim > QV_MAX_DIMS)
        return qv_fail(QV_ERR_SHAPE, "%d dimensions: between 0 and %d are supported", ndim, QV_MAX_DIMS);
    /* The product of the non-zero dimensions must fit int64 even when another
     * dimension is 0 (numpy refuses such shapes too), and the byte size must
     * fit size_t; both are checked before each multiplication, so nothing
     * wraps. */
    int64_t n = 1;
    int has_zero = 0;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return qv_fail(QV_ERR_SHAPE, "dimension %d is negative (%lld)", i, (long long)shape[i]);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) {
            has_zero = 1;
            continue;
        }
        if (n > INT64_MAX / shape[i])
            return qv_fail(QV_ERR_SHAPE, "the shape's element count overflows 64 bits (dimension %d = %lld)",
                           i, (long long)shape[i]);
        n *= shape[i];
    }
    if (elem_size && (uint64_t)n > SIZE_MAX / elem_size)
        return qv_fail(QV_ERR_SHAPE, "%lld elements of %zu bytes overflow the address space",
                       (long long)n, elem_size);
    if (has_zero) n = 0;
    *count = n;
    *nbytes = (size_t)n * elem_size;
    return QV_OK;
}

qv_status qv_array_create(qv_array *a, qv_dtype dt, int ndim, const int64_t *shape)
{
    memset(a, 0, sizeof *a);
    if (!valid_dtype(dt)) return qv_fail(QV_ERR_DTYPE, "invalid dtype code %d", (int)dt);
    int64_t count;
    size_t nbytes;
    QV_TRY(qv_shape_count(ndim, shape, dtypes[dt].size, &count, &nbytes));
    /* One byte at least, so an empty array still owns a distinct pointer. */
    void *data = calloc(nbytes ? nbytes : 1, 1);
    if (!data) return qv_fail(QV_ERR_NOMEM, "cannot allocate %zu bytes for a %s array", nbytes, dtypes[dt].name);
    a->dtype = dt;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++) a->shape[i] = shape[i];
    a->count = count;
    a->nbytes = nbytes;
    a->data = data;
    a->borrowed = 0;
    return QV_OK;
}

void qv_array_destroy(qv_array *a)
{
    if (!a) return;
    if (!a->borrowed) free(a->data);
    memset(a, 0, sizeof *a);
}

const char *qv_array_describe(const qv_array *a, char *buf, size_t len)
{
    if (!len) return buf;
    size_t n = 0;
    /* snprintf returns the length it wanted; clamp so n never passes len. */
#define QV_APPEND(...)                                                                             \
    do {                                                                                           \
        int w_ = snprintf(buf + n, len - n, __VA_ARGS__);                                          \
        n = (w_ < 0 || (size_t)w_ >= len - n) ? len - 1 : n + (size_t)w_;                          \
    } while (0)
    QV_APPEND("(");
    for (int i = 0; i < a->ndim; i++) QV_APPEND(i ? ", %lld" : "%lld", (long long)a->shape[i]);
    QV_APPEND(a->ndim == 1 ? ",) %s" : ") %s", qv_dtype_name(a->dtype));
#undef QV_APPEND
    return buf;
}

qv_status qv_file_read(const char *path, void **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return qv_fail(QV_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return qv_fail(QV_ERR_IO, "%s is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX - 1) {
        fclose(f);
        return qv_fail(QV_ERR_NOMEM, "%s is too large to read (%lld bytes)", path, (long long)sb.st_size);
    }
    size_t n = (size_t)sb.st_size;
    /* One spare byte so an empty file still gives a non-NULL buffer. */
    unsigned char *b = malloc(n + 1);
    if (!b) {
        fclose(f);
        return qv_fail(QV_ERR_NOMEM, "cannot allocate %zu bytes to read %s", n, path);
    }
    size_t got = fread(b, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != n) {
        free(b);
        return qv_fail(QV_ERR_IO, "cannot read %s (%zu of %zu bytes read)", path, got, n);
    }
    *buf = b;
    *len = n;
    return QV_OK;
}

qv_status qv_file_write_atomic(const char *path, int nparts, const void *const *parts,
                               const size_t *sizes)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof ".tmp.XXXXXX");
    if (!tmp) return qv_fail(QV_ERR_NOMEM, "out of memory writing %s", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        qv_status st = qv_fail(QV_ERR_IO, "cannot create a temporary file next to %s: %s", path,
                               strerror(errno));
        free(tmp);
        return st;
    }
    /* mkstemp makes the file 0600; a data file is 0644 like any other. */
    int bad = fchmod(fd, 0644);
    for (int i = 0; i < nparts && !bad; i++) {
        const unsigned char *p = parts[i];
        size_t left = sizes[i];
        while (left && !bad) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                bad = 1;
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (!bad) bad = fsync(fd);
    int saved = errno;
    if (close(fd) && !bad) {
        bad = 1;
        saved = errno;
    }
    if (!bad && rename(tmp, path)) {
        bad = 1;
        saved = errno;
    }
    qv_status st = QV_OK;
    if (bad) {
        unlink(tmp);
        st = qv_fail(QV_ERR_IO, "cannot write %s: %s", path, strerror(saved));
    }
    free(tmp);
    return st;
}
