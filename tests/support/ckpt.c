/* ckpt.c: ckpt.h. */
#include "support/ckpt.h"

#include <string.h>

const int ckpt_awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

void ckpt_put_nibble(int32_t *words, int64_t at, int i, uint32_t v)
{
    uint32_t w;
    memcpy(&w, words + at, 4);
    w |= (v & 0xFu) << (4 * i);
    memcpy(words + at, &w, 4);
}

void ckpt_pack_along_k(const uint8_t *x, int64_t rows, int64_t n, int32_t *words)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) ckpt_put_nibble(words, r / 8 * n + j, (int)(r % 8), x[r * n + j]);
}

void ckpt_pack_along_n(const uint8_t *x, int64_t rows, int64_t n, const int *order, uint32_t minus, int32_t *words)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n / 8; c++)
            for (int i = 0; i < 8; i++)
                ckpt_put_nibble(words, r * (n / 8) + c, i, x[r * n + 8 * c + (order ? order[i] : i)] - minus);
}
