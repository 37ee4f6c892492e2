/* ckpt_route.h: the checkpoint route of the campaign (fuzz/ckpt_route.c).
 * Private to fuzz/ and its tests. Rule: a backend's uint4 weights come from a
 * GPTQ or AWQ checkpoint written from the case's logical codes and read back
 * by the project's readers (src/checkpoint.c), as in a real deployment; the
 * truth is still computed from the logical codes, so a reader bug reaches the
 * verdict exactly like a packer or kernel bug. */
#ifndef QVET_FUZZ_CKPT_ROUTE_H
#define QVET_FUZZ_CKPT_ROUTE_H

#include <stdint.h>

#include "qvet/problem.h"
#include "qvet/status.h"

typedef enum qv_ckpt_format {
    QV_CKPT_NONE = 0, /* not a uint4 row, or a shape no checkpoint stores: used as is */
    QV_CKPT_GPTQ,     /* GPTQ qweight, no qzeros (symmetric rows: the zero 8 is implicit) */
    QV_CKPT_GPTQ_V1,  /* GPTQ qweight and qzeros storing z - 1 */
    QV_CKPT_GPTQ_V2,  /* GPTQ qweight and qzeros storing z */
    QV_CKPT_AWQ       /* AWQ qweight and qzeros, packed along N in AWQ's order */
} qv_ckpt_format;

/* "none", "gptq", "gptq-v1", "gptq-v2", "awq". */
const char *qv_ckpt_format_name(qv_ckpt_format f);

/* The format p's weights are read from: none unless p's variant is a registry
 * row (not a spec) whose weights are uint4 codes and N, K (and g) fit the packing. Rows without zero points:
 * GPTQ. With zero points: GPTQ v1 when every zero point is >= 1 (v1 cannot
 * store z = 0), otherwise GPTQ v2 or AWQ by a hash of the codes, so both
 * readers see cases of every probe. A pure function of p. */
qv_ckpt_format qv_ckpt_choose(const qv_problem *p);

/* Writers, independent of the readers (bit by bit from the format's
 * definition). q: (k, n) uint8 codes 0..15, row-major; z: (k/g, n) uint8
 * codes 0..15 (GPTQ v1 needs 1..16 and stores z - 1). Outputs, int32 words,
 * nibble i = bits 4i..4i+3: GPTQ qweight (k/8, n), codes 8r..8r+7 of column j
 * in word (r, j); GPTQ qzeros (k/g, n/8) and AWQ qweight (k, n/8) / qzeros
 * (k/g, n/8): column 8c + order[i] in nibble i of word (r, c), order being
 * 0..7 for GPTQ and [0,2,4,6,1,3,5,7] for AWQ. */
void qv_ckpt_write_gptq_qweight(const uint8_t *q, int64_t k, int64_t n, int32_t *qweight);
void qv_ckpt_write_along_n(const uint8_t *codes, int64_t rows, int64_t n, int awq_order, int minus_one,
                           int32_t *words);

/* Writes p's codes (and zero points) in format f, reads them back through
 * qv_gptq_unpack / qv_awq_unpack into *d, a deep copy of p. A reader's refusal
 * is returned as its status. f must be what qv_ckpt_choose(p) returned and not
 * QV_CKPT_NONE; on success the caller destroys *d. */
qv_status qv_ckpt_route(const qv_problem *p, qv_ckpt_format f, qv_problem *d);

#endif
