/*
 * What the CPython bindings of the MPI loops share (_mpi.c defines them; _mpicoll.c and
 * _mpirma.c use them): opening the MPI library mpi4py already loaded, and turning a
 * failed bind step into one OSError.  Needs Python.h first.
 */
#ifndef BEO_PYBIND_H
#define BEO_PYBIND_H

/* dlopen(path, RTLD_NOLOAD) after checking that MPI handles of `handle_size` bytes are a
 * pointer or an int; NULL with ValueError or OSError set. */
void *beo_open_loaded(const char *path, Py_ssize_t handle_size);

/* `rc` of a bind step on `dl`: 0 as is; else dl closed, OSError naming `missing`, -1. */
int beo_bound_or_close(void *dl, int rc, const char *path, const char *missing);

#endif
