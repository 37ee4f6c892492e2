/* plugin.h: the plugin ABI, so `qvet check|fuzz --plugin LIB.so` verifies a
 * kernel built outside qvet exactly like qvet's own. Included by plugins (the
 * library side: it may include qvet's public headers but never links libqvet)
 * and by src/plugin.c (the loader). Rule: a plugin implements registry rows: it
 * names a variant of `qvet list`, and its launch computes that row's declared
 * arithmetic on that row's packed layout; the loader refuses any library whose
 * ABI version differs or that lacks a symbol, naming it.
 *
 * A plugin is a shared library exporting these six C symbols:
 *
 *   int qv_plugin_abi_version(void);       returns QV_PLUGIN_ABI_VERSION
 *   const char *qv_plugin_name(void);      a short name ("example"): JSONL backend "plugin:NAME"
 *   int qv_plugin_variant_count(void);     how many registry rows it implements (>= 1)
 *   const char *qv_plugin_variant(int i);  row i's registry name, 0 <= i < count
 *   int qv_plugin_pointers(void);          QV_PLUGIN_HOST or QV_PLUGIN_DEVICE
 *   int qv_plugin_launch(const char *variant, const qv_gemm_args *args);   0 = ok
 *
 * The launch receives the buffers of gemm.h's qv_gemm_args, packed by qv_pack
 * in the row's layout (layout.h; plain-nk: (n, k) row-major codes, one byte per
 * 8-bit code), with a (m, n) row-major output in the row's output format that
 * qvet has filled with a poison NaN. With QV_PLUGIN_HOST every pointer is a host
 * pointer and `workspace` is NULL (the plugin owns any scratch memory); with
 * QV_PLUGIN_DEVICE every pointer is a CUDA device pointer, `workspace` holds the
 * bytes the row's own workspace function asks for (or NULL), and the launch may
 * be asynchronous on `stream` (qvet synchronizes and checks for errors).
 * A non-zero return means "refused" (e.g. an unsupported shape); qvet records it
 * as a FAIL of that case, since qvet only hands out shapes the row declares legal.
 * Launches must be deterministic: qvet launches each case twice and compares
 * every bit. All strings stay valid until the library is unloaded. */
#ifndef QVET_PLUGIN_H
#define QVET_PLUGIN_H

#include "qvet/gemm.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QV_PLUGIN_ABI_VERSION 1

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

/* The loader side (src/plugin.c, part of libqvet). */
#define QV_PLUGIN_MAX_VARIANTS 64

typedef struct qv_plugin {
    void *handle;                                  /* dlopen handle */
    char path[512];
    char name[64];
    int pointers;                                  /* QV_PLUGIN_HOST or QV_PLUGIN_DEVICE */
    int n_variants;
    const char *variants[QV_PLUGIN_MAX_VARIANTS];  /* registry names, owned by the library */
    int (*launch)(const char *variant, const qv_gemm_args *args);
} qv_plugin;

/* Loads and validates a plugin: every symbol present, the ABI version equal to
 * QV_PLUGIN_ABI_VERSION, a known pointer kind, and every variant a registry
 * row. Refusals return QV_ERR_FORMAT / QV_ERR_UNSUPPORTED with a message that
 * names the library and the symbol or value at fault. */
qv_status qv_plugin_open(const char *path, qv_plugin *pl);
void      qv_plugin_close(qv_plugin *pl);

#ifdef __cplusplus
}
#endif
#endif
