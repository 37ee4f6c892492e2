/* parallel.c: a small pool of POSIX threads for the element-wise host work of
 * the evaluation (eval_internal.h, ev_parallel_for): norms, softmax rows,
 * activation quantization, the per-position statistics. Every range is
 * computed by exactly one thread in its own order, so results do not depend on
 * the number of threads. The pool starts on first use with the threads
 * qv_eval_threads_request asked for (`qvet ppl` reads QVET_THREADS; default:
 * the online processors; at most EV_MAX_THREADS) and lives until the process ends;
 * a call made from inside a parallel section, while another thread holds the
 * pool, or in a child forked after the pool started (Check forks its tests),
 * runs in the caller. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "eval_internal.h"

/* Beyond this the host work of one chunk has no more parallelism to give. */
#define EV_MAX_THREADS 64

typedef struct ev_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_mutex_t submit;     /* held by the one caller whose job runs */
    int n_threads;              /* workers + the caller */
    unsigned long generation;   /* bumped per job; workers wait for a change */
    int running;                /* workers still inside the current job */
    /* the current job */
    ev_range_fn fn;
    void *ctx;
    int64_t n, grain;
    atomic_llong next;          /* next unclaimed index */
} ev_pool;

static ev_pool pool;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static atomic_int requested; /* qv_eval_threads_request; 0: the online processors */
static _Thread_local int in_section;

/* Claims ranges of the current job until none is left. */
static void drain(void)
{
    for (;;) {
        long long lo = atomic_fetch_add(&pool.next, pool.grain);
        if (lo >= pool.n) return;
        long long hi = lo + pool.grain < pool.n ? lo + pool.grain : pool.n;
        pool.fn(pool.ctx, lo, hi);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    in_section = 1;
    unsigned long seen = 0;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (pool.generation == seen) pthread_cond_wait(&pool.go, &pool.mu);
        seen = pool.generation;
        pthread_mutex_unlock(&pool.mu);
        drain();
        pthread_mutex_lock(&pool.mu);
        if (--pool.running == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

/* A forked child has none of the workers: it computes alone. */
static void pool_after_fork(void)
{
    pool.n_threads = 1;
}

static void pool_start(void)
{
    long n = requested > 0 ? requested : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > EV_MAX_THREADS) n = EV_MAX_THREADS;
    pthread_mutex_init(&pool.mu, NULL);
    pthread_mutex_init(&pool.submit, NULL);
    pthread_cond_init(&pool.go, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.n_threads = 1;
    pthread_atfork(NULL, NULL, pool_after_fork);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (long i = 1; i < n; i++) {
        pthread_t th;
        if (pthread_create(&th, &attr, worker, NULL) != 0) break; /* fewer workers still compute everything */
        pool.n_threads++;
    }
    pthread_attr_destroy(&attr);
}

void qv_eval_threads_request(int n) { requested = n; }

int ev_threads(void)
{
    pthread_once(&pool_once, pool_start);
    return pool.n_threads;
}

void ev_parallel_for(int64_t n, int64_t grain, ev_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int nt = ev_threads();
    if (nt == 1 || n <= grain || in_section || pthread_mutex_trylock(&pool.submit) != 0) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&pool.mu);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.grain = grain;
    atomic_store(&pool.next, 0);
    pool.running = nt - 1;
    pool.generation++;
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    in_section = 1;
    drain();
    in_section = 0;
    pthread_mutex_lock(&pool.mu);
    while (pool.running > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.submit);
}

typedef struct try_job {
    ev_item_fn fn;
    void *ctx;
    qv_status *st;    /* (n) each item's status */
    char (*msg)[256]; /* (n) the message of each failed item */
} try_job;

static void try_range(void *vj, int64_t lo, int64_t hi)
{
    const try_job *j = vj;
    for (int64_t i = lo; i < hi; i++) {
        j->st[i] = j->fn(j->ctx, i);
        if (j->st[i] != QV_OK) snprintf(j->msg[i], sizeof j->msg[i], "%s", qv_errmsg());
    }
}

qv_status ev_parallel_try(int64_t n, ev_item_fn fn, void *ctx, const char *who, const char *unit, int per)
{
    if (n <= 0) return QV_OK;
    try_job j = {fn, ctx, calloc((size_t)n, sizeof *j.st), calloc((size_t)n, sizeof *j.msg)};
    if (!j.st || !j.msg) {
        free(j.st);
        free(j.msg);
        return qv_fail(QV_ERR_NOMEM, "no memory");
    }
    ev_parallel_for(n, 1, try_range, &j);
    qv_status bad = QV_OK;
    for (int64_t i = 0; i < n && bad == QV_OK; i++)
        if (j.st[i] != QV_OK)
            bad = qv_fail(j.st[i], "%s: %s %lld: %s", who, unit, (long long)(i / per), j.msg[i]);
    free(j.st);
    free(j.msg);
    return bad;
}

double ev_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t ev_grain(int64_t n, int64_t min_grain)
{
    /* 4 ranges per thread: enough to even out unequal ranges, few enough that
     * claiming them costs nothing. */
    int64_t g = n / (4 * (int64_t)ev_threads());
    return g < min_grain ? min_grain : g;
}
