/* verify_io.h: how `qvet verify` reads a declared operand from a .npy file
 * (src/cmd_verify.c), shared with the routed form (src/cmd_verify_moe.c).
 * Rule: every array is checked against what the spec declares of it (dtype,
 * shape, code range) and refused with the option, the file and the reason;
 * nothing is converted silently. */
#ifndef QVET_VERIFY_IO_H
#define QVET_VERIFY_IO_H

#include <stdint.h>
#include <stdio.h>

#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/result.h"
#include "qvet/status.h"
#include "qvet/variant.h"

/* One array operand: its option, what the spec declares of it (for messages:
 * "w=u4b8") and the format of its elements. */
typedef struct vio_operand {
    const char *opt;    /* "--q" */
    char label[64];     /* "w=u4b8", "wz=int (codes of w=u4)", ... */
    qv_fmt fmt;
} vio_operand;

vio_operand vio_operand_of(const char *opt, qv_fmt fmt, const char *fmt_label, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
const char *vio_fname(qv_fmt f);
/* The weight codes as the spec spells them (u4 for a row's u4b8 with zero points). */
const char *vio_w_name(const qv_variant *v);
/* Does dtype dt hold codes of format f (bf16 as '<u2', one-byte codes as u1/i1, ...)? */
int vio_dtype_fits(qv_fmt f, qv_dtype dt);
/* What a file of format f holds, for messages. */
const char *vio_dtype_wanted(qv_fmt f);
/* The codes a one-byte format allows, lo..hi; 0 when every byte is a code. */
int vio_code_range(qv_fmt f, int *lo, int *hi);
/* a is exactly (rows, cols), or for a vector (len), (1, len) or (len, 1). */
qv_status vio_check_shape(const vio_operand *op, const char *path, const qv_array *a, int64_t rows, int64_t cols);
/* Loads path, checking its dtype against op's format. */
qv_status vio_load_as(const vio_operand *op, const char *path, qv_array *a);
/* Loads a (rows, cols) array of op's format into dst: codes in their storage
 * (range-checked), or with `decode` their values as float. */
qv_status vio_load_into(const vio_operand *op, const char *path, int64_t rows, int64_t cols, void *dst, int decode);
/* The verdict's lines after the header, as `qvet verify` prints them. */
void vio_print_result(const qv_result *r);
/* One value option of `qvet verify`: its name and where its value goes. */
typedef struct vio_opt {
    const char *name;  /* "--a" */
    const char **slot; /* NULL until given */
} vio_opt;

/* Parses argv[1..argc) against opts[0..n): a value option stores its value,
 * --json sets *json, --help prints usage to stdout, and one word that is not
 * an option goes to *positional. Returns -1 to go on, 0 after --help, 2 after
 * a message (an option given twice or without its value, an unknown option,
 * a second positional word); `form` names the command's form in messages. */
int vio_parse_args(int argc, char **argv, const vio_opt *opts, int n, int *json, const char **positional,
                   const char *form, void (*usage)(FILE *));
/* The activation scales (--a-scale, as=) and zero points (--azp) of m tokens
 * over k into their buffers (NULL when the variant has none), each required
 * when the variant declares it and refused when not. */
qv_status vio_load_act_extras(const qv_variant *v, const char *a_scale, const char *azp, int64_t m, int64_t k,
                              void *a_scale_dst, void *azp_dst);
/* An optional array: required when `has`, refused when not. */
qv_status vio_want(const char *path, int has, const qv_variant *v, const char *opt, const char *what);

#endif
