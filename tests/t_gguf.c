/* t_gguf.c: the GGUF reader (gguf.h). Tensor round trips through the writer
 * are checked against block decoding written here from the format's definition
 * (ggml block layouts: Q8_0 = f16 d + 32 int8, x = q*d; Q4_0 = f16 d + 16 bytes,
 * byte j holds value j in its low nibble and value j+16 in its high nibble,
 * x = (q-8)*d; Q4_1 = f16 d, f16 m + 16 bytes, x = q*d + m); metadata of every
 * value type from a hand-built image; malformed images (every truncation, bad
 * magic and version, offsets past the end, overflowing dims, unknown types,
 * absurd counts, misalignment, duplicates) are refused with a status. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/gguf.h"
#include "qvet/formats.h"

#include "support/suite.h"

/* --- a raw image builder, independent of the library's writer -------------- */
typedef struct raw {
    uint8_t b[1 << 16];
    size_t n;
} raw;

static void put(raw *r, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) r->b[r->n++] = (uint8_t)(v >> (8 * i));
}

static void put_str(raw *r, const char *s)
{
    put(r, strlen(s), 8);
    memcpy(r->b + r->n, s, strlen(s));
    r->n += strlen(s);
}

static void pad_to(raw *r, size_t a)
{
    while (r->n % a) r->b[r->n++] = 0;
}

/* Header with given version and counts. */
static void header(raw *r, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    r->n = 0;
    put(r, 0x46554747u, 4); /* "GGUF" */
    put(r, version, 4);
    put(r, n_tensors, 8);
    put(r, n_kv, 8);
}

/* One F32 tensor "t" of ne0 values at data offset `off`, then the data. */
static void one_tensor(raw *r, uint64_t ne0, uint32_t type, uint64_t off, size_t data_bytes)
{
    put_str(r, "t");
    put(r, 1, 4);
    put(r, ne0, 8);
    put(r, type, 4);
    put(r, off, 8);
    pad_to(r, 32);
    for (size_t i = 0; i < data_bytes; i++) r->b[r->n++] = (uint8_t)i;
}

static qv_status parse(const raw *r, qv_gguf **g)
{
    return qv_gguf_parse(r->b, r->n, 1, g);
}

/* --- independent block decoding ---------------------------------------------- */
static double f16_at(const uint8_t *p)
{
    return qv_decode(QV_FMT_F16, (uint32_t)p[0] | (uint32_t)p[1] << 8);
}

static double spec_value(qv_ggml_type t, const uint8_t *data, int64_t i)
{
    int64_t b = i / 32, j = i % 32;
    switch (t) {
    case QV_GGML_F32: { float f; memcpy(&f, data + 4 * i, 4); return f; }
    case QV_GGML_F16: return f16_at(data + 2 * i);
    case QV_GGML_BF16: return qv_decode(QV_FMT_BF16, (uint32_t)data[2 * i] | (uint32_t)data[2 * i + 1] << 8);
    case QV_GGML_Q8_0: { const uint8_t *blk = data + 34 * b; return f16_at(blk) * (int8_t)blk[2 + j]; }
    case QV_GGML_Q4_0: {
        const uint8_t *blk = data + 18 * b;
        int q = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
        return f16_at(blk) * (q - 8);
    }
    case QV_GGML_Q4_1: {
        const uint8_t *blk = data + 20 * b;
        int q = j < 16 ? (blk[4 + j] & 15) : (blk[4 + j - 16] >> 4);
        /* q*d is exact in f32 (<= 15 significant bits); the sum is rounded once */
        return (float)(f16_at(blk) * q + f16_at(blk + 2));
    }
    }
    return NAN;
}

/* splitmix64: the test's own seeded generator */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const qv_ggml_type types[] = {QV_GGML_F32, QV_GGML_F16, QV_GGML_BF16, QV_GGML_Q8_0, QV_GGML_Q4_0, QV_GGML_Q4_1};

START_TEST(test_tensor_round_trip)
{
    qv_ggml_type ty = types[_i];
    uint64_t seed = 20261129u + (uint64_t)_i, s = seed;
    printf("tensor round trip %s: seed %llu\n", qv_ggml_type_name(ty), (unsigned long long)seed);
    int64_t ne[2] = {96, 5};
    float x[480];
    for (int i = 0; i < 480; i++) x[i] = (float)(((double)(mix(&s) >> 11) / 9007199254740992.0 - 0.5) * 6.0);
    x[7] = 0;
    qv_gguf_writer *w = qv_gguf_writer_create();
    qv_gguf_w_str(w, "general.architecture", "llama");
    ck_assert(qv_gguf_w_tensor(w, "a", QV_GGML_F32, 1, (int64_t[]){32}, x) == QV_OK);
    ck_assert(qv_gguf_w_tensor(w, "weight", ty, 2, ne, x) == QV_OK);
    size_t len;
    const uint8_t *img = qv_gguf_writer_bytes(w, &len);
    qv_gguf *g;
    ck_assert_msg(qv_gguf_parse(img, len, 1, &g) == QV_OK, "%s", qv_errmsg());
    const qv_gguf_tensor *t = qv_gguf_tensor_find(g, "weight");
    ck_assert(t != NULL);
    ck_assert_int_eq(t->type, ty);
    ck_assert_int_eq(t->n_dims, 2);
    ck_assert_int_eq(t->ne[0], 96);
    ck_assert_int_eq(t->ne[1], 5);
    ck_assert_int_eq(t->nelem, 480);
    ck_assert_int_eq((int64_t)((uintptr_t)t->data - (uintptr_t)g->image) % 32, 0);
    float got[480];
    ck_assert(qv_gguf_tensor_f32(t, got) == QV_OK);
    double max_err = 0;
    for (int i = 0; i < 480; i++) {
        double want = spec_value(ty, t->data, i);
        ck_assert_msg((double)got[i] == want, "%s element %d: reader %.9g, spec %.9g", qv_ggml_type_name(ty), i,
                      (double)got[i], want);
        max_err = fmax(max_err, fabs(got[i] - x[i]));
    }
    /* The writer's own quantization error stays within half a step of the
     * coarsest format (Q4_1: range 6 over 15 steps, plus the f16 scale). */
    ck_assert_msg(max_err < 0.25, "writer quantization error %g", max_err);
    if (ty == QV_GGML_F32) ck_assert(max_err == 0);
    qv_gguf_close(g);
    qv_gguf_writer_destroy(w);
}
END_TEST

START_TEST(test_metadata_all_types)
{
    raw *r = calloc(1, sizeof *r);
    header(r, 3, 0, 17);
    put_str(r, "u8"); put(r, QV_GGUF_U8, 4); put(r, 200, 1);
    put_str(r, "i8"); put(r, QV_GGUF_I8, 4); put(r, (uint8_t)-100, 1);
    put_str(r, "u16"); put(r, QV_GGUF_U16, 4); put(r, 60000, 2);
    put_str(r, "i16"); put(r, QV_GGUF_I16, 4); put(r, (uint16_t)-30000, 2);
    put_str(r, "u32"); put(r, QV_GGUF_U32, 4); put(r, 4000000000u, 4);
    put_str(r, "i32"); put(r, QV_GGUF_I32, 4); put(r, (uint32_t)-2000000000, 4);
    float f = 0.15625f; uint32_t fb; memcpy(&fb, &f, 4);
    put_str(r, "f32"); put(r, QV_GGUF_F32, 4); put(r, fb, 4);
    put_str(r, "bool"); put(r, QV_GGUF_BOOL, 4); put(r, 1, 1);
    put_str(r, "str"); put(r, QV_GGUF_STRING, 4); put_str(r, "h\xc3\xa9llo");
    put_str(r, "u64"); put(r, QV_GGUF_U64, 4); put(r, 0xFFFFFFFFFFFFFFF0ull, 8);
    put_str(r, "i64"); put(r, QV_GGUF_I64, 4); put(r, (uint64_t)-5000000000ll, 8);
    double d = -1.0 / 3.0; uint64_t db; memcpy(&db, &d, 8);
    put_str(r, "f64"); put(r, QV_GGUF_F64, 4); put(r, db, 8);
    put_str(r, "arr_i16"); put(r, QV_GGUF_ARRAY, 4); put(r, QV_GGUF_I16, 4); put(r, 3, 8);
    put(r, 1, 2); put(r, (uint16_t)-2, 2); put(r, 3, 2);
    put_str(r, "arr_f64"); put(r, QV_GGUF_ARRAY, 4); put(r, QV_GGUF_F64, 4); put(r, 1, 8); put(r, db, 8);
    put_str(r, "arr_str"); put(r, QV_GGUF_ARRAY, 4); put(r, QV_GGUF_STRING, 4); put(r, 2, 8);
    put_str(r, "ab"); put_str(r, "");
    put_str(r, "arr_arr"); put(r, QV_GGUF_ARRAY, 4); put(r, QV_GGUF_ARRAY, 4); put(r, 2, 8);
    put(r, QV_GGUF_U8, 4); put(r, 2, 8); put(r, 7, 1); put(r, 8, 1);
    put(r, QV_GGUF_STRING, 4); put(r, 1, 8); put_str(r, "x");
    put_str(r, "arr_empty"); put(r, QV_GGUF_ARRAY, 4); put(r, QV_GGUF_U32, 4); put(r, 0, 8);
    qv_gguf *g;
    ck_assert_msg(parse(r, &g) == QV_OK, "%s", qv_errmsg());
    uint64_t u;
    double v;
    qv_gguf_str s;
    ck_assert(qv_gguf_get_u64(g, "u8", &u) == QV_OK && u == 200);
    ck_assert(qv_gguf_find(g, "i8")->v.i == -100);
    ck_assert(qv_gguf_get_u64(g, "u16", &u) == QV_OK && u == 60000);
    ck_assert(qv_gguf_find(g, "i16")->v.i == -30000);
    ck_assert(qv_gguf_get_u64(g, "u32", &u) == QV_OK && u == 4000000000u);
    ck_assert(qv_gguf_find(g, "i32")->v.i == -2000000000);
    ck_assert(qv_gguf_get_f64(g, "f32", &v) == QV_OK && v == 0.15625);
    ck_assert(qv_gguf_find(g, "bool")->v.u == 1);
    ck_assert(qv_gguf_get_str(g, "str", &s) == QV_OK && s.len == 6 && !memcmp(s.p, "h\xc3\xa9llo", 6));
    ck_assert(qv_gguf_get_u64(g, "u64", &u) == QV_OK && u == 0xFFFFFFFFFFFFFFF0ull);
    ck_assert(qv_gguf_find(g, "i64")->v.i == -5000000000ll);
    ck_assert(qv_gguf_get_f64(g, "f64", &v) == QV_OK && v == d);
    const qv_gguf_kv *a = qv_gguf_find(g, "arr_i16");
    ck_assert(a->arr_type == QV_GGUF_I16 && a->arr_count == 3);
    ck_assert(qv_gguf_arr_num(a, 0) == 1 && qv_gguf_arr_num(a, 1) == -2 && qv_gguf_arr_num(a, 2) == 3);
    ck_assert(qv_gguf_arr_num(qv_gguf_find(g, "arr_f64"), 0) == d);
    a = qv_gguf_find(g, "arr_str");
    ck_assert(a->arr_type == QV_GGUF_STRING && a->arr_count == 2);
    ck_assert(a->arr_str[0].len == 2 && !memcmp(a->arr_str[0].p, "ab", 2) && a->arr_str[1].len == 0);
    a = qv_gguf_find(g, "arr_arr");
    ck_assert(a->arr_type == QV_GGUF_ARRAY && a->arr_count == 2);
    ck_assert(qv_gguf_find(g, "arr_empty")->arr_count == 0);
    /* typed getters refuse the wrong type and absent keys */
    ck_assert(qv_gguf_get_u64(g, "str", &u) == QV_ERR_FORMAT);
    ck_assert(qv_gguf_get_u64(g, "i64", &u) == QV_ERR_FORMAT);
    ck_assert(qv_gguf_get_str(g, "u8", &s) == QV_ERR_FORMAT);
    ck_assert(qv_gguf_get_f64(g, "missing", &v) == QV_ERR_FORMAT);
    ck_assert(strstr(qv_errmsg(), "missing") != NULL);
    qv_gguf_close(g);
    /* every truncation of this metadata image is refused */
    size_t full = r->n;
    for (size_t n = 0; n < full; n++) {
        ck_assert_msg(qv_gguf_parse(r->b, n, 0, &g) == QV_ERR_FORMAT, "prefix of %zu bytes accepted", n);
        ck_assert(g == NULL);
    }
    free(r);
}
END_TEST

/* A valid single-tensor image, then each corruption of it. */
static raw *good_image(void)
{
    raw *r = calloc(1, sizeof *r);
    header(r, 3, 1, 1);
    put_str(r, "general.alignment"); put(r, QV_GGUF_U32, 4); put(r, 32, 4);
    one_tensor(r, 64, QV_GGML_F32, 0, 256);
    return r;
}

START_TEST(test_good_image_and_truncations)
{
    raw *r = good_image();
    qv_gguf *g;
    ck_assert_msg(parse(r, &g) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(g->n_tensors, 1);
    ck_assert_int_eq(g->tensors[0].nbytes, 256);
    qv_gguf_close(g);
    for (size_t n = 0; n < r->n; n++) {
        qv_status st = qv_gguf_parse(r->b, n, 1, &g);
        ck_assert_msg(st == QV_ERR_FORMAT, "prefix of %zu of %zu bytes: status %d", n, r->n, st);
    }
    free(r);
}
END_TEST

static void expect_refused(raw *r, qv_status want, const char *needle)
{
    qv_gguf *g = NULL;
    qv_status st = parse(r, &g);
    ck_assert_msg(st == want, "status %d (want %d): %s", st, want, qv_errmsg());
    ck_assert(g == NULL);
    ck_assert_msg(strstr(qv_errmsg(), needle) != NULL, "message '%s' lacks '%s'", qv_errmsg(), needle);
    free(r);
}

START_TEST(test_bad_magic)
{
    raw *r = good_image();
    r->b[0] = 'X';
    expect_refused(r, QV_ERR_FORMAT, "magic");
}
END_TEST

START_TEST(test_bad_version)
{
    raw *r = good_image();
    r->b[4] = 1;
    expect_refused(r, QV_ERR_FORMAT, "version");
    r = good_image();
    r->b[4] = 4;
    expect_refused(r, QV_ERR_FORMAT, "version");
}
END_TEST

START_TEST(test_offset_past_end)
{
    raw *r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    one_tensor(r, 64, QV_GGML_F32, 32, 256); /* 256 bytes at offset 32: 32 past the end */
    expect_refused(r, QV_ERR_FORMAT, "past the end");
    r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    one_tensor(r, 64, QV_GGML_F32, 0xFFFFFFFFFFFFFFE0ull, 256); /* offset + size wraps */
    expect_refused(r, QV_ERR_FORMAT, "past the end");
}
END_TEST

START_TEST(test_misaligned_offset)
{
    raw *r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    one_tensor(r, 8, QV_GGML_F32, 4, 64);
    expect_refused(r, QV_ERR_FORMAT, "aligned");
}
END_TEST

START_TEST(test_overflowing_dims)
{
    raw *r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    put_str(r, "t"); put(r, 2, 4);
    put(r, 1ull << 40, 8); put(r, 1ull << 40, 8); /* 2^80 elements */
    put(r, QV_GGML_F32, 4); put(r, 0, 8);
    pad_to(r, 32);
    expect_refused(r, QV_ERR_FORMAT, "overflows");
    r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    put_str(r, "t"); put(r, 1, 4); put(r, 0, 8); put(r, QV_GGML_F32, 4); put(r, 0, 8);
    expect_refused(r, QV_ERR_FORMAT, "zero");
    r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    put_str(r, "t"); put(r, 5, 4);
    for (int i = 0; i < 5; i++) put(r, 1, 8);
    put(r, QV_GGML_F32, 4); put(r, 0, 8);
    expect_refused(r, QV_ERR_FORMAT, "dimensions");
    r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    one_tensor(r, 48, QV_GGML_Q8_0, 0, 64); /* 48 is not a multiple of the 32-value block */
    expect_refused(r, QV_ERR_FORMAT, "block");
}
END_TEST

START_TEST(test_unknown_types)
{
    raw *r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    one_tensor(r, 256, 14, 0, 256); /* Q6_K: a real ggml type qvet does not decode */
    expect_refused(r, QV_ERR_DTYPE, "type 14");
    r = calloc(1, sizeof *r);
    header(r, 3, 1, 0);
    one_tensor(r, 32, 0xFFFFFFFFu, 0, 128);
    expect_refused(r, QV_ERR_DTYPE, "type");
    r = calloc(1, sizeof *r);
    header(r, 3, 0, 1);
    put_str(r, "k"); put(r, 13, 4); put(r, 0, 8); /* value type 13 does not exist */
    expect_refused(r, QV_ERR_FORMAT, "unknown value type");
    r = calloc(1, sizeof *r);
    header(r, 3, 0, 1);
    put_str(r, "k"); put(r, QV_GGUF_ARRAY, 4); put(r, 99, 4); put(r, 0, 8);
    expect_refused(r, QV_ERR_FORMAT, "unknown array element type");
    r = calloc(1, sizeof *r);
    header(r, 3, 0, 1);
    put_str(r, "k"); put(r, QV_GGUF_BOOL, 4); put(r, 2, 1);
    expect_refused(r, QV_ERR_FORMAT, "bool");
}
END_TEST

START_TEST(test_absurd_counts)
{
    raw *r = calloc(1, sizeof *r);
    header(r, 3, 0, 1ull << 60);
    expect_refused(r, QV_ERR_FORMAT, "absurd");
    r = calloc(1, sizeof *r);
    header(r, 3, 1ull << 40, 0);
    expect_refused(r, QV_ERR_FORMAT, "absurd");
    r = calloc(1, sizeof *r);
    header(r, 3, 0, 1);
    put_str(r, "k"); put(r, QV_GGUF_ARRAY, 4); put(r, QV_GGUF_STRING, 4); put(r, 1ull << 62, 8);
    expect_refused(r, QV_ERR_FORMAT, "count");
    r = calloc(1, sizeof *r);
    header(r, 3, 0, 1);
    put_str(r, "k"); put(r, QV_GGUF_ARRAY, 4); put(r, QV_GGUF_U64, 4); put(r, 1ull << 61, 8);
    expect_refused(r, QV_ERR_FORMAT, "past the end");
    r = calloc(1, sizeof *r);
    header(r, 3, 0, 1);
    put(r, 1ull << 63, 8); /* key length */
    put(r, 0, 8);
    expect_refused(r, QV_ERR_FORMAT, "length");
}
END_TEST

START_TEST(test_duplicates_and_alignment_key)
{
    raw *r = calloc(1, sizeof *r);
    header(r, 3, 2, 0);
    for (int i = 0; i < 2; i++) { put_str(r, "t"); put(r, 1, 4); put(r, 8, 8); put(r, QV_GGML_F32, 4); put(r, 0, 8); }
    pad_to(r, 32);
    for (int i = 0; i < 32; i++) put(r, 0, 1);
    expect_refused(r, QV_ERR_FORMAT, "twice");
    r = calloc(1, sizeof *r);
    header(r, 3, 0, 1);
    put_str(r, "general.alignment"); put(r, QV_GGUF_U32, 4); put(r, 24, 4);
    expect_refused(r, QV_ERR_FORMAT, "alignment");
}
END_TEST

START_TEST(test_missing_file)
{
    qv_gguf *g;
    ck_assert(qv_gguf_open("/nonexistent/model.gguf", &g) == QV_ERR_IO);
    ck_assert(g == NULL);
    ck_assert(strstr(qv_errmsg(), "/nonexistent/model.gguf") != NULL);
    /* a directory: refused as an I/O error, not read as LONG_MAX bytes */
    ck_assert(qv_gguf_open(".", &g) == QV_ERR_IO);
    ck_assert(g == NULL);
    ck_assert_msg(strstr(qv_errmsg(), "not a regular file") != NULL, "%s", qv_errmsg());
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("reader");
    tcase_add_loop_test(tc, test_tensor_round_trip, 0, (int)(sizeof types / sizeof types[0]));
    tcase_add_test(tc, test_metadata_all_types);
    tcase_add_test(tc, test_good_image_and_truncations);
    tcase_add_test(tc, test_bad_magic);
    tcase_add_test(tc, test_bad_version);
    tcase_add_test(tc, test_offset_past_end);
    tcase_add_test(tc, test_misaligned_offset);
    tcase_add_test(tc, test_overflowing_dims);
    tcase_add_test(tc, test_unknown_types);
    tcase_add_test(tc, test_absurd_counts);
    tcase_add_test(tc, test_duplicates_and_alignment_key);
    tcase_add_test(tc, test_missing_file);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
