/* plugin.c: the plugin loader (plugin.h): dlopen, resolve the six symbols,
 * check the ABI version and resolve every declared variant (a registry row, a
 * spec, or a routed row with the seventh symbol) before anything runs. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "qvet/plugin.h"
#include "qvet/spec.h"
#include "qvet/variant.h"

/* Resolves `sym` or records a refusal naming it. */
static qv_status resolve(qv_plugin *pl, const char *sym, void **out)
{
    dlerror(); /* clear any stale error */
    *out = dlsym(pl->handle, sym);
    if (!*out)
        return qv_fail(QV_ERR_FORMAT, "plugin %s: missing symbol %s (plugin.h lists the six a plugin exports)",
                       pl->path, sym);
    return QV_OK;
}

qv_status qv_plugin_open(const char *path, qv_plugin *pl)
{
    memset(pl, 0, sizeof *pl);
    snprintf(pl->path, sizeof pl->path, "%s", path);
    /* dlopen searches the library path for a bare name; a path with a slash is
     * taken as it is, which is what users pass. */
    char resolved[600];
    snprintf(resolved, sizeof resolved, "%s%s", strchr(path, '/') ? "" : "./", path);
    pl->handle = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
    if (!pl->handle) return qv_fail(QV_ERR_IO, "plugin %s: cannot load: %s", path, dlerror());

    void *abi, *name, *count, *variant, *pointers, *launch;
    qv_status st = QV_OK;
    const struct {
        const char *sym;
        void **slot;
    } syms[] = {
        {"qv_plugin_abi_version", &abi}, {"qv_plugin_name", &name},
        {"qv_plugin_variant_count", &count}, {"qv_plugin_variant", &variant},
        {"qv_plugin_pointers", &pointers}, {"qv_plugin_launch", &launch},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0] && st == QV_OK; i++) st = resolve(pl, syms[i].sym, syms[i].slot);
    if (st != QV_OK) goto refuse;

    /* POSIX guarantees that a dlsym result converts to a function pointer. */
    int (*abi_fn)(void) = (int (*)(void))abi;
    int version = abi_fn();
    if (version < QV_PLUGIN_ABI_OLDEST || version > QV_PLUGIN_ABI_VERSION) {
        st = qv_fail(QV_ERR_UNSUPPORTED,
                     "plugin %s: ABI version %d, but this qvet speaks versions %d to %d (qv_plugin_abi_version); "
                     "rebuild it against this plugin.h",
                     path, version, QV_PLUGIN_ABI_OLDEST, QV_PLUGIN_ABI_VERSION);
        goto refuse;
    }
    pl->abi_version = version;
    const char *nm = ((const char *(*)(void))name)();
    if (!nm || !*nm) {
        st = qv_fail(QV_ERR_FORMAT, "plugin %s: qv_plugin_name returned an empty name", path);
        goto refuse;
    }
    snprintf(pl->name, sizeof pl->name, "%s", nm);
    pl->pointers = ((int (*)(void))pointers)();
    if (pl->pointers != QV_PLUGIN_HOST && pl->pointers != QV_PLUGIN_DEVICE) {
        st = qv_fail(QV_ERR_FORMAT,
                     "plugin %s: qv_plugin_pointers returned %d, expected QV_PLUGIN_HOST (%d) or QV_PLUGIN_DEVICE (%d)",
                     path, pl->pointers, QV_PLUGIN_HOST, QV_PLUGIN_DEVICE);
        goto refuse;
    }
    int n = ((int (*)(void))count)();
    if (n < 1 || n > QV_PLUGIN_MAX_VARIANTS) {
        st = qv_fail(QV_ERR_FORMAT, "plugin %s: qv_plugin_variant_count returned %d, expected 1..%d", path, n,
                     QV_PLUGIN_MAX_VARIANTS);
        goto refuse;
    }
    const char *(*variant_fn)(int) = (const char *(*)(int))variant;
    for (int i = 0; i < n; i++) {
        const char *vn = variant_fn(i);
        if (!vn || !*vn) {
            st = qv_fail(QV_ERR_FORMAT, "plugin %s: qv_plugin_variant(%d) returned %s", path, i,
                         vn ? "an empty string" : "NULL");
            goto refuse;
        }
        const qv_moe_row *mr = qv_moe_row_find(vn);
        if (mr) {
            /* a routed row: version 3, its own launch */
            if (version < 3)
                st = qv_fail(QV_ERR_UNSUPPORTED, "plugin %s: qv_plugin_variant(%d) = '%s' is a routed row, which "
                             "ABI version %d cannot declare (routed rows need version 3)", path, i, vn, version);
            else if (!pl->moe_launch) {
                void *ml;
                if (resolve(pl, "qv_plugin_moe_launch", &ml) != QV_OK)
                    st = qv_fail(QV_ERR_FORMAT, "plugin %s: qv_plugin_variant(%d) = '%s' is a routed row, but the "
                                 "library lacks qv_plugin_moe_launch", path, i, vn);
                else
                    pl->moe_launch = (int (*)(const char *, const qv_moe_launch_args *))ml;
            }
            if (st != QV_OK) goto refuse;
            pl->variants[i] = vn;
            pl->routed[i] = mr;
            continue;
        }
        if (qv_is_spec(vn) && version < 2) {
            st = qv_fail(QV_ERR_UNSUPPORTED,
                         "plugin %s: qv_plugin_variant(%d) = '%s' is a spec, which ABI version %d cannot declare "
                         "(specs need version 2: rebuild it against this plugin.h)",
                         path, i, vn, version);
            goto refuse;
        }
        const qv_variant *v;
        st = qv_variant_resolve(vn, &v);
        if (st != QV_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", qv_errmsg());
            st = qv_fail(st, "plugin %s: qv_plugin_variant(%d) = '%s': %s", path, i, vn, why);
            goto refuse;
        }
        pl->variants[i] = vn;
        pl->resolved[i] = v;
    }
    pl->n_variants = n;
    pl->launch = (int (*)(const char *, const qv_gemm_args *))launch;
    return QV_OK;
refuse:
    dlclose(pl->handle);
    pl->handle = NULL;
    return st;
}

void qv_plugin_close(qv_plugin *pl)
{
    if (pl->handle) dlclose(pl->handle);
    memset(pl, 0, sizeof *pl);
}
