/* verdict.c: qv_verify (qvet.h), the public verify call: the truth and the
 * verdict of one output in one call, over the reference's ref_truth_compute
 * and ref_verify, with the truth's buffers freed before it returns. */
#include "qvet/qvet.h"

qv_status qv_verify(const qv_problem *p, const void *out, qv_result *res)
{
    ref_truth t;
    QV_TRY(ref_truth_compute(p, &t));
    ref_verify(p, &t, out, res);
    ref_truth_clear(&t);
    return QV_OK;
}
