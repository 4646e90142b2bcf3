/*
 * Thin CPython binding over the node kernels (csrc/node.h): STREAM, the PEAK loops,
 * RandomAccess and the I/O patterns.  Every kernel runs with the GIL released; the I/O
 * patterns take it back briefly every 256 blocks (and on EINTR) to run Python's signal
 * handlers, so Ctrl-C and SIGTERM stop them (the caller then removes its files).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "node.h"

#ifndef BEO_NODE_CFLAGS
#define BEO_NODE_CFLAGS "unknown"
#endif

static const char *PEAK_NAMES[BEO_PEAK_KERNELS] = {"div", "daxpy", "dot", "poly"};
static const char *IO_NAMES[BEO_IO_PATTERNS] = {
    "sequential write", "sequential read", "random read-rewrite", "random read",
    "backward write", "backward read"};

static int find(const char *const *names, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

static PyObject *node_stream(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"n", "threads", "ntimes", "reps", "nontemporal", "warm_s", NULL};
    Py_ssize_t n;
    int threads, ntimes, nontemporal = 0;
    unsigned long long reps = 1;
    double warm_s = 0.0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nii|Kpd", kwlist, &n, &threads, &ntimes, &reps,
                                     &nontemporal, &warm_s))
        return NULL;
    if (n < 1 || threads < 1 || threads > 4096 || ntimes < 1 || ntimes > 10000 || reps < 1)
        return PyErr_Format(PyExc_ValueError, "stream: n, threads, ntimes and reps must be >= 1");
    if (!(warm_s >= 0.0 && warm_s <= 3600.0))
        return PyErr_Format(PyExc_ValueError, "stream: warm_s from 0 to 3600 seconds");
    uint64_t *times = PyMem_Calloc((size_t)BEO_STREAM_TESTS * (size_t)ntimes, sizeof(uint64_t));
    if (!times)
        return PyErr_NoMemory();
    beo_stream_run run = {.n = (size_t)n, .threads = threads, .ntimes = ntimes, .reps = reps,
                          .nontemporal = nontemporal, .warm_ns = (uint64_t)(warm_s * 1e9),
                          .times_ns = times};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = beo_stream(&run);
    Py_END_ALLOW_THREADS
    if (rc != BEO_OK) {
        PyMem_Free(times);
        return rc == BEO_ENOMEM ? PyErr_NoMemory() : PyErr_Format(PyExc_ValueError, "stream failed");
    }
    PyObject *out = PyList_New(BEO_STREAM_TESTS);
    for (int t = 0; out && t < BEO_STREAM_TESTS; t++) {
        PyObject *row = PyList_New(ntimes);
        if (!row) {
            Py_CLEAR(out);
            break;
        }
        for (int k = 0; k < ntimes; k++)
            PyList_SET_ITEM(row, k, PyLong_FromUnsignedLongLong(times[t * ntimes + k]));
        PyList_SET_ITEM(out, t, row);
    }
    PyMem_Free(times);
    if (!out)
        return NULL;
    return Py_BuildValue("(N(ddd)(ddd)K)", out, run.errors[0], run.errors[1], run.errors[2],
                         run.expected[0], run.expected[1], run.expected[2],
                         (unsigned long long)run.warm_iterations);
}

static PyObject *node_peak(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"kernel", "a", "b", "reps", "s", "narrow", NULL};
    const char *name;
    Py_buffer a, b;
    unsigned long long reps;
    double s = 0.0;
    int narrow = 0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sw*w*K|dp", kwlist, &name, &a, &b, &reps, &s,
                                     &narrow))
        return NULL;
    PyObject *out = NULL;
    int kernel = find(PEAK_NAMES, BEO_PEAK_KERNELS, name);
    if (kernel < 0)
        PyErr_Format(PyExc_ValueError, "unknown kernel %s", name);
    else if (a.len != b.len || a.len < (Py_ssize_t)sizeof(double) || a.len % sizeof(double))
        PyErr_SetString(PyExc_ValueError, "a and b must be float64 buffers of one length");
    else if (reps < 1)
        PyErr_SetString(PyExc_ValueError, "reps must be >= 1");
    else {
        uint64_t ns = 0;
        double got;
        size_t n = (size_t)a.len / sizeof(double);
        Py_BEGIN_ALLOW_THREADS
        got = beo_peak(kernel, narrow, a.buf, b.buf, n, reps, s, &ns);
        Py_END_ALLOW_THREADS
        out = Py_BuildValue("(Kd)", (unsigned long long)ns, got);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return out;
}

static PyObject *node_gups(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"log2_size", "threads", "verify", NULL};
    unsigned int log2_size;
    int threads = 1, verify = 1;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "I|ip", kwlist, &log2_size, &threads, &verify))
        return NULL;
    if (log2_size < 8 || log2_size > 40 || threads < 1 || threads > 4096)
        return PyErr_Format(PyExc_ValueError, "gups: log2_size in 8..40, threads >= 1");
    beo_gups_run run = {.log2_size = log2_size, .threads = threads, .verify = verify};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = beo_gups(&run);
    Py_END_ALLOW_THREADS
    if (rc != BEO_OK)
        return rc == BEO_ENOMEM ? PyErr_NoMemory() : PyErr_Format(PyExc_ValueError, "gups failed");
    return Py_BuildValue("(KKK)", (unsigned long long)run.updates,
                         (unsigned long long)run.elapsed_ns, (unsigned long long)run.errors);
}

static PyObject *node_gups_starts(PyObject *self, PyObject *arg)
{
    (void)self;
    long long n = PyLong_AsLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLongLong(beo_gups_starts(n));
}

/* EINTR or a periodic check inside the I/O loop: run Python's signal handlers. */
static int check_signals(void *ctx)
{
    PyThreadState **ts = ctx;
    PyEval_RestoreThread(*ts);
    int stop = PyErr_CheckSignals() < 0;
    *ts = PyEval_SaveThread();
    return stop;
}

static PyObject *node_io(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fd", "pattern", "block", "nblocks", "seed", "sync", NULL};
    int fd, sync = 0;
    const char *name;
    Py_ssize_t block;
    unsigned long long nblocks, seed = 1;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "isnK|Kp", kwlist, &fd, &name, &block, &nblocks,
                                     &seed, &sync))
        return NULL;
    int pattern = find(IO_NAMES, BEO_IO_PATTERNS, name);
    if (pattern < 0)
        return PyErr_Format(PyExc_ValueError, "unknown I/O pattern %s", name);
    if (block < 1 || block > (1 << 30) || nblocks < 1 || nblocks > (1ULL << 32))
        return PyErr_Format(PyExc_ValueError, "block in 1 B..1 GiB and 1..2^32 blocks");
    PyThreadState *ts;
    beo_io_run run = {.fd = fd, .pattern = pattern, .block = (size_t)block, .nblocks = nblocks,
                      .seed = seed, .sync = sync, .interrupted = check_signals,
                      .interrupt_ctx = &ts};
    ts = PyEval_SaveThread();
    int rc = beo_io(&run);
    PyEval_RestoreThread(ts);
    if (rc == BEO_EINTR) {
        if (!PyErr_Occurred())
            PyErr_SetNone(PyExc_KeyboardInterrupt);
        return NULL;
    }
    if (rc == BEO_ENOMEM)
        return PyErr_NoMemory();
    if (rc != BEO_OK && run.errno_out == 0)
        return PyErr_Format(PyExc_EOFError, "the file ended before block %llu",
                            (unsigned long long)(run.bytes / (size_t)block));
    if (rc != BEO_OK) {
        errno = run.errno_out;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("(KK)", (unsigned long long)run.elapsed_ns,
                         (unsigned long long)run.bytes);
}

static PyObject *node_build(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
#ifdef _OPENMP
    int openmp = _OPENMP;
#else
    int openmp = 0;
#endif
    return Py_BuildValue("{s:s,s:s,s:i,s:O,s:i,s:(dddddd)}", "compiler",
#ifdef __VERSION__
                         "gcc-compatible " __VERSION__,
#else
                         "unknown",
#endif
                         "flags", BEO_NODE_CFLAGS, "openmp", openmp, "streaming_stores",
                         beo_stream_nontemporal_available() ? Py_True : Py_False,
                         "peak_widths", beo_peak_widths(), "poly_coefficients",
                         BEO_POLY_COEF[0], BEO_POLY_COEF[1], BEO_POLY_COEF[2], BEO_POLY_COEF[3],
                         BEO_POLY_COEF[4], BEO_POLY_COEF[5]);
}

static PyMethodDef node_methods[] = {
    {"stream", (PyCFunction)(void (*)(void))node_stream, METH_VARARGS | METH_KEYWORDS,
     "stream(n, threads, ntimes, reps=1, nontemporal=False, warm_s=0.0) -> (times_ns[4][ntimes], errors(a,b,c),"
     " expected(a,b,c), warm_iterations); first untimed iterations of the four tests for"
     " warm_s seconds"},
    {"peak", (PyCFunction)(void (*)(void))node_peak, METH_VARARGS | METH_KEYWORDS,
     "peak(kernel, a, b, reps, s=0.0, narrow=False) -> (elapsed_ns, result)"},
    {"gups", (PyCFunction)(void (*)(void))node_gups, METH_VARARGS | METH_KEYWORDS,
     "gups(log2_size, threads=1, verify=True) -> (updates, elapsed_ns, errors)"},
    {"gups_starts", node_gups_starts, METH_O, "HPCC_starts(n): the n-th random number"},
    {"io", (PyCFunction)(void (*)(void))node_io, METH_VARARGS | METH_KEYWORDS,
     "io(fd, pattern, block, nblocks, seed=1, sync=False) -> (elapsed_ns, bytes)"},
    {"build", node_build, METH_NOARGS, "how this module was compiled"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef node_module = {
    PyModuleDef_HEAD_INIT, "beoperf._node", "beoperf node kernels", -1, node_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__node(void)
{
    return PyModule_Create(&node_module);
}
