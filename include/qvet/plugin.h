/* plugin.h: the plugin ABI, so `qvet check|fuzz --plugin LIB.so` verifies a
 * kernel built outside qvet exactly like qvet's own. Included by plugins (which
 * may include qvet's public headers but never link libqvet) and by src/plugin.c
 * (the loader). Rule: a plugin names what it computes, a registry row or a spec,
 * and the loader refuses any library whose ABI version, symbols or names it
 * cannot take, with a message naming the library and the cause. */
#ifndef QVET_PLUGIN_H
#define QVET_PLUGIN_H

#include "qvet/gemm.h"
#include "qvet/moe.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The ABI, version 2 (qvet still loads version-1 plugins) ----
 *
 * A plugin is a shared library exporting these six C symbols:
 *
 *   int qv_plugin_abi_version(void);       QV_PLUGIN_ABI_VERSION of the plugin.h it was built with
 *   const char *qv_plugin_name(void);      a short name ("example"): JSONL backend "plugin:NAME"
 *   int qv_plugin_variant_count(void);     how many variants it implements (1..QV_PLUGIN_MAX_VARIANTS)
 *   const char *qv_plugin_variant(int i);  variant i, 0 <= i < count: a registry row's name (`qvet
 *                                          list`) or, from version 2 on, a spec (docs/spec.md, e.g.
 *                                          "w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,bias=f32,out=bf16")
 *   int qv_plugin_pointers(void);          QV_PLUGIN_HOST or QV_PLUGIN_DEVICE
 *   int qv_plugin_launch(const char *variant, const qv_gemm_args *args);   0 = ok
 *
 * `variant` is the string exactly as qv_plugin_variant returned it (a spec is
 * not rewritten into its canonical form). The loader resolves every string
 * with qv_variant_resolve (spec.h) and refuses the library if one is neither a
 * row nor a valid spec; `qvet check --spec S --plugin LIB` runs the variant the
 * plugin declared whose canonical spec equals S's.
 *
 * The output `c` is (m, n) row-major in the variant's output format (uint16_t
 * bits for f16/bf16, float for f32, int32_t for i32), filled by qvet with a
 * poison code (a NaN for float outputs) that must not survive. m, n, k are the
 * shape; g is the weight scales' group size (0 when not grouped).
 *
 * A registry row's buffers are packed by qv_pack in the row's layout (layout.h;
 * plain-nk: `b` is (n, k) row-major codes, one byte per 8-bit code): a, a_scale,
 * azp, b, scales, scales2, zeros, perm as gemm.h and layout.h describe them;
 * bias as for a spec below; g_idx (act_order rows) (k) int32_t, the group of
 * each sorted row (qv_packed.g_idx).
 *
 * A spec's buffers are its logical arrays (QV_LAYOUT_LOGICAL), unpermuted, as
 * `qvet verify` reads them (problem.h); nothing is packed:
 *   a        (m, k) row-major activation codes: uint16_t bits for a=f16/bf16,
 *            int8_t for a=i8, uint8_t codes for a=e4m3
 *   a_scale  float: as=f32/t (1), as=f32/tok (m), as=f32/tok-b128 (ceil(k/128), m)
 *            MN-major (index kb * m + i); NULL for as=none
 *   azp      int32_t: az=i32/t (1), az=i32/tok (m); NULL for az=none
 *   b        (k, n) row-major weight codes: one byte per code of 8 bits or fewer
 *            (uint8_t 0..15 for u4b8, u4 and e2m1; int8_t -8..7 for i4; uint8_t
 *            for u8b128, u8, e4m3 and e5m2; int8_t for i8), uint16_t bits for
 *            f16/bf16
 *   scales   the ws scales in ws's storage (uint16_t bits for f16/bf16, float for
 *            f32, uint8_t codes for e8m0/ue4m3), row-major: t (1), c (n), gG
 *            (k/G, n), bBKxBN (ceil(k/BK), ceil(n/BN)); NULL for ws=none
 *   scales2  float values of the ws2 scales, decoded: t (1), c (n); NULL for ws2=none
 *   zeros    wz=int/GRAN: one byte per zero point, a code like b's (int8_t for
 *            i4/i8, else uint8_t); wz=float/GRAN: float values, decoded; shaped
 *            as scales of granularity GRAN; with act=gidx a group's row is
 *            g_idx[k]. NULL for wz=none
 *   perm     NULL
 *   bias     (n) float values of the bias, decoded; NULL for bias=none
 *   g_idx    act=gidx: (k) int32_t group of logical row k, in [0, k/g); else NULL
 *
 * With QV_PLUGIN_HOST every pointer is a host pointer and `workspace` is NULL
 * (the plugin owns any scratch memory); with QV_PLUGIN_DEVICE every pointer is
 * a CUDA device pointer to the same bytes, `workspace` holds the bytes the
 * row's own workspace function asks for (NULL for a spec), and the launch may be
 * asynchronous on `stream` (qvet synchronizes and checks for errors).
 * A non-zero return means "refused" (e.g. an unsupported shape); qvet records it
 * as a FAIL of that case, since qvet only hands out shapes the variant declares
 * legal. Launches must be deterministic: qvet launches each case twice and
 * compares every bit. All strings stay valid until the library is unloaded.
 * Version 1 differs only in naming registry rows alone; qv_gemm_args grew
 * `bias` and `g_idx` at its end, which a version-1 plugin never reads.
 * After version 2, qv_gemm_args grew `opts` at its end (the launch options
 * that choose among qvet's own kernel paths, gemm.h): the ABI version stays
 * 2, since a plugin built against the shorter struct reads the same fields
 * at the same offsets and never reaches the new one. A plugin may ignore
 * `opts` (NULL means every default); qvet passes the options it was given
 * (`qvet check`'s QVET_* variables) to plugins as it does to its kernels.
 *
 * Version 3 adds routed (mixture-of-experts) kernels. A variant may be a
 * routed row's name (`qvet list 'moe-*'`: its routed spec, docs/moe.md); a
 * plugin that names one exports a seventh symbol,
 *
 *   int qv_plugin_moe_launch(const char *variant, const qv_moe_launch_args *args);   0 = ok
 *
 * on the plugin's pointer kind. `args->p` is the routed problem
 * (moe.h) in its logical form: the router logits, the expert map (-1: held
 * elsewhere), the selection bias and the shared experts' gates where the
 * spec declares them, the (t, k) activations, and each expert's weights in
 * p->w[i] (the local experts, then the shared ones) as a spec's buffers are
 * above (problem.h; their m and activation buffers unused). The launch
 * writes the (t, n) output in the expert's output format (poisoned by qvet),
 * and the experts it chose, (t, topk) router ids, with their fp32 weights:
 * the ids are checked for an admissible top-k and the weights against their
 * certified bound, then the output token by token. qvet launches each case
 * twice and compares every bit of all three.
 *
 * With QV_PLUGIN_DEVICE the problem struct `*args->p` and its expert array
 * `p->w` (with each expert's struct) stay in host memory, so the plugin
 * reads the shape, the spec and the buffer addresses there, but every
 * buffer they point to (logits, expert map, selection bias, shared gates,
 * activations and their scales, each expert's weight buffers) is a CUDA
 * device pointer, and so are `out`, `topk_ids` and `topk_weights`: qvet
 * poisons the output, sets the ids to -1 and the weights to a NaN before
 * each launch. The launch may be asynchronous on any stream; qvet then
 * synchronizes the device and checks for errors before reading back.
 * plugins/example_cuda/ is such a plugin. */

/* A routed launch's arguments (version 3), on the plugin's pointer kind. */
typedef struct qv_moe_launch_args {
    const qv_moe_problem *p; /* read only */
    void *out;               /* (t, n) output codes */
    int32_t *topk_ids;       /* (t, topk) the router experts taken */
    float *topk_weights;     /* (t, topk) their weights */
} qv_moe_launch_args;

#define QV_PLUGIN_ABI_VERSION 3
#define QV_PLUGIN_ABI_OLDEST 1 /* the oldest version the loader still takes */

/* qv_plugin_pointers(): where the launch's buffers live. */
#define QV_PLUGIN_HOST 1
#define QV_PLUGIN_DEVICE 2

/* Marks the six symbols as exported from a plugin built with hidden visibility. */
#if defined(__GNUC__)
#define QV_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define QV_PLUGIN_EXPORT
#endif

/* The plugin side: prototypes the library must define. */
QV_PLUGIN_EXPORT int qv_plugin_abi_version(void);
QV_PLUGIN_EXPORT const char *qv_plugin_name(void);
QV_PLUGIN_EXPORT int qv_plugin_variant_count(void);
QV_PLUGIN_EXPORT const char *qv_plugin_variant(int i);
QV_PLUGIN_EXPORT int qv_plugin_pointers(void);
QV_PLUGIN_EXPORT int qv_plugin_launch(const char *variant, const qv_gemm_args *args);
/* Version 3, with a routed row among the variants: */
QV_PLUGIN_EXPORT int qv_plugin_moe_launch(const char *variant, const qv_moe_launch_args *args);

/* The loader side (src/plugin.c, part of libqvet). */
#define QV_PLUGIN_MAX_VARIANTS 64

typedef struct qv_plugin {
    void *handle;                                  /* dlopen handle */
    char path[512];
    char name[64];
    int pointers;                                  /* QV_PLUGIN_HOST or QV_PLUGIN_DEVICE */
    int n_variants;
    const char *variants[QV_PLUGIN_MAX_VARIANTS];  /* (n_variants) the strings as the plugin
                                                      returned them, owned by the library */
    int (*launch)(const char *variant, const qv_gemm_args *args);
    int abi_version;                               /* what qv_plugin_abi_version returned */
    const qv_variant *resolved[QV_PLUGIN_MAX_VARIANTS]; /* (n_variants) variants[i] resolved:
                                                      a registry row or an interned spec;
                                                      NULL for a routed row */
    const qv_moe_row *routed[QV_PLUGIN_MAX_VARIANTS]; /* (n_variants) the routed row variants[i]
                                                      names, else NULL */
    int (*moe_launch)(const char *variant, const qv_moe_launch_args *args); /* NULL without one */
} qv_plugin;

/* Loads and validates a plugin: every symbol present, an ABI version from
 * QV_PLUGIN_ABI_OLDEST to QV_PLUGIN_ABI_VERSION, a known pointer kind, and
 * every variant a registry row, (version 2) a valid spec or (version 3, with
 * qv_plugin_moe_launch) a routed row. Refusals return
 * QV_ERR_FORMAT / QV_ERR_UNSUPPORTED / QV_ERR_USAGE with a message that names
 * the library and the symbol or value at fault (for a bad spec, the parser's
 * message). */
qv_status qv_plugin_open(const char *path, qv_plugin *pl);
void      qv_plugin_close(qv_plugin *pl);

#ifdef __cplusplus
}
#endif
#endif
