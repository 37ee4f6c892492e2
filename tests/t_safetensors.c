/* t_safetensors.c: the .safetensors reader and writer (array.h) against files
 * the reference implementation wrote (tests/data/st, made by
 * tests/data/make_fixtures.py), round trips of every dtype and ndim 0..4, and
 * malformed headers built in memory, one defect each. Run from the
 * repository root. */
#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/json.h"
#include "qvet/array.h"

#include "support/files.h"
#include "support/fixture.h"
#include "support/suite.h"

#define FIXTURES "tests/data/st/"

static char tmpdir[64];

static void make_tmpdir(void) { tmpdir_create(tmpdir, sizeof tmpdir, "t_st"); }

static void remove_tmpdir(void) { tmpdir_remove(tmpdir); }

/* ---- the reference implementation's files ---- */

static const fixture_spec mixed[] = {
    {"w.f64", QV_DT_F8, 2, {2, 3}},        {"w.f32", QV_DT_F4, 1, {4}},
    {"w.f16", QV_DT_F2, 3, {2, 2, 2}},     {"w.i64", QV_DT_I8, 1, {3}},
    {"w.i32", QV_DT_I4, 4, {1, 2, 3, 1}},  {"w.i16", QV_DT_I2, 0, {0}},
    {"w.i8", QV_DT_I1, 1, {5}},            {"w.u8", QV_DT_U1, 2, {3, 3}},
    {"w.u16", QV_DT_U2, 1, {2}},           {"w.u32", QV_DT_U4, 1, {2}},
    {"empty", QV_DT_F4, 2, {0, 4}},
};
#define N_MIXED ((int)(sizeof mixed / sizeof mixed[0]))

static void check_tensor(const qv_st_file *f, const fixture_spec *x)
{
    qv_array v;
    ck_assert_msg(qv_st_get(f, x->name, &v) == QV_OK, "%s: %s", x->name, qv_errmsg());
    ck_assert_int_eq(v.borrowed, 1);
    ck_assert_uint_eq((uintptr_t)v.data % qv_dtype_size(v.dtype), 0);
    fixture_assert_array(&v, x, x->name);
    /* Destroying a view frees nothing it does not own. */
    qv_array_destroy(&v);
}

START_TEST(test_reference_file)
{
    qv_st_file *f;
    ck_assert_msg(qv_st_open(FIXTURES "mixed.safetensors", &f) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(qv_st_count(f), N_MIXED);
    for (int i = 0; i < N_MIXED; i++) check_tensor(f, &mixed[i]);
    ck_assert_ptr_null(qv_st_metadata(f, "format"));
    ck_assert_ptr_null(qv_st_name(f, N_MIXED));
    qv_array v;
    ck_assert_int_eq(qv_st_get(f, "missing", &v), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "no tensor named \"missing\""));
    /* Saving what was read reproduces the reference implementation's bytes. */
    const char *names[N_MIXED];
    qv_array views[N_MIXED];
    for (int i = 0; i < N_MIXED; i++) {
        names[i] = qv_st_name(f, i);
        ck_assert(qv_st_get(f, names[i], &views[i]) == QV_OK);
    }
    make_tmpdir();
    char out[256];
    snprintf(out, sizeof out, "%s/mixed.safetensors", tmpdir);
    ck_assert_msg(qv_st_save(out, N_MIXED, names, views) == QV_OK, "%s", qv_errmsg());
    assert_same_bytes(FIXTURES "mixed.safetensors", out);
    remove_tmpdir();
    qv_st_close(f);
}
END_TEST

START_TEST(test_metadata)
{
    static const fixture_spec a = {"a", QV_DT_F4, 2, {2, 2}}, b = {"b", QV_DT_I1, 1, {3}};
    qv_st_file *f;
    ck_assert_msg(qv_st_open(FIXTURES "meta.safetensors", &f) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(qv_st_count(f), 2);
    ck_assert_str_eq(qv_st_metadata(f, "format"), "pt");
    ck_assert_str_eq(qv_st_metadata(f, "note"), "qvet fixture");
    ck_assert_ptr_null(qv_st_metadata(f, "absent"));
    check_tensor(f, &a);
    check_tensor(f, &b);
    qv_st_close(f);
}
END_TEST

/* ---- round trips: every dtype, ndim 0..4, in one file ---- */

START_TEST(test_roundtrip)
{
    /* _i is the number of dimensions; one tensor of every dtype. */
    int ndim = _i;
    enum { NT = QV_DT_COUNT - QV_DT_I1 };
    static const int64_t dims[4] = {2, 3, 1, 5};
    const uint64_t seed = 20261129u * 1000u + (uint64_t)_i;
    printf("roundtrip ndim=%d seed=%" PRIu64 "\n", ndim, seed);
    qv_array arrays[NT];
    char namebuf[NT][32];
    const char *names[NT];
    for (int t = 0; t < NT; t++) {
        qv_dtype dt = (qv_dtype)(QV_DT_I1 + t);
        ck_assert(qv_array_create(&arrays[t], dt, ndim, dims) == QV_OK);
        fixture_fill_random(&arrays[t], seed, (uint64_t)t);
        /* Names in reverse dtype order, so the writer's sort has work to do. */
        snprintf(namebuf[t], sizeof namebuf[t], "t%02d.%s", NT - t, qv_dtype_name(dt));
        names[t] = namebuf[t];
    }
    make_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir);
    ck_assert_msg(qv_st_save(path, NT, names, arrays) == QV_OK, "%s", qv_errmsg());
    qv_st_file *f;
    ck_assert_msg(qv_st_open(path, &f) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(qv_st_count(f), NT);
    for (int t = 0; t < NT; t++) {
        qv_array v;
        ck_assert_msg(qv_st_get(f, names[t], &v) == QV_OK, "%s", qv_errmsg());
        ck_assert_msg(v.dtype == arrays[t].dtype, "%s came back as %s", names[t], qv_dtype_name(v.dtype));
        ck_assert_int_eq(v.ndim, ndim);
        for (int d = 0; d < ndim; d++) ck_assert_int_eq(v.shape[d], dims[d]);
        ck_assert_uint_eq(v.nbytes, arrays[t].nbytes);
        ck_assert_mem_eq(v.data, arrays[t].data, v.nbytes);
        ck_assert_uint_eq((uintptr_t)v.data % qv_dtype_size(v.dtype), 0);
    }
    qv_st_close(f);
    /* The header: 8-byte aligned data start, tensors ordered wider first. */
    void *raw;
    size_t len;
    ck_assert(qv_file_read(path, &raw, &len) == QV_OK);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | ((unsigned char *)raw)[i];
    ck_assert_uint_eq((8 + hlen) % 8, 0);
    qv_json *h;
    ck_assert_msg(qv_json_parse((char *)raw + 8, (size_t)hlen, &h) == QV_OK, "%s", qv_errmsg());
    size_t prev_size = 8;
    uint64_t prev_end = 0;
    for (int i = 0; i < qv_json_len(h); i++) {
        const qv_json *e = qv_json_at(h, i);
        qv_dtype dt = qv_dtype_from_st_name(qv_json_str(qv_json_get(e, "dtype")));
        ck_assert_msg(qv_dtype_size(dt) <= prev_size, "%s is stored after a narrower dtype", qv_json_key(h, i));
        prev_size = qv_dtype_size(dt);
        uint64_t b, en;
        ck_assert(qv_json_uint64(qv_json_at(qv_json_get(e, "data_offsets"), 0), &b) == QV_OK);
        ck_assert(qv_json_uint64(qv_json_at(qv_json_get(e, "data_offsets"), 1), &en) == QV_OK);
        ck_assert_uint_eq(b, prev_end);
        prev_end = en;
    }
    ck_assert_uint_eq(prev_end, len - 8 - hlen);
    qv_json_free(h);
    free(raw);
    for (int t = 0; t < NT; t++) qv_array_destroy(&arrays[t]);
    remove_tmpdir();
}
END_TEST

/* ---- malformed files built in memory ---- */

/* A .safetensors image: the length field (hlen_override when non-zero, else
 * the header's length), the header text, then data_len bytes of data. */
static size_t build_st(unsigned char *buf, const char *header, uint64_t hlen_override, size_t data_len)
{
    size_t hl = strlen(header);
    uint64_t field = hlen_override ? hlen_override : hl;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(field >> (8 * i));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, 0x11, data_len);
    return 8 + hl + data_len;
}

typedef struct bad_case {
    const char *what;
    const char *header;
    uint64_t hlen;  /* length field; 0: the true length */
    size_t data;
    qv_status st;
    const char *needle;
} bad_case;

#define T1(dt, shape, b, e) "{\"a\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" b "," e "]}}"
static const bad_case bad_cases[] = {
    {"header length past the end", T1("F32", "[2]", "0", "8"), 1000, 8, QV_ERR_FORMAT, "runs past the end"},
    {"huge header length", T1("F32", "[2]", "0", "8"), 0x8000000000000000ull, 8, QV_ERR_FORMAT,
     "runs past the end"},
    {"header not an object", "[1,2,3]", 0, 0, QV_ERR_FORMAT, "does not start with '{'"},
    {"unterminated header", "{\"a\":{\"dtype\":\"F32\"", 0, 0, QV_ERR_FORMAT, "JSON"},
    {"garbage header", "{garbage}", 0, 0, QV_ERR_FORMAT, "JSON: expected a quoted key"},
    {"trailing garbage", T1("F32", "[2]", "0", "8") "x", 0, 8, QV_ERR_FORMAT, "end of text"},
    {"unknown dtype", T1("F128", "[2]", "0", "8"), 0, 8, QV_ERR_DTYPE, "unsupported dtype \"F128\""},
    {"bool dtype", T1("BOOL", "[2]", "0", "2"), 0, 2, QV_ERR_DTYPE, "unsupported dtype \"BOOL\""},
    {"negative dimension", T1("F32", "[2,-1]", "0", "8"), 0, 8, QV_ERR_SHAPE, "negative"},
    {"too many dimensions", T1("F32", "[1,1,1,1,1,1,1,1,2]", "0", "8"), 0, 8, QV_ERR_SHAPE, "9 dimensions"},
    {"count overflow", T1("F32", "[4294967296,4294967296]", "0", "8"), 0, 8, QV_ERR_SHAPE, "overflows 64 bits"},
    {"fractional dimension", T1("F32", "[2.5]", "0", "8"), 0, 8, QV_ERR_SHAPE, "not an integer"},
    {"shape vs data size", T1("F32", "[3]", "0", "8"), 0, 8, QV_ERR_SHAPE, "need 12 bytes, data_offsets give 8"},
    {"offsets past the end", T1("F32", "[2]", "0", "8"), 0, 7, QV_ERR_FORMAT, "past the data buffer"},
    {"offsets backwards", T1("F32", "[0]", "8", "0"), 0, 8, QV_ERR_FORMAT, "run backwards"},
    {"negative offset", T1("F32", "[2]", "-8", "0"), 0, 8, QV_ERR_FORMAT, "non-negative integers"},
    {"huge offset", T1("U8", "[2]", "18446744073709551614", "18446744073709551616"), 0, 2, QV_ERR_FORMAT,
     "non-negative integers"},
    {"three offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}}", 0, 8, QV_ERR_FORMAT,
     "[begin, end]"},
    {"missing dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, QV_ERR_FORMAT, "no \"dtype\""},
    {"missing shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 0, 8, QV_ERR_FORMAT, "no \"shape\""},
    {"extra key", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 0, 8, QV_ERR_FORMAT,
     "unexpected key \"x\""},
    {"entry not an object", "{\"a\":[1]}", 0, 0, QV_ERR_FORMAT, "not an object"},
    {"duplicate names",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
     "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}",
     0, 4, QV_ERR_FORMAT, "duplicate key \"a\""},
    {"overlap",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
     "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
     0, 6, QV_ERR_FORMAT, "overlaps"},
    {"gap",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
     "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}",
     0, 6, QV_ERR_FORMAT, "2 unused bytes before tensor \"b\""},
    {"unused tail", T1("U8", "[2]", "0", "2"), 0, 5, QV_ERR_FORMAT, "3 unused bytes after"},
    {"metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0, 0, QV_ERR_FORMAT, "not a string"},
    {"metadata not an object", "{\"__metadata__\":\"x\"}", 0, 0, QV_ERR_FORMAT, "must be an object"},
    {"deep nesting",
     "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]"
     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
     0, 0, QV_ERR_FORMAT, "nesting deeper"},
    {"bad UTF-8 name", "{\"\xc3\x28\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1, QV_ERR_FORMAT,
     "invalid UTF-8"},
};
#define N_BAD ((int)(sizeof bad_cases / sizeof bad_cases[0]))

START_TEST(test_malformed)
{
    const bad_case *c = &bad_cases[_i];
    unsigned char *buf = malloc(8 + strlen(c->header) + c->data);
    size_t len = build_st(buf, c->header, c->hlen, c->data);
    qv_st_file *f = (qv_st_file *)buf; /* must be reset to NULL on failure */
    qv_status st = qv_st_parse(buf, len, &f);
    printf("%-28s %s\n", c->what, qv_errmsg());
    fixture_assert_refused(st, c->st, c->needle, c->what);
    ck_assert_ptr_null(f);
    free(buf);
}
END_TEST

START_TEST(test_short_inputs)
{
    qv_st_file *f;
    ck_assert_int_eq(qv_st_parse("", 0, &f), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "truncated"));
    ck_assert_int_eq(qv_st_parse("\x02\0\0\0\0\0\0", 7, &f), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "truncated"));
    /* The smallest valid file: an empty header object and no data. */
    ck_assert_int_eq(qv_st_parse("\x02\0\0\0\0\0\0\0{}", 10, &f), QV_OK);
    ck_assert_int_eq(qv_st_count(f), 0);
    qv_st_close(f);
    /* Trailing spaces pad the header, as the reference writer does. */
    ck_assert_int_eq(qv_st_parse("\x08\0\0\0\0\0\0\0{}      ", 16, &f), QV_OK);
    qv_st_close(f);
    ck_assert_int_eq(qv_st_open("tests/data/st/absent.safetensors", &f), QV_ERR_IO);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "absent.safetensors"));
}
END_TEST

/* qv_st_parse as fixture_assert_prefixes_refused calls it. */
static qv_status parse_st(const void *buf, size_t len)
{
    qv_st_file *f;
    const qv_status st = qv_st_parse(buf, len, &f);
    if (st == QV_OK) qv_st_close(f);
    return st;
}

/* Every proper prefix of a valid file is refused. */
START_TEST(test_every_truncation)
{
    fixture_assert_prefixes_refused(FIXTURES "mixed.safetensors", parse_st);
}
END_TEST

/* A tensor whose offset is not a multiple of its element size still comes
 * back as an aligned view with the right values. */
START_TEST(test_misaligned_tensor)
{
    static const char header[] = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}";
    size_t hl = strlen(header);
    unsigned char buf[256];
    size_t len = build_st(buf, header, 0, 0);
    float vals[2] = {1.5f, -2.25f};
    buf[len++] = 7;
    memcpy(buf + len, vals, sizeof vals);
    len += sizeof vals;
    ck_assert_uint_eq(len, 8 + hl + 9);
    qv_st_file *f;
    ck_assert_msg(qv_st_parse(buf, len, &f) == QV_OK, "%s", qv_errmsg());
    qv_array v;
    ck_assert(qv_st_get(f, "b", &v) == QV_OK);
    ck_assert_uint_eq((uintptr_t)v.data % 4, 0);
    ck_assert(((float *)v.data)[0] == 1.5f && ((float *)v.data)[1] == -2.25f);
    ck_assert(qv_st_get(f, "a", &v) == QV_OK);
    ck_assert_uint_eq(((uint8_t *)v.data)[0], 7);
    qv_st_close(f);
}
END_TEST

START_TEST(test_save_refusals)
{
    qv_array a[2];
    int64_t shape[1] = {2};
    ck_assert(qv_array_create(&a[0], QV_DT_F4, 1, shape) == QV_OK);
    ck_assert(qv_array_create(&a[1], QV_DT_I1, 1, shape) == QV_OK);
    make_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/x.safetensors", tmpdir);
    const char *dup[2] = {"w", "w"};
    ck_assert_int_eq(qv_st_save(path, 2, dup, a), QV_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "duplicate tensor name \"w\""));
    const char *empty[2] = {"w", ""};
    ck_assert_int_eq(qv_st_save(path, 2, empty, a), QV_ERR_USAGE);
    const char *meta[2] = {"__metadata__", "w"};
    ck_assert_int_eq(qv_st_save(path, 2, meta, a), QV_ERR_USAGE);
    ck_assert_int_eq(access(path, F_OK), -1);
    const char *ok[2] = {"w", "x \"quoted\"\n"};
    ck_assert_msg(qv_st_save(path, 2, ok, a) == QV_OK, "%s", qv_errmsg());
    qv_st_file *f;
    ck_assert_msg(qv_st_open(path, &f) == QV_OK, "%s", qv_errmsg());
    qv_array v;
    ck_assert(qv_st_get(f, "x \"quoted\"\n", &v) == QV_OK);
    ck_assert_int_eq(v.dtype, QV_DT_I1);
    qv_st_close(f);
    ck_assert_int_eq(qv_st_save("/nonexistent-folder/x.safetensors", 2, ok, a), QV_ERR_IO);
    remove_tmpdir();
    qv_array_destroy(&a[0]);
    qv_array_destroy(&a[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_reference_file);
    tcase_add_test(tc, test_metadata);
    tcase_add_loop_test(tc, test_roundtrip, 0, 5);
    tcase_add_loop_test(tc, test_malformed, 0, N_BAD);
    tcase_add_test(tc, test_short_inputs);
    tcase_add_test(tc, test_every_truncation);
    tcase_add_test(tc, test_misaligned_tensor);
    tcase_add_test(tc, test_save_refusals);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
