/* lf_json.c: libFuzzer target for the strict JSON reader (qv_json_parse),
 * which reads .safetensors headers and every JSONL results file. Built by
 * `make fuzz-parsers` with ASan and UBSan; run by tools/fuzz-parsers.sh with
 * the seeds in fuzz/corpus/lf_json/. An accepted text is walked whole, and
 * every string it holds is written back and must parse to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const qv_json *j)
{
    if (j->type == QV_JSON_STRING) {
        QV_ASSERT(strlen(j->text) == j->text_len, "decoded strings hold no NUL");
        size_t need = qv_json_sput_str(NULL, 0, j->text);
        char *buf = malloc(need + 1);
        QV_ASSERT(buf != NULL, "out of memory");
        qv_json_sput_str(buf, need + 1, j->text);
        qv_json *back;
        QV_ASSERT(qv_json_parse(buf, need, &back) == QV_OK, "a written string reads back");
        QV_ASSERT(!strcmp(back->text, j->text), "a written string reads back unchanged");
        qv_json_free(back);
        free(buf);
    }
    for (int i = 0; i < qv_json_len(j); i++) {
        if (j->type == QV_JSON_OBJECT) {
            const char *k = qv_json_key(j, i);
            QV_ASSERT(qv_json_get(j, k) == qv_json_at(j, i), "keys are unique, so lookup finds item i");
        }
        walk(qv_json_at(j, i));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qv_json *j;
    if (qv_json_parse((const char *)data, size, &j) != QV_OK) {
        QV_ASSERT(qv_errmsg()[0] != '\0', "every refusal carries a message");
        QV_ASSERT(j == NULL, "a refused parse leaves no tree");
        return 0;
    }
    walk(j);
    qv_json_free(j);
    return 0;
}
