/* t_ckpt_route.c: the campaign's checkpoint route (fuzz/ckpt_route.h). The
 * writers are checked against words assembled by hand from the formats'
 * definitions; the route must give back exactly the logical codes for every
 * format; qv_ckpt_choose follows its rule; and the fixed suite of a zero-point
 * row sends cases through all three readers (GPTQ v1, GPTQ v2, AWQ), so
 * `qvet check` reaches every reader mutant. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/ckpt_route.h"
#include "internal/campaign.h"
#include "qvet/layout.h"
#include "qvet/variant.h"

#include "support/suite.h"

#define SEED 20261129ull /* the default campaign seed; case i uses (SEED, i) */

/* One int32 word from eight nibbles, nib[0] lowest: the formats' definition. */
static int32_t word_of(const unsigned nib[8])
{
    uint32_t w = 0;
    for (int i = 0; i < 8; i++) w += (uint32_t)nib[i] * (1u << (4 * i));
    int32_t s;
    memcpy(&s, &w, sizeof s);
    return s;
}

START_TEST(writers_match_the_definitions)
{
    /* q (16, 8): code (kk, j) = (3 kk + 5 j) mod 16, so every nibble value and
     * the sign bit of the words appear. */
    enum { K = 16, N = 8 };
    uint8_t q[K * N];
    for (int kk = 0; kk < K; kk++)
        for (int j = 0; j < N; j++) q[kk * N + j] = (uint8_t)((3 * kk + 5 * j) % 16);
    int32_t gw[K / 8 * N], aw[K * N / 8], zw[K * N / 8];
    qv_ckpt_write_gptq_qweight(q, K, N, gw);
    for (int r = 0; r < K / 8; r++)
        for (int j = 0; j < N; j++) {
            unsigned nib[8];
            for (int i = 0; i < 8; i++) nib[i] = q[(8 * r + i) * N + j];
            ck_assert_int_eq(gw[r * N + j], word_of(nib));
        }
    static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7}; /* AWQ, docs/design.md §7 */
    qv_ckpt_write_along_n(q, K, N, 1, 0, aw);
    qv_ckpt_write_along_n(q, K, N, 0, 1, zw);
    for (int r = 0; r < K; r++) {
        unsigned nib[8], nz[8];
        for (int i = 0; i < 8; i++) {
            nib[i] = q[r * N + order[i]];
            nz[i] = (q[r * N + i] + 15u) % 16u; /* z - 1, wrapping 0 to 15 as a 4-bit field would */
        }
        ck_assert_int_eq(aw[r], word_of(nib));
        ck_assert_int_eq(zw[r], word_of(nz));
    }
}
END_TEST

/* A problem of `name` at (m, n, k) with codes (kk, j) -> (7 kk + 3 j + salt)
 * mod 16 and zero points (gi, j) -> zlo + (gi + j) mod (16 - zlo). */
static void make_problem(qv_problem *p, const char *name, int64_t m, int64_t n, int64_t k, int salt, int zlo)
{
    const qv_variant *v = qv_variant_find(name);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(qv_problem_create(p, v, m, n, k), QV_OK);
    uint8_t *q = p->q;
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) q[kk * n + j] = (uint8_t)((7 * kk + 3 * j + salt) % 16);
    if (p->zeros)
        for (int64_t gi = 0; gi < k / p->g; gi++)
            for (int64_t j = 0; j < n; j++) p->zeros[gi * n + j] = (uint8_t)(zlo + (gi + j) % (16 - zlo));
}

static void assert_round_trip(const qv_problem *p, qv_ckpt_format want)
{
    qv_ckpt_format f = qv_ckpt_choose(p);
    ck_assert_msg(f == want, "%s: chose %s, expected %s", p->v->name, qv_ckpt_format_name(f),
                  qv_ckpt_format_name(want));
    qv_problem d;
    ck_assert_int_eq(qv_ckpt_route(p, f, &d), QV_OK);
    ck_assert_int_eq(memcmp(d.q, p->q, (size_t)(p->k * p->n)), 0);
    if (p->zeros) ck_assert_int_eq(memcmp(d.zeros, p->zeros, (size_t)(p->k / p->g * p->n)), 0);
    qv_problem_destroy(&d);
}

START_TEST(route_gives_back_the_codes)
{
    qv_problem p;
    make_problem(&p, "marlin-w4a16-g128-f16", 2, 64, 256, 0, 0);
    assert_round_trip(&p, QV_CKPT_GPTQ);
    qv_problem_destroy(&p);
    make_problem(&p, "marlin-w4a16-ch-f16", 2, 64, 48, 1, 0); /* one group of K = 48 */
    assert_round_trip(&p, QV_CKPT_GPTQ);
    qv_problem_destroy(&p);
    make_problem(&p, "marlin-w4a16-g128-zp-f16", 2, 64, 256, 2, 1); /* every z >= 1 */
    assert_round_trip(&p, QV_CKPT_GPTQ_V1);
    qv_problem_destroy(&p);
    /* A zero point 0: v2 or AWQ by the hash; the salt moves the hash, and both occur. */
    int seen[QV_CKPT_AWQ + 1] = {0};
    for (int salt = 0; salt < 16; salt++) {
        make_problem(&p, "marlin-w4a16-g128-zp-f16", 1, 64, 256, salt, 0);
        qv_ckpt_format f = qv_ckpt_choose(&p);
        ck_assert(f == QV_CKPT_GPTQ_V2 || f == QV_CKPT_AWQ);
        seen[f]++;
        assert_round_trip(&p, f);
        qv_problem_destroy(&p);
    }
    ck_assert_int_gt(seen[QV_CKPT_GPTQ_V2], 0);
    ck_assert_int_gt(seen[QV_CKPT_AWQ], 0);
    /* Rows that are not uint4 keep their operands. */
    make_problem(&p, "marlin-fp8a16-ch-f16", 1, 64, 64, 0, 0);
    ck_assert_int_eq(qv_ckpt_choose(&p), QV_CKPT_NONE);
    qv_problem_destroy(&p);
}
END_TEST

START_TEST(check_suite_reaches_every_reader)
{
    static const char *const rows[] = {"marlin-w4a16-g128-zp-f16", "marlin-w4a16-g128-zp-bf16"};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const qv_variant *v = qv_variant_find(rows[r]);
        if (!v) continue; /* a registry without the bf16 row */
        int64_t cap = qv_backend_default_cap(QV_BACKEND_CPU, 1);
        int count = qv_suite_count(v, cap), seen[QV_CKPT_AWQ + 1] = {0};
        for (int j = 0; j < count; j++) {
            qv_case c;
            qv_suite_case(v, cap, SEED, j, &c);
            qv_problem p;
            if (qv_case_build(&c, &p) != QV_OK) continue;
            seen[qv_ckpt_choose(&p)]++;
            qv_problem_destroy(&p);
        }
        printf("%s: %d cases; gptq-v1 %d, gptq-v2 %d, awq %d, none %d\n", rows[r], count,
               seen[QV_CKPT_GPTQ_V1], seen[QV_CKPT_GPTQ_V2], seen[QV_CKPT_AWQ], seen[QV_CKPT_NONE]);
        ck_assert_int_gt(seen[QV_CKPT_GPTQ_V1], 0);
        ck_assert_int_gt(seen[QV_CKPT_GPTQ_V2], 0);
        ck_assert_int_gt(seen[QV_CKPT_AWQ], 0);
    }
}
END_TEST

static Suite *route_suite(void)
{
    Suite *s = suite_create("ckpt_route");
    TCase *t = tcase_create("route");
    tcase_add_test(t, writers_match_the_definitions);
    tcase_add_test(t, route_gives_back_the_codes);
    tcase_add_test(t, check_suite_reaches_every_reader);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return suite_run(route_suite());
}
