/*
 * STREAM (McCalpin): copy c = a, scale b = q c, add c = a + b, triad a = b + q c over
 * three arrays, each test timed on its own, with OpenMP threads sharing every loop
 * statically (first touch by the same threads, so pages sit near the cores using them).
 * Validation replays the same assignments on scalars and compares each array's average
 * relative error with 1e-13, as stream.c checks doubles.
 *
 * With `nontemporal` (arrays far larger than the caches) the stores are streaming stores
 * (AVX where the CPU has it, else SSE2; each thread its own contiguous share of lines), as STREAM builds with streaming stores do: the written line goes to memory
 * without being read first, so the traffic is what STREAM counts (no write-allocate).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_NT 1
#else
#define HAVE_NT 0
#endif
#if HAVE_NT && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define HAVE_AVX_NT 1
#else
#define HAVE_AVX_NT 0
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#define ALIGN 64

static void init(double *a, double *b, double *c, size_t n, int threads)
{
    (void)threads;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t j = 0; j < n; j++)
        a[j] = 2.0 * a[j];
}

static void test(int which, double *restrict a, double *restrict b, double *restrict c,
                 size_t n, int threads)
{
    const double q = BEO_STREAM_SCALAR;
    (void)threads;
    switch (which) {
    case BEO_STREAM_COPY:
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t j = 0; j < n; j++)
            c[j] = a[j];
        break;
    case BEO_STREAM_SCALE:
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t j = 0; j < n; j++)
            b[j] = q * c[j];
        break;
    case BEO_STREAM_ADD:
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t j = 0; j < n; j++)
            c[j] = a[j] + b[j];
        break;
    default:
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t j = 0; j < n; j++)
            a[j] = b[j] + q * c[j];
        break;
    }
}

#if HAVE_NT
/* Lines [lo, hi) (8 doubles, 64-byte aligned, each) of a test with SSE2 streaming stores. */
static void range_nt_sse2(int which, double *a, double *b, double *c, size_t lo, size_t hi)
{
    const __m128d q = _mm_set1_pd(BEO_STREAM_SCALAR);
    for (size_t i = lo * 8; i < hi * 8; i += 2) {
        switch (which) {
        case BEO_STREAM_COPY:
            _mm_stream_pd(c + i, _mm_load_pd(a + i));
            break;
        case BEO_STREAM_SCALE:
            _mm_stream_pd(b + i, _mm_mul_pd(q, _mm_load_pd(c + i)));
            break;
        case BEO_STREAM_ADD:
            _mm_stream_pd(c + i, _mm_add_pd(_mm_load_pd(a + i), _mm_load_pd(b + i)));
            break;
        default:
            _mm_stream_pd(a + i, _mm_add_pd(_mm_load_pd(b + i), _mm_mul_pd(q, _mm_load_pd(c + i))));
            break;
        }
    }
    _mm_sfence();
}
#endif

#if HAVE_AVX_NT
/* The same with 32-byte AVX streaming stores, on CPUs that have AVX. */
__attribute__((target("avx"))) static void range_nt_avx(int which, double *a, double *b,
                                                        double *c, size_t lo, size_t hi)
{
    const __m256d q = _mm256_set1_pd(BEO_STREAM_SCALAR);
    for (size_t i = lo * 8; i < hi * 8; i += 4) {
        switch (which) {
        case BEO_STREAM_COPY:
            _mm256_stream_pd(c + i, _mm256_load_pd(a + i));
            break;
        case BEO_STREAM_SCALE:
            _mm256_stream_pd(b + i, _mm256_mul_pd(q, _mm256_load_pd(c + i)));
            break;
        case BEO_STREAM_ADD:
            _mm256_stream_pd(c + i, _mm256_add_pd(_mm256_load_pd(a + i), _mm256_load_pd(b + i)));
            break;
        default:
            _mm256_stream_pd(a + i, _mm256_add_pd(_mm256_load_pd(b + i),
                                                  _mm256_mul_pd(q, _mm256_load_pd(c + i))));
            break;
        }
    }
    _mm_sfence();
}
#endif

#if HAVE_NT
static void test_nt(int which, double *a, double *b, double *c, size_t n, int threads)
{
    size_t lines = n / 8;
#if HAVE_AVX_NT
    int avx = __builtin_cpu_supports("avx");
#else
    int avx = 0;
#endif
    (void)threads;
    (void)avx;
#pragma omp parallel num_threads(threads)
    {
        size_t id = 0, count = 1;
#ifdef _OPENMP
        id = (size_t)omp_get_thread_num();
        count = (size_t)omp_get_num_threads();
#endif
        size_t lo = lines * id / count, hi = lines * (id + 1) / count; /* as static does */
#if HAVE_AVX_NT
        if (avx)
            range_nt_avx(which, a, b, c, lo, hi);
        else
#endif
            range_nt_sse2(which, a, b, c, lo, hi);
    }
    if (lines * 8 < n) /* the last partial line */
        test(which, a + lines * 8, b + lines * 8, c + lines * 8, n - lines * 8, 1);
}
#endif

int beo_stream_nontemporal_available(void)
{
    return HAVE_NT;
}

static double avg_error(const double *x, size_t n, double expected)
{
    double sum = 0.0;
    for (size_t j = 0; j < n; j++)
        sum += fabs(x[j] - expected);
    return sum / (double)n / fabs(expected);
}

static void validate(beo_stream_run *run, const double *a, const double *b, const double *c)
{
    double aj = 2.0, bj = 2.0, cj = 0.0;
    for (int k = 0; k < run->ntimes; k++) { /* each pass of a test is idempotent */
        cj = aj;
        bj = BEO_STREAM_SCALAR * cj;
        cj = aj + bj;
        aj = bj + BEO_STREAM_SCALAR * cj;
    }
    run->expected[0] = aj;
    run->expected[1] = bj;
    run->expected[2] = cj;
    run->errors[0] = avg_error(a, run->n, aj);
    run->errors[1] = avg_error(b, run->n, bj);
    run->errors[2] = avg_error(c, run->n, cj);
}

/* The four tests once each, `reps` passes of each; timed into iteration k's slots unless
 * k < 0. */
static void iteration(beo_stream_run *run, double *a, double *b, double *c, int k)
{
    for (int t = 0; t < BEO_STREAM_TESTS; t++) {
        uint64_t t0 = beo_now_ns();
        for (uint64_t r = 0; r < run->reps; r++) {
#if HAVE_NT
            if (run->nontemporal)
                test_nt(t, a, b, c, run->n, run->threads);
            else
#endif
                test(t, a, b, c, run->n, run->threads);
            __asm__ __volatile__("" ::: "memory");
        }
        uint64_t t1 = beo_now_ns();
        if (k >= 0)
            run->times_ns[(size_t)t * (size_t)run->ntimes + (size_t)k] = t1 > t0 ? t1 - t0 : 1;
    }
}

int beo_stream(beo_stream_run *run)
{
    if (run->n < 1 || run->threads < 1 || run->ntimes < 1 || run->reps < 1)
        return BEO_ESYS;
    size_t bytes = run->n * sizeof(double);
    bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    double *a = NULL, *b = NULL, *c = NULL;
    if (posix_memalign((void **)&a, ALIGN, bytes) || posix_memalign((void **)&b, ALIGN, bytes) ||
        posix_memalign((void **)&c, ALIGN, bytes)) {
        free(a);
        free(b);
        free(c);
        return BEO_ENOMEM;
    }
    init(a, b, c, run->n, run->threads);
    run->warm_iterations = 0;
    if (run->warm_ns) { /* the memory system brought to the state the timed loops will see */
        uint64_t start = beo_now_ns();
        do {
            iteration(run, a, b, c, -1);
            init(a, b, c, run->n, run->threads); /* STREAM's values again, kept finite */
            run->warm_iterations++;
        } while (beo_now_ns() - start < run->warm_ns);
    }
    for (int k = 0; k < run->ntimes; k++)
        iteration(run, a, b, c, k);
    validate(run, a, b, c);
    free(a);
    free(b);
    free(c);
    return BEO_OK;
}
