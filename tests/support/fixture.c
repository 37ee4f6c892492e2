/* fixture.c: fixture.h. */
#include "support/fixture.h"

#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/rand.h"

/* The formula: a signed value s and an unsigned value u per element index. */
static int64_t s_of(int64_t i) { return (i * 37 + 11) % 255 - 127; }
static uint64_t u_of(int64_t i) { return (uint64_t)((i * 37 + 11) % 256); }

/* Byte-repetition multiplier: the value s or u repeated in every byte lane. */
static const uint64_t rep8 = 0x0101010101010101ull;

/* IEEE binary16 decoded by hand (independent of the library's converters). */
static double f16_value(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return sign ? -v : v;
}

int fixture_element_ok(const qv_array *a, int64_t i)
{
    const void *d = a->data;
    int64_t s = s_of(i);
    uint64_t u = u_of(i);
    switch (a->dtype) {
    case QV_DT_I1: return ((const int8_t *)d)[i] == s;
    case QV_DT_I2: return ((const int16_t *)d)[i] == s * 0x0101;
    case QV_DT_I4: return ((const int32_t *)d)[i] == s * 0x01010101;
    case QV_DT_I8: return ((const int64_t *)d)[i] == s * (int64_t)rep8;
    case QV_DT_U1: return ((const uint8_t *)d)[i] == u;
    case QV_DT_U2: return ((const uint16_t *)d)[i] == u * 0x0101;
    case QV_DT_U4: return ((const uint32_t *)d)[i] == u * 0x01010101u;
    case QV_DT_U8: return ((const uint64_t *)d)[i] == u * rep8;
    case QV_DT_F2: return f16_value(((const uint16_t *)d)[i]) == (double)s / 8;
    case QV_DT_F4: return ((const float *)d)[i] == (double)s / 8;
    case QV_DT_F8: return ((const double *)d)[i] == (double)s / 8;
    default: return 0;
    }
}

void fixture_assert_array(const qv_array *a, const fixture_spec *x, const char *what)
{
    ck_assert_msg(a->dtype == x->dtype, "%s: dtype %s, expected %s", what, qv_dtype_name(a->dtype),
                  qv_dtype_name(x->dtype));
    ck_assert_int_eq(a->ndim, x->ndim);
    int64_t count = 1;
    for (int d = 0; d < x->ndim; d++) {
        ck_assert_int_eq(a->shape[d], x->shape[d]);
        count *= x->shape[d];
    }
    ck_assert_int_eq(a->count, count);
    ck_assert_uint_eq(a->nbytes, (size_t)count * qv_dtype_size(x->dtype));
    for (int64_t i = 0; i < count; i++)
        ck_assert_msg(fixture_element_ok(a, i), "%s: element %" PRId64 " differs from the formula", what, i);
}

void fixture_fill_random(qv_array *a, uint64_t seed, uint64_t stream)
{
    for (size_t k = 0; k < a->nbytes; k++) ((unsigned char *)a->data)[k] = (unsigned char)test_rnd(seed, stream, k);
}

void fixture_assert_prefixes_refused(const char *path, qv_status (*parse)(const void *buf, size_t len))
{
    void *raw;
    size_t len;
    ck_assert_msg(qv_file_read(path, &raw, &len) == QV_OK, "%s: %s", path, qv_errmsg());
    for (size_t n = 0; n < len; n++) {
        unsigned char *cut = malloc(n ? n : 1);
        ck_assert_ptr_nonnull(cut);
        memcpy(cut, raw, n);
        const qv_status st = parse(cut, n);
        ck_assert_msg(st == QV_ERR_FORMAT, "%s: prefix of %zu bytes: status %s", path, n, qv_status_str(st));
        ck_assert_msg(qv_errmsg()[0], "%s: prefix of %zu bytes: no message", path, n);
        free(cut);
    }
    ck_assert_msg(parse(raw, len) == QV_OK, "%s: %s", path, qv_errmsg());
    free(raw);
}

void fixture_assert_refused(qv_status got, qv_status want, const char *needle, const char *what)
{
    ck_assert_msg(got == want, "%s: status %s, expected %s (%s)", what, qv_status_str(got), qv_status_str(want),
                  qv_errmsg());
    ck_assert_msg(strstr(qv_errmsg(), needle), "%s: message \"%s\" lacks \"%s\"", what, qv_errmsg(), needle);
}
