/* bad_abi_plugin.c: a plugin built for another ABI version, which the loader
 * must refuse (tests/t_plugin.c). Every symbol exists; only the version is wrong. */
#include <stddef.h>

#include "qvet/plugin.h"

/* One past the version this qvet speaks: a plugin from a future qvet. */
int qv_plugin_abi_version(void) { return QV_PLUGIN_ABI_VERSION + 1; }
const char *qv_plugin_name(void) { return "bad-abi"; }
int qv_plugin_variant_count(void) { return 1; }
const char *qv_plugin_variant(int i) { return i == 0 ? "w8a8-i8-tok-ch" : NULL; }
int qv_plugin_pointers(void) { return QV_PLUGIN_HOST; }
int qv_plugin_launch(const char *variant, const qv_gemm_args *args) { return 1; }
