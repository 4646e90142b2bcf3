/*
 * beoperf C core: MPI loops over a library bound at run time.  See beo_mpi.h.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include "beo_mpi.h"

#include <dlfcn.h>
#include <limits.h>
#include <string.h>

/* ------------------------------------------------------------------ binding */

static int lookup(void *dl, const char *name, beo_mpi_fn *out, const char **missing)
{
    void *sym = dlsym(dl, name);
    if (sym == NULL) {
        *missing = name;
        return -1;
    }
    /* POSIX: a dlsym result may be converted to a function pointer */
    memcpy(out, &sym, sizeof(*out));
    return 0;
}

int beo_mpi_bind(beo_mpi *m, void *dl, int ptr_handles, size_t request_size,
                 size_t status_size, const char **missing)
{
    static const char *const names[] = {
        "MPI_Send", "MPI_Ssend", "MPI_Recv", "MPI_Isend", "MPI_Issend", "MPI_Irecv",
        "MPI_Wait", "MPI_Waitall", "MPI_Barrier", "MPI_Initialized", "MPI_Finalized",
        "MPI_Get_library_version", "MPI_Sendrecv",
    };
    beo_mpi_fn *slots[] = {
        &m->send, &m->ssend, &m->recv, &m->isend, &m->issend, &m->irecv,
        &m->wait, &m->waitall, &m->barrier, &m->initialized, &m->finalized,
        &m->get_library_version, &m->sendrecv,
    };
    *missing = NULL;
    if (request_size == 0 || status_size == 0 || status_size > BEO_MPI_STATUS_MAX) {
        *missing = "a plausible sizeof(MPI_Request) and sizeof(MPI_Status)";
        return -1;
    }
    m->ptr_handles = ptr_handles != 0;
    m->request_size = request_size;
    m->status_size = status_size;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (lookup(dl, names[i], slots[i], missing) != 0)
            return -1;
    return 0;
}

typedef int (*flag_fn)(int *);

int beo_mpi_ready(const beo_mpi *m)
{
    int init = 0, fin = 0;
    if (((flag_fn)m->initialized)(&init) != 0 || ((flag_fn)m->finalized)(&fin) != 0)
        return -1;
    return init && !fin;
}

typedef int (*version_fn)(char *, int *);

int beo_mpi_library_version(const beo_mpi *m, char *buf, size_t len)
{
    /* MPI_MAX_LIBRARY_VERSION_STRING is 256 in Open MPI, 8192 in MPICH */
    char tmp[16384];
    int n = 0;
    int rc = ((version_fn)m->get_library_version)(tmp, &n);
    if (rc != 0)
        return rc;
    if (n < 0 || (size_t)n >= sizeof(tmp))
        n = (int)strnlen(tmp, sizeof(tmp) - 1);
    size_t k = (size_t)n < len - 1 ? (size_t)n : len - 1;
    memcpy(buf, tmp, k);
    buf[k] = '\0';
    return 0;
}

/* ------------------------------------------------------------------ calls, per ABI */

/* Open MPI: handles are pointers */
typedef int (*send_p)(const void *, int, void *, int, int, void *);
typedef int (*recv_p)(void *, int, void *, int, int, void *, void *);
typedef int (*isend_p)(const void *, int, void *, int, int, void *, void *);
typedef int (*irecv_p)(void *, int, void *, int, int, void *, void *);
typedef int (*barrier_p)(void *);
typedef int (*sendrecv_p)(const void *, int, void *, int, int, void *, int, void *, int, int,
                          void *, void *);
/* MPICH ABI: handles are ints */
typedef int (*send_i)(const void *, int, int, int, int, int);
typedef int (*recv_i)(void *, int, int, int, int, int, void *);
typedef int (*isend_i)(const void *, int, int, int, int, int, void *);
typedef int (*irecv_i)(void *, int, int, int, int, int, void *);
typedef int (*barrier_i)(int);
typedef int (*sendrecv_i)(const void *, int, int, int, int, void *, int, int, int, int, int,
                          void *);
/* the same in both: requests and statuses are passed by address */
typedef int (*wait_fn)(void *, void *);
typedef int (*waitall_fn)(int, void *, void *);

#define PTR(h) ((void *)(h))
#define INT(h) ((int)(h))

static int x_send(const beo_mpi_loop *lp, const void *buf, int n, int peer, int tag)
{
    const beo_mpi *m = lp->mpi;
    beo_mpi_fn fn = (lp->flags & BEO_MPI_SYNC) ? m->ssend : m->send;
    if (m->ptr_handles)
        return ((send_p)fn)(buf, n, PTR(lp->byte), peer, tag, PTR(lp->comm));
    return ((send_i)fn)(buf, n, INT(lp->byte), peer, tag, INT(lp->comm));
}

/* a small control message (acknowledgement): always a standard send */
static int x_send_plain(const beo_mpi_loop *lp, const void *buf, int n, int peer, int tag)
{
    const beo_mpi *m = lp->mpi;
    if (m->ptr_handles)
        return ((send_p)m->send)(buf, n, PTR(lp->byte), peer, tag, PTR(lp->comm));
    return ((send_i)m->send)(buf, n, INT(lp->byte), peer, tag, INT(lp->comm));
}

static int x_recv(const beo_mpi_loop *lp, void *buf, int n, int peer, int tag, void *status)
{
    const beo_mpi *m = lp->mpi;
    if (m->ptr_handles)
        return ((recv_p)m->recv)(buf, n, PTR(lp->byte), peer, tag, PTR(lp->comm), status);
    return ((recv_i)m->recv)(buf, n, INT(lp->byte), peer, tag, INT(lp->comm), status);
}

static int x_isend(const beo_mpi_loop *lp, const void *buf, int n, int peer, int tag, void *req)
{
    const beo_mpi *m = lp->mpi;
    beo_mpi_fn fn = (lp->flags & BEO_MPI_SYNC) ? m->issend : m->isend;
    if (m->ptr_handles)
        return ((isend_p)fn)(buf, n, PTR(lp->byte), peer, tag, PTR(lp->comm), req);
    return ((isend_i)fn)(buf, n, INT(lp->byte), peer, tag, INT(lp->comm), req);
}

static int x_irecv(const beo_mpi_loop *lp, void *buf, int n, int peer, int tag, void *req)
{
    const beo_mpi *m = lp->mpi;
    if (m->ptr_handles)
        return ((irecv_p)m->irecv)(buf, n, PTR(lp->byte), peer, tag, PTR(lp->comm), req);
    return ((irecv_i)m->irecv)(buf, n, INT(lp->byte), peer, tag, INT(lp->comm), req);
}

static int x_wait(const beo_mpi_loop *lp, void *req, void *status)
{
    return ((wait_fn)lp->mpi->wait)(req, status);
}

static int x_waitall(const beo_mpi_loop *lp, int n, void *reqs, void *statuses)
{
    return ((waitall_fn)lp->mpi->waitall)(n, reqs, statuses);
}

static int x_barrier(const beo_mpi_loop *lp)
{
    const beo_mpi *m = lp->mpi;
    if (m->ptr_handles)
        return ((barrier_p)m->barrier)(PTR(lp->comm));
    return ((barrier_i)m->barrier)(INT(lp->comm));
}

/* MPI_Sendrecv of n bytes: `out` to `dest` with `tag`, `in` from `source` with `tag` */
static int x_sendrecv(const beo_mpi_loop *lp, const void *out, int dest, void *in, int source,
                      int n, int tag, void *status)
{
    const beo_mpi *m = lp->mpi;
    if (m->ptr_handles)
        return ((sendrecv_p)m->sendrecv)(out, n, PTR(lp->byte), dest, tag, in, n, PTR(lp->byte),
                                         source, tag, PTR(lp->comm), status);
    return ((sendrecv_i)m->sendrecv)(out, n, INT(lp->byte), dest, tag, in, n, INT(lp->byte),
                                     source, tag, INT(lp->comm), status);
}

/* ------------------------------------------------------------------ helpers */

size_t beo_mpi_scratch_bytes(const beo_mpi *m, int n)
{
    return (size_t)(n > 0 ? n : 1) * (m->request_size + m->status_size);
}

static unsigned char *request_at(const beo_mpi_loop *lp, int i)
{
    return (unsigned char *)lp->scratch + (size_t)i * lp->mpi->request_size;
}

static void *statuses(const beo_mpi_loop *lp)
{
    return (unsigned char *)lp->scratch + (size_t)(lp->window + 2) * lp->mpi->request_size;
}

/* A measured interval is never zero: the clock could not resolve it. */
static uint64_t interval(uint64_t t0, uint64_t t1)
{
    return t1 > t0 ? t1 - t0 : 1;
}

static int checked(beo_mpi_loop *lp, int rc)
{
    if (rc == 0)
        return BEO_OK;
    lp->mpi_error = rc;
    return BEO_EMPI;
}

static int valid(const beo_mpi_loop *lp)
{
    if (lp->size > lp->pool->size || lp->size > (size_t)INT_MAX || lp->window < 1 ||
        lp->scratch == NULL || lp->pool->slots < 2)
        return BEO_EINVAL;
    return BEO_OK;
}

static void fill(const beo_mpi_loop *lp, unsigned char *buf, uint64_t i)
{
    if (lp->integrity)
        beo_fill(buf, lp->size, lp->seq0 + i);
}

static void verify(beo_mpi_loop *lp, const unsigned char *buf, uint64_t i)
{
    if (lp->integrity && !beo_verify(buf, lp->size, lp->seq0 + i))
        lp->corrupt++;
}

/* The barrier between the warm-up and the timed repetitions, when asked for. */
static int settle(beo_mpi_loop *lp)
{
    return lp->barrier ? checked(lp, x_barrier(lp)) : BEO_OK;
}

/* ------------------------------------------------------------------ ping-pong */

static int round_trip(beo_mpi_loop *lp, const unsigned char *out, unsigned char *in, int peer)
{
    unsigned char status[BEO_MPI_STATUS_MAX];
    int n = (int)lp->size;
    if (lp->flags & BEO_MPI_NONBLOCKING) {
        void *req = request_at(lp, 0);
        int rc = checked(lp, x_irecv(lp, in, n, peer, lp->tag, req));
        if (rc == BEO_OK)
            rc = checked(lp, x_send(lp, out, n, peer, lp->tag));
        return rc == BEO_OK ? checked(lp, x_wait(lp, req, status)) : rc;
    }
    int rc = checked(lp, x_send(lp, out, n, peer, lp->tag));
    return rc == BEO_OK ? checked(lp, x_recv(lp, in, n, peer, lp->tag, status)) : rc;
}

/* Message j of the session (warm-up ones first): sent from slot 2j, echoed into 2j + 1. */
static int initiate_one(beo_mpi_loop *lp, int peer, uint64_t j, uint64_t *took)
{
    unsigned char *out = beo_pool_msg(lp->pool, 2 * j);
    unsigned char *in = beo_pool_msg(lp->pool, 2 * j + 1);
    fill(lp, out, j);
    uint64_t t0 = beo_now_ns();
    int rc = round_trip(lp, out, in, peer);
    *took = interval(t0, beo_now_ns());
    if (rc == BEO_OK)
        verify(lp, in, j);
    return rc;
}

static int initiate(beo_mpi_loop *lp, int peer)
{
    uint64_t took;
    int rc = BEO_OK;
    for (uint64_t j = 0; j < lp->warmup && rc == BEO_OK; j++)
        rc = initiate_one(lp, peer, j, &took);
    if (rc == BEO_OK)
        rc = settle(lp);
    if (rc != BEO_OK)
        return rc;
    uint64_t start = beo_now_ns();
    for (uint64_t i = 0; i < lp->reps; i++) {
        rc = initiate_one(lp, peer, lp->warmup + i, &took);
        if (rc != BEO_OK)
            return rc;
        if (lp->samples)
            lp->samples[i] = took;
    }
    lp->elapsed_ns = interval(start, beo_now_ns());
    return BEO_OK;
}

/* The responder echoes what it received from the same buffer; non-blocking, the next
 * message's receive is posted (into the other slot) before the echo goes out. */
static int respond(beo_mpi_loop *lp, int peer)
{
    unsigned char status[BEO_MPI_STATUS_MAX];
    int n = (int)lp->size, nb = (lp->flags & BEO_MPI_NONBLOCKING) != 0, rc = BEO_OK;
    uint64_t start = beo_now_ns(), total = lp->warmup + lp->reps;
    if (nb && total > 0)
        rc = checked(lp, x_irecv(lp, beo_pool_msg(lp->pool, 0), n, peer, lp->tag,
                                 request_at(lp, 0)));
    for (uint64_t i = 0; i < total && rc == BEO_OK; i++) {
        unsigned char *buf = beo_pool_msg(lp->pool, i);
        void *req = request_at(lp, (int)(i & 1));
        if (i == lp->warmup && (rc = settle(lp)) != BEO_OK)
            break;
        rc = nb ? checked(lp, x_wait(lp, req, status))
                : checked(lp, x_recv(lp, buf, n, peer, lp->tag, status));
        if (rc != BEO_OK)
            break;
        verify(lp, buf, i);
        if (nb && i + 1 < total)
            rc = checked(lp, x_irecv(lp, beo_pool_msg(lp->pool, i + 1), n, peer, lp->tag,
                                     request_at(lp, (int)((i + 1) & 1))));
        if (rc == BEO_OK)
            rc = checked(lp, x_send(lp, buf, n, peer, lp->tag));
    }
    lp->elapsed_ns = interval(start, beo_now_ns());
    return rc;
}

int beo_mpi_pingpong(beo_mpi_loop *lp, int peer, int initiator)
{
    int rc = valid(lp);
    if (rc != BEO_OK)
        return rc;
    return initiator ? initiate(lp, peer) : respond(lp, peer);
}

/* ------------------------------------------------------------------ streaming */

#define ACK_BYTES 4

/* Messages first .. first + count - 1 of the session, in windows, each acknowledged. */
static int send_windows(beo_mpi_loop *lp, int peer, uint64_t first, uint64_t count)
{
    unsigned char ack[ACK_BYTES], status[BEO_MPI_STATUS_MAX];
    int rc = BEO_OK, n = (int)lp->size;
    for (uint64_t i = 0; i < count && rc == BEO_OK;) {
        int k = count - i < (uint64_t)lp->window ? (int)(count - i) : lp->window;
        for (int j = 0; j < k && rc == BEO_OK; j++) {
            uint64_t m = first + i + (uint64_t)j;
            unsigned char *out = beo_pool_msg(lp->pool, m);
            fill(lp, out, m);
            rc = checked(lp, x_isend(lp, out, n, peer, lp->tag, request_at(lp, j)));
        }
        if (rc == BEO_OK)
            rc = checked(lp, x_waitall(lp, k, request_at(lp, 0), statuses(lp)));
        if (rc == BEO_OK)
            rc = checked(lp, x_recv(lp, ack, ACK_BYTES, peer, lp->tag + 1, status));
        i += (uint64_t)k;
    }
    return rc;
}

static int recv_windows(beo_mpi_loop *lp, int peer, uint64_t first, uint64_t count)
{
    unsigned char ack[ACK_BYTES] = {0};
    int rc = BEO_OK, n = (int)lp->size;
    for (uint64_t i = 0; i < count && rc == BEO_OK;) {
        int k = count - i < (uint64_t)lp->window ? (int)(count - i) : lp->window;
        for (int j = 0; j < k && rc == BEO_OK; j++)
            rc = checked(lp, x_irecv(lp, beo_pool_msg(lp->pool, first + i + (uint64_t)j), n,
                                     peer, lp->tag, request_at(lp, j)));
        if (rc == BEO_OK)
            rc = checked(lp, x_waitall(lp, k, request_at(lp, 0), statuses(lp)));
        for (int j = 0; j < k && rc == BEO_OK; j++) {
            uint64_t m = first + i + (uint64_t)j;
            verify(lp, beo_pool_msg(lp->pool, m), m);
        }
        if (rc == BEO_OK)
            rc = checked(lp, x_send_plain(lp, ack, ACK_BYTES, peer, lp->tag + 1));
        i += (uint64_t)k;
    }
    return rc;
}

typedef int (*windows_fn)(beo_mpi_loop *, int, uint64_t, uint64_t);

/* Warm-up windows, the barrier if asked, then the timed windows. */
static int stream(beo_mpi_loop *lp, int peer, windows_fn windows)
{
    int rc = windows(lp, peer, 0, lp->warmup);
    if (rc == BEO_OK)
        rc = settle(lp);
    if (rc != BEO_OK)
        return rc;
    uint64_t start = beo_now_ns();
    rc = windows(lp, peer, lp->warmup, lp->reps);
    lp->elapsed_ns = interval(start, beo_now_ns());
    return rc;
}

int beo_mpi_stream_send(beo_mpi_loop *lp, int peer)
{
    int rc = valid(lp);
    return rc == BEO_OK ? stream(lp, peer, send_windows) : rc;
}

int beo_mpi_stream_recv(beo_mpi_loop *lp, int peer)
{
    int rc = valid(lp);
    if (rc != BEO_OK)
        return rc;
    if (lp->integrity && (size_t)lp->window > lp->pool->slots)
        return BEO_EINVAL; /* two receives of a window would share a buffer */
    return stream(lp, peer, recv_windows);
}

/* ------------------------------------------------------------------ exchanges */

int beo_mpi_exchange(beo_mpi_loop *lp, const int *to, int nto, const int *from, int nfrom)
{
    int rc = valid(lp), n = (int)lp->size;
    if (rc != BEO_OK)
        return rc;
    if (nto < 0 || nfrom < 0 || nto + nfrom < 1 || nto + nfrom > lp->window + 2 ||
        lp->pool->slots < (size_t)nfrom + 1)
        return BEO_EINVAL;
    uint64_t start = beo_now_ns(), stride = (uint64_t)nfrom + 1;
    for (uint64_t i = 0; i < lp->reps; i++) {
        unsigned char *out = beo_pool_msg(lp->pool, stride * i);
        fill(lp, out, i);
        uint64_t t0 = beo_now_ns();
        for (int j = 0; j < nfrom && rc == BEO_OK; j++)
            rc = checked(lp, x_irecv(lp, beo_pool_msg(lp->pool, stride * i + 1 + (uint64_t)j),
                                     n, from[j], lp->tag, request_at(lp, j)));
        for (int j = 0; j < nto && rc == BEO_OK; j++)
            rc = checked(lp, x_isend(lp, out, n, to[j], lp->tag, request_at(lp, nfrom + j)));
        if (rc == BEO_OK)
            rc = checked(lp, x_waitall(lp, nfrom + nto, request_at(lp, 0), statuses(lp)));
        uint64_t t1 = beo_now_ns();
        if (rc != BEO_OK)
            return rc;
        if (lp->samples)
            lp->samples[i] = interval(t0, t1);
        for (int j = 0; j < nfrom; j++)
            verify(lp, beo_pool_msg(lp->pool, stride * i + 1 + (uint64_t)j), i);
    }
    lp->elapsed_ns = interval(start, beo_now_ns());
    return BEO_OK;
}

/* ------------------------------------------------------------------ rings */

/* A ring's two neighbours and four buffers (see beo_mpi.h), found once per loop. */
typedef struct {
    int left, right;
    unsigned char *to_right, *to_left, *from_left, *from_right;
} ring_ends;

static ring_ends ends_of(const beo_mpi_loop *lp, int left, int right)
{
    return (ring_ends){left, right, beo_pool_msg(lp->pool, 0), beo_pool_msg(lp->pool, 1),
                       beo_pool_msg(lp->pool, 2), beo_pool_msg(lp->pool, 3)};
}

/* One step of the ring, both directions; message i of the session. */
static int ring_step(beo_mpi_loop *lp, const ring_ends *e, beo_ring_variant variant,
                     uint64_t i)
{
    unsigned char status[BEO_MPI_STATUS_MAX];
    int n = (int)lp->size, rc;
    fill(lp, e->to_right, i);
    fill(lp, e->to_left, i);
    if (variant == BEO_RING_SENDRECV) {
        rc = checked(lp, x_sendrecv(lp, e->to_right, e->right, e->from_left, e->left, n,
                                    lp->tag, status));
        if (rc == BEO_OK)
            rc = checked(lp, x_sendrecv(lp, e->to_left, e->left, e->from_right, e->right, n,
                                        lp->tag + 1, status));
    } else {
        rc = checked(lp, x_irecv(lp, e->from_left, n, e->left, lp->tag, request_at(lp, 0)));
        if (rc == BEO_OK)
            rc = checked(lp, x_irecv(lp, e->from_right, n, e->right, lp->tag + 1,
                                     request_at(lp, 1)));
        if (rc == BEO_OK)
            rc = checked(lp, x_isend(lp, e->to_right, n, e->right, lp->tag, request_at(lp, 2)));
        if (rc == BEO_OK)
            rc = checked(lp, x_isend(lp, e->to_left, n, e->left, lp->tag + 1,
                                     request_at(lp, 3)));
        if (rc == BEO_OK)
            rc = checked(lp, x_waitall(lp, 4, request_at(lp, 0), statuses(lp)));
    }
    if (rc == BEO_OK) {
        verify(lp, e->from_left, i);
        verify(lp, e->from_right, i);
    }
    return rc;
}

static int ring_valid(const beo_mpi_loop *lp, int left, int right)
{
    int rc = valid(lp);
    if (rc == BEO_OK && (lp->pool->slots < 4 || lp->window < 2 || left < 0 || right < 0))
        rc = BEO_EINVAL;
    return rc;
}

/* lp->warmup untimed steps, the barrier if `settled` asks, then lp->reps timed steps
 * (the loop's time into `elapsed`; each step's into `samples` if it is not NULL: without
 * samples the clock is read only around the loop, as HPCC reads MPI_Wtime, for a step of a
 * ring on one host is a few clock reads long). */
static int ring_loop(beo_mpi_loop *lp, int left, int right, beo_ring_variant variant,
                     int settled, uint64_t *samples, uint64_t *elapsed)
{
    ring_ends e = ends_of(lp, left, right);
    int rc = BEO_OK;
    for (uint64_t w = 0; w < lp->warmup && rc == BEO_OK; w++)
        rc = ring_step(lp, &e, variant, w);
    if (rc == BEO_OK && settled)
        rc = settle(lp);
    if (rc != BEO_OK)
        return rc;
    uint64_t start = beo_now_ns();
    for (uint64_t i = 0; i < lp->reps && rc == BEO_OK; i++) {
        if (!samples) {
            rc = ring_step(lp, &e, variant, lp->warmup + i);
            continue;
        }
        uint64_t t0 = beo_now_ns();
        rc = ring_step(lp, &e, variant, lp->warmup + i);
        samples[i] = interval(t0, beo_now_ns());
    }
    *elapsed = interval(start, beo_now_ns());
    return rc;
}

int beo_mpi_ring(beo_mpi_loop *lp, int left, int right, beo_ring_variant variant)
{
    int rc = ring_valid(lp, left, right);
    if (rc != BEO_OK)
        return rc;
    if (variant != BEO_RING_SENDRECV && variant != BEO_RING_NONBLOCKING)
        return BEO_EINVAL;
    return ring_loop(lp, left, right, variant, 1, lp->samples, &lp->elapsed_ns);
}

int beo_mpi_ring_hpcc(beo_mpi_loop *lp, int left, int right)
{
    int rc = ring_valid(lp, left, right);
    if (rc == BEO_OK)
        rc = settle(lp);
    if (rc == BEO_OK)
        rc = ring_loop(lp, left, right, BEO_RING_SENDRECV, 0, lp->samples, &lp->elapsed_ns);
    if (rc == BEO_OK)
        rc = ring_loop(lp, left, right, BEO_RING_NONBLOCKING, 0,
                       lp->samples ? lp->samples + lp->reps : NULL, &lp->elapsed2_ns);
    return rc;
}

int beo_mpi_barrier(beo_mpi_loop *lp)
{
    uint64_t start = beo_now_ns();
    int rc = checked(lp, x_barrier(lp));
    lp->elapsed_ns = interval(start, beo_now_ns());
    return rc;
}
