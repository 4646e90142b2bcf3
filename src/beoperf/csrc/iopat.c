/*
 * PMAC I/O Bench's six patterns over one open file, block by block: sequential write and
 * read, backward write and read (last block first), random read and random read-rewrite
 * (read a block, write it back in place), the random ones visiting every block once in a
 * seeded random order.  The buffer is page-aligned so that an O_DIRECT descriptor works;
 * the caller may ask for an fsync inside the timing of writes (the data must have left
 * the node, not only reached a cache) and drops the file's cached pages before reads.  Every 256 blocks the interrupt callback may stop the pattern.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node.h"

#define CHECK_EVERY 256

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint64_t *order(int pattern, uint64_t n, uint64_t seed)
{
    uint64_t *idx = malloc((size_t)n * sizeof(uint64_t));
    if (!idx)
        return NULL;
    int backward = pattern == BEO_IO_BACK_WRITE || pattern == BEO_IO_BACK_READ;
    for (uint64_t i = 0; i < n; i++)
        idx[i] = backward ? n - 1 - i : i;
    if (pattern == BEO_IO_RAND_READ || pattern == BEO_IO_RAND_REWRITE) {
        uint64_t s = seed ? seed : 0x9E3779B97F4A7C15ULL;
        for (uint64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
            uint64_t j = xorshift(&s) % (i + 1), t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
    }
    return idx;
}

/* One whole block at `off`: 0, BEO_ESYS with errno (0 for a short read: file too short). */
static int one(int fd, unsigned char *buf, size_t len, off_t off, int write, int *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = write ? pwrite(fd, buf + done, len - done, off + (off_t)done)
                          : pread(fd, buf + done, len - done, off + (off_t)done);
        if (k < 0 && errno == EINTR)
            return BEO_EINTR;
        if (k < 0) {
            *err = errno;
            return BEO_ESYS;
        }
        if (k == 0) {
            *err = 0;
            return BEO_ESYS;
        }
        done += (size_t)k;
    }
    return BEO_OK;
}

static int walk(beo_io_run *run, const uint64_t *idx, unsigned char *buf)
{
    int writes = run->pattern == BEO_IO_SEQ_WRITE || run->pattern == BEO_IO_BACK_WRITE;
    int rewrite = run->pattern == BEO_IO_RAND_REWRITE;
    for (uint64_t i = 0; i < run->nblocks; i++) {
        off_t off = (off_t)(idx[i] * run->block);
        int rc = one(run->fd, buf, run->block, off, writes, &run->errno_out);
        if (rc == BEO_OK && rewrite)
            rc = one(run->fd, buf, run->block, off, 1, &run->errno_out);
        if (rc == BEO_EINTR && run->interrupted && run->interrupted(run->interrupt_ctx))
            return BEO_EINTR;
        if (rc == BEO_EINTR) {
            i--; /* a signal nobody acted on: do the block again */
            continue;
        }
        if (rc != BEO_OK)
            return rc;
        run->bytes += run->block; /* read-rewrite: each block of the file counted once */
        if (i % CHECK_EVERY == CHECK_EVERY - 1 && run->interrupted &&
            run->interrupted(run->interrupt_ctx))
            return BEO_EINTR;
    }
    if ((writes || rewrite) && run->sync && fsync(run->fd) != 0) {
        run->errno_out = errno;
        return BEO_ESYS;
    }
    return BEO_OK;
}

int beo_io(beo_io_run *run)
{
    if (run->pattern < 0 || run->pattern >= BEO_IO_PATTERNS || run->block < 1 || run->nblocks < 1)
        return BEO_ESYS;
    unsigned char *buf = NULL;
    size_t page = 4096, len = (run->block + page - 1) / page * page;
    if (posix_memalign((void **)&buf, page, len))
        return BEO_ENOMEM;
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)(i * 31 + 7);
    uint64_t *idx = order(run->pattern, run->nblocks, run->seed);
    if (!idx) {
        free(buf);
        return BEO_ENOMEM;
    }
    run->bytes = 0;
    run->errno_out = 0;
    uint64_t t0 = beo_now_ns();
    int rc = walk(run, idx, buf);
    uint64_t t1 = beo_now_ns();
    run->elapsed_ns = t1 > t0 ? t1 - t0 : 1;
    free(idx);
    free(buf);
    return rc;
}
