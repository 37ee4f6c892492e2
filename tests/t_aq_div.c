/* t_aq_div.c: the arithmetic identity the activation quantizer
 * (kernels/act_quant.cu) relies on, on the CPU with the same IEEE binary32
 * operations the kernel issues (RN multiply, fma, reciprocal):
 *   q = RN(v * inv), r = fma(-q, s, v), RN(q + r * inv) (q itself when v == 0),
 *   with inv = RN(1 / s), s = RN(amax / 127) or RN(amax / 448), s >= 2^-90,
 * must give the int8 code rne(v / s) and the e4m3 code of v / s for every
 * input value |v| <= amax of fp16 and bf16. The quotient itself must equal
 * v / s bit for bit, except where the residual underflows, and there only at
 * |v / s| < 2^-20 with the sign of v / s (then both codes are zeros of that
 * sign). Every amax of a stride through the format's positive finite codes,
 * plus the 64 smallest and 64 largest, against every value: about 10^8 pairs
 * per case. The full sweep over every amax (about 10^9 pairs per case) was run
 * once; the GPU suite t_gpu_aq checks the kernel's codes against v / s itself. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qvet/formats.h"

#include "support/suite.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Every 16-bit code's value, decoded once per case. */
static float values[0x10000];

/* The kernel's division by s through inv (act_quant.cu aq_quot, fast path). */
static float quot(float v, float s, float inv)
{
    const float q = v * inv;
    const float r = fmaf(-q, s, v);
    return v == 0.0f ? q : fmaf(r, inv, q);
}

static uint8_t code(qv_fmt qfmt, float r)
{
    if (qfmt == QV_FMT_E4M3) return (uint8_t)qv_encode(QV_FMT_E4M3, (double)r, QV_SAT_FINITE);
    return (uint8_t)(int8_t)fmaxf(-128.0f, fminf(127.0f, rintf(r)));
}

struct div_case {
    qv_fmt xfmt, qfmt;
    uint32_t max_code; /* largest positive finite code of xfmt */
};
static const struct div_case div_cases[] = {
    {QV_FMT_F16, QV_FMT_I8, 0x7bff},
    {QV_FMT_F16, QV_FMT_E4M3, 0x7bff},
    {QV_FMT_BF16, QV_FMT_I8, 0x7f7f},
    {QV_FMT_BF16, QV_FMT_E4M3, 0x7f7f},
};

START_TEST(division_identity)
{
    const struct div_case *c = &div_cases[_i];
    /* 127 = int8 max magnitude, 448 = e4m3 max finite: the quantizer's divisors. */
    const float divisor = c->qfmt == QV_FMT_E4M3 ? 448.0f : 127.0f;
    /* A stride prime to the code space's structure, so that every exponent
     * and many mantissas are sampled. */
    const uint32_t stride = 13;
    for (uint32_t x = 0; x < 0x10000u; x++) values[x] = (float)qv_decode(c->xfmt, x);
    int64_t pairs = 0, quot_diff = 0, code_diff = 0;
    float worst = 0.0f;
    for (uint32_t a = 1; a <= c->max_code; a += (a < 64 || a > c->max_code - 64) ? 1 : stride) {
        const float amax = values[a], s = amax / divisor;
        if (!(s >= 0x1p-90f)) continue; /* those rows divide exactly (__fdiv_rn) */
        const float inv = 1.0f / s;
        for (uint32_t x = 0; x < 0x10000u; x++) {
            const float v = values[x];
            if (!(fabsf(v) <= amax)) continue;
            const float want = v / s, got = quot(v, s, inv);
            pairs++;
            if (bits(want) == bits(got)) continue;
            quot_diff++;
            worst = fmaxf(worst, fabsf(want));
            if (code(c->qfmt, want) != code(c->qfmt, got) && code_diff++ < 5)
                fprintf(stderr, "case %d: amax %a v %a: v/s %a, kernel %a: codes 0x%02x 0x%02x\n", _i, amax, v,
                        want, got, code(c->qfmt, want), code(c->qfmt, got));
            ck_assert_msg(signbit(want) == signbit(got), "case %d: amax %a v %a: sign of %a vs %a", _i, amax, v, want,
                          got);
        }
    }
    printf("division identity case %d: %lld pairs, %lld quotients differ (all below %a), %lld codes differ\n", _i,
           (long long)pairs, (long long)quot_diff, worst, (long long)code_diff);
    ck_assert_int_eq(code_diff, 0);
    ck_assert_msg(worst < 0x1p-20f, "case %d: a quotient of %a differs from v / s", _i, worst);
    if (c->xfmt == QV_FMT_F16) ck_assert_int_eq(quot_diff, 0); /* fp16 values never underflow the residual */
    ck_assert(pairs > 50000000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("aq_div");
    TCase *tc = tcase_create("identity");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, division_identity, 0, (int)(sizeof div_cases / sizeof div_cases[0]));
    suite_add_tcase(s, tc);
    return suite_run(s);
}
