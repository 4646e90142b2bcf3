/*
 * beoperf C core, MPI collectives: the timed loop of `beoperf cluster coll`.
 *
 * As beo_mpi.h, built without MPI headers: the collectives are looked up at run time in
 * the library mpi4py loaded, and every handle (communicator, datatype, operation) comes
 * from mpi4py; Open MPI's handles are pointers, MPICH's ints, and each call goes through
 * a function pointer of the right type for the ABI bound.
 *
 * Synchronisation (OSU Micro-Benchmarks' way): every repetition, warm-up or timed, is
 * MPI_Barrier then the collective, and only the collective is timed (two clock reads
 * around it, a non-blocking one from its post to its MPI_Wait's return); the rank's
 * elapsed_ns is the sum of its timed calls.
 */
#ifndef BEO_COLL_H
#define BEO_COLL_H

#include <stddef.h>
#include <stdint.h>

typedef void (*beo_coll_fn)(void);

/* The blocking collectives, then their non-blocking forms in the same order (each timed
 * from its post to the end of its MPI_Wait, nothing overlapped): op + BEO_COLL_NB. */
typedef enum {
    BEO_COLL_ALLREDUCE = 0, BEO_COLL_ALLGATHER, BEO_COLL_ALLTOALL, BEO_COLL_BCAST,
    BEO_COLL_REDUCE, BEO_COLL_REDUCE_SCATTER, BEO_COLL_GATHER, BEO_COLL_SCATTER,
    BEO_COLL_BARRIER, BEO_COLL_NB,
    BEO_COLL_COUNT = 2 * BEO_COLL_NB
} beo_coll_op;

/* The collectives as bound, and the two queries that check the buffers' sizes. */
typedef struct {
    int ptr_handles;
    beo_coll_fn fn[BEO_COLL_COUNT];
    beo_coll_fn comm_size, comm_rank, type_size, wait;
} beo_coll;

/* Bind from `dl` (0, or -1 with `missing` naming the first function not found). */
int beo_coll_bind(beo_coll *c, void *dl, int ptr_handles, const char **missing);

/* The bytes a rank's send and receive buffers need for `op` with `count` elements of
 * `elem` bytes among `np` ranks (count: per rank's block for allgather, alltoall,
 * gather and scatter; the result's block for reduce_scatter; the vector otherwise). */
void beo_coll_bytes(beo_coll_op op, uint64_t count, uint64_t elem, uint64_t np,
                    uint64_t *send, uint64_t *recv);

typedef struct {
    const beo_coll *c;
    uintptr_t comm, dtype, op; /* op: the reduction's MPI_Op (reductions only) */
    int root;
    int count;
    unsigned char *send, *recv; /* `slots` buffers each, `send_stride`/`recv_stride` apart */
    size_t send_stride, recv_stride;
    int slots;                  /* repetition i uses buffer i % slots (1: reused) */
    uint64_t reps, warmup;
    uint64_t elapsed_ns;        /* out: the timed calls' sum */
    uint64_t max_ns;            /* out: the longest timed call */
    int mpi_error;              /* out */
} beo_coll_loop;

int beo_coll_comm_size(const beo_coll *c, uintptr_t comm, int *np, int *rank);
int beo_coll_type_size(const beo_coll *c, uintptr_t dtype, int *size);

/* Run the loop (BEO_OK, BEO_EMPI with mpi_error set). */
int beo_coll_run(beo_coll_loop *lp, beo_coll_op op);

#endif
