/* wonly.h: what the weight-only GPU suites share: the three probes and their
 * fills, and one case run twice on the GPU with its verdict. Included by
 * t_gpu_wonly, t_gpu_wg and t_gpu_wonly_chain; linked into every test
 * binary from tests/support/. Rule: the fills are pure functions of (seed,
 * case index), expected values come from the CPU model or the certified truth (never the
 * kernel), and nothing here makes a CUDA call unless a suite calls
 * wonly_run_case or wonly_one_case after gpu_suite_start found a device. */
#ifndef QVET_TEST_WONLY_H
#define QVET_TEST_WONLY_H

#include <stdint.h>

#include "qvet/gemm.h"
#include "qvet/problem.h"
#include "qvet/status.h"
#include "qvet/variant.h"

/* The probes: exact (small integers, power-of-two scales: the output is
 * unique), one-hot (one activation of 1 per row: the output is one
 * dequantized weight) and random (checked against the certified truth). */
enum wonly_probe { PROBE_EXACT = 0, PROBE_ONEHOT, PROBE_RANDOM, PROBE_COUNT };
/* The random probe's scale regimes. */
enum wonly_regime { REG_NORMAL = 0, REG_TINY, REG_LARGE, REG_COUNT };

/* The names the case labels use. */
extern const char *const wonly_probe_names[PROBE_COUNT];
extern const char *const wonly_regime_names[REG_COUNT];

/* Fills every buffer of p for the probe in the regime; (seed, idx) makes the
 * case's random stream. */
void wonly_fill(qv_problem *p, int probe, int regime, uint64_t seed, uint64_t idx);

/* After wonly_fill: group scales (rows with g > 0) on both sides of 2^-4,
 * the bound of the small-M kernel's one-fma dequantization
 * (kernels/wonly_small_tile.cuh, small_g4_fma): group rows r % 4 = 0, 1, 2
 * log-uniform from 2^-24 (fp16 subnormal) to just below 2^-4 with the
 * largest value in range, 65504 2^-20, in a few columns, row 1 with one
 * column at 2^-4 (the smallest out of range) and row 2 with one at 1; rows
 * r % 4 = 3 all in [2^-4, 1]; every sign random. For the one-hot probe each
 * row i's 1 moves to group i % (k / g), so that its output reads a weight of
 * each group row. */
void wonly_fill_scale_edges(qv_problem *p, int probe, uint64_t seed, uint64_t idx);

/* wonly_run_case flags. WONLY_WG: the case must take the Hopper wgmma path
 * (the options' wo_wg_min_m routes it there), and a bit-exact mismatch also
 * prints where inside the 64-column chunk and 64-token tile it lies. */
#define WONLY_WG 1u

/* Runs p twice on the GPU under launch options o (gpu_opts(o): the suite's
 * base with o's fields on top; qv_gpu_run: an output poisoned before each
 * launch, a guard zone past it), then the verdicts: the two launches bitwise
 * identical, nothing written past the output, and exact / one-hot probes bit
 * for bit equal to the CPU model, random ones no FAIL against the certified
 * truth. A failed verdict prints a FAIL line with label on stderr; returns 1
 * when every verdict passed. */
int wonly_run_case(qv_problem *p, int probe, const char *label, unsigned flags, const qv_launch_opts *o);

/* Creates the (m, n, k) problem of row v, fills it (wonly_fill), names it
 * "<row> m=.. n=.. k=.. <probe>/<regime> seed=.. case=.." and runs it under
 * o (wonly_run_case); returns 1 when it passed. */
int wonly_one_case(const qv_variant *v, int64_t m, int64_t n, int64_t k, int probe, int regime, uint64_t seed,
                   uint64_t idx, unsigned flags, const qv_launch_opts *o);

/* QV_OK when the counters area at the start of workspace ws (ws_bytes bytes;
 * qv_wonly_counters_bytes(n) for a layer of n columns) reads zero again, as
 * gemm.h promises the caller who zeroed it once; QV_ERR_RANGE naming the
 * first counter that does not, QV_ERR_USAGE when ws has no such area. Call it
 * after the launches have finished. name labels the messages. */
qv_status wonly_counters_zero(const char *name, const void *ws, size_t ws_bytes, int64_t n);

#endif
