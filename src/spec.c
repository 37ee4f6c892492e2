/* spec.c: the spec grammar v1 (spec.h, docs/design.md §2, docs/spec.md): parsing a
 * spec into a variant, refusing what has no meaning, and writing any variant's
 * canonical spec. Every rule about which values combine lives here. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/spec.h"

/* ---- value tables ---------------------------------------------------------- */

typedef struct name_fmt {
    const char *name;
    qv_fmt fmt;
} name_fmt;

/* Weight codes. u4b8/u8b128 carry their bias; u4/u8 are unsigned codes. */
static const name_fmt w_names[] = {
    {"u4b8", QV_FMT_U4}, {"u4", QV_FMT_UINT4}, {"i4", QV_FMT_I4},     {"u8b128", QV_FMT_U8},
    {"u8", QV_FMT_UINT8}, {"i8", QV_FMT_I8},   {"e4m3", QV_FMT_E4M3}, {"e5m2", QV_FMT_E5M2},
    {"e2m1", QV_FMT_E2M1}, {"f16", QV_FMT_F16}, {"bf16", QV_FMT_BF16},
};
static const name_fmt s_names[] = {
    {"f16", QV_FMT_F16}, {"bf16", QV_FMT_BF16}, {"f32", QV_FMT_F32}, {"e8m0", QV_FMT_E8M0}, {"ue4m3", QV_FMT_UE4M3},
};
static const name_fmt a_names[] = {
    {"f16", QV_FMT_F16}, {"bf16", QV_FMT_BF16}, {"i8", QV_FMT_I8}, {"e4m3", QV_FMT_E4M3},
};
static const name_fmt bias_names[] = {{"f16", QV_FMT_F16}, {"bf16", QV_FMT_BF16}, {"f32", QV_FMT_F32}};
static const name_fmt out_names[] = {
    {"f16", QV_FMT_F16}, {"bf16", QV_FMT_BF16}, {"f32", QV_FMT_F32}, {"i32", QV_FMT_I32},
};
#define N_OF(t) (sizeof(t) / sizeof(t)[0])

/* The keys in canonical order. */
static const char *const keys[] = {"w",   "ws", "ws2", "wz",  "wmul", "act",  "dq", "a",
                                   "as",  "az", "acc", "red", "bias", "ep",   "out"};
enum { K_W, K_WS, K_WS2, K_WZ, K_WMUL, K_ACT, K_DQ, K_A, K_AS, K_AZ, K_ACC, K_RED, K_BIAS, K_EP, K_OUT, N_KEYS };

/* Step names of ep=. */
static const struct {
    const char *name;
    qv_ep_step step;
} ep_names[] = {{"ws", QV_EP_MUL_WSCALE}, {"ws2", QV_EP_MUL_WSCALE2}, {"as", QV_EP_MUL_ASCALE}, {"bias", QV_EP_ADD_BIAS}};

static qv_status bad(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qv_fail(QV_ERR_USAGE, "spec: %s", msg);
}

/* "a, b or c" of a table's names, for messages. */
static const char *list_names(const name_fmt *t, size_t n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", t[i].name);
    return buf;
}

static int find_fmt(const name_fmt *t, size_t n, const char *name, qv_fmt *f)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) {
            *f = t[i].fmt;
            return 1;
        }
    return 0;
}

static const char *fmt_spelling(const name_fmt *t, size_t n, qv_fmt f)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].fmt == f) return t[i].name;
    return NULL;
}

/* A positive decimal integer filling the whole of s (no sign, no spaces). */
static int parse_pos(const char *s, int *out)
{
    if (!*s || !isdigit((unsigned char)*s)) return 0;
    long v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s)) return 0;
        v = v * 10 + (*s - '0');
        if (v > (1 << 20)) return 0;
    }
    if (v < 1) return 0;
    *out = (int)v;
    return 1;
}

/* ---- granularities --------------------------------------------------------- */

typedef struct gran {
    qv_scale_layout kind;
    int g, bk, bn;
} gran;

/* t, c, gN, bKxN. */
static int parse_gran(const char *s, gran *gr)
{
    memset(gr, 0, sizeof *gr);
    if (!strcmp(s, "t")) {
        gr->kind = QV_SCALE_TENSOR;
        return 1;
    }
    if (!strcmp(s, "c")) {
        gr->kind = QV_SCALE_CHANNEL;
        return 1;
    }
    if (s[0] == 'g') {
        gr->kind = QV_SCALE_GROUP;
        return parse_pos(s + 1, &gr->g);
    }
    if (s[0] == 'b') {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%s", s + 1);
        char *x = strchr(tmp, 'x');
        if (!x) return 0;
        *x = '\0';
        gr->kind = QV_SCALE_BLOCK;
        return parse_pos(tmp, &gr->bk) && parse_pos(x + 1, &gr->bn);
    }
    return 0;
}

static void put_gran(char *buf, size_t len, qv_scale_layout kind, int g, int bk, int bn)
{
    switch (kind) {
    case QV_SCALE_TENSOR: snprintf(buf, len, "t"); break;
    case QV_SCALE_CHANNEL: snprintf(buf, len, "c"); break;
    case QV_SCALE_GROUP:
    case QV_SCALE_GROUP_CHANNEL: snprintf(buf, len, "g%d", g); break;
    case QV_SCALE_BLOCK: snprintf(buf, len, "b%dx%d", bk > 0 ? bk : 128, bn > 0 ? bn : 128); break;
    default: snprintf(buf, len, "none"); break;
    }
}

/* FMT/GRAN or none. */
static qv_status parse_scale(const char *key, const char *val, qv_fmt *fmt, gran *gr)
{
    char names[128];
    *fmt = QV_FMT_NONE;
    memset(gr, 0, sizeof *gr);
    if (!strcmp(val, "none")) return QV_OK;
    char f[32];
    const char *slash = strchr(val, '/');
    if (!slash || (size_t)(slash - val) >= sizeof f)
        return bad("%s=%s: expected none or FMT/GRAN (FMT %s; GRAN t, c, gN or bKxN)", key, val,
                   list_names(s_names, N_OF(s_names), names, sizeof names));
    memcpy(f, val, (size_t)(slash - val));
    f[slash - val] = '\0';
    if (!find_fmt(s_names, N_OF(s_names), f, fmt))
        return bad("%s=%s: scale format '%s' is not one of %s", key, val, f,
                   list_names(s_names, N_OF(s_names), names, sizeof names));
    if (!parse_gran(slash + 1, gr))
        return bad("%s=%s: granularity '%s' is not t (tensor), c (channel), gN (groups of N along K) "
                   "or bKxN (K x N blocks), N >= 1",
                   key, val, slash + 1);
    return QV_OK;
}

/* ---- derived properties of a variant (parsed or registry) ------------------- */

static int k_varying(qv_scale_layout l) { return l == QV_SCALE_GROUP || l == QV_SCALE_GROUP_CHANNEL || l == QV_SCALE_BLOCK; }

/* dq as the grammar names it: a registry row's QV_DQ_NONE applies nothing in
 * the dequantization, which is exact. */
static qv_dequant eff_dq(const qv_variant *v)
{
    return v->arith.dequant == QV_DQ_NONE ? QV_DQ_EXACT : v->arith.dequant;
}

/* The first-level weight scale is an epilogue step (per tensor or channel,
 * dq=exact). */
static int ws_in_epilogue(const qv_variant *v)
{
    qv_scale_layout l = v->scale_layout;
    return (l == QV_SCALE_TENSOR || l == QV_SCALE_CHANNEL) && eff_dq(v) == QV_DQ_EXACT;
}

/* The second-level weight scale is an epilogue step (every dq but f32, whose
 * dequantization multiplies it into the scale product). */
static int ws2_in_epilogue(const qv_variant *v)
{
    return v->s2_layout != QV_SCALE_NONE && v->arith.dequant != QV_DQ_F32;
}

/* An int32 sum with nothing to scale, summed exactly: its output defaults
 * to the integer itself. */
static int int_out_default(const qv_variant *v)
{
    return v->arith.accum == QV_ACC_INT32 && v->arith.reduce != QV_RED_F32 && v->scale_layout == QV_SCALE_NONE &&
           v->s2_layout == QV_SCALE_NONE && v->act_scale == QV_ASCALE_NONE && v->bias_fmt == QV_FMT_NONE &&
           v->arith.dequant != QV_DQ_INT8_RNE;
}

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int qv_spec_segment(const qv_variant *v)
{
    int seg = 0;
#ifdef QV_MUTANT_orc_spec_group_exact_unsegmented
    /* Oracle mutant: group scales with dq=exact given no segment (nothing
     * applies them: neither the dequantization nor the partial sums). */
    if (k_varying(v->scale_layout) && eff_dq(v) == QV_DQ_EXACT && v->scale_layout == QV_SCALE_BLOCK)
#else
    if (k_varying(v->scale_layout) && eff_dq(v) == QV_DQ_EXACT)
#endif
        seg = v->scale_layout == QV_SCALE_BLOCK ? (v->block_k > 0 ? v->block_k : 128) : v->g;
    if (v->act_scale == QV_ASCALE_TOKEN_BLOCK) seg = seg ? gcd(seg, 128) : 128; /* f32/tok-b128 */
    return seg;
}

void qv_spec_default_epilogue(const qv_variant *v, qv_ep_step ep[QV_EP_MAX])
{
    int n = 0;
    for (int i = 0; i < QV_EP_MAX; i++) ep[i] = QV_EP_END;
    if (v->azp != QV_AZP_NONE) ep[n++] = QV_EP_SUB_AZP;
    int seg = qv_spec_segment(v);
    /* An int32 accumulator is converted once to fp32 before the scales, unless
     * the output is the integer itself or each segment's partial is converted. */
    if (v->arith.accum == QV_ACC_INT32 && v->ofmt != QV_FMT_I32 && !seg) ep[n++] = QV_EP_TO_F32;
    int ws_ep = ws_in_epilogue(v);
    if (ws_ep && v->scale_layout == QV_SCALE_CHANNEL) ep[n++] = QV_EP_MUL_WSCALE;
    if (ws2_in_epilogue(v) && v->s2_layout == QV_SCALE_CHANNEL) ep[n++] = QV_EP_MUL_WSCALE2;
    if (v->act_scale == QV_ASCALE_TENSOR || v->act_scale == QV_ASCALE_TOKEN) ep[n++] = QV_EP_MUL_ASCALE;
    if (ws_ep && v->scale_layout == QV_SCALE_TENSOR) ep[n++] = QV_EP_MUL_WSCALE;
    if (ws2_in_epilogue(v) && v->s2_layout == QV_SCALE_TENSOR) ep[n++] = QV_EP_MUL_WSCALE2;
    if (v->bias_fmt != QV_FMT_NONE) ep[n++] = QV_EP_ADD_BIAS;
}

static int same_epilogue(const qv_ep_step *a, const qv_ep_step *b)
{
    for (int i = 0; i < QV_EP_MAX; i++) {
        if (a[i] != b[i]) return 0;
        if (a[i] == QV_EP_END) return 1;
    }
    return 1;
}

/* The format a weight enters the multiply-accumulate in: the activation
 * format, except that e5m2 weights meet e4m3 activations as they are. */
static qv_fmt operand_fmt(const qv_variant *v)
{
    if (v->afmt == QV_FMT_E4M3 && v->wfmt == QV_FMT_E5M2) return QV_FMT_E5M2;
    return v->afmt;
}

static int exact_in(qv_fmt f, double x)
{
    if (f == QV_FMT_I8) return x == (double)(long)x && x >= -128 && x <= 127;
    return qv_decode(f, qv_encode(f, x, QV_SAT_NONE)) == x;
}

/* With dq=exact every weight value the accumulator can see must be exact in
 * its operand format; returns 0 and the first value that is not. */
static int weights_exact(const qv_variant *v, double *bad_value)
{
    qv_fmt op = operand_fmt(v);
    double mul = v->arith.w_mul > 1 ? v->arith.w_mul : 1;
    const qv_fmt_info *fi = qv_fmt_get(v->wfmt);
    if (v->zero_point == QV_ZP_INT) {
        /* q - z over the code range */
        double span = fi->max_finite - fi->min_value;
        for (double x = -span; x <= span; x++)
            if (!exact_in(op, x * mul)) {
                *bad_value = x * mul;
                return 0;
            }
        return 1;
    }
    uint32_t codes = fi->bits >= 16 ? 65536u : 1u << fi->bits;
    for (uint32_t c = 0; c < codes; c++) {
        double x = qv_decode(v->wfmt, c);
        if (x != x || x - x != 0) continue; /* NaN and Inf codes propagate as they are */
        if (!exact_in(op, x * mul)) {
            *bad_value = x * mul;
            return 0;
        }
    }
    return 1;
}

/* ---- the checks of a parsed spec -------------------------------------------- */

static const char *fname(qv_fmt f) { return qv_fmt_get(f)->name; }

static qv_status check_variant(const qv_variant *v, int have_out, int ep_given)
{
    const qv_arith *ar = &v->arith;
    qv_fmt a = v->afmt;
    int int_acts = a == QV_FMT_I8, half_acts = a == QV_FMT_F16 || a == QV_FMT_BF16, fp8_acts = a == QV_FMT_E4M3;
    qv_dequant dq = eff_dq(v);
    /* accumulators and activations */
    if (ar->accum == QV_ACC_INT32 && !int_acts)
        return bad("acc=i32 needs integer activations (a=i8); %s activations accumulate in floating point", fname(a));
    if (int_acts && ar->accum != QV_ACC_INT32 && ar->accum != QV_ACC_FMA_F32)
        return bad("a=i8: int8 tensor cores accumulate in int32 (acc=i32), or declare an fp32 loop (acc=fma32)");
    if (ar->accum == QV_ACC_TC_FP8 && !fp8_acts)
        return bad("acc=%s is the fp8 tensor core's accumulator: it needs a=e4m3", ar->promote_nc ? "f8pN" : "f8fast");
    if (half_acts && ar->accum != QV_ACC_TC_F32 && ar->accum != QV_ACC_FMA_F32)
        return bad("a=%s accumulates with acc=f32 (tensor core) or acc=fma32", fname(a));
    /* weight codes against the accumulator */
    int int_w = v->wfmt == QV_FMT_U4 || v->wfmt == QV_FMT_UINT4 || v->wfmt == QV_FMT_I4 || v->wfmt == QV_FMT_U8 ||
                v->wfmt == QV_FMT_UINT8 || v->wfmt == QV_FMT_I8;
    if (ar->accum == QV_ACC_INT32 && !int_w && dq != QV_DQ_INT8_RNE)
        return bad("acc=i32 multiplies integers: w=%s needs dq=i8 (rounded to int8) or integer weight codes",
                   fname(v->wfmt));
    /* dequantization */
    if (dq == QV_DQ_INT8_RNE && !(int_acts && ar->accum == QV_ACC_INT32))
        return bad("dq=i8 rounds weights to int8 for an int8 x int8 product: it needs a=i8 and acc=i32");
    if (dq == QV_DQ_INT8_RNE && v->scale_layout == QV_SCALE_NONE)
        return bad("dq=i8 rounds (q - z) * s to int8: it needs a weight scale ws");
    if (dq == QV_DQ_MUL_RN && int_acts)
        return bad("dq=rn rounds to the activation format; with a=i8 that rounding is dq=i8");
    if (dq == QV_DQ_MUL_RN2 && v->zero_point != QV_ZP_FLOAT)
        return bad("dq=rn2 rounds the product and then adds a float zero point: it needs wz=float/GRAN");
    if (dq == QV_DQ_F32) {
        if (!half_acts)
            return bad("dq=f32 ends in one rounding to the activation format: it needs a=f16 or a=bf16 (with a=i8 "
                       "the rounding to int8 is dq=i8)");
        if (v->scale_layout == QV_SCALE_NONE)
            return bad("dq=f32 rounds the scale product and the scaled value to fp32: it needs a weight scale ws "
                       "(without one the value is exact in fp32 and rounded once, which is dq=rn)");
        if (v->zero_point == QV_ZP_FLOAT)
            return bad("dq=f32 subtracts an integer zero point (wz=int) exactly before the fp32 multiply; a float "
                       "zero point is added after the product, as dq=rn (fused) or dq=rn2 declares");
    }
    if (v->zero_point == QV_ZP_FLOAT) {
        if (v->scale_layout == QV_SCALE_NONE)
            return bad("wz=float: a float zero point is a number in the weight scale's format; declare ws");
        if (dq != QV_DQ_MUL_RN && dq != QV_DQ_MUL_RN2)
            return bad("wz=float adds the zero point in the dequantization: declare dq=rn (one fused rounding) or "
                       "dq=rn2 (product rounded, then the sum)");
    }
    if (v->zero_point == QV_ZP_INT && !int_w)
        return bad("wz=int subtracts an integer code: it needs integer weight codes (u4, u8, i4 or i8), not %s",
                   fname(v->wfmt));
    if (v->zero_point == QV_ZP_INT && (v->wfmt == QV_FMT_U4 || v->wfmt == QV_FMT_U8))
        return bad("wz=int replaces the code's bias: write w=%s instead of w=%s", v->wfmt == QV_FMT_U4 ? "u4" : "u8",
                   fname(v->wfmt));
    if (ar->w_mul > 1 && (ar->accum != QV_ACC_INT32 || dq != QV_DQ_EXACT))
        return bad("wmul=%d multiplies integer codes for an int32 product: it needs acc=i32 and dq=exact", ar->w_mul);
    if (ar->dequant == QV_DQ_EXACT) {
        double bv = 0;
        if (!weights_exact(v, &bv))
            return bad("dq=exact with w=%s: the weight value %g is not exact in the %s operand of the multiply; "
                       "declare dq=rn%s",
                       fname(v->wfmt), bv, fname(operand_fmt(v)), int_acts ? " (dq=i8 with a=i8)" : "");
    }
    /* scales */
    if (v->s2_layout != QV_SCALE_NONE && v->s2_layout != QV_SCALE_TENSOR && v->s2_layout != QV_SCALE_CHANNEL)
        return bad(dq == QV_DQ_F32 ? "dq=f32 multiplies ws2 into the scale product per tensor or channel (scales2 "
                                     "holds 1 or N values): its granularity must be t or c"
                                   : "ws2 is applied in the epilogue: its granularity must be t or c");
    if (v->s2_layout != QV_SCALE_NONE && v->scale_layout == QV_SCALE_NONE)
        return bad("ws2 is a second-level scale: declare the first level ws too");
    if (v->act_order) {
        if (v->scale_layout != QV_SCALE_GROUP)
            return bad("act=gidx gives each row a group index: it needs group scales ws=FMT/gN");
        if (v->zero_point && !(v->zp_layout == QV_SCALE_GROUP && v->zp_g == v->g))
            return bad("act=gidx: the zero points must be grouped like the scales (wz=.../g%d)", v->g);
        if (dq == QV_DQ_EXACT)
            return bad("act=gidx with dq=exact would scale partial sums of rows scattered along K; "
                       "declare dq=rn (or dq=i8)");
    }
    if (v->azp != QV_AZP_NONE && !(int_acts && ar->accum == QV_ACC_INT32))
        return bad("az subtracts an integer zero point exactly: it needs a=i8 and acc=i32");
    int seg = qv_spec_segment(v);
    if (seg && ar->accum == QV_ACC_TC_FP8 && ar->promote_nc > 0 && seg % ar->promote_nc)
        return bad("acc=f8p%d: scales varying along K multiply partial sums every %d products, which the promotion "
                   "interval %d must divide",
                   ar->promote_nc, seg, ar->promote_nc);
    /* output */
    if (v->ofmt == QV_FMT_I32) {
        if (ar->accum != QV_ACC_INT32)
            return bad("out=i32 is the exact integer accumulator: it needs acc=i32");
        if (seg || ws_in_epilogue(v) || v->s2_layout != QV_SCALE_NONE || v->act_scale != QV_ASCALE_NONE ||
            v->bias_fmt != QV_FMT_NONE)
            return bad("out=i32 is the exact integer accumulator: scales applied to sums (ws per tensor or "
                       "channel with dq=exact, ws2, as) and bias have no place in it");
        if (ar->reduce == QV_RED_F32)
            return bad("out=i32 is the exact integer accumulator: red=f32 adds the slices' partials in fp32; "
                       "declare out=f32 (or red=none)");
    }
    if (!have_out && !half_acts && v->ofmt == QV_FMT_NONE)
        return bad("a=%s: declare the output format out= (f16, bf16 or f32%s)", fname(a),
                   int_acts ? ", or i32 without scales" : "");
    (void)ep_given;
    return QV_OK;
}

/* ---- parsing --------------------------------------------------------------- */

static qv_status parse_key(int key, const char *val, qv_variant *v, gran *ws, gran *ws2, gran *wz, int *dq_set,
                           int *red_set, int *out_set, char *ep_text, size_t ep_len)
{
    char names[160];
    qv_fmt f;
    switch (key) {
    case K_W:
        if (!find_fmt(w_names, N_OF(w_names), val, &v->wfmt))
            return bad("w=%s: weight codes are %s", val, list_names(w_names, N_OF(w_names), names, sizeof names));
        return QV_OK;
    case K_WS: return parse_scale("ws", val, &v->sfmt, ws);
    case K_WS2: return parse_scale("ws2", val, &v->s2fmt, ws2);
    case K_WZ: {
        if (!strcmp(val, "none")) return QV_OK;
        const char *slash = strchr(val, '/');
        int is_int = slash && !strncmp(val, "int/", 4), is_float = slash && !strncmp(val, "float/", 6);
        if (!is_int && !is_float)
            return bad("wz=%s: expected none, int/GRAN (w = (q - z) s) or float/GRAN (w = (q - b) s + z)", val);
        if (!parse_gran(slash + 1, wz))
            return bad("wz=%s: granularity '%s' is not t, c, gN or bKxN", val, slash + 1);
        v->zero_point = is_int ? QV_ZP_INT : QV_ZP_FLOAT;
        return QV_OK;
    }
    case K_WMUL:
        if (!parse_pos(val, &v->arith.w_mul) || v->arith.w_mul > 128)
            return bad("wmul=%s: an integer from 1 to 128 (the factor the kernel multiplies integer codes by)", val);
        return QV_OK;
    case K_ACT:
        if (!strcmp(val, "none")) return QV_OK;
        if (!strcmp(val, "gidx")) {
            v->act_order = 1;
            return QV_OK;
        }
        return bad("act=%s: none or gidx (rows grouped by a g_idx array, as act_order checkpoints store them)", val);
    case K_DQ:
        *dq_set = 1;
        if (!strcmp(val, "exact")) v->arith.dequant = QV_DQ_EXACT;
        else if (!strcmp(val, "rn")) v->arith.dequant = QV_DQ_MUL_RN;
        else if (!strcmp(val, "rn2")) v->arith.dequant = QV_DQ_MUL_RN2;
        else if (!strcmp(val, "i8")) v->arith.dequant = QV_DQ_INT8_RNE;
        else if (!strcmp(val, "f32")) v->arith.dequant = QV_DQ_F32;
        else return bad("dq=%s: exact, rn, rn2, i8 or f32", val);
        return QV_OK;
    case K_A:
        if (!find_fmt(a_names, N_OF(a_names), val, &v->afmt))
            return bad("a=%s: activations are %s", val, list_names(a_names, N_OF(a_names), names, sizeof names));
        return QV_OK;
    case K_AS:
        if (!strcmp(val, "none")) v->act_scale = QV_ASCALE_NONE;
        else if (!strcmp(val, "f32/t")) v->act_scale = QV_ASCALE_TENSOR;
        else if (!strcmp(val, "f32/tok")) v->act_scale = QV_ASCALE_TOKEN;
        else if (!strcmp(val, "f32/tok-b128")) v->act_scale = QV_ASCALE_TOKEN_BLOCK;
        else return bad("as=%s: none, f32/t, f32/tok or f32/tok-b128", val);
        return QV_OK;
    case K_AZ:
        if (!strcmp(val, "none")) v->azp = QV_AZP_NONE;
        else if (!strcmp(val, "i32/t")) v->azp = QV_AZP_TENSOR;
        else if (!strcmp(val, "i32/tok")) v->azp = QV_AZP_TOKEN;
        else return bad("az=%s: none, i32/t or i32/tok", val);
        return QV_OK;
    case K_ACC:
        v->arith.promote_nc = 0;
        v->arith.acc_bits = 0;
        v->arith.block_b = 0;
        if (!strcmp(val, "f32")) {
            v->arith.accum = QV_ACC_TC_F32;
#ifdef QV_MUTANT_orc_spec_tc_block_b_1
            v->arith.block_b = 1;
#else
            v->arith.block_b = 16; /* the fp16/bf16 mma's K width */
#endif
        } else if (!strcmp(val, "fma32")) {
            v->arith.accum = QV_ACC_FMA_F32;
        } else if (!strcmp(val, "i32")) {
            v->arith.accum = QV_ACC_INT32;
        } else if (!strcmp(val, "f8fast") || !strncmp(val, "f8p", 3)) {
            v->arith.accum = QV_ACC_TC_FP8;
#ifdef QV_MUTANT_orc_spec_f8_acc_bits_24
            /* Oracle mutant: the fp8 accumulator recorded as fp32-wide (24 bits). */
            v->arith.acc_bits = 24;
#else
            v->arith.acc_bits = 14; /* the H200's fp8 accumulator (docs/spec.md) */
#endif
            v->arith.block_b = 32;  /* the fp8 mma's K width */
            if (val[2] == 'p' && !parse_pos(val + 3, &v->arith.promote_nc))
                return bad("acc=%s: f8pN needs a promotion interval N >= 1 (e.g. f8p128)", val);
        } else {
            return bad("acc=%s: f32 (tensor core into fp32), fma32, i32, f8pN (fp8 tensor core promoted to fp32 "
                       "every N products, e.g. f8p128) or f8fast (never promoted)",
                       val);
        }
        return QV_OK;
    case K_RED:
        *red_set = 1;
        if (!strcmp(val, "f32")) v->arith.reduce = QV_RED_F32;
        else if (!strcmp(val, "none")) v->arith.reduce = QV_RED_NONE;
        else return bad("red=%s: f32 (split-K partials added in fp32) or none", val);
        return QV_OK;
    case K_BIAS:
        if (!strcmp(val, "none")) return QV_OK;
        if (!find_fmt(bias_names, N_OF(bias_names), val, &v->bias_fmt))
            return bad("bias=%s: none, %s", val, list_names(bias_names, N_OF(bias_names), names, sizeof names));
        return QV_OK;
    case K_EP:
        snprintf(ep_text, ep_len, "%s", val);
        return QV_OK;
    case K_OUT:
        *out_set = 1;
        if (!find_fmt(out_names, N_OF(out_names), val, &f))
            return bad("out=%s: outputs are %s", val, list_names(out_names, N_OF(out_names), names, sizeof names));
        v->ofmt = f;
        return QV_OK;
    }
    return bad("internal: key %d", key);
}

/* Builds the epilogue from ep= (a ':'-separated order of the steps present). */
static qv_status parse_ep(const char *text, qv_variant *v)
{
    qv_ep_step dflt[QV_EP_MAX];
    qv_spec_default_epilogue(v, dflt);
    /* The float steps present, in default order; the fixed head (SUB_AZP,
     * TO_F32) stays where it is. */
    qv_ep_step head[QV_EP_MAX], present[QV_EP_MAX];
    int nh = 0, np = 0;
    for (int i = 0; i < QV_EP_MAX && dflt[i] != QV_EP_END; i++) {
        if (dflt[i] == QV_EP_SUB_AZP || dflt[i] == QV_EP_TO_F32) head[nh++] = dflt[i];
        else present[np++] = dflt[i];
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%s", text);
    qv_ep_step order[QV_EP_MAX];
    int no = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
        int found = -1;
        for (size_t i = 0; i < N_OF(ep_names); i++)
            if (!strcmp(ep_names[i].name, tok)) found = (int)i;
        if (found < 0) return bad("ep=%s: '%s' is not a step (ws, ws2, as, bias, separated by ':')", text, tok);
        qv_ep_step st = ep_names[found].step;
        int is_present = 0;
        for (int i = 0; i < np; i++) is_present |= present[i] == st;
        if (!is_present && st == QV_EP_MUL_WSCALE2 && v->arith.dequant == QV_DQ_F32 &&
            v->s2_layout != QV_SCALE_NONE)
            return bad("ep=%s: with dq=f32 the second-level scale ws2 enters the dequantization's scale product, "
                       "not the epilogue; leave it out of ep",
                       text);
        if (!is_present)
            return bad("ep=%s: '%s' is not an epilogue step of this spec (its steps: %d; a ws per group or block, "
                       "or with dq other than exact, is applied in the dequantization)",
                       text, tok, np);
        for (int i = 0; i < no; i++)
            if (order[i] == st) return bad("ep=%s: '%s' is listed twice", text, tok);
        if (no >= QV_EP_MAX) return bad("ep=%s: too many steps", text);
        order[no++] = st;
    }
    if (no != np) return bad("ep=%s: list every epilogue step of this spec once (%d of %d given)", text, no, np);
    int n = 0;
    for (int i = 0; i < QV_EP_MAX; i++) v->arith.epilogue[i] = QV_EP_END;
    for (int i = 0; i < nh; i++) v->arith.epilogue[n++] = head[i];
    for (int i = 0; i < no; i++) v->arith.epilogue[n++] = order[i];
    return QV_OK;
}

static qv_status parse_into(const char *text, qv_variant *v)
{
    memset(v, 0, sizeof *v);
    if (!text || !*text) return bad("empty spec (e.g. w=u4b8,ws=f16/g128; docs/spec.md)");
    if (strlen(text) >= 512) return bad("spec longer than 511 characters");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    /* defaults: f16 weights and activations, tensor core into fp32 */
    v->wfmt = QV_FMT_F16;
    v->afmt = QV_FMT_F16;
    v->arith.accum = QV_ACC_TC_F32;
#ifdef QV_MUTANT_orc_spec_tc_block_b_1
    /* Oracle mutant: the tensor core's alignment block recorded as 1 product. */
    v->arith.block_b = 1;
#else
    v->arith.block_b = 16;
#endif
    v->arith.reduce = QV_RED_F32;
    gran ws = {0}, ws2 = {0}, wz = {0};
    int seen[N_KEYS] = {0}, dq_set = 0, red_set = 0, out_set = 0;
    char ep_text[64] = "";
    if (buf[0] == ',' || buf[strlen(buf) - 1] == ',' || strstr(buf, ",,"))
        return bad("'%s' has an empty key=value pair (pairs are joined by single commas)", text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return bad("'%s' is not key=value", tok);
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        int k = -1;
        for (int i = 0; i < N_KEYS; i++)
            if (!strcmp(keys[i], key)) k = i;
        if (k < 0)
            return bad("unknown key '%s' (keys: w, ws, ws2, wz, wmul, act, dq, a, as, az, acc, red, bias, ep, out)",
                       key);
        if (seen[k]) return bad("key '%s' given twice", key);
        seen[k] = 1;
        if (!*val) return bad("key '%s' has an empty value", key);
        QV_TRY(parse_key(k, val, v, &ws, &ws2, &wz, &dq_set, &red_set, &out_set, ep_text, sizeof ep_text));
    }
    /* layouts */
    v->scale_layout = ws.kind;
    v->g = ws.g;
    v->block_k = ws.bk;
    v->block_n = ws.bn;
    v->s2_layout = ws2.kind;
    if (v->zero_point) {
        v->zp_layout = wz.kind;
        v->zp_g = wz.g;
        v->zp_bk = wz.bk;
        v->zp_bn = wz.bn;
    }
    if (dq_set && v->arith.dequant == QV_DQ_MUL_RN && v->afmt == QV_FMT_I8)
        return bad("dq=rn rounds to the activation format; with a=i8 that rounding is dq=i8");
    /* dq default: rn with f16/bf16 activations, exact otherwise */
    if (!dq_set)
        v->arith.dequant = (v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16) ? QV_DQ_MUL_RN : QV_DQ_EXACT;
    /* Nothing to apply in the dequantization (no scale, no zero point, no
     * multiplier) and weights exact in the multiply's operand format: they
     * enter as they are, whichever rounding was declared (dq=f32 without a
     * scale is refused below instead). */
    double bv;
    if (v->scale_layout == QV_SCALE_NONE && v->zero_point == QV_ZP_NONE && v->arith.w_mul <= 1 &&
        v->arith.dequant != QV_DQ_INT8_RNE && v->arith.dequant != QV_DQ_F32 && weights_exact(v, &bv))
        v->arith.dequant = QV_DQ_NONE;
    /* red default: f32, or none for exact int32 partials */
    if (!red_set) v->arith.reduce = v->arith.accum == QV_ACC_INT32 ? QV_RED_NONE : QV_RED_F32;
    /* out default: the activation format; i32 for an int32 sum with nothing to scale */
    if (!out_set) {
        if (v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16)
            v->ofmt = v->afmt;
        else if (int_out_default(v))
            v->ofmt = QV_FMT_I32;
        else
            v->ofmt = QV_FMT_NONE;
    }
    QV_TRY(check_variant(v, out_set, ep_text[0] != '\0'));
    if (ep_text[0]) {
        QV_TRY(parse_ep(ep_text, v));
    } else {
        qv_spec_default_epilogue(v, v->arith.epilogue);
    }
    v->arith.out_sat = QV_SAT_NONE;
    v->layout = QV_LAYOUT_LOGICAL;
    v->n_tile = 1;
    v->k_tile = 1;
    v->family = "spec";
    v->summary = "declared by a spec (docs/spec.md)";
    v->cpu_model = 1;
    return QV_OK;
}

/* ---- the interned variants ----------------------------------------------------- */

typedef struct interned {
    qv_variant v;
    char name[QV_SPEC_MAX];
    struct interned *next;
} interned;

static interned *spec_list;
static pthread_mutex_t spec_lock = PTHREAD_MUTEX_INITIALIZER;

qv_status qv_spec_parse(const char *text, const qv_variant **out)
{
    *out = NULL;
    qv_variant v;
    QV_TRY(parse_into(text, &v));
    char name[QV_SPEC_MAX];
    if (qv_spec_format(&v, name, sizeof name) < 0) return bad("%s", name);
    pthread_mutex_lock(&spec_lock);
    interned *it = spec_list;
    while (it && strcmp(it->name, name)) it = it->next;
    if (!it) {
        it = calloc(1, sizeof *it);
        if (!it) {
            pthread_mutex_unlock(&spec_lock);
            return qv_fail(QV_ERR_NOMEM, "out of memory for a spec");
        }
        it->v = v;
        snprintf(it->name, sizeof it->name, "%s", name);
        it->v.name = it->name;
        it->next = spec_list;
        spec_list = it;
    }
    pthread_mutex_unlock(&spec_lock);
    *out = &it->v;
    return QV_OK;
}

int qv_is_spec(const char *s) { return s && strchr(s, '=') != NULL; }

qv_status qv_variant_resolve(const char *name_or_spec, const qv_variant **out)
{
    *out = NULL;
    if (!name_or_spec || !*name_or_spec) return qv_fail(QV_ERR_USAGE, "no variant or spec given");
    if (qv_is_spec(name_or_spec)) return qv_spec_parse(name_or_spec, out);
    *out = qv_variant_find(name_or_spec);
    if (!*out)
        return qv_fail(QV_ERR_USAGE, "unknown variant '%s' (qvet list shows the rows; a spec is key=value pairs, "
                       "docs/spec.md)", name_or_spec);
    return QV_OK;
}

/* ---- writing a variant's canonical spec ------------------------------------------ */

/* The spelling of the weight codes: with integer zero points the code's bias
 * is replaced, so u4b8 codes read as u4 (the registry's AWQ rows). */
static const char *w_spelling(const qv_variant *v)
{
    if (v->zero_point == QV_ZP_INT && v->wfmt == QV_FMT_U4) return "u4";
    if (v->zero_point == QV_ZP_INT && v->wfmt == QV_FMT_U8) return "u8";
    return fmt_spelling(w_names, N_OF(w_names), v->wfmt);
}

typedef struct writer {
    char *buf;
    size_t len, at;
} writer;

static void put(writer *w, const char *key, const char *val)
{
    if (w->at >= w->len) return;
    w->at += (size_t)snprintf(w->buf + w->at, w->len - w->at, "%s%s=%s", w->at ? "," : "", key, val);
}

static int fail_fmt(char *buf, size_t len, const char *fmt, const char *what)
{
    snprintf(buf, len, fmt, what);
    return -1;
}

int qv_spec_format(const qv_variant *v, char *buf, size_t len)
{
    writer w = {buf, len, 0};
    char val[64], g[32];
    if (len) buf[0] = '\0';
    const char *ws = w_spelling(v);
    if (!ws) return fail_fmt(buf, len, "weight format %s has no spelling in the spec grammar", fname(v->wfmt));
    const char *sf = fmt_spelling(s_names, N_OF(s_names), v->sfmt);
    const char *af = fmt_spelling(a_names, N_OF(a_names), v->afmt);
    const char *of = fmt_spelling(out_names, N_OF(out_names), v->ofmt);
    if (!af) return fail_fmt(buf, len, "activation format %s has no spelling in the spec grammar", fname(v->afmt));
    if (!of) return fail_fmt(buf, len, "output format %s has no spelling in the spec grammar", fname(v->ofmt));
    if (strcmp(ws, "f16")) put(&w, "w", ws);
    if (v->scale_layout != QV_SCALE_NONE) {
        if (!sf) return fail_fmt(buf, len, "scale format %s has no spelling in the spec grammar", fname(v->sfmt));
        put_gran(g, sizeof g, v->scale_layout, v->g, v->block_k, v->block_n);
        snprintf(val, sizeof val, "%s/%s", sf, g);
        put(&w, "ws", val);
    }
    if (v->s2_layout != QV_SCALE_NONE) {
        const char *s2 = fmt_spelling(s_names, N_OF(s_names), v->s2fmt);
        if (!s2) return fail_fmt(buf, len, "second-level scale format %s has no spelling", fname(v->s2fmt));
        snprintf(val, sizeof val, "%s/%s", s2, v->s2_layout == QV_SCALE_TENSOR ? "t" : "c");
        put(&w, "ws2", val);
    }
    if (v->zero_point != QV_ZP_NONE) {
        put_gran(g, sizeof g, v->zp_layout, v->zp_g, v->zp_bk, v->zp_bn);
        snprintf(val, sizeof val, "%s/%s", v->zero_point == QV_ZP_INT ? "int" : "float", g);
        put(&w, "wz", val);
    }
    if (v->arith.w_mul > 1) {
        snprintf(val, sizeof val, "%d", v->arith.w_mul);
        put(&w, "wmul", val);
    }
    if (v->act_order) put(&w, "act", "gidx");
    /* dq: written when it differs from the default and something is applied */
    int half = v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16;
    qv_dequant dflt = half ? QV_DQ_MUL_RN : QV_DQ_EXACT;
    qv_dequant dq = v->arith.dequant;
    if (dq != QV_DQ_NONE && dq != dflt) {
        static const char *const dq_names[] = {[QV_DQ_EXACT] = "exact", [QV_DQ_MUL_RN] = "rn",
                                               [QV_DQ_MUL_RN2] = "rn2", [QV_DQ_INT8_RNE] = "i8",
                                               [QV_DQ_F32] = "f32"};
        put(&w, "dq", dq_names[dq]);
    } else if (dq == QV_DQ_NONE && (v->scale_layout != QV_SCALE_NONE || v->zero_point) && half) {
        /* a registry row whose scale is applied to sums, not weights */
        put(&w, "dq", "exact");
    }
    if (strcmp(af, "f16")) put(&w, "a", af);
    static const char *const as_names[] = {[QV_ASCALE_TENSOR] = "f32/t", [QV_ASCALE_TOKEN] = "f32/tok",
                                           [QV_ASCALE_TOKEN_BLOCK] = "f32/tok-b128"};
    if (v->act_scale != QV_ASCALE_NONE) put(&w, "as", as_names[v->act_scale]);
    if (v->azp != QV_AZP_NONE) put(&w, "az", v->azp == QV_AZP_TOKEN ? "i32/tok" : "i32/t");
    switch (v->arith.accum) {
    case QV_ACC_TC_F32: break;
    case QV_ACC_FMA_F32: put(&w, "acc", "fma32"); break;
    case QV_ACC_INT32: put(&w, "acc", "i32"); break;
    case QV_ACC_TC_FP8:
        if (v->arith.promote_nc > 0) {
            snprintf(val, sizeof val, "f8p%d", v->arith.promote_nc);
            put(&w, "acc", val);
        } else {
            put(&w, "acc", "f8fast");
        }
        break;
    }
    qv_reduce red_dflt = v->arith.accum == QV_ACC_INT32 ? QV_RED_NONE : QV_RED_F32;
    if (v->arith.reduce != red_dflt) put(&w, "red", v->arith.reduce == QV_RED_F32 ? "f32" : "none");
    if (v->bias_fmt != QV_FMT_NONE) put(&w, "bias", fmt_spelling(bias_names, N_OF(bias_names), v->bias_fmt));
    qv_ep_step dep[QV_EP_MAX];
    qv_spec_default_epilogue(v, dep);
    if (!same_epilogue(v->arith.epilogue, dep)) {
        size_t at = 0;
        val[0] = '\0';
        for (int i = 0; i < QV_EP_MAX && v->arith.epilogue[i] != QV_EP_END; i++)
            for (size_t t = 0; t < N_OF(ep_names); t++)
                if (ep_names[t].step == v->arith.epilogue[i] && at < sizeof val)
                    at += (size_t)snprintf(val + at, sizeof val - at, "%s%s", at ? ":" : "", ep_names[t].name);
        put(&w, "ep", val);
    }
    /* out: written unless it is the default */
    qv_fmt out_dflt = half ? v->afmt : QV_FMT_NONE;
    if (!half && int_out_default(v)) out_dflt = QV_FMT_I32;
    if (v->ofmt != out_dflt) put(&w, "out", of);
    if (w.at == 0) put(&w, "w", "f16"); /* every key at its default: cuBLAS f16 */
    if (w.at >= len) return fail_fmt(buf, len, "%s", "spec longer than the buffer");
    return (int)w.at;
}
