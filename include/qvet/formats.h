/* formats.h: exact element formats shared by the CPU reference and the kernels.
 * Included by reference/, src/, kernels/ (as plain C99 for nvcc too) and tests.
 * Rule: every conversion is exact or correctly rounded (RNE) from the real
 * value; saturation is a parameter, never a silent choice. Codes are stored as
 * their bit patterns (uint16_t for fp16/bf16, uint8_t for 8-bit formats). */
#ifndef QVET_FORMATS_H
#define QVET_FORMATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element formats. Integer formats name the *stored* code: QV_FMT_U4 ("u4b8")
 * is a 4-bit code 0..15 whose value is q-8 (symmetric int4 stored as q+8),
 * QV_FMT_U8 ("u8b128") is 0..255 with value q-128; QV_FMT_UINT4 ("u4") and
 * QV_FMT_UINT8 ("u8") are unsigned codes whose value is the code itself. */
typedef enum qv_fmt {
    QV_FMT_NONE = 0,
    QV_FMT_F32,
    QV_FMT_F16,
    QV_FMT_BF16,
    QV_FMT_E4M3,   /* OCP fp8 e4m3fn: bias 7, max 448, NaN 0x7F/0xFF, no Inf */
    QV_FMT_E5M2,   /* OCP fp8 e5m2: bias 15, max 57344, has Inf */
    QV_FMT_E2M1,   /* fp4: {0, .5, 1, 1.5, 2, 3, 4, 6} with sign */
    QV_FMT_E8M0,   /* MX scale: 2^(code-127), code 0xFF = NaN */
    QV_FMT_UE4M3,  /* NVFP4 block scale: unsigned e4m3 (sign bit must be 0) */
    QV_FMT_I4,     /* signed int4, two's complement code in the low nibble */
    QV_FMT_U4,     /* offset int4: code 0..15, value code-8 */
    QV_FMT_I8,     /* signed int8 */
    QV_FMT_U8,     /* offset int8: code 0..255, value code-128 */
    QV_FMT_UINT4,  /* unsigned int4: code 0..15, value code (zero points subtract from it) */
    QV_FMT_UINT8,  /* unsigned int8: code 0..255, value code */
    QV_FMT_I32,
    QV_FMT_COUNT
} qv_fmt;

/* What happens to a value whose rounded magnitude is beyond the largest finite
 * code (overflow is judged after RNE with an unbounded exponent, as IEEE 754
 * does: 464 -> 448 but 465 overflows in e4m3). +-Inf inputs count as overflow,
 * as in PTX cvt .satfinite. */
typedef enum qv_sat {
    QV_SAT_NONE = 0, /* overflow gives +-Inf, or the canonical NaN in formats without Inf */
    QV_SAT_FINITE    /* overflow clamps to +-max finite; NaN stays NaN */
} qv_sat;

/* Static description of a format, one row per qv_fmt (designated initializers
 * in reference/formats.c). For integer formats exp_bits = man_bits = 0. */
typedef struct qv_fmt_info {
    const char *name;   /* "f16", "e4m3", "u4b8", ... (the spec grammar's names, docs/design.md §2) */
    int bits;           /* storage bits: 4, 8, 16, 32 */
    int exp_bits, man_bits, bias;
    int has_inf, has_nan;
    int is_signed;      /* values can be negative (u4b8, u8b128: yes; u4, u8, e8m0, ue4m3: no) */
    int is_float;
    double max_finite;  /* largest finite value (integer formats: largest value) */
    double min_value;   /* smallest value (e.g. -448, -8, 0) */
} qv_fmt_info;

/* The row of f. QV_FMT_NONE has a row too (name "none", every field 0) so that
 * messages can name any operand's format; the codecs below reject it. */
const qv_fmt_info *qv_fmt_get(qv_fmt f);
/* Storage bits of one weight code that a packed layout holds: 4, 8 or 16 for
 * the formats the spec grammar allows as weights (w=), 0 for any other. */
int qv_fmt_code_bits(qv_fmt f);
/* Looks a format up by its name ("f16", "bf16", "e4m3", ...); QV_FMT_NONE if unknown. */
qv_fmt qv_fmt_from_name(const char *name);

/* Exact decoding: every code of every format is a double exactly (NaN and +-Inf
 * included). Integer formats give their value (u4b8: code-8, u8b128: code-128,
 * u4 and u8: the code). Only
 * the low `bits` bits of `code` are read. ue4m3 codes 0x80..0xFF (sign bit set)
 * are not ue4m3 codes and decode as NaN; e8m0 code 0 is 2^-127 (no zero). */
double qv_decode(qv_fmt f, uint32_t code);

/* Correctly rounded encoding (round to nearest, ties to even) of a real value
 * given as a double, then saturation per `sat`. NaN gives the format's canonical
 * NaN (0x7FC00000 f32, 0x7E00 f16, 0x7FC0 bf16, 0x7F e4m3 and ue4m3, 0x7E e5m2,
 * 0xFF e8m0), whatever its sign or payload; so does a non-saturated overflow in
 * a format without Inf. Formats without NaN (e2m1, integers) saturate NaN to 0
 * and clamp out-of-range values whatever `sat` says. Integer formats round RNE
 * to the nearest integer and clamp to their range.
 * Unsigned scale formats: a value that rounds below the smallest code (a
 * negative nonzero for ue4m3; zero, a negative or at most 2^-128 for e8m0)
 * gives the smallest code with QV_SAT_FINITE and NaN with QV_SAT_NONE. e8m0
 * rounds to the nearest power of two; 1.5*2^e, the tie, goes to 2^(e+1) (RNE
 * with a 1-bit significand, as MPFR rounds at precision 1). */
uint32_t qv_encode(qv_fmt f, double x, qv_sat sat);

/* Fast exact paths for the common 16-bit formats (used in hot loops): integer
 * bit manipulation, independent of the FPU rounding mode and of _Float16. The
 * widening ones keep NaN payloads; the narrowing ones give the canonical NaN and
 * equal qv_encode(.., QV_SAT_NONE) on every input. */
float    qv_f16_to_f32(uint16_t h);
uint16_t qv_f32_to_f16(float x);           /* RNE, overflow to Inf */
float    qv_bf16_to_f32(uint16_t h);
uint16_t qv_f32_to_bf16(float x);          /* RNE, overflow to Inf */
uint16_t qv_f64_to_f16(double x);          /* RNE directly from double (no double rounding) */
uint16_t qv_f64_to_bf16(double x);         /* RNE directly from double (no double rounding) */

/* One unit in the last place of the format at |x| (the spacing of codes around
 * x; for subnormals the subnormal spacing). Used for ULP statistics. It is the
 * gap from the code at or below |x| to the next code up; beyond max (and for
 * +-Inf) the top binade's spacing; NaN for NaN; 1 for integer formats. */
double qv_ulp(qv_fmt f, double x);

/* x truncated toward zero to `bits` significant bits (1..53): what an
 * accumulator that keeps `bits` bits and drops the rest does (the fp8
 * tensor-core sums of docs/design.md §3). Exact; 0, Inf and NaN unchanged. */
double qv_trunc_bits(double x, int bits);

#ifdef __cplusplus
}
#endif
#endif
