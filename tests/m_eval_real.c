/* m_eval_real.c: the fp32 forward pass and the tokenizer on the real model
 * (SmolLM2-135M-Instruct, fetched by `make ppl`), against fixtures produced by
 * independent implementations:
 *   tests/data/smollm2_logits_ref.txt  tools/ppl_ref.py (gguf package +
 *                                      float64 NumPy forward pass)
 *   tests/data/tok_smollm2.txt         Hugging Face tokenizers (eval/gen_tok_fixture.py)
 * The model is never required by `make check`, so this suite is not one of
 * its t_* suites: `make ppl` builds it and tools/run-ppl.sh runs it right after
 * fetching the model, and a missing model is a failure here. The same forward
 * pass is checked without the model in t_llama.c (tiny random model against a
 * naive double-precision implementation), which `make check` runs. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"

#include "support/suite.h"

static const char *model_path(void)
{
    const char *p = getenv("QV_EVAL_MODEL");
    return p ? p : "eval/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static int model_present(void)
{
    FILE *f = fopen(model_path(), "rb");
    ck_assert_msg(f != NULL, "%s is missing: run make ppl (tools/fetch-model.sh) first", model_path());
    fclose(f);
    return 1;
}

static unsigned char *hex_bytes(const char *hex, size_t *len)
{
    size_t n = strcmp(hex, "-") ? strlen(hex) / 2 : 0;
    unsigned char *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        b[i] = (unsigned char)v;
    }
    *len = n;
    return b;
}

/* The fixture's reference ids and expected logits, compared with our fp32 path.
 * Tolerance: our path keeps activations in f32 and sums dot products of length
 * K <= 1536 in f32 (OpenBLAS), through 30 blocks; the reference works in
 * float64 on the same dequantized weights. Measured max |difference| of logits
 * is printed; 2e-3 absolute on logits of magnitude ~20 is ~1e-4 relative, about
 * K * 2^-24 ~ 1e-4 per layer with cancellation across layers. A wrong RoPE
 * pairing, head grouping, norm or tie shifts logits by O(1). */
START_TEST(test_logits_vs_reference)
{
    if (!model_present()) return;
    qv_gguf *g;
    ck_assert_msg(qv_gguf_open(model_path(), &g) == QV_OK, "%s", qv_errmsg());
    qv_llama m;
    ck_assert_msg(qv_llama_load(g, &m) == QV_OK, "%s", qv_errmsg());
    FILE *f = fopen("tests/data/smollm2_logits_ref.txt", "r");
    ck_assert_msg(f != NULL, "fixture tests/data/smollm2_logits_ref.txt missing");
    char line[65536];
    int32_t *ids = NULL;
    int n = 0;
    float *logits = NULL;
    double max_diff = 0, max_lse_diff = 0;
    int checked = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "tokens ", 7)) {
            char *p = line + 7, *e;
            n = (int)strtol(p, &e, 10);
            ids = malloc(sizeof(int32_t) * (size_t)n);
            for (int i = 0; i < n; i++) { p = e; ids[i] = (int32_t)strtol(p, &e, 10); }
            logits = malloc(sizeof(float) * (size_t)n * (size_t)m.c.vocab);
            qv_linear_backend lb = qv_linear_fp32();
            ck_assert_msg(qv_llama_forward(&m, &lb, ids, n, logits, NULL) == QV_OK, "%s", qv_errmsg());
        } else if (!strncmp(line, "logit ", 6)) {
            int pos, tok;
            double want;
            ck_assert(sscanf(line + 6, "%d %d %lf", &pos, &tok, &want) == 3);
            ck_assert(logits && pos < n && tok < m.c.vocab);
            double d = fabs(logits[(size_t)pos * m.c.vocab + tok] - want);
            if (d > max_diff) max_diff = d;
            checked++;
        } else if (!strncmp(line, "lse ", 4)) {
            int pos;
            double want;
            ck_assert(sscanf(line + 4, "%d %lf", &pos, &want) == 2);
            ck_assert(logits && pos < n);
            const float *z = logits + (size_t)pos * m.c.vocab;
            double mx = z[0], s = 0;
            for (int i = 1; i < m.c.vocab; i++) mx = fmax(mx, z[i]);
            for (int i = 0; i < m.c.vocab; i++) s += exp(z[i] - mx);
            double d = fabs(mx + log(s) - want);
            if (d > max_lse_diff) max_lse_diff = d;
        }
    }
    fclose(f);
    printf("real model: %d logits checked, max |diff| %.3g, max |logsumexp diff| %.3g\n", checked, max_diff,
           max_lse_diff);
    ck_assert_int_ge(checked, 100);
    ck_assert_msg(max_diff < 2e-3, "max logit difference %g", max_diff);
    ck_assert_msg(max_lse_diff < 2e-3, "max logsumexp difference %g", max_lse_diff);
    free(ids);
    free(logits);
    qv_llama_free(&m);
    qv_gguf_close(g);
}
END_TEST

START_TEST(test_tokenizer_vs_reference)
{
    if (!model_present()) return;
    qv_gguf *g;
    ck_assert_msg(qv_gguf_open(model_path(), &g) == QV_OK, "%s", qv_errmsg());
    qv_tokenizer *t;
    ck_assert_msg(qv_tokenizer_create(g, &t) == QV_OK, "%s", qv_errmsg());
    FILE *f = fopen("tests/data/tok_smollm2.txt", "r");
    ck_assert_msg(f != NULL, "fixture tests/data/tok_smollm2.txt missing");
    char line[65536];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "case ", 5)) continue;
        char hex[32768];
        int nexp, off;
        ck_assert(sscanf(line + 5, "%32767s %d%n", hex, &nexp, &off) == 2);
        size_t len;
        unsigned char *text = hex_bytes(hex, &len);
        int32_t *ids;
        size_t n;
        ck_assert(qv_tokenizer_encode(t, (const char *)text, len, &ids, &n) == QV_OK);
        ck_assert_msg((int)n == nexp, "case %d: %zu ids, reference %d", cases, n, nexp);
        char *p = line + 5 + off;
        for (int i = 0; i < nexp; i++) {
            char *e;
            long want = strtol(p, &e, 10);
            p = e;
            ck_assert_msg(ids[i] == want, "case %d id %d: %d, reference %ld", cases, i, ids[i], want);
        }
        free(ids);
        free(text);
        cases++;
    }
    fclose(f);
    ck_assert_int_ge(cases, 10);
    qv_tokenizer_destroy(t);
    qv_gguf_close(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("eval_real");
    TCase *tc = tcase_create("smollm2");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_logits_vs_reference);
    tcase_add_test(tc, test_tokenizer_vs_reference);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
