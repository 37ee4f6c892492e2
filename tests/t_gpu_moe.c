/* t_gpu_moe.c: the routed GEMM on the GPU (kernels/moe_grouped.cu through
 * src/gpu_moe.c; GPU, prints "SKIP: no CUDA device" and runs only its CPU
 * checks where there is none).
 *
 * A case is a routed row or spec x router experts (local ones, shared ones)
 * x tokens x (n, k) x a logits case x a GEMM probe. On a device each case
 * runs twice with a poisoned output (same bits in the output, ids and
 * weights; nothing written past the output) and is checked four ways, each
 * against something the kernels did not compute:
 *  - the verdict of the exact routed reference (ref_moe_verify: the ids must
 *    be an admissible top-k of the exact scores, the weights within their
 *    certified bound, every output element within its bound);
 *  - the device's token sort equals the host's qv_moe_sort of the device's
 *    ids, slot for slot (segments padded with -1 to the kernel's block);
 *  - a token whose choices are all on other ranks (expert map -1) and that
 *    has no shared expert is exactly +0 in every column;
 *  - with one expert far above the rest, every token's first choice is it.
 * The rows: Marlin-style W4A16 experts (g128, g32, channelwise in the
 * dequant or the epilogue, act_order), DeepSeek-V3-style fp8 block-128
 * experts with a shared expert and a routed scaling factor, and gpt-oss-style
 * MXFP4 experts with and without a bias (e8m0 codes at the ends of their
 * range among them), with NVFP4 ones beside them; top-2 rows without a
 * bias in bf16 and FP4. Each case whose experts
 * the wgmma grouped GEMM takes runs again on it whatever its batch, with
 * 64-, 128- and 256-slot blocks in turn over the cases; each run prints a
 * line on stderr as it starts and one with its times as it ends.
 * Without a device the CPU half checks that the rows flagged gpu_kernel are
 * the ones the backend takes, that the workspace plan holds the largest sort
 * of every case, that refusals happen before any CUDA call, the grouped
 * GEMM's path and block by the rows per expert, and, for the
 * smaller FP4 cases, that every expert packs and that the routed CPU model of
 * the same data passes the verdict. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal/campaign.h"
#include "internal/gpu_moe.h"
#include "qvet/formats.h"
#include "qvet/layout.h"
#include "qvet/moe.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "support/gpu.h"

/* The date the suite was written; QVET_SEED replaces it. Case i fills its
 * data from seed * 1000 + i. */
static uint64_t g_seed = 20261205;

#define MIXTRAL "moe-mixtral-w4a16-g128-f16"
#define QWEN3 "moe-qwen3-w4a16-g128-bf16"
#define ACTORDER "moe-w4a16-actorder-f16"
#define CHANNEL "moe-w4a16-channel-f16"
/* DeepSeek-V3's routing (256 experts, top-8 sigmoid, rsf 2.5, one shared
 * expert) over W4A16 bf16 experts. */
#define DSV3 "w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.5"
#define DSFP8 "moe-deepseek-fp8-b128-bf16"
/* DeepSeek-V3's whole router: 8 groups of 32, 4 kept by their top-2 sums, a
 * selection bias; and group-limited routes of other shapes. */
#define DSV3G "moe-deepseekv3-grouped-fp8-b128-bf16"
#define G_ZERO "w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.5,groups=8,gtopk=4,gmask=zero,sbias=f32,eps=1e-20"
#define G_MAX "w=u4b8,ws=f16/g128,route=softmax-topk,topk=6,groups=8,gtopk=3,gscore=max"
#define G_TIES "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2,tie=low,groups=4,gtopk=2,gmask=zero"
#define G_WIDE "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=8,groups=32,gtopk=8,sbias=f32"
/* Kimi-K2-class: 384 experts, top-8, a selection bias and no group limit */
#define K2 "w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.827,sbias=f32"
#define GPTOSS "moe-gptoss-mxfp4-bias-bf16"
/* gpt-oss's MXFP4 experts without their bias; with f16 activations and an
 * f16 bias; with one choice a token. */
#define MX_NOBIAS "w=e2m1,ws=e8m0/g32,a=bf16,route=topk-softmax,topk=4"
#define MX_F16 "w=e2m1,ws=e8m0/g32,bias=f16,route=softmax-topk-renorm,topk=2"
#define MX_K1 "w=e2m1,ws=e8m0/g32,a=bf16,bias=bf16,route=softmax-topk,topk=1"
/* NVFP4 experts: bf16 through the registry row (its arithmetic declares the
 * kernel's accumulator units), f16 as a spec with an f32 bias. */
#define NV_BF16 "marlin-nvfp4a16-g16-bias-bf16,route=softmax-topk-renorm,topk=2"
#define NV_F16 "w=e2m1,ws=ue4m3/g16,ws2=f32/t,bias=f32,route=topk-softmax,topk=4"
/* The combines beside rw=acc,sum=f32: Llama 4's weight on the expert's input
 * (rw=in, the slot gather weighs the rows) with the shared and routed terms
 * added in bf16; Qwen3-Next's weight on the rounded product, the sum in
 * bf16 and a sigmoid-gated shared expert; and each key alone on other
 * experts (act_order's permuted gather, MXFP4 with a bias, channel scales,
 * two gated shared experts). */
#define LLAMA4 "moe-llama4-w4a16-g128-bf16"
#define QNEXT "moe-qwen3next-w4a16-g128-bf16"
#define IN_ACT "w=u4b8,ws=f16/g128,act=gidx,route=softmax-topk-renorm,topk=2,rw=in"
#define IN_MX "w=e2m1,ws=e8m0/g32,a=bf16,bias=bf16,route=topk-softmax,topk=4,rw=in"
#define OUT_CH "w=u4b8,ws=f16/c,route=topk-softmax,topk=4,rw=out"
#define SUM_OUT "w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.5,sum=out"
#define GATE2 "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2,sgate=sigmoid"

static const struct moe_case {
    const char *spec;        /* a routed row's name or a routed spec */
    int e, e_local, shared;  /* router experts, local ones, shared ones */
    int t, n, k;
    qv_moe_logits logits;
    qv_probe_kind probe;
} kCases[] = {
    /* Mixtral-8x7B: decode, batches, every logits case. */
    {MIXTRAL, 8, 8, 0, 1, 256, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {MIXTRAL, 8, 8, 0, 2, 256, 384, QV_LOGITS_RANDOM, QV_PROBE_ONEHOT},
    {MIXTRAL, 8, 8, 0, 37, 320, 256, QV_LOGITS_TIES, QV_PROBE_EXACT},
    {MIXTRAL, 8, 8, 0, 33, 128, 256, QV_LOGITS_NEAR_TIES, QV_PROBE_RANDOM},
    {MIXTRAL, 8, 8, 0, 300, 128, 256, QV_LOGITS_ONE_EXPERT, QV_PROBE_EXACT},
    {MIXTRAL, 8, 8, 0, 64, 192, 256, QV_LOGITS_EMPTY, QV_PROBE_RANDOM},
    {MIXTRAL, 8, 8, 0, 129, 128, 256, QV_LOGITS_WIDE, QV_PROBE_RANDOM},
    {MIXTRAL, 8, 6, 0, 65, 128, 256, QV_LOGITS_MASKED, QV_PROBE_EXACT},
    {MIXTRAL, 8, 4, 0, 17, 128, 256, QV_LOGITS_NONLOCAL, QV_PROBE_RANDOM},
    {MIXTRAL, 8, 8, 0, 4096, 64, 128, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    /* about 128 and 160 rows an expert: two or three 64-slot blocks each */
    {MIXTRAL, 8, 8, 0, 512, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {MIXTRAL, 8, 8, 0, 640, 192, 128, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    /* Mixtral-8x7B's whole expert GEMM (N = 28672, K = 4096). */
    {MIXTRAL, 8, 8, 0, 2, 28672, 4096, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    /* Qwen3-MoE: 128 experts, top-8, bf16. */
    {QWEN3, 128, 128, 0, 1, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {QWEN3, 128, 128, 0, 8, 128, 256, QV_LOGITS_TIES, QV_PROBE_RANDOM},
    {QWEN3, 128, 96, 0, 200, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {QWEN3, 128, 64, 0, 31, 128, 256, QV_LOGITS_NONLOCAL, QV_PROBE_RANDOM},
    {QWEN3, 128, 128, 0, 1024, 64, 128, QV_LOGITS_ONE_EXPERT, QV_PROBE_RANDOM},
    {QWEN3, 128, 128, 0, 4096, 64, 128, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {QWEN3, 128, 128, 0, 16, 1536, 2048, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    /* act_order per expert, channelwise scales in the dequant. */
    {ACTORDER, 8, 8, 0, 65, 192, 384, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {ACTORDER, 8, 8, 0, 16, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_ONEHOT},
    {ACTORDER, 8, 6, 0, 257, 128, 256, QV_LOGITS_TIES, QV_PROBE_EXACT},
    {CHANNEL, 16, 16, 0, 1, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {CHANNEL, 16, 12, 0, 100, 320, 128, QV_LOGITS_MASKED, QV_PROBE_RANDOM},
    /* k = 1; channel scales in the epilogue; groups of 32. */
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=1", 8, 8, 0, 63, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {"w=u4b8,ws=f16/c,dq=exact,route=softmax-topk-renorm,topk=2", 8, 8, 0, 40, 128, 256, QV_LOGITS_RANDOM,
     QV_PROBE_RANDOM},
    {"w=u4b8,ws=f16/g32,route=softmax-topk-renorm,topk=2", 8, 8, 0, 9, 64, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    /* Top-2 without a bias in bf16 and FP4; the W4A16 and MXFP4 cases have
     * non-local experts (tokens with two, one or no local choice), the
     * NVFP4 one none. */
    {"w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=2", 8, 6, 0, 129, 192, 256, QV_LOGITS_MASKED,
     QV_PROBE_RANDOM},
    {"w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=2", 8, 5, 0, 300, 128, 256, QV_LOGITS_RANDOM,
     QV_PROBE_EXACT},
    {"w=e2m1,ws=e8m0/g32,a=bf16,route=softmax-topk-renorm,topk=2", 32, 24, 0, 65, 128, 256, QV_LOGITS_RANDOM,
     QV_PROBE_FP4_SCALE_ENDS},
    {"w=e2m1,ws=ue4m3/g16,ws2=f32/t,route=softmax-topk,topk=2", 16, 16, 0, 100, 320, 256, QV_LOGITS_TIES,
     QV_PROBE_RANDOM},
    /* DeepSeek-V3-class: 256 experts, top-8, a shared expert, rsf, non-local experts. */
    {DSV3, 256, 256, 1, 1, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {DSV3, 256, 256, 1, 200, 128, 256, QV_LOGITS_TIES, QV_PROBE_RANDOM},
    {DSV3, 256, 192, 1, 77, 128, 256, QV_LOGITS_NONLOCAL, QV_PROBE_RANDOM},
    {DSV3, 256, 256, 1, 4096, 64, 128, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    /* DeepSeek-V3's fp8 block-128 experts: N tails (192 = 1.5 blocks), K of
     * several 128-blocks, near ties, non-local experts, the model's K. */
    {DSFP8, 256, 256, 1, 1, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {DSFP8, 256, 256, 1, 37, 192, 384, QV_LOGITS_NEAR_TIES, QV_PROBE_RANDOM},
    {DSFP8, 256, 256, 1, 200, 128, 256, QV_LOGITS_TIES, QV_PROBE_ONEHOT},
    {DSFP8, 256, 192, 1, 65, 64, 512, QV_LOGITS_NONLOCAL, QV_PROBE_RANDOM},
    {DSFP8, 256, 256, 1, 2048, 64, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {DSFP8, 256, 256, 1, 3, 128, 7168, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {"w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=f16,route=softmax-topk-renorm,topk=2", 8, 6, 0,
     33, 320, 256, QV_LOGITS_MASKED, QV_PROBE_EXACT},
    /* N = 80: the fp8 wgmma kernel's 64 columns do not divide it (mma.sync only) */
    {DSFP8, 256, 256, 1, 40, 80, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    /* group-limited, biased routing: a decode step (routing and sort in one
     * block), every selection score below 0, exact group ties, near ties of
     * biased scores, non-local experts, a batch; gmask=zero with eps;
     * DeepSeek-V2's largest-score groups over a softmax; ties at a tie=low
     * decode step; 512 experts in 32 groups (a warp of groups) */
    {DSV3G, 256, 256, 1, 1, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {DSV3G, 256, 256, 1, 37, 128, 256, QV_LOGITS_LOW_SCORES, QV_PROBE_RANDOM},
    {DSV3G, 256, 256, 1, 200, 128, 256, QV_LOGITS_TIES, QV_PROBE_ONEHOT},
    {DSV3G, 256, 256, 1, 64, 64, 256, QV_LOGITS_NEAR_TIES, QV_PROBE_RANDOM},
    {DSV3G, 256, 192, 1, 65, 64, 512, QV_LOGITS_NONLOCAL, QV_PROBE_RANDOM},
    {DSV3G, 256, 256, 1, 1024, 64, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {G_ZERO, 256, 256, 0, 48, 128, 256, QV_LOGITS_LOW_SCORES, QV_PROBE_RANDOM},
    {G_MAX, 64, 64, 0, 33, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {G_TIES, 16, 16, 0, 5, 128, 256, QV_LOGITS_TIES, QV_PROBE_EXACT},
    {G_WIDE, 512, 512, 0, 40, 64, 128, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {K2, 384, 384, 1, 3, 128, 256, QV_LOGITS_NEAR_TIES, QV_PROBE_EXACT},
    {K2, 384, 384, 1, 300, 64, 256, QV_LOGITS_LOW_SCORES, QV_PROBE_RANDOM},
    /* gpt-oss: MXFP4 experts with a bf16 bias, top-4 then softmax. N tails
     * (320: one 64-column chunk in the second tile), K of 9 groups (the
     * last stage partial), K = g (one group), experts nobody takes, one
     * expert taking all, non-local experts, e8m0 codes at the ends of the
     * range (1, 2, 253, 254, and a column that overflows to Inf), the
     * model's whole expert GEMM (N = 5760, K = 2880). */
    {GPTOSS, 32, 32, 0, 1, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {GPTOSS, 32, 32, 0, 37, 320, 256, QV_LOGITS_TIES, QV_PROBE_EXACT},
    {GPTOSS, 32, 32, 0, 64, 192, 288, QV_LOGITS_EMPTY, QV_PROBE_RANDOM},
    {GPTOSS, 32, 32, 0, 300, 128, 256, QV_LOGITS_ONE_EXPERT, QV_PROBE_EXACT},
    {GPTOSS, 32, 24, 0, 65, 128, 256, QV_LOGITS_NONLOCAL, QV_PROBE_RANDOM},
    {GPTOSS, 32, 32, 0, 33, 128, 32, QV_LOGITS_RANDOM, QV_PROBE_ONEHOT},
    {GPTOSS, 32, 32, 0, 40, 256, 512, QV_LOGITS_RANDOM, QV_PROBE_FP4_SCALE_ENDS},
    {GPTOSS, 32, 32, 0, 1024, 64, 128, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {GPTOSS, 32, 32, 0, 4, 5760, 2880, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    /* the same without a bias; f16 (e8m0 ends where f16 underflows and
     * overflows); k = 1 */
    {MX_NOBIAS, 32, 32, 0, 17, 128, 256, QV_LOGITS_NEAR_TIES, QV_PROBE_EXACT},
    {MX_NOBIAS, 32, 32, 0, 9, 64, 256, QV_LOGITS_RANDOM, QV_PROBE_FP4_SCALE_ENDS},
    {MX_F16, 8, 8, 0, 33, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_FP4_SCALE_ENDS},
    {MX_F16, 8, 6, 0, 65, 192, 384, QV_LOGITS_MASKED, QV_PROBE_RANDOM},
    {MX_K1, 32, 32, 0, 63, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    /* NVFP4: each expert's global scale; K = 48 (three k16 tiles) */
    {NV_BF16, 16, 16, 0, 33, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {NV_BF16, 16, 12, 0, 100, 320, 48, QV_LOGITS_WIDE, QV_PROBE_RANDOM},
    {NV_F16, 16, 16, 0, 1, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {NV_F16, 16, 16, 0, 200, 64, 512, QV_LOGITS_TIES, QV_PROBE_RANDOM},
    /* rw=in: a decode step of K = 2048 (K parts), near ties, non-local
     * experts, a wgmma batch; act_order; MXFP4 with its bias */
    {LLAMA4, 16, 16, 1, 1, 128, 2048, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {LLAMA4, 16, 16, 1, 37, 192, 384, QV_LOGITS_NEAR_TIES, QV_PROBE_RANDOM},
    {LLAMA4, 16, 12, 1, 65, 128, 256, QV_LOGITS_NONLOCAL, QV_PROBE_RANDOM},
    {LLAMA4, 16, 16, 1, 1024, 64, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {IN_ACT, 8, 8, 0, 40, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {IN_MX, 32, 32, 0, 65, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    /* rw=out, sum=out, sgate: a decode step, ties, non-local experts, a
     * wgmma batch; each key alone */
    {QNEXT, 512, 512, 1, 1, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {QNEXT, 512, 512, 1, 200, 64, 256, QV_LOGITS_TIES, QV_PROBE_RANDOM},
    {QNEXT, 512, 384, 1, 33, 128, 512, QV_LOGITS_NONLOCAL, QV_PROBE_RANDOM},
    {QNEXT, 512, 512, 1, 4096, 64, 128, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {OUT_CH, 16, 16, 1, 64, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {SUM_OUT, 64, 64, 1, 33, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    {GATE2, 8, 8, 2, 50, 128, 256, QV_LOGITS_RANDOM, QV_PROBE_RANDOM},
    /* the combine's staged form (decode batches of up to 16 tokens): N = 80
     * ending in a part of its 64-column block, two gated shared experts;
     * then 16 choices in 8 K parts, past its 96 terms: the plain form at
     * one token */
    {DSFP8, 256, 256, 1, 3, 80, 256, QV_LOGITS_RANDOM, QV_PROBE_EXACT},
    {GATE2, 8, 8, 2, 4, 128, 256, QV_LOGITS_NEAR_TIES, QV_PROBE_RANDOM},
    {"w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=16", 64, 64, 0, 1, 128, 2048, QV_LOGITS_RANDOM,
     QV_PROBE_RANDOM},
};
#define NCASES ((int)(sizeof kCases / sizeof kCases[0]))

/* The routed spec of a case (rows interned by the registry, specs parsed
 * once per case into a static). */
static const qv_moe_spec *spec_of(int i)
{
    static qv_moe_spec parsed[NCASES];
    const qv_moe_row *r = qv_moe_row_find(kCases[i].spec);
    const qv_moe_spec *s = NULL;
    if (r) {
        ck_assert_msg(qv_moe_row_spec(r, &s) == QV_OK, "%s: %s", kCases[i].spec, qv_errmsg());
        return s;
    }
    ck_assert_msg(qv_moe_spec_parse(kCases[i].spec, &parsed[i]) == QV_OK, "%s: %s", kCases[i].spec, qv_errmsg());
    return &parsed[i];
}

static void build(int i, qv_moe_problem *p)
{
    const struct moe_case *c = &kCases[i];
    const qv_moe_spec *s = spec_of(i);
    ck_assert_msg(qv_moe_problem_create(p, s, c->t, c->n, c->k, c->e, c->e_local, c->shared) == QV_OK, "case %d: %s", i,
                  qv_errmsg());
    ck_assert_msg(ref_moe_fill(p, c->logits, c->probe, QV_REGIME_LOGUNIFORM, g_seed * 1000 + (uint64_t)i) == QV_OK,
                  "case %d: %s", i, qv_errmsg());
}

/* The device argument struct of p as the runner sets it up, without buffers. */
static qv_moe_dev shape_of(const qv_moe_problem *p)
{
    qv_moe_dev d;
    memset(&d, 0, sizeof d);
    d.t = (int)p->t, d.n = (int)p->n, d.k = (int)p->k, d.e = p->e, d.e_local = p->e_local, d.shared = p->shared;
    d.topk = p->s->topk;
    d.act_order = p->s->expert->act_order;
    return d;
}

static int cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* ---- CPU half ---------------------------------------------------------------------- */

/* The rows flagged gpu_kernel are exactly the ones the backend takes. */
START_TEST(rows_flagged)
{
    int flagged = 0;
    for (int i = 0; i < qv_moe_row_count(); i++) {
        const qv_moe_row *r = qv_moe_row_get(i);
        const qv_moe_spec *s;
        ck_assert_int_eq(qv_moe_row_spec(r, &s), QV_OK);
        qv_status st = qv_gpu_moe_supported(s);
        ck_assert_msg((st == QV_OK) == (r->gpu_kernel == 1), "%s: gpu_kernel %d, backend says %s", r->name,
                      r->gpu_kernel, st == QV_OK ? "yes" : qv_errmsg());
        flagged += r->gpu_kernel;
    }
    ck_assert_int_ge(flagged, 7);
}
END_TEST

/* Every case's spec is one the backend takes, and its shape one the kernels
 * take: the GPU half never meets a refusal. */
START_TEST(cases_supported)
{
    const struct moe_case *c = &kCases[_i];
    const qv_moe_spec *s = spec_of(_i);
    ck_assert_msg(qv_gpu_moe_supported(s) == QV_OK, "%s: %s", c->spec, qv_errmsg());
    const int fp8 = s->expert->wfmt == QV_FMT_E4M3;
    ck_assert_msg(c->n % (fp8 ? 16 : 64) == 0 && c->k % 16 == 0, "case %d: n=%d k=%d", _i, c->n, c->k);
    ck_assert_int_le(s->topk, QV_MOE_GPU_MAX_TOPK);
    ck_assert_int_le(c->e, 1024);
}
END_TEST

/* Refusals come before any CUDA call (this runs without a device). */
START_TEST(refusals)
{
    qv_moe_spec s;
    /* every combine the spec declares is taken (rw, sum, sgate) */
    ck_assert_int_eq(qv_moe_spec_parse("w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rw=out", &s), QV_OK);
    ck_assert_msg(qv_gpu_moe_supported(&s) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(qv_moe_spec_parse("w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=10,rw=out,sum=out,"
                                       "sgate=sigmoid", &s), QV_OK);
    ck_assert_msg(qv_gpu_moe_supported(&s) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(qv_moe_spec_parse("w=u4b8,ws=f16/g128,act=gidx,route=sigmoid-topk,topk=1,rw=in,sum=out", &s), QV_OK);
    ck_assert_msg(qv_gpu_moe_supported(&s) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(qv_moe_spec_parse("w=u4,ws=f16/g128,wz=int/g128,route=softmax-topk,topk=2", &s), QV_OK);
    ck_assert_int_eq(qv_gpu_moe_supported(&s), QV_ERR_UNSUPPORTED);
    ck_assert_int_eq(qv_moe_spec_parse("w=u4b8,ws=f16/g128,route=softmax-topk,topk=33", &s), QV_OK);
    ck_assert_int_eq(qv_gpu_moe_supported(&s), QV_ERR_UNSUPPORTED);
    ck_assert_int_eq(qv_moe_spec_parse("w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,groups=64,gtopk=2", &s), QV_OK);
    ck_assert_int_eq(qv_gpu_moe_supported(&s), QV_ERR_UNSUPPORTED);
    ck_assert(strstr(qv_errmsg(), "32 expert groups") != NULL);
    int dummy = 0;
    qv_moe_dev d = {.t = 4, .n = 128, .k = 256, .e = 64, .e_local = 64, .topk = 33, .mb = 1};
    d.logits = &dummy;
    d.expert_map = (const int32_t *)&dummy;
    d.a = (const uint16_t *)&dummy;
    d.b = (const uint32_t *)&dummy;
    d.scales = &dummy;
    d.out = &dummy;
    d.workspace = &dummy;
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_UNSUPPORTED);
    d.topk = 2;
    d.groups = 6, d.gtopk = 2; /* 6 groups do not divide 64 experts */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_UNSUPPORTED);
    d.groups = 64; /* more than a warp of groups */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_UNSUPPORTED);
    d.groups = 0, d.gtopk = 0;
    d.n = 96; /* not a multiple of 64 */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_SHAPE);
    d.n = 128;
    d.e = 2048; /* more router experts than the routing kernel's 1024 */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_UNSUPPORTED);
    d.e = 64;
    d.kind = QV_MOE_MXFP4;
    d.g_shift = 1;
    d.k = 240; /* not a multiple of MXFP4's group of 32 */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_SHAPE);
    d.kind = QV_MOE_NVFP4; /* 240 = 15 groups of 16, but no global scales */
    d.g_shift = 0;
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "global scales"), "%s", qv_errmsg());
    d.kind = QV_MOE_MXFP4; /* MXFP4's scales are per 32: g_shift 1 */
    d.k = 256;
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "g_shift 1"), "%s", qv_errmsg());
    d.g_shift = 1;
    d.bias = &dummy;
    d.bias_fmt = QV_FMT_E4M3; /* not a bias format */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "bias"), "%s", qv_errmsg());
    d.kind = QV_MOE_W4A16; /* a bias needs FP4 experts */
    d.g_shift = 0;
    d.bias_fmt = QV_FMT_BF16;
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_UNSUPPORTED);
    d.bias = NULL;
    /* the wgmma kernel: 64-, 128- or 256-row blocks, and not the experts it does not take */
    d.wg = 1;
    d.mb = 2;
    d.g_shift = 3; /* g = 128 */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "4, 8 or 16"), "%s", qv_errmsg());
    d.mb = 8;
    d.g_shift = 1; /* g = 32 */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(qv_errmsg(), "wgmma"), "%s", qv_errmsg());
    /* K parts: at most 8, and never on wgmma or with an fp32 epilogue factor */
    d.mb = 8;
    d.g_shift = 3;
    d.ksplit = 2;
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "K parts"), "%s", qv_errmsg());
    d.wg = 0;
    d.mb = 1;
    d.ksplit = 9;
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "K parts"), "%s", qv_errmsg());
    d.ksplit = 2;
    d.scale_mode = 1; /* channel scales in the epilogue */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "K parts"), "%s", qv_errmsg());
    d.scale_mode = 0;
    d.ksplit = 0;
    d.wg = 1;
    d.mb = 8;
    d.g_shift = 1;
    d.kind = QV_MOE_FP8_B128;
    d.g_shift = 0;
    d.a_scale = (const float *)&dummy;
    /* fp8 experts on wgmma: their own kernel, 64-row blocks, N a multiple of 64 */
    ck_assert_int_eq(qv_moe_launch(&d, NULL), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "fp8 wgmma"), "%s", qv_errmsg());
    ck_assert(!qv_moe_wg_covers(&d));
    ck_assert(qv_moe_fp8_wg_covers(&d));
    d.n = 80;
    ck_assert(!qv_moe_fp8_wg_covers(&d));
    d.n = 128;
    d.kind = QV_MOE_W4A16;
    d.g_shift = 3;
    ck_assert(qv_moe_wg_covers(&d));
    d.k = 320; /* not whole groups of 128 */
    ck_assert(!qv_moe_wg_covers(&d));
}
END_TEST

/* qvet check's routed suite reaches the fp8 wgmma GEMM through its last
 * case alone, the expert-parallel shard (32 tokens, top-k local experts):
 * the launch plans 32 rows per expert there, the threshold, and fewer in
 * every other case of the fp8 row (its batches are cut to a few tokens by
 * the CPU cap). */
START_TEST(suite_reaches_fp8_wgmma)
{
    int fp8_rows = 0;
    for (int i = 0; i < qv_moe_row_count(); i++) {
        const qv_moe_row *r = qv_moe_row_get(i);
        const qv_moe_spec *s;
        ck_assert_int_eq(qv_moe_row_spec(r, &s), QV_OK);
        if (s->expert->wfmt != QV_FMT_E4M3) continue;
        fp8_rows++;
        const int n = qv_moe_suite_count(r);
        for (int j = 0; j < n; j++) {
            qv_moe_case c;
            qv_moe_suite_case(r, 20261129, j, &c);
            qv_moe_dev d;
            memset(&d, 0, sizeof d);
            d.kind = QV_MOE_FP8_B128, d.t = (int)c.t, d.n = (int)c.n, d.k = (int)c.k, d.topk = s->topk;
            d.e = c.e, d.e_local = c.e_local, d.shared = c.shared;
            const qv_launch_opts o = {.sms = 132, .arch = 90};
            ck_assert_msg(qv_moe_pick(&d, &o) == QV_OK, "%s case %d: %s", r->name, j, qv_errmsg());
            ck_assert_msg(d.wg == (j == n - 1), "%s case %d (t=%lld, %d local experts): %s", r->name, j,
                          (long long)c.t, c.e_local, d.wg ? "wgmma" : "mma.sync");
        }
    }
    ck_assert_int_ge(fp8_rows, 1);
}
END_TEST

/* The grouped GEMM's path and block by the mean rows per expert (planned
 * for an H200-like device: no CUDA call). */
START_TEST(pick_path)
{
    static const struct {
        int kind, t, topk, e, g_shift, grp_single, scale_mode, min_rows, block;
        int wg, mb;
    } cases[] = {
        /* Mixtral: 2 of 8 experts */
        {QV_MOE_W4A16, 4096, 2, 8, 3, 0, 0, 0, 0, 1, 16},  /* 1024 rows per expert: 256-row blocks */
        {QV_MOE_W4A16, 3072, 2, 8, 3, 0, 0, 0, 0, 1, 16},  /* 768 */
        {QV_MOE_W4A16, 3068, 2, 8, 3, 0, 0, 0, 0, 1, 8},   /* 767: 128-row blocks */
        {QV_MOE_W4A16, 256, 2, 8, 3, 0, 0, 0, 0, 1, 8},    /* 64 */
        {QV_MOE_W4A16, 255, 2, 8, 3, 0, 0, 0, 0, 1, 4},    /* 63: 64-row blocks */
        {QV_MOE_W4A16, 128, 2, 8, 3, 0, 0, 0, 0, 1, 4},    /* 32: the default threshold */
        {QV_MOE_W4A16, 127, 2, 8, 3, 0, 0, 0, 0, 0, 2},    /* 31: mma.sync, 32-row blocks */
        {QV_MOE_W4A16, 64, 2, 8, 3, 0, 0, 0, 0, 0, 1},     /* 16 */
        {QV_MOE_W4A16, 4096, 2, 8, 3, 0, 0, QV_OPT_OFF, 0, 0, 4},
        {QV_MOE_W4A16, 4096, 2, 8, 3, 0, 0, 0, 64, 1, 4},
        {QV_MOE_W4A16, 8, 2, 8, 3, 0, 0, 1, 128, 1, 8},
        {QV_MOE_W4A16, 4096, 2, 8, 1, 0, 0, 0, 0, 0, 4},   /* g = 32: mma.sync */
        {QV_MOE_W4A16, 4096, 2, 8, 30, 1, 0, 0, 0, 1, 16}, /* one group of K */
        {QV_MOE_W4A16, 4096, 2, 8, 0, 0, 1, 0, 0, 1, 16},  /* channel scales in the epilogue */
        {QV_MOE_W4A16, 4096, 2, 8, 3, 0, 0, 0, 256, 1, 16},
        {QV_MOE_MXFP4, 4096, 4, 32, 1, 0, 0, 0, 0, 1, 16}, /* gpt-oss: 512 rows, MXFP4's 256-row blocks */
        {QV_MOE_MXFP4, 4088, 4, 32, 1, 0, 0, 0, 0, 1, 8},  /* 511 */
        {QV_MOE_W4A16, 2048, 4, 16, 3, 0, 0, 0, 0, 1, 8},  /* 512 rows of int4 experts: 128 */
        {QV_MOE_NVFP4, 4096, 4, 32, 0, 0, 0, 0, 0, 1, 8},
        {QV_MOE_FP8_B128, 4096, 8, 256, 0, 0, 0, 0, 0, 1, 4},   /* 128 rows: the fp8 wgmma kernel */
        {QV_MOE_FP8_B128, 4096, 8, 256, 0, 0, 0, 0, 256, 1, 4}, /* which takes 64-row blocks only */
        {QV_MOE_FP8_B128, 1024, 8, 256, 0, 0, 0, 0, 0, 1, 4},   /* 32 */
        {QV_MOE_FP8_B128, 1020, 8, 256, 0, 0, 0, 0, 0, 0, 2},   /* 31: mma.sync */
        {QV_MOE_FP8_B128, 4096, 8, 256, 0, 0, 0, QV_OPT_OFF, 0, 0, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qv_moe_dev d;
        memset(&d, 0, sizeof d);
        d.kind = cases[i].kind, d.t = cases[i].t, d.topk = cases[i].topk, d.e = d.e_local = cases[i].e;
        d.n = 1024, d.k = 4096, d.g_shift = cases[i].g_shift, d.grp_single = cases[i].grp_single;
        d.scale_mode = cases[i].scale_mode;
        /* mb: the block without pairs; with them (the default from 160
         * rows per expert, no block forced), 128 */
        const qv_launch_opts o = {.moe_wg_min_rows = cases[i].min_rows, .moe_wg_block = cases[i].block,
                                  .moe_wg_pairs = QV_OPT_OFF, .sms = 132, .arch = 90};
        ck_assert_msg(qv_moe_pick(&d, &o) == QV_OK, "case %zu: %s", i, qv_errmsg());
        ck_assert_msg(d.wg == cases[i].wg && d.mb == cases[i].mb && !d.pairs && !d.fit,
                      "case %zu: wg %d mb %d pairs %d, not wg %d mb %d", i, d.wg, d.mb, d.pairs, cases[i].wg,
                      cases[i].mb);
        const qv_launch_opts od = {.moe_wg_min_rows = cases[i].min_rows, .moe_wg_block = cases[i].block,
                                   .sms = 132, .arch = 90};
        ck_assert_msg(qv_moe_pick(&d, &od) == QV_OK, "case %zu: %s", i, qv_errmsg());
        const int pairs_n = cases[i].t * cases[i].topk, mean = pairs_n / (pairs_n < cases[i].e ? pairs_n : cases[i].e);
        const int free = cases[i].wg && cases[i].kind != QV_MOE_FP8_B128 && !cases[i].block;
        const int fit = free && mean >= 128 && mean < 1536, pairs = free && mean >= 160 && !fit;
        ck_assert_msg(d.wg == cases[i].wg && d.pairs == pairs && d.fit == fit &&
                          d.mb == (fit ? 4 : pairs ? 8 : cases[i].mb),
                      "case %zu by default: wg %d mb %d pairs %d fit %d", i, d.wg, d.mb, d.pairs, d.fit);
    }
    /* pairs asked: 128-slot blocks, where the block is not forced to another */
    const qv_launch_opts on = {.moe_wg_pairs = QV_OPT_ON, .sms = 132, .arch = 90};
    const qv_launch_opts on256 = {.moe_wg_pairs = QV_OPT_ON, .moe_wg_block = 256, .sms = 132, .arch = 90};
    const qv_launch_opts on128 = {.moe_wg_pairs = QV_OPT_ON, .moe_wg_block = 128, .sms = 132, .arch = 90};
    {
        qv_moe_dev d;
        memset(&d, 0, sizeof d);
        d.kind = QV_MOE_W4A16, d.t = 4096, d.topk = 2, d.e = d.e_local = 8, d.n = 1024, d.k = 4096, d.g_shift = 3;
        ck_assert(qv_moe_pick(&d, &on) == QV_OK && d.wg && d.pairs && d.mb == 8);
        ck_assert(qv_moe_pick(&d, &on128) == QV_OK && d.wg && d.pairs && d.mb == 8);
        ck_assert(qv_moe_pick(&d, &on256) == QV_OK && d.wg && !d.pairs && d.mb == 16);
        d.t = 40; /* 10 rows per expert: pairs where asked only */
        const qv_launch_opts wg1 = {.moe_wg_min_rows = 1, .sms = 132, .arch = 90};
        const qv_launch_opts wg1on = {.moe_wg_min_rows = 1, .moe_wg_pairs = QV_OPT_ON, .sms = 132, .arch = 90};
        ck_assert(qv_moe_pick(&d, &wg1) == QV_OK && d.wg && !d.pairs && d.mb == 4);
        ck_assert(qv_moe_pick(&d, &wg1on) == QV_OK && d.wg && d.pairs && d.mb == 8);
        /* by default: 128-slot tiles to 127 rows, fitted from 128 to
         * 1535, pairs from 1536 */
        const qv_launch_opts dflt = {.sms = 132, .arch = 90};
        d.t = 508; /* 127 rows */
        ck_assert(qv_moe_pick(&d, &dflt) == QV_OK && d.wg && !d.pairs && !d.fit && d.mb == 8);
        d.t = 512; /* 128 */
        ck_assert(qv_moe_pick(&d, &dflt) == QV_OK && d.wg && !d.pairs && d.fit && d.mb == 4);
        d.t = 3072; /* 768 */
        ck_assert(qv_moe_pick(&d, &dflt) == QV_OK && d.wg && !d.pairs && d.fit && d.mb == 4);
        d.t = 6140; /* 1535 */
        ck_assert(qv_moe_pick(&d, &dflt) == QV_OK && d.wg && !d.pairs && d.fit && d.mb == 4);
        d.t = 6144; /* 1536 */
        ck_assert(qv_moe_pick(&d, &dflt) == QV_OK && d.wg && d.pairs && !d.fit && d.mb == 8);
        /* pairs asked, or off: no fit by default */
        d.t = 640;
        ck_assert(qv_moe_pick(&d, &on) == QV_OK && d.wg && d.pairs && !d.fit && d.mb == 8);
        const qv_launch_opts off = {.moe_wg_pairs = QV_OPT_OFF, .sms = 132, .arch = 90};
        ck_assert(qv_moe_pick(&d, &off) == QV_OK && d.wg && !d.pairs && !d.fit && d.mb == 8);
    }
    /* fit asked: 64-slot blocks, no pairs, where no other block is forced
     * and pairs are not asked */
    {
        qv_moe_dev d;
        memset(&d, 0, sizeof d);
        d.kind = QV_MOE_W4A16, d.t = 512, d.topk = 2, d.e = d.e_local = 8, d.n = 1024, d.k = 4096, d.g_shift = 3;
        const qv_launch_opts fit = {.moe_wg_fit = QV_OPT_ON, .sms = 132, .arch = 90};
        const qv_launch_opts fit64 = {.moe_wg_fit = QV_OPT_ON, .moe_wg_block = 64, .sms = 132, .arch = 90};
        const qv_launch_opts fit128 = {.moe_wg_fit = QV_OPT_ON, .moe_wg_block = 128, .sms = 132, .arch = 90};
        const qv_launch_opts fitp = {.moe_wg_fit = QV_OPT_ON, .moe_wg_pairs = QV_OPT_ON, .sms = 132, .arch = 90};
        const qv_launch_opts fitpo = {.moe_wg_fit = QV_OPT_ON, .moe_wg_pairs = QV_OPT_OFF, .sms = 132, .arch = 90};
        ck_assert(qv_moe_pick(&d, &fit) == QV_OK && d.wg && d.fit && !d.pairs && d.mb == 4);
        ck_assert(qv_moe_pick(&d, &fit64) == QV_OK && d.wg && d.fit && !d.pairs && d.mb == 4);
        ck_assert(qv_moe_pick(&d, &fitpo) == QV_OK && d.wg && d.fit && !d.pairs && d.mb == 4);
        ck_assert(qv_moe_pick(&d, &fit128) == QV_OK && d.wg && !d.fit && !d.pairs && d.mb == 8);
        ck_assert(qv_moe_pick(&d, &fitp) == QV_OK && d.wg && !d.fit && d.pairs && d.mb == 8);
        d.t = 4096; /* 1024 rows */
        ck_assert(qv_moe_pick(&d, &fit) == QV_OK && d.wg && d.fit && !d.pairs && d.mb == 4);
        const qv_launch_opts dflt = {.sms = 132, .arch = 90};
        ck_assert(qv_moe_pick(&d, &dflt) == QV_OK && d.wg && d.fit && !d.pairs && d.mb == 4);
        d.t = 8192; /* 2048 rows: pairs by default, fit where asked */
        ck_assert(qv_moe_pick(&d, &dflt) == QV_OK && d.wg && !d.fit && d.pairs && d.mb == 8);
        ck_assert(qv_moe_pick(&d, &fit) == QV_OK && d.wg && d.fit && !d.pairs && d.mb == 4);
        /* on mma.sync (10 rows an expert) fit asks nothing */
        d.t = 40;
        ck_assert(qv_moe_pick(&d, &fit) == QV_OK && !d.wg && !d.fit && !d.pairs);
    }
    qv_moe_dev d;
    memset(&d, 0, sizeof d);
    const qv_launch_opts bad = {.moe_wg_block = 96, .sms = 132, .arch = 90};
    ck_assert_int_eq(qv_moe_pick(&d, &bad), QV_ERR_USAGE);
}
END_TEST

/* The mma.sync kernel's K parts at decode batches (planned for 132 SMs, no
 * CUDA call), each expected value derived by hand: blocks that can hold rows
 * = ceil(n / 256) x (pairs / (16 mb) + busy experts), split when fewer than
 * the 132 SMs, into ceil(264 / blocks) parts (two 16-row blocks per SM), at most 8 and
 * (k / 16) / 16; each part ceil(k16 tiles / parts) rounded up to 8 k16
 * tiles (a stage), the last one shorter. */
START_TEST(ksplit_plan)
{
    static const struct {
        int kind, t, topk, e, n, k, g_shift, scale_mode, forced;
        int ksplit, parts, kt_part;
    } cases[] = {
        /* gpt-oss, 1 token: 23 x 4 = 92 blocks, 3 parts of 64 (k16 tiles 180) */
        {QV_MOE_MXFP4, 1, 4, 32, 5760, 2880, 1, 0, 0, 3, 3, 64},
        /* Qwen3-MoE, 1 token: 6 x 8 = 48 blocks, 6 parts of 24 (128) */
        {QV_MOE_W4A16, 1, 8, 128, 1536, 2048, 3, 0, 0, 6, 6, 24},
        /* Mixtral, 1 token: 112 x 2 = 224 blocks, no split */
        {QV_MOE_W4A16, 1, 2, 8, 28672, 4096, 3, 0, 0, 1, 1, 256},
        /* 131 blocks (n = 131 x 256, one expert): ceil(264 / 131) = 3
         * parts, ceil(256 / 3) = 86 -> 88 k16 tiles; 132 blocks: none */
        {QV_MOE_W4A16, 1, 1, 8, 33536, 4096, 3, 0, 0, 3, 3, 88},
        {QV_MOE_W4A16, 1, 1, 8, 33792, 4096, 3, 0, 0, 1, 1, 256},
        /* Mixtral, 8 tokens: 112 x (1 + 8) = 1008 blocks, no split */
        {QV_MOE_W4A16, 8, 2, 8, 28672, 4096, 3, 0, 0, 1, 1, 256},
        /* k = 512: at most (32 / 16) = 2 parts */
        {QV_MOE_W4A16, 1, 2, 8, 256, 512, 3, 0, 0, 2, 2, 16},
        /* forced: 8 parts of 16; 5 of k16 tiles 16 are 2 parts of 8 */
        {QV_MOE_W4A16, 1, 8, 128, 1536, 2048, 3, 0, 8, 8, 8, 16},
        {QV_MOE_W4A16, 1, 8, 128, 1536, 256, 3, 0, 5, 5, 2, 8},
        {QV_MOE_W4A16, 1, 8, 128, 1536, 2048, 3, 0, 1, 1, 1, 128},
        /* not taken: NVFP4's global scale and channel scales are fp32
         * epilogue factors; fp8 block-128 has its own kernel; 4096 tokens
         * of MXFP4 run on wgmma */
        {QV_MOE_NVFP4, 1, 4, 32, 5760, 2880, 0, 0, 0, 1, 1, 180},
        {QV_MOE_W4A16, 1, 8, 128, 1536, 2048, 0, 1, 4, 1, 1, 128},
        {QV_MOE_FP8_B128, 1, 8, 256, 4096, 7168, 0, 0, 0, 1, 1, 448},
        {QV_MOE_MXFP4, 4096, 4, 32, 5760, 2880, 1, 0, 4, 1, 1, 180},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qv_moe_dev d;
        memset(&d, 0, sizeof d);
        d.kind = cases[i].kind, d.t = cases[i].t, d.topk = cases[i].topk, d.e = d.e_local = cases[i].e;
        d.n = cases[i].n, d.k = cases[i].k, d.g_shift = cases[i].g_shift, d.scale_mode = cases[i].scale_mode;
        const qv_launch_opts o = {.moe_ksplit = cases[i].forced, .sms = 132, .arch = 90};
        ck_assert_msg(qv_moe_pick(&d, &o) == QV_OK, "case %zu: %s", i, qv_errmsg());
        int kt_part = -1;
        const int parts = qv_moe_parts(&d, &kt_part);
        ck_assert_msg(d.ksplit == cases[i].ksplit && parts == cases[i].parts && kt_part == cases[i].kt_part,
                      "case %zu: ksplit %d, %d parts of %d k16 tiles; expected %d, %d of %d", i, d.ksplit, parts,
                      kt_part, cases[i].ksplit, cases[i].parts, cases[i].kt_part);
        /* the workspace keeps a copy of the products per part */
        qv_moe_ws w;
        qv_moe_ws_plan(&d, d.mb, &w);
        ck_assert_uint_ge(w.bytes - w.inter, sizeof(float) * (size_t)d.ksplit * (size_t)d.t *
                                                 (size_t)d.topk * (size_t)d.n);
    }
}
END_TEST

/* The wgmma grouped GEMM's schedule visits every (token tile, column tile)
 * exactly once, and the tiles of one band of 1024 slots before the next. */
START_TEST(wg_schedule_covers)
{
    static const int blocks[] = {64, 128, 256};
    static const int ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 73, 129};
    static const int ns[] = {1, 2, 3, 5, 6, 12, 112, 224};
    for (size_t b = 0; b < 3; b++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
                const int tm = ms[i], nt = ns[j], tiles = tm * nt, band_m = 1024 / blocks[b];
                unsigned char *seen = calloc((size_t)tiles, 1);
                ck_assert(seen);
                int last_band = 0;
                for (int x = 0; x < tiles; x++) {
                    const int t = qv_moe_wg_tile_of(x, tm, nt, blocks[b]);
                    ck_assert_msg(t >= 0 && t < tiles && !seen[t], "block %d, %d x %d tiles: index %d gives %d%s",
                                  blocks[b], tm, nt, x, t, t >= 0 && t < tiles ? " again" : "");
                    seen[t] = 1;
                    const int band = t % tm / band_m;
                    ck_assert_msg(band >= last_band, "block %d, %d x %d tiles: band %d after %d", blocks[b], tm, nt,
                                  band, last_band);
                    last_band = band;
                }
                free(seen);
            }
}
END_TEST

/* The combine's form: staged where the plain grid (a block per token and
 * 1024 columns) fills at most half the SMs (132 here), plain beyond. */
START_TEST(combine_form)
{
    static const struct {
        int t, n, topk, e, staged;
    } cases[] = {
        {1, 1024, 10, 512, 1},   /* Qwen3-Next, one token: 1 block */
        {8, 1536, 8, 128, 1},    /* Qwen3: 16 */
        {1, 28672, 2, 8, 1},     /* Mixtral: 28 */
        {2, 28672, 2, 8, 1},     /* 56 */
        {3, 28672, 2, 8, 0},     /* 84 */
        {8, 16384, 1, 16, 0},    /* Llama 4: 128 */
        {16, 4096, 8, 256, 1},   /* DeepSeek-V3: 64 */
        {17, 4096, 8, 256, 0},   /* 68 */
    };
    const qv_launch_opts o = {.sms = 132, .arch = 90};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qv_moe_dev d;
        memset(&d, 0, sizeof d);
        d.kind = QV_MOE_W4A16, d.t = cases[i].t, d.n = cases[i].n, d.k = 4096, d.g_shift = 3;
        d.topk = cases[i].topk, d.e = d.e_local = cases[i].e;
        ck_assert_msg(qv_moe_pick(&d, &o) == QV_OK, "case %zu: %s", i, qv_errmsg());
        ck_assert_msg(d.staged == cases[i].staged, "case %zu: t=%d n=%d: staged %d", i, d.t, d.n, d.staged);
    }
}
END_TEST

/* The FP4 specs the backend refuses, before any CUDA call. */
START_TEST(fp4_refusals)
{
    static const char *const refused[] = {
        /* bf16 NVFP4 as a logical spec: the kernel sums in its own units */
        "w=e2m1,ws=ue4m3/g16,ws2=f32/t,a=bf16,route=softmax-topk,topk=2",
        /* NVFP4 without its global scale, MXFP4 with one */
        "w=e2m1,ws=ue4m3/g16,route=softmax-topk,topk=2",
        "w=e2m1,ws=e8m0/g32,ws2=f32/t,a=bf16,route=softmax-topk,topk=2",
        /* a group the kernel does not read: e8m0 per 16 */
        "w=e2m1,ws=e8m0/g16,a=bf16,route=softmax-topk,topk=2",
        /* an output other than the activations' */
        "w=e2m1,ws=e8m0/g32,a=bf16,out=f32,route=softmax-topk,topk=2",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        qv_moe_spec s;
        ck_assert_msg(qv_moe_spec_parse(refused[i], &s) == QV_OK, "%s: %s", refused[i], qv_errmsg());
        ck_assert_msg(qv_gpu_moe_supported(&s) == QV_ERR_UNSUPPORTED, "%s is taken", refused[i]);
    }
    /* the dense NVFP4 row named as the expert is taken with bf16; a bias with
     * the weight on the rounded product (the bias is in the product) */
    qv_moe_spec s;
    ck_assert_int_eq(qv_moe_spec_parse("w=e2m1,ws=e8m0/g32,a=bf16,bias=bf16,route=topk-softmax,topk=4,rw=out", &s),
                     QV_OK);
    ck_assert_msg(qv_gpu_moe_supported(&s) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(qv_moe_spec_parse("marlin-nvfp4a16-g16-bf16,route=softmax-topk,topk=2", &s), QV_OK);
    ck_assert_msg(qv_gpu_moe_supported(&s) == QV_OK, "%s", qv_errmsg());
}
END_TEST

/* The FP4 cases of at most 2^24 multiply-adds, on the CPU: every expert
 * packs in its Marlin FP4 layout (what the upload sends), and the routed CPU
 * model of the same data passes the exact routed verdict, so that the data
 * of each case is one the GPU half can only fail through the kernels. */
static int cpu_cases[NCASES], n_cpu_cases;

START_TEST(fp4_case_on_cpu)
{
    const int i = cpu_cases[_i];
    const struct moe_case *c = &kCases[i];
    qv_moe_problem p;
    build(i, &p);
    const qv_variant *v = p.s->expert;
    qv_variant pv = *v;
    pv.layout = v->sfmt == QV_FMT_UE4M3 ? QV_LAYOUT_MARLIN_FP4_NV : QV_LAYOUT_MARLIN_FP4_MX;
    for (int x = 0; x < p.e_local + p.shared; x++) {
        qv_problem w = p.w[x];
        w.v = &pv;
        qv_packed pk;
        ck_assert_msg(qv_pack(&w, &pk) == QV_OK, "case %d expert %d: %s", i, x, qv_errmsg());
        ck_assert_int_eq(pk.s_elem, 1);
        ck_assert_int_eq(pk.s_rows * pk.s_cols, p.k / v->g * p.n);
        ck_assert_int_eq(pk.bias_cols, v->bias_fmt == QV_FMT_NONE ? 0 : p.n);
        ck_assert_int_eq(pk.s2_cols, v->sfmt == QV_FMT_UE4M3 ? 1 : 0);
        qv_packed_destroy(&pk);
    }
    const int k = p.s->topk;
    size_t es = qv_fmt_storage_bytes(v->ofmt);
    void *out = malloc((size_t)(p.t * p.n) * es);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(p.t * k));
    float *w = malloc(sizeof(float) * (size_t)(p.t * k));
    ck_assert(out && ids && w);
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, ids, w), QV_OK);
    qv_moe_result r;
    ck_assert_int_eq(ref_moe_verify_jobs(&p, out, ids, w, cores(), &r), QV_OK);
    ck_assert_msg(r.n_route_bad == 0 && r.n_weight_bad == 0, "case %d: routing: %s", i, r.route_reason);
    ck_assert_msg(r.out.grade != QV_FAIL, "case %d (%s t=%d n=%d k=%d): the CPU model fails: %s", i, c->spec, c->t,
                  c->n, c->k, r.out.reason);
    free(out), free(ids), free(w);
    qv_moe_problem_destroy(&p);
}
END_TEST

/* The workspace plan holds the token sort of any routing of each case's
 * shape: choices spread evenly (the most segments with a padded tail), all
 * on one window of experts, and a seeded random draw. The problem here is a
 * shell (shape, spec and expert map; no weights are made). */
START_TEST(plan_holds_sort)
{
    const struct moe_case *c = &kCases[_i];
    qv_moe_problem p;
    memset(&p, 0, sizeof p);
    p.s = spec_of(_i);
    p.t = c->t, p.n = c->n, p.k = c->k, p.e = c->e, p.e_local = c->e_local, p.shared = c->shared;
    const int k = p.s->topk;
    p.expert_map = malloc(sizeof(int32_t) * (size_t)c->e);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)c->t * (size_t)k);
    ck_assert(p.expert_map && ids);
    /* the first e_local router experts local, the rest elsewhere */
    for (int j = 0; j < c->e; j++) p.expert_map[j] = j < c->e_local ? j : -1;
    qv_moe_dev d = shape_of(&p);
    uint64_t st = g_seed * 1000 + (uint64_t)_i;
    for (int pattern = 0; pattern < 3; pattern++) {
        for (int64_t t = 0; t < p.t; t++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            int first = pattern == 0 ? (int)((t * k) % c->e) : pattern == 1 ? 0 : (int)((st >> 33) % (uint64_t)c->e);
            for (int j = 0; j < k; j++) ids[t * k + j] = (first + j) % c->e;
        }
        /* mma.sync's 16-, 32- and 64-row blocks, wgmma's 64, 128 and 256 */
        for (int mb = 1; mb <= 16; mb *= 2) {
            qv_moe_ws w;
            d.wg = mb >= 8;
            qv_moe_ws_plan(&d, mb, &w);
            if ((d.wg && d.kind != QV_MOE_FP8_B128) || d.act_order)
                ck_assert_uint_ge(w.inter - w.a_slots, 2 * (size_t)w.max_slots * (size_t)d.k);
            /* the W4A16 / FP4 wgmma kernel's products a row per slot, and
             * each pair's slot for the combine */
            const int64_t pairs = (int64_t)p.t * (d.topk + d.shared);
            if (d.wg && d.kind != QV_MOE_FP8_B128) {
                const int64_t rows = pairs > w.max_slots ? pairs : w.max_slots;
                ck_assert_uint_ge(w.pair_slot - w.inter, sizeof(float) * (size_t)rows * (size_t)d.n);
                ck_assert_uint_ge(w.tiles - w.pair_slot, sizeof(int32_t) * (size_t)pairs);
            } else {
                ck_assert_uint_ge(w.pair_slot - w.inter, sizeof(float) * (size_t)pairs * (size_t)d.n);
            }
            qv_moe_sorted so;
            ck_assert_int_eq(qv_moe_sort(&p, ids, 16 * mb, &so), QV_OK);
            ck_assert_int_le(so.n_slots, w.max_slots);
            ck_assert_int_le(so.n_slots / so.block, w.max_blocks);
            qv_moe_sorted_destroy(&so);
        }
    }
    free(ids);
    free(p.expert_map);
}
END_TEST

/* ---- GPU half ---------------------------------------------------------------------- */

/* Seconds on the monotonic clock. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether the mma.sync grouped GEMM splits case i's K when asked
 * (qv_moe_ksplit_covers on the runner's terms), from the spec: W4A16 and
 * MXFP4 experts whose scales are all in the dequant (not channel or tensor
 * scales in the epilogue, not NVFP4's global scale). */
static int ksplit_case(int i)
{
    const qv_variant *v = spec_of(i)->expert;
    if (v->wfmt == QV_FMT_E4M3) return 0;
    if (v->wfmt == QV_FMT_E2M1) return v->sfmt != QV_FMT_UE4M3;
    return v->scale_layout == QV_SCALE_GROUP || v->arith.dequant == QV_DQ_MUL_RN;
}

/* Case i's problem p on the GPU under launch options o, checked: wg 1 when
 * o must put its grouped GEMM on the wgmma kernel, 0 on mma.sync, -1 either. */
static void run_on(int _i, const qv_moe_problem *pp, const qv_launch_opts *o, int want_wg)
{
    const struct moe_case *c = &kCases[_i];
    qv_moe_problem p = *pp;
    /* One line on stderr as each run starts (Check reports at the end): a
     * run that never returns is named by the last line. */
    fprintf(stderr, "case %d: %s t=%d n=%d k=%d%s\n", _i, c->spec, c->t, c->n, c->k,
            !o                                  ? ""
            : o->moe_ksplit                     ? " (mma.sync, K parts asked)"
            : o->moe_wg_min_rows == QV_OPT_OFF ? " (mma.sync forced)"
                                                : " (wgmma forced)");
    const double t0 = now_s();
    const qv_moe_spec *s = p.s;
    int k = s->topk;
    size_t es = qv_fmt_storage_bytes(s->expert->ofmt);
    void *out = malloc((size_t)(p.t * p.n) * es);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(p.t * k));
    float *w = malloc(sizeof(float) * (size_t)(p.t * k));
    ck_assert(out && ids && w);
    qv_moe_sorted dev;
    qv_gpu_moe_stats gs;
    qv_status st = qv_gpu_moe_run(&p, o, 2, out, ids, w, &dev, &gs);
    ck_assert_msg(st == QV_OK, "case %d (%s t=%d): %s", _i, c->spec, c->t, qv_errmsg());
    const double t1 = now_s();
    if (want_wg >= 0)
        ck_assert_msg(gs.wg == want_wg, "case %d: the grouped GEMM ran on %s", _i, gs.wg ? "wgmma" : "mma.sync");
    if (o && o->moe_wg_block && want_wg == 1) ck_assert_int_eq(gs.block, o->moe_wg_block);
    if (o && o->moe_wg_pairs == QV_OPT_ON && want_wg == 1) ck_assert(gs.pairs && gs.block == 128);
    if (o && o->moe_wg_fit == QV_OPT_ON && want_wg == 1) ck_assert(gs.fit && !gs.pairs && gs.block == 64);
    /* K parts as asked where the kernel takes them, of whole stages of 8
     * k16 tiles (fewer parts where K has fewer stages), else none */
    if (o && o->moe_ksplit > 1) {
        const int kt = (int)(p.k / 16), per = (kt + o->moe_ksplit - 1) / o->moe_ksplit;
        const int part = (per + 7) / 8 * 8, want = ksplit_case(_i) ? (kt + part - 1) / part : 1;
        ck_assert_msg(gs.parts == want, "case %d: %d K parts for %d asked at k = %lld, not %d", _i, gs.parts,
                      o->moe_ksplit, (long long)p.k, want);
    }
    ck_assert_msg(!gs.nondeterministic, "case %d: two launches differ (element %lld)", _i, (long long)gs.first_diff);
    ck_assert_msg(gs.guard_writes == 0, "case %d: %lld bytes written past the output", _i, (long long)gs.guard_writes);

    /* the device's sort is the host's sort of the device's ids */
    qv_moe_sorted host;
    ck_assert_int_eq(qv_moe_sort(&p, ids, gs.block, &host), QV_OK);
    ck_assert_int_eq(dev.n_slots, host.n_slots);
    for (int x = 0; x <= p.e_local + p.shared; x++)
        ck_assert_msg(dev.expert_start[x] == host.expert_start[x], "case %d: expert %d starts at %lld, not %lld", _i, x,
                      (long long)dev.expert_start[x], (long long)host.expert_start[x]);
    for (int64_t i = 0; i < host.n_slots; i++)
        ck_assert_msg(dev.slot[i] == host.slot[i], "case %d: slot %lld holds %d, not %d", _i, (long long)i,
                      dev.slot[i], host.slot[i]);
    for (int64_t b = 0; b < host.n_slots / host.block; b++)
        ck_assert_int_eq(dev.block_expert[b], host.block_expert[b]);
    ck_assert_msg(gs.count_bad < 0, "case %d: expert %d's pair count is not its segment's pairs", _i, gs.count_bad);

    /* tokens with every choice elsewhere and no shared expert: exactly +0 */
    int64_t zero_rows = 0;
    for (int64_t t = 0; t < p.t && !p.shared; t++) {
        int local = 0;
        for (int j = 0; j < k; j++) local |= p.expert_map[ids[t * k + j]] >= 0;
        if (local) continue;
        zero_rows++;
        for (int64_t j = 0; j < p.n; j++) {
            uint16_t code;
            memcpy(&code, (char *)out + (size_t)(t * p.n + j) * es, es);
            ck_assert_msg(code == 0, "case %d: token %lld has no local expert, column %lld is 0x%04x", _i,
                          (long long)t, (long long)j, code);
        }
    }
    if (c->logits == QV_LOGITS_NONLOCAL && !p.shared) ck_assert_int_eq(zero_rows, p.t);
    if (c->logits == QV_LOGITS_ONE_EXPERT)
        for (int64_t t = 1; t < p.t; t++) ck_assert_int_eq(ids[t * k], ids[0]);

    qv_moe_result r;
    ck_assert_int_eq(ref_moe_verify_jobs(&p, out, ids, w, cores(), &r), QV_OK);
    ck_assert_msg(r.n_route_bad == 0 && r.n_weight_bad == 0, "case %d (%s t=%d): routing: %s", _i, c->spec, c->t,
                  r.route_reason);
    ck_assert_msg(r.out.grade != QV_FAIL, "case %d (%s t=%d n=%d k=%d, %s): %s", _i, c->spec, c->t, c->n, c->k,
                  qv_moe_logits_name(c->logits), r.out.reason);
    fprintf(stderr, "case %d: %s, block %d, %d K parts, GPU %.2f s, verified in %.2f s\n", _i,
            gs.wg ? "wgmma" : "mma.sync", gs.block, gs.parts, t1 - t0, now_s() - t1);
    qv_moe_sorted_destroy(&dev);
    qv_moe_sorted_destroy(&host);
    free(out), free(ids), free(w);
}

/* Whether the wgmma grouped GEMM takes case i's experts (qv_moe_wg_covers
 * on the runner's terms), from the spec: MXFP4, NVFP4, W4A16 but with
 * groups of 32 (one group of K and channel scales included), and fp8
 * block-128 experts where 64 divides N (kernels/moe_fp8_wg.cu). */
static int wg_case(int i)
{
    const struct moe_case *c = &kCases[i];
    const qv_variant *v = spec_of(i)->expert;
    if (v->wfmt == QV_FMT_E4M3) return c->n % 64 == 0; /* kernels/moe_fp8_wg.cu */
    if (v->wfmt == QV_FMT_E2M1) return 1;
    if (v->scale_layout == QV_SCALE_GROUP && v->g != c->k) return v->g >= 64 && c->k % v->g == 0;
    return 1;
}

/* Every case with the default path for its shape, then, where the wgmma
 * grouped GEMM takes its experts, on that kernel whatever the batch (the
 * default takes it from 32 rows per expert on) with 64-, 128- and 256-slot
 * blocks in turn over the cases, with paired 128-slot blocks and with fitted
 * 64-slot blocks, and on mma.sync with 2, 3 or 4 K parts in
 * turn (every case: those whose experts it does not split run whole): one
 * problem (made once) on all. */
START_TEST(routed_case)
{
    qv_moe_problem p;
    build(_i, &p);
    run_on(_i, &p, NULL, -1);
    if (wg_case(_i)) {
        /* (the fp8 wgmma kernel takes 64-row blocks whatever the option) */
        static const int blocks[] = {64, 128, 256};
        const int fp8 = spec_of(_i)->expert->wfmt == QV_FMT_E4M3;
        const qv_launch_opts o = {.moe_wg_min_rows = 1, .moe_wg_block = fp8 ? 64 : blocks[_i % 3]};
        run_on(_i, &p, &o, 1);
        /* an expert's 128-slot blocks paired into 256-slot tiles */
        const qv_launch_opts op = {.moe_wg_min_rows = 1, .moe_wg_pairs = QV_OPT_ON};
        if (!fp8) run_on(_i, &p, &op, 1);
        /* an expert's 64-slot blocks fitted into tiles of 256 and one of
         * 64, 128 or 192 */
        const qv_launch_opts of = {.moe_wg_min_rows = 1, .moe_wg_fit = QV_OPT_ON};
        if (!fp8) run_on(_i, &p, &of, 1);
    }
    const qv_launch_opts o = {.moe_wg_min_rows = QV_OPT_OFF, .moe_ksplit = 2 + _i % 3};
    run_on(_i, &p, &o, 0);
    qv_moe_problem_destroy(&p);
}
END_TEST

/* The cases the wgmma kernel does not take stay on mma.sync when asked. */
START_TEST(wg_not_taken)
{
    int n = 0;
    for (int i = 0; i < NCASES; i++) {
        if (wg_case(i)) continue;
        qv_moe_problem p;
        build(i, &p);
        qv_gpu_moe g;
        const qv_launch_opts o = {.moe_wg_min_rows = 1};
        ck_assert_msg(qv_gpu_moe_upload(&p, &o, &g) == QV_OK, "case %d: %s", i, qv_errmsg());
        ck_assert_msg(!g.d.wg, "case %d (%s) was put on the wgmma kernel", i, kCases[i].spec);
        qv_gpu_moe_free(&g);
        qv_moe_problem_destroy(&p);
        n++;
    }
    ck_assert_int_ge(n, 2); /* W4A16 with groups of 32, fp8 with N = 80 */
}
END_TEST

/* QVET_MOE_CASES: "A" or "A-B" (inclusive), the routed cases to run on the
 * device, e.g. to rerun the one a failure names; unset or empty: all. A
 * value that is not a range inside the cases exits with status 2. */
static void case_range(int *lo, int *hi)
{
    *lo = 0, *hi = NCASES;
    const char *env = getenv("QVET_MOE_CASES");
    if (!env || !*env) return;
    int a, b, used = 0;
    const int got = sscanf(env, "%d%n-%d%n", &a, &used, &b, &used);
    if (got == 1) b = a;
    if (got < 1 || env[used] != '\0' || a < 0 || b < a || b >= NCASES) {
        fprintf(stderr, "QVET_MOE_CASES=%s: give A or A-B with 0 <= A <= B < %d\n", env, NCASES);
        exit(2);
    }
    *lo = a, *hi = b + 1;
}

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    int lo, hi;
    case_range(&lo, &hi);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_moe", gpu, g_seed, NCASES, &tc);
    /* (no Check assertion out here: a case whose spec does not parse fails
     * cases_supported) */
    for (int i = 0; i < NCASES; i++) {
        const struct moe_case *c = &kCases[i];
        const qv_moe_row *r = qv_moe_row_find(c->spec);
        qv_moe_spec parsed;
        const qv_moe_spec *sp = NULL;
        if (r ? qv_moe_row_spec(r, &sp) != QV_OK : qv_moe_spec_parse(c->spec, &parsed) != QV_OK) continue;
        if (!r) sp = &parsed;
        if (sp->expert->wfmt == QV_FMT_E2M1 &&
            (int64_t)c->t * (sp->topk + c->shared) * c->n * c->k <= ((int64_t)1 << 24))
            cpu_cases[n_cpu_cases++] = i;
    }
    tcase_add_test(tc, rows_flagged);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, fp4_refusals);
    tcase_add_test(tc, pick_path);
    tcase_add_test(tc, combine_form);
    tcase_add_test(tc, suite_reaches_fp8_wgmma);
    tcase_add_test(tc, wg_schedule_covers);
    tcase_add_test(tc, ksplit_plan);
    tcase_add_loop_test(tc, fp4_case_on_cpu, 0, n_cpu_cases);
    tcase_add_loop_test(tc, cases_supported, 0, NCASES);
    tcase_add_loop_test(tc, plan_holds_sort, 0, NCASES);
    if (gpu) {
        tcase_add_loop_test(tc, routed_case, lo, hi);
        tcase_add_test(tc, wg_not_taken);
    }
    return gpu_suite_run(s);
}
