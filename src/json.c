/* json.c: the strict JSON reader and the writer helpers (json.h).
 * The parser is recursive descent over an explicit (text, len, pos) cursor:
 * every byte access goes through peek(), which answers -1 at the end, so no
 * input can make it read past len. */
#include "internal/json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const unsigned char *p; /* (len) bytes of JSON text */
    size_t len;
    size_t pos;
} cursor;

static int peek(const cursor *c) { return c->pos < c->len ? c->p[c->pos] : -1; }

static void skip_ws(cursor *c)
{
    for (;;) {
        int ch = peek(c);
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') return;
        c->pos++;
    }
}

/* Describes the byte at the cursor for messages: "'x'", "byte 0x01", "end of text". */
static const char *what_is_here(const cursor *c, char *buf, size_t cap)
{
    int ch = peek(c);
    if (ch < 0)
        snprintf(buf, cap, "end of text");
    else if (ch >= 0x20 && ch < 0x7f)
        snprintf(buf, cap, "'%c'", ch);
    else
        snprintf(buf, cap, "byte 0x%02x", ch);
    return buf;
}

static qv_status unexpected(const cursor *c, const char *expected)
{
    char here[32];
    return qv_fail(QV_ERR_FORMAT, "JSON: expected %s at byte %zu, found %s", expected, c->pos,
                   what_is_here(c, here, sizeof here));
}

/* A growable byte buffer for decoded strings. */
typedef struct sbuf {
    char *b;
    size_t n, cap;
} sbuf;

static qv_status sbuf_put(sbuf *s, const void *src, size_t n)
{
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 16; /* most keys and values are short */
        while (cap < s->n + n + 1) cap *= 2;
        char *b = realloc(s->b, cap);
        if (!b) return qv_fail(QV_ERR_NOMEM, "JSON: out of memory for a string of %zu bytes", s->n + n);
        s->b = b;
        s->cap = cap;
    }
    memcpy(s->b + s->n, src, n);
    s->n += n;
    s->b[s->n] = '\0';
    return QV_OK;
}

static size_t utf8_encode(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence starting at the cursor (lead byte >= 0x80),
 * or 0 if it is invalid: overlong forms, surrogates and code points past
 * U+10FFFF are invalid (RFC 3629). */
static size_t utf8_valid_len(const cursor *c)
{
    const unsigned char *p = c->p + c->pos;
    size_t avail = c->len - c->pos;
    unsigned char b0 = p[0];
    size_t n;
    uint32_t cp, min;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        n = 2; cp = b0 & 0x1F; min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3; cp = b0 & 0x0F; min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4; cp = b0 & 0x07; min = 0x10000;
    } else {
        return 0;
    }
    if (avail < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

static int hex4(const cursor *c, size_t at, uint32_t *out)
{
    if (at > c->len || c->len - at < 4) return -1;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int ch = c->p[at + i];
        int d = (ch >= '0' && ch <= '9')   ? ch - '0'
                : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
                : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10
                                           : -1;
        if (d < 0) return -1;
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* Parses a string at the cursor (which is on the opening quote) into a new
 * NUL-terminated buffer. */
static qv_status parse_string(cursor *c, char **out, size_t *out_len)
{
    size_t start = c->pos;
    sbuf s = {0};
    qv_status st = sbuf_put(&s, "", 0);
    if (st != QV_OK) return st;
    c->pos++; /* the opening quote */
    for (;;) {
        int ch = peek(c);
        if (ch < 0) {
            free(s.b);
            return qv_fail(QV_ERR_FORMAT, "JSON: unterminated string starting at byte %zu", start);
        }
        if (ch == '"') {
            c->pos++;
            break;
        }
        if (ch < 0x20) {
            free(s.b);
            return qv_fail(QV_ERR_FORMAT, "JSON: raw control character 0x%02x in a string at byte %zu",
                           ch, c->pos);
        }
        if (ch == '\\') {
            size_t esc_at = c->pos;
            c->pos++;
            int e = peek(c);
            const char *simple = NULL;
            switch (e) {
            case '"': simple = "\""; break;
            case '\\': simple = "\\"; break;
            case '/': simple = "/"; break;
            case 'b': simple = "\b"; break;
            case 'f': simple = "\f"; break;
            case 'n': simple = "\n"; break;
            case 'r': simple = "\r"; break;
            case 't': simple = "\t"; break;
            default: break;
            }
            if (simple) {
                c->pos++;
                st = sbuf_put(&s, simple, 1);
            } else if (e == 'u') {
                uint32_t cp;
                if (hex4(c, c->pos + 1, &cp)) {
                    free(s.b);
                    return qv_fail(QV_ERR_FORMAT, "JSON: bad \\u escape at byte %zu (needs 4 hex digits)",
                                   esc_at);
                }
                c->pos += 5;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    /* A high surrogate must be followed by "\u" and a low one. */
                    uint32_t lo;
                    if (c->len - c->pos < 6 || c->p[c->pos] != '\\' || c->p[c->pos + 1] != 'u' ||
                        hex4(c, c->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                        free(s.b);
                        return qv_fail(QV_ERR_FORMAT,
                                       "JSON: unpaired UTF-16 high surrogate \\u%04X at byte %zu", cp,
                                       esc_at);
                    }
                    c->pos += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    free(s.b);
                    return qv_fail(QV_ERR_FORMAT, "JSON: unpaired UTF-16 low surrogate \\u%04X at byte %zu",
                                   cp, esc_at);
                } else if (cp == 0) {
                    free(s.b);
                    return qv_fail(QV_ERR_FORMAT,
                                   "JSON: \\u0000 at byte %zu is not accepted (strings are NUL-terminated)",
                                   esc_at);
                }
                unsigned char u[4];
                size_t n = utf8_encode(cp, u);
                st = sbuf_put(&s, u, n);
            } else {
                free(s.b);
                char here[32];
                return qv_fail(QV_ERR_FORMAT, "JSON: invalid escape at byte %zu: backslash before %s",
                               esc_at, what_is_here(c, here, sizeof here));
            }
        } else if (ch >= 0x80) {
            size_t n = utf8_valid_len(c);
            if (!n) {
                free(s.b);
                return qv_fail(QV_ERR_FORMAT, "JSON: invalid UTF-8 in a string at byte %zu", c->pos);
            }
            st = sbuf_put(&s, c->p + c->pos, n);
            c->pos += n;
        } else {
            unsigned char b = (unsigned char)ch;
            st = sbuf_put(&s, &b, 1);
            c->pos++;
        }
        if (st != QV_OK) {
            free(s.b);
            return st;
        }
    }
    *out = s.b;
    *out_len = s.n;
    return QV_OK;
}

static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }

/* Number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static qv_status parse_number(cursor *c, qv_json *j)
{
    size_t start = c->pos;
    if (peek(c) == '-') c->pos++;
    if (peek(c) == '0') {
        c->pos++;
        if (is_digit(peek(c)))
            return qv_fail(QV_ERR_FORMAT, "JSON: leading zero in a number at byte %zu", start);
    } else if (is_digit(peek(c))) {
        while (is_digit(peek(c))) c->pos++;
    } else {
        return unexpected(c, "a digit");
    }
    if (peek(c) == '.') {
        c->pos++;
        if (!is_digit(peek(c))) return unexpected(c, "a digit after the decimal point");
        while (is_digit(peek(c))) c->pos++;
    }
    if (peek(c) == 'e' || peek(c) == 'E') {
        c->pos++;
        if (peek(c) == '+' || peek(c) == '-') c->pos++;
        if (!is_digit(peek(c))) return unexpected(c, "a digit in the exponent");
        while (is_digit(peek(c))) c->pos++;
    }
    size_t n = c->pos - start;
    j->text = malloc(n + 1);
    if (!j->text) return qv_fail(QV_ERR_NOMEM, "JSON: out of memory");
    memcpy(j->text, c->p + start, n);
    j->text[n] = '\0';
    j->text_len = n;
    errno = 0;
    j->number = strtod(j->text, NULL);
    if (errno == ERANGE && isinf(j->number))
        return qv_fail(QV_ERR_FORMAT, "JSON: number %s at byte %zu is beyond the double range", j->text,
                       start);
    j->type = QV_JSON_NUMBER;
    return QV_OK;
}

static qv_status parse_value(cursor *c, qv_json *j, int depth);

static int cmp_key_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Refuses an object with two members of the same name (sort, then compare
 * neighbours: n log n even for objects with many thousands of members). */
static qv_status check_unique_keys(const qv_json *j)
{
    if (j->count < 2) return QV_OK;
    char **sorted = malloc((size_t)j->count * sizeof *sorted);
    if (!sorted) return qv_fail(QV_ERR_NOMEM, "JSON: out of memory");
    memcpy(sorted, j->keys, (size_t)j->count * sizeof *sorted);
    qsort(sorted, (size_t)j->count, sizeof *sorted, cmp_key_ptr);
    for (int i = 1; i < j->count; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) {
            qv_status st = qv_fail(QV_ERR_FORMAT, "JSON: duplicate key \"%.200s\" in the object at byte %zu",
                                   sorted[i], j->offset);
            free(sorted);
            return st;
        }
    free(sorted);
    return QV_OK;
}

/* Appends one empty item (and key slot for objects) to an array/object node. */
static qv_status grow(qv_json *j, int *cap)
{
    if (j->count < *cap) return QV_OK;
    /* 2^26 items keep the byte size of the item array far from int overflow
     * and above anything a header or results line holds. */
    if (*cap > (1 << 26)) return qv_fail(QV_ERR_NOMEM, "JSON: too many items in one array or object");
    int ncap = *cap ? *cap * 2 : 4; /* doubling: amortized O(1) appends */
    qv_json *items = realloc(j->items, (size_t)ncap * sizeof *items);
    if (!items) return qv_fail(QV_ERR_NOMEM, "JSON: out of memory");
    j->items = items;
    if (j->type == QV_JSON_OBJECT) {
        char **keys = realloc(j->keys, (size_t)ncap * sizeof *keys);
        if (!keys) return qv_fail(QV_ERR_NOMEM, "JSON: out of memory");
        j->keys = keys;
    }
    *cap = ncap;
    return QV_OK;
}

static qv_status parse_container(cursor *c, qv_json *j, int depth)
{
    int is_obj = peek(c) == '{';
    const char close = is_obj ? '}' : ']';
    j->type = is_obj ? QV_JSON_OBJECT : QV_JSON_ARRAY;
    if (depth >= QV_JSON_MAX_DEPTH)
        return qv_fail(QV_ERR_FORMAT, "JSON: nesting deeper than %d at byte %zu", QV_JSON_MAX_DEPTH, c->pos);
    c->pos++;
    skip_ws(c);
    if (peek(c) == close) {
        c->pos++;
        return QV_OK;
    }
    int cap = 0;
    for (;;) {
        QV_TRY(grow(j, &cap));
        qv_json *item = &j->items[j->count];
        memset(item, 0, sizeof *item);
        if (is_obj) {
            if (peek(c) != '"') return unexpected(c, "a quoted key");
            char *key;
            size_t klen;
            QV_TRY(parse_string(c, &key, &klen));
            j->keys[j->count] = key;
            j->count++; /* counted now so qv_json_free releases the key on error */
            skip_ws(c);
            if (peek(c) != ':') return unexpected(c, "':' after a key");
            c->pos++;
            skip_ws(c);
        } else {
            j->count++;
        }
        QV_TRY(parse_value(c, item, depth + 1));
        skip_ws(c);
        if (peek(c) == ',') {
            c->pos++;
            skip_ws(c);
            continue;
        }
        if (peek(c) == close) {
            c->pos++;
            break;
        }
        return unexpected(c, is_obj ? "',' or '}'" : "',' or ']'");
    }
    return is_obj ? check_unique_keys(j) : QV_OK;
}

static int match_word(cursor *c, const char *w)
{
    size_t n = strlen(w);
    if (c->len - c->pos < n || memcmp(c->p + c->pos, w, n)) return 0;
    c->pos += n;
    return 1;
}

static qv_status parse_value(cursor *c, qv_json *j, int depth)
{
    j->offset = c->pos;
    int ch = peek(c);
    if (ch == '{' || ch == '[') return parse_container(c, j, depth);
    if (ch == '"') {
        QV_TRY(parse_string(c, &j->text, &j->text_len));
        j->type = QV_JSON_STRING;
        return QV_OK;
    }
    if (ch == '-' || is_digit(ch)) return parse_number(c, j);
    if (match_word(c, "true")) {
        j->type = QV_JSON_BOOL;
        j->boolean = 1;
        return QV_OK;
    }
    if (match_word(c, "false")) {
        j->type = QV_JSON_BOOL;
        return QV_OK;
    }
    if (match_word(c, "null")) {
        j->type = QV_JSON_NULL;
        return QV_OK;
    }
    return unexpected(c, "a JSON value");
}

static void free_children(qv_json *j)
{
    for (int i = 0; i < j->count; i++) {
        free_children(&j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->text);
}

void qv_json_free(qv_json *j)
{
    if (!j) return;
    free_children(j);
    free(j);
}

qv_status qv_json_parse(const char *text, size_t len, qv_json **out)
{
    *out = NULL;
    qv_json *root = calloc(1, sizeof *root);
    if (!root) return qv_fail(QV_ERR_NOMEM, "JSON: out of memory");
    cursor c = {(const unsigned char *)text, len, 0};
    skip_ws(&c);
    qv_status st = parse_value(&c, root, 0);
    if (st == QV_OK) {
        skip_ws(&c);
        if (c.pos != c.len) st = unexpected(&c, "end of text after the value");
    }
    if (st != QV_OK) {
        qv_json_free(root);
        return st;
    }
    *out = root;
    return QV_OK;
}

qv_json_type qv_json_type_of(const qv_json *j) { return j ? j->type : QV_JSON_NULL; }

const char *qv_json_type_name(qv_json_type t)
{
    switch (t) {
    case QV_JSON_NULL: return "null";
    case QV_JSON_BOOL: return "bool";
    case QV_JSON_NUMBER: return "number";
    case QV_JSON_STRING: return "string";
    case QV_JSON_ARRAY: return "array";
    case QV_JSON_OBJECT: return "object";
    }
    return "?";
}

const qv_json *qv_json_get(const qv_json *j, const char *key)
{
    if (!j || j->type != QV_JSON_OBJECT || !key) return NULL;
    for (int i = 0; i < j->count; i++)
        if (!strcmp(j->keys[i], key)) return &j->items[i];
    return NULL;
}

int qv_json_len(const qv_json *j)
{
    return (j && (j->type == QV_JSON_ARRAY || j->type == QV_JSON_OBJECT)) ? j->count : 0;
}

const qv_json *qv_json_at(const qv_json *j, int i)
{
    return (i >= 0 && i < qv_json_len(j)) ? &j->items[i] : NULL;
}

const char *qv_json_key(const qv_json *j, int i)
{
    return (j && j->type == QV_JSON_OBJECT && i >= 0 && i < j->count) ? j->keys[i] : NULL;
}

const char *qv_json_str(const qv_json *j) { return (j && j->type == QV_JSON_STRING) ? j->text : NULL; }

double qv_json_num(const qv_json *j, double dflt)
{
    return (j && j->type == QV_JSON_NUMBER) ? j->number : dflt;
}

int qv_json_bool(const qv_json *j, int dflt) { return (j && j->type == QV_JSON_BOOL) ? j->boolean : dflt; }

int qv_json_is_null(const qv_json *j) { return j && j->type == QV_JSON_NULL; }

/* Parses the digits of a number's source text into a magnitude; -1 unless the
 * text is an integer (no fraction, no exponent) that fits in uint64. */
static int integer_text(const qv_json *j, int *negative, uint64_t *mag)
{
    if (!j || j->type != QV_JSON_NUMBER) return -1;
    const char *s = j->text;
    *negative = (*s == '-');
    if (*negative) s++;
    uint64_t v = 0;
    for (; *s; s++) {
        if (!is_digit(*s)) return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *mag = v;
    return 0;
}

qv_status qv_json_int64(const qv_json *j, int64_t *out)
{
    int neg;
    uint64_t mag;
    if (integer_text(j, &neg, &mag))
        return qv_fail(QV_ERR_FORMAT, "JSON: expected an integer in int64 range, found %s%s",
                       j ? qv_json_type_name(j->type) : "nothing",
                       j && j->type == QV_JSON_NUMBER ? j->text : "");
    if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)
        return qv_fail(QV_ERR_FORMAT, "JSON: integer %s is beyond the int64 range", j->text);
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return QV_OK;
}

qv_status qv_json_uint64(const qv_json *j, uint64_t *out)
{
    int neg;
    uint64_t mag;
    if (integer_text(j, &neg, &mag) || (neg && mag != 0))
        return qv_fail(QV_ERR_FORMAT, "JSON: expected a non-negative integer, found %s%s",
                       j ? qv_json_type_name(j->type) : "nothing",
                       j && j->type == QV_JSON_NUMBER ? j->text : "");
    *out = mag;
    return QV_OK;
}

/* Escaped form of one byte: writes it into e and returns its length. */
static size_t escape_byte(unsigned char ch, char e[8])
{
    switch (ch) {
    case '"': memcpy(e, "\\\"", 2); return 2;
    case '\\': memcpy(e, "\\\\", 2); return 2;
    case '\n': memcpy(e, "\\n", 2); return 2;
    case '\r': memcpy(e, "\\r", 2); return 2;
    case '\t': memcpy(e, "\\t", 2); return 2;
    case '\b': memcpy(e, "\\b", 2); return 2;
    case '\f': memcpy(e, "\\f", 2); return 2;
    default: break;
    }
    if (ch < 0x20) {
        snprintf(e, 8, "\\u%04x", ch);
        return 6;
    }
    e[0] = (char)ch;
    return 1;
}

size_t qv_json_sput_str(char *buf, size_t cap, const char *s)
{
    size_t n = 0;
    char e[8];
    /* Each output byte lands at index n while n < cap - 1 (room for the NUL). */
    e[0] = '"';
    if (n + 1 < cap) buf[n] = e[0];
    n++;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        size_t k = escape_byte(*p, e);
        for (size_t i = 0; i < k; i++, n++)
            if (n + 1 < cap) buf[n] = e[i];
    }
    if (n + 1 < cap) buf[n] = '"';
    n++;
    if (cap) buf[n < cap ? n : cap - 1] = '\0';
    return n;
}

void qv_json_fput_str(FILE *f, const char *s)
{
    char e[8];
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        size_t k = escape_byte(*p, e);
        fwrite(e, 1, k, f);
    }
    fputc('"', f);
}

void qv_json_fput_num(FILE *f, double x)
{
    if (!isfinite(x)) {
        fputs("null", f);
        return;
    }
    /* 17 significant digits always read back exactly; fewer often do and read
     * better, so take the shortest of 15, 16, 17 that round-trips. */
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    fputs(buf, f);
}
