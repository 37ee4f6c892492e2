/* lf_safetensors.c: libFuzzer target for the .safetensors reader
 * (qv_st_parse). Built by `make fuzz-parsers` with ASan and UBSan; run by
 * tools/fuzz-parsers.sh with the seeds in fuzz/corpus/lf_safetensors/. Every
 * tensor of an accepted file is fetched and every element read; a refused
 * input must leave a message. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "qvet/array.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qv_st_file *f;
    if (qv_st_parse(data, size, &f) != QV_OK) {
        QV_ASSERT(qv_errmsg()[0] != '\0', "every refusal carries a message");
        QV_ASSERT(f == NULL, "a refused parse leaves no file");
        return 0;
    }
    size_t total = 0;
    volatile uint64_t sink = 0;
    for (int i = 0; i < qv_st_count(f); i++) {
        const char *name = qv_st_name(f, i);
        QV_ASSERT(name != NULL, "every tensor has a name");
        qv_array v;
        QV_ASSERT(qv_st_get(f, name, &v) == QV_OK, "a listed tensor can be fetched");
        QV_ASSERT(v.nbytes == (size_t)v.count * qv_dtype_size(v.dtype), "nbytes is count x element size");
        size_t es = qv_dtype_size(v.dtype);
        QV_ASSERT((uintptr_t)v.data % es == 0, "views are aligned to their element size");
        for (int64_t e = 0; e < v.count; e++) {
            const unsigned char *p = (const unsigned char *)v.data + (size_t)e * es;
            for (size_t b = 0; b < es; b++) sink += p[b];
        }
        total += v.nbytes;
    }
    (void)sink;
    QV_ASSERT(total <= size, "tensors never overlap, so their bytes fit the input");
    qv_st_close(f);
    return 0;
}
