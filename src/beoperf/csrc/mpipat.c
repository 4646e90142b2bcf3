/*
 * beoperf C core: the MPI traffic patterns of the cluster suite (bidirectional windows,
 * an incast's receiver), over a library bound at run time.  See beo_mpipat.h.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include "beo_mpipat.h"

#include <dlfcn.h>
#include <limits.h>
#include <string.h>

#define ACK_BYTES 4 /* beo_mpi_stream_send's acknowledgement */

int beo_mpipat_bind(beo_mpipat *m, void *dl, int ptr_handles, size_t request_size,
                    size_t status_size, const char **missing)
{
    static const char *const names[] = {"MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv",
                                        "MPI_Waitall", "MPI_Barrier", "MPI_Testall"};
    beo_mpi_fn *slots[] = {&m->send, &m->recv, &m->isend, &m->irecv, &m->waitall,
                           &m->barrier, &m->testall};
    *missing = NULL;
    if (request_size == 0 || status_size == 0 || status_size > BEO_MPI_STATUS_MAX) {
        *missing = "a plausible sizeof(MPI_Request) and sizeof(MPI_Status)";
        return -1;
    }
    m->ptr_handles = ptr_handles != 0;
    m->request_size = request_size;
    m->status_size = status_size;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void *sym = dlsym(dl, names[i]);
        if (sym == NULL) {
            *missing = names[i];
            return -1;
        }
        memcpy(slots[i], &sym, sizeof(*slots[i])); /* POSIX: dlsym to a function pointer */
    }
    return 0;
}

size_t beo_mpipat_scratch_bytes(const beo_mpipat *m, int n)
{
    return (size_t)(n > 0 ? n : 1) * (m->request_size + m->status_size);
}

/* ------------------------------------------------------------------ calls, per ABI */

typedef int (*send_p)(const void *, int, void *, int, int, void *);
typedef int (*isend_p)(const void *, int, void *, int, int, void *, void *);
typedef int (*irecv_p)(void *, int, void *, int, int, void *, void *);
typedef int (*barrier_p)(void *);
typedef int (*send_i)(const void *, int, int, int, int, int);
typedef int (*isend_i)(const void *, int, int, int, int, int, void *);
typedef int (*irecv_i)(void *, int, int, int, int, int, void *);
typedef int (*barrier_i)(int);
typedef int (*waitall_fn)(int, void *, void *);

#define PTR(h) ((void *)(h))
#define INT(h) ((int)(h))

/* The bound functions, the loop and the requests' count (statuses follow them). */
typedef struct {
    const beo_mpipat *m;
    beo_mpi_loop *lp;
    int nreq;
} ctx;

static int checked(beo_mpi_loop *lp, int rc)
{
    if (rc == 0)
        return BEO_OK;
    lp->mpi_error = rc;
    return BEO_EMPI;
}

static void *request_at(const ctx *c, int i)
{
    return (unsigned char *)c->lp->scratch + (size_t)i * c->m->request_size;
}

static int x_isend(const ctx *c, const void *buf, int peer, void *req)
{
    const beo_mpi_loop *lp = c->lp;
    int n = (int)lp->size;
    if (c->m->ptr_handles)
        return ((isend_p)c->m->isend)(buf, n, PTR(lp->byte), peer, lp->tag, PTR(lp->comm), req);
    return ((isend_i)c->m->isend)(buf, n, INT(lp->byte), peer, lp->tag, INT(lp->comm), req);
}

static int x_irecv(const ctx *c, void *buf, int peer, void *req)
{
    const beo_mpi_loop *lp = c->lp;
    int n = (int)lp->size;
    if (c->m->ptr_handles)
        return ((irecv_p)c->m->irecv)(buf, n, PTR(lp->byte), peer, lp->tag, PTR(lp->comm), req);
    return ((irecv_i)c->m->irecv)(buf, n, INT(lp->byte), peer, lp->tag, INT(lp->comm), req);
}

static int x_ack(const ctx *c, int peer)
{
    static const unsigned char ack[ACK_BYTES] = {0};
    const beo_mpi_loop *lp = c->lp;
    if (c->m->ptr_handles)
        return ((send_p)c->m->send)(ack, ACK_BYTES, PTR(lp->byte), peer, lp->tag + 1,
                                    PTR(lp->comm));
    return ((send_i)c->m->send)(ack, ACK_BYTES, INT(lp->byte), peer, lp->tag + 1,
                                INT(lp->comm));
}

static int x_waitall(const ctx *c, int n)
{
    void *statuses = (unsigned char *)c->lp->scratch + (size_t)c->nreq * c->m->request_size;
    return ((waitall_fn)c->m->waitall)(n, request_at(c, 0), statuses);
}

static int settle(const ctx *c)
{
    const beo_mpi_loop *lp = c->lp;
    if (!lp->barrier)
        return BEO_OK;
    int rc = c->m->ptr_handles ? ((barrier_p)c->m->barrier)(PTR(lp->comm))
                               : ((barrier_i)c->m->barrier)(INT(lp->comm));
    return checked(c->lp, rc);
}

static int valid(const beo_mpi_loop *lp, size_t slots_needed)
{
    if (lp->size > lp->pool->size || lp->size > (size_t)INT_MAX || lp->window < 1 ||
        lp->scratch == NULL || lp->pool->slots < slots_needed)
        return BEO_EINVAL;
    return BEO_OK;
}

static void verify(beo_mpi_loop *lp, const unsigned char *buf, uint64_t m)
{
    if (lp->integrity && !beo_verify(buf, lp->size, lp->seq0 + m))
        lp->corrupt++;
}

typedef int (*windows_fn)(const ctx *, const int *, int, uint64_t, uint64_t);

/* Warm-up windows, the barrier if asked, then the timed windows. */
static int timed(const ctx *c, const int *peers, int npeers, windows_fn windows)
{
    beo_mpi_loop *lp = c->lp;
    int rc = windows(c, peers, npeers, 0, lp->warmup);
    if (rc == BEO_OK)
        rc = settle(c);
    if (rc != BEO_OK)
        return rc;
    uint64_t start = beo_now_ns();
    rc = windows(c, peers, npeers, lp->warmup, lp->reps);
    uint64_t end = beo_now_ns();
    lp->elapsed_ns = end > start ? end - start : 1;
    return rc;
}

/* ------------------------------------------------------------------ bidirectional */

/* Messages first .. first + count - 1 each way, in windows. */
static int bibw_windows(const ctx *c, const int *peers, int npeers, uint64_t first,
                        uint64_t count)
{
    beo_mpi_loop *lp = c->lp;
    int rc = BEO_OK, peer = peers[0], w = lp->window;
    (void)npeers;
    for (uint64_t i = 0; i < count && rc == BEO_OK;) {
        int k = count - i < (uint64_t)w ? (int)(count - i) : w;
        for (int j = 0; j < k && rc == BEO_OK; j++)
            rc = checked(lp, x_irecv(c, beo_pool_msg(lp->pool, (uint64_t)j), peer,
                                     request_at(c, j)));
        for (int j = 0; j < k && rc == BEO_OK; j++) {
            unsigned char *out = beo_pool_msg(lp->pool, (uint64_t)(lp->integrity ? w + j : w));
            if (lp->integrity)
                beo_fill(out, lp->size, lp->seq0 + first + i + (uint64_t)j);
            rc = checked(lp, x_isend(c, out, peer, request_at(c, k + j)));
        }
        if (rc == BEO_OK)
            rc = checked(lp, x_waitall(c, 2 * k));
        for (int j = 0; j < k && rc == BEO_OK; j++)
            verify(lp, beo_pool_msg(lp->pool, (uint64_t)j), first + i + (uint64_t)j);
        i += (uint64_t)k;
    }
    return rc;
}

int beo_mpipat_bibw(const beo_mpipat *m, beo_mpi_loop *lp, int peer)
{
    size_t w = lp->window > 0 ? (size_t)lp->window : 0;
    int rc = valid(lp, lp->integrity ? 2 * w : w + 1);
    if (rc != BEO_OK || peer < 0)
        return rc != BEO_OK ? rc : BEO_EINVAL;
    ctx c = {m, lp, 2 * lp->window};
    return timed(&c, &peer, 1, bibw_windows);
}

/* ------------------------------------------------------------------ incast */

typedef int (*testall_fn)(int, void *, int *, void *);

/* Sender s's next window (at most lp->window of its remaining messages) posted into its
 * own requests (s x window ...); its message count in `pending[s]`. */
static int post_window(const ctx *c, int s, int sender, uint64_t left, int *pending)
{
    beo_mpi_loop *lp = c->lp;
    int rc = BEO_OK, w = lp->window;
    int k = left < (uint64_t)w ? (int)left : w;
    for (int j = 0; j < k && rc == BEO_OK; j++) {
        uint64_t slot = lp->integrity ? (uint64_t)s * (uint64_t)w + (uint64_t)j : (uint64_t)j;
        rc = checked(lp, x_irecv(c, beo_pool_msg(lp->pool, slot), sender,
                                 request_at(c, s * w + j)));
    }
    pending[s] = k;
    return rc;
}

/* Every sender's messages first .. first + count - 1, each sender's windows on their own:
 * a sender's window done (MPI_Testall on its requests, polled in turn), its messages are
 * verified, its next window posted, then its acknowledgement sent. */
static int incast_windows(const ctx *c, const int *from, int nfrom, uint64_t first,
                          uint64_t count)
{
    beo_mpi_loop *lp = c->lp;
    int rc = BEO_OK, w = lp->window, active = 0;
    int pending[BEO_MPIPAT_MAX_SENDERS];
    uint64_t done[BEO_MPIPAT_MAX_SENDERS];
    void *statuses = (unsigned char *)lp->scratch + (size_t)c->nreq * c->m->request_size;
    for (int s = 0; s < nfrom && rc == BEO_OK; s++) {
        done[s] = 0;
        rc = post_window(c, s, from[s], count, pending);
        active += pending[s] > 0;
    }
    while (active > 0 && rc == BEO_OK) {
        for (int s = 0; s < nfrom && rc == BEO_OK; s++) {
            int flag = 0, k = pending[s];
            if (k == 0)
                continue;
            rc = checked(lp, ((testall_fn)c->m->testall)(k, request_at(c, s * w), &flag,
                                                         statuses));
            if (rc != BEO_OK || !flag)
                continue;
            for (int j = 0; j < k && lp->integrity; j++)
                verify(lp, beo_pool_msg(lp->pool, (uint64_t)s * (uint64_t)w + (uint64_t)j),
                       first + done[s] + (uint64_t)j);
            done[s] += (uint64_t)k;
            rc = post_window(c, s, from[s], count - done[s], pending);
            if (rc == BEO_OK)
                rc = checked(lp, x_ack(c, from[s]));
            active -= pending[s] == 0;
        }
    }
    return rc;
}

int beo_mpipat_incast_recv(const beo_mpipat *m, beo_mpi_loop *lp, const int *from, int nfrom)
{
    if (nfrom < 1 || nfrom > BEO_MPIPAT_MAX_SENDERS || lp->window < 1 ||
        nfrom > INT_MAX / lp->window)
        return BEO_EINVAL;
    size_t w = (size_t)lp->window;
    int rc = valid(lp, lp->integrity ? (size_t)nfrom * w : w);
    if (rc != BEO_OK)
        return rc;
    for (int s = 0; s < nfrom; s++)
        if (from[s] < 0)
            return BEO_EINVAL;
    ctx c = {m, lp, nfrom * lp->window};
    return timed(&c, from, nfrom, incast_windows);
}
