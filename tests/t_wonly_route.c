/* t_wonly_route.c: which kernel qv_launch_wonly runs for a weight-only
 * problem (internal/wonly_plan.h), on the CPU, under launch options given as
 * data (qv_launch_opts, planning for the H200: 132 SMs, compute capability
 * 9.0, so no CUDA call). Expected paths are the rules docs/launch-options.md
 * states: wo_wg_min_m (unset: M >= 17, and M >= 9 on layers of at least 2^27
 * weights; asked first), wo_small (unset: M <= 16; QV_WO_SMALL_NEVER never;
 * QV_WO_SMALL_M16_8, _SWAP, _SWAP2 M <= 8; QV_WO_SMALL_M16_16 M <= 16),
 * wo_dq_min_m (unset: 64; after the other two), else the mma kernel. The
 * layer shapes are Llama-3-70B's: down 8192 x 28672 (1.75 x 2^27 weights),
 * qkv 10240 x 8192 (0.625 x 2^27). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "internal/wonly_plan.h"
#include "qvet/gemm.h"
#include "qvet/variant.h"
#include "support/suite.h"

/* The H200 the defaults were measured on, set so that routing asks no device. */
#define H200 .sms = 132, .arch = 90

static qv_wo_path route_with(const char *row, int m, int n, int k, const qv_launch_opts *o)
{
    const qv_variant *v = qv_variant_find(row);
    ck_assert_ptr_nonnull(v);
    qv_wo_path p = (qv_wo_path)0;
    ck_assert_msg(qv_wonly_route(v, m, n, k, o, &p) == QV_OK, "%s m=%d: %s", row, m, qv_errmsg());
    return p;
}

static qv_wo_path route(const char *row, int m, int n, int k)
{
    const qv_launch_opts o = {H200};
    return route_with(row, m, n, k, &o);
}

static const char *const kRows[] = {"marlin-w4a16-g128-f16", "marlin-w4a16-ch-bf16", "marlin-fp8a16-ch-f16",
                                    "marlin-w8a16-g128-bf16", "marlin-w4a16-g128-zp-f16", "marlin-w4a16-g128-act-f16"};
#define N_ROWS ((int)(sizeof kRows / sizeof kRows[0]))

START_TEST(defaults_by_m_and_layer)
{
    for (int r = 0; r < N_ROWS; r++) {
        /* A large layer: small-M kernel up to 8, wgmma from 9. */
        for (int m = 1; m <= 8; m++) ck_assert_int_eq(route(kRows[r], m, 8192, 28672), QV_WO_PATH_SMALL);
        for (int m = 9; m <= 16; m++) ck_assert_int_eq(route(kRows[r], m, 8192, 28672), QV_WO_PATH_WG);
        /* gate_up, 57344 x 8192, is large too. */
        ck_assert_int_eq(route(kRows[r], 9, 57344, 8192), QV_WO_PATH_WG);
        /* A smaller layer: small-M kernel up to 16, wgmma from 17. */
        for (int m = 1; m <= 16; m++) ck_assert_int_eq(route(kRows[r], m, 10240, 8192), QV_WO_PATH_SMALL);
        ck_assert_int_eq(route(kRows[r], 17, 10240, 8192), QV_WO_PATH_WG);
        ck_assert_int_eq(route(kRows[r], 1024, 4096, 4096), QV_WO_PATH_WG);
        ck_assert_int_eq(route(kRows[r], 8192, 4096, 11008), QV_WO_PATH_WG);
    }
}
END_TEST

/* One routing expectation under options. */
typedef struct route_case {
    qv_launch_opts o;
    const char *row;
    int m, n, k;
    qv_wo_path want;
} route_case;

/* A set wo_wg_min_m is the one threshold for every layer, below 16 too;
 * QV_OPT_OFF: the small-M kernel to 16, the mma kernel to 63, then dequantize
 * + cuBLAS (wo_dq_min_m moves it). */
static const route_case kThreshold[] = {
    {{H200, .wo_wg_min_m = 1}, "marlin-w4a16-g128-f16", 1, 4096, 4096, QV_WO_PATH_WG},
    {{H200, .wo_wg_min_m = 1}, "marlin-fp8a16-ch-f16", 4, 10240, 8192, QV_WO_PATH_WG},
    {{H200, .wo_wg_min_m = 17}, "marlin-w4a16-g128-f16", 16, 8192, 28672, QV_WO_PATH_SMALL},
    {{H200, .wo_wg_min_m = 17}, "marlin-w4a16-g128-f16", 17, 8192, 28672, QV_WO_PATH_WG},
    {{H200, .wo_wg_min_m = QV_OPT_OFF}, "marlin-w4a16-g128-f16", 16, 8192, 28672, QV_WO_PATH_SMALL},
    {{H200, .wo_wg_min_m = QV_OPT_OFF}, "marlin-w4a16-g128-f16", 17, 8192, 28672, QV_WO_PATH_MMA},
    {{H200, .wo_wg_min_m = QV_OPT_OFF}, "marlin-w4a16-g128-f16", 63, 4096, 4096, QV_WO_PATH_MMA},
    {{H200, .wo_wg_min_m = QV_OPT_OFF}, "marlin-w4a16-g128-f16", 64, 4096, 4096, QV_WO_PATH_DQ},
    {{H200, .wo_wg_min_m = QV_OPT_OFF, .wo_dq_min_m = 100000}, "marlin-w4a16-g128-f16", 1024, 4096, 4096,
     QV_WO_PATH_MMA},
    /* wo_dq_min_m alone: the wgmma kernel still comes first. */
    {{H200, .wo_dq_min_m = 1}, "marlin-w4a16-g128-f16", 1024, 4096, 4096, QV_WO_PATH_WG},
    {{H200, .wo_wg_min_m = QV_OPT_OFF, .wo_dq_min_m = QV_OPT_OFF}, "marlin-w4a16-g128-f16", 8192, 4096, 4096,
     QV_WO_PATH_MMA},
    {{H200, .wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_NEVER, .wo_dq_min_m = 1}, "marlin-w4a16-g128-f16",
     1, 4096, 4096, QV_WO_PATH_DQ},
};

START_TEST(wgmma_threshold_set)
{
    const route_case *c = &kThreshold[_i];
    ck_assert_msg(route_with(c->row, c->m, c->n, c->k, &c->o) == c->want, "case %d: %s m=%d n=%d k=%d", _i, c->row,
                  c->m, c->n, c->k);
}
END_TEST

/* QV_WO_SMALL_NEVER: the small-M kernel never, large layers still take
 * wgmma from 9; _M16_8, _SWAP, _SWAP2: M <= 8 only; _M16_16: M <= 16,
 * still after the wgmma kernel. */
static const route_case kSmall[] = {
    {{H200, .wo_small = QV_WO_SMALL_NEVER}, "marlin-w4a16-ch-bf16", 4, 10240, 8192, QV_WO_PATH_MMA},
    {{H200, .wo_small = QV_WO_SMALL_NEVER}, "marlin-w4a16-ch-bf16", 4, 8192, 28672, QV_WO_PATH_MMA},
    {{H200, .wo_small = QV_WO_SMALL_NEVER}, "marlin-w4a16-ch-bf16", 9, 8192, 28672, QV_WO_PATH_WG},
    {{H200, .wo_small = QV_WO_SMALL_M16_8}, "marlin-w4a16-ch-bf16", 8, 10240, 8192, QV_WO_PATH_SMALL},
    {{H200, .wo_small = QV_WO_SMALL_M16_8}, "marlin-w4a16-ch-bf16", 12, 10240, 8192, QV_WO_PATH_MMA},
    {{H200, .wo_small = QV_WO_SMALL_M16_8}, "marlin-w4a16-ch-bf16", 12, 8192, 28672, QV_WO_PATH_WG},
    {{H200, .wo_small = QV_WO_SMALL_SWAP}, "marlin-w4a16-ch-bf16", 8, 10240, 8192, QV_WO_PATH_SMALL},
    {{H200, .wo_small = QV_WO_SMALL_SWAP}, "marlin-w4a16-ch-bf16", 12, 10240, 8192, QV_WO_PATH_MMA},
    {{H200, .wo_small = QV_WO_SMALL_SWAP}, "marlin-w4a16-ch-bf16", 12, 8192, 28672, QV_WO_PATH_WG},
    {{H200, .wo_small = QV_WO_SMALL_SWAP2}, "marlin-w4a16-ch-bf16", 8, 10240, 8192, QV_WO_PATH_SMALL},
    {{H200, .wo_small = QV_WO_SMALL_SWAP2}, "marlin-w4a16-ch-bf16", 12, 10240, 8192, QV_WO_PATH_MMA},
    {{H200, .wo_small = QV_WO_SMALL_SWAP2}, "marlin-w4a16-ch-bf16", 12, 8192, 28672, QV_WO_PATH_WG},
    {{H200, .wo_small = QV_WO_SMALL_M16_16}, "marlin-w4a16-ch-bf16", 4, 8192, 28672, QV_WO_PATH_SMALL},
    {{H200, .wo_small = QV_WO_SMALL_M16_16}, "marlin-w4a16-ch-bf16", 12, 10240, 8192, QV_WO_PATH_SMALL},
    {{H200, .wo_small = QV_WO_SMALL_M16_16}, "marlin-w4a16-ch-bf16", 12, 8192, 28672, QV_WO_PATH_WG},
};

START_TEST(small_kernel_modes)
{
    const route_case *c = &kSmall[_i];
    ck_assert_msg(route_with(c->row, c->m, c->n, c->k, &c->o) == c->want, "case %d: %s m=%d n=%d k=%d", _i, c->row,
                  c->m, c->n, c->k);
}
END_TEST

/* Options out of range are refused, naming the field. */
START_TEST(bad_options_refused)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-f16");
    ck_assert_ptr_nonnull(v);
    static const struct {
        qv_launch_opts o;
        const char *field;
    } bad[] = {
        {{H200, .wo_wg_min_m = -2}, "wo_wg_min_m"},
        {{H200, .wo_small = QV_WO_SMALL_MODE_COUNT}, "wo_small"},
        {{H200, .wo_dq_min_m = -5}, "wo_dq_min_m"},
        {{H200, .wo_wg_blocks = QV_WG_BLOCKS_MAX + 1}, "wo_wg_blocks"},
        {{H200, .wo_wg_streamk = 2}, "wo_wg_streamk"},
        {{.sms = -1, .arch = 90}, "sms"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        qv_wo_path p = (qv_wo_path)0;
        ck_assert_int_eq(qv_wonly_route(v, 16, 8192, 28672, &bad[i].o, &p), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), bad[i].field) != NULL, "%s: %s", bad[i].field, qv_errmsg());
    }
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("wonly_route", "route", 30, &tc);
    tcase_add_test(tc, defaults_by_m_and_layer);
    tcase_add_loop_test(tc, wgmma_threshold_set, 0, (int)(sizeof kThreshold / sizeof kThreshold[0]));
    tcase_add_loop_test(tc, small_kernel_modes, 0, (int)(sizeof kSmall / sizeof kSmall[0]));
    tcase_add_test(tc, bad_options_refused);
    return suite_run(s);
}
