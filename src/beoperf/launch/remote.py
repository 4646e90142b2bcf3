"""The remote-host layer: a command on a set of hosts, one result per host.

A host is reached by ssh through ClusterShell (BatchMode: never a password prompt), by
another ssh-like command (``ssh -p 2222``), or by an exec template naming the host
(``ip netns exec %h``: a local command per host); :mod:`beoperf.launch.clush` does the
fan-out and bounds what each host may cost.  Every host named gets a :class:`HostResult`,
whatever happened to it: what it printed (standard output up to the limit, the tail of
standard error, each marked when cut), its exit status, how long it ran and, when it did
not succeed, why in one line; a host that could not be reached at all (ssh, or the exec
template, failed) is told apart from a command that ran and failed.  A result has a JSON
form (:meth:`HostResult.to_dict`, :meth:`HostResult.from_dict`) for the documents that
keep per-host results.  A host that times out, fails, prints too much or does not
exist never stops or hides the others, and nothing here raises for one host: errors are
data, and every command that reaches hosts reads them the same way.

Data for a host goes to its command's standard input (the same bytes for every host, or
bytes per host), followed by the end of input.  A file meant for a host is sent that way
and written there by the program that reads it (with :mod:`beoperf.safeio`), so that its
bytes never pass through a shell.

A command given up (its timeout, too much output, Ctrl-C) is ended with what it started
(its session, here); should beoperf die (SIGKILL included) each command here gets
SIGTERM; on the host it runs under coreutils' ``timeout`` (where the host has it), which
passes that signal on, and ends it there a few seconds after its timeout whatever became
of this side (ssh gone, beoperf killed).  A process meant to outlive its command (a
study's dead-man agent) starts a session of its own and closes its output, and its
command then ends.

:func:`run` is one command on many hosts, :func:`run_each` a command per host (all at
once, under one fanout).  :func:`group` folds the results as ``clubak -b`` does: identical
outputs together, the others by reason.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import shlex
import shutil
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ClusterShell.Engine.Engine import EngineException
from ClusterShell.NodeSet import NodeSet, NodeSetException
from ClusterShell.Task import Task, task_self
from ClusterShell.Worker.Exec import ExecWorker
from ClusterShell.Worker.Worker import WorkerError

from beoperf.launch import clush
from beoperf.launch.base import LaunchSpec
from beoperf.model import narrow, nodeset
from beoperf.model.document import DocumentError, JsonObject

DEFAULT_FANOUT = clush.DEFAULT_FANOUT
DEFAULT_TIMEOUT_S = clush.DEFAULT_TIMEOUT_S
OUTPUT_LIMIT = clush.OUTPUT_LIMIT
DEFAULT_BEOPERF = "python3 -m beoperf"  # how beoperf is started on a host

OK, FAILED, UNREACHABLE = "ok", "failed", "unreachable"
TIMEOUT, OVER_LIMIT, NOT_RUN = "timeout", "over-limit", "not-run"
STATUSES = (OK, FAILED, UNREACHABLE, TIMEOUT, OVER_LIMIT, NOT_RUN)
UNREACHABLE_EXIT = 255  # ssh's own failure (and ``ip netns exec``'s), not the command's
TEXT, BASE64 = "utf-8", "base64"  # how a stream is written in a result's JSON form

Stdin = bytes | Mapping[str, bytes] | None  # for every host, or per host (absent: none)


@dataclass(frozen=True)
class HostResult:
    """What one host's command did.

    ``status``: ok (exit status 0 in time, output within the limit), failed (the command
    ran and gave another exit status, or was ended early when the fan-out itself
    stopped), unreachable (the host was never reached: ssh, or the exec template, failed
    on its own: exit status 255, as ssh gives for a refused connection, a name not
    resolved or a key refused, and ``ip netns exec`` for a namespace that does not exist;
    or the template's command is not on this host), timeout, over-limit (more output
    than the limit: the command was ended and its output cut) or not-run (it never
    started: ``error`` says why).  ``exit_code`` is the command's own (ssh's for an
    unreachable host; None when it was ended or never started); ``stdout`` at most the
    limit, ``stderr`` its last few KiB, ``*_cut`` when less was kept than was written;
    ``duration_s`` from start to end (None if never started); ``error`` one line ('' when
    ok), and ``reason`` the same with the host's own name written %h, so that hosts that
    failed alike group.  A remote command that itself exits with 255 cannot be told from
    ssh failing, and is reported unreachable.

    Its JSON form (:meth:`to_dict`, read back by :meth:`from_dict`), stable for the
    documents that store it::

        {"host": str, "status": one of STATUSES, "exit_code": int | null,
         "stdout": str, "stdout_encoding": "utf-8" | "base64", "stdout_cut": bool,
         "stderr": str, "stderr_encoding": "utf-8" | "base64", "stderr_cut": bool,
         "duration_s": float | null, "error": str, "reason": str}

    A stream is written as its text when it is valid UTF-8, else in base64."""

    host: str
    status: str
    exit_code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_cut: bool = False
    stderr_cut: bool = False
    duration_s: float | None = None
    error: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_dict(self) -> JsonObject:
        """This result as JSON (the shape in the class's docstring)."""
        out: JsonObject = {"host": self.host, "status": self.status,
                           "exit_code": self.exit_code}
        for name, data, cut in (("stdout", self.stdout, self.stdout_cut),
                                ("stderr", self.stderr, self.stderr_cut)):
            text, encoding = _stream_text(data)
            out |= {name: text, f"{name}_encoding": encoding, f"{name}_cut": cut}
        return out | {"duration_s": self.duration_s, "error": self.error,
                      "reason": self.reason}

    @classmethod
    def from_dict(cls, data: JsonObject) -> HostResult:
        """A result from its JSON form; ValueError naming the first field that is not as
        :meth:`to_dict` writes it."""
        try:
            return cls._read(data)
        except DocumentError as e:
            raise ValueError(f"a host's result: {e}") from None

    @classmethod
    def _read(cls, data: JsonObject) -> HostResult:
        status = narrow.text_at(data, "status")
        if status not in STATUSES:
            raise ValueError(f"a host's result: status {status!r} is not one of "
                             f"{', '.join(STATUSES)}")
        duration = narrow.opt_num_at(data, "duration_s")
        return cls(narrow.text_at(data, "host"), status, narrow.opt_int_at(data, "exit_code"),
                   _stream_bytes(data, "stdout"), _stream_bytes(data, "stderr"),
                   narrow.flag_at(data, "stdout_cut"), narrow.flag_at(data, "stderr_cut"),
                   None if duration is None else float(duration),
                   narrow.text_at(data, "error"), narrow.text_at(data, "reason"))


def _stream_text(data: bytes) -> tuple[str, str]:
    """(the stream as JSON text, its encoding): UTF-8 text, else base64."""
    try:
        return data.decode(), TEXT
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), BASE64


def _stream_bytes(data: JsonObject, name: str) -> bytes:
    text, encoding = narrow.text_at(data, name), narrow.text_at(data, f"{name}_encoding")
    if encoding == TEXT:
        return text.encode()
    if encoding == BASE64:
        try:
            return base64.b64decode(text, validate=True)
        except binascii.Error:
            raise ValueError(f"a host's result: {name} is not base64") from None
    raise ValueError(f"a host's result: {name}_encoding {encoding!r} is not "
                     f"{TEXT!r} or {BASE64!r}")


# --------------------------------------------------------------------------- running


def run(spec: LaunchSpec, timeout: float = DEFAULT_TIMEOUT_S, fanout: int = DEFAULT_FANOUT,
        limit: int = OUTPUT_LIMIT, stdin: Stdin = None) -> dict[str, HostResult]:
    """``spec``'s command on each of its hosts (``spec.agent``: how they are reached; at
    most ``fanout`` at a time, each for at most ``timeout`` seconds with at most ``limit``
    bytes of output read): host -> result, in the order named.  ValueError only for what
    cannot run on any host (a spec a fan-out cannot honour, a host named twice ...)."""
    return run_each([spec], timeout, fanout, limit, stdin)


def run_each(specs: Sequence[LaunchSpec], timeout: float = DEFAULT_TIMEOUT_S,
             fanout: int = DEFAULT_FANOUT, limit: int = OUTPUT_LIMIT,
             stdin: Stdin = None) -> dict[str, HostResult]:
    """Each spec's command on its hosts, all at once under one fanout (e.g. a server on
    one host, its clients on the others): host -> result, in the order named."""
    hosts = _checked(specs, timeout, fanout, limit)
    results: dict[str, HostResult] = {}
    for spec in specs:
        results |= _agent_missing(spec)
    task = task_self()
    task.set_info("fanout", fanout)
    workers = [clush.schedule(task, part, timeout, limit, data)
               for spec in specs if spec.hosts[0] not in results
               for part, data in _by_stdin(spec, stdin)]
    failure = _run(task) if workers else None
    for worker in workers:
        results.update(_results(worker, timeout, failure))
    return {h: results.get(h) or _not_run(h, failure or "no result") for h in hosts}


def _checked(specs: Sequence[LaunchSpec], timeout: float, fanout: int,
             limit: int) -> list[str]:
    """Every host named (ValueError for anything that cannot run at all)."""
    if fanout < 1 or limit < 1 or not timeout > 0:
        raise ValueError(f"fanout {fanout}, limit {limit}, timeout {timeout}: each must be "
                         "positive")
    for spec in specs:
        clush.check(spec)
    hosts = [h for spec in specs for h in spec.hosts]
    for host in hosts:
        _one_host(host)
    twice = sorted(h for h, n in Counter(hosts).items() if n > 1)
    if twice:
        raise ValueError(f"host {twice[0]} named twice")
    return hosts


def _agent_missing(spec: LaunchSpec) -> dict[str, HostResult]:
    """Every host of ``spec`` as unreachable when the command of its agent (an exec
    template or an ssh-like command: its first word, past a leading ``exec`` and
    ``NAME=value`` words) is not on this host; {} when it is, or when there is no agent
    (ClusterShell's ssh)."""
    try:
        words = shlex.split(spec.agent) if spec.agent else []
    except ValueError:  # not shell words: left to the shell to say
        return {}
    while words and (words[0] == "exec" or words[0].partition("=")[0].isidentifier()
                     and "=" in words[0]):
        words = words[1:]
    if not words or "%" in words[0] or shutil.which(words[0]) is not None:
        return {}
    why = f"unreachable: the agent's command {words[0]!r} is not found here"
    return {h: HostResult(h, UNREACHABLE, error=why, reason=why) for h in spec.hosts}


def _one_host(name: str) -> None:
    """ValueError unless ``name`` is one host to ClusterShell (not 'a,b' or 'n[1-2]')."""
    try:  # counted first: 'n[1-100000000]' is not expanded to find it is not one host
        ok = nodeset.count(name) == 1 and list(NodeSet(name)) == [name]
    except (NodeSetException, nodeset.NodeSetSizeError):
        ok = False
    if not ok:
        raise ValueError(f"host {name!r} is not one host name")


def _by_stdin(spec: LaunchSpec, stdin: Stdin) -> list[tuple[LaunchSpec, bytes]]:
    """``spec`` split into the hosts that read the same input (one part without
    per-host input)."""
    if not isinstance(stdin, Mapping):
        return [(spec, stdin or b"")]
    parts: dict[bytes, list[str]] = {}
    for host in spec.hosts:
        parts.setdefault(bytes(stdin.get(host, b"")), []).append(host)
    return [(dataclasses.replace(spec, hosts=tuple(hosts)), data)
            for data, hosts in parts.items()]


def _run(task: Task) -> str | None:
    """Run the scheduled workers; why the commands not yet started never will (None:
    they all ran).  The engine has ended the commands it had started."""
    try:
        task.run()
    except (OSError, WorkerError, EngineException) as exc:
        return f"the fan-out stopped: {exc}"
    return None


def _not_run(host: str, why: str) -> HostResult:
    return HostResult(host, NOT_RUN, error=f"not run: {why}", reason=f"not run: {why}")


def _results(worker: ExecWorker, timeout: float,
             failure: str | None) -> dict[str, HostResult]:
    """One result for every host of a finished worker."""
    codes = {node: rc for rc, keys in worker.iter_retcodes() for node in keys}
    late = set(worker.iter_keys_timeout()) | worker.outputs.overdue
    return {node: _result(worker.outputs, node, codes.get(node), node in late, timeout,
                          failure) for node in worker.nodes}


def _result(out: clush.Outputs, node: str, rc: int | None, late: bool, timeout: float,
            failure: str | None) -> HostResult:
    started = out.started.get(node)
    if started is None:
        return _not_run(node, failure or "not started")
    status, code, error, reason = _status(out, node, rc, late, timeout, failure)
    return HostResult(node, status, code, bytes(out.stdout.get(node, b"")),
                      bytes(out.stderr.get(node, b"")), out.cut(node, True),
                      out.cut(node, False), out.ended.get(node, time.monotonic()) - started,
                      error, reason)


def _status(out: clush.Outputs, node: str, rc: int | None, late: bool, timeout: float,
            failure: str | None) -> tuple[str, int | None, str, str]:
    """(status, the command's exit status, error, reason) of a host whose command started."""
    if node in out.oversized:
        why = f"output over {out.limit:,} bytes"
        return OVER_LIMIT, None, why, why
    if late:
        why = f"timed out after {timeout:g} s"
        return TIMEOUT, None, why, why
    if rc is None:  # ended with the others when the fan-out stopped
        why = f"ended early: {failure or 'no exit status'}"
        return FAILED, None, why, why
    if rc == 0:
        return OK, 0, "", ""
    status = UNREACHABLE if rc == UNREACHABLE_EXIT else FAILED
    last = out.last_error_line(node)
    if not last:
        return status, rc, f"exit status {rc}", f"exit status {rc}"
    return status, rc, f"exit status {rc}: {last}", f"exit status {rc}: " + \
        last.replace(node, "%h")


# --------------------------------------------------------------------------- beoperf on hosts


def node_argv(remote: str, args: Sequence[str]) -> tuple[str, ...]:
    """The words a host runs to start beoperf with ``args``: ``remote`` (how beoperf is
    started there, e.g. ``python3 -m beoperf``) then ``args``.  Plain words are kept as
    words; anything a shell must read (``cd /opt && ...``, ``$VAR``) runs as ``sh -c`` so
    that it means what it says."""
    try:
        words = shlex.split(remote)
    except ValueError:
        words = []
    if words and shlex.join(words) == " ".join(remote.split()):
        return (*words, *args)
    return ("sh", "-c", f"{remote} {shlex.join(args)}")


# --------------------------------------------------------------------------- grouping


@dataclass
class Outcome:
    """The hosts folded: identical outputs of the hosts that succeeded (output -> hosts),
    the others by reason (reason -> hosts)."""

    outputs: dict[bytes, NodeSet] = field(default_factory=dict)
    failed: dict[str, NodeSet] = field(default_factory=dict)


def group(results: Mapping[str, HostResult]) -> Outcome:
    """``results`` folded as ``clubak -b`` folds them."""
    out = Outcome()
    for host, result in results.items():
        if result.ok:
            out.outputs.setdefault(result.stdout, NodeSet()).update(host)
        else:
            out.failed.setdefault(result.reason, NodeSet()).update(host)
    return out


def group_reasons(failed: Mapping[str, NodeSet]) -> dict[str, str]:
    """reason -> folded node set (JSON-ready), the biggest group first."""
    items = sorted(failed.items(), key=lambda kv: (-len(kv[1]), str(kv[1])))
    return {reason: str(ns) for reason, ns in items if len(ns)}
