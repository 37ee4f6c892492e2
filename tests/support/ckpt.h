/* ckpt.h: the suites' own bit-level packing of GPTQ and AWQ int32 words,
 * written from the format descriptions (GPTQ: eight 4-bit values along K per
 * word; AWQ and every qzeros: eight along N, AWQ in AutoAWQ's order), and
 * independent of the readers under test (qv_gptq_unpack, qv_awq_unpack,
 * `qvet pack --gptq/--awq`). Included by t_layout and t_pack_cli; linked into
 * every test binary from tests/support/. */
#ifndef QVET_TEST_CKPT_H
#define QVET_TEST_CKPT_H

#include <stdint.h>

/* AutoAWQ's pack order: nibble i of a word holds column 8c + ckpt_awq_order[i]. */
extern const int ckpt_awq_order[8];

/* ORs the low 4 bits of v into nibble i (bits 4i .. 4i+3) of words[at].
 * words: int32 array, read and written as raw 32-bit words. */
void ckpt_put_nibble(int32_t *words, int64_t at, int i, uint32_t v);

/* GPTQ qweight: x is rows x n uint8 (row-major, values < 16); words is
 * (rows / 8) x n int32 (row-major, zeroed by the caller), word (r / 8, j)
 * nibble r % 8 = x[r][j]. rows is a multiple of 8. */
void ckpt_pack_along_k(const uint8_t *x, int64_t rows, int64_t n, int32_t *words);

/* Eight values along N per word: x is rows x n uint8 (row-major); words is
 * rows x (n / 8) int32 (row-major, zeroed by the caller), word (r, c) nibble i
 * = x[r][8c + order[i]] - minus (order NULL: i itself; minus 1 is GPTQ v1's
 * stored z - 1). n is a multiple of 8. */
void ckpt_pack_along_n(const uint8_t *x, int64_t rows, int64_t n, const int *order, uint32_t minus, int32_t *words);

#endif
