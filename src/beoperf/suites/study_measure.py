"""What a study measures in each block, by name: ``pingpong``, ``command``, ``hpl``,
``hpcc``, ``ring`` and ``node`` (the literal table :data:`MEASUREMENTS`).

A measurement is built from its parameters (:meth:`Measurement.from_params`, BadSpec on a
bad one), names its figures before anything runs (:meth:`Measurement.figures`: the
study's analysis needs their units and directions), and measures one block
(:meth:`Measurement.measure`) given where (:class:`Where`), the run-scope levels of the
block's configuration (``run_levels``, as the run-scope factors' ``configure`` writes
them: sndbuf, rcvbuf, congestion, env (mpienv's), np, transport) and the block's time.  A
block that fails is a :class:`Sample` with ``error`` set and no figures: never an
exception, so that a study records it and goes on.

* ``pingpong``: latency at a size (``latency_us@16``), stream goodput at a size with the
  system's congestion control (``goodput_bps@1M``), and optionally the curve.  The client
  is the controller (in process, :func:`beoperf.suites.pingpong.run`) or a remote host
  (``beoperf pingpong ADDR --json`` through :mod:`beoperf.launch.remote`, its document
  read like a fleet's).  Pairs run one after another: a server takes one session at a
  time.  With the run level transport mpi, two MPI ranks on the pair's hosts
  (:func:`beoperf.suites.mpi_pingpong.run_launched`, the MPI agent a parameter).
* ``command``: any command line (``mpirun -np 16 ./app``), its wall time (the child's
  own), exit status and optionally one figure a regex finds in its output.  A non-zero
  exit status is a failed block, not a figure.
* ``hpl``/``hpcc``: one HPCC run through the cluster suite (HPCC cannot run HPL alone).
* ``ring``: the cluster suite's ring latency and bandwidth.
* ``node``: one node kernel.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from beoperf import errors, safeio, units
from beoperf.launch import job, remote
from beoperf.launch.base import LaunchSpec
from beoperf.model import document, hpcc
from beoperf.model.cluster_mpi import MpiRun
from beoperf.model.document import JsonObject, JsonValue
from beoperf.model.mpi_options import MpiOptions
from beoperf.model.node import NodeRun
from beoperf.model.pingpong import KIND as PINGPONG
from beoperf.model.pingpong import RunResult
from beoperf.suites import cluster, cluster_mpi, cluster_ring, fleet, mpi_pingpong, node
from beoperf.suites import pingpong as pp

DEFAULT_PORT = pp.DEFAULT_PORT
REMOTE_GRACE_S = 30.0  # a remote client's time beyond its budget: start, connect, answer
ANSWER_LIMIT = fleet.ANSWER_LIMIT
MIN_PART_S = 0.5  # the least time one part of a block (a size, a pair) is given
OUTPUT_KEEP = 256 * 1024  # bytes of a command's output the figure regex searches


@dataclass(frozen=True)
class Figure:
    """One number a measurement gives per block: ``key`` ("latency_us@16"), its unit and
    whether more is better."""

    key: str
    unit: str
    higher_is_better: bool

    def to_dict(self) -> JsonObject:
        return {"key": self.key, "unit": self.unit, "higher_is_better": self.higher_is_better}


@dataclass
class Sample:
    """One block's result: the figures (key -> value), a curve ((size, value) points)
    when asked for, the time measuring took, what else was seen (``detail``: per pair,
    granted buffer sizes, MSS, exit status ...), and ``error`` when the block failed."""

    figures: dict[str, float] = field(default_factory=dict)
    curve: list[tuple[int, float]] | None = None
    duration_s: float = 0.0
    detail: JsonObject = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class Reach:
    """How a host is reached: ``agent`` as :class:`beoperf.launch.base.LaunchSpec` takes it
    (an ssh-like command, or a template with %h such as ``ip netns exec %h``; None: ssh)
    and how beoperf is started there."""

    agent: str | None = None
    remote_command: str = fleet.DEFAULT_REMOTE


@dataclass(frozen=True)
class Where:
    """Where a block runs: ``pairs`` of (client host, server data address); each host's
    ``reach``; whether the controller is the client (then every pair's client is this
    process); the serve port; ``hosts`` every host of the study (MPI measurements)."""

    pairs: tuple[tuple[str, str], ...] = ()
    reach: Mapping[str, Reach] = field(default_factory=dict)
    controller_is_client: bool = True
    port: int = DEFAULT_PORT
    hosts: tuple[str, ...] = ()

    def reach_of(self, host: str) -> Reach:
        return self.reach.get(host, Reach())


class Measurement:
    """A measurement by name (see the module's docstring)."""

    name: ClassVar[str]

    @classmethod
    def from_params(cls, params: Mapping[str, JsonValue]) -> Measurement:
        """The measurement ``params`` describe; BadSpec naming a bad one."""
        raise NotImplementedError

    def params(self) -> JsonObject:
        """The parameters, as the study document records them."""
        raise NotImplementedError

    def figures(self) -> list[Figure]:
        raise NotImplementedError

    def measure(self, where: Where, run_levels: Mapping[str, JsonValue],
                budget_s: float) -> Sample:
        raise NotImplementedError


# ------------------------------------------------------------------ reading parameters


def _unknown(name: str, params: Mapping[str, JsonValue], known: Sequence[str]) -> None:
    extra = sorted(set(params) - set(known))
    if extra:
        raise errors.BadSpec(f"measurement {name}: unknown parameter {extra[0]!r} "
                             f"(known: {', '.join(known)})")


def _size(name: str, key: str, value: JsonValue) -> int | None:
    """A size parameter: bytes, or a text such as "1M"; None stays None."""
    if value is None:
        return None
    try:
        size = units.parse_size(value) if isinstance(value, str) else value
    except ValueError as exc:
        raise errors.BadSpec(f"measurement {name}: {key}: {exc}") from None
    if type(size) is not int or size < 1:
        raise errors.BadSpec(f"measurement {name}: {key} {value!r}: a size of at least 1 B")
    return size


def _bool(name: str, key: str, value: JsonValue) -> bool:
    if not isinstance(value, bool):
        raise errors.BadSpec(f"measurement {name}: {key} {value!r}: true or false")
    return value


def _text(name: str, key: str, value: JsonValue) -> str:
    if not isinstance(value, str) or not value.strip():
        raise errors.BadSpec(f"measurement {name}: {key}: a non-empty text")
    return value


def _seconds(name: str, key: str, value: JsonValue) -> float:
    if isinstance(value, str):
        try:
            value = units.parse_time(value)
        except ValueError as exc:
            raise errors.BadSpec(f"measurement {name}: {key}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not (math.isfinite(value) and value > 0):
        raise errors.BadSpec(f"measurement {name}: {key} {value!r}: seconds above 0")
    return float(value)


def size_key(size: int) -> str:
    """A size as a figure's key shows it: 16, 1K, 1M (binary, exact), else bytes."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def _run_int(run_levels: Mapping[str, JsonValue], key: str) -> int | None:
    value = run_levels.get(key)
    if value is None or value == "default":
        return None
    if isinstance(value, str):
        return units.parse_size(value)
    if type(value) is not int:
        raise errors.BadSpec(f"run level {key} {value!r}: a size")
    return value


def _run_env(run_levels: Mapping[str, JsonValue]) -> dict[str, str]:
    """The MPI environment of the run levels: the ``env`` the mpienv factor's
    ``configure`` writes (factors.base.Factor.configure names the keys)."""
    env = run_levels.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise errors.BadSpec("run level env (mpienv): an object of KEY: value texts")
    return {k: str(v) for k, v in env.items()}


# ------------------------------------------------------------------ pingpong


@dataclass(frozen=True)
class PingPong(Measurement):
    """Latency at ``latency_size`` (one-way, median, us), stream goodput at
    ``goodput_size`` (median, bit/s) with the system's congestion control, and with
    ``curve`` the throughput curve of a sweep; None leaves a part out."""

    name: ClassVar[str] = "pingpong"
    KNOWN: ClassVar[tuple[str, ...]] = ("latency_size", "goodput_size", "curve",
                                        "curve_sizes", "mpi_agent", "mpi_interface",
                                        "mpi_implementation")
    latency_size: int | None = 16
    goodput_size: int | None = 1 << 20
    curve: bool = False
    curve_sizes: tuple[int, ...] = tuple(4 ** k for k in range(12))  # 1 B .. 4 MiB
    mpi_agent: str | None = None  # transport mpi: how mpirun reaches the hosts
    mpi_interface: str | None = None
    mpi_implementation: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, JsonValue]) -> PingPong:
        _unknown(cls.name, params, cls.KNOWN)
        n = cls.name
        lat = _size(n, "latency_size", params.get("latency_size", 16))
        good = _size(n, "goodput_size", params.get("goodput_size", 1 << 20))
        curve = _bool(n, "curve", params.get("curve", False))
        sizes = params.get("curve_sizes")
        if sizes is not None and not isinstance(sizes, list):
            raise errors.BadSpec(f"measurement {n}: curve_sizes: a list of sizes")
        picked = tuple(sorted({s for s in (_size(n, "curve_sizes", v) for v in sizes or [])
                               if s is not None})) or cls.curve_sizes
        if lat is None and good is None and not curve:
            raise errors.BadSpec(f"measurement {n}: nothing to measure (no latency_size, "
                                 "no goodput_size, no curve)")
        return cls(lat, good, curve, picked,
                   _opt_text(n, "mpi_agent", params.get("mpi_agent")),
                   _opt_text(n, "mpi_interface", params.get("mpi_interface")),
                   _opt_text(n, "mpi_implementation", params.get("mpi_implementation")))

    def params(self) -> JsonObject:
        return {"latency_size": self.latency_size, "goodput_size": self.goodput_size,
                "curve": self.curve, "curve_sizes": list(self.curve_sizes),
                "mpi_agent": self.mpi_agent, "mpi_interface": self.mpi_interface,
                "mpi_implementation": self.mpi_implementation}

    def figures(self) -> list[Figure]:
        out = []
        if self.latency_size is not None:
            out.append(Figure(f"latency_us@{size_key(self.latency_size)}", "us", False))
        if self.goodput_size is not None:
            out.append(Figure(f"goodput_bps@{size_key(self.goodput_size)}", "bit/s", True))
        return out

    def parts(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """(figure key or "curve", mode, sizes) of what one pair measures."""
        figs = iter(self.figures())
        out: list[tuple[str, str, tuple[int, ...]]] = []
        if self.latency_size is not None:
            out.append((next(figs).key, "pingpong", (self.latency_size,)))
        if self.goodput_size is not None:
            out.append((next(figs).key, "stream", (self.goodput_size,)))
        if self.curve:
            out.append(("curve", "pingpong", self.curve_sizes))
        return out

    def measure(self, where: Where, run_levels: Mapping[str, JsonValue],
                budget_s: float) -> Sample:
        started = time.monotonic()
        if not where.pairs:
            return Sample(error="pingpong: no pair to measure", duration_s=0.0)
        if (run_levels.get("transport") or "tcp") not in ("tcp", "mpi"):
            return Sample(error=f"pingpong: transport {run_levels['transport']!r}: "
                                "tcp or mpi")
        parts = self.parts()
        share = max(MIN_PART_S, budget_s / (len(parts) * len(where.pairs)))
        pairs: dict[str, JsonValue] = {}
        per_pair: list[dict[str, float]] = []
        curve: list[list[tuple[int, float]]] = []
        error = None
        for client, server in where.pairs:
            label = f"{client}>{server}"
            got = self._pair(where, client, server, run_levels, parts, share)
            pairs[label] = got.detail | {"figures": dict(got.figures)}
            if got.error is not None:
                error = f"{label}: {got.error}"
                break
            per_pair.append(got.figures)
            if got.curve:
                curve.append(got.curve)
        detail: JsonObject = {"pairs": pairs, "share_s": share}
        duration = time.monotonic() - started
        if error is not None:
            return Sample(duration_s=duration, detail=detail, error=error)
        figures = {f.key: sum(p[f.key] for p in per_pair) / len(per_pair)
                   for f in self.figures()}
        return Sample(figures, _mean_curve(curve) if self.curve else None, duration, detail)

    def _pair(self, where: Where, client: str, server: str,
              run_levels: Mapping[str, JsonValue],
              parts: Sequence[tuple[str, str, tuple[int, ...]]], share: float) -> Sample:
        sample = Sample(detail={})
        mpi = run_levels.get("transport") == "mpi"
        for key, mode, sizes in parts:
            spec = self._spec(server, where.port, mode, sizes, share, run_levels)
            try:
                if mpi:
                    run = _in_process(self._mpi_spec(spec, client, server, run_levels),
                                      launched=True)
                elif where.controller_is_client:
                    run = _in_process(spec)
                else:
                    run = _remote(where.reach_of(client), client, spec)
            except (errors.BeoperfError, ValueError) as exc:
                sample.error = f"{mode} {size_key(sizes[0])}: {exc}"
                return sample
            if run.status != "complete" or not run.sizes:
                sample.error = f"{mode}: {run.status_reason or run.status}"
                return sample
            sample.detail |= _socket_detail(run)
            if key == "curve":
                sample.curve = [(s.size, float(s.throughput_bps.get("from_median") or 0.0))
                                for s in run.sizes]
            elif mode == "stream":
                sample.figures[key] = float(run.sizes[0].throughput_bps["from_median"] or 0.0)
            else:
                sample.figures[key] = run.sizes[0].central_time_us()
        return sample

    @staticmethod
    def _spec(server: str, port: int, mode: str, sizes: tuple[int, ...], budget: float,
              run_levels: Mapping[str, JsonValue]) -> pp.Spec:
        """The sweep of one part.  Stream mode, and every mode when the congestion factor
        is studied, run with the system's congestion control (not the ping-pong's Reno)."""
        system = mode == "stream" or "congestion" in run_levels
        return pp.Spec(sizes=sizes, host=server, port=port, mode=mode, time_budget=budget,
                       trial_time=pp.default_trial_time(sizes, budget, None),
                       sndbuf=_run_int(run_levels, "sndbuf"),
                       rcvbuf=_run_int(run_levels, "rcvbuf"),
                       congestion=None if system else pp.AUTO, perturbation=0)


    def _mpi_spec(self, spec: pp.Spec, client: str, server: str,
                  run_levels: Mapping[str, JsonValue]) -> pp.Spec:
        """``spec`` between two MPI ranks, on ``client`` and ``server`` (the names the
        MPI agent reaches), with the run level mpienv in every rank's environment."""
        opts = MpiOptions(hosts=(client, server), implementation=self.mpi_implementation,
                          bind="none", agent=self.mpi_agent, interface=self.mpi_interface,
                          env=tuple(_run_env(run_levels).items()))
        return dataclasses.replace(spec, host=None, transport="mpi", congestion=pp.AUTO,
                                   sndbuf=None, rcvbuf=None, mpi=opts)


def _in_process(spec: pp.Spec, launched: bool = False) -> RunResult:
    """One sweep from this process: over TCP, or (``launched``) as two MPI ranks this
    process starts and reads rank 0's document from."""
    measured = mpi_pingpong.run_launched(spec) if launched else pp.run(spec)
    if measured.interrupt is not None:
        raise measured.interrupt
    if measured.error is not None:
        raise measured.error
    return measured.run


def remote_args(spec: pp.Spec) -> list[str]:
    """``beoperf pingpong`` arguments that run ``spec`` on another host."""
    assert spec.host is not None
    args = ["pingpong", spec.host, "--json", "--port", str(spec.port), "--mode", spec.mode,
            "--sizes", ",".join(map(str, spec.sizes)), "--perturbation", "0",
            "--time-budget", f"{spec.time_budget:.3f}", "--trial-time", f"{spec.trial_time:g}",
            "--history", "off"]
    for key in ("sndbuf", "rcvbuf"):
        if getattr(spec, key) is not None:
            args += [f"--{key}", str(getattr(spec, key))]
    if spec.congestion is None:
        args += ["--congestion", "system"]
    return args


def _remote(reach: Reach, client: str, spec: pp.Spec) -> RunResult:
    """``spec`` run by ``client`` (``beoperf pingpong ... --json`` there, nothing kept on
    it), its document read as a fleet reads a node's."""
    argv = ("env", "BEOPERF_RUNS=off", *remote.node_argv(reach.remote_command,
                                                        remote_args(spec)))
    launch = LaunchSpec(argv=argv, hosts=(client,), agent=reach.agent)
    timeout = (spec.time_budget or 0.0) + REMOTE_GRACE_S
    result = remote.run(launch, timeout=timeout, limit=ANSWER_LIMIT)[client]
    if result.status != "ok":
        last = (result.stderr or b"").decode(errors="replace").strip().splitlines()
        why = result.reason or result.error or (last[-1] if last else "")
        raise ValueError(f"{client}: {result.status}" + (f": {why}" if why else ""))
    doc = fleet.parse_document(result.stdout or b"", ANSWER_LIMIT, PINGPONG,
                               _is_pingpong, _writer_version)
    return RunResult.from_document(doc, f"{client}'s answer")


def _is_pingpong(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("format") == document.FORMAT and \
        raw.get("kind") == PINGPONG


def _writer_version(raw: Any) -> str | None:
    meta = raw.get("meta") if isinstance(raw, dict) else None
    version = meta.get("beoperf") if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _socket_detail(run: RunResult) -> JsonObject:
    """The buffer sizes the kernel granted and the MSS, from the client's socket facts."""
    sock = run.local.get("socket")
    if not isinstance(sock, dict):
        return {}
    return {"granted": {k: sock.get(k) for k in ("sndbuf", "rcvbuf")},
            "mss": sock.get("mss"), "congestion": sock.get("congestion")}


def _mean_curve(curves: Sequence[Sequence[tuple[int, float]]]) -> list[tuple[int, float]]:
    if not curves:
        return []
    sizes = [s for s, _ in curves[0]]
    return [(s, sum(dict(c).get(s, 0.0) for c in curves) / len(curves)) for s in sizes]


# ------------------------------------------------------------------ command


@dataclass(frozen=True)
class Command(Measurement):
    """A command line on the controller: its wall time (``wall_s``), and with
    ``figure_regex`` (one group) the number it finds in the output (``figure``, in
    ``figure_unit``).  ``{np}`` in the command is the run level np.  No shell unless the
    command says ``sh -c``."""

    name: ClassVar[str] = "command"
    KNOWN: ClassVar[tuple[str, ...]] = ("command", "figure_regex", "figure_unit",
                                        "figure_higher_is_better", "timeout")
    command: str = ""
    figure_regex: str | None = None
    figure_unit: str = ""
    figure_higher_is_better: bool = True
    timeout: float = 3600.0

    @classmethod
    def from_params(cls, params: Mapping[str, JsonValue]) -> Command:
        _unknown(cls.name, params, cls.KNOWN)
        n = cls.name
        command = _text(n, "command", params.get("command"))
        try:
            words = shlex.split(command)
        except ValueError as exc:
            raise errors.BadSpec(f"measurement command: {command!r}: {exc}") from None
        if not words:
            raise errors.BadSpec("measurement command: an empty command")
        regex = params.get("figure_regex")
        if regex is not None:
            regex = _text(n, "figure_regex", regex)
            try:
                groups = re.compile(regex).groups
            except re.error as exc:
                raise errors.BadSpec(f"--figure-regex {regex!r}: {exc}") from None
            if groups != 1:
                raise errors.BadSpec(f"--figure-regex {regex!r}: needs exactly one group "
                                     f"(it has {groups}), the number to read")
        unit = params.get("figure_unit", "")
        if not isinstance(unit, str):
            raise errors.BadSpec("measurement command: figure_unit: a text")
        higher = _bool(n, "figure_higher_is_better", params.get("figure_higher_is_better",
                                                                 True))
        timeout = _seconds(n, "timeout", params.get("timeout", 3600.0))
        return cls(command, regex, unit, higher, timeout)

    def params(self) -> JsonObject:
        return {"command": self.command, "figure_regex": self.figure_regex,
                "figure_unit": self.figure_unit,
                "figure_higher_is_better": self.figure_higher_is_better,
                "timeout": self.timeout}

    def figures(self) -> list[Figure]:
        out = [Figure("wall_s", "s", False)]
        if self.figure_regex is not None:
            out.append(Figure("figure", self.figure_unit, self.figure_higher_is_better))
        return out

    def argv(self, run_levels: Mapping[str, JsonValue]) -> list[str]:
        np_ = run_levels.get("np")
        words = shlex.split(self.command)
        return [w.replace("{np}", str(np_)) for w in words] if np_ is not None else words

    def measure(self, where: Where, run_levels: Mapping[str, JsonValue],
                budget_s: float) -> Sample:
        started = time.monotonic()
        argv = self.argv(run_levels)
        env = _environment(_run_env(run_levels))
        try:
            done = job.run(argv, self.timeout, env=env, keep=OUTPUT_KEEP)
        except OSError as exc:
            return Sample(duration_s=time.monotonic() - started,
                          error=f"{argv[0]}: cannot start ({exc.strerror or exc})")
        out, err = done.stdout_text(), done.stderr_text()
        detail: JsonObject = {"argv": list[JsonValue](argv), "exit_status": done.returncode,
                              "stderr_tail": err[-2000:],
                              "env": dict[str, JsonValue](_run_env(run_levels))}
        sample = Sample(duration_s=time.monotonic() - started, detail=detail)
        if done.stopped:
            sample.error = f"did not end within {self.timeout:g} s (stopped)"
        elif done.returncode != 0:
            why = job.said(err)
            sample.error = f"exit status {done.returncode}" + (f": {why}" if why else "")
        else:
            sample.figures["wall_s"] = done.elapsed_s
            self._figure(out, sample)
        return sample

    def _figure(self, out: str, sample: Sample) -> None:
        if self.figure_regex is None:
            return
        m = re.search(self.figure_regex, out, re.MULTILINE)
        if m is None:
            sample.figures.clear()
            sample.error = f"--figure-regex {self.figure_regex!r} found nothing in the output"
            return
        try:
            value = float(m.group(1))
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            sample.figures.clear()
            sample.error = f"--figure-regex matched {m.group(1)!r}, not a number"
            return
        sample.figures["figure"] = value


def _environment(extra: Mapping[str, str]) -> dict[str, str] | None:
    return None if not extra else {**os.environ, **extra}


# ------------------------------------------------------------------ hpcc, hpl


HPCC_KEYS = ("HPL_Tflops", "StarDGEMM_Gflops", "PTRANS_GBs", "MPIRandomAccess_GUPs",
             "StarSTREAM_Triad", "MPIFFT_Gflops", "RandomlyOrderedRingLatency_usec",
             "RandomlyOrderedRingBandwidth_GBytes")


def _int_param(name: str, key: str, value: JsonValue, low: int, high: int) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not low <= value <= high:
        raise errors.BadSpec(f"measurement {name}: {key} {value!r}: an integer from {low} "
                             f"to {high}")
    return value


def _opt_text(name: str, key: str, value: JsonValue) -> str | None:
    return None if value is None else _text(name, key, value)


@dataclass(frozen=True)
class Hpcc(Measurement):
    """One HPCC run per block through the cluster suite (its launcher, hosts, agent and
    interface as ``beoperf cluster hpcc`` takes them), ``np`` processes (the run level
    np wins) on a problem of order ``n``; the figures are the summary ``keys``.  Each
    block's run is kept under ``output`` (default: a new private directory)."""

    name: ClassVar[str] = "hpcc"
    KNOWN: ClassVar[tuple[str, ...]] = ("np", "n", "nb", "hosts", "agent", "interface",
                                        "env", "launcher", "timeout", "output", "keys")
    np: int = 2
    n: int = 1000
    nb: int = 80
    hosts: str | None = None
    agent: str | None = None
    interface: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    launcher: str = "auto"
    timeout: float = 900.0
    output: str | None = None
    keys: tuple[str, ...] = HPCC_KEYS

    @classmethod
    def from_params(cls, params: Mapping[str, JsonValue]) -> Hpcc:
        _unknown(cls.name, params, cls.KNOWN)
        n = cls.name
        env = params.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise errors.BadSpec(f"measurement {n}: env: an object of KEY: value texts")
        return cls(np=_int_param(n, "np", params.get("np", 2), 1, 100000) or 2,
                   n=_int_param(n, "n", params.get("n", 1000), 1, 10**8) or 1000,
                   nb=_int_param(n, "nb", params.get("nb", 80), 1, 10000) or 80,
                   hosts=_opt_text(n, "hosts", params.get("hosts")),
                   agent=_opt_text(n, "agent", params.get("agent")),
                   interface=_opt_text(n, "interface", params.get("interface")),
                   env=tuple((str(k), str(v)) for k, v in env.items()),
                   launcher=_text(n, "launcher", params.get("launcher", "auto")),
                   timeout=_seconds(n, "timeout", params.get("timeout", 900.0)),
                   output=_opt_text(n, "output", params.get("output")),
                   keys=cls._keys(params.get("keys")))

    @classmethod
    def _keys(cls, value: JsonValue) -> tuple[str, ...]:
        if value is None:
            return cls.keys
        if not isinstance(value, list) or not value:
            raise errors.BadSpec(f"measurement {cls.name}: keys: a list of HPCC summary keys")
        found = [hpcc.key_of(str(k)) for k in value]
        if None in found:
            raise errors.BadSpec(f"measurement {cls.name}: keys: "
                                 f"{value[found.index(None)]!r} is not an HPCC summary key")
        return tuple(k for k in found if k is not None)

    def params(self) -> JsonObject:
        return {"np": self.np, "n": self.n, "nb": self.nb, "hosts": self.hosts,
                "agent": self.agent, "interface": self.interface, "env": dict(self.env),
                "launcher": self.launcher, "timeout": self.timeout, "output": self.output,
                "keys": list(self.keys), "note": "one full HPCC run per block (HPCC cannot "
                "run HPL alone)"}

    def figures(self) -> list[Figure]:
        return [Figure(k, hpcc.info(k).unit, hpcc.info(k).role != "latency")
                for k in self.keys]

    def spec(self, where: Where, run_levels: Mapping[str, JsonValue],
             output: str) -> cluster.Spec:
        """The cluster suite's spec of one block."""
        np_ = run_levels.get("np")
        env = dict(self.env) | _run_env(run_levels)
        hosts = self.hosts or (",".join(where.hosts) if where.hosts else None)
        return cluster.Spec(output=output, np=(int(np_) if isinstance(np_, int) else self.np,),
                            hosts=hosts, n=self.n, nb=self.nb, launcher=self.launcher,
                            agent=self.agent, interface=self.interface,
                            env=tuple(env.items()), timeout=self.timeout)

    def measure(self, where: Where, run_levels: Mapping[str, JsonValue],
                budget_s: float) -> Sample:
        started = time.monotonic()
        base = self.output or str(_scratch())
        output = os.path.join(base, f"block-{time.strftime('%Y%m%dT%H%M%S')}-"
                                    f"{next(_blocks):04d}")
        try:
            study = cluster.prepare(self.spec(where, run_levels, output))
            ref = cluster.run_one(study, study.configs[0], 1)
        except errors.BeoperfError as exc:
            return Sample(duration_s=time.monotonic() - started, error=str(exc))
        run = ref.run
        detail: JsonObject = {"output": output, "run": ref.document, "status": run.status,
                              "elapsed_s": run.elapsed_s, "np": run.np}
        sample = Sample(duration_s=time.monotonic() - started, detail=detail)
        values = {k: run.number(k) for k in self.keys}  # HPCC prints -1 for "not run"
        missing = [k for k, v in values.items() if v is None or not v > 0]
        if run.status != "ok" or missing:
            why = "; ".join(run.failures) or f"no {', '.join(missing)} in the output"
            sample.error = f"hpcc {run.status}: {why}"
        else:
            sample.figures = {k: float(v) for k, v in values.items() if v is not None}
        return sample


@dataclass(frozen=True)
class Hpl(Hpcc):
    """HPL's figure (``HPL_Tflops``) of one HPCC run per block: HPCC cannot run HPL
    alone, so each block is a full HPCC run, as the figure's note says."""

    name: ClassVar[str] = "hpl"
    keys: tuple[str, ...] = ("HPL_Tflops",)

    @classmethod
    def _keys(cls, value: JsonValue) -> tuple[str, ...]:
        if value is not None and value != ["HPL_Tflops"]:
            raise errors.BadSpec("measurement hpl: its one key is HPL_Tflops (use hpcc for "
                                 "others)")
        return ("HPL_Tflops",)


# ------------------------------------------------------------------ ring


RING_FIGURES = (("RandomlyOrderedRingLatency_usec", "us", False),
                ("RandomlyOrderedRingBandwidth_GBytes", "GB/s", True),
                ("NaturallyOrderedRingLatency_usec", "us", False),
                ("NaturallyOrderedRingBandwidth_GBytes", "GB/s", True))


@dataclass(frozen=True)
class Ring(Measurement):
    """The cluster suite's ring test (HPCC's ring latency and bandwidth, by beoperf's own
    MPI loop) over ``hosts`` (default: the study's), its figures the HPCC keys averaged
    over the block's repeats; the block's time is the series' budget."""

    name: ClassVar[str] = "ring"
    KNOWN: ClassVar[tuple[str, ...]] = ("hosts", "agent", "interface", "env",
                                        "implementation", "bandwidth_size", "random_rings",
                                        "min_trials")
    hosts: str | None = None
    agent: str | None = None
    interface: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    implementation: str | None = None
    bandwidth_size: int = cluster_ring.BANDWIDTH_BYTES
    random_rings: tuple[int, int] = cluster_ring.RANDOM_RINGS
    min_trials: int = 6

    @classmethod
    def from_params(cls, params: Mapping[str, JsonValue]) -> Ring:
        _unknown(cls.name, params, cls.KNOWN)
        n = cls.name
        env = params.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise errors.BadSpec(f"measurement {n}: env: an object of KEY: value texts")
        given = params.get("random_rings", list(cls.random_rings))
        items = given if isinstance(given, list) else []
        rings = [r for r in items if type(r) is int and 0 <= r <= 1000]
        if len(rings) != 2 or len(items) != 2:
            raise errors.BadSpec(f"measurement {n}: random_rings: [latency, bandwidth] "
                                 "counts from 0 to 1000")
        size = _size(n, "bandwidth_size", params.get("bandwidth_size",
                                                     cls.bandwidth_size))
        return cls(hosts=_opt_text(n, "hosts", params.get("hosts")),
                   agent=_opt_text(n, "agent", params.get("agent")),
                   interface=_opt_text(n, "interface", params.get("interface")),
                   env=tuple((str(k), str(v)) for k, v in env.items()),
                   implementation=_opt_text(n, "implementation",
                                            params.get("implementation")),
                   bandwidth_size=size or cls.bandwidth_size,
                   random_rings=(int(rings[0]), int(rings[1])),
                   min_trials=_int_param(n, "min_trials", params.get("min_trials", 6),
                                         2, 1000) or 6)

    def params(self) -> JsonObject:
        return {"hosts": self.hosts, "agent": self.agent, "interface": self.interface,
                "env": dict(self.env), "implementation": self.implementation,
                "bandwidth_size": self.bandwidth_size,
                "random_rings": list(self.random_rings), "min_trials": self.min_trials}

    def figures(self) -> list[Figure]:
        return [Figure(*f) for f in RING_FIGURES]

    def spec(self, where: Where, run_levels: Mapping[str, JsonValue],
             budget_s: float) -> cluster_ring.Spec:
        env = dict(self.env) | _run_env(run_levels)
        mpi = MpiOptions(implementation=self.implementation, bind="none", agent=self.agent,
                         interface=self.interface, env=tuple(env.items()))
        hosts = self.hosts or (",".join(where.hosts) if where.hosts else None)
        common = cluster_mpi.Common(hosts=hosts, mpi=mpi, min_trials=self.min_trials,
                                    time_budget=max(MIN_PART_S, budget_s))
        return cluster_ring.Spec(common=common, bandwidth_bytes=self.bandwidth_size,
                                 random_rings=self.random_rings)

    def measure(self, where: Where, run_levels: Mapping[str, JsonValue],
                budget_s: float) -> Sample:
        started = time.monotonic()
        try:
            outcome = cluster_ring.run(self.spec(where, run_levels, budget_s))
            if outcome is None:
                raise errors.Failed("the ring ran as a rank, not as its controller")
            if outcome.interrupt is not None:
                raise outcome.interrupt
            if outcome.error is not None:
                raise outcome.error
            run = MpiRun.from_document(outcome.document)
        except (errors.BeoperfError, document.DocumentError) as exc:
            return Sample(duration_s=time.monotonic() - started, error=str(exc))
        summary = run.series[0].summary or {} if run.series else {}
        values = {f.key: summary.get(f.key) for f in self.figures()}
        sample = Sample(duration_s=time.monotonic() - started,
                        detail={"series": len(run.series)})
        missing = [k for k, v in values.items() if v is None]
        if missing:
            sample.error = f"ring: no {', '.join(missing)} measured"
        else:
            sample.figures = {k: v.mean for k, v in values.items() if v is not None}
        return sample


# ------------------------------------------------------------------ node


NODE_UNITS = {"stream": "GB/s", "kernels": "MFLOP/s"}


@dataclass(frozen=True)
class Node(Measurement):
    """One node kernel on the controller (the node suite, one part, one repeat): the
    figure is ``metric``, the node document's id of it (``stream.triad.t1``: STREAM's
    triad on 1 thread; ``kernels.daxpy.n65536``: DAXPY at loop length 65536)."""

    name: ClassVar[str] = "node"
    KNOWN: ClassVar[tuple[str, ...]] = ("metric",)
    metric: str = "stream.triad.t1"

    @classmethod
    def from_params(cls, params: Mapping[str, JsonValue]) -> Node:
        _unknown(cls.name, params, cls.KNOWN)
        metric = _text(cls.name, "metric", params.get("metric", cls.metric))
        if not re.fullmatch(r"(stream\.(copy|scale|add|triad)\.t[1-9]\d{0,3}"
                            r"|kernels\.[a-z]+\.n[1-9]\d{0,9})", metric):
            raise errors.BadSpec(f"measurement node: metric {metric!r}: stream.KERNEL.tTHREADS"
                                 " (e.g. stream.triad.t1) or kernels.KERNEL.nLENGTH "
                                 "(e.g. kernels.daxpy.n65536)")
        return cls(metric)

    def params(self) -> JsonObject:
        return {"metric": self.metric}

    def figures(self) -> list[Figure]:
        part = self.metric.split(".")[0]
        return [Figure(self.metric, NODE_UNITS[part], True)]

    def spec(self, budget_s: float) -> node.Spec:
        part, _, last = self.metric.split(".")
        count = int(last[1:])
        if part == "stream":
            return node.Spec(parts=("stream",), repeat=1, threads=(count,))
        return node.Spec(parts=("kernels",), repeat=1, lengths=(count,),
                         kernel_budget=max(MIN_PART_S, budget_s))

    def measure(self, where: Where, run_levels: Mapping[str, JsonValue],
                budget_s: float) -> Sample:
        started = time.monotonic()
        try:
            measured = node.run(self.spec(budget_s))
            if measured.interrupt is not None:
                raise measured.interrupt
            run = NodeRun.from_document(measured.document)
        except (errors.BeoperfError, document.DocumentError) as exc:
            return Sample(duration_s=time.monotonic() - started, error=str(exc))
        found = {m.id: m for m in run.metrics}.get(self.metric)
        sample = Sample(duration_s=time.monotonic() - started,
                        detail={"status": run.status})
        if found is None or not found.samples:
            sample.error = f"node: {self.metric} was not measured ({run.status})"
        else:
            sample.figures = {self.metric: found.mean}
        return sample


_blocks = itertools.count(1)
_scratch_dir: list[str] = []


def _scratch() -> str:
    """One private directory per process for the runs of blocks given no output."""
    if not _scratch_dir:
        _scratch_dir.append(str(safeio.private_dir("beoperf-study-")))
    return _scratch_dir[0]


# ------------------------------------------------------------------ the table


MEASUREMENTS: dict[str, type[Measurement]] = {"pingpong": PingPong, "command": Command,
                                              "hpcc": Hpcc, "hpl": Hpl, "ring": Ring,
                                              "node": Node}


def get(name: str, params: Mapping[str, JsonValue] | None = None) -> Measurement:
    """The measurement ``name`` with ``params``; BadSpec for an unknown name or parameter."""
    cls = MEASUREMENTS.get(name)
    if cls is None:
        raise errors.BadSpec(f"unknown measurement {name!r}",
                             f"choose {', '.join(sorted(MEASUREMENTS))}")
    return cls.from_params(params or {})


