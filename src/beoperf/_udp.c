/*
 * The UDP-at-a-rate loops (engines/udp.py): the paced sender and the counting receiver,
 * with the GIL released.  A signal that interrupts a blocking call takes the GIL back
 * to run Python's handlers (Ctrl-C), as the TCP loops do.
 *
 * A datagram starts with a 24-byte header, big endian: tag (u32), 0 (u32), sequence
 * number (u64), the sender's CLOCK_MONOTONIC at the send (u64, ns).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define HEADER_BYTES 24
#define MAX_DATAGRAM 65536

/* the receiver's state, an array of int64 the caller keeps between calls */
enum { RECEIVED, DISTINCT, DUPLICATES, REORDERED, BYTES, FIRST_NS, LAST_NS, HIGHEST,
       LAST_TRANSIT, HAVE_TRANSIT, FOREIGN, N_STATE };

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void put_be(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

static uint64_t get_be(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = (v << 8) | p[i];
    return v;
}

/* With the GIL released: 0, or -1 when a Python signal handler raised. */
static int check_signals(PyThreadState **save)
{
    PyEval_RestoreThread(*save);
    int rc = PyErr_CheckSignals();
    *save = PyEval_SaveThread();
    return rc;
}

static PyObject *udp_send_paced(PyObject *self, PyObject *args)
{
    int fd;
    Py_ssize_t size;
    double rate_bps, duration_s;
    unsigned int tag;
    (void)self;
    if (!PyArg_ParseTuple(args, "inddI", &fd, &size, &rate_bps, &duration_s, &tag))
        return NULL;
    if (size < HEADER_BYTES || size > MAX_DATAGRAM || !(rate_bps > 0) || !(duration_s > 0)) {
        PyErr_SetString(PyExc_ValueError, "bad size, rate or duration");
        return NULL;
    }
    unsigned char *buf = PyMem_Calloc(1, (size_t)size);
    if (!buf)
        return PyErr_NoMemory();
    double interval = 8e9 * (double)size / rate_bps;
    uint64_t seq = 0;
    int err = 0, raised = 0;
    int64_t start, end, now;
    PyThreadState *save = PyEval_SaveThread();
    start = now_ns();
    end = start + (int64_t)(duration_s * 1e9);
    double due = (double)start;
    for (;;) {
        now = now_ns();
        if (now >= end)
            break;
        if ((double)now < due) { /* sleep, never spin: the receiver may share the CPUs */
            int64_t wait = (int64_t)(due - (double)now);
            struct timespec ts = {(time_t)(wait / 1000000000LL), (long)(wait % 1000000000LL)};
            if (nanosleep(&ts, NULL) < 0 && errno == EINTR && check_signals(&save) < 0) {
                raised = 1;
                break;
            }
            continue;
        }
        put_be(buf, tag, 4);
        put_be(buf + 8, seq, 8);
        put_be(buf + 16, (uint64_t)now, 8);
        if (send(fd, buf, (size_t)size, 0) < 0) {
            if (errno == EINTR) {
                if (check_signals(&save) < 0) {
                    raised = 1;
                    break;
                }
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ||
                errno == ECONNREFUSED)
                continue; /* a full buffer or an ICMP error: this datagram again */
            err = errno;
            break;
        }
        seq++;
        due += interval;
    }
    now = now_ns();
    PyEval_RestoreThread(save);
    PyMem_Free(buf);
    if (raised)
        return NULL;
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("KL", (unsigned long long)seq, (long long)(now - start));
}

/* One datagram into the state (the rules: engines/udp.py's module docstring). */
static void count(const unsigned char *d, ssize_t n, int64_t arrival, uint32_t tag,
                  uint64_t limit, unsigned char *seen, int64_t *st, double *jitter)
{
    if (n < HEADER_BYTES || (uint32_t)get_be(d, 4) != tag) {
        st[FOREIGN]++;
        return;
    }
    uint64_t seq = get_be(d + 8, 8);
    if (seq >= limit) {
        st[FOREIGN]++;
        return;
    }
    int64_t sent = (int64_t)get_be(d + 16, 8);
    st[RECEIVED]++;
    unsigned char bit = (unsigned char)(1u << (seq & 7));
    if (seen[seq >> 3] & bit) {
        st[DUPLICATES]++;
        return;
    }
    seen[seq >> 3] |= bit;
    st[DISTINCT]++;
    st[BYTES] += n;
    if ((int64_t)seq < st[HIGHEST])
        st[REORDERED]++;
    else
        st[HIGHEST] = (int64_t)seq;
    int64_t transit = arrival - sent;
    if (st[HAVE_TRANSIT]) { /* RFC 3550 6.4.1 */
        int64_t d_ns = transit - st[LAST_TRANSIT];
        *jitter += ((double)(d_ns < 0 ? -d_ns : d_ns) - *jitter) / 16.0;
    }
    st[LAST_TRANSIT] = transit;
    st[HAVE_TRANSIT] = 1;
    if (st[DISTINCT] == 1)
        st[FIRST_NS] = arrival;
    st[LAST_NS] = arrival;
}

static PyObject *udp_receive(PyObject *self, PyObject *args)
{
    int fd, wait_ms, slice_ms;
    unsigned int tag;
    unsigned long long limit;
    Py_buffer seen, state, jit;
    (void)self;
    if (!PyArg_ParseTuple(args, "iIKw*w*w*ii", &fd, &tag, &limit, &seen, &state, &jit,
                          &wait_ms, &slice_ms))
        return NULL;
    PyObject *result = NULL;
    if ((unsigned long long)seen.len * 8 < limit || state.len != N_STATE * 8 ||
        jit.len != (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "bad receiver state buffers");
        goto done;
    }
    unsigned char *buf = PyMem_Malloc(MAX_DATAGRAM);
    if (!buf) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *st = state.buf;
    double *jitter = jit.buf;
    int64_t got = 0;
    int err = 0, raised = 0;
    PyThreadState *save = PyEval_SaveThread();
    int64_t until = now_ns() + (int64_t)slice_ms * 1000000LL;
    for (;;) {
        ssize_t n = recv(fd, buf, MAX_DATAGRAM, MSG_DONTWAIT);
        if (n >= 0) {
            count(buf, n, now_ns(), tag, limit, seen.buf, st, jitter);
            got++;
            if ((got & 1023) == 0 && now_ns() >= until)
                break;
            continue;
        }
        if (errno == ECONNREFUSED)
            continue;
        if (errno == EINTR) {
            if (check_signals(&save) < 0) {
                raised = 1;
                break;
            }
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            err = errno;
            break;
        }
        if (now_ns() >= until)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, wait_ms);
        if (rc == 0)
            break; /* quiet for wait_ms */
        if (rc < 0 && errno == EINTR && check_signals(&save) < 0) {
            raised = 1;
            break;
        }
    }
    PyEval_RestoreThread(save);
    PyMem_Free(buf);
    if (raised)
        goto done;
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    result = PyLong_FromLongLong(got);
done:
    PyBuffer_Release(&seen);
    PyBuffer_Release(&state);
    PyBuffer_Release(&jit);
    return result;
}

static PyMethodDef udp_methods[] = {
    {"send_paced", udp_send_paced, METH_VARARGS,
     "send_paced(fd, size, rate_bps, duration_s, tag) -> (datagrams sent, elapsed ns)"},
    {"receive", udp_receive, METH_VARARGS,
     "receive(fd, tag, limit, seen, state, jitter, wait_ms, slice_ms) -> datagrams read"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef udp_module = {
    PyModuleDef_HEAD_INIT, "beoperf._udp", "beoperf UDP-at-a-rate loops", -1, udp_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__udp(void)
{
    PyObject *m = PyModule_Create(&udp_module);
    if (m && (PyModule_AddIntConstant(m, "HEADER_BYTES", HEADER_BYTES) < 0 ||
              PyModule_AddIntConstant(m, "N_STATE", N_STATE) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
