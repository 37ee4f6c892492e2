/* t_gpu_fp4.c: the FP4 dequantization of the weight-only kernels, every scale
 * byte and every e2m1 code (GPU; prints "SKIP: no CUDA device" and runs only
 * the CPU-side expectations where there is none).
 *
 * kernels/wonly_common.cuh makes each FP4 weight from its e2m1 code and its
 * packed block-scale byte in registers, in two forms (one scale per register,
 * or the small-M kernel's two per register) and, for MXFP4, a one-multiply
 * form the kernels take only where a stage's codes are all at most 127. The
 * GPU probes reach a few of the 256 bytes (fp4-scale-ends: 1, 2, 104, 141,
 * 142, 253, 254, and the ordinary 2^-4..1); here qv_wo_fp4_dequant_table
 * runs the same helpers on every byte and code, at each of the eight nibbles
 * of a packed word (the other seven hold another code), and every result
 * must be the exact product rounded once to the activation format
 * (qv_encode, MPFR), as the rows declare (layout.h):
 *   MXFP4: rn(x 2^(c-127)) for the e8m0 codes 1..254 the packer lets through
 *     (1..127 in the one-multiply form);
 *   NVFP4: rn(x 2^-bias s) with s the S0E5M3 byte read as the layout says (f16
 *     bits 14..7; for bf16 widened, bit 7 to the top exponent bit), bias 14
 *     (f16) or 126 (bf16), the power the global scale carries back; f16 bytes
 *     whose f16 form is not finite and bf16 bytes below 0x80 but 0, which the
 *     packer never writes, are left out. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal/wonly_fp4.h"
#include "qvet/formats.h"
#include "support/gpu.h"

static uint64_t g_seed = 20261205; /* unused by the cases; gpu_suite_start reads QVET_SEED */

/* (nv, bf16, form): NVFP4 has no one-multiply form. */
static const struct fp4_case {
    int nv, bf16;
    qv_fp4_form form;
} kCases[] = {
    {0, 0, QV_FP4_FORM_REG},  {0, 0, QV_FP4_FORM_REG_FAST},  {0, 0, QV_FP4_FORM_PAIR},  {0, 0, QV_FP4_FORM_PAIR_FAST},
    {0, 1, QV_FP4_FORM_REG},  {0, 1, QV_FP4_FORM_REG_FAST},  {0, 1, QV_FP4_FORM_PAIR},  {0, 1, QV_FP4_FORM_PAIR_FAST},
    {1, 0, QV_FP4_FORM_REG},  {1, 0, QV_FP4_FORM_PAIR},      {1, 1, QV_FP4_FORM_REG},   {1, 1, QV_FP4_FORM_PAIR},
};
#define N_CASES ((int)(sizeof kCases / sizeof kCases[0]))

static int fast(qv_fp4_form f) { return f == QV_FP4_FORM_REG_FAST || f == QV_FP4_FORM_PAIR_FAST; }

/* Whether scale byte c is one the packer writes for the case's row (and the
 * form takes). */
static int byte_applies(const struct fp4_case *k, unsigned c)
{
    if (!k->nv) return c >= 1 && c <= (fast(k->form) ? 127u : 254u);
    if (!k->bf16) return (c << 7) < 0x7C00u;
    return c == 0 || (c & 0x80u);
}

/* The weight the row declares for e2m1 code x and scale byte c, as an f16
 * or bf16 code: the exact product (a double holds it) rounded once. */
static uint16_t expected(const struct fp4_case *k, unsigned c, unsigned x)
{
    const qv_fmt out = k->bf16 ? QV_FMT_BF16 : QV_FMT_F16;
    const double w = qv_decode(QV_FMT_E2M1, x);
    double s;
    if (!k->nv)
        s = qv_decode(QV_FMT_E8M0, c);
    else if (!k->bf16)
        s = ldexp(qv_decode(QV_FMT_F16, c << 7), -14);
    else
        s = ldexp(qv_decode(QV_FMT_BF16, ((c & 0x80u) << 7) | ((c & 0x7Fu) << 4)), -126);
    return (uint16_t)qv_encode(out, w * s, QV_SAT_NONE);
}

/* CPU: the expectations at hand-derived points. */
START_TEST(expectations)
{
    const struct fp4_case mx16 = {0, 0, QV_FP4_FORM_REG}, mx_bf = {0, 1, QV_FP4_FORM_REG};
    const struct fp4_case nv16 = {1, 0, QV_FP4_FORM_REG}, nv_bf = {1, 1, QV_FP4_FORM_REG};
    ck_assert_uint_eq(expected(&mx16, 127, 0x1), 0x3800); /* 0.5 */
    ck_assert_uint_eq(expected(&mx16, 127, 0xF), 0xC600); /* -6 */
    ck_assert_uint_eq(expected(&mx16, 128, 0x7), 0x4A00); /* 6 x 2 = 12 */
    ck_assert_uint_eq(expected(&mx16, 144, 0x1), 0x7C00); /* 0.5 x 2^17: past 65504 */
    ck_assert_uint_eq(expected(&mx16, 143, 0x1), 0x7800); /* 0.5 x 2^16 = 2^15 */
    ck_assert_uint_eq(expected(&mx16, 98, 0x7), 0x0000);  /* 6 x 2^-29: below half of 2^-24 */
    ck_assert_uint_eq(expected(&mx16, 104, 0x9), 0x8001); /* -0.5 x 2^-23 = -2^-24 */
    ck_assert_uint_eq(expected(&mx16, 103, 0x9), 0x8000); /* -2^-25: the tie goes to -0 */
    ck_assert_uint_eq(expected(&mx16, 200, 0x8), 0x8000); /* -0 stays -0 */
    ck_assert_uint_eq(expected(&mx_bf, 1, 0x1), 0x0040);  /* 0.5 x 2^-126: a bf16 subnormal */
    ck_assert_uint_eq(expected(&mx_bf, 254, 0x7), 0x7F80); /* 6 x 2^127: Inf */
    ck_assert_uint_eq(expected(&nv16, 0x78, 0x2), 0x0400); /* 1 x 2^-14 x 1.0 */
    ck_assert_uint_eq(expected(&nv_bf, 0x80, 0x2), 0x0100); /* 1 x 2^-126 x 2^1 (0x4000) = 2^-125 */
    ck_assert(byte_applies(&mx16, 1) && !byte_applies(&mx16, 0) && !byte_applies(&mx16, 255));
    ck_assert(!byte_applies(&nv16, 0xF8) && byte_applies(&nv16, 0xF7));
    ck_assert(byte_applies(&nv_bf, 0) && !byte_applies(&nv_bf, 0x7F) && byte_applies(&nv_bf, 0x80));
}
END_TEST

/* GPU: every byte the case's row takes and every code, at every nibble of a
 * word (the table holds 0xFFFF where the eight disagree). */
START_TEST(table_on_device)
{
    const struct fp4_case *k = &kCases[_i];
    uint16_t *t = malloc(256 * 16 * 2 * sizeof *t);
    ck_assert(t != NULL);
    ck_assert_msg(qv_wo_fp4_dequant_table(k->nv, k->bf16, k->form, t) == QV_OK, "%s", qv_errmsg());
    int checked = 0, wrong = 0;
    for (unsigned c = 0; c < 256; c++) {
        if (!byte_applies(k, c)) continue;
        for (unsigned x = 0; x < 16; x++)
            for (unsigned h = 0; h < 2; h++) {
                const uint16_t want = expected(k, c, x), got = t[2 * (16 * c + x) + h];
                checked++;
                if (got != want && wrong++ < 8)
                    fprintf(stderr, "FAIL %s %s form %d: byte %u code 0x%X half %u: 0x%04X, declared 0x%04X\n",
                            k->nv ? "NVFP4" : "MXFP4", k->bf16 ? "bf16" : "f16", (int)k->form, c, x, h, got, want);
            }
    }
    free(t);
    ck_assert_msg(wrong == 0, "%d of %d weights differ from the declared product", wrong, checked);
    ck_assert_int_ge(checked, 16 * 2 * 127);
}
END_TEST

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_fp4", gpu, g_seed, N_CASES, &tc);
    tcase_add_test(tc, expectations);
    if (gpu) tcase_add_loop_test(tc, table_on_device, 0, N_CASES);
    return gpu_suite_run(s);
}
