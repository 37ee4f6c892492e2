/* t_pack_cli.c: the `qvet pack` and `qvet unpack` subcommands, run as a user
 * runs them. On every published vector (tests/data/golden, or QVET_GOLDEN),
 * pack must write files byte-identical to the published packed .npy files, and
 * unpack must give back the published logical files byte for byte. Every bad
 * input must exit 2 with a message and leave no packed file behind.
 *
 * The binary is $QVET_BIN, or ../qvet next to this test's folder (the build's
 * layout: BUILD/tests/t_pack_cli and BUILD/qvet). Random inputs come from
 * (seed, index); the seed is printed and replayed with QVET_SEED=<seed>. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qvet/array.h"
#include "qvet/formats.h"

#include "support/cases.h"
#include "support/ckpt.h"
#include "support/cli.h"
#include "support/files.h"
#include "support/golden.h"
#include "support/rand.h"
#include "support/suite.h"

static char g_tmp[256];
static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */

/* Runs qvet with `args` (a shell word list), stdout and stderr into
 * g_tmp/out.log; returns the exit status (-1 when it did not exit normally). */
static int run_qvet(const char *args)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s/out.log' 2>&1", qvet_path(), args, g_tmp);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Runs qvet with the printf-formatted shell word list and asserts that it
 * exits `want`; a failure names the command and the seed. */
static void expect_qvet(int want, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect_qvet(int want, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    ck_assert_msg(len >= 0 && (size_t)len < sizeof args, "qvet command longer than %zu bytes", sizeof args);
    int rc = run_qvet(args);
    ck_assert_msg(rc == want, "qvet %s exited %d, expected %d (seed %" PRIu64 ")", args, rc, want, g_seed);
}

static size_t log_size(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/out.log", g_tmp);
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Asserts that dir_a/stem_a.npy and dir_b/stem_b.npy hold identical bytes. */
static void same_npy(const char *dir_a, const char *stem_a, const char *dir_b, const char *stem_b)
{
    char a[1400], b[1400];
    snprintf(a, sizeof a, "%s/%s.npy", dir_a, stem_a);
    snprintf(b, sizeof b, "%s/%s.npy", dir_b, stem_b);
    assert_same_bytes(a, b);
}

typedef struct golden_case {
    const char *dir, *layout, *q, *s, *s_packed, *s2, *s2_packed;
} golden_case;

static const golden_case goldens[] = {
    {"marlin_w4a16_k128_n256_g-1", "marlin-w4", "q_logical_kxn_uint4", "scales_logical_gxn_f16",
     "scales_packed_f16", NULL, NULL},
    {"marlin_w4a16_k256_n256_g128", "marlin-w4", "q_logical_kxn_uint4", "scales_logical_gxn_f16",
     "scales_packed_f16", NULL, NULL},
    {"qqq_w4a8_k128_n256_g-1", "qqq-w4-channel", "q_logical_kxn_int4", "s_channel_logical_1xn_f32",
     "s_channel_packed_f32", NULL, NULL},
    {"qqq_w4a8_k256_n256_g128", "qqq-w4-group", "q_logical_kxn_uint4", "s_group_logical_gxn_f16",
     "s_group_packed_f16", "s_channel_logical_1xn_f32", "s_channel_packed_f32"},
};

START_TEST(golden_cli)
{
    const golden_case *gc = &goldens[_i];
    char d[1024], args[8192], out[600], logical[600];
    snprintf(d, sizeof d, "%s/%s", golden_root(), gc->dir);
    snprintf(out, sizeof out, "%s/%s", g_tmp, gc->dir);
    snprintf(logical, sizeof logical, "%s/%s-logical", g_tmp, gc->dir);
    char s2opt[1200] = "";
    if (gc->s2) snprintf(s2opt, sizeof s2opt, "--scales2 '%s/%s.npy'", d, gc->s2);
    expect_qvet(0, "pack %s --q '%s/%s.npy' --scales '%s/%s.npy' %s -o '%s/%s'", gc->layout, d, gc->q, d,
                gc->s, s2opt, g_tmp, gc->dir);
    same_npy(out, "B", d, "B_packed_int32");
    same_npy(out, "scales", d, gc->s_packed);
    if (gc->s2) same_npy(out, "scales2", d, gc->s2_packed);
    /* Unpack the published bytes themselves: copy them into a pack folder. */
    char in[1024];
    snprintf(in, sizeof in, "%s/%s-published", g_tmp, gc->dir);
    snprintf(args, sizeof args, "mkdir -p '%s' && cp '%s/B_packed_int32.npy' '%s/B.npy' && cp '%s/%s.npy' '%s/scales.npy'",
             in, d, in, d, gc->s_packed, in);
    ck_assert_int_eq(system(args), 0);
    if (gc->s2) {
        snprintf(args, sizeof args, "cp '%s/%s.npy' '%s/scales2.npy'", d, gc->s2_packed, in);
        ck_assert_int_eq(system(args), 0);
    }
    expect_qvet(0, "unpack %s '%s' -o '%s'", gc->layout, in, logical);
    same_npy(logical, "q", d, gc->q);
    same_npy(logical, "scales", d, gc->s);
    if (gc->s2) same_npy(logical, "scales2", d, gc->s2);
}
END_TEST

/* ---- round trips through the CLI on layouts without published vectors --- */

static uint64_t rnd(uint64_t stream, uint64_t i) { return test_rnd(g_seed, stream, i); }

static void save_arr(const char *name, qv_dtype dt, int ndim, int64_t d0, int64_t d1, uint64_t stream, int mod)
{
    qv_array a;
    int64_t shape[2] = {d0, d1};
    ck_assert(qv_array_create(&a, dt, ndim, shape) == QV_OK);
    size_t es = qv_dtype_size(dt);
    for (int64_t i = 0; i < a.count; i++) {
        uint64_t r = rnd(stream, (uint64_t)i);
        if (dt == QV_DT_F2) {
            /* f16 in [2^-6, 2^6): exponent field 9..20, so x 2^8 stays finite. */
            uint16_t h = (uint16_t)((9 + r % 12) << 10 | ((r >> 8) & 0x3FF));
            memcpy((char *)a.data + i * es, &h, 2);
        } else if (dt == QV_DT_F4) {
            float f = (float)(1 + r % 1000) / 256.0f;
            memcpy((char *)a.data + i * es, &f, 4);
        } else if (dt == QV_DT_I4) {
            int32_t v = (int32_t)(r % (uint64_t)mod);
            memcpy((char *)a.data + i * es, &v, 4);
        } else {
            ((uint8_t *)a.data)[i] = (uint8_t)(mod ? r % (uint64_t)mod : r);
        }
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    ck_assert_msg(qv_npy_save(path, &a) == QV_OK, "%s", qv_errmsg());
    qv_array_destroy(&a);
}

typedef struct rt_case {
    const char *layout;
    int64_t k, n, groups;
    qv_dtype qdt;
    int qmod;              /* codes drawn in [0, qmod), 0 for any byte */
    qv_dtype sdt;
    int zeros, act_order, s2;
} rt_case;

static const rt_case rts[] = {
    {"marlin-w8", 128, 192, 1, QV_DT_U1, 0, QV_DT_F2, 0, 0, 0},
    {"marlin-w8", 256, 64, 4, QV_DT_U1, 0, QV_DT_F2, 0, 0, 0},
    {"marlin-fp8", 128, 128, 1, QV_DT_U1, 0, QV_DT_F2, 0, 0, 0},
    {"marlin-fp8", 256, 128, 2, QV_DT_U1, 0, QV_DT_F4, 0, 0, 0},
    {"marlin-w4-zp", 256, 128, 2, QV_DT_U1, 16, QV_DT_F2, 1, 0, 0},
    {"marlin-w4", 384, 64, 3, QV_DT_I1, 16, QV_DT_F2, 0, 1, 0},
    {"qqq-w4-group", 128, 64, 1, QV_DT_U1, 16, QV_DT_F2, 0, 0, 1},
    {"plain-nk", 32, 24, 1, QV_DT_U1, 0, QV_DT_F4, 0, 0, 0},
};

START_TEST(roundtrip_cli)
{
    const rt_case *rc = &rts[_i];
    uint64_t st = 1000 + (uint64_t)_i * 10;
    save_arr("rq.npy", rc->qdt, 2, rc->k, rc->n, st, rc->qmod);
    save_arr("rs.npy", rc->sdt, 2, rc->groups, rc->n, st + 1, 0);
    char extra[2048] = "";
    size_t e = 0;
    if (rc->zeros) {
        save_arr("rz.npy", QV_DT_U1, 2, rc->groups, rc->n, st + 2, 16);
        e += (size_t)snprintf(extra + e, sizeof extra - e, " --zeros '%s/rz.npy'", g_tmp);
    }
    if (rc->act_order) {
        save_arr("rg.npy", QV_DT_I4, 1, rc->k, 0, st + 3, (int)rc->groups);
        e += (size_t)snprintf(extra + e, sizeof extra - e, " --g-idx '%s/rg.npy'", g_tmp);
    }
    if (rc->s2) {
        save_arr("rs2.npy", QV_DT_F4, 2, 1, rc->n, st + 4, 0);
        e += (size_t)snprintf(extra + e, sizeof extra - e, " --scales2 '%s/rs2.npy'", g_tmp);
    }
    char a[700], b[600], out[600];
    snprintf(out, sizeof out, "%s/rt%d-out", g_tmp, _i);
    expect_qvet(0, "pack %s --q '%s/rq.npy' --scales '%s/rs.npy'%s -o '%s/rt%d'", rc->layout, g_tmp, g_tmp,
                extra, g_tmp, _i);
    expect_qvet(0, "unpack %s '%s/rt%d' -o '%s'%s", rc->layout, g_tmp, _i, out,
                !strcmp(rc->layout, "plain-nk") ? " --wfmt u8b128" : "");
    /* q comes back as int8 for 4-bit layouts and uint8 for 8-bit ones: same bytes. */
    snprintf(a, sizeof a, "%s/q.npy", out);
    qv_array q0, q1;
    snprintf(b, sizeof b, "%s/rq.npy", g_tmp);
    ck_assert(qv_npy_load(a, &q1) == QV_OK);
    ck_assert(qv_npy_load(b, &q0) == QV_OK);
    ck_assert_msg(q0.nbytes == q1.nbytes && memcmp(q0.data, q1.data, q0.nbytes) == 0, "%s: q differs after the round trip",
                  rc->layout);
    qv_array_destroy(&q0);
    qv_array_destroy(&q1);
    same_npy(out, "scales", g_tmp, "rs");
    if (rc->zeros) same_npy(out, "zeros", g_tmp, "rz");
    if (rc->act_order) same_npy(out, "g_idx", g_tmp, "rg");
    if (rc->s2) same_npy(out, "scales2", g_tmp, "rs2");
}
END_TEST

/* ---- GPTQ / AWQ checkpoints --------------------------------------------- */

static qv_array arr(qv_dtype dt, int ndim, int64_t d0, int64_t d1)
{
    qv_array a;
    int64_t shape[2] = {d0, d1};
    ck_assert(qv_array_create(&a, dt, ndim, shape) == QV_OK);
    return a;
}

static void save_npy(const char *name, const qv_array *a)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    ck_assert_msg(qv_npy_save(path, a) == QV_OK, "%s", qv_errmsg());
}

/* One layer: logical q (K, N), zero points (K/g, N), f16 scales, g_idx (K).
 * Writes ck.safetensors in the GPTQ (awq = 0, v1 zeros z-1) or AWQ layout, and
 * the logical q.npy, s.npy, z.npy, g.npy for the plain route. */
static void write_layer(int awq, int64_t k, int64_t n, int g, int symmetric, int shuffled_gidx, uint64_t stream)
{
    int64_t groups = k / g;
    qv_array q = arr(QV_DT_U1, 2, k, n), z = arr(QV_DT_U1, 2, groups, n), s = arr(QV_DT_F2, 2, groups, n),
             gi = arr(QV_DT_I4, 1, k, 0);
    uint8_t *qd = q.data, *zd = z.data;
    for (int64_t i = 0; i < k * n; i++) qd[i] = (uint8_t)(rnd(stream, (uint64_t)i) % 16);
    /* v1 stores z-1, so it cannot hold z = 0: draw 1..15. */
    for (int64_t i = 0; i < groups * n; i++) zd[i] = symmetric ? 8 : (uint8_t)(1 + rnd(stream + 1, (uint64_t)i) % 15);
    for (int64_t i = 0; i < groups * n; i++)
        ((uint16_t *)s.data)[i] = (uint16_t)((9 + rnd(stream + 2, (uint64_t)i) % 12) << 10); /* 2^-6 .. 2^5 */
    for (int64_t i = 0; i < k; i++)
        ((int32_t *)gi.data)[i] = shuffled_gidx ? (int32_t)(rnd(stream + 3, (uint64_t)i) % (uint64_t)groups)
                                                : (int32_t)(i / g);
    qv_array qw = awq ? arr(QV_DT_I4, 2, k, n / 8) : arr(QV_DT_I4, 2, k / 8, n);
    qv_array qz = arr(QV_DT_I4, 2, groups, n / 8);
    if (awq)
        ckpt_pack_along_n(qd, k, n, ckpt_awq_order, 0, qw.data);
    else
        ckpt_pack_along_k(qd, k, n, qw.data);
    /* AWQ stores z as is; GPTQ v1 stores z - 1. */
    ckpt_pack_along_n(zd, groups, n, awq ? ckpt_awq_order : NULL, awq ? 0 : 1, qz.data);
    const char *names[4] = {"blk.qweight", "blk.qzeros", "blk.scales", "blk.g_idx"};
    qv_array arrays[4] = {qw, qz, s, gi};
    char path[512];
    snprintf(path, sizeof path, "%s/ck.safetensors", g_tmp);
    ck_assert_msg(qv_st_save(path, awq ? 3 : 4, names, arrays) == QV_OK, "%s", qv_errmsg());
    save_npy("q.npy", &q);
    save_npy("s.npy", &s);
    save_npy("z.npy", &z);
    save_npy("g.npy", &gi);
    qv_array_destroy(&q);
    qv_array_destroy(&z);
    qv_array_destroy(&s);
    qv_array_destroy(&gi);
    qv_array_destroy(&qw);
    qv_array_destroy(&qz);
}

/* Asserts that g_tmp/d1 and g_tmp/d2 hold the same bytes in each .npy of
 * `stems` (NULL-terminated). */
static void same_outputs(const char *d1, const char *d2, const char *const *stems)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/%s", g_tmp, d1);
    snprintf(b, sizeof b, "%s/%s", g_tmp, d2);
    for (int i = 0; stems[i]; i++) same_npy(a, stems[i], b, stems[i]);
}

/* A checkpoint packs to the same bytes as its logical arrays. */
START_TEST(checkpoint_cli)
{
    char args[4096];
    const char *t = g_tmp;
    /* GPTQ, symmetric (every z = 8, stored as 7), plain g_idx: marlin-w4. */
    write_layer(0, 256, 128, 64, 1, 0, 3000);
    expect_qvet(0, "pack marlin-w4 --gptq '%s/ck.safetensors' --prefix blk -o '%s/c1'", t, t);
    expect_qvet(0, "pack marlin-w4 --q '%s/q.npy' --scales '%s/s.npy' -o '%s/c1ref'", t, t, t);
    same_outputs("c1", "c1ref", (const char *const[]){"B", "scales", NULL});
    snprintf(args, sizeof args, "%s/c1/perm.npy", t);
    ck_assert_msg(!exists(args), "a plain g_idx must not turn on act_order");

    /* GPTQ with a shuffled g_idx (desc_act): act_order, same as --g-idx. */
    write_layer(0, 256, 64, 32, 1, 1, 3100);
    expect_qvet(0, "pack marlin-w4 --gptq '%s/ck.safetensors' --prefix blk -o '%s/c2'", t, t);
    expect_qvet(0, "pack marlin-w4 --q '%s/q.npy' --scales '%s/s.npy' --g-idx '%s/g.npy' -o '%s/c2ref'", t,
                t, t, t);
    same_outputs("c2", "c2ref", (const char *const[]){"B", "scales", "perm", "g_idx", NULL});

    /* GPTQ, asymmetric: refused as marlin-w4, packed with zero points as marlin-w4-zp. */
    write_layer(0, 128, 64, 32, 0, 0, 3200);
    expect_qvet(2, "pack marlin-w4 --gptq '%s/ck.safetensors' --prefix blk -o '%s/c3bad'", t, t);
    expect_qvet(0, "pack marlin-w4-zp --gptq '%s/ck.safetensors' --prefix blk -o '%s/c3'", t, t);
    expect_qvet(0, "pack marlin-w4-zp --q '%s/q.npy' --scales '%s/s.npy' --zeros '%s/z.npy' -o '%s/c3ref'",
                t, t, t, t);
    same_outputs("c3", "c3ref", (const char *const[]){"B", "scales", "zeros", NULL});
    /* The same file read as v2 (z stored as is) gives other zero points. */
    expect_qvet(0, "pack marlin-w4-zp --gptq '%s/ck.safetensors' --prefix blk --zeros-v2 -o '%s/c3v2'", t, t);
    char a[600], b[600];
    size_t la, lb;
    snprintf(a, sizeof a, "%s/c3/zeros.npy", t);
    snprintf(b, sizeof b, "%s/c3v2/zeros.npy", t);
    unsigned char *x = read_all(a, &la), *y = read_all(b, &lb);
    ck_assert(x && y && la == lb);
    ck_assert_msg(memcmp(x, y, la) != 0, "v1 and v2 zero points must differ by one");
    free(x);
    free(y);

    /* AWQ: nibbles along N in AWQ's order, zero points as stored. */
    write_layer(1, 128, 128, 64, 0, 0, 3300);
    expect_qvet(0, "pack marlin-w4-zp --awq '%s/ck.safetensors' --prefix blk -o '%s/c4'", t, t);
    expect_qvet(0, "pack marlin-w4-zp --q '%s/q.npy' --scales '%s/s.npy' --zeros '%s/z.npy' -o '%s/c4ref'",
                t, t, t, t);
    same_outputs("c4", "c4ref", (const char *const[]){"B", "scales", "zeros", NULL});

    /* Misuse: a checkpoint for an 8-bit layout, a missing prefix, both routes at once. */
    expect_qvet(2, "pack marlin-w8 --awq '%s/ck.safetensors' --prefix blk -o '%s/c5'", t, t);
    expect_qvet(2, "pack marlin-w4-zp --awq '%s/ck.safetensors' --prefix nosuch -o '%s/c5'", t, t);
    expect_qvet(2, "pack marlin-w4-zp --awq '%s/ck.safetensors' --q '%s/q.npy' --prefix blk -o '%s/c5'", t,
                t, t);
    snprintf(args, sizeof args, "%s/c5/B.npy", t);
    ck_assert(!exists(args));
}
END_TEST

/* ---- the FP4 layouts ----------------------------------------------------- */

/* Writes g_tmp/name: a (rows, cols) uint8 array (rows 0: a 1-D (cols) one) of
 * codes lo + r % (hi - lo + 1). */
static void save_codes(const char *name, int64_t rows, int64_t cols, int lo, int hi, uint64_t stream)
{
    qv_array a;
    int64_t shape[2] = {rows ? rows : cols, cols};
    ck_assert(qv_array_create(&a, QV_DT_U1, rows ? 2 : 1, shape) == QV_OK);
    for (int64_t i = 0; i < a.count; i++) ((uint8_t *)a.data)[i] = (uint8_t)(lo + rnd(stream, (uint64_t)i) % (uint64_t)(hi - lo + 1));
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    ck_assert_msg(qv_npy_save(path, &a) == QV_OK, "%s", qv_errmsg());
    qv_array_destroy(&a);
}

/* Writes g_tmp/name: n bias values of dtype dt (float16, '<u2' bf16 or float32),
 * small multiples of 1/8 that every one of them holds exactly; or one f32
 * global scale (n = 1, dt float32) of value x when x is not 0. */
static void save_values(const char *name, qv_dtype dt, int64_t n, float x, uint64_t stream)
{
    qv_array a;
    ck_assert(qv_array_create(&a, dt, 1, &n) == QV_OK);
    for (int64_t i = 0; i < n; i++) {
        float v = x != 0.0f ? x : (float)((int64_t)(rnd(stream, (uint64_t)i) % 257) - 128) / 8.0f;
        if (dt == QV_DT_F4) ((float *)a.data)[i] = v;
        else if (dt == QV_DT_F2) ((uint16_t *)a.data)[i] = qv_f32_to_f16(v);
        else ((uint16_t *)a.data)[i] = qv_f32_to_bf16(v);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    ck_assert_msg(qv_npy_save(path, &a) == QV_OK, "%s", qv_errmsg());
    qv_array_destroy(&a);
}

typedef struct fp4_case {
    const char *layout, *a;
    int64_t k, n;
    int s_lo, s_hi;   /* scale codes drawn in [s_lo, s_hi] */
    qv_dtype bias;    /* 0: no bias */
    int pow2;         /* expected scale_pow2.npy (NV) */
} fp4_case;

static const fp4_case fp4s[] = {
    {"marlin-fp4-mx", "bf16", 64, 128, 1, 254, QV_DT_F4, 0},
    {"marlin-fp4-mx", "f16", 32, 64, 100, 140, 0, 0},
    {"marlin-fp4-nv", "f16", 64, 192, 1, 0x7E, QV_DT_F2, 7},
    {"marlin-fp4-nv", "bf16", 128, 64, 1, 0x50, QV_DT_U2, 10}, /* 2^-9 present: lifted by 2^3 */
    {"marlin-fp4-nv", "bf16", 16, 64, 0x10, 0x60, 0, 7},       /* smallest 2^-5: no lift */
};

START_TEST(fp4_roundtrip_cli)
{
    const fp4_case *fc = &fp4s[_i];
    const int nv = strstr(fc->layout, "nv") != NULL;
    const int64_t g = nv ? 16 : 32;
    const uint64_t st = 5000 + (uint64_t)_i * 10;
    save_codes("fq.npy", fc->k, fc->n, 0, 15, st);
    save_codes("fs.npy", fc->k / g, fc->n, fc->s_lo, fc->s_hi, st + 1);
    char extra[1200] = "";
    size_t e = 0;
    if (nv) {
        save_values("fs2.npy", QV_DT_F4, 1, 0.375f, st + 2);
        e += (size_t)snprintf(extra + e, sizeof extra - e, " --scales2 '%s/fs2.npy'", g_tmp);
    }
    if (fc->bias) {
        save_values("fb.npy", fc->bias, fc->n, 0.0f, st + 3);
        e += (size_t)snprintf(extra + e, sizeof extra - e, " --bias '%s/fb.npy'", g_tmp);
    }
    char dir[600], out[600], path[700];
    snprintf(dir, sizeof dir, "%s/fp4-%d", g_tmp, _i);
    snprintf(out, sizeof out, "%s/fp4-%d-out", g_tmp, _i);
    expect_qvet(0, "pack %s --q '%s/fq.npy' --scales '%s/fs.npy'%s --a %s -o '%s'", fc->layout, g_tmp, g_tmp, extra,
                fc->a, dir);
    /* B is (K/16, 2N) int32: 8 nibbles per word, 16 N of them per tiled row. */
    snprintf(path, sizeof path, "%s/B.npy", dir);
    qv_array b;
    ck_assert(qv_npy_load(path, &b) == QV_OK);
    ck_assert(b.dtype == QV_DT_I4 && b.ndim == 2 && b.shape[0] == fc->k / 16 && b.shape[1] == 2 * fc->n);
    qv_array_destroy(&b);
    snprintf(path, sizeof path, "%s/scale_pow2.npy", dir);
    if (nv) {
        qv_array pw;
        ck_assert(qv_npy_load(path, &pw) == QV_OK);
        ck_assert_int_eq(((int32_t *)pw.data)[0], fc->pow2);
        qv_array_destroy(&pw);
        /* The global scale the kernel reads: 0.375 * 2^(14 or 126 - pow2). */
        snprintf(path, sizeof path, "%s/scales2.npy", dir);
        qv_array g2;
        ck_assert(qv_npy_load(path, &g2) == QV_OK);
        int bias = !strcmp(fc->a, "bf16") ? 126 : 14;
        ck_assert_msg(((float *)g2.data)[0] == (float)ldexp(0.375, bias - fc->pow2), "global %g",
                      (double)((float *)g2.data)[0]);
        qv_array_destroy(&g2);
    } else {
        ck_assert_msg(!exists(path), "marlin-fp4-mx wrote scale_pow2.npy");
    }
    expect_qvet(0, "unpack %s '%s' -o '%s' --a %s", fc->layout, dir, out, fc->a);
    same_npy(out, "q", g_tmp, "fq");
    same_npy(out, "scales", g_tmp, "fs");
    if (nv) same_npy(out, "scales2", g_tmp, "fs2");
    if (fc->bias) same_npy(out, "bias", g_tmp, "fb");
}
END_TEST

/* FP4 misuse: exit 2 with a message, and no output left behind. */
START_TEST(fp4_refusals_cli)
{
    const char *t = g_tmp;
    save_codes("gq.npy", 64, 64, 0, 15, 6000);
    save_codes("gs16.npy", 4, 64, 0x10, 0x40, 6001);
    save_codes("gs32.npy", 2, 64, 100, 140, 6002);
    save_codes("gsnan.npy", 4, 64, 0x7F, 0x7F, 6003);
    save_codes("gs0.npy", 2, 64, 0, 0, 6004);
    save_codes("gstiny.npy", 4, 64, 1, 6, 6005);
    save_values("gg.npy", QV_DT_F4, 1, 1.0f, 6006);
    save_values("gb.npy", QV_DT_F2, 64, 0.0f, 6007);
    static const char *const bad[] = {
        "pack marlin-fp4-nv --q '%1$s/gq.npy' --scales '%1$s/gs16.npy' --scales2 '%1$s/gg.npy' -o '%1$s/fbad'",
        "pack marlin-fp4-nv --q '%1$s/gq.npy' --scales '%1$s/gs16.npy' --scales2 '%1$s/gg.npy' --a e4m3 -o '%1$s/fbad'",
        "pack marlin-fp4-nv --q '%1$s/gq.npy' --scales '%1$s/gs16.npy' --a f16 -o '%1$s/fbad'",
        "pack marlin-fp4-nv --q '%1$s/gq.npy' --scales '%1$s/gsnan.npy' --scales2 '%1$s/gg.npy' --a f16 -o '%1$s/fbad'",
        "pack marlin-fp4-nv --q '%1$s/gq.npy' --scales '%1$s/gs32.npy' --scales2 '%1$s/gg.npy' --a f16 -o '%1$s/fbad'",
        "pack marlin-fp4-mx --q '%1$s/gq.npy' --scales '%1$s/gs0.npy' -o '%1$s/fbad'",
        "pack marlin-fp4-mx --q '%1$s/gq.npy' --scales '%1$s/gs32.npy' --scales2 '%1$s/gg.npy' -o '%1$s/fbad'",
        "pack marlin-fp4-mx --q '%1$s/gq.npy' --scales '%1$s/gs32.npy' --zeros '%1$s/gs32.npy' -o '%1$s/fbad'",
        "pack marlin-fp4-mx --q '%1$s/gq.npy' --scales '%1$s/gs32.npy' --bias '%1$s/gq.npy' -o '%1$s/fbad'",
        "pack marlin-w4 --q '%1$s/gq.npy' --scales '%1$s/gb.npy' --bias '%1$s/gb.npy' -o '%1$s/fbad'",
        "unpack marlin-fp4-nv '%1$s/fgood' -o '%1$s/fbad'",
        "unpack marlin-fp4-nv '%1$s/fgood' --a f16 --wfmt e2m1 -o '%1$s/fbad'",
        "unpack marlin-fp4-mx '%1$s/fgood' -o '%1$s/fbad'",
        "unpack marlin-w4 '%1$s/fgood' --a f16 -o '%1$s/fbad'",
    };
    /* A good NV folder for the unpack misuses above. */
    expect_qvet(0, "pack marlin-fp4-nv --q '%s/gq.npy' --scales '%s/gs16.npy' --scales2 '%s/gg.npy' --a f16 -o '%s/fgood'",
                t, t, t, t);
    char args[4096], path[600];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, bad[i], t);
        int rc = run_qvet(args);
        ck_assert_msg(rc == 2, "qvet %s exited %d, expected 2", args, rc);
        ck_assert_msg(log_size() > 0, "qvet %s: refused without a message", args);
        snprintf(path, sizeof path, "%s/fbad/B.npy", t);
        ck_assert_msg(!exists(path), "qvet %s left %s behind", args, path);
        snprintf(path, sizeof path, "%s/fbad/q.npy", t);
        ck_assert_msg(!exists(path), "qvet %s left %s behind", args, path);
    }
    /* Scales below 2^-6 packed for f16 (no lift) and read as bf16: the bf16
     * kernel would read those bytes as 2^-112 times their value (the class
     * of vLLM #34577): refused, with the reason. */
    expect_qvet(0, "pack marlin-fp4-nv --q '%s/gq.npy' --scales '%s/gstiny.npy' --scales2 '%s/gg.npy' --a f16 -o '%s/ftiny'",
                t, t, t, t);
    expect_qvet(2, "unpack marlin-fp4-nv '%s/ftiny' --a bf16 -o '%s/fbad'", t, t);
    snprintf(path, sizeof path, "%s/out.log", t);
    size_t len;
    unsigned char *log = read_all(path, &len);
    ck_assert(log != NULL);
    ck_assert_msg(strstr((char *)log, "top bit clear") != NULL, "message: %s", (char *)log);
    free(log);
    snprintf(path, sizeof path, "%s/fbad/q.npy", t);
    ck_assert(!exists(path));
    expect_qvet(0, "unpack marlin-fp4-nv '%s/ftiny' --a f16 -o '%s/ftiny-out'", t, t);
    char o[600];
    snprintf(o, sizeof o, "%s/ftiny-out", t);
    same_npy(o, "scales", t, "gstiny");
    /* Without scale_pow2.npy the bytes cannot be read. */
    snprintf(args, sizeof args, "rm '%s/ftiny/scale_pow2.npy'", t);
    ck_assert_int_eq(system(args), 0);
    expect_qvet(2, "unpack marlin-fp4-nv '%s/ftiny' --a f16 -o '%s/fbad'", t, t);
}
END_TEST

/* ---- refusals: exit 2, a message, and no packed file -------------------- */

typedef struct bad_cli {
    const char *what;
    const char *args; /* %1$s is the temporary folder, %2$s the golden root */
} bad_cli;

static const bad_cli bad_clis[] = {
    {"no arguments", "pack"},
    {"unknown layout", "pack marlin-w3 --q '%2$s/marlin_w4a16_k128_n256_g-1/q_logical_kxn_uint4.npy' -o '%1$s/bad'"},
    {"unknown option", "pack marlin-w4 --q '%1$s/q8.npy' --frobnicate -o '%1$s/bad'"},
    {"option without a value", "pack marlin-w4 --q"},
    {"missing -o", "pack marlin-w4 --q '%1$s/q8.npy' --scales '%1$s/s64.npy'"},
    {"missing file", "pack marlin-w4 --q '%1$s/nonexistent.npy' --scales '%1$s/s64.npy' -o '%1$s/bad'"},
    {"not a .npy file", "pack marlin-w4 --q '%1$s/garbage.npy' --scales '%1$s/s64.npy' -o '%1$s/bad'"},
    {"missing scales", "pack marlin-w4 --q '%1$s/q64.npy' -o '%1$s/bad'"},
    {"K=8 not a multiple of 16", "pack marlin-w4 --q '%1$s/q8.npy' --scales '%1$s/s64.npy' -o '%1$s/bad'"},
    {"N=32 not a multiple of 64", "pack marlin-w4 --q '%1$s/q32n.npy' --scales '%1$s/s32.npy' -o '%1$s/bad'"},
    {"q out of range for int4", "pack qqq-w4-channel --q '%2$s/qqq_w4a8_k256_n256_g128/q_logical_kxn_uint4.npy' "
                                "--scales '%2$s/qqq_w4a8_k256_n256_g128/s_channel_logical_1xn_f32.npy' -o '%1$s/bad'"},
    {"scales of the wrong dtype", "pack qqq-w4-channel --q '%2$s/qqq_w4a8_k128_n256_g-1/q_logical_kxn_int4.npy' "
                                  "--scales '%2$s/marlin_w4a16_k128_n256_g-1/scales_logical_gxn_f16.npy' -o '%1$s/bad'"},
    {"q of the wrong dtype", "pack marlin-w4 --q '%2$s/marlin_w4a16_k128_n256_g-1/scales_logical_gxn_f16.npy' "
                             "--scales '%2$s/marlin_w4a16_k128_n256_g-1/scales_logical_gxn_f16.npy' -o '%1$s/bad'"},
    {"scales N disagrees with q", "pack marlin-w4 --q '%1$s/q64.npy' "
                                  "--scales '%2$s/marlin_w4a16_k128_n256_g-1/scales_logical_gxn_f16.npy' -o '%1$s/bad'"},
    {"--g disagrees with the scales", "pack marlin-w4 --q '%2$s/marlin_w4a16_k256_n256_g128/q_logical_kxn_uint4.npy' "
                                      "--scales '%2$s/marlin_w4a16_k256_n256_g128/scales_logical_gxn_f16.npy' --g 64 "
                                      "-o '%1$s/bad'"},
    {"--g not a number", "pack marlin-w4 --q '%1$s/q64.npy' --scales '%1$s/s64.npy' --g many -o '%1$s/bad'"},
    {"scales2 on a layout without them", "pack marlin-w4 --q '%1$s/q64.npy' --scales '%1$s/s64.npy' "
                                         "--scales2 '%1$s/s64.npy' -o '%1$s/bad'"},
    {"unpack without arguments", "unpack"},
    {"unpack a missing folder", "unpack marlin-w4 '%1$s/nonexistent' -o '%1$s/bad'"},
    {"unpack without -o", "unpack marlin-w4 '%1$s/nonexistent'"},
    {"unpack plain-nk without --wfmt", "unpack plain-nk '%1$s/nonexistent' -o '%1$s/bad'"},
    {"unpack an unknown layout", "unpack marlin-w3 '%1$s/nonexistent' -o '%1$s/bad'"},
};

START_TEST(refusals_cli)
{
    const bad_cli *bc = &bad_clis[_i];
    save_arr("q8.npy", QV_DT_U1, 2, 8, 64, 1, 16);
    save_arr("q64.npy", QV_DT_U1, 2, 64, 64, 2, 16);
    save_arr("q32n.npy", QV_DT_U1, 2, 64, 32, 3, 16);
    save_arr("s64.npy", QV_DT_F2, 2, 1, 64, 4, 0);
    save_arr("s32.npy", QV_DT_F2, 2, 1, 32, 5, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/garbage.npy", g_tmp);
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    fputs("\x93NUMPY\x01\x00garbage", f);
    fclose(f);
    char args[8192];
    snprintf(args, sizeof args, bc->args, g_tmp, golden_root());
    int rc = run_qvet(args);
    ck_assert_msg(rc == 2, "%s: qvet %s exited %d, expected 2", bc->what, args, rc);
    ck_assert_msg(log_size() > 0, "%s: refused without a message", bc->what);
    snprintf(path, sizeof path, "%s/bad/B.npy", g_tmp);
    ck_assert_msg(!exists(path), "%s: a refusal left %s behind", bc->what, path);
}
END_TEST

START_TEST(help_exits_zero)
{
    ck_assert_int_eq(run_qvet("pack --help"), 0);
    ck_assert(log_size() > 100);
    ck_assert_int_eq(run_qvet("unpack --help"), 0);
    ck_assert(log_size() > 100);
}
END_TEST

static Suite *pack_cli_suite(void)
{
    TCase *tc;
    Suite *s = suite_single("pack_cli", "pack_cli", 60, &tc);
    tcase_add_loop_test(tc, golden_cli, 0, (int)(sizeof goldens / sizeof goldens[0]));
    tcase_add_loop_test(tc, roundtrip_cli, 0, (int)(sizeof rts / sizeof rts[0]));
    tcase_add_loop_test(tc, refusals_cli, 0, (int)(sizeof bad_clis / sizeof bad_clis[0]));
    tcase_add_test(tc, checkpoint_cli);
    tcase_add_loop_test(tc, fp4_roundtrip_cli, 0, (int)(sizeof fp4s / sizeof fp4s[0]));
    tcase_add_test(tc, fp4_refusals_cli);
    tcase_add_test(tc, help_exits_zero);
    return s;
}

int main(void)
{
    g_seed = case_seed(g_seed);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/qvet_pack_cli.XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    printf("t_pack_cli: seed %" PRIu64 " (replay with QVET_SEED=%" PRIu64 "), qvet = %s, work folder %s\n", g_seed,
           g_seed, qvet_path(), g_tmp);
    if (access(qvet_path(), X_OK) != 0)
        printf("t_pack_cli: %s is not executable; every test will fail\n", qvet_path());
    const int status = suite_run(pack_cli_suite());
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "t_pack_cli: could not remove %s\n", g_tmp);
    return status;
}
