/* aq_args.cuh: the launch arguments of an activation-quantized row (gemm.h)
 * as the aq_params fields every such launcher fills alike. Included by
 * kernels/qqq.cu and kernels/w8a8.cu. Rule: only the shape and the buffers;
 * each launcher sets its own group size, scale modes and zero point, and
 * every other field starts zero. */
#ifndef QVET_KERNELS_AQ_ARGS_CUH
#define QVET_KERNELS_AQ_ARGS_CUH

#include "aq_gemm.cuh"

/* a: the caller's arguments (device buffers as gemm.h describes them). */
static inline aq_params aq_params_of(const qv_gemm_args *a)
{
    aq_params p = {};
    p.m = a->m;
    p.n = a->n;
    p.k = a->k;
    p.a = (const uint8_t *)a->a;
    p.b = a->b;
    p.a_scale = a->a_scale;
    p.w_scale = a->scales;
    p.c = (__half *)a->c;
    return p;
}

#endif
