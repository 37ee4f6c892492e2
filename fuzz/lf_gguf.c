/* lf_gguf.c: libFuzzer target for the GGUF reader (qv_gguf_parse), and for the
 * tokenizer and llama loader that read its metadata. Built by `make
 * fuzz-parsers` with ASan and UBSan; run by tools/fuzz-parsers.sh with the
 * seeds in fuzz/corpus/lf_gguf/ (eval/gen_gguf_seeds.py writes them). An
 * accepted file must give tensors whose every byte lies inside the input and
 * decodes; a refused one must leave a message and no object. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "internal/eval.h"
#include "internal/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decoding larger tensors would only slow the fuzzer down: 2^20 values. */
#define MAX_DECODE ((int64_t)1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qv_gguf *g = NULL;
    if (qv_gguf_parse(data, size, 0, &g) != QV_OK) {
        QV_ASSERT(qv_errmsg()[0] != '\0', "every refusal carries a message");
        QV_ASSERT(g == NULL, "a refused parse leaves no object");
        return 0;
    }
    volatile uint64_t sink = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const qv_gguf_kv *kv = &g->kv[i];
        for (uint64_t b = 0; b < kv->key.len; b++) sink += (uint8_t)kv->key.p[b];
        if (kv->type == QV_GGUF_STRING)
            for (uint64_t b = 0; b < kv->v.s.len; b++) sink += (uint8_t)kv->v.s.p[b];
        if (kv->type == QV_GGUF_ARRAY && kv->arr_str)
            for (uint64_t j = 0; j < kv->arr_count; j++)
                for (uint64_t b = 0; b < kv->arr_str[j].len; b++) sink += (uint8_t)kv->arr_str[j].p[b];
        if (kv->type == QV_GGUF_ARRAY && kv->arr_data)
            for (uint64_t j = 0; j < kv->arr_count; j++) sink += qv_gguf_arr_num(kv, j) > 0;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qv_gguf_tensor *t = &g->tensors[i];
        QV_ASSERT(t->data >= data && t->nbytes <= size && t->data + t->nbytes <= data + size,
                  "tensor data lies inside the input");
        if (t->nelem > MAX_DECODE) continue;
        float *x = malloc(sizeof(float) * (size_t)t->nelem);
        QV_ASSERT(x != NULL, "out of memory");
        QV_ASSERT(qv_gguf_tensor_f32(t, x) == QV_OK, "an accepted tensor decodes");
        free(x);
    }
    qv_tokenizer *tok = NULL;
    if (qv_tokenizer_create(g, &tok) == QV_OK) {
        static const char text[] = "It is a truth universally acknowledged, 1811 \xff\xc3\xa9!";
        int32_t *ids;
        size_t n;
        if (qv_tokenizer_encode(tok, text, sizeof text - 1, &ids, &n) == QV_OK) {
            char *back;
            size_t bl;
            if (qv_tokenizer_decode(tok, ids, n, &back, &bl) == QV_OK) free(back);
            free(ids);
        }
        qv_tokenizer_destroy(tok);
    }
    if (size < ((size_t)1 << 20)) { /* the loader allocates f32 copies of every tensor */
        qv_llama m;
        if (qv_llama_load(g, &m) == QV_OK) qv_llama_free(&m);
    }
    qv_gguf_close(g);
    (void)sink;
    return 0;
}
