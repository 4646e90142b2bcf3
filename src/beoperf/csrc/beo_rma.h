/*
 * beoperf C core, one-sided MPI loops: MPI_Put and MPI_Get between two ranks of a
 * window, with active-target (MPI_Win_fence) or passive-target synchronisation
 * (MPI_Win_lock/unlock per operation, MPI_Win_lock_all/unlock_all per operation, or one
 * MPI_Win_lock and MPI_Win_flush per operation), as osu_put_latency and osu_get_latency
 * time them, with no Python in the timed loop.
 *
 * As beo_mpi.h: no MPI headers; the functions are looked up at run time in the library
 * mpi4py loaded (beo_rma_bind, a struct of their own), every handle (communicator,
 * window, datatype) comes from mpi4py, and one binary serves Open MPI's pointer handles
 * and MPICH's int handles.  The window is created (MPI_Win_allocate) and freed by
 * mpi4py; filling and checking its memory happens outside these loops.
 */
#ifndef BEO_RMA_H
#define BEO_RMA_H

#include <stddef.h>
#include <stdint.h>

#include "beo_mpi.h"

/* The one-sided functions as bound. */
typedef struct {
    int ptr_handles; /* 1: handles are pointers (Open MPI); 0: ints (MPICH ABI) */
    beo_mpi_fn put, get, fence, lock, unlock, lock_all, unlock_all, flush, barrier;
} beo_rma;

/* Look the functions up in `dl`; 0, or -1 with `missing` naming the first not found. */
int beo_rma_bind(beo_rma *r, void *dl, int ptr_handles, const char **missing);

typedef enum { BEO_RMA_PUT = 0, BEO_RMA_GET = 1 } beo_rma_op;

typedef enum {
    BEO_RMA_FENCE = 0,    /* both ranks, per repetition: fence; the origin's operation;
                             fence; the target's operation back; fence (osu_*_latency -s
                             fence: a repetition is two operations) */
    BEO_RMA_LOCK = 1,     /* origin: MPI_Win_lock(shared), the operation, MPI_Win_unlock */
    BEO_RMA_FLUSH = 2,    /* origin: one MPI_Win_lock(shared) around the loop; per
                             repetition the operation and MPI_Win_flush (osu's default) */
    BEO_RMA_LOCK_ALL = 3, /* origin: MPI_Win_lock_all, the operation, MPI_Win_unlock_all */
} beo_rma_sync;

typedef struct {
    const beo_rma *rma;
    uintptr_t comm;    /* the window's communicator (two ranks) */
    uintptr_t win;     /* the window: at least `size` bytes on both ranks, disp unit 1 */
    uintptr_t byte;    /* MPI_BYTE */
    void *buf;         /* local buffer: what a put sends, where a get lands */
    size_t size;       /* bytes per operation, at most INT_MAX */
    int peer;          /* the other rank of `comm` */
    int origin;        /* 1: the timing rank; 0: the target */
    beo_rma_op op;
    beo_rma_sync sync;
    int lock_shared;   /* the library's MPI_LOCK_SHARED */
    int burst;         /* operations per synchronisation (>= 1).  1: latency, as
                          osu_put_latency; more: bandwidth, as osu_put_bw's window, each
                          operation j moving buf + j * size to displacement j * size, and
                          fence then one-way (fence, the origin's operations, fence) */
    uint64_t warmup;   /* repetitions before the timed ones */
    uint64_t reps;     /* timed repetitions (>= 1) */
    uint64_t elapsed_ns; /* out (origin): the timed repetitions */
    int mpi_error;       /* out: error code of a failed MPI call */
} beo_rma_loop;

/* One trial.  Passive target: the origin meets the target in MPI_Barrier on `comm`,
 * runs the warm-up and timed repetitions, then meets it in MPI_Barrier again; the target
 * only waits in the two barriers (which is where an MPI that needs the target's
 * progress gets it, as osu's target waits in MPI_Barrier).  Fence: both ranks run the
 * loop; one untimed fence opens it.  With burst > 1 a repetition is `burst` operations
 * in one epoch of the synchronisation (fence: the origin's only).  BEO_EINVAL for
 * arguments out of range (burst x size over INT_MAX included). */
int beo_rma_run(beo_rma_loop *lp);

#endif
