/* parallel.c: ref_parallel_for (ref_parallel.h). Workers take the next block
 * from one atomic counter; which thread runs a block never changes what it
 * writes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ref_parallel.h"

typedef struct par_ctx {
    void (*fn)(void *ctx, int64_t b);
    void *ctx;
    int64_t nblocks;
    atomic_llong next;
} par_ctx;

static void *par_worker(void *arg)
{
    par_ctx *pc = arg;
    for (;;) {
        int64_t b = atomic_fetch_add(&pc->next, 1);
        if (b >= pc->nblocks) return NULL;
        pc->fn(pc->ctx, b);
    }
}

void ref_parallel_for(int64_t nblocks, int jobs, void (*fn)(void *ctx, int64_t b), void *ctx)
{
    if (jobs > nblocks) jobs = (int)nblocks;
    if (jobs <= 1) {
        for (int64_t b = 0; b < nblocks; b++) fn(ctx, b);
        return;
    }
    par_ctx pc = {.fn = fn, .ctx = ctx, .nblocks = nblocks};
    atomic_init(&pc.next, 0);
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)(jobs - 1));
    int started = 0;
    /* a thread that cannot be made leaves its blocks to the others */
    while (th && started < jobs - 1 && pthread_create(&th[started], NULL, par_worker, &pc) == 0) started++;
    par_worker(&pc);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    free(th);
}
