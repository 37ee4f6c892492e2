/* run.c: run a program and capture its output, for Check tests (run.h). */
#include "run.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* The whole content of an unlinked temporary file, then closes it. */
static char *slurp_fd(int fd)
{
    off_t len = lseek(fd, 0, SEEK_END);
    ck_assert_int_ge(len, 0);
    char *b = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(pread(fd, b, (size_t)len, 0), len);
    b[len] = '\0';
    close(fd);
    return b;
}

run_result run_program(const char *bin, const char *const *args)
{
    ck_assert_msg(access(bin, X_OK) == 0, "%s not found: build it with make", bin);
    const char *tmp = getenv("TMPDIR");
    char op[512], ep[512];
    snprintf(op, sizeof op, "%s/qvet-test-out-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    snprintf(ep, sizeof ep, "%s/qvet-test-err-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int ofd = mkstemp(op), efd = mkstemp(ep);
    ck_assert(ofd >= 0 && efd >= 0);
    unlink(op);
    unlink(ep);
    const char *argv[64] = {bin};
    int argc = 1;
    while (args[argc - 1]) {
        ck_assert_int_lt(argc, 63);
        argv[argc] = args[argc - 1];
        argc++;
    }
    argv[argc] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        if (in < 0 || dup2(in, 0) < 0 || dup2(ofd, 1) < 0 || dup2(efd, 2) < 0) _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    run_result r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp_fd(ofd);
    r.err = slurp_fd(efd);
    return r;
}

void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}
