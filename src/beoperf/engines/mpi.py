"""MPI transport: two ranks of an MPI job, the timed loops in C (``beoperf._mpi``).

mpi4py starts MPI, gives the communicator and datatype handles, and carries the control
messages (a few small pickled dicts per trial, outside the timed loop); the messages that
are timed go through ``_mpi.Library``, bound to the very library mpi4py loaded.

Rank ``initiator`` (0) drives: it runs the sweep through :class:`MpiTransport` (the same
Transport interface as TCP, so the same precision loop and statistics), and before each
trial tells the responder (1) what to run; the responder runs :func:`serve` until told
to stop.  Other ranks of a larger job wait (:func:`idle`).

The C entry points (``Library.run`` roles) take any ranks of any communicator, so that
the cluster tests can use them as they are: ``pingpong-initiator``/``-responder`` between
ranks a and b while the others wait (all-pairs), ``exchange`` with ``to``/``from_`` ranks
(a ring step, one direction or both, HPCC's ring latency and bandwidth), ``stream-send``/
``-recv`` for N pairs at once after a ``barrier`` (osu_mbw_mr).

What the library chose to carry the messages (Open MPI's PML and BTL components, MPICH's
device and the UCX transports it loaded) is learnt from the library's version text and
the shared objects it mapped after the first exchange (:func:`chosen_transport`).
"""

from __future__ import annotations

import os
import platform
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np

from beoperf import _core, errors, pools, sysinfo
from beoperf.engines import register
from beoperf.engines.base import Peer, SessionParams, Transport, Trial
from beoperf.engines.tcp import count_corrupt  # the same rule: who verifies what
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject, JsonValue

CONTROL_TAG = 31000  # control messages; the loops use tags below it
DATA_TAG = 7
ENV_PREFIXES = ("OMPI_MCA_", "UCX_", "MPIR_CVAR_", "FI_", "MPICH_", "HYDRA_", "MPI4PY_",
                "PMIX_MCA_", "OMPI_ALLOW_RUN_AS_ROOT")
ENV_LIMIT = 200  # variables recorded at most


class TrialOrder(TypedDict):
    """The initiator's order for one trial (a pickled control message): the mode, the
    size, repetitions and first sequence number, the pool the responder needs and the
    loop's variants (None: the default)."""

    op: Literal["run"]
    mode: str
    size: int
    reps: int
    seq0: int
    max_size: int
    nocache: bool
    sync: bool | None
    recv: str | None
    window: int | None
    integrity: bool | None


class Ask(TypedDict):
    """A control message without arguments: the responder's facts, or the end."""

    op: Literal["facts", "bye"]


class Reply(TypedDict):
    """The responder's answer to a trial: its elapsed time and corrupt messages, or why
    its loop failed."""

    op: Literal["done", "error"]
    elapsed_ns: NotRequired[int]
    corrupt: NotRequired[int]
    reason: NotRequired[str]


class LoopOptions(TypedDict):
    """The C loop's variants, as ``Library.run`` takes them."""

    sync: bool
    nonblocking: bool
    window: int
    integrity: bool


class MpiUnavailable(errors.Failed):
    """mpi4py or the MPI library cannot be used in this process (exit 1)."""

    category = "MPI error"


@dataclass
class Session:
    """MPI as this process uses it: mpi4py's MPI module, the bound library, the job."""

    MPI: Any
    lib: Any
    comm: Any
    byte: int
    rank: int
    size: int
    facts: JsonObject = field(default_factory=dict)

    @classmethod
    def open(cls) -> Session:
        """Import mpi4py.MPI (which initialises MPI) and bind the loops to its library."""
        try:
            import mpi4py

            mpi4py.rc.finalize = False  # Session.finalize decides when
            # MPI_Init's level, as applications and HPCC get it: mpi4py asks for
            # MPI_THREAD_MULTIPLE by default, and Open MPI 4.1 then takes locks on every
            # call (8 B over shared memory: 0.21 us a message instead of 0.11).  Only
            # this thread calls MPI in a rank.
            mpi4py.rc.thread_level = "single"
            from mpi4py import MPI
        except (ImportError, RuntimeError, OSError) as exc:
            raise MpiUnavailable(f"cannot load mpi4py: {exc}",
                                 "pip install mpi4py; and an MPI library (Open MPI or "
                                 "MPICH)") from None
        from beoperf import _mpi

        lib = _mpi.Library(MPI.__file__, MPI._sizeof(MPI.Comm), MPI._sizeof(MPI.Request),
                           MPI._sizeof(MPI.Status))
        comm = MPI.COMM_WORLD
        session = cls(MPI, lib, comm, int(MPI._handleof(MPI.BYTE)), comm.Get_rank(),
                      comm.Get_size())
        session.facts = library_facts(session)
        return session

    def handle(self) -> int:
        return int(self.MPI._handleof(self.comm))

    def error_text(self, exc: BaseException) -> str:
        """An MPI error's words from the library (MPI_Error_string), if it has a code."""
        code = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], int) else None
        if code is None:
            return str(exc)
        try:
            return f"{exc.args[0]}: {self.MPI.Get_error_string(code)} (error {code})"
        except Exception:  # noqa: BLE001 - the code alone is still an answer
            return f"{exc.args[0]} (error {code})"

    def finalize(self) -> None:
        if not self.MPI.Is_finalized():
            self.MPI.Finalize()


def library_facts(session: Session) -> JsonObject:
    """The MPI library, mpi4py and the ABI bound, for the document."""
    import mpi4py

    text = session.lib.version().strip()
    first = text.splitlines()[0].strip() if text else ""
    impl = "openmpi" if "Open MPI" in text else ("mpich" if "MPICH" in text or
                                                 "Intel" in text else "unknown")
    device = re.search(r"MPICH Device:\s*(\S+)", text)
    major, minor = session.MPI.Get_version()
    levels = {session.MPI.THREAD_SINGLE: "single", session.MPI.THREAD_FUNNELED: "funneled",
              session.MPI.THREAD_SERIALIZED: "serialized",
              session.MPI.THREAD_MULTIPLE: "multiple"}
    return {"implementation": impl, "library_version": first,
            "library_version_full": text[:4000], "device": device.group(1) if device else None,
            "standard": f"{major}.{minor}", "mpi4py": mpi4py.__version__,
            "mpi4py_abi": os.environ.get("MPI4PY_MPIABI"),
            "thread_level": levels.get(session.MPI.Query_thread(), "unknown"),
            "handles": "pointers" if session.lib.pointer_handles else "ints",
            "request_bytes": session.lib.request_size, "status_bytes": session.lib.status_size}


def mpi_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The MPI-related variables of this process (names by prefix), bounded."""
    env = os.environ if environ is None else environ
    found = {k: v[:500] for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}
    return dict(list(found.items())[:ENV_LIMIT])


_SHARED_OBJECT = re.compile(r"(?:^|/)(mca_(?:pml|btl|mtl)_\w+|libuct_\w+|libucp|libfabric|"
                            r"libpsm\w*)\.so")


def chosen_transport(facts: JsonObject) -> JsonObject:
    """What carries the messages, as far as this process shows it: the MCA components
    (Open MPI) and UCX/OFI libraries mapped after the first exchange (a component the
    library rejected is closed and unmapped; among those kept, Open MPI picks per peer:
    vader/sm within a host, tcp between hosts), and MPICH's device."""
    found: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                m = _SHARED_OBJECT.search(line)
                if m:
                    found.add(m.group(1))
    except OSError:
        pass

    def named(prefix: str) -> list[JsonValue]:
        return [n.removeprefix(prefix) for n in sorted(found) if n.startswith(prefix)]

    out: JsonObject = {"how": "shared objects mapped after the first exchange"}
    if facts.get("implementation") == "openmpi":
        out.update(pml=named("mca_pml_"), btl=named("mca_btl_"), mtl=named("mca_mtl_"))
    else:
        out["device"] = facts.get("device")
    ucx = named("libuct_")
    if ucx or "libucp" in found:
        out["ucx_transports"] = ucx
        out["ucx_tls"] = os.environ.get("UCX_TLS", "(UCX default: all it finds)")
    if "libfabric" in found:
        out["ofi"] = True
    return out


def rank_facts(session: Session) -> JsonObject:
    """This rank: host, CPUs it may run on, process and MPI processor name, and its
    network namespace (containers or namespaces of one machine share a host name)."""
    try:
        netns = os.readlink("/proc/self/ns/net")
    except OSError:
        netns = None
    return {"rank": session.rank, "host": platform.node(), "fqdn": socket.getfqdn(),
            "processor_name": session.MPI.Get_processor_name(), "pid": os.getpid(),
            "cpus": sorted(os.sched_getaffinity(0)), "net_namespace": netns}


def end_facts(session: Session) -> JsonObject:
    """This rank's facts (rank_facts) with what carries its messages and its MPI
    environment: what a document records of each rank."""
    environment: JsonObject = dict(mpi_environment())
    return {**rank_facts(session), "transport": chosen_transport(session.facts),
            "environment": environment}


def make_pool(max_size: int, nocache: bool) -> _core.Pool:
    """As the sweep's pool: two buffers, or the no-cache span (beoperf.pools)."""
    if not nocache:
        return _core.Pool(max_size)
    return _core.Pool(max_size, pools.nocache_span(max_size, sysinfo.llc_bytes()))


def loop_options(params: TrialOrder) -> LoopOptions:
    return {"sync": bool(params.get("sync")), "nonblocking": params.get("recv") == "nonblocking",
            "window": int(params.get("window") or 1), "integrity": bool(params.get("integrity"))}


def run_loop(session: Session, pool: _core.Pool, order: TrialOrder, initiator: bool,
             peer: int) -> tuple[bytes | None, int, int]:
    """Run this rank's half of one trial (``order``: mode, size, reps, seq0 and the loop
    options), against ``peer``."""
    mode = order["mode"]
    common: dict[str, object] = dict(peer=peer, size=int(order["size"]),
                                     seq0=int(order["seq0"]), tag=DATA_TAG,
                                     **loop_options(order))
    if mode == "pingpong":
        role = "pingpong-initiator" if initiator else "pingpong-responder"
    elif mode == "stream":
        role = "stream-send" if initiator else "stream-recv"
    else:
        role = "exchange"
        common.update(to=(peer,), from_=(peer,))
    return session.lib.run(role, session.handle(), session.byte, pool, int(order["reps"]),
                           **common)


def serve(session: Session, initiator: int = 0) -> None:
    """The responder: run whatever the initiator asks until it says bye."""
    comm, pool, max_size, nocache = session.comm, None, 0, None
    while True:
        order = comm.recv(source=initiator, tag=CONTROL_TAG)
        op = order.get("op")
        if op == "bye":
            return
        if op == "facts":
            comm.send(end_facts(session), dest=initiator, tag=CONTROL_TAG)
            continue
        if pool is None or order["max_size"] != max_size or order["nocache"] != nocache:
            max_size, nocache = int(order["max_size"]), bool(order["nocache"])
            pool = make_pool(max_size, nocache)
        try:
            _samples, elapsed, corrupt = run_loop(session, pool, order, False, initiator)
            reply: Reply = {"op": "done", "elapsed_ns": elapsed, "corrupt": corrupt}
        except Exception as exc:  # noqa: BLE001 - said to the initiator, which decides
            reply = {"op": "error", "reason": session.error_text(exc)}
        comm.send(reply, dest=initiator, tag=CONTROL_TAG)


def idle(session: Session) -> None:
    """A rank that takes no part in the measurement waits for its end."""
    session.comm.Barrier()


@register("mpi")
class MpiTransport(Transport):
    """The initiator's end: tells the responder what to run, runs its own half in C.

    ``peer``: the responder's host and, as its port, its rank; ``session``: the MPI session
    of this process (required: an MPI transport exists only inside an MPI job)."""

    def __init__(self, peer: Peer, params: SessionParams, *, timeout: float = 10.0,
                 session: Session | None = None) -> None:
        super().__init__(peer, params, timeout=timeout)
        if session is None:
            raise MpiUnavailable("the MPI transport runs inside an MPI job",
                                 "use 'beoperf pingpong --transport mpi'")
        self.session, self.responder = session, peer.port
        self.remote: JsonObject = {}

    def _ask(self, order: Ask) -> JsonObject:
        comm = self.session.comm
        comm.send(order, dest=self.responder, tag=CONTROL_TAG)
        facts: JsonObject = comm.recv(source=self.responder, tag=CONTROL_TAG)
        return facts

    def connect(self) -> JsonObject:
        self.remote = self._ask({"op": "facts"})
        return self.remote

    def trial(self, size: int, reps: int, pool: _core.Pool, seq0: int) -> Trial:
        mode = self.params["mode"]
        p = self.params
        order: TrialOrder = {"op": "run", "mode": mode, "size": size, "reps": reps, "seq0": seq0,
                             "max_size": p["max_size"], "nocache": bool(p.get("nocache")),
                             "sync": p.get("sync"), "recv": p.get("recv"),
                             "window": p.get("window"), "integrity": p.get("integrity")}
        comm = self.session.comm
        comm.send(order, dest=self.responder, tag=CONTROL_TAG)
        try:
            samples, elapsed, corrupt = run_loop(self.session, pool, order, True, self.responder)
        except Exception as exc:
            raise errors.Failed(f"MPI {mode} at {size} B: {self.session.error_text(exc)}") \
                from exc
        done: Reply = comm.recv(source=self.responder, tag=CONTROL_TAG)
        if done.get("op") != "done":
            raise errors.PeerError(f"rank {self.responder}: {done.get('reason', done)}")
        arr = np.frombuffer(samples, dtype=np.uint64) if samples is not None else None
        return Trial(arr, elapsed, count_corrupt(mode, corrupt, int(done.get("corrupt", 0))))

    def reset(self) -> None:
        """MPI has no connection to reopen: nothing to do (the next trial's control
        message orders the ranks)."""

    def facts(self) -> tuple[JsonObject, JsonObject]:
        """Both ranks' facts, asked afresh (after a sweep they show what the library chose
        to carry the messages)."""
        self.remote = self._ask({"op": "facts"})
        local = end_facts(self.session)
        local["pool"] = jsonvalue.as_object(pools.pool_facts(
            self.params["max_size"], bool(self.params.get("nocache")), sysinfo.llc_bytes()))
        return local, dict(self.remote)

    def close(self, abort: bool = False) -> None:
        """Tell the responder the session is over (it returns from :func:`serve`), even
        after a failure: a small standard send does not wait for the responder."""
        self.session.comm.send({"op": "bye"}, dest=self.responder, tag=CONTROL_TAG)
