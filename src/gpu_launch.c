/* gpu_launch.c: the launch table of the GPU library (gemm.h). The registry
 * (src/registry.c, CPU library) holds rows as data; this table maps a row's
 * family to the launcher and workspace query in kernels/, so only the GPU
 * library names a kernel. Invariant: every row with gpu_kernel = 1 has an
 * entry here (tests/t_cli.c checks it), and no spec does. */
#include <string.h>

#include "qvet/gemm.h"

static const qv_launcher table[] = {
    {.family = "cublas", .launch = qv_launch_cublas, .workspace = NULL},
    {.family = "marlin", .launch = qv_launch_wonly, .workspace = qv_workspace_wonly},
    {.family = "qqq", .launch = qv_launch_qqq, .workspace = qv_workspace_qqq},
    {.family = "w8a8", .launch = qv_launch_w8a8, .workspace = qv_workspace_w8a8},
};

const qv_launcher *qv_gpu_launcher(const qv_variant *v)
{
    if (!v || !v->gpu_kernel) return NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].family, v->family)) return &table[i];
    QV_ASSERT(0, "a registry row has gpu_kernel = 1 but its family is not in src/gpu_launch.c");
    return NULL;
}

qv_status qv_gpu_launch(const qv_variant *v, const qv_gemm_args *args)
{
    const qv_launcher *l = qv_gpu_launcher(v);
    if (!l) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no GPU kernel", v ? v->name : "(null)");
    return l->launch(v, args);
}

size_t qv_gpu_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts)
{
    const qv_launcher *l = qv_gpu_launcher(v);
    return l && l->workspace ? l->workspace(v, m, n, k, opts) : 0;
}
