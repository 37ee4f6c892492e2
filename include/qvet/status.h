/* status.h: how qvet reports the three kinds of failure (STYLE.md rule 5).
 * Included by every library file and the CLI. An unsupported or malformed input
 * returns a qv_status and leaves a message in a thread-local buffer (qv_fail);
 * a programmer or environment error aborts through QV_ASSERT with a hint.
 * A numerical mismatch is never a status: it is a result (result.h). */
#ifndef QVET_STATUS_H
#define QVET_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qv_status {
    QV_OK = 0,
    QV_ERR_USAGE,       /* bad option or argument combination */
    QV_ERR_IO,          /* missing file, read or write failure */
    QV_ERR_FORMAT,      /* malformed file contents (.npy, .safetensors, GGUF, JSONL) */
    QV_ERR_DTYPE,       /* wrong or unknown element type */
    QV_ERR_SHAPE,       /* illegal or inconsistent shape */
    QV_ERR_RANGE,       /* a value out of its declared range (e.g. q > 15) */
    QV_ERR_UNSUPPORTED, /* legal in general, not supported by this variant */
    QV_ERR_NOMEM,       /* allocation failed or size overflow */
    QV_ERR_CUDA,        /* a CUDA runtime or library call failed */
    QV_ERR_NODEVICE     /* GPU work requested but no CUDA device present */
} qv_status;

/* Short name of a status, e.g. "shape error". */
const char *qv_status_str(qv_status st);

/* Records a formatted message for the calling thread and returns st, so a
 * failing function can `return qv_fail(QV_ERR_SHAPE, "K=%d is not ...", k);`. */
qv_status qv_fail(qv_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The message of the last qv_fail on this thread ("" if none). */
const char *qv_errmsg(void);

/* Exit code the CLI uses for a status: 0 for QV_OK, 2 for input and usage
 * errors, 3 for environment errors (CUDA, no memory). */
int qv_status_exit_code(qv_status st);

/* Aborts with the expression, file, line and a hint. For programmer and
 * environment errors only, never for bad user input. */
void qv_abort(const char *expr, const char *file, int line, const char *hint);
#define QV_ASSERT(expr, hint)                                                  \
    do {                                                                       \
        if (!(expr)) qv_abort(#expr, __FILE__, __LINE__, (hint));              \
    } while (0)

/* Propagates a non-OK status to the caller. */
#define QV_TRY(call)                                                           \
    do {                                                                       \
        qv_status qv_try_st_ = (call);                                         \
        if (qv_try_st_ != QV_OK) return qv_try_st_;                            \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
