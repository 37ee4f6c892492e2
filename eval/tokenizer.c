/* tokenizer.c: GPT-2 style byte-level BPE from GGUF metadata (eval.h).
 *
 * Encoding has three steps:
 *   1. pre-tokenization: "smollm" first isolates every \p{N} character (the
 *      Digits(individual) pre-tokenizer), then each remaining run is split by
 *      the GPT-2 pattern
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      implemented here as a hand-written scanner over code points;
 *   2. each piece's bytes are mapped to the byte-level alphabet (printable bytes
 *      stand for themselves, the others to U+0100 + their rank);
 *   3. BPE: repeatedly merge the adjacent pair with the lowest merge rank
 *      (leftmost on ties) until no pair has a rank.
 * Invalid UTF-8 bytes are single "other" characters, so any byte string
 * round-trips through encode and decode when the vocabulary holds all 256
 * byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"

typedef struct str_slot {
    uint32_t off, len;   /* into the string pool */
    int32_t id;          /* -1: empty slot */
} str_slot;

typedef struct pair_slot {
    uint64_t key;        /* left << 32 | right; UINT64_MAX: empty */
    int32_t rank, merged;
} pair_slot;

struct qv_tokenizer {
    int vocab;
    char *pool;                  /* all token strings, concatenated */
    uint32_t *tok_off, *tok_len; /* (vocab) */
    str_slot *smap;              /* string -> id, open addressing */
    size_t smap_cap;
    pair_slot *pmap;             /* (left, right) -> rank, merged id */
    size_t pmap_cap;
    int32_t byte_tok[256];       /* token of each single byte, -1 if none */
    int16_t cp_byte[512];        /* byte-level code point -> byte, -1 if none */
    int split_digits;            /* pre-tokenizer "smollm" */
    int bos, add_bos;
};

/* FNV-1a: a simple, well-distributed hash for short strings. */
static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)s[i]; h *= 1099511628211ull; }
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}

static int32_t smap_get(const qv_tokenizer *t, const char *s, size_t n)
{
    size_t mask = t->smap_cap - 1;
    for (size_t i = hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        const str_slot *sl = &t->smap[i];
        if (sl->id < 0) return -1;
        if (sl->len == n && memcmp(t->pool + sl->off, s, n) == 0) return sl->id;
    }
}

static const pair_slot *pmap_get(const qv_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = t->pmap_cap - 1;
    for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask) {
        const pair_slot *ps = &t->pmap[i];
        if (ps->key == UINT64_MAX) return NULL;
        if (ps->key == key) return ps;
    }
}

/* GPT-2's byte-level alphabet: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to
 * the same code point; the other 68 bytes map to U+0100 onwards in byte order. */
static void byte_alphabet(uint32_t cp_of[256])
{
    int next = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp_of[b] = keep ? (uint32_t)b : 0x100u + (uint32_t)next++;
    }
}

static int utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* Decodes one UTF-8 character at s[0..n); returns its length (>= 1) and the
 * code point, or UINT32_MAX for an invalid byte (length 1). */
static int utf8_get(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) { *cp = c; return 1; }
    if ((c & 0xE0) == 0xC0) { len = 2; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; v = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; v = c & 0x07; min = 0x10000; }
    else { *cp = UINT32_MAX; return 1; }
    if ((size_t)len > n) { *cp = UINT32_MAX; return 1; }
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = UINT32_MAX; return 1; }
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = UINT32_MAX; return 1; }
    *cp = v;
    return len;
}

void qv_tokenizer_destroy(qv_tokenizer *t)
{
    if (!t) return;
    free(t->pool);
    free(t->tok_off);
    free(t->tok_len);
    free(t->smap);
    free(t->pmap);
    free(t);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

static qv_status build(const qv_gguf *g, qv_tokenizer *t)
{
    qv_gguf_str model, pre = {"default", 7};
    QV_TRY(qv_gguf_get_str(g, "tokenizer.ggml.model", &model));
    if (model.len != 4 || memcmp(model.p, "gpt2", 4) != 0)
        return qv_fail(QV_ERR_UNSUPPORTED, "tokenizer.ggml.model '%.*s' is not supported (only gpt2 BPE)",
                       (int)(model.len > 64 ? 64 : model.len), model.p);
    if (qv_gguf_find(g, "tokenizer.ggml.pre")) QV_TRY(qv_gguf_get_str(g, "tokenizer.ggml.pre", &pre));
    if (pre.len == 6 && memcmp(pre.p, "smollm", 6) == 0) t->split_digits = 1;
    else if (!((pre.len == 7 && memcmp(pre.p, "default", 7) == 0) || (pre.len == 4 && memcmp(pre.p, "gpt2", 4) == 0)))
        return qv_fail(QV_ERR_UNSUPPORTED, "tokenizer.ggml.pre '%.*s' is not supported (smollm, gpt2, default)",
                       (int)(pre.len > 64 ? 64 : pre.len), pre.p);
    const qv_gguf_kv *tk = qv_gguf_find(g, "tokenizer.ggml.tokens");
    const qv_gguf_kv *mg = qv_gguf_find(g, "tokenizer.ggml.merges");
    if (!tk || tk->type != QV_GGUF_ARRAY || tk->arr_type != QV_GGUF_STRING)
        return qv_fail(QV_ERR_FORMAT, "tokenizer.ggml.tokens is missing or not a string array");
    if (!mg || mg->type != QV_GGUF_ARRAY || mg->arr_type != QV_GGUF_STRING)
        return qv_fail(QV_ERR_FORMAT, "tokenizer.ggml.merges is missing or not a string array");
    /* 2^24 tokens: far above any real vocabulary, and ids fit the int32 tables. */
    if (tk->arr_count == 0 || tk->arr_count > (1u << 24))
        return qv_fail(QV_ERR_FORMAT, "tokenizer: %llu tokens is not a plausible vocabulary",
                       (unsigned long long)tk->arr_count);
    t->vocab = (int)tk->arr_count;
    size_t pool_len = 0;
    for (int i = 0; i < t->vocab; i++) {
        if (tk->arr_str[i].len > 4096) /* 4096: no real token is that long */
            return qv_fail(QV_ERR_FORMAT, "tokenizer: token %d is %llu bytes long", i,
                           (unsigned long long)tk->arr_str[i].len);
        pool_len += tk->arr_str[i].len;
    }
    t->pool = malloc(pool_len + 1);
    t->tok_off = malloc(sizeof(uint32_t) * (size_t)t->vocab);
    t->tok_len = malloc(sizeof(uint32_t) * (size_t)t->vocab);
    t->smap_cap = pow2_at_least(2 * (size_t)t->vocab);
    t->smap = malloc(sizeof(str_slot) * t->smap_cap);
    t->pmap_cap = pow2_at_least(2 * (size_t)mg->arr_count + 1);
    t->pmap = malloc(sizeof(pair_slot) * t->pmap_cap);
    if (!t->pool || !t->tok_off || !t->tok_len || !t->smap || !t->pmap)
        return qv_fail(QV_ERR_NOMEM, "tokenizer: no memory");
    for (size_t i = 0; i < t->smap_cap; i++) t->smap[i].id = -1;
    for (size_t i = 0; i < t->pmap_cap; i++) t->pmap[i].key = UINT64_MAX;
    size_t off = 0;
    for (int i = 0; i < t->vocab; i++) {
        const qv_gguf_str *s = &tk->arr_str[i];
        memcpy(t->pool + off, s->p, s->len);
        t->tok_off[i] = (uint32_t)off;
        t->tok_len[i] = (uint32_t)s->len;
        if (smap_get(t, s->p, s->len) < 0) { /* the first of duplicate strings wins */
            size_t mask = t->smap_cap - 1, j = hash_bytes(s->p, s->len) & mask;
            while (t->smap[j].id >= 0) j = (j + 1) & mask;
            t->smap[j] = (str_slot){(uint32_t)off, (uint32_t)s->len, i};
        }
        off += s->len;
    }
    for (uint64_t r = 0; r < mg->arr_count; r++) {
        const qv_gguf_str *s = &mg->arr_str[r];
        const char *sp = s->len ? memchr(s->p + 1, ' ', s->len - 1) : NULL;
        if (!sp) return qv_fail(QV_ERR_FORMAT, "tokenizer: merge %llu has no separating space", (unsigned long long)r);
        size_t la = (size_t)(sp - s->p), lb = s->len - la - 1;
        int32_t a = smap_get(t, s->p, la), b = smap_get(t, sp + 1, lb);
        char buf[8194];
        if (la + lb > sizeof buf) return qv_fail(QV_ERR_FORMAT, "tokenizer: merge %llu is too long", (unsigned long long)r);
        memcpy(buf, s->p, la);
        memcpy(buf + la, sp + 1, lb);
        int32_t ab = smap_get(t, buf, la + lb);
        if (a < 0 || b < 0 || ab < 0)
            return qv_fail(QV_ERR_FORMAT, "tokenizer: merge %llu '%.*s' names a token not in the vocabulary",
                           (unsigned long long)r, (int)(s->len > 64 ? 64 : s->len), s->p);
        if (pmap_get(t, a, b)) continue; /* a repeated merge keeps its first rank */
        uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
        size_t mask = t->pmap_cap - 1, j = hash_u64(key) & mask;
        while (t->pmap[j].key != UINT64_MAX) j = (j + 1) & mask;
        t->pmap[j] = (pair_slot){key, (int32_t)r, ab};
    }
    uint32_t cp_of[256];
    byte_alphabet(cp_of);
    for (int i = 0; i < 512; i++) t->cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        char u[4];
        int n = utf8_put(cp_of[b], u);
        t->cp_byte[cp_of[b]] = (int16_t)b;
        t->byte_tok[b] = smap_get(t, u, (size_t)n); /* -1 when the vocabulary lacks the byte */
    }
    t->bos = -1;
    uint64_t bos;
    if (qv_gguf_find(g, "tokenizer.ggml.bos_token_id")) {
        QV_TRY(qv_gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &bos));
        if (bos >= (uint64_t)t->vocab) return qv_fail(QV_ERR_FORMAT, "tokenizer: bos_token_id %llu out of range", (unsigned long long)bos);
        t->bos = (int)bos;
    }
    const qv_gguf_kv *ab = qv_gguf_find(g, "tokenizer.ggml.add_bos_token");
    t->add_bos = ab && ab->type == QV_GGUF_BOOL ? (int)ab->v.u : 0;
    return QV_OK;
}

qv_status qv_tokenizer_create(const qv_gguf *g, qv_tokenizer **out)
{
    *out = NULL;
    qv_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return qv_fail(QV_ERR_NOMEM, "tokenizer: no memory");
    qv_status st = build(g, t);
    if (st != QV_OK) { qv_tokenizer_destroy(t); return st; }
    *out = t;
    return QV_OK;
}

int qv_tokenizer_vocab(const qv_tokenizer *t) { return t->vocab; }
int qv_tokenizer_bos(const qv_tokenizer *t) { return t->bos; }
int qv_tokenizer_add_bos(const qv_tokenizer *t) { return t->add_bos && t->bos >= 0; }

/* --- Pre-tokenization ------------------------------------------------------- */

/* A decoded character: code point (UINT32_MAX for an invalid byte) and its
 * byte offset in the text. */
typedef struct uch {
    uint32_t cp;
    size_t off;
} uch;

enum { C_SPACE, C_LETTER, C_NUMBER, C_OTHER };

static int cls(uint32_t cp)
{
    if (cp == UINT32_MAX) return C_OTHER;
    if (qv_uni_is_space(cp)) return C_SPACE;
    if (qv_uni_is_letter(cp)) return C_LETTER;
    if (qv_uni_is_number(cp)) return C_NUMBER;
    return C_OTHER;
}

typedef void (*piece_cb)(const char *piece, size_t piece_len, void *ctx);

/* Splits characters c[s..e) by the GPT-2 pattern (see the file comment). */
static void split_gpt2(const char *text, const uch *c, size_t s, size_t e, piece_cb cb, void *ctx)
{
    size_t i = s;
    while (i < e) {
        size_t j = i;
        int k0 = cls(c[i].cp);
        int k1 = i + 1 < e ? cls(c[i + 1].cp) : -1;
        uint32_t n1 = i + 1 < e ? c[i + 1].cp : 0;
        if (c[i].cp == '\'' && i + 1 < e &&
            (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd')) {
            j = i + 2;
        } else if (c[i].cp == '\'' && i + 2 < e &&
                   ((n1 == 'r' && c[i + 2].cp == 'e') || (n1 == 'v' && c[i + 2].cp == 'e') ||
                    (n1 == 'l' && c[i + 2].cp == 'l'))) {
            j = i + 3;
        } else if (k0 == C_LETTER || (c[i].cp == ' ' && k1 == C_LETTER)) {
            j = k0 == C_LETTER ? i : i + 1;
            while (j < e && cls(c[j].cp) == C_LETTER) j++;
        } else if (k0 == C_NUMBER || (c[i].cp == ' ' && k1 == C_NUMBER)) {
            j = k0 == C_NUMBER ? i : i + 1;
            while (j < e && cls(c[j].cp) == C_NUMBER) j++;
        } else if (k0 == C_OTHER || (c[i].cp == ' ' && k1 == C_OTHER)) {
            j = k0 == C_OTHER ? i : i + 1;
            while (j < e && cls(c[j].cp) == C_OTHER) j++;
        } else {
            /* Whitespace: \s+(?!\S) takes the run but leaves its last character
             * when a non-space follows; a single space before a non-space is
             * taken by the final \s+. */
            size_t r = i;
            while (r < e && cls(c[r].cp) == C_SPACE) r++;
            if (r == e || r - i == 1) j = r;
            else j = r - 1;
        }
        /* c[] ends with a sentinel whose offset is the text length */
        cb(text + c[i].off, c[j].off - c[i].off, ctx);
        i = j;
    }
}

/* Decodes text into characters (n_chars returned); the caller frees. */
static uch *decode_chars(const char *text, size_t len, size_t *n_chars)
{
    uch *c = malloc(sizeof(uch) * (len + 1));
    QV_ASSERT(c != NULL, "out of memory in the tokenizer");
    size_t n = 0;
    for (size_t p = 0; p < len;) {
        uint32_t cp;
        int l = utf8_get((const unsigned char *)text + p, len - p, &cp);
        c[n].cp = cp;
        c[n].off = p;
        n++;
        p += (size_t)l;
    }
    c[n].cp = 0;
    c[n].off = len; /* sentinel: the end offset */
    *n_chars = n;
    return c;
}

static void pretokenize(const qv_tokenizer *t, const char *text, size_t len, piece_cb cb, void *ctx)
{
    size_t n;
    uch *c = decode_chars(text, len, &n);
    size_t s = 0;
    for (size_t i = 0; i <= n; i++) {
        int isnum = i < n && t->split_digits && cls(c[i].cp) == C_NUMBER;
        if (i == n || isnum) {
            if (i > s) split_gpt2(text, c, s, i, cb, ctx);
            if (isnum) cb(text + c[i].off, c[i + 1].off - c[i].off, ctx);
            s = i + 1;
        }
    }
    free(c);
}

void qv_tokenizer_pretokenize(const qv_tokenizer *t, const char *text, size_t len,
                              void (*cb)(const char *piece, size_t piece_len, void *ctx), void *ctx)
{
    pretokenize(t, text, len, cb, ctx);
}

/* --- BPE ------------------------------------------------------------------ */

typedef struct enc_ctx {
    const qv_tokenizer *t;
    int32_t *ids;
    size_t n, cap;
    int32_t *sym;  /* scratch: symbols of the current piece */
    size_t sym_cap;
} enc_ctx;

static void push_id(enc_ctx *e, int32_t id)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 1024;
        e->ids = realloc(e->ids, sizeof(int32_t) * e->cap);
        QV_ASSERT(e->ids != NULL, "out of memory in the tokenizer");
    }
    e->ids[e->n++] = id;
}

static void bpe_piece(const char *piece, size_t len, void *vctx)
{
    enc_ctx *e = vctx;
    const qv_tokenizer *t = e->t;
    if (len > e->sym_cap) {
        e->sym_cap = len;
        e->sym = realloc(e->sym, sizeof(int32_t) * len);
        QV_ASSERT(e->sym != NULL, "out of memory in the tokenizer");
    }
    /* A byte without a token is dropped, as a BPE model without an unknown
     * token drops characters it cannot name (SmolLM2 lacks a few control bytes). */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (t->byte_tok[(uint8_t)piece[i]] >= 0) e->sym[n++] = t->byte_tok[(uint8_t)piece[i]];
    for (;;) {
        int32_t best_rank = INT32_MAX, best_id = -1;
        size_t best = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            const pair_slot *ps = pmap_get(t, e->sym[i], e->sym[i + 1]);
            if (ps && ps->rank < best_rank) { best_rank = ps->rank; best = i; best_id = ps->merged; }
        }
        if (best_id < 0) break;
        e->sym[best] = best_id;
        memmove(&e->sym[best + 1], &e->sym[best + 2], sizeof(int32_t) * (n - best - 2));
        n--;
    }
    for (size_t i = 0; i < n; i++) push_id(e, e->sym[i]);
}

qv_status qv_tokenizer_encode(const qv_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n)
{
    enc_ctx e = {t, NULL, 0, 0, NULL, 0};
    pretokenize(t, text, len, bpe_piece, &e);
    free(e.sym);
    *ids = e.ids ? e.ids : malloc(sizeof(int32_t));
    *n = e.n;
    return *ids ? QV_OK : qv_fail(QV_ERR_NOMEM, "tokenizer: no memory");
}

qv_status qv_tokenizer_decode(const qv_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len)
{
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab) return qv_fail(QV_ERR_RANGE, "token id %d out of range", ids[i]);
        cap += t->tok_len[ids[i]];
    }
    char *out = malloc(cap);
    if (!out) return qv_fail(QV_ERR_NOMEM, "tokenizer: no memory");
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *s = (const unsigned char *)t->pool + t->tok_off[ids[i]];
        size_t l = t->tok_len[ids[i]];
        for (size_t p = 0; p < l;) {
            uint32_t cp;
            int k = utf8_get(s + p, l - p, &cp);
            if (cp < 512 && t->cp_byte[cp] >= 0) out[o++] = (char)t->cp_byte[cp];
            else { memcpy(out + o, s + p, (size_t)k); o += (size_t)k; } /* special tokens: as written */
            p += (size_t)k;
        }
    }
    out[o] = '\0';
    *text = out;
    *len = o;
    return QV_OK;
}
