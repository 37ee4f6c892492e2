/* qvet.h: the one header a program includes to verify GEMM outputs with the
 * CPU library (libqvet_cpu.a, which links no CUDA library): formats, specs,
 * the registry, problems, layouts, .npy/.safetensors arrays, the reference and
 * the verdict, and qv_verify. The GPU library adds gemm.h (the launch ABI and
 * launch table). Rule: a numerical mismatch is a verdict in qv_result, never
 * a qv_status; a status means the check itself could not run. */
#ifndef QVET_QVET_H
#define QVET_QVET_H

#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/layout.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/result.h"
#include "qvet/spec.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Grades out, (p->m, p->n) output codes of p->v->ofmt row-major (uint16_t
 * bits for f16/bf16, float for f32, int32_t for i32), against the exact value
 * of p's declared arithmetic and its certified bound (ref_truth_compute, then
 * ref_verify): res->grade is PASS, MARGINAL or FAIL with the reason and the
 * error statistics. Returns QV_OK whenever res holds a verdict; otherwise the
 * reference's refusal (e.g. QV_ERR_NOMEM) with its message, res untouched. */
qv_status qv_verify(const qv_problem *p, const void *out, qv_result *res);

#ifdef __cplusplus
}
#endif
#endif
