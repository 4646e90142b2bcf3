/*
 * beoperf C core, MPI loops: ping-pong, windowed streaming and exchanges (bidirectional,
 * ring steps) between ranks of a communicator, with no Python in the timed loop.
 *
 * Built without MPI headers or mpicc: the MPI functions are looked up at run time in the
 * library mpi4py loaded (beo_mpi_bind), and every handle (communicator, datatype) comes
 * from mpi4py.  Two ABIs are served by one binary:
 *   - Open MPI: handles are pointers; MPI_Request is a pointer;
 *   - MPICH (and its derivatives): handles are ints; MPI_Request is an int.
 * Each call goes through a function pointer of the right type for the ABI bound, so
 * no handle is ever passed as the wrong type.  Statuses are real buffers of the
 * library's sizeof(MPI_Status) (MPI_STATUS_IGNORE differs between the two: 0 vs 1).
 *
 * Ranks are those of the communicator given; every loop names its peer(s), so that
 * any two ranks (or a ring) can run while the others wait elsewhere.
 */
#ifndef BEO_MPI_H
#define BEO_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "beo.h"

#define BEO_EMPI (-10)   /* an MPI call failed; mpi_error holds its error code */
#define BEO_EINVAL (-11) /* arguments the loop cannot honour (see the function) */
#define BEO_MPI_STATUS_MAX 256 /* bytes: no MPI_Status is larger */

typedef void (*beo_mpi_fn)(void);

/* The MPI library as bound: which ABI, and the functions the loops call. */
typedef struct {
    int ptr_handles;     /* 1: handles are pointers (Open MPI); 0: ints (MPICH ABI) */
    size_t request_size; /* sizeof(MPI_Request) */
    size_t status_size;  /* sizeof(MPI_Status) */
    beo_mpi_fn send, ssend, recv, isend, issend, irecv, wait, waitall, barrier, sendrecv;
    beo_mpi_fn initialized, finalized, get_library_version;
} beo_mpi;

/* Look the functions up in `dl_handle` (dlopen of a library linked to libmpi, or libmpi
 * itself); 0, or -1 with `missing` naming the first function not found. */
int beo_mpi_bind(beo_mpi *m, void *dl_handle, int ptr_handles, size_t request_size,
                 size_t status_size, const char **missing);
/* MPI_Initialized && !MPI_Finalized, as the library says; -1 if it cannot say. */
int beo_mpi_ready(const beo_mpi *m);
/* MPI_Get_library_version into buf (NUL-terminated); the MPI error code (0: success). */
int beo_mpi_library_version(const beo_mpi *m, char *buf, size_t len);

typedef enum {
    BEO_MPI_SYNC = 1,        /* synchronous sends (MPI_Ssend, MPI_Issend) */
    BEO_MPI_NONBLOCKING = 2, /* receives posted before the send and waited for (NetPIPE's
                                -a); without it blocking MPI_Recv */
} beo_mpi_flags;

typedef struct {
    const beo_mpi *mpi;
    uintptr_t comm;   /* communicator handle (mpi4py: MPI._handleof(comm)) */
    uintptr_t byte;   /* MPI_BYTE's handle */
    int tag;
    beo_pool *pool;
    size_t size;      /* message length, at most pool->size and INT_MAX */
    uint64_t reps;
    uint64_t seq0;    /* sequence number of the first message (integrity) */
    int integrity;    /* fill and verify every message */
    int flags;        /* beo_mpi_flags */
    int window;       /* stream: messages in flight before each acknowledgement (>= 1) */
    uint64_t warmup;  /* repetitions before the timed ones, not timed (ping-pong: round
                         trips; stream: messages; ring: steps) */
    int barrier;      /* MPI_Barrier on the communicator after the warm-up, before the
                         timed repetitions: every rank of it must then call a loop with
                         barrier set, or beo_mpi_barrier */
    void *scratch;    /* requests and statuses: beo_mpi_scratch_bytes(window + 2) bytes */
    uint64_t *samples;   /* out: reps entries (ns), or NULL */
    uint64_t elapsed_ns; /* out: whole loop */
    uint64_t elapsed2_ns; /* out: beo_mpi_ring_hpcc's second (non-blocking) loop */
    uint64_t corrupt;    /* out: messages that failed verification */
    int mpi_error;       /* out: error code of a failed MPI call */
} beo_mpi_loop;

/* Bytes of scratch space for `n` requests and their statuses. */
size_t beo_mpi_scratch_bytes(const beo_mpi *m, int n);

/* Ping-pong with `peer`: the initiator sends then receives, timing each round trip
 * (samples); the responder receives then echoes.  With BEO_MPI_NONBLOCKING each side's
 * receive is posted before its send (the responder's for the next message).  Both sides
 * run lp->warmup round trips first (not timed), then the barrier if asked. */
int beo_mpi_pingpong(beo_mpi_loop *lp, int peer, int initiator);

/* Streaming to `peer` as osu_bw does: windows of `window` non-blocking sends, each window
 * acknowledged by a 4-byte message from the receiver; the sender's elapsed_ns covers
 * every window and its acknowledgement.  The receiver posts a window of receives; with
 * integrity each must land in its own pool slot (BEO_EINVAL when window > slots).
 * lp->warmup messages go first, in windows of their own and not timed, then the barrier
 * if asked (osu_mbw_mr: warm-up, barrier, then the timed windows of every pair). */
int beo_mpi_stream_send(beo_mpi_loop *lp, int peer);
int beo_mpi_stream_recv(beo_mpi_loop *lp, int peer);

/* One exchange per repetition, timed (samples): a message received from each rank of
 * `from` and sent to each rank of `to`, all non-blocking, then waited for together.
 * Bidirectional ping-pong: to = from = {peer}; a ring step: to = {right}, from = {left}
 * (both directions: to = from = {left, right}).  Receives land in slots 1..nfrom after
 * the send's slot: BEO_EINVAL when the pool has fewer than nfrom + 1 slots, or when
 * nto + nfrom > window + 2 (the scratch space). */
int beo_mpi_exchange(beo_mpi_loop *lp, const int *to, int nto, const int *from, int nfrom);

/* HPCC's ring step, both directions: a message to the right neighbour and one to the
 * left, one from each, per repetition (samples; elapsed_ns: the timed repetitions).
 * BEO_RING_SENDRECV: two MPI_Sendrecv (to the right from the left, then to the left from
 * the right); BEO_RING_NONBLOCKING: receives from the left and the right posted, sends to
 * the right and the left, then MPI_Waitall.  Messages to the right carry lp->tag, to the
 * left lp->tag + 1 (so that a ring of two, where left == right, keeps them apart).
 * Buffers: slot 0 to the right, 1 to the left, 2 from the left, 3 from the right
 * (BEO_EINVAL with fewer than 4 pool slots).  lp->warmup steps first (not timed), then
 * the barrier if asked. */
typedef enum { BEO_RING_SENDRECV = 0, BEO_RING_NONBLOCKING = 1 } beo_ring_variant;
int beo_mpi_ring(beo_mpi_loop *lp, int left, int right, beo_ring_variant variant);

/* HPCC's ring measurement as bench_lat_bw does it, with no pause between its parts: the
 * barrier if asked (HPCC: MPI_Allreduce of the loop length), then lp->warmup steps and
 * lp->reps timed steps of the Sendrecv variant (elapsed_ns), then as many of the
 * non-blocking variant (elapsed2_ns).  Samples: 2 x reps entries, Sendrecv's first. */
int beo_mpi_ring_hpcc(beo_mpi_loop *lp, int left, int right);

/* MPI_Barrier on the loop's communicator, timed (elapsed_ns). */
int beo_mpi_barrier(beo_mpi_loop *lp);

#endif
