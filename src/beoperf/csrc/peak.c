/*
 * PMAC PEAK's loops: division s = s / a(i) (1 flop), daxpy a(i) = a(i) + s b(i) (2), dot
 * s = s + a(i) b(i) (2) and a degree-5 polynomial by Horner (10), repeated over one loop
 * length.  A compiler barrier after every pass keeps each pass's loads and stores, and
 * div and dot return the sum of every pass's result, so no pass can be dropped; the
 * caller checks every result against numpy (sweep/node_kernels.py).
 *
 * The dot keeps 32 partial sums (as vectorised library dots do); division is a chain of
 * dependent divides, as PEAK's.  The loops are built for the CPU found at run time
 * (target_clones) where GCC on x86-64 can, in two vector widths (below).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include "node.h"

const double BEO_POLY_COEF[6] = {0.5, 0.25, -0.125, 0.0625, -0.03125, 0.015625};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define CLONES_WIDE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define CLONES_NARROW __attribute__((target_clones("arch=x86-64-v3", "default")))
#define HAVE_NARROW 1
#else
#define CLONES_WIDE
#define CLONES_NARROW
#define HAVE_NARROW 0
#endif

#define BARRIER() __asm__ __volatile__("" ::: "memory")
/* DAXPY_UNROLL: the daxpy loop four vectors a turn.  One vector a turn (a load, an FMA
 * with a load, a store, the loop's add and branch) ran at 38-41 GFLOP/s in L1 (1,024
 * elements) on an AMD EPYC (Zen 4) guest where likwid-bench's unrolled daxpy_avx512_fma
 * ran at 45-48, and the same loop had read 60 in another build of this file: its speed
 * moved with where the loop's code fell.  Unrolled four times it ran at 59-61 with the
 * two arrays at any of eight distances; from 4,096 elements on (L1/L2 bandwidth-bound)
 * it made no difference (bench/RESULTS.md, N16). */
#define PARTS 32

/* The four loops, defined once per build: WIDE with the widest vectors the CPU has
 * (AVX-512 where it has them), NARROW with at most 256-bit ones.  Neither width wins
 * everywhere: on an AMD EPYC (Zen 4) the 512-bit dot was twice the 256-bit one at 1,024
 * elements (in L1) and 8-12% slower at 16,384 (from L2); the caller times both and keeps
 * the faster (sweep/node_kernels.py). */
#define DEFINE_LOOPS(W, ATTR)                                                               \
    ATTR static double k_div_##W(const double *restrict a, size_t n, uint64_t reps)        \
    {                                                                                       \
        double total = 0.0;                                                                 \
        for (uint64_t r = 0; r < reps; r++) {                                               \
            double s = 1.0;                                                                 \
            for (size_t i = 0; i < n; i++)                                                  \
                s = s / a[i];                                                               \
            total += s;                                                                     \
            BARRIER();                                                                      \
        }                                                                                   \
        return total;                                                                       \
    }                                                                                       \
    ATTR static void k_daxpy_##W(double *restrict a, const double *restrict b, size_t n,   \
                                 uint64_t reps, double s)                                   \
    {                                                                                       \
        for (uint64_t r = 0; r < reps; r++) {                                               \
            _Pragma("GCC unroll 4") /* see DAXPY_UNROLL */                                  \
            for (size_t i = 0; i < n; i++)                                                  \
                a[i] = a[i] + s * b[i];                                                     \
            BARRIER();                                                                      \
        }                                                                                   \
    }                                                                                       \
    ATTR static double k_dot_##W(const double *restrict a, const double *restrict b,       \
                                 size_t n, uint64_t reps)                                   \
    {                                                                                       \
        double total = 0.0;                                                                 \
        for (uint64_t r = 0; r < reps; r++) {                                               \
            double part[PARTS] = {0};                                                       \
            size_t i = 0;                                                                   \
            for (; i + PARTS <= n; i += PARTS)                                              \
                for (size_t j = 0; j < PARTS; j++)                                          \
                    part[j] += a[i + j] * b[i + j];                                         \
            for (size_t w = PARTS / 2; w > 0; w /= 2) /* a tree: few dependent adds */      \
                for (size_t j = 0; j < w; j++)                                              \
                    part[j] += part[j + w];                                                 \
            double s = part[0];                                                             \
            for (; i < n; i++)                                                              \
                s += a[i] * b[i];                                                           \
            total += s;                                                                     \
            BARRIER();                                                                      \
        }                                                                                   \
        return total;                                                                       \
    }                                                                                       \
    ATTR static void k_poly_##W(const double *restrict a, double *restrict b, size_t n,    \
                                uint64_t reps)                                              \
    {                                                                                       \
        const double *c = BEO_POLY_COEF;                                                    \
        for (uint64_t r = 0; r < reps; r++) {                                               \
            for (size_t i = 0; i < n; i++) {                                                \
                double x = a[i];                                                            \
                b[i] = ((((c[5] * x + c[4]) * x + c[3]) * x + c[2]) * x + c[1]) * x + c[0]; \
            }                                                                               \
            BARRIER();                                                                      \
        }                                                                                   \
    }                                                                                       \
    static double run_##W(int kernel, double *a, double *b, size_t n, uint64_t reps,       \
                          double s)                                                         \
    {                                                                                       \
        switch (kernel) {                                                                   \
        case BEO_PEAK_DIV:                                                                  \
            return k_div_##W(a, n, reps);                                                   \
        case BEO_PEAK_DAXPY:                                                                \
            k_daxpy_##W(a, b, n, reps, s);                                                  \
            return 0.0;                                                                     \
        case BEO_PEAK_DOT:                                                                  \
            return k_dot_##W(a, b, n, reps);                                                \
        default:                                                                            \
            k_poly_##W(a, b, n, reps);                                                      \
            return 0.0;                                                                     \
        }                                                                                   \
    }

DEFINE_LOOPS(wide, CLONES_WIDE)
#if HAVE_NARROW
DEFINE_LOOPS(narrow, CLONES_NARROW)
#endif

int beo_peak_widths(void)
{
    return HAVE_NARROW ? 2 : 1;
}

double beo_peak(int kernel, int narrow, double *a, double *b, size_t n, uint64_t reps,
                double s, uint64_t *elapsed_ns)
{
    double out;
    uint64_t t0 = beo_now_ns();
#if HAVE_NARROW
    if (narrow)
        out = run_narrow(kernel, a, b, n, reps, s);
    else
#endif
        out = run_wide(kernel, a, b, n, reps, s);
    (void)narrow;
    uint64_t t1 = beo_now_ns();
    *elapsed_ns = t1 > t0 ? t1 - t0 : 1;
    return out;
}
