/* verify_buffers.c: a W4A16 GEMM output checked with qvet's CPU library alone (no CUDA):
 *   cc -std=c11 -Iinclude verify_buffers.c libqvet_cpu.a -lmpfr -lgmp -lopenblas -lm -lpthread
 * C is computed in plain C as a kernel would; `verify_buffers wrong` adds 1 to C[0][5]. */
#include <stdio.h>
#include <string.h>

#include "qvet/qvet.h"

enum { M = 8, N = 64, K = 256, G = 128 };

int main(int argc, char **argv)
{
    const qv_variant *v;
    qv_problem p;
    if (qv_spec_parse("w=u4b8,ws=f16/g128,a=f16", &v) != QV_OK || qv_problem_create(&p, v, M, N, K) != QV_OK) {
        fprintf(stderr, "verify_buffers: %s\n", qv_errmsg());
        return 2;
    }
    uint16_t *a = p.a, *s = p.scales, c[M * N]; /* a (M, K), s (K/G, N), c (M, N): f16 bits */
    uint8_t *q = p.q;                            /* (K, N) codes 0..15, value q - 8 */
    for (int i = 0; i < M * K; i++) a[i] = qv_f32_to_f16((float)(i % 7 - 3) / 4);
    for (int i = 0; i < K * N; i++) q[i] = (uint8_t)(i * 5 % 16);
    for (int i = 0; i < K / G * N; i++) s[i] = qv_f32_to_f16(0.01f * (float)(1 + i % 5));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) { /* w = f16((q - 8) s); products summed in fp32 */
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += qv_f16_to_f32(a[i * K + k]) *
                       qv_f16_to_f32(qv_f32_to_f16((float)(q[k * N + j] - 8) * qv_f16_to_f32(s[k / G * N + j])));
            c[i * N + j] = qv_f32_to_f16(acc);
        }
    if (argc > 1 && !strcmp(argv[1], "wrong")) c[5] = qv_f32_to_f16(qv_f16_to_f32(c[5]) + 1);
    qv_result r;
    qv_status st = qv_verify(&p, c, &r);
    if (st == QV_OK) printf("%s%s%s\n", qv_grade_name(r.grade), r.reason[0] ? ": " : "", r.reason);
    else fprintf(stderr, "verify_buffers: %s\n", qv_errmsg());
    qv_problem_destroy(&p);
    return st != QV_OK ? 2 : r.grade == QV_FAIL; /* 0: PASS or MARGINAL, 1: FAIL, 2: an error */
}
