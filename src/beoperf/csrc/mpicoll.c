/*
 * The collectives' timed loop (beo_coll.h): OSU's synchronisation, MPI_Barrier before
 * every repetition and only the collective timed.
 */
#include "beo_coll.h"

#include <dlfcn.h>
#include <string.h>

#include "beo.h"
#include "beo_mpi.h"

static const char *const NAMES[BEO_COLL_COUNT] = {
    "MPI_Allreduce", "MPI_Allgather", "MPI_Alltoall", "MPI_Bcast", "MPI_Reduce",
    "MPI_Reduce_scatter_block", "MPI_Gather", "MPI_Scatter", "MPI_Barrier",
    "MPI_Iallreduce", "MPI_Iallgather", "MPI_Ialltoall", "MPI_Ibcast", "MPI_Ireduce",
    "MPI_Ireduce_scatter_block", "MPI_Igather", "MPI_Iscatter", "MPI_Ibarrier"};

static int sym(void *dl, const char *name, beo_coll_fn *out, const char **missing)
{
    void *found = dlsym(dl, name);
    if (found == NULL) {
        *missing = name;
        return -1;
    }
    memcpy(out, &found, sizeof(*out)); /* POSIX: a dlsym result may become a function */
    return 0;
}

int beo_coll_bind(beo_coll *c, void *dl, int ptr_handles, const char **missing)
{
    memset(c, 0, sizeof(*c));
    c->ptr_handles = ptr_handles;
    for (int i = 0; i < BEO_COLL_COUNT; i++)
        if (sym(dl, NAMES[i], &c->fn[i], missing) != 0)
            return -1;
    if (sym(dl, "MPI_Comm_size", &c->comm_size, missing) != 0 ||
        sym(dl, "MPI_Comm_rank", &c->comm_rank, missing) != 0 ||
        sym(dl, "MPI_Type_size", &c->type_size, missing) != 0 ||
        sym(dl, "MPI_Wait", &c->wait, missing) != 0)
        return -1;
    return 0;
}

void beo_coll_bytes(beo_coll_op op, uint64_t count, uint64_t elem, uint64_t np,
                    uint64_t *send, uint64_t *recv)
{
    op = (beo_coll_op)(op % BEO_COLL_NB);
    uint64_t one = count * elem, all = one * np;
    switch (op) {
    case BEO_COLL_ALLGATHER: case BEO_COLL_GATHER: *send = one; *recv = all; break;
    case BEO_COLL_ALLTOALL: *send = all; *recv = all; break;
    case BEO_COLL_SCATTER: *send = all; *recv = one; break;
    case BEO_COLL_REDUCE_SCATTER: *send = all; *recv = one; break;
    case BEO_COLL_BARRIER: *send = 0; *recv = 0; break;
    default: *send = one; *recv = one; break; /* allreduce, reduce, bcast (send only) */
    }
}

/* Handles as the ABI wants them: a pointer (Open MPI) or an int (MPICH). */
typedef void *HP;
typedef int HI;

#define CALL(T, lp, op, s, r, res)                                                           \
    do {                                                                                     \
        T comm = (T)(lp)->comm, dt = (T)(lp)->dtype, mop = (T)(lp)->op;                      \
        beo_coll_fn f = (lp)->c->fn[op];                                                     \
        int n = (lp)->count, root = (lp)->root;                                              \
        switch (op) {                                                                        \
        case BEO_COLL_ALLREDUCE:                                                             \
            res = ((int (*)(const void *, void *, int, T, T, T))f)(s, r, n, dt, mop, comm);  \
            break;                                                                           \
        case BEO_COLL_REDUCE:                                                                \
            res = ((int (*)(const void *, void *, int, T, T, int, T))f)(s, r, n, dt, mop,   \
                                                                          root, comm);       \
            break;                                                                           \
        case BEO_COLL_REDUCE_SCATTER:                                                        \
            res = ((int (*)(const void *, void *, int, T, T, T))f)(s, r, n, dt, mop, comm);  \
            break;                                                                           \
        case BEO_COLL_ALLGATHER: case BEO_COLL_ALLTOALL:                                     \
            res = ((int (*)(const void *, int, T, void *, int, T, T))f)(s, n, dt, r, n, dt,  \
                                                                         comm);              \
            break;                                                                           \
        case BEO_COLL_GATHER: case BEO_COLL_SCATTER:                                         \
            res = ((int (*)(const void *, int, T, void *, int, T, int, T))f)(                \
                s, n, dt, r, n, dt, root, comm);                                             \
            break;                                                                           \
        case BEO_COLL_BCAST:                                                                 \
            res = ((int (*)(void *, int, T, int, T))f)(s, n, dt, root, comm);                \
            break;                                                                           \
        default:                                                                             \
            res = ((int (*)(T))f)(comm);                                                     \
        }                                                                                    \
    } while (0)

/* The non-blocking forms: the same arguments, then the request. */
#define ICALL(T, lp, op, s, r, rq, res)                                                      \
    do {                                                                                     \
        T comm = (T)(lp)->comm, dt = (T)(lp)->dtype, mop = (T)(lp)->op;                      \
        beo_coll_fn f = (lp)->c->fn[op + BEO_COLL_NB];                                       \
        int n = (lp)->count, root = (lp)->root;                                              \
        switch (op) {                                                                        \
        case BEO_COLL_ALLREDUCE: case BEO_COLL_REDUCE_SCATTER:                               \
            res = ((int (*)(const void *, void *, int, T, T, T, void *))f)(s, r, n, dt, mop, \
                                                                          comm, rq);         \
            break;                                                                           \
        case BEO_COLL_REDUCE:                                                                \
            res = ((int (*)(const void *, void *, int, T, T, int, T, void *))f)(             \
                s, r, n, dt, mop, root, comm, rq);                                           \
            break;                                                                           \
        case BEO_COLL_ALLGATHER: case BEO_COLL_ALLTOALL:                                     \
            res = ((int (*)(const void *, int, T, void *, int, T, T, void *))f)(             \
                s, n, dt, r, n, dt, comm, rq);                                               \
            break;                                                                           \
        case BEO_COLL_GATHER: case BEO_COLL_SCATTER:                                         \
            res = ((int (*)(const void *, int, T, void *, int, T, int, T, void *))f)(        \
                s, n, dt, r, n, dt, root, comm, rq);                                         \
            break;                                                                           \
        case BEO_COLL_BCAST:                                                                 \
            res = ((int (*)(void *, int, T, int, T, void *))f)(s, n, dt, root, comm, rq);    \
            break;                                                                           \
        default:                                                                             \
            res = ((int (*)(T, void *))f)(comm, rq);                                         \
        }                                                                                    \
    } while (0)

static int call(const beo_coll_loop *lp, beo_coll_op op, unsigned char *s, unsigned char *r)
{
    int res;
    if (op < BEO_COLL_NB) {
        if (lp->c->ptr_handles)
            CALL(HP, lp, op, s, r, res);
        else
            CALL(HI, lp, op, s, r, res);
        return res;
    }
    /* a request is a pointer (Open MPI) or an int (MPICH): room for either; a status of
     * the largest size any library has */
    uint64_t request = 0;
    uint64_t status[BEO_MPI_STATUS_MAX / sizeof(uint64_t)];
    op = (beo_coll_op)(op - BEO_COLL_NB);
    if (lp->c->ptr_handles)
        ICALL(HP, lp, op, s, r, &request, res);
    else
        ICALL(HI, lp, op, s, r, &request, res);
    if (res != 0)
        return res;
    return ((int (*)(void *, void *))lp->c->wait)(&request, status);
}

static int barrier(const beo_coll_loop *lp)
{
    return call(lp, BEO_COLL_BARRIER, NULL, NULL);
}

int beo_coll_comm_size(const beo_coll *c, uintptr_t comm, int *np, int *rank)
{
    int rc;
    if (c->ptr_handles) {
        rc = ((int (*)(HP, int *))c->comm_size)((HP)comm, np);
        if (rc == 0)
            rc = ((int (*)(HP, int *))c->comm_rank)((HP)comm, rank);
    } else {
        rc = ((int (*)(HI, int *))c->comm_size)((HI)comm, np);
        if (rc == 0)
            rc = ((int (*)(HI, int *))c->comm_rank)((HI)comm, rank);
    }
    return rc;
}

int beo_coll_type_size(const beo_coll *c, uintptr_t dtype, int *size)
{
    if (c->ptr_handles)
        return ((int (*)(HP, int *))c->type_size)((HP)dtype, size);
    return ((int (*)(HI, int *))c->type_size)((HI)dtype, size);
}

int beo_coll_run(beo_coll_loop *lp, beo_coll_op op)
{
    lp->elapsed_ns = lp->max_ns = 0;
    for (uint64_t i = 0; i < lp->warmup + lp->reps; i++) {
        size_t slot = (size_t)(i % (uint64_t)lp->slots);
        unsigned char *s = lp->send ? lp->send + slot * lp->send_stride : NULL;
        unsigned char *r = lp->recv ? lp->recv + slot * lp->recv_stride : NULL;
        int rc = barrier(lp);
        if (rc != 0) {
            lp->mpi_error = rc;
            return BEO_EMPI;
        }
        uint64_t t0 = beo_now_ns();
        rc = call(lp, op, s, r);
        uint64_t t = beo_now_ns() - t0;
        if (rc != 0) {
            lp->mpi_error = rc;
            return BEO_EMPI;
        }
        if (i >= lp->warmup) {
            lp->elapsed_ns += t;
            if (t > lp->max_ns)
                lp->max_ns = t;
        }
    }
    return BEO_OK;
}
