/*
 * beoperf C core: ping-pong, streaming and bidirectional loops over a
 * connected stream socket.  See beo.h for the contract.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include "beo.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BEO_DEFAULT_TIMEOUT_MS 30000
#define BEO_MIN_PROGRESS (64 * 1024) /* bytes a transfer must move per timeout */
#define BEO_GOLDEN 0x9E3779B97F4A7C15ULL

uint64_t beo_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t beo_clock_overhead_ns(int rounds)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < rounds; i++) {
        uint64_t a = beo_now_ns();
        uint64_t b = beo_now_ns();
        if (b - a < best)
            best = b - a;
    }
    return best;
}

/* A measured interval is never zero: the clock could not resolve it. */
static uint64_t interval(uint64_t t0, uint64_t t1)
{
    return t1 > t0 ? t1 - t0 : 1;
}

int beo_pool_init(beo_pool *pool, size_t size, size_t span)
{
    void *mem = NULL;
    size_t msg = size ? size : 1;
    pool->size = size;
    pool->stride = (msg + 63) & ~(size_t)63;
    if (span < pool->stride + msg)
        span = pool->stride + msg; /* at least two slots: send and receive apart */
    pool->slots = (span - msg) / pool->stride + 1;
    pool->total = (pool->slots - 1) * pool->stride + msg;
    if (posix_memalign(&mem, 4096, pool->total) != 0)
        return BEO_ENOMEM;
    memset(mem, 0, pool->total); /* fault every page in before timing */
    pool->base = mem;
    return BEO_OK;
}

void beo_pool_free(beo_pool *pool)
{
    free(pool->base);
    pool->base = NULL;
}

unsigned char *beo_pool_msg(const beo_pool *pool, uint64_t index)
{
    return pool->base + (size_t)(index % pool->slots) * pool->stride;
}

static uint64_t mix(uint64_t x)
{
    x += BEO_GOLDEN;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

void beo_fill(unsigned char *buf, size_t len, uint64_t seq)
{
    uint64_t w = mix(seq);
    size_t i = 0;
    for (; i + 8 <= len; i += 8, w += BEO_GOLDEN)
        memcpy(buf + i, &w, 8);
    if (i < len)
        memcpy(buf + i, &w, len - i);
}

int beo_verify(const unsigned char *buf, size_t len, uint64_t seq)
{
    uint64_t w = mix(seq);
    size_t i = 0;
    for (; i + 8 <= len; i += 8, w += BEO_GOLDEN)
        if (memcmp(buf + i, &w, 8) != 0)
            return 0;
    return i >= len || memcmp(buf + i, &w, len - i) == 0;
}

static int timeout_of(const beo_loop *lp)
{
    return lp->timeout_ms > 0 ? lp->timeout_ms : BEO_DEFAULT_TIMEOUT_MS;
}

/* Map a failed send/recv to a loop result; 1 means "retry". */
static int failed(beo_loop *lp, int err)
{
    if (err == EINTR)
        return (lp->interrupted && lp->interrupted(lp->interrupt_ctx)) ? BEO_EINTR : 1;
    if (err == EAGAIN || err == EWOULDBLOCK)
        return BEO_ETIMEOUT;
    if (err == ECONNRESET || err == EPIPE)
        return BEO_ECLOSED;
    lp->errno_out = err;
    return BEO_ESYS;
}

/*
 * The timeout bounds progress, not each system call.  SO_RCVTIMEO/SO_SNDTIMEO (and
 * poll's timeout) bound one wait: a peer that trickled a byte just before each wait ran
 * out would hold a loop forever, as it once held the server's control connection.  So a
 * transfer must move, within every timeout, BEO_MIN_PROGRESS bytes or what it still
 * lacks: 64 KiB per timeout is 17 kbit/s at the server's default 30 s, 2 Mbit/s at 0.25 s,
 * far below any network worth measuring.  Messages are bounded as a whole (a small one
 * must arrive within the timeout), long transfers by their rate.
 *
 * The clock is read only when a call ended with the transfer incomplete: a blocking send
 * that returned early (its timeout passed, or a signal came), a receive that took part of
 * a message (what had arrived), a poll wake-up.  One such return opens a window and a
 * later one judges it.  A clock read (vDSO, tens of ns) is small beside the system call it
 * follows, so the receive's partial returns may pay it.
 */
typedef struct {
    uint64_t start; /* when the window opened; 0: none open */
    size_t base;    /* bytes moved by then */
} progress_window;

/* After a wait that left the transfer incomplete: BEO_ETIMEOUT if a whole timeout
 * has passed since the window opened with too little moved, else 0. */
static int stalled(const beo_loop *lp, progress_window *w, size_t moved, size_t missing)
{
    uint64_t now = beo_now_ns();
    size_t enough = missing < BEO_MIN_PROGRESS ? missing : BEO_MIN_PROGRESS;
    if (w->start == 0 || moved - w->base >= enough) {
        w->start = now;
        w->base = moved;
        return 0;
    }
    /* 7/8: a kernel wait of T may end up to a clock tick short of T */
    return now - w->start >= (uint64_t)timeout_of(lp) * 875000ULL ? BEO_ETIMEOUT : 0;
}

/* Blocking send of len bytes; SO_SNDTIMEO bounds each wait, stalled() the progress. */
static int send_all(beo_loop *lp, const unsigned char *buf, size_t len)
{
    size_t done = 0;
    progress_window w = {0, 0};
    while (done < len) {
        ssize_t n = send(lp->fd, buf + done, len - done, MSG_NOSIGNAL);
        if (n > 0) {
            done += (size_t)n;
            if (done < len && stalled(lp, &w, done, len - done))
                return BEO_ETIMEOUT;
            continue;
        }
        int rc = failed(lp, errno);
        if (rc != 1)
            return rc;
    }
    return BEO_OK;
}

/* Blocking receive of exactly len bytes; SO_RCVTIMEO bounds each wait, stalled() the
 * progress.  Each recv takes what has arrived, as an application's read does (NetPIPE's
 * too), not MSG_WAITALL: on a 1,500 B MTU link, where a large message is hundreds of
 * segments, waiting for the whole of it in the kernel read about 10% less at the peak than
 * taking it as it comes; at 9,000 B and on loopback the plain receive costs 1-3%
 * (bench/RESULTS.md, runs W1 and P6). */
static int recv_all(beo_loop *lp, unsigned char *buf, size_t len)
{
    size_t done = 0;
    progress_window w = {0, 0};
    while (done < len) {
        ssize_t n = recv(lp->fd, buf + done, len - done, 0);
        if (n > 0) {
            done += (size_t)n;
            if (done < len && stalled(lp, &w, done, len - done))
                return BEO_ETIMEOUT;
            continue;
        }
        if (n == 0)
            return BEO_ECLOSED;
        int rc = failed(lp, errno);
        if (rc != 1)
            return rc;
    }
    return BEO_OK;
}

/* The length of this loop's messages: the one asked for, else the pool's. */
static size_t msg_len(const beo_loop *lp)
{
    return lp->size && lp->size <= lp->pool->size ? lp->size : lp->pool->size;
}

static void maybe_corrupt(const beo_loop *lp, unsigned char *buf, uint64_t i)
{
    if (lp->inject_corrupt >= 0 && (uint64_t)lp->inject_corrupt == i && msg_len(lp) > 0)
        buf[msg_len(lp) / 2] ^= 0x5A;
}

/* One timed step of a loop that times every message: out goes, in arrives. */
typedef int (*step_fn)(beo_loop *lp, const unsigned char *out, unsigned char *in, size_t len);

static int send_then_recv(beo_loop *lp, const unsigned char *out, unsigned char *in, size_t len)
{
    int rc = send_all(lp, out, len);
    return rc == BEO_OK ? recv_all(lp, in, len) : rc;
}

/* Fill, time the step, verify: the loop of both the ping-pong client and bidir. */
static int timed_loop(beo_loop *lp, step_fn step)
{
    size_t len = msg_len(lp);
    uint64_t start = beo_now_ns();
    for (uint64_t i = 0; i < lp->reps; i++) {
        unsigned char *out = beo_pool_msg(lp->pool, 2 * i);
        unsigned char *in = beo_pool_msg(lp->pool, 2 * i + 1);
        if (lp->integrity)
            beo_fill(out, len, lp->seq0 + i);
        maybe_corrupt(lp, out, i);
        uint64_t t0 = beo_now_ns();
        int rc = step(lp, out, in, len);
        uint64_t t1 = beo_now_ns();
        if (rc != BEO_OK)
            return rc;
        if (lp->samples)
            lp->samples[i] = interval(t0, t1);
        if (lp->integrity && !beo_verify(in, len, lp->seq0 + i))
            lp->corrupt++;
    }
    lp->elapsed_ns = interval(start, beo_now_ns());
    return BEO_OK;
}

int beo_pingpong_client(beo_loop *lp)
{
    return timed_loop(lp, send_then_recv);
}

int beo_pingpong_server(beo_loop *lp)
{
    size_t len = msg_len(lp);
    uint64_t start = beo_now_ns();
    for (uint64_t i = 0; i < lp->reps; i++) {
        unsigned char *buf = beo_pool_msg(lp->pool, i);
        int rc = recv_all(lp, buf, len);
        if (rc != BEO_OK)
            return rc;
        if (lp->integrity && !beo_verify(buf, len, lp->seq0 + i))
            lp->corrupt++;
        maybe_corrupt(lp, buf, i);
        rc = send_all(lp, buf, len);
        if (rc != BEO_OK)
            return rc;
    }
    lp->elapsed_ns = interval(start, beo_now_ns());
    return BEO_OK;
}

int beo_stream_send(beo_loop *lp)
{
    unsigned char go;
    int rc = recv_all(lp, &go, 1);
    if (rc != BEO_OK)
        return rc;
    uint64_t start = beo_now_ns();
    for (uint64_t i = 0; i < lp->reps && rc == BEO_OK; i++) {
        unsigned char *out = beo_pool_msg(lp->pool, i);
        if (lp->integrity)
            beo_fill(out, msg_len(lp), lp->seq0 + i);
        maybe_corrupt(lp, out, i);
        rc = send_all(lp, out, msg_len(lp));
    }
    lp->elapsed_ns = interval(start, beo_now_ns());
    return rc;
}

int beo_stream_recv(beo_loop *lp)
{
    unsigned char go = 'G';
    int rc = send_all(lp, &go, 1);
    uint64_t start = beo_now_ns();
    for (uint64_t i = 0; i < lp->reps && rc == BEO_OK; i++) {
        unsigned char *in = beo_pool_msg(lp->pool, i);
        rc = recv_all(lp, in, msg_len(lp));
        if (rc == BEO_OK)
            maybe_corrupt(lp, in, i); /* as if damaged on the way in */
        if (rc == BEO_OK && lp->integrity && !beo_verify(in, msg_len(lp), lp->seq0 + i))
            lp->corrupt++;
    }
    lp->elapsed_ns = interval(start, beo_now_ns());
    return rc;
}

/* One bidirectional exchange: send `out` and receive `in` concurrently with
 * non-blocking calls, so two large messages cannot deadlock on full buffers. */
static int exchange(beo_loop *lp, const unsigned char *out, unsigned char *in, size_t len)
{
    size_t sent = 0, got = 0;
    progress_window w = {0, 0};
    for (int first = 1; sent < len || got < len; first = 0) {
        if (!first && stalled(lp, &w, sent + got, 2 * len - sent - got))
            return BEO_ETIMEOUT;
        struct pollfd p = {.fd = lp->fd, .events = 0};
        p.events = (short)((sent < len ? POLLOUT : 0) | (got < len ? POLLIN : 0));
        int r = poll(&p, 1, timeout_of(lp));
        if (r == 0)
            return BEO_ETIMEOUT;
        if (r < 0) {
            int rc = failed(lp, errno);
            if (rc != 1)
                return rc;
            continue;
        }
        if (sent < len && (p.revents & (POLLOUT | POLLERR))) {
            ssize_t n = send(lp->fd, out + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return failed(lp, errno);
            sent += n > 0 ? (size_t)n : 0;
        }
        if (got < len && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = recv(lp->fd, in + got, len - got, MSG_DONTWAIT);
            if (n == 0)
                return BEO_ECLOSED;
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return failed(lp, errno);
            got += n > 0 ? (size_t)n : 0;
        }
    }
    return BEO_OK;
}

int beo_bidir(beo_loop *lp)
{
    return timed_loop(lp, exchange);
}
