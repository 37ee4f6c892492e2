/* moe_bench.h: the routed rows' part of `qvet bench` (bench/moe_bench.cu),
 * called by bench/cmd_bench.c when --variant names routed rows (moe-*).
 * Internal to bench/. Rule: the grouped launch (routing, sort, grouped GEMM,
 * combine) and its cuBLAS baselines are timed in the same run, the same way
 * (bench.h: CUDA events, median, side by side). */
#ifndef QVET_BENCH_MOE_BENCH_H
#define QVET_BENCH_MOE_BENCH_H

#include <stdio.h>

#include "qvet/gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when one of globs[0..n) matches a routed row with a GPU kernel. */
int qv_moe_bench_selected(const char *const *globs, int n);

/* Times every routed row with a GPU kernel that globs select, at each token
 * count tokens[0..n_tok) (NULL: 1, 8, 64, 512, 4096), `runs` timed launches
 * after a warm-up, every batch queued behind a wait unless no_queue; prints
 * the table and writes "kind":"bench" lines to out (NULL: none; the caller
 * wrote its provenance line and closes it). Returns the exit code: 0, 2 bad
 * input, 3 no device or a CUDA error. `launch` (the QVET_* variables) picks
 * the grouped GEMM's path and block (qv_moe_pick). */
int qv_moe_bench(const char *const *globs, int n, const int *tokens, int n_tok, int runs, int no_queue, FILE *out,
                 const qv_launch_opts *launch);

/* --dry-run: the routed rows qv_moe_bench would time, with the same
 * arguments, and the count of their timings; no CUDA call. */
void qv_moe_bench_plan(const char *const *globs, int n, const int *tokens, int n_tok, int runs);

#ifdef __cplusplus
}
#endif
#endif
