/* t_tokenizer.c: the byte-level BPE tokenizer (eval.h) on a small vocabulary
 * trained by Hugging Face tokenizers (tests/data/tok_tiny.txt, written by
 * eval/gen_tok_fixture.py, which also recorded the ids that library gives for
 * each test string). The vocabulary travels through the GGUF writer and reader
 * as tokenizer.ggml.* metadata, as a model file carries it. Also: hand-derived
 * pre-token splits of the GPT-2 pattern, byte fallback (any byte string, invalid
 * UTF-8 included, encodes and decodes back to itself), and refusals. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"
#include "internal/gguf.h"

#include "support/suite.h"

typedef struct fixture {
    char **tokens;
    int n_tokens;
    char **merges;
    int n_merges;
    char **cases;       /* raw bytes */
    size_t *case_len;
    int32_t **ids;
    int *n_ids;
    int n_cases;
} fixture;

static char *unhex(const char *h, size_t *len)
{
    size_t n = strcmp(h, "-") ? strlen(h) / 2 : 0;
    char *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        b[i] = (char)v;
    }
    b[n] = '\0';
    *len = n;
    return b;
}

static fixture load_fixture(void)
{
    fixture fx;
    memset(&fx, 0, sizeof fx);
    FILE *f = fopen("tests/data/tok_tiny.txt", "r");
    ck_assert_msg(f != NULL, "tests/data/tok_tiny.txt is missing");
    static char line[1 << 16];
    fx.cases = calloc(64, sizeof(char *));
    fx.case_len = calloc(64, sizeof(size_t));
    fx.ids = calloc(64, sizeof(int32_t *));
    fx.n_ids = calloc(64, sizeof(int));
    while (fgets(line, sizeof line, f)) {
        char a[4096], b[4096];
        size_t l;
        int n;
        if (sscanf(line, "vocab %d", &n) == 1) fx.tokens = calloc((size_t)n, sizeof(char *));
        else if (sscanf(line, "merges %d", &n) == 1) fx.merges = calloc((size_t)n, sizeof(char *));
        else if (sscanf(line, "t %4095s", a) == 1) fx.tokens[fx.n_tokens++] = unhex(a, &l);
        else if (sscanf(line, "m %4095s %4095s", a, b) == 2) {
            size_t la, lb;
            char *x = unhex(a, &la), *y = unhex(b, &lb);
            char *m = malloc(la + lb + 2);
            sprintf(m, "%s %s", x, y);
            free(x);
            free(y);
            fx.merges[fx.n_merges++] = m;
        } else if (!strncmp(line, "case ", 5) && fx.n_cases < 64) {
            int off;
            ck_assert(sscanf(line + 5, "%4095s %d%n", a, &n, &off) == 2);
            int c = fx.n_cases++;
            fx.cases[c] = unhex(a, &fx.case_len[c]);
            fx.n_ids[c] = n;
            fx.ids[c] = malloc(sizeof(int32_t) * (size_t)(n + 1));
            char *p = line + 5 + off;
            for (int i = 0; i < n; i++) fx.ids[c][i] = (int32_t)strtol(p, &p, 10);
        }
    }
    fclose(f);
    ck_assert_int_ge(fx.n_tokens, 256);
    ck_assert_int_ge(fx.n_merges, 50);
    ck_assert_int_ge(fx.n_cases, 10);
    return fx;
}

static void fixture_free(fixture *fx)
{
    for (int i = 0; i < fx->n_tokens; i++) free(fx->tokens[i]);
    for (int i = 0; i < fx->n_merges; i++) free(fx->merges[i]);
    for (int i = 0; i < fx->n_cases; i++) { free(fx->cases[i]); free(fx->ids[i]); }
    free(fx->tokens); free(fx->merges); free(fx->cases); free(fx->case_len); free(fx->ids); free(fx->n_ids);
}

/* A GGUF image holding the fixture's vocabulary; pre names tokenizer.ggml.pre. */
static qv_gguf *vocab_gguf(const fixture *fx, const char *model, const char *pre, qv_gguf_writer **wout)
{
    qv_gguf_writer *w = qv_gguf_writer_create();
    qv_gguf_w_str(w, "tokenizer.ggml.model", model);
    if (pre) qv_gguf_w_str(w, "tokenizer.ggml.pre", pre);
    qv_gguf_w_str_array(w, "tokenizer.ggml.tokens", (const char *const *)fx->tokens, (uint64_t)fx->n_tokens);
    qv_gguf_w_str_array(w, "tokenizer.ggml.merges", (const char *const *)fx->merges, (uint64_t)fx->n_merges);
    qv_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 0);
    qv_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    size_t len;
    const uint8_t *img = qv_gguf_writer_bytes(w, &len);
    qv_gguf *g;
    ck_assert_msg(qv_gguf_parse(img, len, 1, &g) == QV_OK, "%s", qv_errmsg());
    *wout = w;
    return g;
}

START_TEST(test_known_tokenizations)
{
    fixture fx = load_fixture();
    qv_gguf_writer *w;
    qv_gguf *g = vocab_gguf(&fx, "gpt2", "smollm", &w);
    qv_tokenizer *t;
    ck_assert_msg(qv_tokenizer_create(g, &t) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(qv_tokenizer_vocab(t), fx.n_tokens);
    ck_assert_int_eq(qv_tokenizer_bos(t), 0);
    ck_assert_int_eq(qv_tokenizer_add_bos(t), 1);
    for (int c = 0; c < fx.n_cases; c++) {
        int32_t *ids;
        size_t n;
        ck_assert(qv_tokenizer_encode(t, fx.cases[c], fx.case_len[c], &ids, &n) == QV_OK);
        ck_assert_msg((int)n == fx.n_ids[c], "case %d '%s': %zu ids, reference %d", c, fx.cases[c], n, fx.n_ids[c]);
        for (int i = 0; i < fx.n_ids[c]; i++)
            ck_assert_msg(ids[i] == fx.ids[c][i], "case %d '%s' id %d: %d, reference %d", c, fx.cases[c], i, ids[i],
                          fx.ids[c][i]);
        char *back;
        size_t bl;
        ck_assert(qv_tokenizer_decode(t, ids, n, &back, &bl) == QV_OK);
        ck_assert(bl == fx.case_len[c] && !memcmp(back, fx.cases[c], bl));
        free(back);
        free(ids);
    }
    qv_tokenizer_destroy(t);
    qv_gguf_close(g);
    qv_gguf_writer_destroy(w);
    fixture_free(&fx);
}
END_TEST

typedef struct pieces {
    char buf[1024];
    size_t n;
} pieces;

static void collect(const char *p, size_t l, void *ctx)
{
    pieces *ps = ctx;
    memcpy(ps->buf + ps->n, p, l);
    ps->n += l;
    ps->buf[ps->n++] = '|';
    ps->buf[ps->n] = '\0';
}

/* Splits derived by hand from the pattern (file comment of eval/tokenizer.c). */
START_TEST(test_pretokenizer_splits)
{
    fixture fx = load_fixture();
    qv_gguf_writer *w;
    qv_gguf *g = vocab_gguf(&fx, "gpt2", "smollm", &w);
    qv_tokenizer *t;
    ck_assert(qv_tokenizer_create(g, &t) == QV_OK);
    static const char *const cases[][2] = {
        {"Hello world", "Hello| world|"},
        {"a  b", "a| | b|"},                     /* \s+(?!\S) leaves the last space to " b" */
        {"a\n\nb", "a|\n|\n|b|"},                 /* then a single \n before b is \s+ */
        {"end   ", "end|   |"},                  /* trailing run taken whole */
        {"I'll don't", "I|'ll| don|'t|"},
        {"x123y", "x|1|2|3|y|"},                 /* smollm isolates each digit */
        {" 42", " |4|2|"},
        {"hi!!! ok", "hi|!!!| ok|"},
        {"caf\xc3\xa9!", "caf\xc3\xa9|!|"},      /* U+00E9 is a letter */
        {"\xff\xfe" "ab", "\xff\xfe|ab|"},        /* invalid bytes are "other" characters */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pieces ps = {{0}, 0};
        qv_tokenizer_pretokenize(t, cases[i][0], strlen(cases[i][0]), collect, &ps);
        ck_assert_msg(!strcmp(ps.buf, cases[i][1]), "'%s' split as '%s', expected '%s'", cases[i][0], ps.buf,
                      cases[i][1]);
    }
    qv_tokenizer_destroy(t);
    qv_gguf_close(g);
    qv_gguf_writer_destroy(w);
    fixture_free(&fx);
}
END_TEST

/* splitmix64, the test's seeded generator */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

START_TEST(test_byte_round_trip)
{
    fixture fx = load_fixture();
    qv_gguf_writer *w;
    qv_gguf *g = vocab_gguf(&fx, "gpt2", "smollm", &w);
    qv_tokenizer *t;
    ck_assert(qv_tokenizer_create(g, &t) == QV_OK);
    uint64_t seed = 1129, s = seed;
    printf("byte round trip: seed %llu\n", (unsigned long long)seed);
    for (int r = 0; r < 200; r++) {
        char buf[300];
        size_t len = (size_t)(mix(&s) % sizeof buf);
        for (size_t i = 0; i < len; i++) {
            uint64_t x = mix(&s);
            /* half arbitrary bytes, half text-like bytes */
            buf[i] = x % 2 ? (char)((x >> 8) & 0xFF) : " aeiou\n'0123.,\xc3\xa9"[(x >> 8) % 17];
        }
        int32_t *ids;
        size_t n;
        ck_assert(qv_tokenizer_encode(t, buf, len, &ids, &n) == QV_OK);
        ck_assert(n <= len);
        char *back;
        size_t bl;
        ck_assert(qv_tokenizer_decode(t, ids, n, &back, &bl) == QV_OK);
        ck_assert_msg(bl == len && !memcmp(back, buf, len), "round %d: decode(encode(s)) != s", r);
        free(back);
        free(ids);
    }
    int32_t bad = fx.n_tokens;
    char *back;
    size_t bl;
    ck_assert(qv_tokenizer_decode(t, &bad, 1, &back, &bl) == QV_ERR_RANGE);
    qv_tokenizer_destroy(t);
    qv_gguf_close(g);
    qv_gguf_writer_destroy(w);
    fixture_free(&fx);
}
END_TEST

START_TEST(test_refusals)
{
    fixture fx = load_fixture();
    qv_gguf_writer *w;
    qv_tokenizer *t;
    qv_gguf *g = vocab_gguf(&fx, "llama", "smollm", &w);
    ck_assert(qv_tokenizer_create(g, &t) == QV_ERR_UNSUPPORTED);
    qv_gguf_close(g);
    qv_gguf_writer_destroy(w);
    g = vocab_gguf(&fx, "gpt2", "qwen2", &w);
    ck_assert(qv_tokenizer_create(g, &t) == QV_ERR_UNSUPPORTED);
    qv_gguf_close(g);
    qv_gguf_writer_destroy(w);
    /* a merge naming a token absent from the vocabulary */
    char *saved = fx.merges[0];
    fx.merges[0] = "zzq qzz";
    g = vocab_gguf(&fx, "gpt2", "smollm", &w);
    ck_assert(qv_tokenizer_create(g, &t) == QV_ERR_FORMAT);
    ck_assert(strstr(qv_errmsg(), "merge") != NULL);
    fx.merges[0] = saved;
    qv_gguf_close(g);
    qv_gguf_writer_destroy(w);
    /* no tokens at all */
    w = qv_gguf_writer_create();
    qv_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    size_t len;
    const uint8_t *img = qv_gguf_writer_bytes(w, &len);
    ck_assert(qv_gguf_parse(img, len, 1, &g) == QV_OK);
    ck_assert(qv_tokenizer_create(g, &t) == QV_ERR_FORMAT);
    qv_gguf_close(g);
    qv_gguf_writer_destroy(w);
    fixture_free(&fx);
}
END_TEST

START_TEST(test_sha256_vectors)
{
    /* FIPS 180-4 examples (NIST CSRC "SHA256.pdf") */
    char hex[65];
    qv_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    qv_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    qv_sha256_hex(two, strlen(two), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("bpe");
    tcase_add_test(tc, test_known_tokenizations);
    tcase_add_test(tc, test_pretokenizer_splits);
    tcase_add_test(tc, test_byte_round_trip);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_sha256_vectors);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
