/*
 * RandomAccess as HPC Challenge defines it: a table of 2^n 64-bit words, T[i] = i, and
 * 4 x 2^n updates T[x & (2^n - 1)] ^= x, x running through the sequence
 * x -> (x << 1) ^ (x < 0 ? 7 : 0) in 128 interleaved streams, stream j starting at element
 * j x (updates / 128) (beo_gups_starts jumps there in O(64^2)).  GUPS = updates / time /
 * 1e9.  Check: the same updates applied once more (XOR undoes itself) must give T[i] = i;
 * threads racing on a word may lose updates, which HPCC tolerates up to 1% of the table.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <stdlib.h>

#include "node.h"

#define POLY 0x7ULL
#define PERIOD 1317624576693539401LL
#define STREAMS 128

static uint64_t step(uint64_t x)
{
    return (x << 1) ^ ((int64_t)x < 0 ? POLY : 0);
}

uint64_t beo_gups_starts(int64_t n)
{
    while (n < 0)
        n += PERIOD;
    while (n > PERIOD)
        n -= PERIOD;
    if (n == 0)
        return 1;
    uint64_t m2[64], x = 1;
    for (int i = 0; i < 64; i++) { /* m2[i] = x^(2i): two steps apart */
        m2[i] = x;
        x = step(step(x));
    }
    int i = 62;
    while (i >= 0 && !((n >> i) & 1))
        i--;
    uint64_t ran = 2;
    while (i > 0) {
        uint64_t sq = 0;
        for (int j = 0; j < 64; j++)
            if ((ran >> j) & 1)
                sq ^= m2[j];
        ran = sq;
        i--;
        if ((n >> i) & 1)
            ran = step(ran);
    }
    return ran;
}

static void update(uint64_t *table, uint64_t mask, uint64_t per_stream, int threads)
{
    (void)threads;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int j = 0; j < STREAMS; j++) {
        uint64_t x = beo_gups_starts((int64_t)(per_stream * (uint64_t)j));
        for (uint64_t i = 0; i < per_stream; i++) {
            x = step(x);
            table[x & mask] ^= x;
        }
    }
}

int beo_gups(beo_gups_run *run)
{
    if (run->log2_size < 8 || run->log2_size > 40 || run->threads < 1)
        return BEO_ESYS;
    uint64_t size = 1ULL << run->log2_size, mask = size - 1;
    uint64_t *table = malloc(size * sizeof(uint64_t));
    if (!table)
        return BEO_ENOMEM;
    for (uint64_t i = 0; i < size; i++)
        table[i] = i;
    run->updates = 4 * size;
    uint64_t per_stream = run->updates / STREAMS;
    uint64_t t0 = beo_now_ns();
    update(table, mask, per_stream, run->threads);
    uint64_t t1 = beo_now_ns();
    run->elapsed_ns = t1 > t0 ? t1 - t0 : 1;
    run->errors = 0;
    if (run->verify) {
        update(table, mask, per_stream, 1);
        for (uint64_t i = 0; i < size; i++)
            run->errors += table[i] != i;
    }
    free(table);
    return BEO_OK;
}
