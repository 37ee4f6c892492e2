/* PLACEHOLDER: replaced by the kernel work. */
#include "qvet/gemm.h"
extern "C" qv_status qv_launch_cublas(const qv_variant *v, const qv_gemm_args *a)
{
    return qv_fail(QV_ERR_UNSUPPORTED, "%s: kernel not built yet", v->name);
}
