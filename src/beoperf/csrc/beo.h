/*
 * beoperf C core: the timing-critical loops.
 *
 * Every transport loop works on a connected stream socket and a buffer pool,
 * and returns 0 or a negative BEO_E* code; nothing here exits, prints or keeps
 * global state.  Times come from CLOCK_MONOTONIC in nanoseconds.
 */
#ifndef BEO_H
#define BEO_H

#include <stddef.h>
#include <stdint.h>

enum beo_err {
    BEO_OK = 0,
    BEO_ESYS = -1,       /* a system call failed; errno_out holds errno */
    BEO_ECLOSED = -2,    /* the peer closed the connection mid-message */
    BEO_ETIMEOUT = -3,   /* too little progress within timeout_ms */
    BEO_EINTR = -4,      /* the interrupt callback asked to stop */
    BEO_ENOMEM = -5,
};

/* A message buffer pool.  Without nocache it is two buffers of `size` bytes
 * (what is sent and what arrives never share memory, as in NetPIPE's separate
 * send and receive buffers); with nocache it spans more memory than the
 * last-level cache and message i
 * starts at offset (i * stride) mod span, so consecutive messages never hit
 * warm cache lines. */
typedef struct {
    unsigned char *base;
    size_t total;   /* bytes allocated */
    size_t size;    /* message size */
    size_t stride;  /* distance between consecutive messages, 64-byte aligned */
    size_t slots;   /* number of distinct message positions */
} beo_pool;

/* Called when a system call returned EINTR; nonzero aborts the loop. */
typedef int (*beo_interrupt_fn)(void *ctx);

typedef struct {
    int fd;
    beo_pool *pool;
    size_t size;             /* message length, at most pool->size; 0 = pool->size */
    uint64_t reps;
    uint64_t seq0;           /* sequence number of the first message (integrity) */
    int integrity;           /* fill and verify every message */
    int timeout_ms;          /* per wait, and per 64 KiB of progress (loops.c); <= 0: 30 s */
    int64_t inject_corrupt;  /* test hook: corrupt outgoing message with this index, -1 = never */
    uint64_t *samples;       /* out: reps entries (ns), may be NULL for untimed roles */
    uint64_t elapsed_ns;     /* out: whole loop time */
    uint64_t corrupt;        /* out: messages that failed verification */
    int errno_out;           /* out: errno of a BEO_ESYS failure */
    beo_interrupt_fn interrupted;
    void *interrupt_ctx;
} beo_loop;

uint64_t beo_now_ns(void);
uint64_t beo_clock_overhead_ns(int rounds);

int beo_pool_init(beo_pool *pool, size_t size, size_t span);
void beo_pool_free(beo_pool *pool);
unsigned char *beo_pool_msg(const beo_pool *pool, uint64_t index);

void beo_fill(unsigned char *buf, size_t len, uint64_t seq);
int beo_verify(const unsigned char *buf, size_t len, uint64_t seq);

/* Ping-pong: the client sends then receives and times each round trip;
 * the server receives then echoes. */
int beo_pingpong_client(beo_loop *lp);
int beo_pingpong_server(beo_loop *lp);

/* Streaming: the receiver writes a one-byte go signal, then times the arrival
 * of reps messages (elapsed_ns); the sender waits for go, then sends. */
int beo_stream_send(beo_loop *lp);
int beo_stream_recv(beo_loop *lp);

/* Bidirectional: both ends send and receive a message at once, each
 * iteration timed (samples) on whichever end passes a samples array. */
int beo_bidir(beo_loop *lp);

#endif
