/* missing_sym_plugin.c: a plugin without qv_plugin_launch, which the loader
 * must refuse by naming the symbol (tests/t_plugin.c). */
#include <stddef.h>

#include "qvet/plugin.h"

int qv_plugin_abi_version(void) { return QV_PLUGIN_ABI_VERSION; }
const char *qv_plugin_name(void) { return "missing-sym"; }
int qv_plugin_variant_count(void) { return 1; }
const char *qv_plugin_variant(int i) { return i == 0 ? "w8a8-i8-tok-ch" : NULL; }
int qv_plugin_pointers(void) { return QV_PLUGIN_HOST; }
