/* t_spec.c: the spec grammar (spec.h, docs/design.md §2) and the reference on the
 * arithmetic only a spec can declare.
 *   - every registry row's canonical spec parses back to the row's arithmetic;
 *   - specs written in any key order, with defaults spelled out or not, are one
 *     interned variant; each refusal names the key and the reason;
 *   - the exact value y of the declared math, computed here independently with
 *     MPFR from problem.h's accessors and the format codec (float zero points,
 *     both dequantization roundings, every scale format, second-level scales,
 *     a bias before or after the scales, int32 outputs, sums scaled per
 *     segment), equals the reference's y and y_rn on every element;
 *   - the CPU model passes the verdict on random data and matches the unique
 *     output bit for bit on the exact, one-hot and witness probes;
 *   - the fp8 bound follows the promotion blocks: the promoted accumulator's
 *     output of docs/design.md §3's witness (exact - 127) passes acc=f8p128 while fast
 *     accumulation's (65536) fails it at K = 1024 and 8192 and passes f8fast;
 *   - the bias witness fails a bias added after the output cast, or dropped;
 *   - dq=f32 holds its second-level scale in the dequantization and none in
 *     the epilogue, and an NVFP4 GEMM computed here as torchao's emulation
 *     does (fp32 scale product and scaled value, one bf16 rounding, an fp32
 *     sum) passes it and equals the CPU model bit for bit, while the spec
 *     with the global scale in the epilogue fails it.
 * Seeds: QVET_SEED (default 1). */
#include <check.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "qvet/spec.h"
#include "support/cases.h"
#include "support/rand.h"
#include "support/suite.h"

static uint64_t mix(uint64_t a, uint64_t b) { return case_mix(a, b, 0x5DEECE66Dull); }

static const qv_variant *spec(const char *text)
{
    const qv_variant *v = NULL;
    qv_status st = qv_spec_parse(text, &v);
    ck_assert_msg(st == QV_OK, "spec '%s' refused: %s", text, qv_errmsg());
    return v;
}

/* ---- the grammar ------------------------------------------------------------ */

/* Registry fields that spell the same arithmetic two ways. */
static qv_dequant dq_of(const qv_variant *v)
{
    return v->arith.dequant == QV_DQ_NONE ? QV_DQ_EXACT : v->arith.dequant;
}
static qv_fmt w_of(const qv_variant *v)
{
    if (v->zero_point == QV_ZP_INT && v->wfmt == QV_FMT_U4) return QV_FMT_UINT4;
    if (v->zero_point == QV_ZP_INT && v->wfmt == QV_FMT_U8) return QV_FMT_UINT8;
    return v->wfmt;
}
static qv_scale_layout sl_of(const qv_variant *v)
{
    return v->scale_layout == QV_SCALE_GROUP_CHANNEL ? QV_SCALE_GROUP : v->scale_layout;
}

START_TEST(rows_round_trip)
{
    const qv_variant *r = qv_registry_get(_i);
    char text[QV_SPEC_MAX];
    ck_assert_msg(qv_spec_format(r, text, sizeof text) > 0, "%s: %s", r->name, text);
    const qv_variant *v = spec(text);
    ck_assert_ptr_ne(v, r);
    const qv_arith *a = &r->arith, *b = &v->arith;
    ck_assert_msg(w_of(v) == w_of(r) && v->afmt == r->afmt && v->ofmt == r->ofmt, "%s (%s): formats", r->name, text);
    ck_assert_msg(sl_of(v) == sl_of(r) && (r->scale_layout == QV_SCALE_NONE || v->sfmt == r->sfmt), "%s: ws", r->name);
    int grouped = sl_of(r) == QV_SCALE_GROUP;
    ck_assert_msg(!grouped || v->g == r->g, "%s: g %d vs %d", r->name, v->g, r->g);
    ck_assert_msg(v->s2_layout == r->s2_layout && v->s2fmt == r->s2fmt, "%s: ws2", r->name);
    ck_assert_msg(v->zero_point == r->zero_point && v->zp_layout == r->zp_layout && v->zp_g == r->zp_g,
                  "%s: zero points", r->name);
    ck_assert_msg(v->act_order == r->act_order && v->act_scale == r->act_scale && v->azp == r->azp &&
                      v->bias_fmt == r->bias_fmt,
                  "%s: act_order, activation scales and bias", r->name);
    ck_assert_msg(dq_of(v) == dq_of(r), "%s: dq %d vs %d", r->name, dq_of(v), dq_of(r));
    ck_assert_msg((b->w_mul > 1 ? b->w_mul : 1) == (a->w_mul > 1 ? a->w_mul : 1), "%s: wmul", r->name);
    ck_assert_msg(b->accum == a->accum && b->reduce == a->reduce && b->out_sat == a->out_sat, "%s: acc", r->name);
    if (a->accum == QV_ACC_TC_FP8)
        ck_assert_msg(b->promote_nc == a->promote_nc && b->acc_bits == a->acc_bits, "%s: fp8 promotion", r->name);
    if (a->accum == QV_ACC_TC_F32) ck_assert_int_eq(b->block_b, a->block_b);
    for (int s = 0; s < QV_EP_MAX; s++) {
        ck_assert_msg(a->epilogue[s] == b->epilogue[s], "%s: epilogue step %d: %d vs %d", r->name, s,
                      a->epilogue[s], b->epilogue[s]);
        if (a->epilogue[s] == QV_EP_END) break;
    }
    ck_assert_int_eq(qv_spec_segment(v), qv_spec_segment(r));
    /* and the canonical form is a fixed point */
    char again[QV_SPEC_MAX];
    ck_assert_int_gt(qv_spec_format(v, again, sizeof again), 0);
    ck_assert_str_eq(again, text);
}
END_TEST

/* Specs a user writes and their canonical forms, derived by hand from the
 * grammar: keys in order, defaults dropped. */
static const struct {
    const char *in, *canonical;
} canon[] = {
    {"ws=f16/g128,w=u4b8,a=f16,acc=f32,red=f32,out=f16,dq=rn", "w=u4b8,ws=f16/g128"},
    {"out=bf16,a=bf16,w=u4b8,wz=float/g64,ws=bf16/g64", "w=u4b8,ws=bf16/g64,wz=float/g64,a=bf16"},
    {"w=i8,a=i8,acc=i32,out=i32,red=none", "w=i8,a=i8,acc=i32"},
    {"a=e4m3,w=e4m3,ws=f32/c,as=f32/tok,out=bf16,acc=f8p128,dq=exact", "w=e4m3,ws=f32/c,a=e4m3,as=f32/tok,acc=f8p128,out=bf16"},
    {"w=e2m1,ws=ue4m3/g16,ws2=f32/t,bias=none,wz=none", "w=e2m1,ws=ue4m3/g16,ws2=f32/t"},
    {"w=f16", "w=f16"},
    {"acc=f32", "w=f16"},
    {"w=i8,ws=f32/t,a=i8,as=f32/t,acc=i32,out=f16,ep=as:ws", "w=i8,ws=f32/t,a=i8,as=f32/t,acc=i32,out=f16"},
    {"w=i8,ws=f32/t,a=i8,as=f32/t,acc=i32,out=f16,ep=ws:as", "w=i8,ws=f32/t,a=i8,as=f32/t,acc=i32,ep=ws:as,out=f16"},
    {"dq=f32,a=bf16,ws2=f32/t,ws=ue4m3/g16,w=e2m1,out=bf16", "w=e2m1,ws=ue4m3/g16,ws2=f32/t,dq=f32,a=bf16"},
    {"w=u4,wz=int/g32,ws=f16/g32,dq=f32,bias=f32,ep=bias", "w=u4,ws=f16/g32,wz=int/g32,dq=f32,bias=f32"},
};

START_TEST(canonical_forms)
{
    const qv_variant *v = spec(canon[_i].in);
    ck_assert_str_eq(v->name, canon[_i].canonical);
    ck_assert_ptr_eq(spec(canon[_i].canonical), v);
    ck_assert_str_eq(v->family, "spec");
    ck_assert_int_eq(v->layout, QV_LAYOUT_LOGICAL);
    const qv_variant *w = NULL;
    ck_assert_int_eq(qv_variant_resolve(canon[_i].in, &w), QV_OK);
    ck_assert_ptr_eq(w, v);
}
END_TEST

/* Refusals: the message names the key (or the clash) and what is accepted. */
static const struct {
    const char *in, *says;
} refused[] = {
    {"", "empty spec"},
    {"w=u4b8,", "w=u4b8"},
    {"w", "not key=value"},
    {"w=q4", "weight codes are"},
    {"w=u4b8,w=u4", "given twice"},
    {"wx=u4", "unknown key 'wx'"},
    {"ws=f16", "FMT/GRAN"},
    {"ws=f8/g128", "scale format 'f8'"},
    {"ws=f16/g0", "granularity 'g0'"},
    {"ws=f16/b128", "granularity 'b128'"},
    {"ws=f16/gx", "granularity 'gx'"},
    {"wz=int", "expected none, int/GRAN"},
    {"w=u4b8,ws=f16/g128,wz=int/g128", "replaces the code's bias"},
    {"w=e4m3,ws=f16/c,wz=int/c", "integer weight codes"},
    {"w=u4b8,ws=f16/g128,wz=float/g128,dq=exact", "wz=float adds the zero point"},
    {"w=u4b8,wz=float/g128", "declare ws"},
    {"w=u4b8,ws=f16/g128,dq=rn2", "dq=rn2 rounds the product"},
    {"dq=fast", "dq=fast"},
    {"a=f32", "activations are"},
    {"acc=i32", "acc=i32 needs integer activations"},
    {"w=i8,a=i8", "int8 tensor cores accumulate in int32"},
    {"acc=f8p128", "needs a=e4m3"},
    {"w=e4m3,a=e4m3,acc=f8p0,out=f16", "f8pN needs"},
    {"acc=f16", "acc=f16"},
    {"w=i8,a=i8,acc=i32,dq=rn", "dq=rn rounds to the activation format"},
    {"w=u4b8,ws=f16/g128,dq=i8", "dq=i8 rounds weights to int8"},
    {"w=e4m3,ws=f32/c,a=e4m3,acc=f8p128", "declare the output format"},
    {"w=i8,ws=f32/c,a=i8,acc=i32,out=i32", "out=i32 is the exact integer accumulator"},
    {"w=i8,a=i8,acc=i32,bias=f32,out=i32", "out=i32 is the exact integer accumulator"},
    {"w=u8b128,ws=f16/c,dq=exact,a=e4m3,acc=f8p128,out=f16", "not exact in the e4m3 operand"},
    {"w=f16,a=bf16,dq=exact", "not exact in the bf16 operand"},
    {"w=u4b8,ws=f16/g128,ws2=f32/g128", "ws2 is applied in the epilogue"},
    {"w=u4b8,ws2=f32/c", "declare the first level ws"},
    {"w=u4b8,ws=f16/c,act=gidx", "act=gidx gives each row a group index"},
    {"w=u4b8,ws=f16/g128,dq=exact,act=gidx", "scattered along K"},
    {"w=u4,ws=f16/g128,wz=int/g64,act=gidx", "grouped like the scales"},
    {"act=sorted", "act=sorted"},
    {"w=u4b8,ws=f16/c,wmul=16", "wmul=16 multiplies integer codes"},
    {"wmul=0", "wmul=0"},
    {"wmul=1000", "wmul=1000"},
    {"az=i32/t", "az subtracts an integer zero point"},
    {"as=f16/t", "as=f16/t"},
    {"red=f16", "red=f16"},
    {"bias=f8", "bias=f8"},
    {"out=i8", "outputs are"},
    {"ep=ws", "not an epilogue step of this spec"},
    {"w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,out=f16,ep=ws", "list every epilogue step"},
    {"w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,out=f16,ep=ws:ws", "listed twice"},
    {"w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,out=f16,ep=ws:zz", "'zz' is not a step"},
    {"w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p96,out=f16", "must divide"},
    {"w=i8,a=i8,acc=i32,red=f32,out=i32", "red=f32 adds the slices' partials in fp32"},
    {"w=i8,a=i8,acc=i32,red=f32", "declare the output format"},
    {"w=u4b8,ws=f16/g128,dq=f32,a=i8,acc=i32,out=f16", "dq=f32 ends in one rounding to the activation format"},
    {"w=e4m3,ws=f32/c,dq=f32,a=e4m3,acc=f8p128,out=f16", "it needs a=f16 or a=bf16"},
    {"dq=f32", "dq=f32 rounds the scale product and the scaled value to fp32: it needs a weight scale"},
    {"w=u4,wz=int/g32,dq=f32", "it needs a weight scale ws"},
    {"w=e2m1,ws2=f32/t,dq=f32,a=bf16", "it needs a weight scale ws"},
    {"w=u4b8,ws=bf16/g64,wz=float/g64,dq=f32,a=bf16", "dq=f32 subtracts an integer zero point"},
    {"w=e2m1,ws=ue4m3/g16,ws2=f32/g16,dq=f32", "dq=f32 multiplies ws2 into the scale product"},
    {"w=e2m1,ws=ue4m3/g16,ws2=f32/t,dq=f32,a=bf16,bias=f32,ep=ws2:bias", "ws2 enters the dequantization's scale"},
    {"w=u4b8,ws=f16/c,dq=f32,ws2=f32/c,ep=ws2", "ws2 enters the dequantization's scale"},
    {"w=i4,ws=f32/c,wmul=16,dq=f32", "wmul=16 multiplies integer codes"},
    {"dq=f64", "dq=f64: exact, rn, rn2, i8 or f32"},
};

START_TEST(refusals)
{
    const qv_variant *v = (const qv_variant *)1;
    qv_status st = qv_spec_parse(refused[_i].in, &v);
    ck_assert_msg(st == QV_ERR_USAGE, "'%s' was accepted as %s", refused[_i].in, v ? v->name : "(null)");
    ck_assert_ptr_null(v);
    ck_assert_msg(strstr(qv_errmsg(), refused[_i].says) != NULL, "'%s': message '%s' lacks '%s'", refused[_i].in,
                  qv_errmsg(), refused[_i].says);
}
END_TEST

START_TEST(names_and_specs)
{
    const qv_variant *v = NULL;
    ck_assert_int_eq(qv_variant_resolve("marlin-w4a16-g128-f16", &v), QV_OK);
    ck_assert_ptr_eq(v, qv_variant_find("marlin-w4a16-g128-f16"));
    ck_assert_int_eq(qv_variant_resolve("marlin-w4a16-g999-f16", &v), QV_ERR_USAGE);
    ck_assert_ptr_null(v);
    ck_assert(strstr(qv_errmsg(), "qvet list") != NULL);
    ck_assert_int_eq(qv_variant_resolve("", &v), QV_ERR_USAGE);
    ck_assert(qv_is_spec("w=u4b8") && !qv_is_spec("marlin-w4a16-g128-f16") && !qv_is_spec(NULL));
}
END_TEST

/* dq=f32 moves the second-level scale into the dequantization: its specs
 * have no MUL_WSCALE2 step, per tensor or channel, with a bias or not, while
 * the same spec with dq=rn keeps it in the epilogue (docs/spec.md). */
START_TEST(dq_f32_epilogue)
{
    static const struct {
        const char *text;
        qv_ep_step ep[3];
    } cases[] = {
        {"w=e2m1,ws=ue4m3/g16,ws2=f32/t,dq=f32,a=bf16", {QV_EP_END}},
        {"w=e2m1,ws=ue4m3/g16,ws2=f32/c,dq=f32,bias=f16", {QV_EP_ADD_BIAS, QV_EP_END}},
        {"w=u4b8,ws=bf16/c,ws2=f32/t,dq=f32,a=bf16", {QV_EP_END}},
        {"w=e2m1,ws=ue4m3/g16,ws2=f32/t,a=bf16", {QV_EP_MUL_WSCALE2, QV_EP_END}},
        {"w=e2m1,ws=ue4m3/g16,ws2=f32/c,bias=f16", {QV_EP_MUL_WSCALE2, QV_EP_ADD_BIAS, QV_EP_END}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const qv_variant *v = spec(cases[c].text);
        for (int i = 0; i < 3; i++) {
            ck_assert_msg(v->arith.epilogue[i] == cases[c].ep[i], "%s: epilogue step %d is %d, want %d", v->name, i,
                          v->arith.epilogue[i], cases[c].ep[i]);
            if (cases[c].ep[i] == QV_EP_END) break;
        }
        ck_assert_int_eq(qv_spec_segment(v), 0);
    }
    ck_assert_int_eq(spec(cases[0].text)->arith.dequant, QV_DQ_F32);
    ck_assert_str_eq(qv_dequant_name(QV_DQ_F32), "mul-f32");
}
END_TEST

/* ---- an independent exact value --------------------------------------------- */

/* RN to f of x + y exactly (x, y doubles). */
static double rn_sum(qv_fmt f, double x, double y)
{
    mpfr_t t;
    mpfr_init2(t, 2200);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_add_d(t, t, y, MPFR_RNDN);
    /* to f's precision with its exponent range: through a double rounded to odd */
    double d = mpfr_get_d(t, MPFR_RNDZ);
    int inexact = mpfr_cmp_d(t, d) != 0;
    mpfr_clear(t);
    if (inexact) {
        uint64_t b;
        memcpy(&b, &d, sizeof b);
        b |= 1u;
        memcpy(&d, &b, sizeof d);
    }
    return qv_decode(f, qv_encode(f, d, QV_SAT_NONE));
}

static int in_dequant(const qv_variant *v)
{
    qv_dequant d = v->arith.dequant;
    return v->scale_layout != QV_SCALE_NONE &&
           (d == QV_DQ_MUL_RN || d == QV_DQ_MUL_RN2 || d == QV_DQ_INT8_RNE || d == QV_DQ_F32);
}

/* x rounded to fp32 as C's conversion of a double to float does it (to
 * nearest even, subnormals kept, Inf past the range). */
static double rn_f32(double x) { return (double)(float)x; }

/* The weight the accumulator multiplies, from the declared formula. */
static double weight(const qv_problem *p, int64_t kk, int64_t j)
{
    const qv_variant *v = p->v;
    double q = qv_problem_wq(p, kk, j), z = qv_problem_zero_f(p, kk, j);
    double s = in_dequant(v) ? qv_problem_scale(p, kk, j) : 1.0;
    switch (v->arith.dequant) {
    case QV_DQ_MUL_RN: return rn_sum(v->afmt, q * s, z);
    case QV_DQ_MUL_RN2: return rn_sum(v->afmt, rn_sum(v->afmt, q * s, 0.0), z);
    case QV_DQ_INT8_RNE: return fmin(fmax(nearbyint(q * s), -128), 127);
    case QV_DQ_EXACT: return q * (v->arith.w_mul > 1 ? v->arith.w_mul : 1);
    /* s s2 (at most 24 + 24 bits) and q times the fp32 factor (at most 11 + 24)
     * are exact in a double; each is rounded to fp32, the value then to the
     * activation format; s2 is 1 without a second-level scale */
    case QV_DQ_F32: return rn_sum(v->afmt, rn_f32(q * rn_f32(s * qv_problem_scale2(p, j))), 0.0);
    default: return q;
    }
}

/* y of element (i, j) at 4000 bits: the sum of a * w, each product times the
 * K-varying scales of its row and column, then the epilogue's steps in order. */
static void exact_y(const qv_problem *p, int64_t i, int64_t j, mpfr_t y)
{
    const qv_variant *v = p->v;
    mpfr_t t;
    mpfr_init2(t, 4000);
    mpfr_set_zero(y, 1);
    int seg = qv_spec_segment(v);
    for (int64_t kk = 0; kk < p->k; kk++) {
        double a = qv_problem_a(p, i, kk);
        if (v->azp == QV_AZP_TOKEN) a -= p->azp[i];
        if (v->azp == QV_AZP_TENSOR) a -= p->azp[0];
        mpfr_set_d(t, a, MPFR_RNDN);
        mpfr_mul_d(t, t, weight(p, kk, j), MPFR_RNDN);
        if (seg) {
            if (v->act_scale == QV_ASCALE_TOKEN_BLOCK) mpfr_mul_d(t, t, p->a_scale[(kk / 128) * p->m + i], MPFR_RNDN);
            if (!in_dequant(v) && v->scale_layout != QV_SCALE_TENSOR && v->scale_layout != QV_SCALE_CHANNEL &&
                v->scale_layout != QV_SCALE_NONE)
                mpfr_mul_d(t, t, qv_problem_scale(p, kk, j), MPFR_RNDN);
        }
        mpfr_add(y, y, t, MPFR_RNDN);
    }
    for (int s = 0; s < QV_EP_MAX && v->arith.epilogue[s] != QV_EP_END; s++) {
        switch (v->arith.epilogue[s]) {
        case QV_EP_MUL_WSCALE: mpfr_mul_d(y, y, qv_problem_scale(p, 0, j), MPFR_RNDN); break;
        case QV_EP_MUL_WSCALE2:
            /* with dq=f32 the second-level scale is in the weights (weight()) */
            ck_assert_msg(v->arith.dequant != QV_DQ_F32, "%s: ws2 in the epilogue under dq=f32", v->name);
            mpfr_mul_d(y, y, qv_problem_scale2(p, j), MPFR_RNDN);
            break;
        case QV_EP_MUL_ASCALE:
            mpfr_mul_d(y, y, p->a_scale[v->act_scale == QV_ASCALE_TOKEN ? i : 0], MPFR_RNDN);
            break;
        case QV_EP_ADD_BIAS: mpfr_add_d(y, y, p->bias[j], MPFR_RNDN); break;
        default: break;
        }
    }
    mpfr_clear(t);
}

/* Specs whose arithmetic no registry row has, one or more new values each. */
static const char *const specs[] = {
    "w=u4b8,ws=bf16/g32,wz=float/g32,a=bf16",
    "w=u4b8,ws=f16/g64,wz=float/g64,dq=rn2",
    "w=u4,ws=bf16/c,wz=int/g32,a=bf16",
    "w=u8,ws=f16/g64,wz=int/g64",
    "w=i4,ws=f16/g32,wz=int/t",
    "w=e2m1,ws=e8m0/g32,a=bf16",
    "w=e2m1,ws=ue4m3/g16,ws2=f32/t",
    "w=e2m1,ws=ue4m3/g16,ws2=f32/t,bias=bf16,a=bf16",
    "w=e5m2,ws=f32/c,dq=exact,bias=f16",
    "w=u4b8,ws=f16/b64x32",
    "w=u4b8,ws=f16/g64,dq=exact",
    "w=u4b8,ws=bf16/c,dq=exact,ws2=bf16/t,a=bf16,out=f32",
    "w=f16,bias=f32,out=f32",
    "w=bf16,a=bf16,acc=fma32,red=none",
    "w=u4b8,ws=f16/g32,act=gidx,bias=f16",
    "w=i8,a=i8,acc=i32",
    "w=i8,a=i8,acc=i32,red=f32,ws=f32/c,as=f32/tok,out=bf16",
    "w=u4b8,ws=f16/g64,dq=exact,a=i8,as=f32/tok,acc=i32,out=f16",
    "w=i8,ws=f32/c,a=i8,as=f32/t,az=i32/tok,acc=i32,bias=f32,ep=bias:ws:as,out=f32",
    "w=e4m3,ws=f32/t,a=e4m3,as=f32/t,acc=f8fast,out=f32",
    "w=e4m3,ws=f32/c,a=e4m3,as=f32/tok,acc=f8p128,bias=bf16,out=bf16",
    "w=e5m2,ws=f32/b128x64,a=e4m3,as=f32/tok-b128,acc=f8p64,out=bf16",
    "w=u4b8,ws=f16/g128,a=e4m3,acc=f8p128,out=f16",
    "w=e2m1,ws=ue4m3/g16,ws2=f32/t,dq=f32,a=bf16",
    "w=e2m1,ws=e8m0/g32,dq=f32,a=bf16,bias=bf16",
    "w=u4,ws=f32/g32,wz=int/g32,ws2=f32/c,dq=f32",
    "w=e4m3,ws=f32/b64x32,ws2=bf16/c,dq=f32,a=bf16,bias=f32,out=f32",
    "w=u4b8,ws=f16/g32,ws2=e8m0/t,dq=f32,act=gidx",
    "w=i8,ws=bf16/c,dq=f32,a=bf16",
};
#define N_SPECS ((int)(sizeof specs / sizeof specs[0]))

/* A shape the spec takes: groups and blocks of up to 128 along K. */
static void shape_of(const qv_variant *v, uint64_t s, int64_t *m, int64_t *n, int64_t *k)
{
    *m = 1 + (int64_t)(s % 5);
    *n = 8 + (int64_t)((s >> 8) % 57);
    *k = 128 * (1 + (int64_t)((s >> 16) % 3)) + (v->g || v->zp_g || qv_spec_segment(v) ? 0 : (int64_t)((s >> 24) % 17));
}

START_TEST(truth_equals_independent)
{
    const qv_variant *v = spec(specs[_i]);
    uint64_t seed = case_seed(1);
    mpfr_t y;
    mpfr_init2(y, 4000);
    for (int c = 0; c < 6; c++) {
        uint64_t s = mix(seed, (uint64_t)_i * 100 + (uint64_t)c);
        int64_t m, n, k;
        shape_of(v, s, &m, &n, &k);
        qv_problem p;
        qv_probe_kind kind = c == 0 ? QV_PROBE_EXACT : c == 1 ? QV_PROBE_ONEHOT : QV_PROBE_RANDOM;
        if (!ref_probe_applies(v, kind, m, n, k)) kind = QV_PROBE_RANDOM;
        case_fill(&p, v, m, n, k, kind, (qv_regime)(c % QV_REGIME_COUNT), s);
        ck_assert_msg(ref_operands_check(&p) == QV_OK, "%s: %s", v->name, qv_errmsg());
        ref_truth t;
        case_truth(&p, &t);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                exact_y(&p, i, j, y);
                int64_t e = i * n + j;
                double yd = mpfr_get_d(y, MPFR_RNDN);
                ck_assert_msg(yd == t.y[e] || (isnan(yd) && isnan(t.y[e])),
                              "%s seed %llu case %d (%lld, %lld): y %.17g, independent %.17g", v->name,
                              (unsigned long long)seed, c, (long long)i, (long long)j, t.y[e], yd);
                /* y_rn: the output format's RNE of the exact value (RNDN to
                 * the format's precision through the codec of a double
                 * rounded to odd) */
                double d = mpfr_get_d(y, MPFR_RNDZ);
                if (mpfr_cmp_d(y, d) != 0 && isfinite(d)) {
                    uint64_t b;
                    memcpy(&b, &d, sizeof b);
                    b |= 1u;
                    memcpy(&d, &b, sizeof d);
                }
                double want = qv_decode(v->ofmt, qv_encode(v->ofmt, d, v->arith.out_sat));
                ck_assert_msg(want == t.y_rn[e] || (isnan(want) && isnan(t.y_rn[e])),
                              "%s (%lld, %lld): y_rn %.17g, want %.17g", v->name, (long long)i, (long long)j,
                              t.y_rn[e], want);
            }
        case_release(&p, &t);
    }
    mpfr_clear(y);
}
END_TEST

/* The CPU model is one instance of the declared arithmetic: random data pass
 * the verdict; unique probes give exactly RN(y). */
START_TEST(model_passes)
{
    const qv_variant *v = spec(specs[_i]);
    uint64_t seed = case_seed(1);
    int unique_seen = 0;
    for (int c = 0; c < QV_PROBE_COUNT + 4; c++) {
        uint64_t s = mix(seed, (uint64_t)_i * 1000 + (uint64_t)c);
        int64_t m, n, k;
        shape_of(v, s, &m, &n, &k);
        qv_probe_kind kind = c < QV_PROBE_COUNT ? (qv_probe_kind)c : QV_PROBE_RANDOM;
        if (!ref_probe_applies(v, kind, m, n, k)) continue;
        qv_problem p;
        case_fill(&p, v, m, n, k, kind, (qv_regime)(c % QV_REGIME_COUNT), s);
        ref_truth t;
        case_truth(&p, &t);
        size_t es = qv_fmt_storage_bytes(v->ofmt);
        void *out = malloc((size_t)(m * n) * es);
        ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
        qv_result r;
        ref_verify(&p, &t, out, &r);
        ck_assert_msg(r.grade != QV_FAIL, "%s probe %s: %s", v->name, qv_probe_name(kind), r.reason);
        int narrow = v->arith.accum == QV_ACC_TC_FP8 && v->arith.acc_bits < 24;
        if (ref_probe_is_unique(kind) && !narrow) {
            for (int64_t e = 0; e < m * n; e++) {
                uint32_t got = 0, want = qv_encode(v->ofmt, t.y_rn[e], v->arith.out_sat);
                memcpy(&got, (char *)out + (size_t)e * es, es);
                ck_assert_msg(got == want, "%s probe %s element %lld: model 0x%x, RN(y) 0x%x", v->name,
                              qv_probe_name(kind), (long long)e, got, want);
            }
            unique_seen++;
        }
        free(out);
        case_release(&p, &t);
    }
    ck_assert_msg(unique_seen > 0 || v->arith.accum == QV_ACC_TC_FP8, "%s: no unique probe applied", v->name);
}
END_TEST

/* ---- torchao's NVFP4 emulation ---------------------------------------------- */

/* x (a finite fp32 value) rounded to bf16, to nearest even, from its bits. */
static float bf16_rne(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b += 0x7FFFu + ((b >> 16) & 1u);
    b &= 0xFFFF0000u;
    memcpy(&x, &b, sizeof x);
    return x;
}

static uint16_t bf16_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return (uint16_t)(b >> 16);
}

/* An NVFP4 linear layer as torchao's emulation computes it (NVFP4Tensor's
 * dequantization, then a bf16 GEMM): each weight is bf16(f32(value(q) *
 * f32(s * G))) with s the ue4m3 block scale and G the fp32 per-tensor scale
 * amax / (448 * 6), a general fp32 value; the products of bf16 activations
 * and those weights are summed in fp32 in K order and rounded once to bf16.
 * Computed here with C's float arithmetic and a bf16 rounding of its own.
 * That output passes w=e2m1,ws=ue4m3/g16,ws2=f32/t,dq=f32,a=bf16 well inside
 * its bound, equals the CPU model of that spec bit for bit (the model sums
 * in K order too), and fails the spec that multiplies G in the epilogue. */
START_TEST(torchao_nvfp4_emulation)
{
    const qv_variant *vf = spec("w=e2m1,ws=ue4m3/g16,ws2=f32/t,dq=f32,a=bf16");
    const qv_variant *vr = spec("w=e2m1,ws=ue4m3/g16,ws2=f32/t,a=bf16");
    const int64_t m = 7, n = 64, k = 128;
    uint64_t seed = case_seed(1);
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, vf, m, n, k), QV_OK);
    uint16_t *a = p.a;
    uint8_t *q = p.q, *sc = p.scales;
    float *act = malloc(sizeof(float) * (size_t)(m * k)), *w = malloc(sizeof(float) * (size_t)(k * n));
    uint16_t *out = malloc(sizeof(uint16_t) * (size_t)(m * n)), *model = malloc(sizeof(uint16_t) * (size_t)(m * n));
    ck_assert(act && w && out && model);
    uint64_t r = 0;
    for (int64_t i = 0; i < m * k; i++) {
        double u = test_rnd_unit(seed, 31, r++) * 2.0 - 1.0;
        act[i] = bf16_rne((float)(u * 4.0));
        a[i] = bf16_bits(act[i]);
    }
    for (int64_t i = 0; i < k * n; i++) q[i] = (uint8_t)(test_rnd(seed, 31, r++) % 16);
    /* ue4m3 block scales from 2^-3 to 448 (codes 0x20..0x7E) */
    for (int64_t i = 0; i < (k / 16) * n; i++) sc[i] = (uint8_t)(0x20 + test_rnd(seed, 31, r++) % 0x5F);
    /* G = amax / 2688 for an amax in [1, 8): no power of two */
    float g = (float)((1.0 + 7.0 * test_rnd_unit(seed, 31, r++)) / 2688.0);
    p.scales2[0] = g;
    static const double e2m1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
    static const double ue4m3_mant[8] = {0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875};
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) {
            uint8_t c = sc[(kk / 16) * n + j];
            int e = c >> 3;
            double s = e ? ldexp(1.0 + ue4m3_mant[c & 7], e - 7) : ldexp(ue4m3_mant[c & 7], -6);
            float sg = (float)(s * (double)g);                    /* RN_f32(s G) */
            float x = (float)(e2m1[q[kk * n + j]] * (double)sg); /* RN_f32(value (s G)) */
            w[kk * n + j] = bf16_rne(x);
        }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t kk = 0; kk < k; kk++) acc += act[i * k + kk] * w[kk * n + j];
            out[i * n + j] = bf16_bits(bf16_rne(acc));
        }
    ref_truth t;
    case_truth(&p, &t);
    qv_result res;
    ref_verify(&p, &t, out, &res);
    ck_assert_msg(res.grade != QV_FAIL && res.max_err_over_bound < 0.5,
                  "dq=f32 against the emulation: %s, max err/E %.3g: %s", qv_grade_name(res.grade),
                  res.max_err_over_bound, res.reason);
    ck_assert_int_eq(ref_model_run(&p, model), QV_OK);
    ck_assert_msg(!memcmp(model, out, sizeof(uint16_t) * (size_t)(m * n)),
                  "the CPU model of dq=f32 differs from the emulation's fp32 sum in K order");
    ref_truth_clear(&t);
    /* the same buffers under the global scale in the epilogue */
    p.v = vr;
    case_truth(&p, &t);
    ref_verify(&p, &t, out, &res);
    printf("t_spec: the torchao NVFP4 emulation (G = %.9g) against the epilogue global scale: %s, %lld of %lld out "
           "of bound, max err/E %.3g\n", (double)g, qv_grade_name(res.grade), (long long)res.n_fail,
           (long long)res.n_elements, res.max_err_over_bound);
    ck_assert_msg(res.grade == QV_FAIL, "the emulation passes the epilogue global scale (max err/E %.3g)",
                  res.max_err_over_bound);
    p.v = vf;
    free(act);
    free(w);
    free(out);
    free(model);
    case_release(&p, &t);
}
END_TEST

/* ---- the fp8 accumulator's bound ---------------------------------------------- */

/* docs/design.md §3's witness on the H200's cuBLASLt: one e4m3 product 2^16, then
 * K - 1 products of 1; unit scales, f32 out. The promoted path returns the
 * exact sum less 127, fast accumulation 65536. */
static void fp8_witness(const char *text, int64_t k, double out_value, int want_fail)
{
    const qv_variant *v = spec(text);
    int64_t m = 2, n = 3;
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
    uint8_t *a = p.a, *q = p.q;
    uint32_t c256 = qv_encode(QV_FMT_E4M3, 256.0, QV_SAT_NONE), c1 = qv_encode(QV_FMT_E4M3, 1.0, QV_SAT_NONE);
    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 0; kk < k; kk++) a[i * k + kk] = (uint8_t)(kk == 0 ? c256 : c1);
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) q[kk * n + j] = (uint8_t)(kk == 0 ? c256 : c1);
    ((float *)p.scales)[0] = 1.0f;
    p.a_scale[0] = 1.0f;
    ref_truth t;
    case_truth(&p, &t);
    ck_assert(t.y[0] == 65536.0 + (double)(k - 1));
    float *out = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t e = 0; e < m * n; e++) out[e] = (float)out_value;
    qv_result r;
    ref_verify(&p, &t, out, &r);
    ck_assert_msg((r.grade == QV_FAIL) == want_fail, "%s K=%lld out=%.1f (exact %.1f, E=%.3g): graded %s, want %s",
                  text, (long long)k, out_value, t.y[0], t.bound[0], qv_grade_name(r.grade),
                  want_fail ? "FAIL" : "PASS or MARGINAL");
    free(out);
    case_release(&p, &t);
}

START_TEST(fp8_bound_follows_promotion)
{
    const char *prom = "w=e4m3,ws=f32/t,a=e4m3,as=f32/t,acc=f8p128,out=f32";
    const char *fast = "w=e4m3,ws=f32/t,a=e4m3,as=f32/t,acc=f8fast,out=f32";
    static const int64_t ks[] = {1024, 4096, 8192};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        int64_t k = ks[i];
        double exact = 65536.0 + (double)(k - 1);
        fp8_witness(prom, k, exact - 127.0, 0); /* the promoted path */
        fp8_witness(prom, k, exact, 0);         /* a wider accumulator */
        fp8_witness(prom, k, 65536.0, 1);       /* fast accumulation */
        fp8_witness(fast, k, 65536.0, 0);
        fp8_witness(fast, k, exact - 127.0, 0);
    }
}
END_TEST

/* ---- int32 partials reduced in fp32 ------------------------------------------- */

/* acc=i32,red=f32: each K slice's exact int32 partial converted to fp32 and
 * the partials added in fp32. One product per slice, 4161 of 127 x 127 then
 * 12223 of 3, summed in K order: the 3s fall below half an fp32 ulp of the
 * running sum (8 above 2^26) and are lost, 36669 in all, and the declared
 * arithmetic allows it; the same output under red=none (exact) fails. */
START_TEST(int_partials_in_fp32)
{
    for (int red = 0; red < 2; red++) {
        const qv_variant *v = spec(red ? "w=i8,a=i8,acc=i32,red=f32,out=f32" : "w=i8,a=i8,acc=i32,out=f32");
        int64_t m = 1, n = 2, k = 4161 + 12223;
        qv_problem p;
        ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
        int8_t *a = p.a, *q = p.q;
        float sum = 0;
        for (int64_t kk = 0; kk < k; kk++) {
            a[kk] = kk < 4161 ? 127 : 1;
            q[kk * n] = q[kk * n + 1] = kk < 4161 ? 127 : 3;
            sum = sum + (float)(a[kk] * q[kk * n]); /* one slice per product, fp32 in K order */
        }
        ref_truth t;
        case_truth(&p, &t);
        ck_assert(t.y[0] == 4161.0 * 16129.0 + 12223.0 * 3.0);
        ck_assert_msg(t.y[0] - (double)sum > 30000.0, "the fp32 reduction lost only %.0f", t.y[0] - (double)sum);
        float out[2] = {sum, sum};
        qv_result r;
        ref_verify(&p, &t, out, &r);
        ck_assert_msg((r.grade == QV_FAIL) == !red, "%s: graded %s (E = %.6g, lost %.0f)", v->name,
                      qv_grade_name(r.grade), t.bound[0], t.y[0] - (double)sum);
        case_release(&p, &t);
    }
}
END_TEST

/* ---- the bias witness ---------------------------------------------------------- */

START_TEST(bias_witness)
{
    static const char *const bspecs[] = {"w=u4b8,ws=f16/g32,bias=f16", "w=u4b8,ws=bf16/c,dq=exact,a=bf16,bias=bf16",
                                         "w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,bias=f32,out=f16"};
    const qv_variant *v = spec(bspecs[_i]);
    int64_t m = 3, n = 16, k = 64;
    ck_assert(ref_probe_applies(v, QV_PROBE_WITNESS_BIAS, m, n, k));
    qv_problem p;
    case_fill(&p, v, m, n, k, QV_PROBE_WITNESS_BIAS, QV_REGIME_LOGUNIFORM, mix(case_seed(1), 77 + (uint64_t)_i));
    ref_truth t;
    case_truth(&p, &t);
    size_t es = qv_fmt_storage_bytes(v->ofmt);
    uint16_t *good = malloc((size_t)(m * n) * es), *late = malloc((size_t)(m * n) * es),
             *none = malloc((size_t)(m * n) * es);
    ck_assert_int_eq(ref_model_run(&p, good), QV_OK);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t e = i * n + j;
            double b = p.bias[j], x = t.y[e] - b; /* the value before the bias, exact here */
            ck_assert(fabs(b) == 1.0);
            double cast_first = qv_decode(v->ofmt, qv_encode(v->ofmt, x, QV_SAT_NONE));
            late[e] = (uint16_t)qv_encode(v->ofmt, cast_first + b, QV_SAT_NONE);
            none[e] = (uint16_t)qv_encode(v->ofmt, x, QV_SAT_NONE);
        }
    qv_result r;
    ref_verify_bitexact(&p, good, good, &r);
    ck_assert_int_eq(r.grade, QV_PASS);
    ref_verify(&p, &t, good, &r);
    ck_assert_msg(r.grade != QV_FAIL, "%s: the declared arithmetic fails its own witness: %s", v->name, r.reason);
    ref_verify_bitexact(&p, good, late, &r);
    ck_assert_msg(r.grade == QV_FAIL, "%s: a bias added after the output cast passes", v->name);
    ref_verify_bitexact(&p, good, none, &r);
    ck_assert_msg(r.grade == QV_FAIL, "%s: a dropped bias passes", v->name);
    free(good);
    free(late);
    free(none);
    case_release(&p, &t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spec");
    TCase *tg = tcase_create("grammar");
    tcase_add_loop_test(tg, rows_round_trip, 0, qv_registry_count());
    tcase_add_loop_test(tg, canonical_forms, 0, (int)(sizeof canon / sizeof canon[0]));
    tcase_add_loop_test(tg, refusals, 0, (int)(sizeof refused / sizeof refused[0]));
    tcase_add_test(tg, names_and_specs);
    tcase_add_test(tg, dq_f32_epilogue);
    suite_add_tcase(s, tg);
    TCase *tr = tcase_create("reference");
    tcase_set_timeout(tr, 300);
    tcase_add_loop_test(tr, truth_equals_independent, 0, N_SPECS);
    tcase_add_loop_test(tr, model_passes, 0, N_SPECS);
    tcase_add_test(tr, fp8_bound_follows_promotion);
    tcase_add_test(tr, int_partials_in_fp32);
    tcase_add_loop_test(tr, bias_witness, 0, 3);
    tcase_add_test(tr, torchao_nvfp4_emulation);
    suite_add_tcase(s, tr);
    printf("t_spec: seed %llu (QVET_SEED)\n", (unsigned long long)case_seed(1));
    return suite_run(s);
}
