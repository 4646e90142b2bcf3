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
closes the stream.  The node is then reported as having sent too much.

:func:`run` returns, per node, its output (identical outputs grouped, as ``clubak -b``
groups them) or why there is none: over the limit, an exit status with the last line of
standard error, a timeout.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from string import Template

from ClusterShell.NodeSet import NodeSet
from ClusterShell.Task import task_self
from ClusterShell.Worker.EngineClient import EngineClientEOF
from ClusterShell.Worker.Exec import ExecWorker
from ClusterShell.Worker.Pdsh import WorkerPdsh
from ClusterShell.Worker.Ssh import WorkerSsh

from beoperf import safeio
from beoperf.launch.base import Launch, Launcher, LaunchSpec, refuse, register

DEFAULT_FANOUT = 64
DEFAULT_TIMEOUT_S = 60.0
OUTPUT_LIMIT = safeio.LIMITS["answer"]
STDERR_TAIL = 4096  # bytes of each node's standard error kept (for its last line)


# --------------------------------------------------------------------------- bounded reading


class Outputs:
    """What the nodes printed: standard output (at most ``limit`` bytes each), the tail of
    standard error, and the nodes that went over the limit on either stream."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stdout: dict[str, bytearray] = {}
        self.stderr: dict[str, bytearray] = {}
        self.sent: dict[tuple[str, bool], int] = {}
        self.oversized: set[str] = set()

    def add(self, node: str, is_stdout: bool, data: bytes) -> bool:
        """Keep ``data`` from ``node``; False (nothing kept) once it is over the limit."""
        sent = self.sent.get((node, is_stdout), 0) + len(data)
        self.sent[(node, is_stdout)] = sent
        if sent > self.limit:
            self.oversized.add(node)
            self.stdout.pop(node, None)
            return False
        if is_stdout:
            self.stdout.setdefault(node, bytearray()).extend(data)
        else:
            tail = self.stderr.setdefault(node, bytearray())
            tail.extend(data)
            del tail[:-STDERR_TAIL]
        return True

    def last_error_line(self, node: str) -> str:
        """The node's last non-empty line of standard error ('' if none)."""
        lines = bytes(self.stderr.get(node, b"")).decode(errors="replace").strip().splitlines()
        return lines[-1].strip() if lines else ""


class _BoundedClient:
    """Mixed into an ExecClient (or SshClient): raw, counted reads instead of lines."""

    def _handle_read(self, sname: str) -> None:
        worker = self.worker  # type: ignore[attr-defined]
        data = self._read(sname)  # type: ignore[attr-defined]  # EngineClientEOF at the end
        if not worker.outputs.add(self.key, sname == worker.SNAME_STDOUT, data):  # type: ignore
            popen = getattr(self, "popen", None)
            if popen is not None and popen.poll() is None:
                popen.kill()
            raise EngineClientEOF()


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
    the environment set with ``env``, and every % doubled (ClusterShell substitutes %h)."""
    words = list(spec.argv)
    if spec.env:
        words = ["env", *(f"{k}={v}" for k, v in spec.env.items()), *words]
    return shlex.join(words).replace("%", "%%")


def _check(spec: LaunchSpec) -> str | None:
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
        template = _check(spec)
        nodes, command = str(NodeSet.fromlist(list(spec.hosts))), remote_command(spec)
        if template is None:
            return Launch(("clush", "-w", nodes, "--options=-oBatchMode=yes", command))
        return Launch(("clush", "-w", nodes, "-R", "exec", f"{template} {command}"))


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    """Per node: what it printed (identical outputs grouped: output -> nodes) when it
    exited 0 in time within the limit, or why not (reason -> nodes)."""

    outputs: dict[bytes, NodeSet] = field(default_factory=dict)
    failed: dict[str, NodeSet] = field(default_factory=dict)

    def fail(self, nodes: list[str], reason: str) -> None:
        self.failed.setdefault(reason, NodeSet()).update(NodeSet.fromlist(nodes))


def start(spec: LaunchSpec, timeout: float, fanout: int = DEFAULT_FANOUT,
          limit: int = OUTPUT_LIMIT) -> ExecWorker:
    """Run the command on every host, at most ``limit`` bytes read from each; the
    finished worker."""
    template = _check(spec)
    task = task_self()
    task.set_info("fanout", fanout)
    if template is None:
        task.set_info("ssh_options", "-oBatchMode=yes")  # never wait for a password
    base = base_worker_class(task.default("distant_worker"), template is None)
    command = remote_command(spec)
    worker = bounded_worker_class(base, limit)(
        NodeSet.fromlist(list(spec.hosts)), handler=None, timeout=timeout, stderr=True,
        command=f"{template} {command}" if template else command)
    task.schedule(worker)
    task.run()
    return worker


def _exit_reason(worker: ExecWorker, node: str, rc: int) -> str:
    """``exit status RC: last stderr line``, the node's name as %h so that reasons group."""
    last = worker.outputs.last_error_line(node).replace(node, "%h")
    return f"exit status {rc}: {last}" if last else f"exit status {rc}"


def collect(worker: ExecWorker, timeout: float) -> Outcome:
    """Sort every node of a finished worker into an output or a reason."""
    out = Outcome()
    failed = set(worker.outputs.oversized)
    if failed:
        out.fail(sorted(failed), f"output over {worker.outputs.limit:,} bytes")
    done = []
    for rc, keys in worker.iter_retcodes():
        for node in (k for k in keys if k not in failed):
            if rc == 0:
                done.append(node)
            else:
                out.fail([node], _exit_reason(worker, node, rc))
                failed.add(node)
    timed_out = [k for k in worker.iter_keys_timeout() if k not in failed]
    if timed_out:
        out.fail(timed_out, f"timed out after {timeout:g} s")
    for node in done:
        data = bytes(worker.outputs.stdout.get(node, b""))
        out.outputs.setdefault(data, NodeSet()).update(node)
    return out


def run(spec: LaunchSpec, timeout: float = DEFAULT_TIMEOUT_S, fanout: int = DEFAULT_FANOUT,
        limit: int = OUTPUT_LIMIT) -> Outcome:
    """Run ``spec`` on its hosts (at most ``fanout`` at a time, each for at most
    ``timeout`` seconds, at most ``limit`` bytes of output read from each) and sort every
    host into an output or a reason; ValueError for a spec a fan-out cannot honour."""
    worker = start(spec, timeout, fanout, limit)
    out = collect(worker, timeout)
    silent = [n for n in spec.hosts if not any(n in ns for ns in
                                                [*out.outputs.values(), *out.failed.values()])]
    if silent:
        out.fail(silent, "no output")
    return out


def group_reasons(failed: dict[str, NodeSet]) -> dict[str, str]:
    """reason -> folded node set (JSON-ready), the biggest group first."""
    items = sorted(failed.items(), key=lambda kv: (-len(kv[1]), str(kv[1])))
    return {reason: str(ns) for reason, ns in items if len(ns)}
