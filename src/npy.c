/* npy.c: the .npy reader and writer (array.h).
 *
 * Layout of a .npy file: the magic "\x93NUMPY", a major and a minor version
 * byte, the header length (uint16 LE for 1.0, uint32 LE for 2.0 and 3.0), the
 * header (a Python dict literal with exactly the keys 'descr', 'fortran_order'
 * and 'shape', padded with spaces and ended by '\n'), then the raw data.
 * The header parser walks an explicit (p, len, pos) cursor and never reads
 * outside it. */
#include "qvet/array.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "\x93NUMPY": the 6-byte magic every .npy file starts with. */
static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* numpy aligns the data to 64 bytes (numpy.lib.format.ARRAY_ALIGN). */
#define NPY_ALIGN 64
/* numpy leaves room for the first axis to grow to 21 digits without
 * rewriting the file (numpy.lib.format.GROWTH_AXIS_MAX_DIGITS). */
#define NPY_GROWTH_DIGITS 21

typedef struct cursor {
    const unsigned char *p; /* (len) header bytes */
    size_t len;
    size_t pos;
} cursor;

static int peek(const cursor *c) { return c->pos < c->len ? c->p[c->pos] : -1; }

static void skip_ws(cursor *c)
{
    while (peek(c) == ' ' || peek(c) == '\t' || peek(c) == '\n' || peek(c) == '\r') c->pos++;
}

static qv_status expected(const cursor *c, const char *what)
{
    int ch = peek(c);
    if (ch < 0)
        return qv_fail(QV_ERR_FORMAT, ".npy header: expected %s at header byte %zu, found the end of the header",
                       what, c->pos);
    if (ch >= 0x20 && ch < 0x7f)
        return qv_fail(QV_ERR_FORMAT, ".npy header: expected %s at header byte %zu, found '%c'", what, c->pos, ch);
    return qv_fail(QV_ERR_FORMAT, ".npy header: expected %s at header byte %zu, found byte 0x%02x", what,
                   c->pos, ch);
}

/* A Python string literal in single or double quotes, without escapes (none of
 * the values numpy writes needs one). Copies at most cap-1 bytes into out. */
static qv_status parse_pystr(cursor *c, char *out, size_t cap)
{
    int q = peek(c);
    if (q != '\'' && q != '"') return expected(c, "a quoted string");
    size_t start = ++c->pos, n = 0;
    for (;;) {
        int ch = peek(c);
        if (ch < 0 || ch == '\n')
            return qv_fail(QV_ERR_FORMAT, ".npy header: unterminated string at header byte %zu", start - 1);
        if (ch == q) break;
        if (ch == '\\' || ch < 0x20 || ch >= 0x7f)
            return qv_fail(QV_ERR_FORMAT,
                           ".npy header: unexpected byte 0x%02x in a string at header byte %zu", ch, c->pos);
        if (n + 1 >= cap)
            return qv_fail(QV_ERR_FORMAT, ".npy header: string at header byte %zu is too long", start - 1);
        out[n++] = (char)ch;
        c->pos++;
    }
    c->pos++;
    out[n] = '\0';
    return QV_OK;
}

static int match_word(cursor *c, const char *w)
{
    size_t n = strlen(w);
    if (c->len - c->pos < n || memcmp(c->p + c->pos, w, n)) return 0;
    c->pos += n;
    return 1;
}

/* The shape tuple: "()", "(5,)", "(3, 4)", "(3, 4,)". A lone "(5)" is the
 * integer 5 in Python, not a tuple, and is refused as numpy refuses it. */
static qv_status parse_shape(cursor *c, int *ndim, int64_t *shape)
{
    if (peek(c) != '(') {
        if (peek(c) == '[') return qv_fail(QV_ERR_FORMAT, ".npy header: 'shape' must be a tuple, not a list");
        return expected(c, "'(' opening the shape tuple");
    }
    c->pos++;
    int n = 0, trailing_comma = 0;
    skip_ws(c);
    while (peek(c) != ')') {
        if (peek(c) == '-')
            return qv_fail(QV_ERR_SHAPE, ".npy header: dimension %d of the shape is negative", n);
        if (peek(c) < '0' || peek(c) > '9') return expected(c, "a dimension (a non-negative integer) or ')'");
        if (n == QV_MAX_DIMS)
            return qv_fail(QV_ERR_SHAPE, ".npy header: more than %d dimensions are not supported", QV_MAX_DIMS);
        int64_t v = 0;
        while (peek(c) >= '0' && peek(c) <= '9') {
            int d = peek(c) - '0';
            if (v > (INT64_MAX - d) / 10)
                return qv_fail(QV_ERR_SHAPE, ".npy header: dimension %d of the shape overflows 64 bits", n);
            v = v * 10 + d;
            c->pos++;
        }
        shape[n++] = v;
        skip_ws(c);
        trailing_comma = 0;
        if (peek(c) == ',') {
            c->pos++;
            trailing_comma = 1;
            skip_ws(c);
        } else if (peek(c) != ')') {
            return expected(c, "',' or ')' in the shape tuple");
        }
    }
    c->pos++;
    if (n == 1 && !trailing_comma)
        return qv_fail(QV_ERR_FORMAT, ".npy header: shape '(%lld)' is not a tuple (a 1-tuple needs a trailing comma)",
                       (long long)shape[0]);
    *ndim = n;
    return QV_OK;
}

/* Maps a descr to a dtype; *is_bool is set for '|b1'. */
static qv_status parse_descr(const char *d, qv_dtype *dt, int *is_bool)
{
    static const struct {
        const char *code;
        qv_dtype dt;
    } codes[] = {
        {"i1", QV_DT_I1}, {"u1", QV_DT_U1}, {"b1", QV_DT_U1}, {"i2", QV_DT_I2}, {"u2", QV_DT_U2},
        {"i4", QV_DT_I4}, {"u4", QV_DT_U4}, {"i8", QV_DT_I8}, {"u8", QV_DT_U8}, {"f2", QV_DT_F2},
        {"f4", QV_DT_F4}, {"f8", QV_DT_F8},
    };
    char order = d[0];
    const char *code = d;
    if (order == '<' || order == '>' || order == '|' || order == '=')
        code++;
    else
        order = 0;
    *dt = QV_DT_INVALID;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (!strcmp(code, codes[i].code)) *dt = codes[i].dt;
    if (*dt == QV_DT_INVALID)
        return qv_fail(QV_ERR_DTYPE,
                       ".npy: dtype '%s' is not supported (supported: i1 u1 b1 i2 u2 i4 u4 i8 u8 f2 f4 f8, little-endian)",
                       d);
    *is_bool = !strcmp(code, "b1");
    if (qv_dtype_size(*dt) > 1) {
        if (order == '>')
            return qv_fail(QV_ERR_UNSUPPORTED,
                           ".npy: big-endian data ('%s') is not supported; save it little-endian, e.g. a.astype('<%s')",
                           d, code);
        if (order != '<')
            return qv_fail(QV_ERR_FORMAT, ".npy: dtype '%s' does not state little-endian byte order ('<%s')", d,
                           code);
    }
    return QV_OK;
}

/* The parsed header dict. */
typedef struct npy_header {
    char descr[32]; /* every supported descr has 3 characters; 32 fits any refused one in messages */
    int fortran_order;
    int ndim;
    int64_t shape[QV_MAX_DIMS];
} npy_header;

static qv_status parse_header(cursor *c, npy_header *h)
{
    enum { K_DESCR = 1, K_FORTRAN = 2, K_SHAPE = 4 };
    int seen = 0;
    skip_ws(c);
    if (peek(c) != '{') return expected(c, "'{' opening the header dict");
    c->pos++;
    for (;;) {
        skip_ws(c);
        if (peek(c) == '}') break;
        char key[32]; /* the longest valid key, 'fortran_order', has 13 characters */
        QV_TRY(parse_pystr(c, key, sizeof key));
        int k = !strcmp(key, "descr") ? K_DESCR
                : !strcmp(key, "fortran_order") ? K_FORTRAN
                : !strcmp(key, "shape") ? K_SHAPE
                : 0;
        if (!k) return qv_fail(QV_ERR_FORMAT, ".npy header: unexpected key '%s'", key);
        if (seen & k) return qv_fail(QV_ERR_FORMAT, ".npy header: duplicate key '%s'", key);
        seen |= k;
        skip_ws(c);
        if (peek(c) != ':') return expected(c, "':' after a key");
        c->pos++;
        skip_ws(c);
        if (k == K_DESCR) {
            if (peek(c) == '[')
                return qv_fail(QV_ERR_DTYPE, ".npy: structured dtypes (a list descr) are not supported");
            QV_TRY(parse_pystr(c, h->descr, sizeof h->descr));
        } else if (k == K_FORTRAN) {
            if (match_word(c, "True"))
                h->fortran_order = 1;
            else if (match_word(c, "False"))
                h->fortran_order = 0;
            else
                return expected(c, "True or False for 'fortran_order'");
        } else {
            QV_TRY(parse_shape(c, &h->ndim, h->shape));
        }
        skip_ws(c);
        if (peek(c) == ',') {
            c->pos++;
            continue;
        }
        if (peek(c) == '}') break;
        return expected(c, "',' or '}' in the header dict");
    }
    c->pos++;
    if (seen != (K_DESCR | K_FORTRAN | K_SHAPE))
        return qv_fail(QV_ERR_FORMAT, ".npy header: missing key '%s'",
                       !(seen & K_DESCR) ? "descr" : !(seen & K_FORTRAN) ? "fortran_order" : "shape");
    /* Only padding may follow the dict. */
    skip_ws(c);
    if (c->pos != c->len) return expected(c, "only spaces and a newline after the header dict");
    return QV_OK;
}

static uint32_t le_u16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

static uint32_t le_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Validates a whole .npy image b[0..len) and describes it: meta gets the
 * dtype, shape, count and nbytes (data stays NULL), *data_off the offset of
 * the data, which runs exactly to the end of the image. */
static qv_status parse_image(const unsigned char *b, size_t len, qv_array *meta, size_t *data_off)
{
    if (len < sizeof npy_magic || memcmp(b, npy_magic, sizeof npy_magic))
        return qv_fail(QV_ERR_FORMAT, ".npy: bad magic (the file does not start with \\x93NUMPY)");
    /* The magic, two version bytes and at least a 2-byte header length. */
    if (len < 10)
        return qv_fail(QV_ERR_FORMAT, ".npy: truncated file (%zu bytes, inside the fixed preamble)", len);
    int major = b[6], minor = b[7];
    size_t prefix;
    uint32_t hlen;
    if (major == 1 && minor == 0) {
        prefix = 10;
        hlen = le_u16(b + 8);
    } else if ((major == 2 || major == 3) && minor == 0) {
        prefix = 12;
        if (len < prefix) return qv_fail(QV_ERR_FORMAT, ".npy: truncated file (%zu bytes, inside the preamble)", len);
        hlen = le_u32(b + 8);
    } else {
        return qv_fail(QV_ERR_FORMAT, ".npy: unsupported format version %d.%d (1.0, 2.0 and 3.0 are read)", major,
                       minor);
    }
    if (hlen > len - prefix)
        return qv_fail(QV_ERR_FORMAT, ".npy: the header length %u runs past the end of the file (%zu bytes)", hlen,
                       len);
    npy_header h;
    memset(&h, 0, sizeof h);
    cursor c = {b + prefix, hlen, 0};
    QV_TRY(parse_header(&c, &h));
    qv_dtype dt;
    int is_bool = 0;
    QV_TRY(parse_descr(h.descr, &dt, &is_bool));
    int64_t count;
    size_t nbytes;
    if (qv_shape_count(h.ndim, h.shape, qv_dtype_size(dt), &count, &nbytes) != QV_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", qv_errmsg());
        return qv_fail(QV_ERR_SHAPE, ".npy: %s", msg);
    }
    if (h.fortran_order) {
        /* Fortran and C order store the same bytes when at most one dimension
         * exceeds 1; anything else would need a transpose qvet does not do. */
        int big = 0;
        for (int i = 0; i < h.ndim; i++) big += h.shape[i] > 1;
        if (big > 1)
            return qv_fail(QV_ERR_UNSUPPORTED,
                           ".npy: Fortran-order arrays are not supported; save with np.ascontiguousarray(a)");
    }
    size_t data_len = len - prefix - hlen;
    if (data_len < nbytes)
        return qv_fail(QV_ERR_FORMAT, ".npy: truncated data: the shape and dtype '%s' need %zu bytes, the file has %zu",
                       h.descr, nbytes, data_len);
    if (data_len > nbytes)
        return qv_fail(QV_ERR_FORMAT, ".npy: %zu unexpected bytes after the data (the shape and dtype '%s' need %zu)",
                       data_len - nbytes, h.descr, nbytes);
    const unsigned char *data = b + prefix + hlen;
    if (is_bool)
        for (size_t i = 0; i < nbytes; i++)
            if (data[i] > 1)
                return qv_fail(QV_ERR_RANGE, ".npy: bool element %zu holds %u (only 0 and 1 are bools)", i, data[i]);
    memset(meta, 0, sizeof *meta);
    meta->dtype = dt;
    meta->ndim = h.ndim;
    memcpy(meta->shape, h.shape, sizeof h.shape);
    meta->count = count;
    meta->nbytes = nbytes;
    *data_off = prefix + hlen;
    return QV_OK;
}

qv_status qv_npy_parse(const void *buf, size_t len, qv_array *out)
{
    memset(out, 0, sizeof *out);
    qv_array meta;
    size_t off;
    QV_TRY(parse_image(buf, len, &meta, &off));
    QV_TRY(qv_array_create(out, meta.dtype, meta.ndim, meta.shape));
    if (meta.nbytes) memcpy(out->data, (const unsigned char *)buf + off, meta.nbytes);
    return QV_OK;
}

qv_status qv_npy_load(const char *path, qv_array *out)
{
    memset(out, 0, sizeof *out);
    void *buf;
    size_t len, off;
    QV_TRY(qv_file_read(path, &buf, &len));
    qv_array meta;
    qv_status st = parse_image(buf, len, &meta, &off);
    if (st == QV_OK) {
        /* The file's buffer becomes the array's: move the data to its front
         * and shrink it, so a large array is never held twice. */
        memmove(buf, (unsigned char *)buf + off, meta.nbytes);
        void *shrunk = realloc(buf, meta.nbytes ? meta.nbytes : 1);
        *out = meta;
        out->data = shrunk ? shrunk : buf;
        return QV_OK;
    }
    free(buf);
    /* Prefix the message with the file name. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", qv_errmsg());
    return qv_fail(st, "%s: %s", path, msg);
}

qv_status qv_npy_save(const char *path, const qv_array *a)
{
    const char *descr = qv_dtype_npy_descr(a->dtype);
    if (!descr) return qv_fail(QV_ERR_DTYPE, ".npy: cannot save an array of invalid dtype %d", (int)a->dtype);
    int64_t count;
    size_t nbytes;
    QV_TRY(qv_shape_count(a->ndim, a->shape, qv_dtype_size(a->dtype), &count, &nbytes));
    QV_ASSERT(count == a->count && nbytes == a->nbytes, "qv_array's count/nbytes disagree with its shape");
    QV_ASSERT(a->data || !nbytes, "qv_array has no data");
    /* The dict exactly as numpy writes it: repr of the shape tuple, then the
     * growth padding for the first axis, then spaces up to the alignment. */
    char dict[512];
    size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < a->ndim; i++)
        n += (size_t)snprintf(dict + n, sizeof dict - n, i ? ", %lld" : "%lld", (long long)a->shape[i]);
    n += (size_t)snprintf(dict + n, sizeof dict - n, "%s), }", a->ndim == 1 ? "," : "");
    if (a->ndim > 0) {
        char first[32];
        int digits = snprintf(first, sizeof first, "%lld", (long long)a->shape[0]);
        for (int i = digits; i < NPY_GROWTH_DIGITS; i++) dict[n++] = ' ';
    }
    /* Header = dict + padding + '\n'; numpy always adds 1..64 spaces so that
     * preamble + header is a multiple of 64 (a full 64 when already aligned). */
    size_t hlen = n + 1, prefix = 10;
    size_t pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
    size_t total_h = hlen + pad;
    /* At most QV_MAX_DIMS dimensions keep the dict far below 64 KiB, so the
     * header always fits format 1.0's 16-bit length (2.0 is never needed). */
    QV_ASSERT(total_h <= 0xFFFF, "a .npy header of at most 8 dimensions fits 16 bits");
    unsigned char head[10 + sizeof dict + NPY_ALIGN + 1];
    memcpy(head, npy_magic, sizeof npy_magic);
    head[6] = 1;
    head[7] = 0;
    head[8] = (unsigned char)(total_h & 0xFF);
    head[9] = (unsigned char)(total_h >> 8);
    memcpy(head + prefix, dict, n);
    memset(head + prefix + n, ' ', pad);
    head[prefix + n + pad] = '\n';
    const void *parts[2] = {head, a->data};
    size_t sizes[2] = {prefix + total_h, nbytes};
    return qv_file_write_atomic(path, nbytes ? 2 : 1, parts, sizes);
}
