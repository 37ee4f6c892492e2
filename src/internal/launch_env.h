/* launch_env.h: the QVET_* environment variables that choose kernel paths,
 * read into a qv_launch_opts (gemm.h) in one place, for the layers above the
 * libraries: the `qvet` subcommands that launch kernels (check, fuzz, replay,
 * ppl, bench) and the test harness (tests/support). Included by those.
 * Rule: the libraries never read the environment; here every variable takes
 * exactly the values docs/launch-options.md lists and anything else (an
 * empty value included) is a QV_ERR_USAGE status naming the variable and
 * what it accepts. */
#ifndef QVET_LAUNCH_ENV_H
#define QVET_LAUNCH_ENV_H

#include "qvet/gemm.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One variable: its name, the qv_launch_opts field it sets, the values it
 * accepts and what it steers (the message of a refusal names all three). */
typedef struct qv_launch_env_var {
    const char *name;     /* "QVET_WO_WG_MIN_M" */
    const char *field;    /* "wo_wg_min_m" (the trace variables: "trace") */
    const char *accepted; /* "a whole number from 1 to 2147483647, or \"off\"" */
    const char *steers;   /* "the smallest M of the weight-only wgmma kernel" */
} qv_launch_env_var;

/* The variables, in the order of docs/launch-options.md; *count of them. */
const qv_launch_env_var *qv_launch_env_vars(int *count);

/* A variable's value by name, NULL when it is not set; ctx is the caller's. */
typedef const char *(*qv_env_get_fn)(const char *name, void *ctx);

/* Reads every variable through get into *out, zeroed first (an unset
 * variable leaves its field unset: the tuned default). The first value a
 * variable does not accept returns QV_ERR_USAGE with a message that names
 * the variable, the value, what it accepts and what it steers; *out is then
 * all unset. */
qv_status qv_launch_env_parse(qv_env_get_fn get, void *ctx, qv_launch_opts *out);

/* qv_launch_env_parse over the process environment (getenv). */
qv_status qv_launch_env_read(qv_launch_opts *out);

/* For a subcommand: qv_launch_env_read into *out, and on a refusal prints
 * "qvet CMD: MESSAGE" on stderr and returns 2 (cli.h's usage exit); 0 when
 * every variable was accepted. */
int qv_cli_launch_env(const char *cmd, qv_launch_opts *out);

/* Every field `over` sets (non-zero) replaces base's; the others stay; the
 * trace bits of both are kept. */
void qv_launch_opts_overlay(qv_launch_opts *base, const qv_launch_opts *over);

#ifdef __cplusplus
}
#endif
#endif
