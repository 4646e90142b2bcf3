/*
 * CPython binding of csrc/mpicoll.c: Collectives(path, handle_size) binds the
 * collectives of the MPI library mpi4py loaded (`path`: mpi4py's MPI extension module,
 * dlopen'ed with RTLD_NOLOAD); Collectives.run(...) runs one timed loop with the GIL
 * released, after checking that the buffers hold what the collective reads and writes
 * (sizes from the library's own MPI_Comm_size and MPI_Type_size).  Registered in
 * beoperf._mpi as beo_coll_type (added to the module by _mpi.c's PyInit).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <string.h>

#include "beo.h"
#include "beo_coll.h"
#include "beo_mpi.h"
#include "beo_pybind.h"

extern PyTypeObject beo_coll_type;

typedef struct {
    PyObject_HEAD
    beo_coll coll;
    void *dl;
} CollObject;

static const char *const OPS[BEO_COLL_COUNT] = {
    "allreduce", "allgather", "alltoall", "bcast", "reduce", "reduce_scatter", "gather",
    "scatter", "barrier", "iallreduce", "iallgather", "ialltoall", "ibcast", "ireduce",
    "ireduce_scatter", "igather", "iscatter", "ibarrier"};

static int Coll_init(CollObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", "handle_size", NULL};
    const char *path;
    Py_ssize_t handle_size;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sn", kwlist, &path, &handle_size))
        return -1;
    if (self->dl != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Collectives cannot be initialised twice");
        return -1;
    }
    void *dl = beo_open_loaded(path, handle_size);
    if (dl == NULL)
        return -1;
    const char *missing = NULL;
    int rc = beo_coll_bind(&self->coll, dl, handle_size == (Py_ssize_t)sizeof(void *), &missing);
    if (beo_bound_or_close(dl, rc, path, missing) != 0)
        return -1;
    self->dl = dl;
    return 0;
}

static void Coll_dealloc(CollObject *self)
{
    if (self->dl)
        dlclose(self->dl);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int op_index(const char *name)
{
    for (int i = 0; i < BEO_COLL_COUNT; i++)
        if (strcmp(OPS[i], name) == 0)
            return i;
    return -1;
}

/* The buffer holds `slots` buffers of `need` bytes, `stride` apart. */
static int fits(const Py_buffer *v, uint64_t need, size_t stride, int slots)
{
    if (need == 0)
        return 1;
    return stride >= need && (uint64_t)(slots - 1) * stride + need <= (uint64_t)v->len;
}

/* RuntimeError("an MPI call failed", code): the code for MPI_Error_string (engines/mpi.py's
 * Session.error_text reads it from the second argument). */
static PyObject *mpi_failed(int code)
{
    PyObject *args = Py_BuildValue("(si)", "an MPI call failed", code);
    if (args != NULL) {
        PyErr_SetObject(PyExc_RuntimeError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *Coll_run(CollObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"op", "comm", "dtype", "mpi_op", "send", "recv", "count",
                             "send_stride", "recv_stride", "slots", "root", "reps",
                             "warmup", NULL};
    const char *name;
    unsigned long long comm, dtype, mop, reps, warmup;
    Py_buffer send = {0}, recv = {0};
    Py_ssize_t count, sstride, rstride;
    int slots, root;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sKKKw*w*nnniiKK", kwlist, &name, &comm,
                                     &dtype, &mop, &send, &recv, &count, &sstride, &rstride,
                                     &slots, &root, &reps, &warmup))
        return NULL;
    PyObject *out = NULL;
    int op = op_index(name), np = 0, rank = 0, esize = 0;
    if (op < 0) {
        PyErr_Format(PyExc_ValueError, "unknown collective %s", name);
        goto done;
    }
    if (self->dl == NULL) {
        PyErr_SetString(PyExc_ValueError, "Collectives was not initialised");
        goto done;
    }
    if (count < 0 || count > 0x7fffffff || slots < 1 || sstride < 0 || rstride < 0 ||
        reps < 1 || reps > (1ULL << 27) || warmup > (1ULL << 27)) {
        PyErr_SetString(PyExc_ValueError, "count 0..2^31-1, slots >= 1, reps 1..2^27");
        goto done;
    }
    int rc = beo_coll_comm_size(&self->coll, (uintptr_t)comm, &np, &rank);
    if (rc == 0)
        rc = beo_coll_type_size(&self->coll, (uintptr_t)dtype, &esize);
    if (rc != 0) {
        mpi_failed(rc);
        goto done;
    }
    if (root < 0 || root >= np) {
        PyErr_Format(PyExc_ValueError, "root %d: not a rank of %d", root, np);
        goto done;
    }
    uint64_t need_s, need_r;
    beo_coll_bytes(op, (uint64_t)count, (uint64_t)esize, (uint64_t)np, &need_s, &need_r);
    if (!fits(&send, need_s, (size_t)sstride, slots) ||
        !fits(&recv, need_r, (size_t)rstride, slots)) {
        PyErr_Format(PyExc_ValueError, "%s of %zd elements among %d ranks needs %llu B to "
                     "send and %llu B to receive in each of %d buffers", name, count, np,
                     (unsigned long long)need_s, (unsigned long long)need_r, slots);
        goto done;
    }
    const char *sb = send.buf, *rb = recv.buf;
    if (need_s && need_r && sb < rb + recv.len && rb < sb + send.len) {
        PyErr_SetString(PyExc_ValueError, "the send and receive buffers overlap");
        goto done;
    }
    beo_coll_loop lp = {
        .c = &self->coll, .comm = (uintptr_t)comm, .dtype = (uintptr_t)dtype,
        .op = (uintptr_t)mop, .root = root, .count = (int)count,
        .send = need_s ? send.buf : NULL, .recv = need_r ? recv.buf : NULL,
        .send_stride = (size_t)sstride, .recv_stride = (size_t)rstride, .slots = slots,
        .reps = reps, .warmup = warmup};
    if (op % BEO_COLL_NB == BEO_COLL_BCAST) /* one buffer: the root's data, the others' result */
        lp.send = send.buf;
    Py_BEGIN_ALLOW_THREADS
    rc = beo_coll_run(&lp, (beo_coll_op)op);
    Py_END_ALLOW_THREADS
    if (rc != BEO_OK)
        mpi_failed(lp.mpi_error);
    else
        out = Py_BuildValue("(KK)", (unsigned long long)lp.elapsed_ns,
                            (unsigned long long)lp.max_ns);
done:
    PyBuffer_Release(&send);
    PyBuffer_Release(&recv);
    return out;
}

static PyMethodDef Coll_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Coll_run, METH_VARARGS | METH_KEYWORDS,
     "run(op, comm, dtype, mpi_op, send, recv, count, send_stride, recv_stride, slots, root, "
     "reps, warmup) -> (elapsed_ns of the timed calls, the longest call's ns): MPI_Barrier "
     "then the collective, warmup + reps times, repetition i on buffer i % slots"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject beo_coll_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "beoperf._mpi.Collectives",
    .tp_basicsize = sizeof(CollObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The collectives of the MPI library mpi4py loaded, bound for beoperf's loop.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Coll_init,
    .tp_dealloc = (destructor)Coll_dealloc,
    .tp_methods = Coll_methods,
};
