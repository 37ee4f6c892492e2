/* safetensors.c: the .safetensors reader and writer (array.h).
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON (an object
 * mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]},
 * plus an optional "__metadata__" object of strings), then the data buffer;
 * offsets are relative to the buffer's first byte. The header is parsed by the
 * strict reader of json.h; every offset is checked against the buffer before
 * any tensor byte is touched. */
#include "internal/json.h"
#include "qvet/array.h"

#include <stdlib.h>
#include <string.h>

/* The reference implementation refuses headers above 100 MB; so does qvet,
 * which also bounds the memory a hostile length can make it parse. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)
/* The writer pads the header with spaces so the data starts 8-byte aligned,
 * as the reference implementation does. */
#define ST_ALIGN 8

typedef struct st_tensor {
    char *name;
    qv_dtype dtype;
    int ndim;
    int64_t shape[QV_MAX_DIMS];
    int64_t count;
    size_t nbytes;
    uint64_t begin, end; /* byte range in the data buffer */
    void *aligned;       /* own copy when begin is not aligned to the element size */
} st_tensor;

struct qv_st_file {
    unsigned char *buf;        /* (len) bytes of the whole file, owned */
    size_t len;
    const unsigned char *data; /* (data_len) bytes: the data buffer inside buf */
    size_t data_len;
    int n;
    st_tensor *t;              /* (n) tensors in header order */
    int n_meta;
    char **meta_keys, **meta_vals; /* (n_meta) each */
};

void qv_st_close(qv_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        free(f->t[i].name);
        free(f->t[i].aligned);
    }
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->t);
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->buf);
    free(f);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static qv_status parse_metadata(qv_st_file *f, const qv_json *m)
{
    if (qv_json_type_of(m) != QV_JSON_OBJECT)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: \"__metadata__\" must be an object of strings, not %s",
                       qv_json_type_name(qv_json_type_of(m)));
    int n = qv_json_len(m);
    f->meta_keys = calloc((size_t)n + 1, sizeof *f->meta_keys);
    f->meta_vals = calloc((size_t)n + 1, sizeof *f->meta_vals);
    if (!f->meta_keys || !f->meta_vals) return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    for (int i = 0; i < n; i++) {
        const char *v = qv_json_str(qv_json_at(m, i));
        if (!v)
            return qv_fail(QV_ERR_FORMAT, ".safetensors: \"__metadata__\" value of \"%.100s\" is not a string",
                           qv_json_key(m, i));
        f->meta_keys[i] = dup_str(qv_json_key(m, i));
        f->meta_vals[i] = dup_str(v);
        f->n_meta = i + 1;
        if (!f->meta_keys[i] || !f->meta_vals[i]) return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    }
    return QV_OK;
}

/* Fills t from one header entry {"dtype", "shape", "data_offsets"}. */
static qv_status parse_entry(const char *name, const qv_json *e, st_tensor *t, size_t data_len)
{
    if (qv_json_type_of(e) != QV_JSON_OBJECT)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: entry \"%.100s\" is %s, not an object", name,
                       qv_json_type_name(qv_json_type_of(e)));
    for (int i = 0; i < qv_json_len(e); i++) {
        const char *k = qv_json_key(e, i);
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets"))
            return qv_fail(QV_ERR_FORMAT, ".safetensors: tensor \"%.100s\" has an unexpected key \"%.100s\"", name, k);
    }
    const char *dt = qv_json_str(qv_json_get(e, "dtype"));
    const qv_json *shape = qv_json_get(e, "shape");
    const qv_json *offs = qv_json_get(e, "data_offsets");
    if (!dt) return qv_fail(QV_ERR_FORMAT, ".safetensors: tensor \"%.100s\" has no \"dtype\" string", name);
    if (qv_json_type_of(shape) != QV_JSON_ARRAY)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: tensor \"%.100s\" has no \"shape\" array", name);
    if (qv_json_type_of(offs) != QV_JSON_ARRAY || qv_json_len(offs) != 2)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: tensor \"%.100s\" needs \"data_offsets\": [begin, end]", name);
    t->dtype = qv_dtype_from_st_name(dt);
    if (t->dtype == QV_DT_INVALID)
        return qv_fail(QV_ERR_DTYPE,
                       ".safetensors: tensor \"%.100s\" has unsupported dtype \"%.40s\" (supported: F64 F32 F16 BF16 "
                       "I64 I32 I16 I8 U64 U32 U16 U8 F8_E4M3 F8_E5M2)",
                       name, dt);
    int ndim = qv_json_len(shape);
    if (ndim > QV_MAX_DIMS)
        return qv_fail(QV_ERR_SHAPE, ".safetensors: tensor \"%.100s\" has %d dimensions (at most %d are supported)",
                       name, ndim, QV_MAX_DIMS);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        const qv_json *d = qv_json_at(shape, i);
        if (qv_json_int64(d, &t->shape[i]) != QV_OK)
            return qv_fail(QV_ERR_SHAPE, ".safetensors: tensor \"%.100s\": dimension %d is not an integer", name, i);
        if (t->shape[i] < 0)
            return qv_fail(QV_ERR_SHAPE, ".safetensors: tensor \"%.100s\": dimension %d is negative (%lld)", name, i,
                           (long long)t->shape[i]);
    }
    if (qv_shape_count(ndim, t->shape, qv_dtype_size(t->dtype), &t->count, &t->nbytes) != QV_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", qv_errmsg());
        return qv_fail(QV_ERR_SHAPE, ".safetensors: tensor \"%.100s\": %s", name, msg);
    }
    if (qv_json_uint64(qv_json_at(offs, 0), &t->begin) != QV_OK ||
        qv_json_uint64(qv_json_at(offs, 1), &t->end) != QV_OK)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: tensor \"%.100s\": data_offsets must be non-negative integers",
                       name);
    if (t->begin > t->end)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: tensor \"%.100s\": data_offsets [%llu, %llu] run backwards", name,
                       (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > data_len)
        return qv_fail(QV_ERR_FORMAT,
                       ".safetensors: tensor \"%.100s\": data_offsets end %llu is past the data buffer (%zu bytes; "
                       "truncated file?)",
                       name, (unsigned long long)t->end, data_len);
    if (t->end - t->begin != t->nbytes)
        return qv_fail(QV_ERR_SHAPE,
                       ".safetensors: tensor \"%.100s\": shape and dtype %s need %zu bytes, data_offsets give %llu",
                       name, dt, t->nbytes, (unsigned long long)(t->end - t->begin));
    return QV_OK;
}

static int cmp_range(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The tensors must tile the data buffer exactly: sorted by offset, each one
 * starts where the previous ended, and the last ends at the buffer's end. */
static qv_status check_tiling(const qv_st_file *f)
{
    const st_tensor **order = malloc(((size_t)f->n + 1) * sizeof *order);
    if (!order) return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    for (int i = 0; i < f->n; i++) order[i] = &f->t[i];
    qsort(order, (size_t)f->n, sizeof *order, cmp_range);
    uint64_t at = 0;
    qv_status st = QV_OK;
    for (int i = 0; i < f->n && st == QV_OK; i++) {
        if (order[i]->begin < at)
            st = qv_fail(QV_ERR_FORMAT, ".safetensors: tensor \"%.100s\" [%llu, %llu] overlaps tensor \"%.100s\"",
                         order[i]->name, (unsigned long long)order[i]->begin, (unsigned long long)order[i]->end,
                         order[i - 1]->name);
        else if (order[i]->begin > at)
            st = qv_fail(QV_ERR_FORMAT, ".safetensors: %llu unused bytes before tensor \"%.100s\" at offset %llu",
                         (unsigned long long)(order[i]->begin - at), order[i]->name,
                         (unsigned long long)order[i]->begin);
        at = order[i]->end;
    }
    if (st == QV_OK && at != f->data_len)
        st = qv_fail(QV_ERR_FORMAT, ".safetensors: %llu unused bytes after the last tensor",
                     (unsigned long long)(f->data_len - at));
    free(order);
    return st;
}

/* Parses f->buf (f->len bytes, owned by f). */
static qv_status parse_owned(qv_st_file *f)
{
    /* The 8-byte little-endian header length. */
    if (f->len < 8)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: truncated file (%zu bytes; the header length alone needs 8)",
                       f->len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->buf[i];
    if (hlen > f->len - 8)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: header length %llu runs past the end of the file (%zu bytes)",
                       (unsigned long long)hlen, f->len);
    if (hlen > ST_MAX_HEADER)
        return qv_fail(QV_ERR_FORMAT, ".safetensors: header length %llu is above the %u-byte limit",
                       (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen < 2 || f->buf[8] != '{')
        return qv_fail(QV_ERR_FORMAT, ".safetensors: the header does not start with '{' (not a safetensors file?)");
    f->data = f->buf + 8 + hlen;
    f->data_len = f->len - 8 - (size_t)hlen;
    qv_json *h;
    qv_status st = qv_json_parse((const char *)f->buf + 8, (size_t)hlen, &h);
    if (st != QV_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", qv_errmsg());
        return qv_fail(st, ".safetensors header: %s", msg);
    }
    int n = qv_json_len(h);
    f->t = calloc((size_t)n + 1, sizeof *f->t);
    if (!f->t) st = qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    for (int i = 0; i < n && st == QV_OK; i++) {
        const char *name = qv_json_key(h, i);
        if (!strcmp(name, "__metadata__")) {
            st = parse_metadata(f, qv_json_at(h, i));
            continue;
        }
        st_tensor *t = &f->t[f->n];
        st = parse_entry(name, qv_json_at(h, i), t, f->data_len);
        if (st != QV_OK) break;
        t->name = dup_str(name);
        if (!t->name) st = qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
        f->n++;
    }
    qv_json_free(h);
    QV_TRY(st);
    QV_TRY(check_tiling(f));
    /* malloc'ed buffers are aligned for every type, so a tensor's data is
     * aligned when its absolute offset is a multiple of its element size;
     * the rare one that is not gets its own aligned copy. */
    for (int i = 0; i < f->n; i++) {
        st_tensor *t = &f->t[i];
        size_t abs = (size_t)(f->data - f->buf) + (size_t)t->begin;
        if (t->nbytes && abs % qv_dtype_size(t->dtype)) {
            t->aligned = malloc(t->nbytes);
            if (!t->aligned) return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
            memcpy(t->aligned, f->data + t->begin, t->nbytes);
        }
    }
    return QV_OK;
}

qv_status qv_st_parse(const void *buf, size_t len, qv_st_file **out)
{
    *out = NULL;
    qv_st_file *f = calloc(1, sizeof *f);
    if (!f) return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    f->buf = malloc(len ? len : 1);
    if (!f->buf) {
        free(f);
        return qv_fail(QV_ERR_NOMEM, ".safetensors: cannot allocate %zu bytes", len);
    }
    if (len) memcpy(f->buf, buf, len);
    f->len = len;
    qv_status st = parse_owned(f);
    if (st != QV_OK) {
        qv_st_close(f);
        return st;
    }
    *out = f;
    return QV_OK;
}

qv_status qv_st_open(const char *path, qv_st_file **out)
{
    *out = NULL;
    qv_st_file *f = calloc(1, sizeof *f);
    if (!f) return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    void *buf;
    qv_status st = qv_file_read(path, &buf, &f->len);
    if (st != QV_OK) {
        free(f);
        return st;
    }
    f->buf = buf;
    st = parse_owned(f);
    if (st != QV_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", qv_errmsg());
        qv_st_close(f);
        return qv_fail(st, "%s: %s", path, msg);
    }
    *out = f;
    return QV_OK;
}

int qv_st_count(const qv_st_file *f) { return f ? f->n : 0; }

const char *qv_st_name(const qv_st_file *f, int i) { return (f && i >= 0 && i < f->n) ? f->t[i].name : NULL; }

const char *qv_st_metadata(const qv_st_file *f, const char *key)
{
    for (int i = 0; f && i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_vals[i];
    return NULL;
}

qv_status qv_st_get(const qv_st_file *f, const char *name, qv_array *view)
{
    memset(view, 0, sizeof *view);
    for (int i = 0; i < f->n; i++) {
        const st_tensor *t = &f->t[i];
        if (strcmp(t->name, name)) continue;
        view->dtype = t->dtype;
        view->ndim = t->ndim;
        memcpy(view->shape, t->shape, sizeof t->shape);
        view->count = t->count;
        view->nbytes = t->nbytes;
        view->data = t->aligned ? t->aligned : (void *)(f->data + t->begin);
        view->borrowed = 1;
        return QV_OK;
    }
    return qv_fail(QV_ERR_FORMAT, ".safetensors: no tensor named \"%.200s\" (the file has %d tensors)", name, f->n);
}

/* The reference implementation stores tensors in descending order of its
 * dtype enumeration (wider types first), then by name; these ranks follow
 * that enumeration so qvet's files are byte-identical to its files. */
static int st_rank(qv_dtype dt)
{
    switch (dt) {
    case QV_DT_U1: return 1;
    case QV_DT_I1: return 2;
    case QV_DT_E5M2: return 3;
    case QV_DT_E4M3: return 4;
    case QV_DT_I2: return 5;
    case QV_DT_U2: return 6;
    case QV_DT_F2: return 7;
    case QV_DT_BF16: return 8;
    case QV_DT_I4: return 9;
    case QV_DT_U4: return 10;
    case QV_DT_F4: return 11;
    case QV_DT_F8: return 12;
    case QV_DT_I8: return 13;
    case QV_DT_U8: return 14;
    default: return 0;
    }
}

typedef struct save_item {
    const char *name;
    const qv_array *a;
} save_item;

static int cmp_save(const void *pa, const void *pb)
{
    const save_item *x = pa, *y = pb;
    int rx = st_rank(x->a->dtype), ry = st_rank(y->a->dtype);
    if (rx != ry) return ry - rx;
    return strcmp(x->name, y->name);
}

/* A growable text buffer for the header. */
typedef struct tbuf {
    char *b;
    size_t n, cap;
    int oom;
} tbuf;

static void tput(tbuf *t, const char *s, size_t n)
{
    if (t->oom) return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256; /* a few tensors' entries */
        while (cap < t->n + n + 1) cap *= 2;
        char *b = realloc(t->b, cap);
        if (!b) {
            t->oom = 1;
            return;
        }
        t->b = b;
        t->cap = cap;
    }
    memcpy(t->b + t->n, s, n);
    t->n += n;
    t->b[t->n] = '\0';
}

static void tputs(tbuf *t, const char *s) { tput(t, s, strlen(s)); }

static void tput_jstr(tbuf *t, const char *s)
{
    size_t need = qv_json_sput_str(NULL, 0, s);
    char *tmp = malloc(need + 1);
    if (!tmp) {
        t->oom = 1;
        return;
    }
    qv_json_sput_str(tmp, need + 1, s);
    tput(t, tmp, need);
    free(tmp);
}

static int cmp_name_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static qv_status check_unique_names(int n, const char *const *names)
{
    const char **sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    if (!sorted) return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_name_ptr);
    qv_status st = QV_OK;
    for (int i = 1; i < n && st == QV_OK; i++)
        if (!strcmp(sorted[i - 1], sorted[i]))
            st = qv_fail(QV_ERR_USAGE, ".safetensors: duplicate tensor name \"%.100s\"", sorted[i]);
    free(sorted);
    return st;
}

qv_status qv_st_save(const char *path, int n, const char *const *names, const qv_array *arrays)
{
    if (n < 0) return qv_fail(QV_ERR_USAGE, ".safetensors: cannot save %d tensors", n);
    save_item *items = malloc(((size_t)n + 1) * sizeof *items);
    if (!items) return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    qv_status st = QV_OK;
    for (int i = 0; i < n && st == QV_OK; i++) {
        const qv_array *a = &arrays[i];
        int64_t count;
        size_t nbytes;
        items[i].name = names[i];
        items[i].a = a;
        if (!names[i] || !names[i][0] || !strcmp(names[i], "__metadata__"))
            st = qv_fail(QV_ERR_USAGE, ".safetensors: tensor %d has an empty or reserved name", i);
        else if (!qv_dtype_st_name(a->dtype))
            st = qv_fail(QV_ERR_DTYPE, ".safetensors: tensor \"%.100s\" has an invalid dtype", names[i]);
        else if ((st = qv_shape_count(a->ndim, a->shape, qv_dtype_size(a->dtype), &count, &nbytes)) == QV_OK)
            QV_ASSERT(count == a->count && nbytes == a->nbytes && (a->data || !nbytes),
                      "qv_array's count/nbytes/data disagree with its shape");
    }
    if (st == QV_OK) st = check_unique_names(n, names);
    if (st == QV_OK) qsort(items, (size_t)n, sizeof *items, cmp_save);
    if (st != QV_OK) {
        free(items);
        return st;
    }
    tbuf h = {0};
    tputs(&h, "{");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const qv_array *a = items[i].a;
        char num[64];
        if (i) tputs(&h, ",");
        tput_jstr(&h, items[i].name);
        tputs(&h, ":{\"dtype\":\"");
        tputs(&h, qv_dtype_st_name(a->dtype));
        tputs(&h, "\",\"shape\":[");
        for (int d = 0; d < a->ndim; d++) {
            snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)a->shape[d]);
            tputs(&h, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + a->nbytes));
        tputs(&h, num);
        off += a->nbytes;
    }
    tputs(&h, "}");
    while (h.n % ST_ALIGN) tputs(&h, " ");
    if (h.oom) {
        free(h.b);
        free(items);
        return qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory building the header");
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i) & 0xFF);
    const void **parts = malloc(((size_t)n + 2) * sizeof *parts);
    size_t *sizes = malloc(((size_t)n + 2) * sizeof *sizes);
    if (!parts || !sizes) {
        st = qv_fail(QV_ERR_NOMEM, ".safetensors: out of memory");
    } else {
        parts[0] = len8;
        sizes[0] = 8;
        parts[1] = h.b;
        sizes[1] = h.n;
        for (int i = 0; i < n; i++) {
            parts[2 + i] = items[i].a->data;
            sizes[2 + i] = items[i].a->nbytes;
        }
        st = qv_file_write_atomic(path, n + 2, parts, sizes);
    }
    free(parts);
    free(sizes);
    free(h.b);
    free(items);
    return st;
}
