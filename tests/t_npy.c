/* t_npy.c: the .npy reader and writer (array.h) against files numpy wrote.
 *
 * Expected element values are derived here from the element index with the
 * formula tests/data/make_fixtures.py used to write the fixtures; expected
 * bytes are the numpy-written files themselves. Malformed inputs are built in
 * memory, one defect each, and must give the named status and message.
 * Run from the repository root (fixtures: tests/data/npy, golden vectors:
 * tests/data/golden, or $QVET_GOLDEN). */
#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qvet/array.h"

#include "support/files.h"
#include "support/fixture.h"
#include "support/golden.h"
#include "support/suite.h"

#define FIXTURES "tests/data/npy/"

/* ---- helpers ---- */

static char tmpdir[64];

static void make_tmpdir(void) { tmpdir_create(tmpdir, sizeof tmpdir, "t_npy"); }

static void remove_tmpdir(void) { tmpdir_remove(tmpdir); }

/* ---- numpy-written fixtures: values and byte-exact re-save ---- */

static const fixture_spec fixtures[] = {
    {"i1_7", QV_DT_I1, 1, {7}},
    {"u1_2x3", QV_DT_U1, 2, {2, 3}},
    {"u1_1000", QV_DT_U1, 1, {1000}},
    {"i2_scalar", QV_DT_I2, 0, {0}},
    {"u2_2x3x4", QV_DT_U2, 3, {2, 3, 4}},
    {"i4_1x2x3x4", QV_DT_I4, 4, {1, 2, 3, 4}},
    {"u4_5", QV_DT_U4, 1, {5}},
    {"i8_3x2", QV_DT_I8, 2, {3, 2}},
    {"u8_4", QV_DT_U8, 1, {4}},
    {"f2_2x2x2", QV_DT_F2, 3, {2, 2, 2}},
    {"f4_3x4", QV_DT_F4, 2, {3, 4}},
    {"f8_2x3x1x2", QV_DT_F8, 4, {2, 3, 1, 2}},
    {"f4_0x3", QV_DT_F4, 2, {0, 3}},
};
#define N_FIXTURES ((int)(sizeof fixtures / sizeof fixtures[0]))

static void check_fixture(const char *path, const fixture_spec *fx)
{
    qv_array a;
    ck_assert_msg(qv_npy_load(path, &a) == QV_OK, "%s: %s", path, qv_errmsg());
    fixture_assert_array(&a, fx, path);
    qv_array_destroy(&a);
}

START_TEST(test_fixture)
{
    const fixture_spec *fx = &fixtures[_i];
    char path[256], out[256];
    snprintf(path, sizeof path, FIXTURES "%s.npy", fx->name);
    check_fixture(path, fx);
    /* Re-saving what was read gives numpy's bytes exactly. */
    qv_array a;
    ck_assert_msg(qv_npy_load(path, &a) == QV_OK, "%s", qv_errmsg());
    make_tmpdir();
    snprintf(out, sizeof out, "%s/%s.npy", tmpdir, fx->name);
    ck_assert_msg(qv_npy_save(out, &a) == QV_OK, "%s", qv_errmsg());
    assert_same_bytes(path, out);
    qv_array_destroy(&a);
    remove_tmpdir();
}
END_TEST

START_TEST(test_versions_2_and_3)
{
    static const fixture_spec f43 = {"f4_3x4", QV_DT_F4, 2, {3, 4}};
    check_fixture(FIXTURES "f4_3x4_v2.npy", &f43);
    check_fixture(FIXTURES "f4_3x4_v3.npy", &f43);
    /* Both save back as the 1.0 file numpy writes for the same array. */
    qv_array a;
    ck_assert(qv_npy_load(FIXTURES "f4_3x4_v3.npy", &a) == QV_OK);
    make_tmpdir();
    char out[256];
    snprintf(out, sizeof out, "%s/v1.npy", tmpdir);
    ck_assert(qv_npy_save(out, &a) == QV_OK);
    assert_same_bytes(FIXTURES "f4_3x4.npy", out);
    qv_array_destroy(&a);
    remove_tmpdir();
}
END_TEST

START_TEST(test_bool_reads_as_u1)
{
    static const uint8_t want[5] = {1, 0, 1, 1, 0};
    qv_array a;
    ck_assert_msg(qv_npy_load(FIXTURES "b1_5.npy", &a) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(a.dtype, QV_DT_U1);
    ck_assert_int_eq(a.count, 5);
    ck_assert_mem_eq(a.data, want, 5);
    qv_array_destroy(&a);
}
END_TEST

typedef struct refused {
    const char *file;
    qv_status st;
    const char *needle;
} refused;

static const refused refused_files[] = {
    {"bad_fortran_2x3", QV_ERR_UNSUPPORTED, "Fortran"},
    {"bad_bigendian_f4", QV_ERR_UNSUPPORTED, "big-endian"},
    {"bad_complex_c8", QV_ERR_DTYPE, "'<c8' is not supported"},
    {"bad_structured", QV_ERR_DTYPE, "structured"},
};

START_TEST(test_refused_files)
{
    const refused *r = &refused_files[_i];
    char path[256];
    snprintf(path, sizeof path, FIXTURES "%s.npy", r->file);
    qv_array a;
    qv_status st = qv_npy_load(path, &a);
    printf("%s: %s\n", r->file, qv_errmsg());
    fixture_assert_refused(st, r->st, r->needle, r->file);
    ck_assert_msg(strstr(qv_errmsg(), path), "message does not name the file");
    ck_assert_ptr_null(a.data);
}
END_TEST

/* ---- round trips of every dtype and ndim 0..4 ---- */

START_TEST(test_roundtrip)
{
    /* _i enumerates (dtype, ndim): every dtype with 0..4 dimensions. */
    qv_dtype dt = (qv_dtype)(QV_DT_I1 + _i / 5);
    int ndim = _i % 5;
    static const int64_t dims[4] = {3, 1, 4, 2};
    const uint64_t seed = 20261129u * 100u + (uint64_t)_i;
    printf("roundtrip %s ndim=%d seed=%" PRIu64 "\n", qv_dtype_name(dt), ndim, seed);
    qv_array a, b;
    ck_assert(qv_array_create(&a, dt, ndim, dims) == QV_OK);
    fixture_fill_random(&a, seed, 0);
    make_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/rt.npy", tmpdir);
    ck_assert_msg(qv_npy_save(path, &a) == QV_OK, "%s", qv_errmsg());
    ck_assert_msg(qv_npy_load(path, &b) == QV_OK, "%s", qv_errmsg());
    /* bf16 and fp8 come back as their raw-bits carriers u2 / u1. */
    qv_dtype back = dt == QV_DT_BF16 ? QV_DT_U2 : (dt == QV_DT_E4M3 || dt == QV_DT_E5M2) ? QV_DT_U1 : dt;
    ck_assert_msg(b.dtype == back, "%s came back as %s", qv_dtype_name(dt), qv_dtype_name(b.dtype));
    ck_assert_int_eq(b.ndim, ndim);
    for (int d = 0; d < ndim; d++) ck_assert_int_eq(b.shape[d], dims[d]);
    ck_assert_uint_eq(b.nbytes, a.nbytes);
    ck_assert_mem_eq(b.data, a.data, a.nbytes);
    /* The data starts at a multiple of 64 bytes, as numpy aligns it. */
    void *raw;
    size_t len;
    ck_assert(qv_file_read(path, &raw, &len) == QV_OK);
    ck_assert_uint_eq((len - a.nbytes) % 64, 0);
    free(raw);
    qv_array_destroy(&a);
    qv_array_destroy(&b);
    remove_tmpdir();
}
END_TEST

START_TEST(test_describe)
{
    qv_array a;
    char buf[64];
    int64_t shape[2] = {16, 4096};
    ck_assert(qv_array_create(&a, QV_DT_I1, 2, shape) == QV_OK);
    ck_assert_str_eq(qv_array_describe(&a, buf, sizeof buf), "(16, 4096) int8");
    qv_array_destroy(&a);
    ck_assert(qv_array_create(&a, QV_DT_BF16, 1, shape) == QV_OK);
    ck_assert_str_eq(qv_array_describe(&a, buf, sizeof buf), "(16,) bfloat16");
    qv_array_destroy(&a);
    ck_assert(qv_array_create(&a, QV_DT_F4, 0, shape) == QV_OK);
    ck_assert_str_eq(qv_array_describe(&a, buf, sizeof buf), "() float32");
    ck_assert_int_eq(a.count, 1);
    /* A tiny buffer truncates and stays terminated. */
    ck_assert_str_eq(qv_array_describe(&a, buf, 4), "() ");
    qv_array_destroy(&a);
    int64_t bad[2] = {1ll << 40, 1ll << 40};
    ck_assert_int_eq(qv_array_create(&a, QV_DT_F4, 2, bad), QV_ERR_SHAPE);
    int64_t neg[1] = {-1};
    ck_assert_int_eq(qv_array_create(&a, QV_DT_F4, 1, neg), QV_ERR_SHAPE);
    ck_assert_int_eq(qv_array_create(&a, QV_DT_F4, QV_MAX_DIMS + 1, shape), QV_ERR_SHAPE);
    ck_assert_int_eq(qv_array_create(&a, QV_DT_INVALID, 1, shape), QV_ERR_DTYPE);
}
END_TEST

/* ---- malformed inputs built in memory ---- */

/* Builds a .npy image: preamble for version `major`.0, the header text
 * (with the header length field taken from hlen_override when >= 0) and
 * data_len bytes of data. Returns the length. */
static size_t build_npy(unsigned char *buf, int major, const char *header, long hlen_override,
                        size_t data_len)
{
    static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    size_t hl = strlen(header), prefix = major == 1 ? 10 : 12;
    uint32_t field = hlen_override >= 0 ? (uint32_t)hlen_override : (uint32_t)hl;
    memcpy(buf, magic, 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++) buf[8 + i] = (unsigned char)(field >> (8 * i));
    memcpy(buf + prefix, header, hl);
    memset(buf + prefix + hl, 0x3C, data_len);
    return prefix + hl + data_len;
}

typedef struct bad_case {
    const char *what;
    int major;
    const char *header;
    long hlen;      /* header length field; -1: the true length */
    size_t data;    /* data bytes after the header */
    qv_status st;
    const char *needle;
} bad_case;

#define H(d, f, s) "{'descr': '" d "', 'fortran_order': " f ", 'shape': " s ", }\n"
static const bad_case bad_cases[] = {
    {"header length past the end", 1, H("<f4", "False", "(3,)"), 4000, 12, QV_ERR_FORMAT, "runs past the end"},
    {"v2 header length past the end", 2, H("<f4", "False", "(3,)"), 0x7FFFFFFF, 12, QV_ERR_FORMAT,
     "runs past the end"},
    {"truncated data", 1, H("<f4", "False", "(3,)"), -1, 11, QV_ERR_FORMAT, "truncated data"},
    {"trailing bytes", 1, H("<f4", "False", "(3,)"), -1, 13, QV_ERR_FORMAT, "1 unexpected bytes"},
    {"negative dimension", 1, H("<f4", "False", "(3, -2)"), -1, 0, QV_ERR_SHAPE, "negative"},
    {"too many dimensions", 1, H("<f4", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), -1, 4, QV_ERR_SHAPE,
     "more than 8 dimensions"},
    {"element count overflow", 1, H("<f4", "False", "(4294967296, 4294967296)"), -1, 0, QV_ERR_SHAPE,
     "overflows 64 bits"},
    {"count overflow beside a zero", 1, H("<f4", "False", "(0, 4294967296, 4294967296)"), -1, 0, QV_ERR_SHAPE,
     "overflows 64 bits"},
    {"byte size overflow", 1, H("<f8", "False", "(4611686018427387904,)"), -1, 0, QV_ERR_SHAPE,
     "overflow the address space"},
    {"dimension overflow", 1, H("<f4", "False", "(99999999999999999999,)"), -1, 0, QV_ERR_SHAPE,
     "overflows 64 bits"},
    {"unknown dtype", 1, H("<f16", "False", "(3,)"), -1, 48, QV_ERR_DTYPE, "'<f16' is not supported"},
    {"object dtype", 1, H("|O", "False", "(3,)"), -1, 24, QV_ERR_DTYPE, "'|O' is not supported"},
    {"no byte order", 1, H("|f4", "False", "(3,)"), -1, 12, QV_ERR_FORMAT, "little-endian"},
    {"big-endian", 1, H(">i4", "False", "(3,)"), -1, 12, QV_ERR_UNSUPPORTED, "big-endian"},
    {"fortran order", 1, H("<f4", "True", "(2, 3)"), -1, 24, QV_ERR_UNSUPPORTED, "Fortran"},
    {"bad fortran_order", 1, H("<f4", "maybe", "(3,)"), -1, 12, QV_ERR_FORMAT, "True or False"},
    {"shape not a tuple", 1, H("<f4", "False", "(3)"), -1, 12, QV_ERR_FORMAT, "not a tuple"},
    {"shape is a list", 1, H("<f4", "False", "[3]"), -1, 12, QV_ERR_FORMAT, "not a list"},
    {"garbage in shape", 1, H("<f4", "False", "(3, x)"), -1, 12, QV_ERR_FORMAT, "dimension"},
    {"unterminated dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)  \n", -1, 12, QV_ERR_FORMAT,
     "',' or '}'"},
    {"unterminated string", 1, "{'descr: '<f4', 'fortran_order': False, 'shape': (3,), }\n", -1, 12,
     QV_ERR_FORMAT, "unexpected key"},
    {"string runs to the end", 1, "{'descr", -1, 0, QV_ERR_FORMAT, "unterminated string"},
    {"garbage header", 1, "hello, world\n", -1, 0, QV_ERR_FORMAT, "'{'"},
    {"empty header", 1, "", -1, 0, QV_ERR_FORMAT, "'{'"},
    {"missing key", 1, "{'descr': '<f4', 'shape': (3,), }\n", -1, 12, QV_ERR_FORMAT, "missing key 'fortran_order'"},
    {"duplicate key", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", -1, 12,
     QV_ERR_FORMAT, "duplicate key 'descr'"},
    {"unexpected key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}\n", -1, 12,
     QV_ERR_FORMAT, "unexpected key 'x'"},
    {"text after the dict", 1, H("<f4", "False", "(3,)") "junk", -1, 12, QV_ERR_FORMAT, "after the header dict"},
    {"escape in a string", 1, "{'descr': '<f\\4', 'fortran_order': False, 'shape': (3,), }\n", -1, 12,
     QV_ERR_FORMAT, "unexpected byte 0x5c"},
    {"bool out of range", 1, H("|b1", "False", "(12,)"), -1, 12, QV_ERR_RANGE, "only 0 and 1"},
};
#define N_BAD ((int)(sizeof bad_cases / sizeof bad_cases[0]))

START_TEST(test_malformed)
{
    const bad_case *c = &bad_cases[_i];
    size_t cap = 4096;
    unsigned char *buf = malloc(cap);
    size_t len = build_npy(buf, c->major, c->header, c->hlen, c->data);
    /* An exact-size copy, so ASan sees any read past the end. */
    unsigned char *exact = malloc(len);
    memcpy(exact, buf, len);
    qv_array a;
    qv_status st = qv_npy_parse(exact, len, &a);
    printf("%-32s %s\n", c->what, qv_errmsg());
    fixture_assert_refused(st, c->st, c->needle, c->what);
    ck_assert_ptr_null(a.data);
    free(exact);
    free(buf);
}
END_TEST

START_TEST(test_bad_preamble)
{
    unsigned char buf[256];
    qv_array a;
    size_t len = build_npy(buf, 1, H("<f4", "False", "(3,)"), -1, 12);
    ck_assert_int_eq(qv_npy_parse(buf, 0, &a), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "bad magic"));
    ck_assert_int_eq(qv_npy_parse("PK\x03\x04", 4, &a), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "bad magic"));
    ck_assert_int_eq(qv_npy_parse(buf, 9, &a), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "truncated file"));
    buf[6] = 4;
    ck_assert_int_eq(qv_npy_parse(buf, len, &a), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "version 4.0"));
    buf[6] = 1;
    buf[7] = 1;
    ck_assert_int_eq(qv_npy_parse(buf, len, &a), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "version 1.1"));
    buf[7] = 0;
    ck_assert_int_eq(qv_npy_parse(buf, len, &a), QV_OK);
    qv_array_destroy(&a);
    /* Version 2.0 needs a 4-byte length: 11 bytes are not enough. */
    len = build_npy(buf, 2, H("<f4", "False", "(3,)"), -1, 12);
    ck_assert_int_eq(qv_npy_parse(buf, 11, &a), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "truncated"));
    ck_assert_int_eq(qv_npy_parse(buf, len, &a), QV_OK);
    qv_array_destroy(&a);
}
END_TEST

/* Every proper prefix of a valid file is refused (never read past its end). */
/* qv_npy_parse as fixture_assert_prefixes_refused calls it. */
static qv_status parse_npy(const void *buf, size_t len)
{
    qv_array a;
    const qv_status st = qv_npy_parse(buf, len, &a);
    if (st == QV_OK) qv_array_destroy(&a);
    return st;
}

START_TEST(test_every_truncation)
{
    fixture_assert_prefixes_refused(FIXTURES "f8_2x3x1x2.npy", parse_npy);
}
END_TEST

/* Any single corrupted header byte gives a status, never a crash. */
START_TEST(test_every_header_byte)
{
    void *raw;
    size_t len;
    ck_assert(qv_file_read(FIXTURES "i4_1x2x3x4.npy", &raw, &len) == QV_OK);
    unsigned char *b = raw;
    static const unsigned char subst[] = {0x00, 0xFF, '(', ')', ',', '\'', '-', '9', '{', '}', ' '};
    int refused = 0, total = 0;
    for (size_t pos = 0; pos < len - 96; pos++)
        for (size_t s = 0; s < sizeof subst; s++) {
            unsigned char keep = b[pos];
            if (keep == subst[s]) continue;
            b[pos] = subst[s];
            qv_array a;
            qv_status st = qv_npy_parse(b, len, &a);
            refused += st != QV_OK;
            total++;
            if (st == QV_OK) qv_array_destroy(&a);
            b[pos] = keep;
        }
    printf("header corruptions: %d of %d refused\n", refused, total);
    ck_assert_int_gt(refused, total / 2);
    free(raw);
}
END_TEST

START_TEST(test_io_errors)
{
    qv_array a;
    ck_assert_int_eq(qv_npy_load("tests/data/npy/does-not-exist.npy", &a), QV_ERR_IO);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "does-not-exist.npy"));
    ck_assert_int_eq(qv_npy_load("tests/data/npy", &a), QV_ERR_IO);
    int64_t shape[1] = {3};
    ck_assert(qv_array_create(&a, QV_DT_F4, 1, shape) == QV_OK);
    ck_assert_int_eq(qv_npy_save("/nonexistent-folder/x.npy", &a), QV_ERR_IO);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "/nonexistent-folder/x.npy"));
    /* Overwriting replaces the file whole and leaves no temporary behind. */
    make_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/over.npy", tmpdir);
    ck_assert(qv_npy_save(path, &a) == QV_OK);
    ((float *)a.data)[1] = 2.5f;
    ck_assert(qv_npy_save(path, &a) == QV_OK);
    qv_array b;
    ck_assert(qv_npy_load(path, &b) == QV_OK);
    ck_assert(((float *)b.data)[1] == 2.5f);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 0777, 0644);
    int entries = 0;
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while ((e = readdir(d))) entries += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(entries, 1);
    qv_array_destroy(&b);
    qv_array_destroy(&a);
    remove_tmpdir();
}
END_TEST

/* ---- the published golden vectors ---- */

/* The dtype a golden file's name announces (README: "_int8", "_f16", ...). */
static qv_dtype golden_dtype(const char *name)
{
    static const struct {
        const char *suffix;
        qv_dtype dt;
    } map[] = {{"_int32.npy", QV_DT_I4}, {"_int8.npy", QV_DT_I1}, {"_uint4.npy", QV_DT_I1},
               {"_int4.npy", QV_DT_I1},  {"_f16.npy", QV_DT_F2},  {"_f32.npy", QV_DT_F4}};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t k = strlen(map[i].suffix);
        if (n >= k && !strcmp(name + n - k, map[i].suffix)) return map[i].dt;
    }
    return QV_DT_INVALID;
}

START_TEST(test_golden)
{
    const char *root = golden_root();
    DIR *top = opendir(root);
    ck_assert_msg(top != NULL, "golden folder %s not found (run from the repository root, or set QVET_GOLDEN)",
                  root);
    make_tmpdir();
    int files = 0;
    struct dirent *c;
    while ((c = readdir(top))) {
        if (c->d_name[0] == '.') continue;
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", root, c->d_name);
        DIR *sub = opendir(dir);
        if (!sub) continue;
        struct dirent *e;
        while ((e = readdir(sub))) {
            size_t n = strlen(e->d_name);
            if (n < 4 || strcmp(e->d_name + n - 4, ".npy")) continue;
            char path[1024], out[600];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            qv_array a;
            ck_assert_msg(qv_npy_load(path, &a) == QV_OK, "%s: %s", path, qv_errmsg());
            qv_dtype want = golden_dtype(e->d_name);
            ck_assert_msg(want != QV_DT_INVALID, "%s: name announces no known dtype", path);
            ck_assert_msg(a.dtype == want, "%s: read as %s", path, qv_dtype_name(a.dtype));
            ck_assert_msg(a.ndim == 2 && a.count > 0, "%s: not a non-empty matrix", path);
            snprintf(out, sizeof out, "%s/golden.npy", tmpdir);
            ck_assert_msg(qv_npy_save(out, &a) == QV_OK, "%s", qv_errmsg());
            assert_same_bytes(path, out);
            qv_array_destroy(&a);
            files++;
        }
        closedir(sub);
    }
    closedir(top);
    remove_tmpdir();
    printf("golden: %d .npy files read and re-saved byte for byte\n", files);
    ck_assert_int_ge(files, 40);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_fixture, 0, N_FIXTURES);
    tcase_add_test(tc, test_versions_2_and_3);
    tcase_add_test(tc, test_bool_reads_as_u1);
    tcase_add_loop_test(tc, test_refused_files, 0, (int)(sizeof refused_files / sizeof refused_files[0]));
    tcase_add_loop_test(tc, test_roundtrip, 0, (QV_DT_COUNT - QV_DT_I1) * 5);
    tcase_add_test(tc, test_describe);
    tcase_add_loop_test(tc, test_malformed, 0, N_BAD);
    tcase_add_test(tc, test_bad_preamble);
    tcase_add_test(tc, test_every_truncation);
    tcase_add_test(tc, test_every_header_byte);
    tcase_add_test(tc, test_io_errors);
    tcase_add_test(tc, test_golden);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
