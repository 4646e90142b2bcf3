/*
 * beoperf C core, MPI traffic patterns of the cluster suite: bidirectional windows
 * (osu_bibw, and every pair of a bisection at once) and the receiving side of an incast
 * (many senders, each streaming as osu_bw does, to one receiver).
 *
 * Like mpiloops.c these loops call the MPI library mpi4py loaded, bound at run time (no
 * MPI headers): this file binds the few functions it needs itself (beo_mpipat_bind), for
 * either ABI (Open MPI: pointer handles; MPICH: int handles).  They take the same loop
 * description as the other MPI loops (beo_mpi_loop: communicator, MPI_BYTE, pool, size,
 * reps, warm-up, barrier, integrity); its `mpi` member is not used, and its scratch space
 * must hold beo_mpipat_scratch_bytes(m, n) for the requests the loop posts at once.
 */
#ifndef BEO_MPIPAT_H
#define BEO_MPIPAT_H

#include "beo_mpi.h"

/* The functions the pattern loops call, as bound. */
typedef struct {
    int ptr_handles;     /* 1: handles are pointers (Open MPI); 0: ints (MPICH ABI) */
    size_t request_size; /* sizeof(MPI_Request) */
    size_t status_size;  /* sizeof(MPI_Status) */
    beo_mpi_fn send, recv, isend, irecv, waitall, barrier, testall;
} beo_mpipat;

#define BEO_MPIPAT_MAX_SENDERS 256 /* an incast's senders at most */

/* Look the functions up in `dl_handle`; 0, or -1 with `missing` naming the first one
 * not found. */
int beo_mpipat_bind(beo_mpipat *m, void *dl_handle, int ptr_handles, size_t request_size,
                    size_t status_size, const char **missing);

/* Bytes of scratch space for `n` requests and their statuses. */
size_t beo_mpipat_scratch_bytes(const beo_mpipat *m, int n);

/* osu_bibw with `peer`: per window, lp->window receives from the peer posted, then
 * lp->window sends to it, then all waited for together (no acknowledgement: both sides
 * do the same).  lp->warmup messages each way first, in windows, not timed, then the
 * barrier if asked, then lp->reps messages each way (elapsed_ns).  Receives land in
 * pool slots 0 .. window - 1; with integrity each send has its own slot (window + j:
 * BEO_EINVAL with fewer than 2 x window slots), without it every send goes from slot
 * `window` (osu's one send buffer; BEO_EINVAL with fewer than window + 1 slots).
 * Scratch: 2 x window requests. */
int beo_mpipat_bibw(const beo_mpipat *m, beo_mpi_loop *lp, int peer);

/* The receiver of an incast: each rank of `from` (at most BEO_MPIPAT_MAX_SENDERS)
 * streams to this one as beo_mpi_stream_send does (windows of lp->window messages, each
 * acknowledged).  A window of receives is posted for every sender, and each sender's
 * windows go on their own: the receiver polls each sender's window in turn
 * (MPI_Testall), and when one is complete posts that sender's next window and
 * acknowledges it, so a slow sender holds back no other.  Warm-up, barrier and timed
 * messages as the senders'; elapsed_ns until every sender's last window arrived.  With
 * integrity each message of a window lands in its own slot (sender s, message j:
 * s x window + j; BEO_EINVAL with fewer slots), without it the senders share the window's
 * slots (as osu's one receive buffer).  Scratch: nfrom x window requests. */
int beo_mpipat_incast_recv(const beo_mpipat *m, beo_mpi_loop *lp, const int *from, int nfrom);

#endif
