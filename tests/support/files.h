/* files.h: temporary folders and byte-for-byte file comparison for Check
 * tests. Included by the suites that write and compare files (t_npy,
 * t_safetensors, t_pack_cli, t_moe_cli); linked into every test binary from
 * tests/support/. Rule: every failure is a Check assertion naming the files. */
#ifndef QVET_TEST_FILES_H
#define QVET_TEST_FILES_H

#include <stddef.h>

/* Creates a fresh folder named after `tag` under $TMPDIR (or /tmp) into buf. */
void tmpdir_create(char *buf, size_t cap, const char *tag);
/* Removes dir with the files and folders in it. */
void tmpdir_remove(const char *dir);
/* Asserts that the files at a and b hold identical bytes; names the first difference. */
void assert_same_bytes(const char *a, const char *b);

#endif
