/*
 * PMAC PEAK's loops: division s = s / a(i) (1 flop), daxpy a(i) = a(i) + s b(i) (2), dot
 * s = s + a(i) b(i) (2) and a degree-5 polynomial by Horner (10), repeated over one loop
 * length.  A compiler barrier after every pass keeps each pass's loads and stores, and
 * div and dot return the sum of every pass's result, so no pass can be dropped; the
 * caller checks every result against numpy (suites/node_kernels.py).
 *
 * The dot keeps 32 partial sums (as vectorised library dots do); division is a chain of
 * dependent divides, as PEAK's.  The loops are built for the CPU found at run time
 * (target_clones) where GCC on x86-64 can.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include "node.h"

const double BEO_POLY_COEF[6] = {0.5, 0.25, -0.125, 0.0625, -0.03125, 0.015625};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

#define BARRIER() __asm__ __volatile__("" ::: "memory")
#define PARTS 32

CLONES static double k_div(const double *restrict a, size_t n, uint64_t reps)
{
    double total = 0.0;
    for (uint64_t r = 0; r < reps; r++) {
        double s = 1.0;
        for (size_t i = 0; i < n; i++)
            s = s / a[i];
        total += s;
        BARRIER();
    }
    return total;
}

CLONES static void k_daxpy(double *restrict a, const double *restrict b, size_t n,
                           uint64_t reps, double s)
{
    for (uint64_t r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++)
            a[i] = a[i] + s * b[i];
        BARRIER();
    }
}

CLONES static double k_dot(const double *restrict a, const double *restrict b, size_t n,
                           uint64_t reps)
{
    double total = 0.0;
    for (uint64_t r = 0; r < reps; r++) {
        double part[PARTS] = {0};
        size_t i = 0;
        for (; i + PARTS <= n; i += PARTS)
            for (size_t j = 0; j < PARTS; j++)
                part[j] += a[i + j] * b[i + j];
        for (size_t w = PARTS / 2; w > 0; w /= 2) /* a tree: few dependent adds */
            for (size_t j = 0; j < w; j++)
                part[j] += part[j + w];
        double s = part[0];
        for (; i < n; i++)
            s += a[i] * b[i];
        total += s;
        BARRIER();
    }
    return total;
}

CLONES static void k_poly(const double *restrict a, double *restrict b, size_t n, uint64_t reps)
{
    const double *c = BEO_POLY_COEF;
    for (uint64_t r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++) {
            double x = a[i];
            b[i] = ((((c[5] * x + c[4]) * x + c[3]) * x + c[2]) * x + c[1]) * x + c[0];
        }
        BARRIER();
    }
}

double beo_peak(int kernel, double *a, double *b, size_t n, uint64_t reps, double s,
                uint64_t *elapsed_ns)
{
    double out = 0.0;
    uint64_t t0 = beo_now_ns();
    switch (kernel) {
    case BEO_PEAK_DIV:
        out = k_div(a, n, reps);
        break;
    case BEO_PEAK_DAXPY:
        k_daxpy(a, b, n, reps, s);
        break;
    case BEO_PEAK_DOT:
        out = k_dot(a, b, n, reps);
        break;
    default:
        k_poly(a, b, n, reps);
        break;
    }
    uint64_t t1 = beo_now_ns();
    *elapsed_ns = t1 > t0 ? t1 - t0 : 1;
    return out;
}
