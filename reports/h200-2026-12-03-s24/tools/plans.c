/* plans.c: the small-M kernel's split-K plan (qv_wonly_small_plan_info) for
 * four rows x the eight layers of both models x M = 1..16 under the current
 * environment (QVET_WO_SMALL_SPLITS, QVET_WO_SMALL_CLUSTER), one line each:
 * row m model layer n_blocks splits cluster tiles_per_split smem slice_unit.
 * Host only; built from the repository root against build/libqvet.a:
 *   gcc -std=c11 -Iinclude -Ikernels -I/usr/local/cuda/include <this file> build/libqvet.a \
 *       -L/usr/local/cuda/lib64 -lcublasLt -lcublas -lcudart_static -lmpfr -lgmp -lopenblas \
 *       -lstdc++ -lm -lpthread -ldl -lrt -o plans
 * fit.py reads its output (def.txt: unset; forced.txt: every forced
 * slice count 1..128 x cluster cap 1..16, each line prefixed "s c "). */
#include <stdio.h>
#include <stdlib.h>
#include "qvet/variant.h"
#include "wonly_small.cuh"
int main(int argc, char **argv)
{
    const char *rows[] = {"marlin-w4a16-ch-f16", "marlin-w4a16-g128-f16", "marlin-fp8a16-ch-f16", "marlin-fp8a16-g128-f16"};
    int shapes[][3] = {{10240, 8192}, {8192, 8192}, {57344, 8192}, {8192, 28672}, {12288, 4096}, {4096, 4096}, {22016, 4096}, {4096, 11008}};
    const char *names[] = {"70 qkv", "70 o", "70 gate_up", "70 down", "7 qkv", "7 o", "7 gate_up", "7 down"};
    for (int r = 0; r < 4; r++) {
        const qv_variant *v = qv_variant_find(rows[r]);
        for (int s = 0; s < 8; s++) for (int m = 1; m <= 16; m++) {
            qv_wo_small_plan_info p;
            if (!qv_wonly_small_plan_info(v, m, shapes[s][0], shapes[s][1], &p)) continue;
            printf("%s %d %s %d %d %d %d %d %d\n", rows[r] + 7, m, names[s], p.n_blocks, p.splits, p.cluster, p.tiles_per_split, p.smem, p.slice_unit);
        }
    }
    return 0;
}
