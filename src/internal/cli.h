/* cli.h: the qvet subcommands. Included by src/qvet.c (the dispatcher) and by
 * the file that implements each subcommand. Rule: a subcommand returns its exit
 * code (0 ok, 1 a FAIL verdict, 2 usage or input error, 3 environment error) and
 * prints its own usage on --help (to stdout, exit 0) or on a bad option (to
 * stderr, exit 2). It never calls exit() from library code. */
#ifndef QVET_CLI_H
#define QVET_CLI_H

#include "qvet/array.h"
#include "qvet/layout.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

int qv_cmd_list(int argc, char **argv);    /* src/cmd_list.c */
int qv_cmd_check(int argc, char **argv);   /* fuzz/cmd_campaign.c */
int qv_cmd_fuzz(int argc, char **argv);    /* fuzz/cmd_campaign.c */
int qv_cmd_replay(int argc, char **argv);  /* fuzz/cmd_campaign.c */
int qv_cmd_pack(int argc, char **argv);    /* src/cmd_pack.c */
int qv_cmd_unpack(int argc, char **argv);  /* src/cmd_pack.c */
int qv_cmd_verify(int argc, char **argv);  /* src/cmd_verify.c */
int qv_cmd_verify_moe(int argc, char **argv); /* src/cmd_verify_moe.c: a routed spec */
int qv_cmd_report(int argc, char **argv);  /* reports/cmd_report.c */
int qv_cmd_ppl(int argc, char **argv);     /* eval/cmd_ppl.c */
int qv_cmd_bench(int argc, char **argv);   /* bench/cmd_bench.c */

/* Shared option helpers: parse an integer/double option value or print a
 * clear message naming the option; return 0 on success, -1 on error. */
int qv_opt_long(const char *opt, const char *val, long long lo, long long hi, long long *out);
int qv_opt_double(const char *opt, const char *val, double *out);

/* The arrays of a `qvet pack` folder, as `qvet unpack` and `qvet verify
 * --packed` read them: B.npy always, scales.npy, scales2.npy, zeros.npy,
 * perm.npy, g_idx.npy, scale_pow2.npy and bias.npy when present (has_*).
 * Their dtypes and shapes are the caller's to check, against what its layout
 * or variant needs (qv_pack_dir_fp4 for the FP4 layouts). */
typedef struct qv_pack_dir {
    qv_array b, s, s2, z, perm, g_idx, pw, bias;
    int has_s, has_s2, has_z, has_perm, has_g_idx, has_pw, has_bias;
} qv_pack_dir;

/* Loads the arrays of folder `dir` into *d (zeroed first). A missing B.npy,
 * or any present file that is not a readable .npy, is a status naming the
 * file; on any failure nothing stays allocated. */
qv_status qv_pack_dir_load(const char *dir, qv_pack_dir *d);
void qv_pack_dir_destroy(qv_pack_dir *d);

/* The folder of an FP4 layout (marlin-fp4-mx or -nv, layout.h): B int32
 * (K/16, 2N) with N a multiple of 64 and K of the group size, scales uint8
 * (K/g, N), for NVFP4 scales2 f32 (1) and scale_pow2 int32 (1) and for MXFP4
 * neither, an optional bias (N) in float16, bf16 ('<u2') or float32, no zero
 * points or act_order. Checks each, naming the file, then fills *pk with
 * views of d's arrays (valid while d is) and *bias_fmt with the bias's format
 * (QV_FMT_NONE without one). */
qv_status qv_pack_dir_fp4(const qv_pack_dir *d, const char *dir, qv_layout layout, qv_packed *pk, qv_fmt *bias_fmt);

/* What the provenance line of every results file says of the build and the
 * driver (docs/results-format.md), the same for check, fuzz, replay, bench
 * and ppl:
 *  - qv_build_commit: the git commit qvet was built from (the Makefile's
 *    QV_GIT_COMMIT), followed by "+changes" where tracked files differed
 *    from it, or "unknown". Never the commit of the directory qvet runs in,
 *    which may be the user's own repository, and the same where the binary
 *    runs without a repository (a copy on a GPU host).
 *  - qv_driver_version: the NVIDIA kernel module's version ("580.159.04",
 *    from /proc/driver/nvidia/version), else the CUDA driver API version
 *    that cudaDriverGetVersion gave (driver_api 13000: "13.0"); "" when
 *    driver_api is 0 (no device). */
const char *qv_build_commit(void);
void qv_driver_version(int driver_api, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
