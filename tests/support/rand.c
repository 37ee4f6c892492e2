/* rand.c: rand.h on top of the campaign's splitmix64 step (campaign.h). */
#include "support/rand.h"

#include "internal/campaign.h"

/* One splitmix64 output for the state x: x + the golden-ratio increment, mixed. */
static uint64_t mix(uint64_t x) { return qv_splitmix64(&x); }

uint64_t test_rnd(uint64_t seed, uint64_t stream, uint64_t i)
{
    return mix(seed ^ mix(stream * UINT64_C(0x100000001B3) ^ mix(i)));
}

double test_rnd_unit(uint64_t seed, uint64_t stream, uint64_t i)
{
    /* 53 bits: a double's significand, so every value is exact and < 1. */
    return (double)(test_rnd(seed, stream, i) >> 11) * 0x1p-53;
}
