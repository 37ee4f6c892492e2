/* launch_env.c: the QVET_* kernel-path variables read into qv_launch_opts
 * (launch_env.h), the one place of the project that reads them. A table of
 * the variables drives the parser; each kind of value has one parser, and
 * every refusal names the variable, the value, what it accepts and what it
 * steers. */
#include "internal/launch_env.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a variable's text becomes its field. */
typedef enum {
    V_MIN_M,     /* 1..INT_MAX or "off" (QV_OPT_OFF) */
    V_MIN_M0,    /* 0..INT_MAX or "off"; 0 is every M, the same as 1 */
    V_RANGE,     /* lo..hi; 0 (when lo is 0) leaves the field unset */
    V_ZERO_OFF,  /* 0..hi; 0 is QV_OPT_OFF (none, never) */
    V_ZERO_ONE,  /* 0..hi; 0 is 1 (the same meaning: none) */
    V_SWITCH,    /* 0 (QV_OPT_OFF) or 1 (QV_OPT_ON) */
    V_POW2,      /* 1, 2, 4, 8 or 16 */
    V_BLOCK,     /* 64, 128 or 256 */
    V_TILE,      /* a wgmma tile's name */
    V_SMALL,     /* 0, 1, 16, swap or swap2 */
    V_MIB_OFF,   /* a decimal from 0 to QV_CHUNK_MIB_MAX; 0 is QV_OPT_OFF */
    V_MIB_POS,   /* a decimal above 0, at most QV_CHUNK_MIB_MAX */
    V_TRACE      /* 0 or 1 (or 2 with trace2): trace bits */
} var_kind;

typedef struct var_def {
    qv_launch_env_var pub;
    var_kind kind;
    size_t offset; /* of the field in qv_launch_opts */
    long hi;       /* V_RANGE / V_ZERO_*: the largest value; V_RANGE: lo in `lo` */
    long lo;
    unsigned trace1, trace2; /* V_TRACE: the bits of "1" and "2" (0: "2" refused) */
} var_def;

#define OFF(f) offsetof(qv_launch_opts, f)
#define M_TEXT "a whole number from 1 to 2147483647, or \"off\""
#define SW_TEXT "0 or 1"
#define TILE_TEXT "128x256, 256x128, 128x128, 512x64, 128x64, 512x32, 128x32, 512x16 or 128x16"

static const var_def kVars[] = {
    {{"QVET_WO_WG_MIN_M", "wo_wg_min_m", M_TEXT, "the smallest M of the weight-only wgmma kernel"}, V_MIN_M,
     OFF(wo_wg_min_m), 0, 0, 0, 0},
    {{"QVET_WO_WG_TILE", "wo_wg_tile", TILE_TEXT, "the weight-only wgmma kernel's block tile, columns x tokens"},
     V_TILE, OFF(wo_wg_tile), 0, 0, 0, 0},
    {{"QVET_WO_WG_BLOCKS", "wo_wg_blocks", "a whole number from 1 to 264",
      "the blocks the weight-only wgmma kernel's persistent grid is planned on"},
     V_RANGE, OFF(wo_wg_blocks), QV_WG_BLOCKS_MAX, 1, 0, 0},
    {{"QVET_WO_WG_STREAMK", "wo_wg_streamk", SW_TEXT,
      "1: the weight-only wgmma kernel shares its last round of tiles along K, 0: keeps them whole"},
     V_SWITCH, OFF(wo_wg_streamk), 0, 0, 0, 0},
    {{"QVET_WO_SMALL", "wo_small", "0, 1, 16, swap or swap2", "which M the weight-only small-M kernel takes, and how"},
     V_SMALL, OFF(wo_small), 0, 0, 0, 0},
    {{"QVET_WO_SMALL_CLUSTER", "wo_small_cluster", "1, 2, 4, 8 or 16",
      "the largest split-K cluster of the weight-only small-M kernel"},
     V_POW2, OFF(wo_small_cluster), 0, 0, 0, 0},
    {{"QVET_WO_SMALL_SPLITS", "wo_small_splits", "a whole number from 0 to 1048575 (0: the plan's choice)",
      "the K slices of the weight-only small-M kernel"},
     V_RANGE, OFF(wo_small_splits), QV_WO_SMALL_SPLITS_MAX, 0, 0, 0},
    {{"QVET_WO_SMALL_PRE", "wo_small_pre", "a whole number from 0 to 4",
      "the small-M kernel's weight stages requested before it waits for the kernel in front"},
     V_ZERO_OFF, OFF(wo_small_pre), QV_WO_SMALL_PRE_MAX, 0, 0, 0},
    {{"QVET_WO_SMALL_TRACE", "trace", "0, 1 or 2", "1: each small-M launch's plan on stderr, 2: also its time line"},
     V_TRACE, OFF(trace), 0, 0, QV_TRACE_WO_SMALL, QV_TRACE_WO_SMALL | QV_TRACE_WO_SMALL_TIMELINE},
    {{"QVET_WO_DQ_MIN_M", "wo_dq_min_m", "a whole number from 0 to 2147483647, or \"off\"",
      "the smallest M of the weight-only dequantize + cuBLAS path"},
     V_MIN_M0, OFF(wo_dq_min_m), 0, 0, 0, 0},
    {{"QVET_WO_DQ_CHUNK_MB", "wo_dq_chunk_mib", "a decimal number of MiB from 0 to 1048576 (0: one chunk)",
      "the N chunks of the weight-only dequantize + cuBLAS path"},
     V_MIB_OFF, OFF(wo_dq_chunk_mib), 0, 0, 0, 0},
    {{"QVET_WO_DQ_SPLITK", "wo_dq_splitk", SW_TEXT, "1: the dequantize + cuBLAS path splits K inside a chunk"},
     V_SWITCH, OFF(wo_dq_splitk), 0, 0, 0, 0},
    {{"QVET_WO_DQ_OVERLAP", "wo_dq_overlap", SW_TEXT,
      "1: the dequantize + cuBLAS path dequantizes the next chunk on a side stream, 0: one stream"},
     V_SWITCH, OFF(wo_dq_overlap), 0, 0, 0, 0},
    {{"QVET_AQ_WG_MIN_M", "aq_wg_min_m", M_TEXT, "the smallest M of the QQQ wgmma kernel"}, V_MIN_M,
     OFF(aq_wg_min_m), 0, 0, 0, 0},
    {{"QVET_AQ_WG_TILE", "aq_wg_tile", TILE_TEXT, "the QQQ wgmma kernel's block tile, columns x tokens"}, V_TILE,
     OFF(aq_wg_tile), 0, 0, 0, 0},
    {{"QVET_AQ_WG_BLOCKS", "aq_wg_blocks", "a whole number from 1 to 264",
      "the blocks the QQQ wgmma kernel's persistent grid is planned on"},
     V_RANGE, OFF(aq_wg_blocks), QV_WG_BLOCKS_MAX, 1, 0, 0},
    {{"QVET_AQ_WG_STREAMK", "aq_wg_streamk", SW_TEXT,
      "1: the QQQ wgmma kernel shares its last round of tiles along K, 0: keeps them whole"},
     V_SWITCH, OFF(aq_wg_streamk), 0, 0, 0, 0},
    {{"QVET_AQ_WG_PDL", "aq_wg_pdl", SW_TEXT,
      "1: the QQQ wgmma kernel is always a programmatic dependent of the kernel in front, 0: never"},
     V_SWITCH, OFF(aq_wg_pdl), 0, 0, 0, 0},
    {{"QVET_AQ_LT_MIN_M", "aq_lt_min_m", M_TEXT, "the smallest M of the int8 rows' cuBLASLt path"}, V_MIN_M,
     OFF(aq_lt_min_m), 0, 0, 0, 0},
    {{"QVET_AQ_LT_CHUNK_MB", "aq_lt_chunk_mib", "a decimal number of MiB above 0, at most 1048576",
      "the N chunks of the int8 rows' cuBLASLt path"},
     V_MIB_POS, OFF(aq_lt_chunk_mib), 0, 0, 0, 0},
    {{"QVET_AQ_LT_FP8_MIN_M", "aq_lt_fp8_min_m", M_TEXT, "the smallest M of the e4m3 rows' cuBLASLt path"},
     V_MIN_M, OFF(aq_lt_fp8_min_m), 0, 0, 0, 0},
    {{"QVET_AQ_LT_FP8_BLK_MIN_M", "aq_lt_fp8_blk_min_m", M_TEXT,
      "the smallest M of the block row's BLK128x128 cuBLASLt form"},
     V_MIN_M, OFF(aq_lt_fp8_blk_min_m), 0, 0, 0, 0},
    {{"QVET_AQ_LT_FP8_OUTER_MIN_M", "aq_lt_fp8_outer_min_m", M_TEXT,
      "the smallest M of the per token x channel row's outer-vector cuBLASLt form"},
     V_MIN_M, OFF(aq_lt_fp8_outer_min_m), 0, 0, 0, 0},
    {{"QVET_LT_TRACE", "trace", SW_TEXT, "1: every cuBLASLt algorithm the heuristic gives, on stderr"}, V_TRACE,
     OFF(trace), 0, 0, QV_TRACE_LT, 0},
    {{"QVET_AQ_CLUSTER_M", "act_quant_cluster_max_m", "a whole number from 0 to 2147483647",
      "the largest M whose long rows activation quantization spreads over a cluster (0: none)"},
     V_ZERO_OFF, OFF(act_quant_cluster_max_m), QV_OPT_M_MAX, 0, 0, 0},
    {{"QVET_AQ_BLOCKS_PER_SM", "aq_blocks_per_sm", "a whole number from 1 to 32",
      "the blocks per SM the W4A8 / W8A8 mma kernel's split-K plan fills"},
     V_RANGE, OFF(aq_blocks_per_sm), QV_AQ_BLOCKS_PER_SM_MAX, 1, 0, 0},
    {{"QVET_AQ_SPLITS", "aq_splits", "a whole number from 1 to 65535",
      "the K slices of the W4A8 / W8A8 mma kernel"},
     V_RANGE, OFF(aq_splits), QV_AQ_SPLITS_MAX, 1, 0, 0},
    {{"QVET_AQ_TRACE", "trace", SW_TEXT, "1: each W4A8 / W8A8 mma-kernel launch's plan on stderr"}, V_TRACE,
     OFF(trace), 0, 0, QV_TRACE_AQ, 0},
    {{"QVET_AQ_CLUSTER_MAX", "aq_cluster_max", "a whole number from 0 to 16 (0 and 1: none)",
      "the largest split-K cluster of the W4A8 / W8A8 mma kernel"},
     V_ZERO_ONE, OFF(aq_cluster_max), QV_AQ_CLUSTER_MAX, 0, 0, 0},
    {{"QVET_AQ_PDL_MAX_M", "aq_pdl_max_m", "a whole number from 0 to 2147483647 (0: never)",
      "the largest M at which the W4A8 / W8A8 mma kernel is a programmatic dependent"},
     V_ZERO_OFF, OFF(aq_pdl_max_m), QV_OPT_M_MAX, 0, 0, 0},
    {{"QVET_MOE_WG_MIN_ROWS", "moe_wg_min_rows", M_TEXT,
      "the smallest mean of rows per expert at which a routed layer's grouped GEMM runs on wgmma"},
     V_MIN_M, OFF(moe_wg_min_rows), 0, 0, 0, 0},
    {{"QVET_MOE_WG_BLOCK", "moe_wg_block", "64, 128 or 256",
      "the slot block of the routed layer's wgmma grouped GEMM (the sort pads each expert to it)"},
     V_BLOCK, OFF(moe_wg_block), 0, 0, 0, 0},
    {{"QVET_MOE_WG_PAIRS", "moe_wg_pairs", SW_TEXT,
      "whether the routed layer's wgmma grouped GEMM pairs an expert's 128-slot blocks into 256-slot tiles"},
     V_SWITCH, OFF(moe_wg_pairs), 0, 0, 0, 0},
    {{"QVET_MOE_WG_FIT", "moe_wg_fit", SW_TEXT,
      "whether the routed layer's wgmma grouped GEMM fits each expert's 64-slot blocks into tiles of up to 256 slots"},
     V_SWITCH, OFF(moe_wg_fit), 0, 0, 0, 0},
    {{"QVET_MOE_KSPLIT", "moe_ksplit", "a whole number from 1 to 8 (1: none)",
      "the K parts of the routed layer's mma.sync grouped GEMM, summed in order by the combine"},
     V_RANGE, OFF(moe_ksplit), QV_MOE_KSPLIT_MAX, 1, 0, 0},
};
#define N_VARS ((int)(sizeof kVars / sizeof kVars[0]))

const qv_launch_env_var *qv_launch_env_vars(int *count)
{
    /* The public part is the first member of each definition. */
    static qv_launch_env_var pub[N_VARS];
    for (int i = 0; i < N_VARS; i++) pub[i] = kVars[i].pub;
    *count = N_VARS;
    return pub;
}

/* A whole number in digits only (no sign, no spaces) up to 2147483647; 0
 * when s is anything else. */
static int whole(const char *s, long *out)
{
    if (!*s || strlen(s) > 10) return 0;
    long v = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9') return 0;
        v = 10 * v + (*c - '0');
    }
    if (v > QV_OPT_M_MAX) return 0;
    *out = v;
    return 1;
}

/* A finite decimal number (digits, one point, an exponent; no sign, no
 * spaces, no "inf" or "nan"); 0 when s is anything else. */
static int decimal(const char *s, double *out)
{
    if (!((*s >= '0' && *s <= '9') || *s == '.')) return 0;
    char *end = NULL;
    const double v = strtod(s, &end);
    if (!end || *end != '\0' || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static void set_int(qv_launch_opts *o, size_t off, int v) { memcpy((char *)o + off, &v, sizeof v); }

/* Parses one variable's value into o; 0 when the value is refused. */
static int parse_one(const var_def *d, const char *s, qv_launch_opts *o)
{
    long w = 0;
    double x = 0;
    switch (d->kind) {
    case V_MIN_M:
    case V_MIN_M0:
        if (!strcmp(s, "off")) {
            set_int(o, d->offset, QV_OPT_OFF);
            return 1;
        }
        if (!whole(s, &w) || (w < 1 && d->kind == V_MIN_M)) return 0;
        set_int(o, d->offset, w < 1 ? 1 : (int)w);
        return 1;
    case V_RANGE:
        if (!whole(s, &w) || w < d->lo || w > d->hi) return 0;
        set_int(o, d->offset, (int)w);
        return 1;
    case V_BLOCK:
        if (strcmp(s, "64") && strcmp(s, "128") && strcmp(s, "256")) return 0;
        set_int(o, d->offset, (int)strtol(s, NULL, 10));
        return 1;
    case V_ZERO_OFF:
    case V_ZERO_ONE:
        if (!whole(s, &w) || w > d->hi) return 0;
        set_int(o, d->offset, w > 0 ? (int)w : d->kind == V_ZERO_OFF ? QV_OPT_OFF : 1);
        return 1;
    case V_SWITCH:
        if (strcmp(s, "0") && strcmp(s, "1")) return 0;
        set_int(o, d->offset, s[0] == '1' ? QV_OPT_ON : QV_OPT_OFF);
        return 1;
    case V_POW2:
        if (!whole(s, &w) || (w != 1 && w != 2 && w != 4 && w != 8 && w != QV_WO_SMALL_CLUSTER_MAX)) return 0;
        set_int(o, d->offset, (int)w);
        return 1;
    case V_TILE: {
        static const char *const names[] = {"128x256", "256x128", "128x128", "512x64", "128x64",
                                            "512x32",  "128x32",  "512x16",  "128x16"};
        for (int t = 0; t < (int)(sizeof names / sizeof names[0]); t++)
            if (!strcmp(s, names[t])) {
                set_int(o, d->offset, QV_WG_TILE_128X256 + t);
                return 1;
            }
        return 0;
    }
    case V_SMALL: {
        static const struct {
            const char *text;
            qv_wo_small_mode mode;
        } modes[] = {{"0", QV_WO_SMALL_NEVER},
                     {"1", QV_WO_SMALL_M16_8},
                     {"16", QV_WO_SMALL_M16_16},
                     {"swap", QV_WO_SMALL_SWAP},
                     {"swap2", QV_WO_SMALL_SWAP2}};
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            if (!strcmp(s, modes[i].text)) {
                set_int(o, d->offset, (int)modes[i].mode);
                return 1;
            }
        return 0;
    }
    case V_MIB_OFF:
    case V_MIB_POS:
        if (!decimal(s, &x) || x > QV_CHUNK_MIB_MAX || (x <= 0.0 && d->kind == V_MIB_POS)) return 0;
        x = x > 0.0 ? x : (double)QV_OPT_OFF;
        memcpy((char *)o + d->offset, &x, sizeof x);
        return 1;
    case V_TRACE:
        if (!strcmp(s, "0")) return 1;
        if (!strcmp(s, "1")) o->trace |= d->trace1;
        else if (!strcmp(s, "2") && d->trace2) o->trace |= d->trace2;
        else return 0;
        return 1;
    }
    return 0;
}

qv_status qv_launch_env_parse(qv_env_get_fn get, void *ctx, qv_launch_opts *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < N_VARS; i++) {
        const var_def *d = &kVars[i];
        const char *s = get(d->pub.name, ctx);
        if (!s) continue;
        if (!parse_one(d, s, out)) {
            memset(out, 0, sizeof *out);
            return qv_fail(QV_ERR_USAGE, "%s=\"%s\": expected %s (%s), or the variable unset for the tuned default",
                           d->pub.name, s, d->pub.accepted, d->pub.steers);
        }
    }
    return QV_OK;
}

static const char *get_env(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

qv_status qv_launch_env_read(qv_launch_opts *out) { return qv_launch_env_parse(get_env, NULL, out); }

int qv_cli_launch_env(const char *cmd, qv_launch_opts *out)
{
    if (qv_launch_env_read(out) == QV_OK) return 0;
    fprintf(stderr, "qvet %s: %s\n", cmd, qv_errmsg());
    return 2;
}

/* Every field of qv_launch_opts, for the overlay: ints and enums (int-sized),
 * the two chunk sizes, and the trace bits. */
static const size_t kIntFields[] = {
    OFF(wo_wg_min_m),     OFF(wo_wg_tile),      OFF(wo_wg_blocks),  OFF(wo_wg_streamk),    OFF(wo_small),
    OFF(wo_small_cluster), OFF(wo_small_splits), OFF(wo_small_pre), OFF(wo_dq_min_m),      OFF(wo_dq_splitk),
    OFF(wo_dq_overlap),   OFF(aq_wg_min_m),     OFF(aq_wg_tile),    OFF(aq_wg_blocks),     OFF(aq_wg_streamk),
    OFF(aq_wg_pdl),       OFF(aq_lt_min_m),     OFF(aq_lt_fp8_min_m), OFF(aq_lt_fp8_blk_min_m),
    OFF(aq_lt_fp8_outer_min_m), OFF(aq_blocks_per_sm), OFF(aq_splits), OFF(aq_cluster_max), OFF(aq_pdl_max_m),
    OFF(act_quant_cluster_max_m), OFF(moe_wg_min_rows), OFF(moe_wg_block), OFF(moe_wg_pairs), OFF(moe_wg_fit),
    OFF(moe_ksplit),
    OFF(sms),             OFF(arch)};
static const size_t kMibFields[] = {OFF(wo_dq_chunk_mib), OFF(aq_lt_chunk_mib)};
/* The two enums are stored as ints (the overlay copies them as such). */
_Static_assert(sizeof(qv_wg_tile) == sizeof(int) && sizeof(qv_wo_small_mode) == sizeof(int),
               "the option enums are int-sized");

void qv_launch_opts_overlay(qv_launch_opts *base, const qv_launch_opts *over)
{
    for (size_t i = 0; i < sizeof kIntFields / sizeof kIntFields[0]; i++) {
        int v;
        memcpy(&v, (const char *)over + kIntFields[i], sizeof v);
        if (v) memcpy((char *)base + kIntFields[i], &v, sizeof v);
    }
    for (size_t i = 0; i < sizeof kMibFields / sizeof kMibFields[0]; i++) {
        double v;
        memcpy(&v, (const char *)over + kMibFields[i], sizeof v);
        if (v != 0.0) memcpy((char *)base + kMibFields[i], &v, sizeof v);
    }
    base->trace |= over->trace;
}
