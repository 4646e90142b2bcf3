/*
 * CPython binding over csrc/mpirma.c, part of the beoperf._mpi extension (its PyInit
 * adds beo_rma_type to the module): Rma(path, handle_size) binds the one-sided functions of the
 * MPI library mpi4py loaded (path: mpi4py's MPI extension module, dlopen'ed with
 * RTLD_NOLOAD, as _mpi.Library does); Rma.run(...) runs one trial with the GIL released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <string.h>

#include "beo_pybind.h"
#include "beo_rma.h"

extern PyTypeObject beo_rma_type;

typedef struct {
    PyObject_HEAD
    beo_rma rma;
    void *dl;
} RmaObject;

static int Rma_init(RmaObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", "handle_size", NULL};
    const char *path;
    Py_ssize_t handle_size;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sn", kwlist, &path, &handle_size))
        return -1;
    if (self->dl != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "an Rma cannot be initialised twice");
        return -1;
    }
    void *dl = beo_open_loaded(path, handle_size);
    if (dl == NULL)
        return -1;
    const char *missing = NULL;
    int rc = beo_rma_bind(&self->rma, dl, handle_size == (Py_ssize_t)sizeof(void *), &missing);
    if (beo_bound_or_close(dl, rc, path, missing) != 0)
        return -1;
    self->dl = dl;
    return 0;
}

static void Rma_dealloc(RmaObject *self)
{
    if (self->dl)
        dlclose(self->dl); /* only drops the reference RTLD_NOLOAD took */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int choice(const char *value, const char *const *names, const char *what)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], value) == 0)
            return i;
    PyErr_Format(PyExc_ValueError, "unknown %s %s", what, value);
    return -1;
}

static const char *const OPS[] = {"put", "get", NULL};
static const char *const SYNCS[] = {"fence", "lock", "flush", "lock_all", NULL};

static PyObject *Rma_run(RmaObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"op", "sync", "origin", "comm", "win", "byte", "buf", "size",
                             "peer", "reps", "warmup", "lock_shared", "burst", NULL};
    const char *op, *sync;
    int origin, peer, lock_shared, burst = 1;
    unsigned long long comm, win, byte, reps, warmup;
    Py_ssize_t size;
    PyObject *buf;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sspKKKOniKKi|$i", kwlist, &op, &sync,
                                     &origin, &comm, &win, &byte, &buf, &size, &peer, &reps,
                                     &warmup, &lock_shared, &burst))
        return NULL;
    if (self->dl == NULL) {
        PyErr_SetString(PyExc_ValueError, "Rma was not initialised");
        return NULL;
    }
    int o = choice(op, OPS, "one-sided operation"), s = choice(sync, SYNCS, "synchronisation");
    if (o < 0 || s < 0)
        return NULL;
    if (reps < 1 || reps > (1ULL << 27) || warmup > (1ULL << 27) || size < 0 || peer < 0 ||
        burst < 1 || burst > 4096)
        return PyErr_Format(PyExc_ValueError, "reps in 1..%llu, warmup at most that, size and "
                            "peer >= 0, burst 1..4096", 1ULL << 27);
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    if (view.len / burst < size) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "the buffer holds %zd bytes, not %d x %zd",
                            view.len, burst, size);
    }
    beo_rma_loop lp = {
        .rma = &self->rma, .comm = (uintptr_t)comm, .win = (uintptr_t)win,
        .byte = (uintptr_t)byte, .buf = view.buf, .size = (size_t)size, .peer = peer,
        .origin = origin, .op = (beo_rma_op)o, .sync = (beo_rma_sync)s,
        .lock_shared = lock_shared, .burst = burst, .warmup = warmup, .reps = reps,
    };
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = beo_rma_run(&lp);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc == BEO_EINVAL)
        return PyErr_Format(PyExc_ValueError, "the one-sided loop cannot run with these "
                            "arguments (size over INT_MAX?)");
    if (rc != BEO_OK) {
        PyObject *mpi = PyImport_ImportModule("beoperf._mpi");
        PyObject *cls = mpi ? PyObject_GetAttrString(mpi, "MpiError") : NULL;
        Py_XDECREF(mpi);
        if (cls == NULL)
            return NULL;
        PyObject *exc = PyObject_CallFunction(cls, "si", "an MPI call failed", lp.mpi_error);
        if (exc) {
            PyErr_SetObject(cls, exc);
            Py_DECREF(exc);
        }
        Py_DECREF(cls);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)lp.elapsed_ns);
}

static PyMethodDef Rma_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Rma_run, METH_VARARGS | METH_KEYWORDS,
     "run(op, sync, origin, comm, win, byte, buf, size, peer, reps, warmup, lock_shared, *, "
     "burst=1) -> elapsed_ns: one trial of MPI_Put or MPI_Get ('put', 'get') with 'fence', "
     "'lock', 'flush' or 'lock_all', burst operations per synchronisation (see "
     "csrc/beo_rma.h); the origin's timed repetitions' time"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject beo_rma_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "beoperf._mpi.Rma",
    .tp_basicsize = sizeof(RmaObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The one-sided functions of the MPI library mpi4py loaded, for beoperf's loops.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Rma_init,
    .tp_dealloc = (destructor)Rma_dealloc,
    .tp_methods = Rma_methods,
};
