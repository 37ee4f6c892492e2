/* t_wonly_route.c: which kernel qv_launch_wonly runs for a weight-only
 * problem (kernels/wonly_route.h), on the CPU. Expected paths are the rules
 * docs/kernel-paths.md's variable table states: QVET_WO_WG_MIN_M (unset: M >= 17, and
 * M >= 9 on layers of at least 2^27 weights; asked first), QVET_WO_SMALL
 * (unset: M <= 16; "0" never; "1", "swap", "swap2" M <= 8; "16" M <= 16),
 * QVET_WO_DQ_MIN_M (unset: 64; after the other two), else the mma kernel.
 * The layer shapes are Llama-3-70B's: down 8192 x 28672 (1.75 x 2^27
 * weights), qkv 10240 x 8192 (0.625 x 2^27). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/wonly_route.h"
#include "qvet/variant.h"
#include "support/suite.h"
#include "support/wonly.h"

static const char *const kVars[] = {"QVET_WO_WG_MIN_M", "QVET_WO_SMALL", "QVET_WO_DQ_MIN_M"};

/* Every routing variable unset (each test runs in its own process). */
static void clear_env(void)
{
    for (size_t i = 0; i < sizeof kVars / sizeof kVars[0]; i++) free(wonly_env_set(kVars[i], NULL));
}

static qv_wo_path route(const char *row, int m, int n, int k)
{
    const qv_variant *v = qv_variant_find(row);
    ck_assert_ptr_nonnull(v);
    qv_wo_path p = (qv_wo_path)0;
    ck_assert_int_eq(qv_wonly_route(v, m, n, k, &p), QV_OK);
    return p;
}

static const char *const kRows[] = {"marlin-w4a16-g128-f16", "marlin-w4a16-ch-bf16", "marlin-fp8a16-ch-f16",
                                    "marlin-w8a16-g128-bf16", "marlin-w4a16-g128-zp-f16", "marlin-w4a16-g128-act-f16"};
#define N_ROWS ((int)(sizeof kRows / sizeof kRows[0]))

START_TEST(defaults_by_m_and_layer)
{
    clear_env();
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

START_TEST(wgmma_threshold_set)
{
    clear_env();
    /* A set value is the one threshold for every layer, below 16 too. */
    free(wonly_env_set("QVET_WO_WG_MIN_M", "1"));
    ck_assert_int_eq(route("marlin-w4a16-g128-f16", 1, 4096, 4096), QV_WO_PATH_WG);
    ck_assert_int_eq(route("marlin-fp8a16-ch-f16", 4, 10240, 8192), QV_WO_PATH_WG);
    free(wonly_env_set("QVET_WO_WG_MIN_M", "17"));
    ck_assert_int_eq(route("marlin-w4a16-g128-f16", 16, 8192, 28672), QV_WO_PATH_SMALL);
    ck_assert_int_eq(route("marlin-w4a16-g128-f16", 17, 8192, 28672), QV_WO_PATH_WG);
    /* "off": small-M kernel to 16, the mma kernel to 63, then dequantize + cuBLAS. */
    free(wonly_env_set("QVET_WO_WG_MIN_M", "off"));
    ck_assert_int_eq(route("marlin-w4a16-g128-f16", 16, 8192, 28672), QV_WO_PATH_SMALL);
    ck_assert_int_eq(route("marlin-w4a16-g128-f16", 17, 8192, 28672), QV_WO_PATH_MMA);
    ck_assert_int_eq(route("marlin-w4a16-g128-f16", 63, 4096, 4096), QV_WO_PATH_MMA);
    ck_assert_int_eq(route("marlin-w4a16-g128-f16", 64, 4096, 4096), QV_WO_PATH_DQ);
    free(wonly_env_set("QVET_WO_DQ_MIN_M", "100000"));
    ck_assert_int_eq(route("marlin-w4a16-g128-f16", 1024, 4096, 4096), QV_WO_PATH_MMA);
}
END_TEST

START_TEST(small_kernel_modes)
{
    clear_env();
    /* "0": the small-M kernel never; large layers still take wgmma from 9. */
    free(wonly_env_set("QVET_WO_SMALL", "0"));
    ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 4, 10240, 8192), QV_WO_PATH_MMA);
    ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 4, 8192, 28672), QV_WO_PATH_MMA);
    ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 9, 8192, 28672), QV_WO_PATH_WG);
    /* "1", "swap", "swap2": M <= 8 only. */
    const char *const eight[] = {"1", "swap", "swap2"};
    for (int i = 0; i < 3; i++) {
        free(wonly_env_set("QVET_WO_SMALL", eight[i]));
        ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 8, 10240, 8192), QV_WO_PATH_SMALL);
        ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 12, 10240, 8192), QV_WO_PATH_MMA);
        ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 12, 8192, 28672), QV_WO_PATH_WG);
    }
    /* "16": M <= 16, still after the wgmma kernel. */
    free(wonly_env_set("QVET_WO_SMALL", "16"));
    ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 4, 8192, 28672), QV_WO_PATH_SMALL);
    ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 12, 10240, 8192), QV_WO_PATH_SMALL);
    ck_assert_int_eq(route("marlin-w4a16-ch-bf16", 12, 8192, 28672), QV_WO_PATH_WG);
}
END_TEST

START_TEST(bad_threshold_refused)
{
    clear_env();
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-f16");
    ck_assert_ptr_nonnull(v);
    const char *const bad[] = {"abc", "0", "-3", "9x", "99999999999"};
    for (int i = 0; i < 5; i++) {
        free(wonly_env_set("QVET_WO_WG_MIN_M", bad[i]));
        qv_wo_path p = (qv_wo_path)0;
        ck_assert_int_eq(qv_wonly_route(v, 16, 8192, 28672, &p), QV_ERR_USAGE);
        ck_assert_ptr_nonnull(strstr(qv_errmsg(), "QVET_WO_WG_MIN_M"));
    }
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("wonly_route", "route", 30, &tc);
    tcase_add_test(tc, defaults_by_m_and_layer);
    tcase_add_test(tc, wgmma_threshold_set);
    tcase_add_test(tc, small_kernel_modes);
    tcase_add_test(tc, bad_threshold_refused);
    return suite_run(s);
}
