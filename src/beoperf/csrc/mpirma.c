/*
 * beoperf C core: one-sided MPI loops over a library bound at run time.  See beo_rma.h.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include "beo_rma.h"

#include <dlfcn.h>
#include <limits.h>
#include <string.h>

int beo_rma_bind(beo_rma *r, void *dl, int ptr_handles, const char **missing)
{
    static const char *const names[] = {
        "MPI_Put", "MPI_Get", "MPI_Win_fence", "MPI_Win_lock", "MPI_Win_unlock",
        "MPI_Win_lock_all", "MPI_Win_unlock_all", "MPI_Win_flush", "MPI_Barrier",
    };
    beo_mpi_fn *slots[] = {
        &r->put, &r->get, &r->fence, &r->lock, &r->unlock, &r->lock_all, &r->unlock_all,
        &r->flush, &r->barrier,
    };
    *missing = NULL;
    r->ptr_handles = ptr_handles != 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void *sym = dlsym(dl, names[i]);
        if (sym == NULL) {
            *missing = names[i];
            return -1;
        }
        memcpy(slots[i], &sym, sizeof(*slots[i])); /* POSIX: dlsym to a function */
    }
    return 0;
}

/* ------------------------------------------------------------------ calls, per ABI */

/* MPI_Aint is a pointer-sized signed integer in both ABIs */
typedef intptr_t aint;
/* Open MPI: handles are pointers */
typedef int (*rma_p)(void *, int, void *, int, aint, int, void *, void *);
typedef int (*fence_p)(int, void *);
typedef int (*lock_p)(int, int, int, void *);
typedef int (*rank_win_p)(int, void *); /* MPI_Win_unlock, MPI_Win_flush */
typedef int (*win_p)(void *);           /* MPI_Win_unlock_all, MPI_Barrier */
/* MPICH ABI: handles are ints */
typedef int (*rma_i)(void *, int, int, int, aint, int, int, int);
typedef int (*fence_i)(int, int);
typedef int (*lock_i)(int, int, int, int);
typedef int (*rank_win_i)(int, int);
typedef int (*win_i)(int);

#define PTR(h) ((void *)(h))
#define INT(h) ((int)(h))

/* operation j of a burst: buf + j * size to (or from) displacement j * size */
static int x_op(const beo_rma_loop *lp, int target, int j)
{
    const beo_rma *r = lp->rma;
    beo_mpi_fn fn = lp->op == BEO_RMA_PUT ? r->put : r->get;
    int n = (int)lp->size;
    void *at = (unsigned char *)lp->buf + (size_t)j * lp->size;
    aint disp = (aint)j * (aint)lp->size;
    if (r->ptr_handles)
        return ((rma_p)fn)(at, n, PTR(lp->byte), target, disp, n, PTR(lp->byte),
                           PTR(lp->win));
    return ((rma_i)fn)(at, n, INT(lp->byte), target, disp, n, INT(lp->byte), INT(lp->win));
}

/* the operations of one repetition */
static int x_burst(beo_rma_loop *lp)
{
    for (int j = 0; j < lp->burst; j++) {
        int rc = x_op(lp, lp->peer, j);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int x_fence(const beo_rma_loop *lp)
{
    if (lp->rma->ptr_handles)
        return ((fence_p)lp->rma->fence)(0, PTR(lp->win));
    return ((fence_i)lp->rma->fence)(0, INT(lp->win));
}

static int x_lock(const beo_rma_loop *lp)
{
    if (lp->rma->ptr_handles)
        return ((lock_p)lp->rma->lock)(lp->lock_shared, lp->peer, 0, PTR(lp->win));
    return ((lock_i)lp->rma->lock)(lp->lock_shared, lp->peer, 0, INT(lp->win));
}

static int x_rank_win(const beo_rma_loop *lp, beo_mpi_fn fn)
{
    if (lp->rma->ptr_handles)
        return ((rank_win_p)fn)(lp->peer, PTR(lp->win));
    return ((rank_win_i)fn)(lp->peer, INT(lp->win));
}

static int x_lock_all(const beo_rma_loop *lp)
{
    if (lp->rma->ptr_handles)
        return ((rank_win_p)lp->rma->lock_all)(0, PTR(lp->win));
    return ((rank_win_i)lp->rma->lock_all)(0, INT(lp->win));
}

static int x_handle(const beo_rma_loop *lp, beo_mpi_fn fn, uintptr_t handle)
{
    if (lp->rma->ptr_handles)
        return ((win_p)fn)(PTR(handle));
    return ((win_i)fn)(INT(handle));
}

/* ------------------------------------------------------------------ loops */

static int checked(beo_rma_loop *lp, int rc)
{
    if (rc == 0)
        return BEO_OK;
    lp->mpi_error = rc;
    return BEO_EMPI;
}

#define TRY(lp, call)                                                                     \
    do {                                                                                  \
        int rc_ = checked((lp), (call));                                                  \
        if (rc_ != BEO_OK)                                                                \
            return rc_;                                                                   \
    } while (0)

/* One passive-target repetition of the origin. */
static int passive_once(beo_rma_loop *lp)
{
    switch (lp->sync) {
    case BEO_RMA_LOCK:
        TRY(lp, x_lock(lp));
        TRY(lp, x_burst(lp));
        return checked(lp, x_rank_win(lp, lp->rma->unlock));
    case BEO_RMA_LOCK_ALL:
        TRY(lp, x_lock_all(lp));
        TRY(lp, x_burst(lp));
        return checked(lp, x_handle(lp, lp->rma->unlock_all, lp->win));
    default: /* BEO_RMA_FLUSH: inside the loop's one lock */
        TRY(lp, x_burst(lp));
        return checked(lp, x_rank_win(lp, lp->rma->flush));
    }
}

static int passive_origin(beo_rma_loop *lp)
{
    TRY(lp, x_handle(lp, lp->rma->barrier, lp->comm));
    if (lp->sync == BEO_RMA_FLUSH)
        TRY(lp, x_lock(lp));
    uint64_t t0 = 0;
    for (uint64_t i = 0; i < lp->warmup + lp->reps; i++) {
        if (i == lp->warmup)
            t0 = beo_now_ns();
        int rc = passive_once(lp);
        if (rc != BEO_OK)
            return rc;
    }
    uint64_t t1 = beo_now_ns();
    lp->elapsed_ns = t1 > t0 ? t1 - t0 : 1;
    if (lp->sync == BEO_RMA_FLUSH)
        TRY(lp, x_rank_win(lp, lp->rma->unlock));
    return checked(lp, x_handle(lp, lp->rma->barrier, lp->comm));
}

static int passive_target(beo_rma_loop *lp)
{
    TRY(lp, x_handle(lp, lp->rma->barrier, lp->comm));
    return checked(lp, x_handle(lp, lp->rma->barrier, lp->comm));
}

/* latency: fence; the origin's operation; fence; the target's; fence.
 * bandwidth (burst > 1): fence; the origin's operations; fence */
static int fence_loop(beo_rma_loop *lp)
{
    TRY(lp, x_fence(lp));
    uint64_t t0 = 0;
    for (uint64_t i = 0; i < lp->warmup + lp->reps; i++) {
        if (i == lp->warmup)
            t0 = beo_now_ns();
        if (lp->burst > 1) {
            if (lp->origin)
                TRY(lp, x_burst(lp));
            TRY(lp, x_fence(lp));
            continue;
        }
        TRY(lp, x_fence(lp));
        if (lp->origin)
            TRY(lp, x_op(lp, lp->peer, 0));
        TRY(lp, x_fence(lp));
        if (!lp->origin)
            TRY(lp, x_op(lp, lp->peer, 0));
        TRY(lp, x_fence(lp));
    }
    uint64_t t1 = beo_now_ns();
    lp->elapsed_ns = t1 > t0 ? t1 - t0 : 1;
    return BEO_OK;
}

int beo_rma_run(beo_rma_loop *lp)
{
    lp->elapsed_ns = 0;
    lp->mpi_error = 0;
    if (lp->rma == NULL || lp->size > (size_t)INT_MAX || lp->reps < 1 || lp->peer < 0 ||
        lp->burst < 1 || lp->size * (size_t)lp->burst > (size_t)INT_MAX ||
        (lp->buf == NULL && lp->size > 0) || (unsigned)lp->op > BEO_RMA_GET ||
        (unsigned)lp->sync > BEO_RMA_LOCK_ALL)
        return BEO_EINVAL;
    if (lp->sync == BEO_RMA_FENCE)
        return fence_loop(lp);
    return lp->origin ? passive_origin(lp) : passive_target(lp);
}
