/*
 * beoperf node kernels: STREAM, the PEAK loops, RandomAccess and the I/O patterns.
 *
 * As the rest of csrc/: no Python, no printing, no exit(), no global state.  Times are
 * CLOCK_MONOTONIC nanoseconds (beo_now_ns).  Functions return 0 or a negative BEO_E*
 * code (beo.h).
 */
#ifndef BEO_NODE_H
#define BEO_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "beo.h"

/* ------------------------------------------------------------------ STREAM */

enum { BEO_STREAM_COPY, BEO_STREAM_SCALE, BEO_STREAM_ADD, BEO_STREAM_TRIAD, BEO_STREAM_TESTS };

#define BEO_STREAM_SCALAR 3.0

typedef struct {
    size_t n;           /* elements of each of the three arrays */
    int threads;        /* OpenMP threads (1: one core) */
    int ntimes;         /* timed iterations of the four tests */
    uint64_t reps;      /* passes of a test inside one timing (>= 1; small arrays) */
    int nontemporal;    /* streaming stores (when beo_stream_nontemporal_available) */
    uint64_t warm_ns;   /* untimed iterations first, for this long (0: none) */
    uint64_t warm_iterations; /* out: how many that was */
    uint64_t *times_ns; /* out: BEO_STREAM_TESTS * ntimes, test-major */
    double errors[3];   /* out: average relative error of a, b, c against the replay */
    double expected[3]; /* out: what a, b, c should hold */
} beo_stream_run;

/* Allocate, first-touch with `threads` threads, run, validate and free. */
int beo_stream(beo_stream_run *run);
int beo_stream_nontemporal_available(void);

/* ------------------------------------------------------------------ PEAK kernels */

enum { BEO_PEAK_DIV, BEO_PEAK_DAXPY, BEO_PEAK_DOT, BEO_PEAK_POLY, BEO_PEAK_KERNELS };

/* Coefficients of the degree-5 polynomial (Horner, 10 flops an element). */
extern const double BEO_POLY_COEF[6];

/* `reps` passes of one kernel over a (and b) of n elements; *elapsed_ns the whole time.
 * div: s = s / a[i] from s = 1 each pass; dot: s = sum a[i] * b[i]; both return the sum
 * over the passes of the pass's s, so that no pass can be left out.  daxpy: a[i] += s *
 * b[i] (returns 0); poly: b[i] = p(a[i]) (returns 0).  `narrow`: the build with at most
 * 256-bit vectors instead of the widest the CPU has (where there are two builds). */
double beo_peak(int kernel, int narrow, double *a, double *b, size_t n, uint64_t reps,
                double s, uint64_t *elapsed_ns);

/* How many vector widths beo_peak has: 2 (widest, at most 256-bit) or 1. */
int beo_peak_widths(void);

/* ------------------------------------------------------------------ RandomAccess */

/* HPCC's generator: the n-th element of the sequence x -> x << 1 ^ (x < 0 ? 7 : 0). */
uint64_t beo_gups_starts(int64_t n);

typedef struct {
    unsigned log2_size;  /* table of 2^log2_size 64-bit words */
    int threads;         /* OpenMP threads, each updating its share of the 128 streams */
    int verify;          /* apply the updates again and count wrong words */
    uint64_t updates;    /* out: 4 x table size */
    uint64_t elapsed_ns; /* out: the timed updates */
    uint64_t errors;     /* out: words wrong after the updates are applied once more
                            (0 without verify) */
} beo_gups_run;

int beo_gups(beo_gups_run *run);

/* ------------------------------------------------------------------ I/O patterns */

enum {
    BEO_IO_SEQ_WRITE, BEO_IO_SEQ_READ, BEO_IO_RAND_REWRITE, BEO_IO_RAND_READ,
    BEO_IO_BACK_WRITE, BEO_IO_BACK_READ, BEO_IO_PATTERNS
};

typedef struct {
    int fd;
    int pattern;
    size_t block;        /* bytes per call; the buffer is page-aligned (O_DIRECT) */
    uint64_t nblocks;    /* file size / block */
    uint64_t seed;       /* of the random order (a permutation: every block once) */
    int sync;            /* fsync inside the timing after writing */
    uint64_t elapsed_ns; /* out */
    uint64_t bytes;      /* out: bytes of the file covered (read-rewrite: each block once) */
    int errno_out;       /* out: errno of a BEO_ESYS failure (0 and BEO_ESYS: short read) */
    beo_interrupt_fn interrupted;
    void *interrupt_ctx;
} beo_io_run;

int beo_io(beo_io_run *run);

#endif
