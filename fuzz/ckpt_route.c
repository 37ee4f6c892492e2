/* ckpt_route.c: GPTQ and AWQ checkpoints of a case's uint4 weights, written
 * here and read back by the project's readers (ckpt_route.h). */
#include <stdlib.h>
#include <string.h>

#include "ckpt_route.h"
#include "internal/campaign.h"
#include "qvet/layout.h"

/* AWQ's order along N: nibble i of a word holds column 8c + awq_order[i]. */
static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static const char *const format_names[] = {
    [QV_CKPT_NONE] = "none", [QV_CKPT_GPTQ] = "gptq", [QV_CKPT_GPTQ_V1] = "gptq-v1",
    [QV_CKPT_GPTQ_V2] = "gptq-v2", [QV_CKPT_AWQ] = "awq",
};

const char *qv_ckpt_format_name(qv_ckpt_format f)
{
    return (f >= QV_CKPT_NONE && f <= QV_CKPT_AWQ) ? format_names[f] : "?";
}

/* The group size a checkpoint stores: g, or K for one group (channelwise). */
static int64_t ckpt_group(const qv_problem *p) { return p->g > 0 ? p->g : p->k; }

qv_ckpt_format qv_ckpt_choose(const qv_problem *p)
{
    /* A spec's kernel reads the logical arrays (plugin.h): no checkpoint stands
     * between them, whatever its weight codes. */
    if (p->v->layout == QV_LAYOUT_LOGICAL) return QV_CKPT_NONE;
    /* 8 codes per int32 along K (GPTQ qweight) and along N (qzeros, AWQ). */
    if (p->v->wfmt != QV_FMT_U4 || p->k % 8 || p->n % 8 || p->k % ckpt_group(p)) return QV_CKPT_NONE;
    if (!p->zeros) return QV_CKPT_GPTQ;
    int64_t nz = p->k / ckpt_group(p) * p->n;
    int all_positive = 1;
    for (int64_t i = 0; i < nz && all_positive; i++) all_positive = p->zeros[i] >= 1;
    if (all_positive) return QV_CKPT_GPTQ_V1;
    /* The top bit of the codes' hash, mixed (FNV-1a's low bits barely move on
     * periodic codes), picks the reader. */
    uint64_t h = qv_fnv1a64(p->q, (size_t)(p->k * p->n));
    return qv_splitmix64(&h) >> 63 ? QV_CKPT_AWQ : QV_CKPT_GPTQ_V2;
}

/* Sets nibble i of *word to code (0..15), on the unsigned bit pattern. */
static void put_nibble(int32_t *word, int i, uint32_t code)
{
    uint32_t w;
    memcpy(&w, word, sizeof w);
    w |= (code & 0xFu) << (4 * i);
    memcpy(word, &w, sizeof w);
}

void qv_ckpt_write_gptq_qweight(const uint8_t *q, int64_t k, int64_t n, int32_t *qweight)
{
    memset(qweight, 0, sizeof *qweight * (size_t)(k / 8 * n));
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) put_nibble(&qweight[kk / 8 * n + j], (int)(kk % 8), q[kk * n + j]);
}

void qv_ckpt_write_along_n(const uint8_t *codes, int64_t rows, int64_t n, int awq, int minus_one, int32_t *words)
{
    memset(words, 0, sizeof *words * (size_t)(rows * (n / 8)));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n / 8; c++)
            for (int i = 0; i < 8; i++) {
                uint32_t code = codes[r * n + 8 * c + (awq ? awq_order[i] : i)];
                put_nibble(&words[r * (n / 8) + c], i, minus_one ? code - 1 : code);
            }
}

qv_status qv_ckpt_route(const qv_problem *p, qv_ckpt_format f, qv_problem *d)
{
    QV_ASSERT(f != QV_CKPT_NONE && f == qv_ckpt_choose(p), "qv_ckpt_route takes the format qv_ckpt_choose picked");
    int64_t n = p->n, k = p->k, g = ckpt_group(p), groups = k / g;
    QV_TRY(qv_problem_clone(d, p));
    int awq = f == QV_CKPT_AWQ;
    size_t qw_words = (size_t)(k * n / 8), qz_words = p->zeros ? (size_t)(groups * n / 8) : 0;
    int32_t *qweight = malloc(sizeof *qweight * qw_words);
    int32_t *qzeros = qz_words ? malloc(sizeof *qzeros * qz_words) : NULL;
    if (!qweight || (qz_words && !qzeros)) {
        free(qweight);
        free(qzeros);
        qv_problem_destroy(d);
        return qv_fail(QV_ERR_NOMEM, "checkpoint of %lld x %lld codes", (long long)k, (long long)n);
    }
    if (awq) qv_ckpt_write_along_n(p->q, k, n, 1, 0, qweight);
    else qv_ckpt_write_gptq_qweight(p->q, k, n, qweight);
    if (qzeros) qv_ckpt_write_along_n(p->zeros, groups, n, awq, f == QV_CKPT_GPTQ_V1, qzeros);
    /* The copies' codes are overwritten with what the reader returns. */
    memset(d->q, 0xFF, (size_t)(k * n));
    if (d->zeros) memset(d->zeros, 0xFF, (size_t)(groups * n));
    qv_status st = awq ? qv_awq_unpack(qweight, qzeros, k, n, (int)g, d->q, d->zeros)
                       : qv_gptq_unpack(qweight, qzeros, k, n, (int)g, f == QV_CKPT_GPTQ_V1, d->q, d->zeros);
    free(qweight);
    free(qzeros);
    if (st != QV_OK) qv_problem_destroy(d);
    return st;
}
