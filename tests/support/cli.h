/* cli.h: finding the `qvet` binary a suite drives, and the check of a usage
 * message. Included by the suites that run qvet as a user does (t_cli,
 * t_bench_cli, t_pack_cli, t_moe_cli, t_launch_opts, t_third_party); linked
 * into every test binary from tests/support/.
 * Rule: every failure is a Check assertion; exit codes are compared, never
 * interpreted here. */
#ifndef QVET_TEST_CLI_H
#define QVET_TEST_CLI_H

#include <stddef.h>

#include "support/run.h"

/* The qvet binary: $QVET_BIN when set and not empty, else ../qvet beside the
 * running test (BUILD/qvet for BUILD/tests/t_*), else build/qvet when the
 * test's own path cannot be read. Worked out once; the string is static. */
const char *qvet_path(void);

/* Runs qvet with args (NULL-terminated, without argv[0]). */
run_result qvet_run(const char *const *args);

/* Runs qvet with args and asserts exit code `rc`, that every string of
 * `needles` (NULL-terminated) stands in the stream that speaks (stdout when rc
 * is 0, else stderr), and that the other stream is empty. */
void qvet_expect(const char *const *args, int rc, const char *const *needles);

/* The last line of `file` that is not a comment (a command qvet wrote, as in
 * a dump's replay.txt), copied into line and split there into words as a
 * shell would split such commands: spaces between words, single quotes
 * around a spec. Asserts that words[0] is "qvet"; returns the word count,
 * words NULL-terminated (at most max - 1 words). */
int qvet_command_words(const char *file, char *line, size_t len, const char **words, int max);

/* The first failure dump a campaign printed in `out` ("inputs in DIR/"),
 * asserted to lie under `under`: the `qvet verify` command of its
 * replay.txt, split as qvet_command_words does. */
int qvet_dump_verify_words(const char *out, const char *under, char *line, size_t len, const char **words, int max);

/* Runs the first "replay: qvet replay ..." command that a campaign printed
 * in `out` (split as qvet_command_words does) and asserts that it names
 * `option` (e.g. "--plugin"), exits `rc` and prints `needle`. */
void qvet_replay_expect(const char *out, const char *option, int rc, const char *needle);

#endif
