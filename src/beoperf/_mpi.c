/*
 * Thin CPython binding over csrc/mpiloops.c: the MPI loops, against the MPI library that
 * mpi4py loaded in this process (no MPI headers, no mpicc: see beo_mpi.h).
 *
 * Library(path, handle_size, request_size, status_size) binds the functions: `path` is
 * mpi4py's MPI extension module (dlopen'ed with RTLD_NOLOAD: the copy already loaded,
 * whose dependency tree holds libmpi), the sizes are mpi4py's MPI._sizeof of a
 * communicator, a request and a status.  Library.run(...) runs one loop with the GIL
 * released: ping-pong, stream, exchange, the ring steps (one variant, or HPCC's sequence of
 * both) and a barrier, with an optional warm-up and barrier before the timed part.  MPI must be initialised (by mpi4py) and not finalised.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "beo_mpi.h"
#include "beo_mpipat.h"
#include "beo_pybind.h"

static PyObject *MpiError;

extern PyTypeObject beo_rma_type;  /* _mpirma.c: the one-sided loops */
extern PyTypeObject beo_coll_type; /* _mpicoll.c: the collectives */

typedef struct {
    PyObject_HEAD
    beo_mpi mpi;
    void *dl;
} LibraryObject;

void *beo_open_loaded(const char *path, Py_ssize_t handle_size)
{
    if (handle_size != (Py_ssize_t)sizeof(void *) && handle_size != (Py_ssize_t)sizeof(int)) {
        PyErr_Format(PyExc_ValueError, "MPI handles of %zd bytes: neither a pointer nor an int",
                     handle_size);
        return NULL;
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (dl == NULL)
        PyErr_Format(PyExc_OSError, "%s is not loaded in this process: import mpi4py.MPI first",
                     path);
    return dl;
}

int beo_bound_or_close(void *dl, int rc, const char *path, const char *missing)
{
    if (rc == 0)
        return 0;
    dlclose(dl);
    PyErr_Format(PyExc_OSError, "the MPI library loaded by %s lacks %s", path, missing);
    return -1;
}

static int Library_init(LibraryObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", "handle_size", "request_size", "status_size", NULL};
    const char *path;
    Py_ssize_t handle_size, request_size, status_size;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "snnn", kwlist, &path, &handle_size,
                                     &request_size, &status_size))
        return -1;
    if (self->dl != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Library cannot be initialised twice");
        return -1;
    }
    if (request_size < 1 || status_size < 1) {
        PyErr_SetString(PyExc_ValueError, "request and status sizes must be positive");
        return -1;
    }
    void *dl = beo_open_loaded(path, handle_size);
    if (dl == NULL)
        return -1;
    const char *missing = NULL;
    int rc = beo_mpi_bind(&self->mpi, dl, handle_size == (Py_ssize_t)sizeof(void *),
                          (size_t)request_size, (size_t)status_size, &missing);
    if (beo_bound_or_close(dl, rc, path, missing) != 0)
        return -1;
    self->dl = dl;
    return 0;
}

static void Library_dealloc(LibraryObject *self)
{
    if (self->dl)
        dlclose(self->dl); /* only drops the reference RTLD_NOLOAD took */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int library_ready(LibraryObject *self)
{
    if (self->dl == NULL) {
        PyErr_SetString(PyExc_ValueError, "Library was not initialised");
        return 0;
    }
    int ready = beo_mpi_ready(&self->mpi);
    if (ready != 1) {
        PyErr_SetString(MpiError, ready < 0 ? "MPI_Initialized failed"
                                            : "MPI is not initialised (or already finalised)");
        return 0;
    }
    return 1;
}

static PyObject *Library_version(LibraryObject *self, PyObject *noargs)
{
    (void)noargs;
    char buf[16384];
    if (!library_ready(self))
        return NULL;
    int rc = beo_mpi_library_version(&self->mpi, buf, sizeof(buf));
    if (rc != 0)
        return PyErr_Format(MpiError, "MPI_Get_library_version failed (error %d)", rc);
    return PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(buf), "replace");
}

static PyObject *Library_ready(LibraryObject *self, PyObject *noargs)
{
    (void)noargs;
    if (self->dl == NULL)
        Py_RETURN_FALSE;
    return PyBool_FromLong(beo_mpi_ready(&self->mpi) == 1);
}

static PyObject *Library_get(LibraryObject *self, void *which)
{
    const char *name = which;
    if (strcmp(name, "pointer_handles") == 0)
        return PyBool_FromLong(self->mpi.ptr_handles);
    if (strcmp(name, "request_size") == 0)
        return PyLong_FromSize_t(self->mpi.request_size);
    return PyLong_FromSize_t(self->mpi.status_size);
}

/* ------------------------------------------------------------------ run */

/* The pool's memory (its buffer) and layout (its attributes) as a beo_pool. */
static int pool_view(PyObject *pool, Py_buffer *view, beo_pool *out)
{
    static const char *names[] = {"size", "stride", "slots"};
    size_t values[3];
    for (int i = 0; i < 3; i++) {
        PyObject *v = PyObject_GetAttrString(pool, names[i]);
        if (v == NULL)
            return -1;
        values[i] = PyLong_AsSize_t(v);
        Py_DECREF(v);
        if (PyErr_Occurred())
            return -1;
    }
    if (PyObject_GetBuffer(pool, view, PyBUF_WRITABLE) < 0)
        return -1;
    size_t len = (size_t)view->len;
    if (values[2] < 1 || values[1] < values[0] || (values[2] - 1) * values[1] + values[0] > len) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "pool layout does not fit its buffer");
        return -1;
    }
    *out = (beo_pool){.base = view->buf, .total = len, .size = values[0],
                      .stride = values[1], .slots = values[2]};
    return 0;
}

/* A tuple of ranks as a C array (at most `max`). */
static int ranks_of(PyObject *seq, int *out, int max, int *n)
{
    PyObject *fast = PySequence_Fast(seq, "ranks must be a sequence of ints");
    if (fast == NULL)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    if (len > max) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "at most %d ranks in an exchange", max);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        long r = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (r == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        if (r < 0 || r > 0x7fffffffL) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "a rank must be a non-negative int");
            return -1;
        }
        out[i] = (int)r;
    }
    *n = (int)len;
    Py_DECREF(fast);
    return 0;
}

#define MAX_EXCHANGE 8

typedef struct {
    const char *role;
    PyObject *to, *from;
    int peer;
} run_target;

static int is_ring(const char *role)
{
    return strcmp(role, "ring") == 0 || strncmp(role, "ring-", 5) == 0;
}

static int dispatch(beo_mpi_loop *lp, const run_target *t, const int *to, int nto,
                    const int *from, int nfrom)
{
    if (strcmp(t->role, "pingpong-initiator") == 0)
        return beo_mpi_pingpong(lp, t->peer, 1);
    if (strcmp(t->role, "pingpong-responder") == 0)
        return beo_mpi_pingpong(lp, t->peer, 0);
    if (strcmp(t->role, "stream-send") == 0)
        return beo_mpi_stream_send(lp, t->peer);
    if (strcmp(t->role, "stream-recv") == 0)
        return beo_mpi_stream_recv(lp, t->peer);
    if (strcmp(t->role, "exchange") == 0)
        return beo_mpi_exchange(lp, to, nto, from, nfrom);
    if (is_ring(t->role)) { /* from the left, to the right */
        if (nto != 1 || nfrom != 1)
            return BEO_EINVAL;
        if (strcmp(t->role, "ring") == 0)
            return beo_mpi_ring_hpcc(lp, from[0], to[0]);
        return beo_mpi_ring(lp, from[0], to[0], strcmp(t->role, "ring-sendrecv") == 0
                                                     ? BEO_RING_SENDRECV : BEO_RING_NONBLOCKING);
    }
    return beo_mpi_barrier(lp);
}

static const char *const ROLES[] = {"pingpong-initiator", "pingpong-responder", "stream-send",
                                    "stream-recv", "exchange", "barrier", "ring-sendrecv",
                                    "ring-nonblocking", "ring", NULL};
static const int TIMED_ROLES[] = {1, 0, 0, 0, 1, 0, 1, 1, 2}; /* samples per repetition */

static int role_index(const char *role)
{
    for (int i = 0; ROLES[i]; i++)
        if (strcmp(ROLES[i], role) == 0)
            return i;
    return -1;
}

static PyObject *loop_error(int rc, int mpi_error)
{
    if (rc == BEO_EINVAL)
        return PyErr_Format(PyExc_ValueError, "the loop cannot run with these arguments "
                            "(size over the pool, window < 1, too few pool slots or ranks; "
                            "a ring needs 4 slots and one rank each side)");
    if (rc == BEO_ENOMEM)
        return PyErr_NoMemory();
    PyObject *exc = PyObject_CallFunction(MpiError, "si", "an MPI call failed", mpi_error);
    if (exc) {
        PyErr_SetObject(MpiError, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

typedef struct {
    uintptr_t comm, byte;
    unsigned long long reps, seq0, warmup;
    Py_ssize_t size;
    int tag, integrity, sync, nonblocking, window, timed, barrier;
} run_args;

static PyObject *run_loop(LibraryObject *self, const run_args *a, const run_target *t,
                          PyObject *pool)
{
    int to[MAX_EXCHANGE], from[MAX_EXCHANGE], nto = 0, nfrom = 0, role = role_index(t->role);
    if (role < 0)
        return PyErr_Format(PyExc_ValueError, "unknown MPI loop role %s", t->role);
    if ((t->to && ranks_of(t->to, to, MAX_EXCHANGE, &nto) < 0) ||
        (t->from && ranks_of(t->from, from, MAX_EXCHANGE, &nfrom) < 0))
        return NULL;
    Py_buffer view;
    beo_pool bp;
    if (pool_view(pool, &view, &bp) < 0)
        return NULL;
    PyObject *samples = NULL;
    if (a->timed && TIMED_ROLES[role])
        samples = PyBytes_FromStringAndSize(
            NULL, (Py_ssize_t)(a->reps * (uint64_t)TIMED_ROLES[role] * sizeof(uint64_t)));
    int window = a->window > nto + nfrom ? a->window : nto + nfrom;
    if (is_ring(t->role) && window < 2)
        window = 2; /* the ring's four requests: window + 2 */
    void *scratch = calloc(1, beo_mpi_scratch_bytes(&self->mpi, window + 2));
    if ((a->timed && TIMED_ROLES[role] && samples == NULL) || scratch == NULL) {
        PyBuffer_Release(&view);
        free(scratch);
        Py_XDECREF(samples);
        return PyErr_NoMemory();
    }
    beo_mpi_loop lp = {
        .mpi = &self->mpi, .comm = a->comm, .byte = a->byte, .tag = a->tag, .pool = &bp,
        .size = (size_t)a->size, .reps = a->reps, .seq0 = a->seq0, .integrity = a->integrity,
        .flags = (a->sync ? BEO_MPI_SYNC : 0) | (a->nonblocking ? BEO_MPI_NONBLOCKING : 0),
        .window = window, .scratch = scratch, .warmup = a->warmup, .barrier = a->barrier,
        .samples = samples ? (uint64_t *)PyBytes_AS_STRING(samples) : NULL,
    };
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dispatch(&lp, t, to, nto, from, nfrom);
    Py_END_ALLOW_THREADS
    free(scratch);
    PyBuffer_Release(&view);
    if (rc != BEO_OK) {
        Py_XDECREF(samples);
        return loop_error(rc, lp.mpi_error);
    }
    if (!samples) {
        samples = Py_None;
        Py_INCREF(samples);
    }
    if (strcmp(t->role, "ring") == 0)
        return Py_BuildValue("(NKKK)", samples, (unsigned long long)lp.elapsed_ns,
                             (unsigned long long)lp.corrupt, (unsigned long long)lp.elapsed2_ns);
    return Py_BuildValue("(NKK)", samples, (unsigned long long)lp.elapsed_ns,
                         (unsigned long long)lp.corrupt);
}

static PyObject *Library_run(LibraryObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"role", "comm", "byte", "pool", "reps", "peer", "size", "seq0",
                             "tag", "integrity", "sync", "nonblocking", "window", "timed",
                             "to", "from_", "warmup", "barrier", NULL};
    run_args a = {.tag = 7, .window = 1, .timed = 1};
    run_target t = {.peer = -1};
    unsigned long long comm, byte;
    PyObject *pool;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sKKOK|$inKipppipOOKp", kwlist, &t.role,
                                     &comm, &byte, &pool, &a.reps, &t.peer, &a.size, &a.seq0,
                                     &a.tag, &a.integrity, &a.sync, &a.nonblocking, &a.window,
                                     &a.timed, &t.to, &t.from, &a.warmup, &a.barrier))
        return NULL;
    if (!library_ready(self))
        return NULL;
    if (a.reps < 1 || a.reps > (1ULL << 27) || a.warmup > (1ULL << 27))
        return PyErr_Format(PyExc_ValueError, "reps must be in 1..%llu, warmup at most that",
                            1ULL << 27);
    if (a.size < 0 || a.tag < 0 || a.tag > 32000 || a.window < 1 || a.window > 4096)
        return PyErr_Format(PyExc_ValueError, "size >= 0, tag 0..32000, window 1..4096");
    if (strcmp(t.role, "exchange") != 0 && strcmp(t.role, "barrier") != 0 &&
        !is_ring(t.role) && t.peer < 0)
        return PyErr_Format(PyExc_ValueError, "role %s needs a peer rank", t.role);
    a.comm = (uintptr_t)comm;
    a.byte = (uintptr_t)byte;
    return run_loop(self, &a, &t, pool);
}

/* Library.pattern: the traffic patterns of csrc/mpipat.c (bound here, on each call: a
 * few dlsym outside every timed loop).  "bibw" with `peer`; "incast-recv" from the ranks
 * `from_` (at most MAX_INCAST).  Returns (None, elapsed_ns, corrupt) as run does. */
#define MAX_INCAST BEO_MPIPAT_MAX_SENDERS

static PyObject *Library_pattern(LibraryObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"role", "comm", "byte", "pool", "reps", "peer", "from_", "size",
                             "seq0", "tag", "integrity", "window", "warmup", "barrier", NULL};
    const char *role;
    unsigned long long comm, byte, reps, seq0 = 0, warmup = 0;
    Py_ssize_t size = 0;
    int peer = -1, tag = 7, integrity = 0, window = 1, barrier = 0, from[MAX_INCAST], nfrom = 0;
    PyObject *pool, *from_seq = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sKKOK|$iOnKipiKp", kwlist, &role, &comm,
                                     &byte, &pool, &reps, &peer, &from_seq, &size, &seq0, &tag,
                                     &integrity, &window, &warmup, &barrier))
        return NULL;
    if (!library_ready(self))
        return NULL;
    int bibw = strcmp(role, "bibw") == 0;
    if (!bibw && strcmp(role, "incast-recv") != 0)
        return PyErr_Format(PyExc_ValueError, "unknown MPI pattern role %s", role);
    if (reps < 1 || reps > (1ULL << 27) || warmup > (1ULL << 27))
        return PyErr_Format(PyExc_ValueError, "reps must be in 1..%llu, warmup at most that",
                            1ULL << 27);
    if (size < 0 || tag < 0 || tag > 32000 || window < 1 || window > 4096)
        return PyErr_Format(PyExc_ValueError, "size >= 0, tag 0..32000, window 1..4096");
    if (bibw ? peer < 0 : (from_seq == NULL || ranks_of(from_seq, from, MAX_INCAST, &nfrom) < 0))
        return PyErr_Occurred() ? NULL
                                : PyErr_Format(PyExc_ValueError, "role %s needs %s", role,
                                               bibw ? "a peer rank" : "the senders' ranks");
    beo_mpipat m;
    const char *missing = NULL;
    if (beo_mpipat_bind(&m, self->dl, self->mpi.ptr_handles, self->mpi.request_size,
                        self->mpi.status_size, &missing) != 0)
        return PyErr_Format(PyExc_OSError, "the MPI library lacks %s", missing);
    Py_buffer view;
    beo_pool bp;
    if (pool_view(pool, &view, &bp) < 0)
        return NULL;
    void *scratch = calloc(1, beo_mpipat_scratch_bytes(&m, bibw ? 2 * window : nfrom * window));
    if (scratch == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    beo_mpi_loop lp = {
        .mpi = &self->mpi, .comm = (uintptr_t)comm, .byte = (uintptr_t)byte, .tag = tag,
        .pool = &bp, .size = (size_t)size, .reps = reps, .seq0 = seq0, .integrity = integrity,
        .window = window, .scratch = scratch, .warmup = warmup, .barrier = barrier,
    };
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bibw ? beo_mpipat_bibw(&m, &lp, peer) : beo_mpipat_incast_recv(&m, &lp, from, nfrom);
    Py_END_ALLOW_THREADS
    free(scratch);
    PyBuffer_Release(&view);
    if (rc != BEO_OK)
        return loop_error(rc, lp.mpi_error);
    return Py_BuildValue("(OKK)", Py_None, (unsigned long long)lp.elapsed_ns,
                         (unsigned long long)lp.corrupt);
}

static PyGetSetDef Library_getset[] = {
    {"pointer_handles", (getter)Library_get, NULL, "handles are pointers (Open MPI ABI)",
     "pointer_handles"},
    {"request_size", (getter)Library_get, NULL, "sizeof(MPI_Request)", "request_size"},
    {"status_size", (getter)Library_get, NULL, "sizeof(MPI_Status)", "status_size"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Library_methods[] = {
    {"version", (PyCFunction)Library_version, METH_NOARGS, "MPI_Get_library_version()"},
    {"ready", (PyCFunction)Library_ready, METH_NOARGS,
     "MPI is initialised and not finalised"},
    {"run", (PyCFunction)(void (*)(void))Library_run, METH_VARARGS | METH_KEYWORDS,
     "run(role, comm, byte, pool, reps, *, peer, size, seq0, tag, integrity, sync, "
     "nonblocking, window, timed, to, from_, warmup, barrier) -> (samples_ns bytes | None, "
     "elapsed_ns, corrupt); role 'ring' (HPCC's: Sendrecv then non-blocking steps) adds the "
     "second loop's elapsed_ns and gives 2 x reps samples"},
    {"pattern", (PyCFunction)(void (*)(void))Library_pattern, METH_VARARGS | METH_KEYWORDS,
     "pattern(role, comm, byte, pool, reps, *, peer, from_, size, seq0, tag, integrity, "
     "window, warmup, barrier) -> (None, elapsed_ns, corrupt); role 'bibw' (osu_bibw's "
     "windows both ways with peer) or 'incast-recv' (an incast's receiver, from the ranks "
     "from_, each sending as 'stream-send')"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LibraryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "beoperf._mpi.Library",
    .tp_basicsize = sizeof(LibraryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The MPI library mpi4py loaded, bound for beoperf's MPI loops.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Library_init,
    .tp_dealloc = (destructor)Library_dealloc,
    .tp_getset = Library_getset,
    .tp_methods = Library_methods,
};

static struct PyModuleDef mpi_module = {
    PyModuleDef_HEAD_INIT, "beoperf._mpi", "beoperf MPI loops (bound at run time)", -1, NULL,
    NULL, NULL, NULL, NULL,
};

/* Ready `type` and add it to the module as `name`; -1 with an exception set. */
static int add_type(PyObject *module, const char *name, PyTypeObject *type)
{
    if (PyType_Ready(type) < 0)
        return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(module, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__mpi(void)
{
    PyObject *m = PyModule_Create(&mpi_module);
    if (!m)
        return NULL;
    MpiError = PyErr_NewException("beoperf._mpi.MpiError", PyExc_RuntimeError, NULL);
    if (!MpiError || add_type(m, "Library", &LibraryType) < 0 ||
        add_type(m, "Collectives", &beo_coll_type) < 0 || add_type(m, "Rma", &beo_rma_type) < 0) {
        Py_XDECREF(MpiError);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(MpiError);
    if (PyModule_AddObject(m, "MpiError", MpiError) < 0) {
        Py_DECREF(MpiError);
        Py_DECREF(MpiError);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
