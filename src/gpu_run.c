/* gpu_run.c: one GEMM problem on the GPU under qvet's rules (gpu.h): pack,
 * upload, poison the output, launch, check, download, and optionally relaunch
 * to prove the kernel is bitwise deterministic. Host C against the CUDA runtime
 * API; safe to call on machines without a GPU (it reports QV_ERR_NODEVICE). */
#include "internal/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "qvet/reference.h"

qv_status qv_cuda_fail(int rc, const char *what, const char *file, int line)
{
    return qv_fail(QV_ERR_CUDA, "%s: %s (%s:%d)", what, cudaGetErrorString((cudaError_t)rc), file,
                   line);
}

int qv_gpu_info_get(qv_gpu_info *info)
{
    qv_gpu_info tmp;
    if (!info) info = &tmp;
    memset(info, 0, sizeof *info);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    info->present = 1;
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->sm = prop.major * 10 + prop.minor;
    cudaDriverGetVersion(&info->driver);
    cudaRuntimeGetVersion(&info->runtime);
    return 1;
}

int qv_cuda_available(char *name, size_t name_len, int *driver, int *runtime)
{
    qv_gpu_info info;
    int ok = qv_gpu_info_get(&info);
    if (name && name_len) snprintf(name, name_len, "%s", info.name);
    if (driver) *driver = info.driver;
    if (runtime) *runtime = info.runtime;
    return ok;
}

/* Copies `bytes` of host data to a new device allocation owned by gp. */
static qv_status upload(qv_gpu_problem *gp, const void *host, size_t bytes, void **dev)
{
    *dev = NULL;
    if (!host || !bytes) return QV_OK;
    QV_ASSERT(gp->n_allocs < (int)(sizeof gp->dev_allocs / sizeof gp->dev_allocs[0]),
              "qv_gpu_problem has room for a fixed number of buffers");
    QV_CUDA_TRY(cudaMalloc(dev, bytes), "cudaMalloc");
    gp->dev_allocs[gp->n_allocs++] = *dev;
    QV_CUDA_TRY(cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    return QV_OK;
}

static qv_status alloc_dev(qv_gpu_problem *gp, size_t bytes, void **dev)
{
    QV_ASSERT(gp->n_allocs < (int)(sizeof gp->dev_allocs / sizeof gp->dev_allocs[0]),
              "qv_gpu_problem has room for a fixed number of buffers");
    QV_CUDA_TRY(cudaMalloc(dev, bytes ? bytes : 1), "cudaMalloc");
    gp->dev_allocs[gp->n_allocs++] = *dev;
    return QV_OK;
}

/* For a spec (QV_LAYOUT_LOGICAL, pk NULL) the weights go up as the logical
 * arrays plugin.h lists: q (k, n) codes, scales in their storage, scales2 and
 * float zero points decoded, integer zero points one byte each, g_idx per
 * logical row; a registry row's packed buffers come from pk. */
qv_status qv_gpu_problem_upload(const qv_problem *p, const qv_packed *pk, const qv_launch_opts *opts,
                                qv_gpu_problem *gp)
{
    memset(gp, 0, sizeof *gp);
    const qv_variant *v = p->v;
    qv_gemm_args *a = &gp->args;
    a->m = (int)p->m;
    a->n = (int)p->n;
    a->k = (int)p->k;
    a->g = p->g;
    a->opts = opts;
    void *d;
    qv_status st;
#define UP(host, bytes, field)                                                 \
    do {                                                                       \
        st = upload(gp, (host), (bytes), &d);                                  \
        if (st != QV_OK) goto fail;                                            \
        a->field = d;                                                          \
    } while (0)
    UP(p->a, (size_t)(p->m * p->k) * qv_fmt_storage_bytes(v->afmt), a);
    UP(p->a_scale, (size_t)qv_problem_ascale_count(p) * sizeof(float), a_scale);
    UP(p->azp, (size_t)(v->azp == QV_AZP_TOKEN ? p->m : 1) * sizeof(int32_t), azp);
    if (v->layout == QV_LAYOUT_LOGICAL) {
        UP(p->bias, (size_t)p->n * sizeof(float), bias);
        size_t nz = (size_t)(qv_problem_zero_rows(p) * qv_problem_zero_cols(p));
        UP(p->q, (size_t)(p->k * p->n) * qv_fmt_storage_bytes(v->wfmt), b);
        UP(p->scales, (size_t)(qv_problem_scale_rows(p) * qv_problem_scale_cols(p)) * qv_fmt_storage_bytes(v->sfmt),
           scales);
        UP(p->scales2, (size_t)qv_problem_scale2_count(p) * sizeof(float), scales2);
        if (p->zeros) UP(p->zeros, nz, zeros);
        else UP(p->zeros_f, nz * sizeof(float), zeros);
        UP(p->g_idx, (size_t)p->k * sizeof(int32_t), g_idx);
    } else {
        QV_ASSERT(pk != NULL, "a registry row's upload needs its packed buffers");
        UP(pk->b, (size_t)(pk->b_rows * pk->b_cols) * sizeof(int32_t), b);
        UP(pk->scales, (size_t)(pk->s_rows * pk->s_cols) * pk->s_elem, scales);
        UP(pk->scales2, (size_t)pk->s2_cols * sizeof(float), scales2);
        UP(pk->zeros, (size_t)pk->z_bytes, zeros);
        UP(pk->perm, (size_t)p->k * sizeof(int32_t), perm);
        UP(pk->g_idx, (size_t)p->k * sizeof(int32_t), g_idx);
        UP(pk->bias, (size_t)pk->bias_cols * pk->bias_elem, bias_packed);
    }
#undef UP
    gp->out_bytes = (size_t)qv_problem_out_bytes(p);
    st = alloc_dev(gp, gp->out_bytes + QV_GPU_GUARD_BYTES, &a->c);
    if (st != QV_OK) goto fail;
    a->workspace_bytes = qv_gpu_workspace(v, a->m, a->n, a->k, opts);
    if (a->workspace_bytes) {
        st = alloc_dev(gp, a->workspace_bytes, &a->workspace);
        if (st != QV_OK) goto fail;
        /* gemm.h: the caller zeroes the workspace once; kernels restore it. */
        if (cudaMemset(a->workspace, 0, a->workspace_bytes) != cudaSuccess) {
            st = qv_cuda_fail((int)cudaGetLastError(), "cudaMemset workspace", __FILE__, __LINE__);
            goto fail;
        }
    }
    return QV_OK;
fail:
    qv_gpu_problem_free(gp);
    return st;
}

void qv_gpu_problem_free(qv_gpu_problem *gp)
{
    for (int i = 0; i < gp->n_allocs; i++) cudaFree(gp->dev_allocs[i]);
    memset(gp, 0, sizeof *gp);
}

/* Host buffer of `count` poison codes of ofmt. */
static void *poison_host(qv_fmt ofmt, int64_t count)
{
    size_t es = qv_fmt_storage_bytes(ofmt);
    unsigned char *h = malloc((size_t)count * es);
    if (!h) return NULL;
    uint32_t code = ref_poison_code(ofmt);
    for (int64_t i = 0; i < count; i++) memcpy(h + (size_t)i * es, &code, es); /* little-endian */
    return h;
}

qv_status qv_gpu_poison(void *dev_out, qv_fmt ofmt, int64_t count, void *stream)
{
    void *h = poison_host(ofmt, count);
    if (!h) return qv_fail(QV_ERR_NOMEM, "poison buffer of %lld elements", (long long)count);
    cudaError_t rc = cudaMemcpyAsync(dev_out, h, (size_t)count * qv_fmt_storage_bytes(ofmt),
                                     cudaMemcpyHostToDevice, (cudaStream_t)stream);
    if (rc == cudaSuccess) rc = cudaStreamSynchronize((cudaStream_t)stream);
    free(h);
    if (rc != cudaSuccess) return qv_cuda_fail((int)rc, "poisoning the output", __FILE__, __LINE__);
    return QV_OK;
}

qv_status qv_gpu_poison_guarded(void *dev_out, qv_fmt ofmt, int64_t count)
{
    return qv_gpu_poison(dev_out, ofmt, count + QV_GPU_GUARD_BYTES / (int64_t)qv_fmt_storage_bytes(ofmt), NULL);
}

qv_status qv_gpu_guard_count(const void *dev_out, qv_fmt ofmt, int64_t count, int64_t *writes)
{
    const size_t es = qv_fmt_storage_bytes(ofmt);
    unsigned char guard[QV_GPU_GUARD_BYTES];
    QV_CUDA_TRY(cudaMemcpy(guard, (const char *)dev_out + (size_t)count * es, sizeof guard, cudaMemcpyDeviceToHost),
                "cudaMemcpy guard to host");
    const uint32_t code = ref_poison_code(ofmt);
    for (size_t i = 0; i < sizeof guard; i++)
        if (guard[i] != ((const unsigned char *)&code)[i % es]) ++*writes;
    return QV_OK;
}

/* Poison, launch, check the launch and the kernel's completion, download. */
static qv_status launch_once(const qv_problem *p, qv_launch_fn launch, qv_gpu_problem *gp, void *out,
                             double *ms, int64_t *guard_writes)
{
    const int64_t count = p->m * p->n;
    QV_TRY(qv_gpu_poison_guarded(gp->args.c, p->v->ofmt, count));
    cudaEvent_t e0, e1;
    QV_CUDA_TRY(cudaEventCreate(&e0), "cudaEventCreate");
    QV_CUDA_TRY(cudaEventCreate(&e1), "cudaEventCreate");
    QV_CUDA_TRY(cudaEventRecord(e0, NULL), "cudaEventRecord");
    qv_status st = launch(p->v, &gp->args);
    if (st != QV_OK) {
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        return st;
    }
    QV_CUDA_TRY(cudaGetLastError(), "kernel launch");
    QV_CUDA_TRY(cudaEventRecord(e1, NULL), "cudaEventRecord");
    QV_CUDA_TRY(cudaDeviceSynchronize(), "kernel execution");
    float f = 0;
    QV_CUDA_TRY(cudaEventElapsedTime(&f, e0, e1), "cudaEventElapsedTime");
    *ms = f;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    QV_CUDA_TRY(cudaMemcpy(out, gp->args.c, gp->out_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return qv_gpu_guard_count(gp->args.c, p->v->ofmt, count, guard_writes);
}

/* The act_order kernels take the group of each sorted row from its position
 * (row / g), so they need every group to hold exactly g rows, as GPTQ's
 * act_order produces (g_idx[k] = rank of k in the activation order / g). Any
 * other g_idx is refused here rather than computed wrong. */
static qv_status check_act_order_groups(const qv_problem *p)
{
    /* A spec's kernel (a plugin) reads g_idx per logical row: any g_idx is legal. */
    if (!p->v->act_order || !p->g_idx || p->g <= 0 || p->v->layout == QV_LAYOUT_LOGICAL) return QV_OK;
    int64_t groups = p->k / p->g;
    int64_t *count = calloc((size_t)groups, sizeof *count);
    if (!count) return qv_fail(QV_ERR_NOMEM, "act_order group counts");
    qv_status st = QV_OK;
    for (int64_t kk = 0; kk < p->k && st == QV_OK; kk++) {
        int32_t gi = p->g_idx[kk];
        if (gi < 0 || gi >= groups)
            st = qv_fail(QV_ERR_RANGE, "%s: g_idx[%lld] = %d is outside [0, %lld)", p->v->name,
                         (long long)kk, gi, (long long)groups);
        else
            count[gi]++;
    }
    for (int64_t gi = 0; gi < groups && st == QV_OK; gi++)
        if (count[gi] != p->g)
            st = qv_fail(QV_ERR_UNSUPPORTED,
                         "%s: group %lld holds %lld rows; the GPU kernel needs exactly g=%d rows per group "
                         "(as GPTQ act_order produces)",
                         p->v->name, (long long)gi, (long long)count[gi], p->g);
    free(count);
    return st;
}

qv_status qv_gpu_run(const qv_problem *p, qv_launch_fn launch, const qv_launch_opts *opts, int repeat, void *out,
                     qv_gpu_stats *st)
{
    qv_gpu_stats tmp;
    if (!st) st = &tmp;
    memset(st, 0, sizeof *st);
    st->first_diff = -1;
    if (!launch) {
        const qv_launcher *l = qv_gpu_launcher(p->v);
        if (!l) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no GPU kernel", p->v->name);
        launch = l->launch;
    }
    if (!qv_gpu_info_get(NULL)) return qv_fail(QV_ERR_NODEVICE, "no CUDA device");
    QV_TRY(qv_variant_check_shape(p->v, p->m, p->n, p->k));
    QV_TRY(check_act_order_groups(p));
    QV_TRY(qv_launch_opts_check(opts));

    qv_gpu_problem gp;
    qv_status s;
    if (p->v->layout == QV_LAYOUT_LOGICAL) {
        s = qv_gpu_problem_upload(p, NULL, opts, &gp);
    } else {
        qv_packed pk;
        QV_TRY(qv_pack(p, &pk));
        s = qv_gpu_problem_upload(p, &pk, opts, &gp);
        qv_packed_destroy(&pk);
    }
    if (s != QV_OK) return s;

    s = launch_once(p, launch, &gp, out, &st->ms, &st->guard_writes);
    st->launches = 1;
    if (s == QV_OK && repeat > 1) {
        void *again = malloc(gp.out_bytes);
        if (!again) {
            s = qv_fail(QV_ERR_NOMEM, "determinism buffer");
        } else {
            size_t es = qv_fmt_storage_bytes(p->v->ofmt);
            for (int r = 1; r < repeat && s == QV_OK && !st->nondeterministic; r++) {
                s = launch_once(p, launch, &gp, again, &st->ms, &st->guard_writes);
                st->launches++;
                if (s == QV_OK && memcmp(again, out, gp.out_bytes)) {
                    st->nondeterministic = 1;
                    for (int64_t i = 0; i < p->m * p->n; i++)
                        if (memcmp((char *)again + i * es, (char *)out + i * es, es)) {
                            st->first_diff = i;
                            break;
                        }
                }
            }
            free(again);
        }
    }
    qv_gpu_problem_free(&gp);
    return s;
}
