/* run.h: running a built program from a Check test and capturing what it
 * prints. Included by the suites that drive the `qvet` binary (t_campaign,
 * t_layers, t_plugin, t_verify_cli); linked into every test binary from tests/support/.
 * Rule: any failure to start or wait for the program fails the test through
 * Check's assertions; the program's own exit code is returned, never judged. */
#ifndef QVET_TEST_RUN_H
#define QVET_TEST_RUN_H

typedef struct run_result {
    int rc;    /* exit code, or 128 + signal number */
    char *out; /* stdout, NUL-terminated, owned */
    char *err; /* stderr, NUL-terminated, owned */
} run_result;

/* Runs `bin` with args (NULL-terminated, without argv[0]; at most 62), stdin
 * from /dev/null, and captures stdout and stderr. */
run_result run_program(const char *bin, const char *const *args);
void run_free(run_result *r);

#endif
