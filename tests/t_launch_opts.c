/* t_launch_opts.c: the kernel paths' launch options on the CPU.
 *  - The environment parser (src/launch_env.c), fed through a table of
 *    (variable, value) pairs, never the process environment: every variable
 *    takes each value docs/launch-options.md lists, into the field and the
 *    value derived here by hand from that page; refuses values out of its
 *    range, non-numeric and empty, with a message naming the variable and
 *    what it accepts, and leaves the options all unset then; with nothing
 *    set every field is unset (the tuned defaults). Every accepted value
 *    passes qv_launch_opts_check, and every variable and field stands in
 *    docs/launch-options.md.
 *  - The `qvet` subcommands that launch kernels refuse a bad variable with
 *    that message and exit 2 before any work.
 *  - qv_launch_opts_check: every field refused out of its range, by name.
 *  - The workspace query (planned for the H200: 132 SMs, compute capability
 *    9.0, no CUDA call) is the largest over the paths the options allow: a
 *    path the options turn off adds nothing, and the default is the largest
 *    of the single-path queries, in bytes derived by hand.
 *  - The overlay the test harness builds its cases with. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/launch_env.h"
#include "internal/tuning.h"
#include "internal/wonly_plan.h"
#include "qvet/gemm.h"
#include "qvet/variant.h"
#include "support/cli.h"
#include "support/suite.h"

#define H200 .sms = 132, .arch = 90

/* ---- the parser, fed from a table --------------------------------------------- */

typedef struct env_pair {
    const char *name, *value;
} env_pair;

/* ctx: a NULL-terminated array of env_pair. */
static const char *table_get(const char *name, void *ctx)
{
    for (const env_pair *p = ctx; p->name; p++)
        if (!strcmp(p->name, name)) return p->value;
    return NULL;
}

static qv_status parse_one(const char *name, const char *value, qv_launch_opts *out)
{
    env_pair t[2] = {{name, value}, {NULL, NULL}};
    return qv_launch_env_parse(table_get, t, out);
}

/* An accepted value and the options it must give (every other field unset). */
typedef struct accept_case {
    const char *name, *value;
    qv_launch_opts want;
} accept_case;

static const accept_case kAccept[] = {
    {"QVET_WO_WG_MIN_M", "1", {.wo_wg_min_m = 1}},
    {"QVET_WO_WG_MIN_M", "2147483647", {.wo_wg_min_m = 2147483647}},
    {"QVET_WO_WG_MIN_M", "off", {.wo_wg_min_m = QV_OPT_OFF}},
    {"QVET_WO_WG_TILE", "128x256", {.wo_wg_tile = QV_WG_TILE_128X256}},
    {"QVET_WO_WG_TILE", "256x128", {.wo_wg_tile = QV_WG_TILE_256X128}},
    {"QVET_WO_WG_TILE", "128x128", {.wo_wg_tile = QV_WG_TILE_128X128}},
    {"QVET_WO_WG_TILE", "512x64", {.wo_wg_tile = QV_WG_TILE_512X64}},
    {"QVET_WO_WG_TILE", "128x64", {.wo_wg_tile = QV_WG_TILE_128X64}},
    {"QVET_WO_WG_TILE", "512x32", {.wo_wg_tile = QV_WG_TILE_512X32}},
    {"QVET_WO_WG_TILE", "128x32", {.wo_wg_tile = QV_WG_TILE_128X32}},
    {"QVET_WO_WG_TILE", "512x16", {.wo_wg_tile = QV_WG_TILE_512X16}},
    {"QVET_WO_WG_TILE", "128x16", {.wo_wg_tile = QV_WG_TILE_128X16}},
    {"QVET_WO_WG_BLOCKS", "1", {.wo_wg_blocks = 1}},
    {"QVET_WO_WG_BLOCKS", "264", {.wo_wg_blocks = 264}},
    {"QVET_WO_WG_STREAMK", "0", {.wo_wg_streamk = QV_OPT_OFF}},
    {"QVET_WO_WG_STREAMK", "1", {.wo_wg_streamk = QV_OPT_ON}},
    {"QVET_WO_SMALL", "0", {.wo_small = QV_WO_SMALL_NEVER}},
    {"QVET_WO_SMALL", "1", {.wo_small = QV_WO_SMALL_M16_8}},
    {"QVET_WO_SMALL", "16", {.wo_small = QV_WO_SMALL_M16_16}},
    {"QVET_WO_SMALL", "swap", {.wo_small = QV_WO_SMALL_SWAP}},
    {"QVET_WO_SMALL", "swap2", {.wo_small = QV_WO_SMALL_SWAP2}},
    {"QVET_WO_SMALL_CLUSTER", "1", {.wo_small_cluster = 1}},
    {"QVET_WO_SMALL_CLUSTER", "2", {.wo_small_cluster = 2}},
    {"QVET_WO_SMALL_CLUSTER", "4", {.wo_small_cluster = 4}},
    {"QVET_WO_SMALL_CLUSTER", "8", {.wo_small_cluster = 8}},
    {"QVET_WO_SMALL_CLUSTER", "16", {.wo_small_cluster = 16}},
    {"QVET_WO_SMALL_SPLITS", "0", {0}},
    {"QVET_WO_SMALL_SPLITS", "1", {.wo_small_splits = 1}},
    {"QVET_WO_SMALL_SPLITS", "1048575", {.wo_small_splits = 1048575}},
    {"QVET_WO_SMALL_PRE", "0", {.wo_small_pre = QV_OPT_OFF}},
    {"QVET_WO_SMALL_PRE", "1", {.wo_small_pre = 1}},
    {"QVET_WO_SMALL_PRE", "4", {.wo_small_pre = 4}},
    {"QVET_WO_SMALL_TRACE", "0", {0}},
    {"QVET_WO_SMALL_TRACE", "1", {.trace = QV_TRACE_WO_SMALL}},
    {"QVET_WO_SMALL_TRACE", "2", {.trace = QV_TRACE_WO_SMALL | QV_TRACE_WO_SMALL_TIMELINE}},
    {"QVET_WO_DQ_MIN_M", "0", {.wo_dq_min_m = 1}}, /* every M, as M >= 1 */
    {"QVET_WO_DQ_MIN_M", "1", {.wo_dq_min_m = 1}},
    {"QVET_WO_DQ_MIN_M", "1000000000", {.wo_dq_min_m = 1000000000}},
    {"QVET_WO_DQ_MIN_M", "off", {.wo_dq_min_m = QV_OPT_OFF}},
    {"QVET_WO_DQ_CHUNK_MB", "0", {.wo_dq_chunk_mib = QV_OPT_OFF}},
    {"QVET_WO_DQ_CHUNK_MB", "0.01", {.wo_dq_chunk_mib = 0.01}},
    {"QVET_WO_DQ_CHUNK_MB", "24", {.wo_dq_chunk_mib = 24}},
    {"QVET_WO_DQ_CHUNK_MB", "1048576", {.wo_dq_chunk_mib = 1048576}},
    {"QVET_WO_DQ_SPLITK", "0", {.wo_dq_splitk = QV_OPT_OFF}},
    {"QVET_WO_DQ_SPLITK", "1", {.wo_dq_splitk = QV_OPT_ON}},
    {"QVET_WO_DQ_OVERLAP", "0", {.wo_dq_overlap = QV_OPT_OFF}},
    {"QVET_WO_DQ_OVERLAP", "1", {.wo_dq_overlap = QV_OPT_ON}},
    {"QVET_AQ_WG_MIN_M", "1", {.aq_wg_min_m = 1}},
    {"QVET_AQ_WG_MIN_M", "17", {.aq_wg_min_m = 17}},
    {"QVET_AQ_WG_MIN_M", "off", {.aq_wg_min_m = QV_OPT_OFF}},
    {"QVET_AQ_WG_TILE", "128x16", {.aq_wg_tile = QV_WG_TILE_128X16}},
    {"QVET_AQ_WG_TILE", "128x256", {.aq_wg_tile = QV_WG_TILE_128X256}},
    {"QVET_AQ_WG_BLOCKS", "1", {.aq_wg_blocks = 1}},
    {"QVET_AQ_WG_BLOCKS", "264", {.aq_wg_blocks = 264}},
    {"QVET_AQ_WG_STREAMK", "0", {.aq_wg_streamk = QV_OPT_OFF}},
    {"QVET_AQ_WG_STREAMK", "1", {.aq_wg_streamk = QV_OPT_ON}},
    {"QVET_AQ_WG_PDL", "0", {.aq_wg_pdl = QV_OPT_OFF}},
    {"QVET_AQ_WG_PDL", "1", {.aq_wg_pdl = QV_OPT_ON}},
    {"QVET_AQ_LT_MIN_M", "1", {.aq_lt_min_m = 1}},
    {"QVET_AQ_LT_MIN_M", "2000000000", {.aq_lt_min_m = 2000000000}},
    {"QVET_AQ_LT_MIN_M", "off", {.aq_lt_min_m = QV_OPT_OFF}},
    {"QVET_AQ_LT_CHUNK_MB", "0.000001", {.aq_lt_chunk_mib = 0.000001}},
    {"QVET_AQ_LT_CHUNK_MB", "48", {.aq_lt_chunk_mib = 48}},
    {"QVET_AQ_LT_CHUNK_MB", "1048576", {.aq_lt_chunk_mib = 1048576}},
    {"QVET_AQ_LT_FP8_MIN_M", "1", {.aq_lt_fp8_min_m = 1}},
    {"QVET_AQ_LT_FP8_MIN_M", "off", {.aq_lt_fp8_min_m = QV_OPT_OFF}},
    {"QVET_AQ_LT_FP8_BLK_MIN_M", "64", {.aq_lt_fp8_blk_min_m = 64}},
    {"QVET_AQ_LT_FP8_BLK_MIN_M", "off", {.aq_lt_fp8_blk_min_m = QV_OPT_OFF}},
    {"QVET_AQ_LT_FP8_OUTER_MIN_M", "1", {.aq_lt_fp8_outer_min_m = 1}},
    {"QVET_AQ_LT_FP8_OUTER_MIN_M", "off", {.aq_lt_fp8_outer_min_m = QV_OPT_OFF}},
    {"QVET_LT_TRACE", "0", {0}},
    {"QVET_LT_TRACE", "1", {.trace = QV_TRACE_LT}},
    {"QVET_AQ_CLUSTER_M", "0", {.act_quant_cluster_max_m = QV_OPT_OFF}},
    {"QVET_AQ_CLUSTER_M", "128", {.act_quant_cluster_max_m = 128}},
    {"QVET_AQ_CLUSTER_M", "2147483647", {.act_quant_cluster_max_m = 2147483647}},
    {"QVET_AQ_BLOCKS_PER_SM", "1", {.aq_blocks_per_sm = 1}},
    {"QVET_AQ_BLOCKS_PER_SM", "32", {.aq_blocks_per_sm = 32}},
    {"QVET_AQ_SPLITS", "1", {.aq_splits = 1}},
    {"QVET_AQ_SPLITS", "65535", {.aq_splits = 65535}},
    {"QVET_AQ_TRACE", "0", {0}},
    {"QVET_AQ_TRACE", "1", {.trace = QV_TRACE_AQ}},
    {"QVET_AQ_CLUSTER_MAX", "0", {.aq_cluster_max = 1}}, /* 0 and 1: no cluster */
    {"QVET_AQ_CLUSTER_MAX", "1", {.aq_cluster_max = 1}},
    {"QVET_AQ_CLUSTER_MAX", "16", {.aq_cluster_max = 16}},
    {"QVET_AQ_PDL_MAX_M", "0", {.aq_pdl_max_m = QV_OPT_OFF}},
    {"QVET_AQ_PDL_MAX_M", "8", {.aq_pdl_max_m = 8}},
    {"QVET_AQ_PDL_MAX_M", "100000", {.aq_pdl_max_m = 100000}},
    {"QVET_MOE_WG_MIN_ROWS", "1", {.moe_wg_min_rows = 1}},
    {"QVET_MOE_WG_MIN_ROWS", "off", {.moe_wg_min_rows = QV_OPT_OFF}},
    {"QVET_MOE_WG_BLOCK", "64", {.moe_wg_block = 64}},
    {"QVET_MOE_WG_BLOCK", "128", {.moe_wg_block = 128}},
    {"QVET_MOE_WG_BLOCK", "256", {.moe_wg_block = 256}},
    {"QVET_MOE_WG_PAIRS", "0", {.moe_wg_pairs = QV_OPT_OFF}},
    {"QVET_MOE_WG_PAIRS", "1", {.moe_wg_pairs = QV_OPT_ON}},
    {"QVET_MOE_WG_FIT", "0", {.moe_wg_fit = QV_OPT_OFF}},
    {"QVET_MOE_WG_FIT", "1", {.moe_wg_fit = QV_OPT_ON}},
    {"QVET_MOE_KSPLIT", "1", {.moe_ksplit = 1}},
    {"QVET_MOE_KSPLIT", "8", {.moe_ksplit = 8}},
};
#define N_ACCEPT ((int)(sizeof kAccept / sizeof kAccept[0]))

START_TEST(every_value_accepted)
{
    const accept_case *c = &kAccept[_i];
    qv_launch_opts got;
    memset(&got, 0x5a, sizeof got);
    ck_assert_msg(parse_one(c->name, c->value, &got) == QV_OK, "%s=%s refused: %s", c->name, c->value, qv_errmsg());
    /* Field by field, so that a wrong one is named. */
    ck_assert_int_eq(got.wo_wg_min_m, c->want.wo_wg_min_m);
    ck_assert_int_eq(got.wo_wg_tile, c->want.wo_wg_tile);
    ck_assert_int_eq(got.wo_wg_blocks, c->want.wo_wg_blocks);
    ck_assert_int_eq(got.wo_wg_streamk, c->want.wo_wg_streamk);
    ck_assert_int_eq(got.wo_small, c->want.wo_small);
    ck_assert_int_eq(got.wo_small_cluster, c->want.wo_small_cluster);
    ck_assert_int_eq(got.wo_small_splits, c->want.wo_small_splits);
    ck_assert_int_eq(got.wo_small_pre, c->want.wo_small_pre);
    ck_assert_int_eq(got.wo_dq_min_m, c->want.wo_dq_min_m);
    ck_assert_double_eq(got.wo_dq_chunk_mib, c->want.wo_dq_chunk_mib);
    ck_assert_int_eq(got.wo_dq_splitk, c->want.wo_dq_splitk);
    ck_assert_int_eq(got.wo_dq_overlap, c->want.wo_dq_overlap);
    ck_assert_int_eq(got.aq_wg_min_m, c->want.aq_wg_min_m);
    ck_assert_int_eq(got.aq_wg_tile, c->want.aq_wg_tile);
    ck_assert_int_eq(got.aq_wg_blocks, c->want.aq_wg_blocks);
    ck_assert_int_eq(got.aq_wg_streamk, c->want.aq_wg_streamk);
    ck_assert_int_eq(got.aq_wg_pdl, c->want.aq_wg_pdl);
    ck_assert_int_eq(got.aq_lt_min_m, c->want.aq_lt_min_m);
    ck_assert_double_eq(got.aq_lt_chunk_mib, c->want.aq_lt_chunk_mib);
    ck_assert_int_eq(got.aq_lt_fp8_min_m, c->want.aq_lt_fp8_min_m);
    ck_assert_int_eq(got.aq_lt_fp8_blk_min_m, c->want.aq_lt_fp8_blk_min_m);
    ck_assert_int_eq(got.aq_lt_fp8_outer_min_m, c->want.aq_lt_fp8_outer_min_m);
    ck_assert_int_eq(got.aq_blocks_per_sm, c->want.aq_blocks_per_sm);
    ck_assert_int_eq(got.aq_splits, c->want.aq_splits);
    ck_assert_int_eq(got.aq_cluster_max, c->want.aq_cluster_max);
    ck_assert_int_eq(got.aq_pdl_max_m, c->want.aq_pdl_max_m);
    ck_assert_int_eq(got.act_quant_cluster_max_m, c->want.act_quant_cluster_max_m);
    ck_assert_int_eq(got.moe_wg_min_rows, c->want.moe_wg_min_rows);
    ck_assert_int_eq(got.moe_wg_block, c->want.moe_wg_block);
    ck_assert_int_eq(got.moe_wg_pairs, c->want.moe_wg_pairs);
    ck_assert_int_eq(got.moe_wg_fit, c->want.moe_wg_fit);
    ck_assert_int_eq(got.moe_ksplit, c->want.moe_ksplit);
    ck_assert_int_eq(got.sms, 0);
    ck_assert_int_eq(got.arch, 0);
    ck_assert_uint_eq(got.trace, c->want.trace);
    ck_assert_msg(qv_launch_opts_check(&got) == QV_OK, "%s=%s: %s", c->name, c->value, qv_errmsg());
}
END_TEST

/* Values each variable refuses: out of its range, not a number (or not one
 * of its words), empty, signed or with spaces. */
typedef struct refuse_case {
    const char *name;
    const char *values[8]; /* NULL-terminated */
} refuse_case;

#define M_BAD "0", "-1", "2147483648", "abc", "12x", " 5", "OFF"
static const refuse_case kRefuse[] = {
    {"QVET_WO_WG_MIN_M", {M_BAD}},
    {"QVET_WO_WG_TILE", {"96", "512x8", "1024x16", "128x256x", "128X256", "default"}},
    {"QVET_WO_WG_BLOCKS", {"0", "265", "-3", "12x", "1.5"}},
    {"QVET_WO_WG_STREAMK", {"2", "-1", "on", "01"}},
    {"QVET_WO_SMALL", {"2", "8", "auto", "swap3", "-1"}},
    {"QVET_WO_SMALL_CLUSTER", {"0", "3", "32", "-8", "x"}},
    {"QVET_WO_SMALL_SPLITS", {"1048576", "-1", "x", "1e3"}},
    {"QVET_WO_SMALL_PRE", {"5", "-1", "x", "1.5", "2 "}},
    {"QVET_WO_SMALL_TRACE", {"3", "yes", "-1"}},
    {"QVET_WO_DQ_MIN_M", {"-1", "63.5", "x", "2147483648"}},
    {"QVET_WO_DQ_CHUNK_MB", {"-1", "nan", "inf", "2e6", "4MB", "1048577"}},
    {"QVET_WO_DQ_SPLITK", {"2", "yes", "0.5"}},
    {"QVET_WO_DQ_OVERLAP", {"2", "no"}},
    {"QVET_AQ_WG_MIN_M", {M_BAD}},
    {"QVET_AQ_WG_TILE", {"64", "128x256x", "512x8", "1024x16"}},
    {"QVET_AQ_WG_BLOCKS", {"0", "265", "-1"}},
    {"QVET_AQ_WG_STREAMK", {"2", "x"}},
    {"QVET_AQ_WG_PDL", {"2", "-1", "auto"}},
    {"QVET_AQ_LT_MIN_M", {M_BAD}},
    {"QVET_AQ_LT_CHUNK_MB", {"0", "-1", "nan", "inf", "2e6", "4MB"}},
    {"QVET_AQ_LT_FP8_MIN_M", {M_BAD}},
    {"QVET_AQ_LT_FP8_BLK_MIN_M", {M_BAD}},
    {"QVET_AQ_LT_FP8_OUTER_MIN_M", {M_BAD}},
    {"QVET_LT_TRACE", {"2", "yes"}},
    {"QVET_AQ_CLUSTER_M", {"-1", "x", "2147483648", "1.5"}},
    {"QVET_AQ_BLOCKS_PER_SM", {"0", "33", "-1", "x"}},
    {"QVET_AQ_SPLITS", {"0", "65536", "x"}},
    {"QVET_AQ_TRACE", {"2", "x"}},
    {"QVET_AQ_CLUSTER_MAX", {"17", "-1", "x"}},
    {"QVET_AQ_PDL_MAX_M", {"-1", "x", "2147483648"}},
    {"QVET_MOE_WG_MIN_ROWS", {M_BAD}},
    {"QVET_MOE_WG_BLOCK", {"0", "32", "96", "512", "064", "x", "-64"}},
    {"QVET_MOE_WG_PAIRS", {"2", "-1", "on", "01"}},
    {"QVET_MOE_WG_FIT", {"2", "-1", "yes", "10"}},
    {"QVET_MOE_KSPLIT", {"0", "9", "-1", "x", "1.5"}},
};
#define N_REFUSE ((int)(sizeof kRefuse / sizeof kRefuse[0]))

START_TEST(every_variable_refuses)
{
    const refuse_case *c = &kRefuse[_i];
    int n = 0;
    /* The empty value first: a variable set to nothing is refused too. */
    static const char *const empty = "";
    for (int v = -1; v < 8 && (v < 0 || c->values[v]); v++, n++) {
        const char *val = v < 0 ? empty : c->values[v];
        qv_launch_opts got;
        memset(&got, 0x5a, sizeof got);
        ck_assert_msg(parse_one(c->name, val, &got) == QV_ERR_USAGE, "%s=\"%s\" accepted", c->name, val);
        const char *msg = qv_errmsg();
        ck_assert_msg(strstr(msg, c->name) != NULL, "%s=\"%s\": message without the variable: %s", c->name, val, msg);
        ck_assert_msg(strstr(msg, "expected") != NULL, "%s=\"%s\": message without what it takes: %s", c->name, val,
                      msg);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", val);
        ck_assert_msg(strstr(msg, quoted) != NULL, "%s=\"%s\": message without the value: %s", c->name, val, msg);
        /* Nothing half-parsed is left behind. */
        static const qv_launch_opts zero;
        ck_assert_msg(!memcmp(&got, &zero, sizeof got), "%s=\"%s\": options left set", c->name, val);
    }
    ck_assert_int_ge(n, 3);
}
END_TEST

/* Every variable has a refusal case and an accepted case above; the table
 * of the parser lists exactly those. */
START_TEST(cases_cover_every_variable)
{
    int count = 0;
    const qv_launch_env_var *vars = qv_launch_env_vars(&count);
    ck_assert_int_eq(count, 35);
    ck_assert_int_eq(N_REFUSE, count);
    for (int i = 0; i < count; i++) {
        int accepted = 0, refused = 0;
        for (int a = 0; a < N_ACCEPT; a++) accepted += !strcmp(kAccept[a].name, vars[i].name);
        for (int r = 0; r < N_REFUSE; r++) refused += !strcmp(kRefuse[r].name, vars[i].name);
        ck_assert_msg(accepted >= 2 && refused == 1, "%s: %d accepted cases, %d refusal cases", vars[i].name, accepted,
                      refused);
    }
}
END_TEST

START_TEST(unset_is_every_default)
{
    const env_pair none[1] = {{NULL, NULL}};
    qv_launch_opts got;
    memset(&got, 0x5a, sizeof got);
    ck_assert_int_eq(qv_launch_env_parse(table_get, (void *)none, &got), QV_OK);
    static const qv_launch_opts zero;
    ck_assert(!memcmp(&got, &zero, sizeof got));
    ck_assert_int_eq(qv_launch_opts_check(&got), QV_OK);
    ck_assert_int_eq(qv_launch_opts_check(NULL), QV_OK);
    /* Several at once: each in its field, the trace bits together. */
    const env_pair some[] = {{"QVET_WO_WG_MIN_M", "off"},
                             {"QVET_AQ_SPLITS", "5"},
                             {"QVET_AQ_TRACE", "1"},
                             {"QVET_LT_TRACE", "1"},
                             {"QVET_WO_SMALL_TRACE", "2"},
                             {NULL, NULL}};
    ck_assert_int_eq(qv_launch_env_parse(table_get, (void *)some, &got), QV_OK);
    ck_assert_int_eq(got.wo_wg_min_m, QV_OPT_OFF);
    ck_assert_int_eq(got.aq_splits, 5);
    ck_assert_uint_eq(got.trace, QV_TRACE_ALL);
    /* The first refused one wins, and nothing stays set. */
    const env_pair bad[] = {{"QVET_WO_WG_MIN_M", "off"}, {"QVET_AQ_SPLITS", "0"}, {NULL, NULL}};
    ck_assert_int_eq(qv_launch_env_parse(table_get, (void *)bad, &got), QV_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "QVET_AQ_SPLITS"));
    ck_assert(!memcmp(&got, &zero, sizeof got));
}
END_TEST

/* docs/launch-options.md names every variable and every field (tests run
 * from the repository root). */
START_TEST(documented)
{
    FILE *f = fopen("docs/launch-options.md", "rb");
    ck_assert_msg(f != NULL, "docs/launch-options.md not found (run from the repository root)");
    static char doc[1 << 16];
    const size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    int count = 0;
    const qv_launch_env_var *vars = qv_launch_env_vars(&count);
    for (int i = 0; i < count; i++) {
        char tick[96];
        snprintf(tick, sizeof tick, "`%s`", vars[i].name);
        ck_assert_msg(strstr(doc, tick) != NULL, "docs/launch-options.md does not list %s", vars[i].name);
        snprintf(tick, sizeof tick, "`%s`", vars[i].field);
        ck_assert_msg(strstr(doc, tick) != NULL, "docs/launch-options.md does not name the field %s", vars[i].field);
    }
    static const char *const api_only[] = {"sms", "arch"};
    for (int i = 0; i < 2; i++) {
        char tick[32];
        snprintf(tick, sizeof tick, "`%s`", api_only[i]);
        ck_assert_msg(strstr(doc, tick) != NULL, "docs/launch-options.md does not name the field %s", api_only[i]);
    }
}
END_TEST

/* ---- the CLI -------------------------------------------------------------------- */

/* A bad variable stops each launching subcommand before it does anything:
 * exit 2, the variable and its value on stderr, nothing on stdout. */
START_TEST(cli_refuses)
{
    const char *const *const cmds[] = {
        (const char *const[]){"bench", "--dry-run", NULL},
        (const char *const[]){"check", "--cpu", "--variant", "w8a8-i8-tensor", NULL},
        (const char *const[]){"fuzz", "--cpu", "--cases", "1", NULL},
        (const char *const[]){"replay", "--cpu", "--seed", "1", "--case", "0", NULL},
        (const char *const[]){"ppl", "--cpu", "--model", "nonexistent.gguf", "--text", "nonexistent.txt", NULL},
    };
    static const env_pair bad[] = {{"QVET_WO_WG_MIN_M", "0"}, {"QVET_AQ_LT_CHUNK_MB", "4MB"}, {"QVET_WO_SMALL", ""}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        ck_assert_int_eq(setenv(bad[b].name, bad[b].value, 1), 0);
        for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
            run_result r = qvet_run(cmds[c]);
            ck_assert_msg(r.rc == 2, "qvet %s with %s=\"%s\": exit %d (stderr: %s)", cmds[c][0], bad[b].name,
                          bad[b].value, r.rc, r.err);
            ck_assert_msg(strstr(r.err, bad[b].name) != NULL, "qvet %s: stderr %s", cmds[c][0], r.err);
            ck_assert_str_eq(r.out, "");
            run_free(&r);
        }
        ck_assert_int_eq(unsetenv(bad[b].name), 0);
    }
    /* A good value passes the same subcommand. */
    ck_assert_int_eq(setenv("QVET_WO_WG_MIN_M", "off", 1), 0);
    run_result r = qvet_run((const char *const[]){"bench", "--dry-run", NULL});
    ck_assert_msg(r.rc == 0, "qvet bench --dry-run with QVET_WO_WG_MIN_M=off: exit %d (%s)", r.rc, r.err);
    run_free(&r);
    ck_assert_int_eq(unsetenv("QVET_WO_WG_MIN_M"), 0);
}
END_TEST

/* ---- the library's range check ---------------------------------------------------- */

START_TEST(check_names_the_field)
{
    static const struct {
        qv_launch_opts o;
        const char *field;
    } bad[] = {
        {{.wo_wg_min_m = -2}, "wo_wg_min_m"},
        {{.wo_wg_tile = QV_WG_TILE_COUNT}, "wo_wg_tile"},
        {{.wo_wg_blocks = 265}, "wo_wg_blocks"},
        {{.wo_wg_streamk = 2}, "wo_wg_streamk"},
        {{.wo_small = QV_WO_SMALL_MODE_COUNT}, "wo_small"},
        {{.wo_small_cluster = 3}, "wo_small_cluster"},
        {{.wo_small_splits = 1048576}, "wo_small_splits"},
        {{.wo_small_pre = 5}, "wo_small_pre"},
        {{.wo_dq_min_m = -3}, "wo_dq_min_m"},
        {{.wo_dq_chunk_mib = -2}, "wo_dq_chunk_mib"},
        {{.wo_dq_splitk = 3}, "wo_dq_splitk"},
        {{.wo_dq_overlap = -2}, "wo_dq_overlap"},
        {{.aq_wg_min_m = -9}, "aq_wg_min_m"},
        {{.aq_wg_tile = (qv_wg_tile)-1}, "aq_wg_tile"},
        {{.aq_wg_blocks = -1}, "aq_wg_blocks"},
        {{.aq_wg_streamk = 5}, "aq_wg_streamk"},
        {{.aq_wg_pdl = 2}, "aq_wg_pdl"},
        {{.aq_lt_min_m = -4}, "aq_lt_min_m"},
        {{.aq_lt_chunk_mib = QV_OPT_OFF}, "aq_lt_chunk_mib"},
        {{.aq_lt_fp8_min_m = -2}, "aq_lt_fp8_min_m"},
        {{.aq_lt_fp8_blk_min_m = -2}, "aq_lt_fp8_blk_min_m"},
        {{.aq_lt_fp8_outer_min_m = -2}, "aq_lt_fp8_outer_min_m"},
        {{.aq_blocks_per_sm = 33}, "aq_blocks_per_sm"},
        {{.aq_splits = 65536}, "aq_splits"},
        {{.aq_cluster_max = 17}, "aq_cluster_max"},
        {{.aq_pdl_max_m = -2}, "aq_pdl_max_m"},
        {{.act_quant_cluster_max_m = -2}, "act_quant_cluster_max_m"},
        {{.moe_wg_min_rows = -2}, "moe_wg_min_rows"},
        {{.moe_wg_block = 96}, "moe_wg_block"},
        {{.moe_wg_block = 512}, "moe_wg_block"},
        {{.moe_wg_pairs = 2}, "moe_wg_pairs"},
        {{.moe_wg_fit = 3}, "moe_wg_fit"},
        {{.moe_ksplit = 9}, "moe_ksplit"},
        {{.moe_ksplit = QV_OPT_OFF}, "moe_ksplit"},
        {{.sms = 4097}, "sms"},
        {{.arch = -90}, "arch"},
        {{.trace = 16}, "trace"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(qv_launch_opts_check(&bad[i].o), QV_ERR_USAGE);
        char want[64];
        snprintf(want, sizeof want, "qv_launch_opts.%s", bad[i].field);
        ck_assert_msg(strstr(qv_errmsg(), want) != NULL, "%s: %s", bad[i].field, qv_errmsg());
    }
    /* The edges of every range are valid. */
    const qv_launch_opts edges = {.wo_wg_min_m = QV_OPT_M_MAX, .wo_wg_tile = QV_WG_TILE_128X16,
                                  .wo_wg_blocks = QV_WG_BLOCKS_MAX, .wo_wg_streamk = QV_OPT_OFF,
                                  .wo_small = QV_WO_SMALL_SWAP2, .wo_small_cluster = 16,
                                  .wo_small_splits = QV_WO_SMALL_SPLITS_MAX, .wo_small_pre = QV_OPT_OFF,
                                  .wo_dq_min_m = QV_OPT_OFF, .wo_dq_chunk_mib = QV_CHUNK_MIB_MAX,
                                  .aq_lt_chunk_mib = 1e-6, .aq_blocks_per_sm = 32, .aq_splits = 65535,
                                  .aq_cluster_max = 1, .aq_pdl_max_m = QV_OPT_OFF,
                                  .act_quant_cluster_max_m = QV_OPT_OFF, .moe_wg_min_rows = QV_OPT_OFF,
                                  .moe_wg_block = 128, .moe_wg_pairs = QV_OPT_ON, .moe_wg_fit = QV_OPT_OFF,
                                  .moe_ksplit = QV_MOE_KSPLIT_MAX, .sms = QV_SMS_MAX, .arch = 1,
                                  .trace = QV_TRACE_ALL};
    ck_assert_msg(qv_launch_opts_check(&edges) == QV_OK, "%s", qv_errmsg());
}
END_TEST

/* ---- the workspace: the largest over the paths the options allow ----------------- */

START_TEST(workspace_is_the_largest_allowed)
{
    const qv_variant *w4 = qv_variant_find("marlin-w4a16-g128-f16");
    ck_assert_ptr_nonnull(w4);
    /* Weight-only at M = 1024 on 4096 x 4096, the H200's 132 SMs:
     *  - the mma kernel: 16 x 16 tiles of 64 rows x 256 columns >= 132, no
     *    split: no workspace;
     *  - the wgmma kernel: 4 x 32 = 128 tiles of 128x256, one round on 132
     *    blocks at least 7/8 busy: no tail, no workspace;
     *  - dequantize + cuBLAS, one chunk: the counters area (264 ints, 1056
     *    bytes, 1280 rounded to 256) and the fp16 weights, 4096 x 4096 x 2 =
     *    33554432 bytes: 33555712. */
    const qv_launch_opts only_mma = {H200, .wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_NEVER,
                                     .wo_dq_min_m = QV_OPT_OFF};
    const qv_launch_opts only_wg = {H200, .wo_dq_min_m = QV_OPT_OFF};
    const qv_launch_opts dflt = {H200};
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1024, 4096, 4096, &only_mma), 0);
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1024, 4096, 4096, &only_wg), 0);
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1024, 4096, 4096, &dflt), 33555712);
    /* M = 1 on 4096 x 4096: the small-M kernel's workspace (every
     * configuration, qv_wonly_small_plan_info's `asked`) and the mma
     * kernel's split-K partials (two blocks per SM for 16-row tiles: 264
     * slots, 16 tiles, so K splits); the default is the larger, and turning
     * the small-M kernel off leaves the mma kernel's. */
    qv_wo_small_plan_info pl;
    ck_assert_int_eq(qv_wonly_small_plan_info(w4, 1, 4096, 4096, &dflt, &pl), 1);
    const size_t small = pl.asked, mma = qv_workspace_wonly(w4, 1, 4096, 4096, &only_mma);
    ck_assert_uint_gt(mma, 2 * 4096 * sizeof(float));
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1, 4096, 4096, &dflt), small > mma ? small : mma);
    const qv_launch_opts small_only = {H200, .wo_wg_min_m = QV_OPT_OFF, .wo_dq_min_m = QV_OPT_OFF};
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1, 4096, 4096, &small_only), small > mma ? small : mma);
    /* The integer rows: from the cuBLASLt threshold (128) its region (32 MiB
     * of cuBLASLt workspace at least) after the mma kernel's; off, none. */
    const qv_variant *i8 = qv_variant_find("w8a8-i8-tok-ch");
    ck_assert_ptr_nonnull(i8);
    const qv_launch_opts lt_off = {H200, .aq_lt_min_m = QV_OPT_OFF};
    ck_assert_uint_ge(qv_gpu_workspace(i8, 1024, 4096, 4096, &dflt), (size_t)32 << 20);
    ck_assert_uint_lt(qv_gpu_workspace(i8, 1024, 4096, 4096, &lt_off), (size_t)32 << 20);
    /* Options the check refuses: no workspace (the launch reports them). */
    const qv_launch_opts bad = {H200, .wo_small_cluster = 3};
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1, 4096, 4096, &bad), 0);
    /* No device and neither sms nor arch set: nothing to plan for (this
     * suite runs without a GPU; with one the device answers). */
    const qv_launch_opts no_sms = {.arch = 90};
    qv_launch_ctx ctx;
    const qv_status st = qv_launch_ctx_get(&no_sms, &ctx);
    ck_assert(st == QV_OK ? ctx.sms >= 1 : st == QV_ERR_NODEVICE);
}
END_TEST

/* The tuning context: sms and arch as given, the H200's row for arch 90. */
START_TEST(tuning_context)
{
    const qv_launch_opts o = {H200};
    qv_launch_ctx c;
    ck_assert_int_eq(qv_launch_ctx_get(&o, &c), QV_OK);
    ck_assert_int_eq(c.sms, 132);
    ck_assert_int_eq(c.arch, 90);
    ck_assert_int_eq(c.t->arch, 90);
    ck_assert_ptr_eq(c.o, &o);
    int rows = 0;
    const qv_tuning *t = qv_tuning_rows(&rows);
    ck_assert_int_ge(rows, 1);
    /* A newer architecture takes the last row at or below it; an older one the first. */
    const qv_launch_opts newer = {.sms = 148, .arch = 100}, older = {.sms = 108, .arch = 80};
    ck_assert_int_eq(qv_launch_ctx_get(&newer, &c), QV_OK);
    ck_assert_ptr_eq(c.t, &t[rows - 1]);
    ck_assert_int_eq(c.sms, 148);
    ck_assert_int_eq(qv_launch_ctx_get(&older, &c), QV_OK);
    ck_assert_ptr_eq(c.t, &t[0]);
}
END_TEST

/* ---- the overlay ------------------------------------------------------------------- */

START_TEST(overlay)
{
    /* Whole structs are compared byte for byte, so every one starts zeroed
     * (padding included). */
    qv_launch_opts base, b, none;
    memset(&base, 0, sizeof base);
    memset(&none, 0, sizeof none);
    base.wo_wg_min_m = 9, base.aq_lt_chunk_mib = 2.5, base.trace = QV_TRACE_AQ, base.sms = 100;
    memcpy(&b, &base, sizeof b);
    qv_launch_opts_overlay(&b, &none);
    ck_assert(!memcmp(&b, &base, sizeof b));
    const qv_launch_opts over = {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_SWAP, .wo_dq_chunk_mib = 0.01,
                                 .trace = QV_TRACE_LT, .arch = 90};
    qv_launch_opts_overlay(&base, &over);
    ck_assert_int_eq(base.wo_wg_min_m, QV_OPT_OFF);
    ck_assert_int_eq(base.wo_small, QV_WO_SMALL_SWAP);
    ck_assert_double_eq(base.wo_dq_chunk_mib, 0.01);
    ck_assert_double_eq(base.aq_lt_chunk_mib, 2.5);
    ck_assert_uint_eq(base.trace, QV_TRACE_AQ | QV_TRACE_LT);
    ck_assert_int_eq(base.sms, 100);
    ck_assert_int_eq(base.arch, 90);
    /* Every field that can be set is carried: all set over all unset gives all set. */
    static const qv_launch_opts all = {
        .wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_128X16, .wo_wg_blocks = 2, .wo_wg_streamk = QV_OPT_ON,
        .wo_small = QV_WO_SMALL_SWAP2, .wo_small_cluster = 2, .wo_small_splits = 3, .wo_small_pre = 4,
        .wo_dq_min_m = 5, .wo_dq_chunk_mib = 6, .wo_dq_splitk = QV_OPT_ON, .wo_dq_overlap = QV_OPT_OFF,
        .aq_wg_min_m = 7, .aq_wg_tile = QV_WG_TILE_512X64, .aq_wg_blocks = 8, .aq_wg_streamk = QV_OPT_OFF,
        .aq_wg_pdl = QV_OPT_ON, .aq_lt_min_m = 9, .aq_lt_chunk_mib = 10, .aq_lt_fp8_min_m = 11,
        .aq_lt_fp8_blk_min_m = 12, .aq_lt_fp8_outer_min_m = 13, .aq_blocks_per_sm = 14, .aq_splits = 15,
        .aq_cluster_max = 16, .aq_pdl_max_m = 17, .act_quant_cluster_max_m = 18, .moe_wg_min_rows = 21,
        .moe_wg_block = 64, .moe_ksplit = 22, .sms = 19, .arch = 20,
        .trace = QV_TRACE_ALL};
    qv_launch_opts z;
    memset(&z, 0, sizeof z);
    qv_launch_opts_overlay(&z, &all);
    ck_assert(!memcmp(&z, &all, sizeof z));
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("launch_opts", "opts", 120, &tc);
    tcase_add_loop_test(tc, every_value_accepted, 0, N_ACCEPT);
    tcase_add_loop_test(tc, every_variable_refuses, 0, N_REFUSE);
    tcase_add_test(tc, cases_cover_every_variable);
    tcase_add_test(tc, unset_is_every_default);
    tcase_add_test(tc, documented);
    tcase_add_test(tc, cli_refuses);
    tcase_add_test(tc, check_names_the_field);
    tcase_add_test(tc, workspace_is_the_largest_allowed);
    tcase_add_test(tc, tuning_context);
    tcase_add_test(tc, overlay);
    return suite_run(s);
}
