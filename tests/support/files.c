/* files.c: temporary folders and file comparison for Check tests (files.h). */
#include "files.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qvet/array.h"

void tmpdir_create(char *buf, size_t cap, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, cap, "%s/qvet-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    ck_assert_msg(mkdtemp(buf) != NULL, "cannot create a temporary folder %s", buf);
}

void tmpdir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0) tmpdir_remove(p); /* a folder (a failure dump's) */
        }
    closedir(d);
    rmdir(dir);
}

void assert_same_bytes(const char *a, const char *b)
{
    void *x, *y;
    size_t nx, ny;
    ck_assert_msg(qv_file_read(a, &x, &nx) == QV_OK, "%s", qv_errmsg());
    ck_assert_msg(qv_file_read(b, &y, &ny) == QV_OK, "%s", qv_errmsg());
    ck_assert_msg(nx == ny, "%s has %zu bytes, %s has %zu", a, nx, b, ny);
    size_t i = 0;
    while (i < nx && ((unsigned char *)x)[i] == ((unsigned char *)y)[i]) i++;
    ck_assert_msg(i == nx, "%s and %s first differ at byte %zu", a, b, i);
    free(x);
    free(y);
}
