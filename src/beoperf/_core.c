/*
 * Thin CPython binding over csrc/: buffer pools and the timed loops.
 * Loops run with the GIL released; a signal that interrupts a blocking call
 * briefly takes the GIL back to run Python's handlers (Ctrl-C).
 *
 * A Pool exposes its whole allocation through the buffer protocol (read-write,
 * one dimension of unsigned bytes), so other libraries (numpy, mpi4py, a socket's
 * send) can read and write the very memory the loops send from and receive into.
 * Exports are counted: a Pool with a live memoryview cannot be re-initialised,
 * and a view holds a reference to its Pool, so the memory outlives every view.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "beo.h"

static PyObject *PeerClosedError;

typedef struct {
    PyObject_HEAD
    beo_pool pool;
    Py_ssize_t exports; /* buffer views not yet released */
} PoolObject;

static int Pool_init(PoolObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "span", NULL};
    Py_ssize_t size, span = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n|n", kwlist, &size, &span))
        return -1;
    if (size < 1 || span < 0) {
        PyErr_SetString(PyExc_ValueError, "pool size must be >= 1 and span >= 0");
        return -1;
    }
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "a Pool with live buffer views cannot be reinitialised");
        return -1;
    }
    if (self->pool.base != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Pool cannot be initialised twice");
        return -1;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = beo_pool_init(&self->pool, (size_t)size, (size_t)span);
    Py_END_ALLOW_THREADS
    if (rc != BEO_OK) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void Pool_dealloc(PoolObject *self)
{
    beo_pool_free(&self->pool);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Pool_get(PoolObject *self, void *which)
{
    const char *name = which;
    if (strcmp(name, "size") == 0)
        return PyLong_FromSize_t(self->pool.size);
    if (strcmp(name, "total") == 0)
        return PyLong_FromSize_t(self->pool.total);
    if (strcmp(name, "stride") == 0)
        return PyLong_FromSize_t(self->pool.stride);
    if (strcmp(name, "exports") == 0)
        return PyLong_FromSsize_t(self->exports);
    return PyLong_FromSize_t(self->pool.slots);
}

static int pool_ready(const PoolObject *self)
{
    if (self->pool.base == NULL || self->pool.slots == 0) {
        PyErr_SetString(PyExc_ValueError, "Pool was not initialised");
        return 0;
    }
    return 1;
}

static PyObject *Pool_message(PoolObject *self, PyObject *arg)
{
    if (!pool_ready(self))
        return NULL;
    unsigned long long index = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    const unsigned char *msg = beo_pool_msg(&self->pool, index);
    return PyBytes_FromStringAndSize((const char *)msg, (Py_ssize_t)self->pool.size);
}

static int Pool_getbuffer(PoolObject *self, Py_buffer *view, int flags)
{
    if (self->pool.base == NULL) {
        view->obj = NULL;
        PyErr_SetString(PyExc_BufferError, "Pool was not initialised");
        return -1;
    }
    /* the whole allocation; PyBuffer_FillInfo takes a reference to self for the view */
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->pool.base, (Py_ssize_t)self->pool.total,
                          0, flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void Pool_releasebuffer(PoolObject *self, Py_buffer *view)
{
    (void)view;
    self->exports--;
}

static Py_ssize_t Pool_length(PoolObject *self)
{
    return (Py_ssize_t)self->pool.total;
}

static PyBufferProcs Pool_as_buffer = {
    .bf_getbuffer = (getbufferproc)Pool_getbuffer,
    .bf_releasebuffer = (releasebufferproc)Pool_releasebuffer,
};

static PySequenceMethods Pool_as_sequence = {
    .sq_length = (lenfunc)Pool_length,
};

static PyObject *Pool_offset(PoolObject *self, PyObject *arg)
{
    if (!pool_ready(self))
        return NULL;
    unsigned long long index = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSize_t((size_t)(beo_pool_msg(&self->pool, index) - self->pool.base));
}

static PyGetSetDef Pool_getset[] = {
    {"size", (getter)Pool_get, NULL, "message size in bytes", "size"},
    {"total", (getter)Pool_get, NULL, "bytes allocated", "total"},
    {"slots", (getter)Pool_get, NULL, "distinct message positions", "slots"},
    {"stride", (getter)Pool_get, NULL, "bytes from one message position to the next", "stride"},
    {"exports", (getter)Pool_get, NULL, "buffer views not yet released", "exports"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Pool_methods[] = {
    {"message", (PyCFunction)Pool_message, METH_O, "copy of the message at a pool index"},
    {"offset", (PyCFunction)Pool_offset, METH_O,
     "where the message at a pool index starts in the buffer (memoryview(pool))"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "beoperf._core.Pool",
    .tp_basicsize = sizeof(PoolObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Page-aligned, pre-faulted message buffers (one, or a span larger than the cache);"
              " a read-write buffer of len(pool) == pool.total bytes (memoryview(pool)).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pool_init,
    .tp_dealloc = (destructor)Pool_dealloc,
    .tp_getset = Pool_getset,
    .tp_methods = Pool_methods,
    .tp_as_buffer = &Pool_as_buffer,
    .tp_as_sequence = &Pool_as_sequence,
};

typedef int (*loop_fn)(beo_loop *);

static const struct {
    const char *name;
    loop_fn fn;
    int times_each; /* writes one sample per message */
} ROLES[] = {
    {"pingpong-client", beo_pingpong_client, 1},
    {"pingpong-server", beo_pingpong_server, 0},
    {"stream-send", beo_stream_send, 0},
    {"stream-recv", beo_stream_recv, 0},
    {"bidir", beo_bidir, 1},
};

static loop_fn find_role(const char *name, int *times_each)
{
    for (size_t i = 0; i < sizeof(ROLES) / sizeof(ROLES[0]); i++)
        if (strcmp(ROLES[i].name, name) == 0) {
            *times_each = ROLES[i].times_each;
            return ROLES[i].fn;
        }
    return NULL;
}

/* EINTR inside a loop: run Python's signal handlers; stop if one raised. */
static int check_signals(void *ctx)
{
    PyThreadState **ts = ctx;
    PyEval_RestoreThread(*ts);
    int stop = PyErr_CheckSignals() < 0;
    *ts = PyEval_SaveThread();
    return stop;
}

static PyObject *raise_loop_error(int rc, int err)
{
    switch (rc) {
    case BEO_ECLOSED:
        PyErr_SetString(PeerClosedError, "peer closed the connection in the middle of a message");
        break;
    case BEO_ETIMEOUT:
        PyErr_SetString(PyExc_TimeoutError, "peer stopped sending or receiving (timed out)");
        break;
    case BEO_ENOMEM:
        PyErr_NoMemory();
        break;
    case BEO_EINTR:
        if (!PyErr_Occurred())
            PyErr_SetNone(PyExc_KeyboardInterrupt);
        break;
    default:
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    }
    return NULL;
}

static PyObject *core_run(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"role", "fd", "pool", "reps", "integrity", "seq0",
                             "timeout_ms", "inject_corrupt", "timed", "size", NULL};
    const char *role;
    int fd, integrity = 0, timeout_ms = 30000, timed = 1;
    PoolObject *pool;
    unsigned long long reps, seq0 = 0;
    long long inject = -1;
    Py_ssize_t size = 0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "siO!K|$pKiLpn", kwlist, &role, &fd, &PoolType,
                                     &pool, &reps, &integrity, &seq0, &timeout_ms, &inject,
                                     &timed, &size))
        return NULL;
    if (!pool_ready(pool))
        return NULL;
    if (size < 0 || (size_t)size > pool->pool.size)
        return PyErr_Format(PyExc_ValueError, "size %zd exceeds the pool's message size %zu",
                            size, pool->pool.size);
    int times_each = 0;
    loop_fn fn = find_role(role, &times_each);
    if (!fn)
        return PyErr_Format(PyExc_ValueError, "unknown loop role %s", role);
    if (reps < 1 || reps > (1ULL << 27))
        return PyErr_Format(PyExc_ValueError, "reps must be in 1..%llu", 1ULL << 27);

    PyObject *samples = NULL;
    if (timed && times_each) { /* other roles time only the whole loop */
        samples = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(reps * sizeof(uint64_t)));
        if (!samples)
            return NULL;
    }
    PyThreadState *ts;
    beo_loop lp = {
        .fd = fd, .pool = &pool->pool, .size = (size_t)size, .reps = reps, .seq0 = seq0, .integrity = integrity,
        .timeout_ms = timeout_ms, .inject_corrupt = inject,
        .samples = samples ? (uint64_t *)PyBytes_AS_STRING(samples) : NULL,
        .interrupted = check_signals, .interrupt_ctx = &ts,
    };
    Py_INCREF(pool);
    ts = PyEval_SaveThread();
    int rc = fn(&lp);
    PyEval_RestoreThread(ts);
    Py_DECREF(pool);
    if (rc != BEO_OK) {
        Py_XDECREF(samples);
        return raise_loop_error(rc, lp.errno_out);
    }
    if (!samples) {
        samples = Py_None;
        Py_INCREF(samples);
    }
    return Py_BuildValue("(NKK)", samples, (unsigned long long)lp.elapsed_ns,
                         (unsigned long long)lp.corrupt);
}

static PyObject *core_now_ns(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromUnsignedLongLong(beo_now_ns());
}

static PyObject *core_clock_overhead_ns(PyObject *self, PyObject *arg)
{
    (void)self;
    int rounds = (int)PyLong_AsLong(arg);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLongLong(beo_clock_overhead_ns(rounds > 0 ? rounds : 1));
}

static PyObject *core_pattern(PyObject *self, PyObject *args)
{
    Py_ssize_t len;
    unsigned long long seq;
    (void)self;
    if (!PyArg_ParseTuple(args, "nK", &len, &seq))
        return NULL;
    if (len < 0)
        return PyErr_Format(PyExc_ValueError, "length must be >= 0");
    PyObject *out = PyBytes_FromStringAndSize(NULL, len);
    if (out)
        beo_fill((unsigned char *)PyBytes_AS_STRING(out), (size_t)len, seq);
    return out;
}

static PyObject *core_verify(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long seq;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*K", &buf, &seq))
        return NULL;
    int ok = beo_verify(buf.buf, (size_t)buf.len, seq);
    PyBuffer_Release(&buf);
    return PyBool_FromLong(ok);
}

static PyMethodDef core_methods[] = {
    {"run", (PyCFunction)(void (*)(void))core_run, METH_VARARGS | METH_KEYWORDS,
     "run(role, fd, pool, reps, *, integrity, seq0, timeout_ms, inject_corrupt, timed)"
     " -> (samples_ns bytes | None, elapsed_ns, corrupt)"},
    {"now_ns", core_now_ns, METH_NOARGS, "CLOCK_MONOTONIC in nanoseconds"},
    {"clock_overhead_ns", core_clock_overhead_ns, METH_O, "smallest step between two clock reads"},
    {"pattern", core_pattern, METH_VARARGS, "pattern(length, seq) -> the integrity pattern"},
    {"verify", core_verify, METH_VARARGS, "verify(data, seq) -> True if data is pattern(seq)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "beoperf._core", "beoperf C core", -1, core_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void)
{
    if (PyType_Ready(&PoolType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (!m)
        return NULL;
    PeerClosedError = PyErr_NewException("beoperf._core.PeerClosedError",
                                         PyExc_ConnectionError, NULL);
    Py_INCREF(&PoolType);
    if (PyModule_AddObject(m, "Pool", (PyObject *)&PoolType) < 0 || !PeerClosedError ||
        PyModule_AddObject(m, "PeerClosedError", PeerClosedError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(PeerClosedError);
    return m;
}
