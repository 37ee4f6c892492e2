/* rand.h: the suites' random words, a pure function of (seed, stream, index),
 * so any case replays from the seed a suite prints. Included by the suites
 * that draw random inputs (t_formats, t_layout, t_pack_cli, t_spec,
 * support/wonly.c, t_gpu_aq, t_gpu_aq_chain, t_gpu_ppl, t_gpu_wonly_chain);
 * linked into every test binary from tests/support/. */
#ifndef QVET_TEST_RAND_H
#define QVET_TEST_RAND_H

#include <stdint.h>

/* The i-th 64-bit word of stream `stream` under `seed` (splitmix64 mixing). */
uint64_t test_rnd(uint64_t seed, uint64_t stream, uint64_t i);
/* A uniform double in [0, 1) from the top 53 bits of the same word. */
double test_rnd_unit(uint64_t seed, uint64_t stream, uint64_t i);

#endif
