/* cmd_pack.c: `qvet pack` (logical .npy arrays -> a kernel's packed layout) and
 * `qvet unpack` (the inverse, through the independent decoder ref_unpack).
 * Every output file is written whole or not at all (qv_npy_save writes a
 * temporary file and renames it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal/cli.h"
#include "qvet/array.h"
#include "qvet/layout.h"
#include "qvet/reference.h"

static void pack_usage(FILE *f)
{
    fprintf(f,
            "usage: qvet pack LAYOUT --q Q.npy --scales S.npy [--scales2 S2.npy] [--zeros Z.npy]\n"
            "                 [--g-idx G.npy] [--g G] [--a f16|bf16] [--bias BIAS.npy] -o DIR\n"
            "       qvet pack LAYOUT (--gptq | --awq) FILE.safetensors --prefix P [--zeros-v2] -o DIR\n\n"
            "Packs logical weights into LAYOUT, byte for byte as the published packers do\n"
            "(include/qvet/layout.h describes every layout word by word). Writes into DIR\n"
            "(created if needed): B.npy (int32 packed weights), scales.npy (permuted, same\n"
            "dtype and shape as S), and where they apply scales2.npy, zeros.npy (int32\n"
            "(K/g, N/8)), perm.npy (int32 (K): logical row of each sorted row; the kernel\n"
            "reads A's column perm[i] as column i) and g_idx.npy (int32 (K): group of each\n"
            "sorted row).\n\n"
            "layouts and inputs (q is (K, N), scales (K/g, N), (1, N) or (1, 1)):\n"
            "  marlin-w4       q int8/uint8 0..15 (weight q-8); scales f16, bf16 (<u2) or f32\n"
            "  marlin-w4-zp    as marlin-w4, plus --zeros (K/g, N) int8/uint8 0..15 (weight q-z)\n"
            "  marlin-w8       q uint8 (weight q-128); scales as marlin-w4\n"
            "  marlin-fp8      q uint8 e4m3 codes; scales.npy holds s * 2^8 (f16 or f32 scales,\n"
            "                  f16 activations) or s * 2^120 (bf16 scales), as vLLM's fp8 Marlin\n"
            "  qqq-w4-channel  q int8 -8..7; scales f32 (1, N): the stored channel scale\n"
            "  qqq-w4-group    q int8/uint8 0..15; scales f16 (K/g, N) group scales and\n"
            "                  --scales2 f32 (1, N) channel scales\n"
            "  plain-nk        q int8, uint8, f16 or bf16 (<u2): B is the (N, K) transpose,\n"
            "                  packed along K; scales (optional) are copied unpermuted\n"
            "  marlin-fp4-mx   MXFP4 as vLLM's Marlin reads it: q uint8 e2m1 codes 0..15,\n"
            "                  scales uint8 e8m0 codes (K/32, N) (0 and 255 refused: the\n"
            "                  kernel reads them as 0 and +Inf); --a f16 or bf16 [bf16]\n"
            "  marlin-fp4-nv   NVFP4: q uint8 e2m1 codes, scales uint8 ue4m3 codes (K/16, N),\n"
            "                  --scales2 the f32 global scale (1), --a f16|bf16 (required).\n"
            "                  scales.npy holds the kernel's S0E5M3 bytes of s * 2^P,\n"
            "                  scale_pow2.npy (int32 (1)) holds P (7; more for bf16 when\n"
            "                  small scales are lifted) and scales2.npy the global scale\n"
            "                  times 2^(14-P) (f16) or 2^(126-P) (bf16)\n"
            "  --bias (FP4 layouts) (N) float16, bf16 (<u2) or float32: bias.npy holds it in\n"
            "                  the kernel's column order (scale_perm_single)\n\n"
            "Checkpoints instead of --q/--scales: --gptq FILE.safetensors --prefix P reads\n"
            "P.qweight (K/8, N), P.qzeros (K/g, N/8, z-1 as GPTQ v1 stores it; --zeros-v2 for\n"
            "z), P.scales and P.g_idx when present (a g_idx other than k/g turns on\n"
            "act_order); marlin-w4 needs every zero point to be 8 (symmetric), marlin-w4-zp\n"
            "takes any. --awq FILE.safetensors --prefix P reads P.qweight (K, N/8), P.qzeros\n"
            "and P.scales (AWQ's nibble order [0,2,4,6,1,3,5,7]) for marlin-w4-zp.\n\n"
            "The group size is K / (rows of S); --g checks it. A single group (g = K) is\n"
            "stored in channel order, as Marlin and vLLM do. --g-idx (int32 or int64 (K))\n"
            "turns on act_order: rows are sorted by g_idx (stable).\n"
            "Exit 0 on success, 2 on any bad input (with a message).\n");
}

static void unpack_usage(FILE *f)
{
    fprintf(f,
            "usage: qvet unpack LAYOUT DIR -o OUTDIR [--wfmt FMT] [--a f16|bf16]\n\n"
            "Decodes DIR/B.npy and DIR/scales.npy (plus scales2.npy, zeros.npy, perm.npy and\n"
            "g_idx.npy when present), as written by qvet pack, with qvet's independent\n"
            "decoder, and writes the logical arrays into OUTDIR: q.npy ((K, N): int8 for the\n"
            "4-bit layouts, uint8 for marlin-w8 and marlin-fp8), scales.npy, scales2.npy,\n"
            "zeros.npy (uint8 (K/g, N)) and g_idx.npy (int32 (K)). marlin-fp8 scales are\n"
            "divided by the folded 2^8 (2^120 for bf16). plain-nk needs --wfmt (i8, u8b128,\n"
            "u8, e4m3, e5m2, f16 or bf16). marlin-fp4-mx and marlin-fp4-nv give q (uint8\n"
            "e2m1 codes), scales (uint8 e8m0 or ue4m3 codes), scales2.npy (NV: the global\n"
            "scale, f32 (1)) and bias.npy when DIR has one; marlin-fp4-nv needs --a and\n"
            "DIR/scale_pow2.npy, and refuses scale bytes the kernel would read as another\n"
            "value (e.g. an underflowed rescale). Exit 0 on success, 2 on any bad input.\n");
}

/* mkdir -p: creates every missing folder of path. */
static qv_status make_dir(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) return qv_fail(QV_ERR_USAGE, "output folder name is empty or too long");
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return qv_fail(QV_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return qv_fail(QV_ERR_IO, "%s is not a folder", path);
    return QV_OK;
}

/* Writes DIR/name as a .npy of dtype dt and shape (d0) or (d0, d1) from
 * data, a C-order buffer of that many elements (borrowed, not freed). */
static qv_status save(const char *dir, const char *name, qv_dtype dt, int ndim, int64_t d0, int64_t d1,
                      const void *data)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    qv_array a = {.dtype = dt, .ndim = ndim, .shape = {d0, d1}, .borrowed = 1, .data = (void *)data};
    a.count = ndim == 1 ? d0 : d0 * d1;
    a.nbytes = (size_t)a.count * qv_dtype_size(dt);
    return qv_npy_save(path, &a);
}

/* Reports a status the CLI way and gives the exit code. */
static int fail_exit(const char *cmd, qv_status st)
{
    fprintf(stderr, "qvet %s: %s: %s\n", cmd, qv_status_str(st), qv_errmsg());
    return qv_status_exit_code(st);
}

/* The tensor P.name of a checkpoint, checked to be a 2-D (or 1-D) array of dtype
 * dt; a borrowed view valid until the file is closed. */
static qv_status ckpt_get(const qv_st_file *f, const char *prefix, const char *name, int ndim, qv_dtype dt,
                          qv_array *view)
{
    char full[1024], buf[96];
    snprintf(full, sizeof full, "%s.%s", prefix, name);
    QV_TRY(qv_st_get(f, full, view));
    if (view->ndim != ndim || view->dtype != dt)
        return qv_fail(QV_ERR_FORMAT, "checkpoint tensor %s is %s; expected %d-D %s", full,
                       qv_array_describe(view, buf, sizeof buf), ndim, qv_dtype_name(dt));
    return QV_OK;
}

static int has_tensor(const qv_st_file *f, const char *prefix, const char *name)
{
    char full[1024];
    snprintf(full, sizeof full, "%s.%s", prefix, name);
    for (int i = 0; i < qv_st_count(f); i++)
        if (!strcmp(qv_st_name(f, i), full)) return 1;
    return 0;
}

/* Reads a GPTQ (awq = 0) or AWQ (awq = 1) layer from an open checkpoint into
 * logical arrays: q (K, N) uint8 codes, z (K/g, N) uint8 zero points, s a copy
 * of the scales (K/g, N), gi (K) int32 g_idx when the layer has a non-trivial
 * one (else left empty). The caller destroys them. */
static qv_status load_checkpoint(const qv_st_file *f, const char *prefix, int awq, int v2, qv_array *q, qv_array *z,
                                 qv_array *s, qv_array *gi)
{
    qv_array qw, qz, sc, gv;
    char buf[96];
    QV_TRY(ckpt_get(f, prefix, "qweight", 2, QV_DT_I4, &qw));
    QV_TRY(ckpt_get(f, prefix, "qzeros", 2, QV_DT_I4, &qz));
    char full[1024];
    snprintf(full, sizeof full, "%s.scales", prefix);
    QV_TRY(qv_st_get(f, full, &sc));
    if (sc.ndim != 2 || (sc.dtype != QV_DT_F2 && sc.dtype != QV_DT_BF16 && sc.dtype != QV_DT_F4))
        return qv_fail(QV_ERR_FORMAT, "checkpoint tensor %s is %s; expected 2-D float16, bfloat16 or float32", full,
                       qv_array_describe(&sc, buf, sizeof buf));
    /* GPTQ packs 8 codes per int32 along K, AWQ along N. */
    int64_t k = awq ? qw.shape[0] : qw.shape[0] * 8;
    int64_t n = awq ? qw.shape[1] * 8 : qw.shape[1];
    int64_t groups = sc.shape[0];
    if (sc.shape[1] != n || groups < 1 || k % groups || qz.shape[0] != groups || qz.shape[1] * 8 != n)
        return qv_fail(QV_ERR_SHAPE, "%s: qweight (%lld, %lld), qzeros (%lld, %lld) and scales (%lld, %lld) disagree",
                       prefix, (long long)qw.shape[0], (long long)qw.shape[1], (long long)qz.shape[0],
                       (long long)qz.shape[1], (long long)sc.shape[0], (long long)sc.shape[1]);
    int g = (int)(k / groups);
    int64_t qshape[2] = {k, n}, zshape[2] = {groups, n};
    QV_TRY(qv_array_create(q, QV_DT_U1, 2, qshape));
    QV_TRY(qv_array_create(z, QV_DT_U1, 2, zshape));
    QV_TRY(qv_array_create(s, sc.dtype, 2, sc.shape));
    memcpy(s->data, sc.data, sc.nbytes);
    if (awq) QV_TRY(qv_awq_unpack(qw.data, qz.data, k, n, g, q->data, z->data));
    else QV_TRY(qv_gptq_unpack(qw.data, qz.data, k, n, g, !v2, q->data, z->data));
    if (awq || !has_tensor(f, prefix, "g_idx")) return QV_OK;
    QV_TRY(ckpt_get(f, prefix, "g_idx", 1, QV_DT_I4, &gv));
    if (gv.shape[0] != k)
        return qv_fail(QV_ERR_SHAPE, "%s.g_idx has %lld entries; K is %lld", prefix, (long long)gv.shape[0], (long long)k);
    /* A g_idx equal to k/g everywhere is the plain grouping (desc_act off). */
    const int32_t *gd = gv.data;
    int trivial = 1;
    for (int64_t i = 0; i < k && trivial; i++) trivial = gd[i] == (int32_t)(i / g);
    if (trivial) return QV_OK;
    QV_TRY(qv_array_create(gi, QV_DT_I4, 1, gv.shape));
    memcpy(gi->data, gv.data, gv.nbytes);
    return QV_OK;
}

/* The activation format named by --a (f16 or bf16) into *f, or `dflt` when
 * name is NULL; a usage status when it names anything else, or is missing and
 * dflt is QV_FMT_NONE. */
static qv_status fp4_afmt(const char *name, qv_fmt dflt, const char *ln, qv_fmt *f)
{
    if (!name && dflt == QV_FMT_NONE)
        return qv_fail(QV_ERR_USAGE, "%s needs --a f16 or --a bf16 (its scale bytes and global scale depend on the "
                       "activation format)", ln);
    *f = name ? qv_fmt_from_name(name) : dflt;
    if (*f != QV_FMT_F16 && *f != QV_FMT_BF16)
        return qv_fail(QV_ERR_USAGE, "--a %s: the FP4 kernels take f16 or bf16 activations", name);
    return QV_OK;
}

/* qvet pack for the FP4 layouts: the logical arrays into DIR (B, scales,
 * scales2 and scale_pow2 for NV, bias when given). */
static qv_status pack_fp4(qv_layout layout, const char *afmt_name, const char *qp, const char *sp, const char *s2p,
                          const char *bp, long long g_opt, const char *out)
{
    const char *ln = qv_layout_name(layout);
    const int nv = layout == QV_LAYOUT_MARLIN_FP4_NV;
    qv_fmt afmt;
    QV_TRY(fp4_afmt(afmt_name, nv ? QV_FMT_NONE : QV_FMT_BF16, ln, &afmt));
    if (!sp) return qv_fail(QV_ERR_USAGE, "%s needs --scales", ln);
    qv_array q = {0}, s = {0}, s2 = {0}, b = {0};
    qv_packed pk = {0};
    qv_status st = qv_npy_load(qp, &q);
    if (st == QV_OK) st = qv_npy_load(sp, &s);
    if (st == QV_OK && s2p) st = qv_npy_load(s2p, &s2);
    if (st == QV_OK && bp) st = qv_npy_load(bp, &b);
    if (st == QV_OK && g_opt && (s.ndim != 2 || q.ndim != 2 || s.shape[0] * g_opt != q.shape[0]))
        st = qv_fail(QV_ERR_SHAPE, "--g %lld disagrees with K and the scale rows (g = K / rows)", g_opt);
    if (st == QV_OK) st = qv_pack_arrays_fp4(layout, afmt, &q, &s, s2p ? &s2 : NULL, bp ? &b : NULL, &pk);
    if (st == QV_OK) st = make_dir(out);
    if (st == QV_OK) st = save(out, "B.npy", QV_DT_I4, 2, pk.b_rows, pk.b_cols, pk.b);
    if (st == QV_OK) st = save(out, "scales.npy", QV_DT_U1, 2, pk.s_rows, pk.s_cols, pk.scales);
    if (st == QV_OK && pk.scales2) st = save(out, "scales2.npy", QV_DT_F4, 1, 1, 0, pk.scales2);
    int32_t pow2 = pk.s_pow2;
    if (st == QV_OK && nv) st = save(out, "scale_pow2.npy", QV_DT_I4, 1, 1, 0, &pow2);
    if (st == QV_OK && pk.bias) st = save(out, "bias.npy", b.dtype, 1, pk.bias_cols, 0, pk.bias);
    qv_packed_destroy(&pk);
    qv_array_destroy(&q);
    qv_array_destroy(&s);
    qv_array_destroy(&s2);
    qv_array_destroy(&b);
    return st;
}

int qv_cmd_pack(int argc, char **argv)
{
    const char *layout_name = NULL, *qp = NULL, *sp = NULL, *s2p = NULL, *zp = NULL, *gp = NULL, *out = NULL;
    const char *gptq = NULL, *awq = NULL, *prefix = NULL, *afmt_name = NULL, *bp = NULL;
    int zeros_v2 = 0;
    long long g_opt = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            pack_usage(stdout);
            return 0;
        }
        const char **slot = !strcmp(a, "--q")         ? &qp
                            : !strcmp(a, "--scales")  ? &sp
                            : !strcmp(a, "--scales2") ? &s2p
                            : !strcmp(a, "--zeros")   ? &zp
                            : !strcmp(a, "--g-idx")   ? &gp
                            : !strcmp(a, "--gptq")    ? &gptq
                            : !strcmp(a, "--awq")     ? &awq
                            : !strcmp(a, "--prefix")  ? &prefix
                            : !strcmp(a, "--a")       ? &afmt_name
                            : !strcmp(a, "--bias")    ? &bp
                            : (!strcmp(a, "-o") || !strcmp(a, "--out")) ? &out
                                                                        : NULL;
        if (slot) {
            if (!val) {
                fprintf(stderr, "qvet pack: option %s needs a value\n", a);
                return 2;
            }
            *slot = val;
            i++;
        } else if (!strcmp(a, "--zeros-v2")) {
            zeros_v2 = 1;
        } else if (!strcmp(a, "--g")) {
            /* 2^30: the largest dimension qvet accepts. */
            if (qv_opt_long(a, val, 1, 1 << 30, &g_opt)) return 2;
            i++;
        } else if (a[0] == '-') {
            fprintf(stderr, "qvet pack: unknown option '%s'\n\n", a);
            pack_usage(stderr);
            return 2;
        } else if (!layout_name) {
            layout_name = a;
        } else {
            fprintf(stderr, "qvet pack: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    const char *ckpt = gptq ? gptq : awq;
    if (!layout_name || !out || !(qp || ckpt)) {
        fprintf(stderr, "qvet pack: LAYOUT, --q (or --gptq/--awq) and -o are required\n\n");
        pack_usage(stderr);
        return 2;
    }
    if (ckpt && (qp || sp || zp || gp || s2p || (gptq && awq) || !prefix)) {
        fprintf(stderr, "qvet pack: --gptq or --awq takes --prefix and replaces --q, --scales, --zeros and --g-idx\n");
        return 2;
    }
    if (!ckpt && (prefix || zeros_v2)) {
        fprintf(stderr, "qvet pack: --prefix and --zeros-v2 go with --gptq or --awq\n");
        return 2;
    }
    qv_layout layout = qv_layout_from_name(layout_name);
    if (layout == QV_LAYOUT_COUNT || layout == QV_LAYOUT_LOGICAL) {
        fprintf(stderr, "qvet pack: %s layout '%s' (see qvet pack --help)\n",
                layout == QV_LAYOUT_LOGICAL ? "nothing to pack for the" : "unknown", layout_name);
        return 2;
    }
    if (qv_layout_is_fp4(layout)) {
        if (ckpt || zp || gp) {
            fprintf(stderr, "qvet pack: %s takes --q, --scales, --scales2, --bias and --a (no checkpoint, zero "
                    "points or g_idx)\n", layout_name);
            return 2;
        }
        qv_status st = pack_fp4(layout, afmt_name, qp, sp, s2p, bp, g_opt, out);
        return st == QV_OK ? 0 : fail_exit("pack", st);
    }
    if (afmt_name || bp) {
        fprintf(stderr, "qvet pack: --a and --bias apply to the FP4 layouts only\n");
        return 2;
    }

    if (ckpt && layout != QV_LAYOUT_MARLIN_W4 && layout != QV_LAYOUT_MARLIN_W4_ZP) {
        fprintf(stderr, "qvet pack: GPTQ and AWQ checkpoints hold 4-bit codes: pack them as marlin-w4 or marlin-w4-zp\n");
        return 2;
    }
    qv_array q = {0}, s = {0}, s2 = {0}, z = {0}, gi = {0};
    qv_packed pk = {0};
    qv_status st = QV_OK;
    if (ckpt) {
        qv_st_file *f = NULL;
        st = qv_st_open(ckpt, &f);
        if (st == QV_OK) st = load_checkpoint(f, prefix, awq != NULL, zeros_v2, &q, &z, &s, &gi);
        qv_st_close(f);
        sp = "checkpoint scales";
        gp = gi.data ? "checkpoint g_idx" : NULL;
        zp = "checkpoint qzeros";
        if (st == QV_OK && layout != QV_LAYOUT_MARLIN_W4_ZP) {
            /* Symmetric int4 (q+8) layouts hold no zero points: each must be 8. */
            for (int64_t i = 0; i < z.count && st == QV_OK; i++)
                if (((const uint8_t *)z.data)[i] != 8)
                    st = qv_fail(QV_ERR_UNSUPPORTED,
                                 "%s: zero point [%lld][%lld] is %d, not 8: an asymmetric checkpoint; pack it as "
                                 "marlin-w4-zp", layout_name, (long long)(i / z.shape[1]), (long long)(i % z.shape[1]),
                                 ((const uint8_t *)z.data)[i]);
            zp = NULL;
        }
    } else {
        st = qv_npy_load(qp, &q);
        if (st == QV_OK && sp) st = qv_npy_load(sp, &s);
        if (st == QV_OK && zp) st = qv_npy_load(zp, &z);
        if (st == QV_OK && gp) st = qv_npy_load(gp, &gi);
    }
    if (st == QV_OK && s2p) st = qv_npy_load(s2p, &s2);
    if (st == QV_OK && g_opt && sp) {
        int64_t rows = s.ndim == 2 ? s.shape[0] : 0;
        int64_t k = q.ndim == 2 ? q.shape[0] : 0;
        if (rows * g_opt != k && !(rows == 1 && g_opt == k))
            st = qv_fail(QV_ERR_SHAPE, "--g %lld disagrees with K=%lld and %lld scale rows (g = K / rows)", g_opt,
                         (long long)k, (long long)rows);
    }
    if (st == QV_OK)
        st = qv_pack_arrays(layout, &q, sp ? &s : NULL, s2p ? &s2 : NULL, zp ? &z : NULL, gp ? &gi : NULL, &pk);
    if (st == QV_OK) st = make_dir(out);
    if (st == QV_OK) st = save(out, "B.npy", QV_DT_I4, 2, pk.b_rows, pk.b_cols, pk.b);
    if (st == QV_OK && pk.scales) st = save(out, "scales.npy", s.dtype, 2, pk.s_rows, pk.s_cols, pk.scales);
    if (st == QV_OK && pk.scales2) st = save(out, "scales2.npy", QV_DT_F4, 2, 1, pk.s2_cols, pk.scales2);
    if (st == QV_OK && pk.zeros) st = save(out, "zeros.npy", QV_DT_I4, 2, pk.z_rows, pk.z_cols, pk.zeros);
    if (st == QV_OK && pk.perm) st = save(out, "perm.npy", QV_DT_I4, 1, pk.k, 0, pk.perm);
    if (st == QV_OK && pk.g_idx) st = save(out, "g_idx.npy", QV_DT_I4, 1, pk.k, 0, pk.g_idx);
    qv_packed_destroy(&pk);
    qv_array_destroy(&q);
    qv_array_destroy(&s);
    qv_array_destroy(&s2);
    qv_array_destroy(&z);
    qv_array_destroy(&gi);
    return st == QV_OK ? 0 : fail_exit("pack", st);
}

/* Builds the packed operand and the problem to decode into from the files of
 * DIR, checking every shape and dtype before ref_unpack runs. */
static qv_status unpack_dir(qv_layout layout, qv_fmt plain_wfmt, const char *dir, const char *out)
{
    qv_pack_dir d;
    qv_status st = qv_pack_dir_load(dir, &d);
    const qv_array *b = &d.b, *s = &d.s, *s2 = &d.s2, *z = &d.z, *perm = &d.perm, *gi = &d.g_idx;
    const int has_s = d.has_s, has_s2 = d.has_s2, has_z = d.has_z, has_perm = d.has_perm, has_gi = d.has_g_idx;
    const char *ln = qv_layout_name(layout);
    char buf[96];

    qv_variant v = {.name = "qvet unpack", .layout = layout, .afmt = QV_FMT_F16};
    static const qv_fmt layout_fmt[QV_LAYOUT_COUNT] = {
        [QV_LAYOUT_MARLIN_W4] = QV_FMT_U4,      [QV_LAYOUT_MARLIN_W4_ZP] = QV_FMT_U4,
        [QV_LAYOUT_MARLIN_W8] = QV_FMT_U8,      [QV_LAYOUT_MARLIN_FP8] = QV_FMT_E4M3,
        [QV_LAYOUT_QQQ_W4_CHANNEL] = QV_FMT_I4, [QV_LAYOUT_QQQ_W4_GROUP] = QV_FMT_U4,
    };
    v.wfmt = layout == QV_LAYOUT_PLAIN_NK ? plain_wfmt : layout_fmt[layout];
    int bits = v.wfmt == QV_FMT_U4 || v.wfmt == QV_FMT_I4 ? 4 : v.wfmt == QV_FMT_F16 || v.wfmt == QV_FMT_BF16 ? 16 : 8;
    int per = 32 / bits;
    int64_t k = 0, n = 0;
    if (st == QV_OK && (b->dtype != QV_DT_I4 || b->ndim != 2))
        st = qv_fail(QV_ERR_FORMAT, "%s/B.npy is %s; expected a 2-D int32 array", dir, qv_array_describe(b, buf, sizeof buf));
    if (st == QV_OK) {
        if (layout == QV_LAYOUT_PLAIN_NK) {
            n = b->shape[0];
            k = b->shape[1] * per;
        } else {
            k = b->shape[0] * 16;
            n = b->shape[1] * per / 16;
        }
        if (k < 1 || n < 1 || (layout != QV_LAYOUT_PLAIN_NK && n % 64))
            st = qv_fail(QV_ERR_SHAPE, "%s/B.npy %s is not a legal %s operand", dir,
                         qv_array_describe(b, buf, sizeof buf), ln);
    }
    qv_packed pk = {.layout = layout, .k = k, .n = n, .b = b->data, .b_rows = b->shape[0], .b_cols = b->shape[1]};
    if (st == QV_OK && layout != QV_LAYOUT_PLAIN_NK && !has_s) st = qv_fail(QV_ERR_IO, "%s/scales.npy does not exist", dir);
    if (st == QV_OK && has_s) {
        if (s->dtype == QV_DT_F2) v.sfmt = QV_FMT_F16;
        else if (s->dtype == QV_DT_U2) v.sfmt = QV_FMT_BF16, v.afmt = QV_FMT_BF16;
        else if (s->dtype == QV_DT_F4) v.sfmt = QV_FMT_F32;
        else st = qv_fail(QV_ERR_DTYPE, "%s/scales.npy must be float16, bf16 (<u2) or float32, not %s", dir,
                          qv_dtype_name(s->dtype));
    }
    if (st == QV_OK && has_s) {
        int64_t rows = s->ndim == 2 ? s->shape[0] : 0, cols = s->ndim == 2 ? s->shape[1] : 0;
        int tensor = rows == 1 && cols == 1 && n != 1;
        if (!tensor && (cols != n || rows < 1 || k % rows))
            st = qv_fail(QV_ERR_SHAPE, "%s/scales.npy is %s; expected (K/g, %lld) with K=%lld", dir,
                         qv_array_describe(s, buf, sizeof buf), (long long)n, (long long)k);
        v.scale_layout = tensor ? QV_SCALE_TENSOR : rows > 1 || has_s2 || has_z || has_perm ? QV_SCALE_GROUP
                                                                                             : QV_SCALE_CHANNEL;
        v.g = v.scale_layout == QV_SCALE_GROUP && rows > 0 ? (int)(k / rows) : 0;
        pk.scales = s->data;
        pk.s_rows = rows;
        pk.s_cols = cols;
        pk.s_elem = qv_dtype_size(s->dtype);
        pk.g = v.g;
        pk.s_order = qv_layout_scale_order(layout, v.scale_layout, rows);
        pk.s_pow2 = qv_layout_scale_pow2(layout, v.afmt);
    }
    if (st == QV_OK && has_s2) {
        if (layout != QV_LAYOUT_QQQ_W4_GROUP)
            st = qv_fail(QV_ERR_UNSUPPORTED, "%s has no scales2.npy", ln);
        else if (s2->dtype != QV_DT_F4 || s2->ndim != 2 || s2->shape[0] != 1 || s2->shape[1] != n)
            st = qv_fail(QV_ERR_SHAPE, "%s/scales2.npy is %s; expected (1, %lld) float32", dir,
                         qv_array_describe(s2, buf, sizeof buf), (long long)n);
        v.scale_layout = QV_SCALE_GROUP_CHANNEL;
        v.s2fmt = QV_FMT_F32;
        v.s2_layout = QV_SCALE_CHANNEL;
        pk.scales2 = s2->data;
        pk.s2_cols = n;
    } else if (st == QV_OK && layout == QV_LAYOUT_QQQ_W4_GROUP) {
        st = qv_fail(QV_ERR_IO, "%s/scales2.npy does not exist (qqq-w4-group has channel scales)", dir);
    }
    if (st == QV_OK && has_z) {
        if (layout != QV_LAYOUT_MARLIN_W4_ZP)
            st = qv_fail(QV_ERR_UNSUPPORTED, "%s has no zeros.npy", ln);
        else if (z->dtype != QV_DT_I4 || z->ndim != 2 || z->shape[0] != k / v.g || z->shape[1] * 8 != n)
            st = qv_fail(QV_ERR_SHAPE, "%s/zeros.npy is %s; expected (%lld, %lld) int32", dir,
                         qv_array_describe(z, buf, sizeof buf), (long long)(k / v.g), (long long)(n / 8));
        v.zero_point = QV_ZP_INT;
        v.zp_layout = QV_SCALE_GROUP;
        v.zp_g = v.g;
        pk.zeros = z->data;
        pk.z_rows = k / v.g;
        pk.z_cols = n / 8;
        pk.z_bytes = (int64_t)z->nbytes;
    } else if (st == QV_OK && layout == QV_LAYOUT_MARLIN_W4_ZP) {
        st = qv_fail(QV_ERR_IO, "%s/zeros.npy does not exist (marlin-w4-zp has zero points)", dir);
    }
    if (st == QV_OK && (has_perm || has_gi)) {
        if (!has_perm || !has_gi || v.g < 1)
            st = qv_fail(QV_ERR_FORMAT, "act_order needs perm.npy, g_idx.npy and grouped scales together");
        else if (perm->dtype != QV_DT_I4 || perm->ndim != 1 || perm->shape[0] != k || gi->dtype != QV_DT_I4 ||
                 gi->ndim != 1 || gi->shape[0] != k)
            st = qv_fail(QV_ERR_SHAPE, "perm.npy and g_idx.npy must be int32 (%lld)", (long long)k);
        v.act_order = 1;
        pk.perm = perm->data;
        pk.g_idx = gi->data;
    }

    qv_problem p = {.v = &v, .m = 1, .n = n, .k = k, .g = v.g};
    qv_dtype qdt = v.wfmt == QV_FMT_U8 || v.wfmt == QV_FMT_UINT8 || v.wfmt == QV_FMT_E4M3 || v.wfmt == QV_FMT_E5M2
                       ? QV_DT_U1
                   : v.wfmt == QV_FMT_F16                      ? QV_DT_F2
                   : v.wfmt == QV_FMT_BF16                     ? QV_DT_U2
                                                               : QV_DT_I1;
    if (st == QV_OK) {
        p.q = calloc((size_t)(k * n), qv_dtype_size(qdt));
        p.scales = has_s ? calloc(1, s->nbytes) : NULL;
        p.scales2 = has_s2 ? calloc((size_t)n, sizeof(float)) : NULL;
        p.zeros = has_z ? calloc((size_t)(k / v.g * n), 1) : NULL;
        p.g_idx = has_gi ? calloc((size_t)k, sizeof(int32_t)) : NULL;
        if (!p.q || (has_s && !p.scales) || (has_s2 && !p.scales2) || (has_z && !p.zeros) || (has_gi && !p.g_idx))
            st = qv_fail(QV_ERR_NOMEM, "out of memory decoding K=%lld N=%lld", (long long)k, (long long)n);
    }
    if (st == QV_OK) st = ref_unpack(&pk, &p);
    if (st == QV_OK && p.g_idx)
        for (int64_t i = 0; i < k && st == QV_OK; i++)
            if (p.g_idx[i] < 0 || p.g_idx[i] >= k / v.g)
                st = qv_fail(QV_ERR_RANGE, "g_idx.npy entry %lld is outside [0, %lld)", (long long)i, (long long)(k / v.g));
    if (st == QV_OK) st = make_dir(out);
    if (st == QV_OK) st = save(out, "q.npy", qdt, 2, k, n, p.q);
    if (st == QV_OK && p.scales) st = save(out, "scales.npy", s->dtype, 2, s->shape[0], s->shape[1], p.scales);
    if (st == QV_OK && p.scales2) st = save(out, "scales2.npy", QV_DT_F4, 2, 1, n, p.scales2);
    if (st == QV_OK && p.zeros) st = save(out, "zeros.npy", QV_DT_U1, 2, k / v.g, n, p.zeros);
    if (st == QV_OK && p.g_idx) st = save(out, "g_idx.npy", QV_DT_I4, 1, k, 0, p.g_idx);
    free(p.q);
    free(p.scales);
    free(p.scales2);
    free(p.zeros);
    free(p.g_idx);
    qv_pack_dir_destroy(&d);
    return st;
}

/* qvet unpack for the FP4 layouts: DIR's B, scales, scales2, scale_pow2 and
 * bias through ref_unpack into OUTDIR's logical q, scales, scales2 and bias. */
static qv_status unpack_fp4_dir(qv_layout layout, qv_fmt afmt, const char *dir, const char *out)
{
    const int nv = layout == QV_LAYOUT_MARLIN_FP4_NV;
    qv_pack_dir d;
    qv_packed pk;
    qv_fmt bfmt = QV_FMT_NONE;
    qv_status st = qv_pack_dir_load(dir, &d);
    if (st == QV_OK) st = qv_pack_dir_fp4(&d, dir, layout, &pk, &bfmt);
    const int has_bias = st == QV_OK && d.has_bias;
    qv_array bias = d.bias;
    const int64_t k = st == QV_OK ? pk.k : 0, n = st == QV_OK ? pk.n : 0;
    const int g = nv ? 16 : 32;
    qv_variant v = {.name = "qvet unpack", .layout = layout, .wfmt = QV_FMT_E2M1, .afmt = afmt, .ofmt = afmt,
                    .sfmt = nv ? QV_FMT_UE4M3 : QV_FMT_E8M0, .scale_layout = QV_SCALE_GROUP, .g = g,
                    .s2fmt = nv ? QV_FMT_F32 : QV_FMT_NONE, .s2_layout = nv ? QV_SCALE_TENSOR : QV_SCALE_NONE,
                    .bias_fmt = bfmt, .n_tile = 64, .k_tile = 16};
    qv_problem p = {.v = &v, .m = 1, .n = n, .k = k, .g = g};
    float g2 = 0.0f;
    if (st == QV_OK) {
        p.q = calloc((size_t)(k * n), 1);
        p.scales = calloc((size_t)(k / g * n), 1);
        p.bias = has_bias ? calloc((size_t)n, sizeof(float)) : NULL;
        p.scales2 = nv ? &g2 : NULL;
        if (!p.q || !p.scales || (has_bias && !p.bias))
            st = qv_fail(QV_ERR_NOMEM, "out of memory decoding K=%lld N=%lld", (long long)k, (long long)n);
    }
    if (st == QV_OK) st = ref_unpack(&pk, &p);
    if (st == QV_OK) st = make_dir(out);
    if (st == QV_OK) st = save(out, "q.npy", QV_DT_U1, 2, k, n, p.q);
    if (st == QV_OK) st = save(out, "scales.npy", QV_DT_U1, 2, k / g, n, p.scales);
    if (st == QV_OK && nv) st = save(out, "scales2.npy", QV_DT_F4, 1, 1, 0, &g2);
    if (st == QV_OK && has_bias) {
        /* The values back into the file's own format (exact: they came from it). */
        for (int64_t j = 0; j < n; j++) {
            uint8_t *at = (uint8_t *)bias.data + (size_t)j * qv_dtype_size(bias.dtype);
            if (bfmt == QV_FMT_F32) {
                memcpy(at, &p.bias[j], 4);
            } else {
                uint16_t h = bfmt == QV_FMT_F16 ? qv_f32_to_f16(p.bias[j]) : qv_f32_to_bf16(p.bias[j]);
                memcpy(at, &h, 2);
            }
        }
        st = save(out, "bias.npy", bias.dtype, 1, n, 0, bias.data);
    }
    free(p.q);
    free(p.scales);
    free(p.bias);
    qv_pack_dir_destroy(&d);
    return st;
}

int qv_cmd_unpack(int argc, char **argv)
{
    const char *layout_name = NULL, *dir = NULL, *out = NULL, *wfmt_name = NULL, *afmt_name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            unpack_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--out") || !strcmp(a, "--wfmt") || !strcmp(a, "--a")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "qvet unpack: option %s needs a value\n", a);
                return 2;
            }
            *(!strcmp(a, "--wfmt") ? &wfmt_name : !strcmp(a, "--a") ? &afmt_name : &out) = argv[++i];
        } else if (a[0] == '-') {
            fprintf(stderr, "qvet unpack: unknown option '%s'\n\n", a);
            unpack_usage(stderr);
            return 2;
        } else if (!layout_name) {
            layout_name = a;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "qvet unpack: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!layout_name || !dir || !out) {
        fprintf(stderr, "qvet unpack: LAYOUT, DIR and -o OUTDIR are required\n\n");
        unpack_usage(stderr);
        return 2;
    }
    qv_layout layout = qv_layout_from_name(layout_name);
    if (layout == QV_LAYOUT_COUNT || layout == QV_LAYOUT_LOGICAL) {
        fprintf(stderr, "qvet unpack: %s layout '%s' (see qvet pack --help)\n",
                layout == QV_LAYOUT_LOGICAL ? "nothing to unpack for the" : "unknown", layout_name);
        return 2;
    }
    if (qv_layout_is_fp4(layout)) {
        qv_fmt afmt = QV_FMT_NONE;
        qv_status st = wfmt_name ? qv_fail(QV_ERR_USAGE, "--wfmt applies to plain-nk only (%s holds e2m1 codes)",
                                           layout_name)
                                 : fp4_afmt(afmt_name, layout == QV_LAYOUT_MARLIN_FP4_NV ? QV_FMT_NONE : QV_FMT_BF16,
                                            layout_name, &afmt);
        if (st == QV_OK) st = unpack_fp4_dir(layout, afmt, dir, out);
        return st == QV_OK ? 0 : fail_exit("unpack", st);
    }
    if (afmt_name) {
        fprintf(stderr, "qvet unpack: --a applies to the FP4 layouts only\n");
        return 2;
    }
    qv_fmt wfmt = QV_FMT_NONE;
    if (layout == QV_LAYOUT_PLAIN_NK) {
        wfmt = wfmt_name ? qv_fmt_from_name(wfmt_name) : QV_FMT_NONE;
        if (wfmt != QV_FMT_I8 && wfmt != QV_FMT_U8 && wfmt != QV_FMT_UINT8 && wfmt != QV_FMT_E4M3 &&
            wfmt != QV_FMT_E5M2 && wfmt != QV_FMT_F16 && wfmt != QV_FMT_BF16) {
            fprintf(stderr, "qvet unpack: plain-nk needs --wfmt i8, u8b128, u8, e4m3, e5m2, f16 or bf16\n");
            return 2;
        }
    } else if (wfmt_name) {
        fprintf(stderr, "qvet unpack: --wfmt applies to plain-nk only (%s fixes its codes)\n", layout_name);
        return 2;
    }
    qv_status st = unpack_dir(layout, wfmt, dir, out);
    return st == QV_OK ? 0 : fail_exit("unpack", st);
}
