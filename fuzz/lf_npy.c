/* lf_npy.c: libFuzzer target for the .npy reader (qv_npy_parse).
 * Built by `make fuzz-parsers` with ASan and UBSan; run by
 * tools/fuzz-parsers.sh with the seeds in fuzz/corpus/lf_npy/. An accepted
 * input must give a consistent array whose every byte is readable; a refused
 * one must leave a message. */
#include <stddef.h>
#include <stdint.h>

#include "qvet/array.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qv_array a;
    if (qv_npy_parse(data, size, &a) != QV_OK) {
        QV_ASSERT(qv_errmsg()[0] != '\0', "every refusal carries a message");
        QV_ASSERT(a.data == NULL, "a refused parse leaves no array");
        return 0;
    }
    int64_t count = 1;
    for (int d = 0; d < a.ndim; d++) count *= a.shape[d];
    QV_ASSERT(a.ndim >= 0 && a.ndim <= QV_MAX_DIMS, "ndim within bounds");
    QV_ASSERT(count == a.count, "count is the product of the shape");
    QV_ASSERT(a.nbytes == (size_t)a.count * qv_dtype_size(a.dtype), "nbytes is count x element size");
    QV_ASSERT(a.nbytes <= size, "the data came from the input");
    /* Touch every element through its own type width, so ASan sees any
     * buffer that is shorter than nbytes. */
    size_t es = qv_dtype_size(a.dtype);
    volatile uint64_t sink = 0;
    for (int64_t i = 0; i < a.count; i++) {
        const unsigned char *p = (const unsigned char *)a.data + (size_t)i * es;
        for (size_t b = 0; b < es; b++) sink += p[b];
    }
    (void)sink;
    qv_array_destroy(&a);
    return 0;
}
