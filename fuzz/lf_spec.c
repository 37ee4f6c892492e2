/* lf_spec.c: libFuzzer target for the spec grammar (spec.h): arbitrary bytes,
 * NUL-terminated, go to qv_spec_parse. Built by `make fuzz-parsers` with ASan
 * and UBSan; run by tools/fuzz-parsers.sh with the seeds in
 * fuzz/corpus/lf_spec/. A refusal must carry a message; an accepted spec's
 * canonical form (qv_spec_format) must be its name and parse back to the same
 * interned variant. Interned variants live for the process (spec.h), so they
 * are reachable, never leaked. Text with a route= key also goes to
 * qv_moe_spec_parse (moe.h): a refusal with a message, or a canonical form
 * that parses back to itself. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/moe.h"
#include "qvet/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    QV_ASSERT(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0'; /* bytes after an embedded NUL are simply not part of the spec */
    const qv_variant *v;
    qv_status st = qv_spec_parse(text, &v);
    if (st != QV_OK) {
        QV_ASSERT(qv_errmsg()[0] != '\0', "every refusal carries a message");
        QV_ASSERT(v == NULL, "a refused spec gives no variant");
    } else {
        char canon[QV_SPEC_MAX];
        int len = qv_spec_format(v, canon, sizeof canon);
        QV_ASSERT(len > 0 && (size_t)len == strlen(canon), "an accepted spec has a canonical form");
        QV_ASSERT(!strcmp(canon, v->name), "a parsed spec is named by its canonical form");
        const qv_variant *again;
        QV_ASSERT(qv_spec_parse(canon, &again) == QV_OK, "the canonical form parses");
        QV_ASSERT(again == v, "the canonical form is the same interned variant");
        QV_ASSERT(v->layout == QV_LAYOUT_LOGICAL && v->n_tile == 1 && v->k_tile == 1, "a spec is logical");
        (void)qv_spec_segment(v);
        /* A row name resolves to the row, a spec to the same variant. */
        QV_ASSERT(qv_variant_resolve(canon, &again) == QV_OK && again == v, "resolve agrees with parse");
    }
    if (qv_moe_is_spec(text)) {
        qv_moe_spec ms, again;
        if (qv_moe_spec_parse(text, &ms) != QV_OK) {
            QV_ASSERT(qv_errmsg()[0] != '\0', "every routed refusal carries a message");
        } else {
            QV_ASSERT(qv_moe_is_spec(ms.text), "a routed canonical form keeps its route=");
            QV_ASSERT(qv_moe_spec_parse(ms.text, &again) == QV_OK, "the routed canonical form parses");
            /* (a row's name as the expert becomes the row's spec: the same text, another variant) */
            QV_ASSERT(!strcmp(again.text, ms.text), "and gives itself back");
        }
    }
    /* The same bytes taken as a row name or a spec: a variant or a message. */
    if (qv_variant_resolve(text, &v) != QV_OK) QV_ASSERT(qv_errmsg()[0] != '\0', "resolve refusals carry a message");
    free(text);
    return 0;
}
