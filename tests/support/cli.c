/* cli.c: cli.h. */
#include "support/cli.h"

#include <check.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* PATH_MAX on Linux: room for any path readlink can return. */
#define PATH_CAP 4096

const char *qvet_path(void)
{
    static char bin[PATH_CAP];
    if (bin[0]) return bin;
    const char *env = getenv("QVET_BIN");
    if (env && *env) {
        snprintf(bin, sizeof bin, "%s", env);
        return bin;
    }
    char self[PATH_CAP];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(bin, sizeof bin, "build/qvet");
        return bin;
    }
    self[n] = '\0';
    snprintf(bin, sizeof bin, "%s/../qvet", dirname(self));
    return bin;
}

run_result qvet_run(const char *const *args) { return run_program(qvet_path(), args); }

void qvet_expect(const char *const *args, int rc, const char *const *needles)
{
    run_result r = qvet_run(args);
    ck_assert_msg(r.rc == rc, "qvet %s: exit %d, expected %d (stderr: %s)", args[0] ? args[0] : "", r.rc, rc, r.err);
    const char *speaks = rc == 0 ? r.out : r.err, *quiet = rc == 0 ? r.err : r.out;
    for (const char *const *w = needles; *w; w++)
        ck_assert_msg(strstr(speaks, *w) != NULL, "qvet %s: '%s' missing from: %s", args[0] ? args[0] : "", *w, speaks);
    ck_assert_str_eq(quiet, "");
    run_free(&r);
}

/* Splits line in place into words as qvet_command_words says; words[0]
 * must be "qvet". */
static int split_words(char *line, const char **words, int max)
{
    int n = 0;
    for (char *c = line; *c && n < max - 1;) {
        while (*c == ' ') c++;
        if (!*c) break;
        char *end;
        if (*c == '\'') {
            words[n++] = ++c;
            end = strchr(c, '\'');
        } else {
            words[n++] = c;
            end = strchr(c, ' ');
        }
        if (!end) break;
        *end = 0;
        c = end + 1;
    }
    words[n] = NULL;
    ck_assert_msg(n > 0 && !strcmp(words[0], "qvet"), "not a qvet command: %s", line);
    return n;
}

int qvet_command_words(const char *file, char *line, size_t len, const char **words, int max)
{
    FILE *f = fopen(file, "r");
    ck_assert_msg(f != NULL, "%s is missing", file);
    char buf[8192];
    line[0] = 0;
    while (fgets(buf, sizeof buf, f))
        if (buf[0] != '#' && buf[0] != '\n') snprintf(line, len, "%s", buf);
    fclose(f);
    line[strcspn(line, "\n")] = 0;
    return split_words(line, words, max);
}

int qvet_dump_verify_words(const char *out, const char *under, char *line, size_t len, const char **words, int max)
{
    const char *in = strstr(out, "inputs in ");
    ck_assert_msg(in != NULL, "no dumped inputs in: %s", out);
    in += strlen("inputs in ");
    const char *end = strstr(in, "/\n");
    ck_assert_msg(end != NULL, "%s", in);
    char file[4200];
    snprintf(file, sizeof file, "%.*s", (int)(end - in), in);
    ck_assert_msg(strncmp(file, under, strlen(under)) == 0, "%s is not under %s", file, under);
    snprintf(file + (end - in), sizeof file - (size_t)(end - in), "/replay.txt");
    const int n = qvet_command_words(file, line, len, words, max);
    ck_assert_str_eq(words[1], "verify");
    return n;
}

static int qvet_replay_words(const char *out, char *line, size_t len, const char **words, int max)
{
    const char *rp = strstr(out, "replay: qvet replay ");
    ck_assert_msg(rp != NULL, "no replay command in: %s", out);
    rp += strlen("replay: ");
    snprintf(line, len, "%.*s", (int)strcspn(rp, "\n"), rp);
    return split_words(line, words, max);
}

void qvet_replay_expect(const char *out, const char *option, int rc, const char *needle)
{
    char line[8192];
    const char *words[64];
    const int n = qvet_replay_words(out, line, sizeof line, words, 64);
    int has = 0;
    for (int i = 1; i < n; i++) has |= !strcmp(words[i], option);
    ck_assert_msg(has, "the replay command '%s' lacks %s", line, option);
    run_result r = qvet_run(words + 1);
    ck_assert_msg(r.rc == rc && strstr(r.out, needle), "replay: exit %d (expected %d), '%s' in: %s%s", r.rc, rc,
                  needle, r.out, r.err);
    run_free(&r);
}
