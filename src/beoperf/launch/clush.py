"""ClusterShell fan-out: the command on many hosts at once, each host's output read bounded.

The fan-out itself is ClusterShell's: one worker over the node set, ssh by default (or the
site's configured distant worker when it runs one client per node), or ClusterShell's
ExecWorker when the agent is a template naming the node (``%h``: e.g.
``ip netns exec %h``, a local command per node) or another ssh-like command.

A node is a peer that may lie or break: one printing 100 MB, or printing forever, must
cost the fan-out a bounded amount of memory and time, not all of it.  ClusterShell keeps
every line of every node in its message tree (millions of small objects for a few MB of
short lines), so the workers here do not hand output to it at all: each node's engine
client (ClusterShell's extension point, a worker's ``SHELL_CLASS``) reads raw chunks, keeps
at most ``limit`` bytes of standard output and the last few KiB of standard error, and once
a node has written more than ``limit`` bytes on a stream it ends that node's command and
closes the stream.  The node is then reported as having sent too much.  A command that
closes its output and runs on is still a running command: its timeout applies (ClusterShell
alone would wait for it, without one, with every other node stalled).

This module is the mechanics; :mod:`beoperf.launch.remote` runs commands with it and
returns one result per host.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from string import Template
from typing import Any

from ClusterShell.Engine.Engine import E_READ, E_WRITE
from ClusterShell.NodeSet import NodeSet
from ClusterShell.Task import Task
from ClusterShell.Worker import fastsubprocess
from ClusterShell.Worker.EngineClient import EngineClientEOF
from ClusterShell.Worker.Exec import ExecWorker
from ClusterShell.Worker.fastsubprocess import PIPE, STDOUT, Popen
from ClusterShell.Worker.Pdsh import WorkerPdsh
from ClusterShell.Worker.Ssh import WorkerSsh

from beoperf import procwait, safeio
from beoperf.launch import guard
from beoperf.launch.base import Launch, Launcher, LaunchSpec, refuse, register

DEFAULT_FANOUT = 64
DEFAULT_TIMEOUT_S = 60.0
OUTPUT_LIMIT = safeio.LIMITS["answer"]
STDERR_TAIL = 4096  # bytes of each node's standard error kept (for its last line)
EXITED = "exited"  # the stream of a command's pidfd
REMOTE_GRACE_S = 5.0  # a node kills its command this long after the timeout here (at least)


# --------------------------------------------------------------------------- bounded reading


class Outputs:
    """What the nodes printed: standard output (at most ``limit`` bytes each), the tail of
    standard error, the nodes that went over the limit on either stream, and when each
    node's command started and ended (monotonic seconds)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stdout: dict[str, bytearray] = {}
        self.stderr: dict[str, bytearray] = {}
        self.sent: dict[tuple[str, bool], int] = {}
        self.oversized: set[str] = set()
        self.overdue: set[str] = set()  # closed their output, ran past the deadline
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}

    def add(self, node: str, is_stdout: bool, data: bytes) -> bool:
        """Keep ``data`` from ``node`` (standard output up to the limit, standard error's
        tail); False once the node is over the limit on this stream."""
        before = self.sent.get((node, is_stdout), 0)
        self.sent[(node, is_stdout)] = before + len(data)
        over = before + len(data) > self.limit
        if is_stdout:
            self.stdout.setdefault(node, bytearray()).extend(data[:max(0, self.limit - before)])
        else:
            tail = self.stderr.setdefault(node, bytearray())
            tail.extend(data[-STDERR_TAIL:])
            del tail[:-STDERR_TAIL]
        if over:
            self.oversized.add(node)
        return not over

    def cut(self, node: str, is_stdout: bool) -> bool:
        """Whether less of the stream was kept than the node wrote."""
        kept = len((self.stdout if is_stdout else self.stderr).get(node, b""))
        return self.sent.get((node, is_stdout), 0) > kept

    def last_error_line(self, node: str) -> str:
        """The node's last non-empty line of standard error ('' if none)."""
        lines = bytes(self.stderr.get(node, b"")).decode(errors="replace").strip().splitlines()
        return lines[-1].strip() if lines else ""


class _BoundedClient:
    """Mixed into an ExecClient (or SshClient): raw, counted reads instead of lines; when
    the command started and ended.  A command that closes its output and runs on keeps its
    node open through the command's pidfd, a stream of its own that becomes readable when
    the command ends, so that the node's timeout still applies and the other nodes are
    served meanwhile (without a pidfd, ``_close`` waits for it, at most until the
    deadline)."""

    # what the ExecClient this is mixed into has (for the type checker)
    key: str
    worker: Any
    popen: Any
    streams: Any
    fire_delay: float
    _stderr: bool
    _read: Callable[[str], bytes]

    def _handle_read(self, sname: str) -> None:
        if sname == EXITED:
            raise EngineClientEOF()  # the command ended: its pidfd became readable
        worker = self.worker
        data = self._read(sname)  # EngineClientEOF at the end
        if not worker.outputs.add(self.key, sname == worker.SNAME_STDOUT, data):
            self._end()
            raise EngineClientEOF()

    def _end(self) -> None:
        """Kill the command and whatever it started: its session, which it leads (a
        process group is not enough: coreutils' timeout, for one, makes its own); then
        reap it (briefly: SIGKILL is prompt), so that no Popen is dropped with its child
        still running (see :func:`take_over_unreaped`)."""
        popen = getattr(self, "popen", None)
        if popen is not None and popen.returncode is None:
            end_session(popen.pid)
            procwait.wait(_Waitable(popen), REAP_S)  # type: ignore[arg-type]

    def _exec_nonblock(self, commandlist: object, shell: bool = False,
                       env: dict[str, str] | None = None) -> Any:
        """As ClusterShell starts a command, but in a session of its own: ending it on a
        timeout, an output over the limit or an interrupt ends what it started too (``ip
        netns exec NS sh -c ...``: the shell and its children); and sent SIGTERM should
        beoperf die (SIGKILL included): ssh then ends, and the node's ``timeout``
        (:func:`bounded_there`) passes the signal on to the command's process group."""
        take_over_unreaped()
        proc = Popen(commandlist, bufsize=0, stdin=PIPE, stdout=PIPE,
                     stderr=PIPE if self._stderr else STDOUT,
                     shell=shell, env={**os.environ, **env} if env else None,
                     preexec_fn=_own_session_ending_with(os.getpid()))
        streams, worker = self.streams, self.worker
        if self._stderr:
            streams.set_stream(worker.SNAME_STDERR, proc.stderr, E_READ)
        streams.set_stream(worker.SNAME_STDOUT, proc.stdout, E_READ)
        streams.set_stream(worker.SNAME_STDIN, proc.stdin, E_WRITE, retain=False)
        return proc

    def _start(self) -> object:
        self.worker.outputs.started[self.key] = time.monotonic()
        started = super()._start()  # type: ignore[misc]  # the ExecClient mixed with
        try:
            pidfd = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):
            return started  # no pidfd: _close waits, at most until the deadline
        self.streams.set_stream(EXITED, pidfd, E_READ, retain=True)
        return started

    def _close(self, abort: bool, timeout: bool) -> None:
        outputs = self.worker.outputs
        popen = getattr(self, "popen", None)
        if abort:
            self._end()
        elif popen is not None and popen.poll() is None:
            delay = self.fire_delay  # the timeout (-1: none)
            left = None if delay < 0 else outputs.started[self.key] + delay - time.monotonic()
            if procwait.wait(_Waitable(popen), left) is None:  # type: ignore[arg-type]
                self._end()
                outputs.overdue.add(self.key)
        outputs.ended[self.key] = time.monotonic()
        super()._close(abort, timeout)  # type: ignore[misc]


REAP_S = 2.0  # how long _end waits for a killed command to be reaped
_UNREAPED: list[Any] = []  # ClusterShell Popens dropped while their child still ran
_UNREAPED_LOCK = threading.Lock()


def take_over_unreaped() -> None:
    """ClusterShell's fastsubprocess keeps a Popen dropped while its child still ran in
    its module list ``_active``, and its ``_cleanup`` (run by every new Popen) then
    compares that child's returncode, None, with 0: a TypeError out of the next fan-out
    (a study's restore after a SIGTERM that came mid-fan-out failed so).  Such entries
    are moved to a list of our own, where each is reaped once its child has ended."""
    with _UNREAPED_LOCK:
        active = fastsubprocess._active
        _UNREAPED.extend(active)
        del active[:]
        _UNREAPED[:] = [p for p in _UNREAPED
                        if p._internal_poll(_deadstate=sys.maxsize) is None]


def _own_session_ending_with(parent: int) -> Callable[[], None]:
    """What a node's command does before it runs (in the child): a session of its own,
    and SIGTERM when ``parent`` (beoperf) dies; it exits at once if that happened
    already."""

    def prepare() -> None:
        os.setsid()
        if guard.PRCTL is not None:
            guard.PRCTL(guard.PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return prepare


def end_session(sid: int, rounds: int = 5) -> None:
    """SIGKILL every process of session ``sid`` (found in /proc), again while some are
    left (one may have forked meanwhile).  A process that started a session of its own
    is not in it: what is meant to outlive its command detaches so."""
    for _ in range(rounds):
        members = session_members(sid)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # already gone


def session_members(sid: int) -> list[int]:
    """The processes whose session is ``sid`` (/proc/PID/stat's sixth field; the name in
    the second may hold spaces and parentheses, so fields are counted after its last
    ')')."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read(4096)
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rfind(b")") + 1:].split()
        if len(fields) > 3 and fields[3] == str(sid).encode():
            found.append(int(entry))
    return found


class _Waitable:
    """ClusterShell's Popen (its own, forked) as :func:`beoperf.procwait.wait` takes it:
    a pid, ``poll``, and ``wait(timeout)`` (here a short poll, for kernels without a
    pidfd)."""

    def __init__(self, popen: Any) -> None:
        self.popen, self.pid = popen, popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.popen.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired("", timeout or 0.0)
            time.sleep(0.01)
        return self.popen.returncode


class _BoundedWorker:
    """Mixed into an ExecWorker: ``outputs`` collects what its clients read."""

    output_limit = 0  # set by bounded_worker_class

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.outputs = Outputs(self.output_limit)
        super().__init__(*args, **kwargs)


def base_worker_class(configured: object, remote: bool) -> type[ExecWorker]:
    """The worker to bound: ExecWorker locally; remotely the configured distant worker if
    it runs one client per node (ssh, rsh), else ssh (pdsh multiplexes nodes)."""
    if not remote:
        return ExecWorker
    if (isinstance(configured, type) and issubclass(configured, ExecWorker)
            and not issubclass(configured, WorkerPdsh)):
        return configured
    return WorkerSsh


def bounded_worker_class(base: type[ExecWorker], limit: int) -> type[ExecWorker]:
    """``base`` with at most ``limit`` bytes read per node and stream."""
    client = type(f"Bounded{base.SHELL_CLASS.__name__}", (_BoundedClient, base.SHELL_CLASS),
                  {})
    return type(f"Bounded{base.__name__}", (_BoundedWorker, base),
                {"SHELL_CLASS": client, "output_limit": limit})


# --------------------------------------------------------------------------- commands


class _Template(Template):
    delimiter = "%"  # as ClusterShell reads commands: %h, %host, %{h}, %n, %%


def template_problem(template: str) -> str | None:
    """Why ``template`` cannot be an exec template (None: it can): it must be valid for
    ClusterShell and name the node (%h or %host) so that each node runs its own command."""
    pattern = _Template(template)
    if not pattern.is_valid():
        return "is not a valid ClusterShell pattern (write %% for a literal %)"
    names = set(pattern.get_identifiers())
    if "hosts" in names:
        return "has %hosts (all nodes in one command); use %h, one command per node"
    if not names & {"h", "host"}:
        return "has no %h: every node would run the same command"
    return None


def exec_template(agent: str | None) -> str | None:
    """The ExecWorker template for an agent: a template naming the node as it is, an
    ssh-like command as ``AGENT %h``; None (no agent) means ClusterShell's ssh."""
    if agent is None:
        return None
    return agent if "%" in agent else f"{agent} %h"


def remote_command(spec: LaunchSpec) -> str:
    """The command each node runs, as ClusterShell takes it: the words quoted for a shell,
    the environment set with ``env``, and every % doubled (ClusterShell substitutes %h).
    Behind an ssh-like agent (no %h) the words pass through two shells, this host's and the
    node's, so they are quoted twice; a template naming the node (``ip netns exec %h``)
    runs them as its own arguments, and ssh itself (no agent) hands the line to the node's
    shell: quoted once."""
    words = list(spec.argv)
    if spec.env:
        words = ["env", *(f"{k}={v}" for k, v in spec.env.items()), *words]
    line = shlex.join(words)
    if spec.agent is not None and "%" not in spec.agent:
        line = shlex.quote(line)
    return line.replace("%", "%%")


def check(spec: LaunchSpec) -> str | None:
    """ValueError for what a fan-out cannot honour; the exec template (None: ssh)."""
    refuse(spec, "clush", ranks_per_host=1, bind="none", interface=None, extra=())
    if not spec.hosts:
        raise ValueError("the clush launcher needs hosts")
    template = exec_template(spec.agent)
    problem = None if template is None else template_problem(template)
    if problem:
        raise ValueError(f"agent {spec.agent!r} {problem}")
    return template


@register("clush")
class Clush(Launcher):
    """ssh (or an exec template) on every host through ClusterShell."""

    def available(self) -> bool:
        return True  # ClusterShell is a dependency of beoperf

    def command(self, spec: LaunchSpec) -> Launch:
        """The same fan-out with the ``clush`` command."""
        template = check(spec)
        nodes, command = str(NodeSet.fromlist(list(spec.hosts))), remote_command(spec)
        if template is None:
            return Launch(("clush", "-w", nodes, "--options=-oBatchMode=yes", command))
        return Launch(("clush", "-w", nodes, "-R", "exec", f"{template} {command}"))


# --------------------------------------------------------------------------- scheduling


# the node runs "$@" under its own timeout ($0 seconds), or as it is where it has none
BOUND_THERE = 'command -v timeout >/dev/null 2>&1 && exec timeout -s KILL "$0" "$@"; exec "$@"'


def bounded_there(spec: LaunchSpec, timeout: float) -> LaunchSpec:
    """``spec`` run under the node's own ``timeout`` (coreutils), killed there a little
    after it is given up here: over ssh, ending the local ssh does not end the command on
    the node (it has no terminal to hang up), nor does this host dying.  A node without
    ``timeout`` runs the command unbounded, as before."""
    after = timeout + max(REMOTE_GRACE_S, 0.1 * timeout)
    return dataclasses.replace(spec, argv=("sh", "-c", BOUND_THERE, f"{after:g}", *spec.argv))


def schedule(task: Task, spec: LaunchSpec, timeout: float, limit: int = OUTPUT_LIMIT,
             stdin: bytes = b"") -> ExecWorker:
    """A bounded worker running ``spec`` on its hosts (each for at most ``timeout``
    seconds, at most ``limit`` bytes read per stream, and killed on the host itself soon
    after: :func:`bounded_there`), scheduled on ``task`` (which runs it); every host's
    command reads ``stdin`` then the end of its input.  ValueError for a spec a fan-out
    cannot honour."""
    template = check(spec)
    if template is None:
        task.set_info("ssh_options", "-oBatchMode=yes")  # never wait for a password
    base = base_worker_class(task.default("distant_worker"), template is None)
    command = remote_command(bounded_there(spec, timeout))
    worker = bounded_worker_class(base, limit)(
        NodeSet.fromlist(list(spec.hosts)), handler=None, timeout=timeout, stderr=True,
        command=f"{template} {command}" if template else command)
    if stdin:
        worker.write(stdin)
    worker.set_write_eof()
    task.schedule(worker)
    return worker

