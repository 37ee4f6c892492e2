/* checkpoint.c: GPTQ and AWQ checkpoint tensors into logical form (layout.h).
 * Both store 4-bit codes 8 per int32, lowest nibble first. Every nibble is
 * taken as (word >> 4*i) & 0xF on the unsigned word: without the mask, a word
 * whose top nibble is >= 8 sign-extends (AutoGPTQ #484). */
#include <string.h>

#include "qvet/layout.h"

/* AWQ's nibble order along N: nibble i of a word holds column 8c + awq_order[i]. */
static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

/* Nibble i (0..7, lowest first) of words[at], a packed int32 array. */
static uint32_t nibble(const int32_t *words, int64_t at, int i)
{
    uint32_t w;
    memcpy(&w, words + at, sizeof w); /* the bit pattern, as unsigned */
#ifdef QV_MUTANT_ckpt_nibble_sign_extend
    /* Mutant (class 10, AutoGPTQ #484): the int32 word shifted as signed and
     * not masked, so the higher nibbles (and the sign) stay in the code. */
    return (uint32_t)(words[at] >> (4 * i));
#endif
    return (w >> (4 * i)) & 0xFu;
}

static qv_status check_dims(const char *who, int64_t k, int64_t n, int g, int k_packed)
{
    if (k < 1 || n < 1) return qv_fail(QV_ERR_SHAPE, "%s: K=%lld, N=%lld must be >= 1", who, (long long)k, (long long)n);
    if (k_packed && k % 8)
        return qv_fail(QV_ERR_SHAPE, "%s: K=%lld is not a multiple of 8 (8 codes per int32 along K)", who,
                       (long long)k);
    if (n % 8)
        return qv_fail(QV_ERR_SHAPE, "%s: N=%lld is not a multiple of 8 (8 codes per int32 along N)", who,
                       (long long)n);
    if (g < 1 || k % g)
        return qv_fail(QV_ERR_SHAPE, "%s: group size g=%d does not divide K=%lld", who, g, (long long)k);
    return QV_OK;
}

qv_status qv_gptq_unpack(const int32_t *qweight, const int32_t *qzeros, int64_t k, int64_t n, int g, int v1_zeros,
                         uint8_t *q_out, uint8_t *z_out)
{
    QV_TRY(check_dims("gptq", k, n, g, 1));
    QV_ASSERT(qweight != NULL && q_out != NULL, "qv_gptq_unpack needs qweight and q_out");
    /* qweight (k/8, n): nibble i of word (r, j) is q[8r + i][j]. */
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) q_out[kk * n + j] = (uint8_t)nibble(qweight, kk / 8 * n + j, (int)(kk % 8));
    if (!qzeros) return QV_OK;
    QV_ASSERT(z_out != NULL, "qv_gptq_unpack: qzeros given without z_out");
    /* qzeros (k/g, n/8): nibble i of word (r, c) is the zero of column 8c + i;
     * v1 checkpoints store z - 1, so the stored 15 would mean z = 16. */
    int64_t groups = k / g;
    for (int64_t r = 0; r < groups; r++)
        for (int64_t j = 0; j < n; j++) {
            uint32_t z = nibble(qzeros, r * (n / 8) + j / 8, (int)(j % 8));
#ifdef QV_MUTANT_gptq_v2_zeros_incremented
            /* Mutant (class 9, vLLM #26092 / #38966): every checkpoint read as
             * GPTQ v1, so zeros stored as z get the v1 +1. */
            v1_zeros = 1;
#endif
#ifdef QV_MUTANT_gptq_v1_zeros_not_incremented
            /* Mutant (class 9, vLLM #38966, AutoGPTQ #640): a v1 checkpoint read as
             * v2, its stored z - 1 taken as the zero point. */
            v1_zeros = 0;
#endif
            if (v1_zeros) {
                if (z == 15)
                    return qv_fail(QV_ERR_RANGE,
                                   "gptq v1 qzeros[%lld] column %lld stores 15, i.e. z = 16, outside uint4",
                                   (long long)r, (long long)j);
                z += 1;
            }
            z_out[r * n + j] = (uint8_t)z;
        }
    return QV_OK;
}

qv_status qv_awq_unpack(const int32_t *qweight, const int32_t *qzeros, int64_t k, int64_t n, int g, uint8_t *q_out,
                        uint8_t *z_out)
{
    QV_TRY(check_dims("awq", k, n, g, 0));
    QV_ASSERT(qweight != NULL && q_out != NULL, "qv_awq_unpack needs qweight and q_out");
    /* qweight (k, n/8): nibble i of word (r, c) is q[r][8c + awq_order[i]]. */
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t c = 0; c < n / 8; c++)
            for (int i = 0; i < 8; i++)
#ifdef QV_MUTANT_awq_order_sequential
                /* Mutant (class 3, vLLM #48552, QLLM #61): AWQ words unpacked in
                 * GPTQ's sequential nibble order instead of [0,2,4,6,1,3,5,7]. */
                q_out[kk * n + 8 * c + i] = (uint8_t)nibble(qweight, kk * (n / 8) + c, i);
#else
                q_out[kk * n + 8 * c + awq_order[i]] = (uint8_t)nibble(qweight, kk * (n / 8) + c, i);
#endif
    if (!qzeros) return QV_OK;
    QV_ASSERT(z_out != NULL, "qv_awq_unpack: qzeros given without z_out");
    for (int64_t r = 0; r < k / g; r++)
        for (int64_t c = 0; c < n / 8; c++)
            for (int i = 0; i < 8; i++)
                z_out[r * n + 8 * c + awq_order[i]] = (uint8_t)nibble(qzeros, r * (n / 8) + c, i);
    return QV_OK;
}
