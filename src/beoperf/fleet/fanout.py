"""Run `beoperf audit --json` on many nodes at once with ClusterShell, collect the answers.

The fan-out itself is ClusterShell's: one worker over the node set, ssh by default
(``task.shell(cmd, nodes=...)``), or ClusterShell's ExecWorker when an exec template is
given (``task.shell(cmd, nodes=..., remote=False)``: a local command per node, ``%h`` is
the node name, e.g. ``ip netns exec %h``).  Identical outputs are grouped by ClusterShell
(``worker.iter_buffers()``, as ``clubak -b`` does), so each distinct answer is parsed once.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from ClusterShell.NodeSet import NodeSet
from ClusterShell.Task import task_self
from ClusterShell.Worker.Worker import Worker

DEFAULT_FANOUT = 64
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_REMOTE = "python3 -m beoperf"
AUDIT_FORMAT = "beoperf.audit"


@dataclass
class Collected:
    """What came back: node -> audit document, and reason -> nodes that did not answer."""

    answers: dict[str, dict] = field(default_factory=dict)
    no_answer: dict[str, NodeSet] = field(default_factory=dict)

    def fail(self, nodes: Iterable[str], reason: str) -> None:
        self.no_answer.setdefault(reason, NodeSet()).update(NodeSet.fromlist(list(nodes)))


def audit_command(remote: str, profile: str, interface: str | None = None,
                  peer: str | None = None) -> str:
    """The per-node command line: ``REMOTE audit --json --profile P [--interface IF]``."""
    argv = ["audit", "--json", "--profile", profile]
    argv += ["--interface", interface] if interface else []
    argv += ["--peer", peer] if peer else []
    # ClusterShell substitutes %h / %n in commands: a literal % must be doubled.
    return f"{remote} {shlex.join(argv)}".replace("%", "%%")


def launch_command(command: str, exec_template: str | None) -> str:
    """The command given to ClusterShell: the audit command, behind the template if any."""
    return f"{exec_template} {command}" if exec_template else command


def start(nodes: NodeSet, command: str, exec_template: str | None, fanout: int,
          timeout: float) -> Worker:
    """Schedule the command on every node (ssh, or ExecWorker with a template); run it."""
    task = task_self()
    task.set_info("fanout", fanout)
    if not exec_template:
        task.set_info("ssh_options", "-oBatchMode=yes")  # never wait for a password
    worker = task.shell(launch_command(command, exec_template), nodes=str(nodes),
                        remote=not exec_template, stderr=True, timeout=timeout)
    task.run()
    return worker


def parse_answer(text: str) -> dict:
    """One node's audit document; ValueError if it is not one."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"unparsable output ({exc.msg})") from None
    if not isinstance(doc, dict) or doc.get("format") != AUDIT_FORMAT:
        raise ValueError(f"output is not a {AUDIT_FORMAT} document")
    if not isinstance(doc.get("findings"), list):
        raise ValueError("output has no findings list")
    return doc


def _last_line(worker: Worker, node: str) -> str:
    err = worker.node_error(node)
    lines = err.decode(errors="replace").strip().splitlines() if err else []
    return lines[-1].strip() if lines else ""


def _exit_reason(worker: Worker, node: str, rc: int) -> str:
    """``exit status RC: last stderr line``, the node's name as %h so that reasons group."""
    last = _last_line(worker, node).replace(node, "%h")
    return f"exit status {rc}: {last}" if last else f"exit status {rc}"


def collect(worker: Worker, nodes: NodeSet, timeout: float) -> Collected:
    """Sort every node into an answer or a reason for not answering."""
    out = Collected()
    failed: set[str] = set()
    for rc, keys in worker.iter_retcodes():
        if rc != 0:
            for node in keys:
                out.fail([node], _exit_reason(worker, node, rc))
            failed.update(keys)
    timed_out = list(worker.iter_keys_timeout())
    out.fail(timed_out, f"timed out after {timeout:g} s")
    failed.update(timed_out)
    for buf, keys in worker.iter_buffers():
        good = [k for k in keys if k not in failed]
        try:
            doc = parse_answer(buf.message().decode(errors="replace"))
        except ValueError as exc:
            out.fail(good, str(exc))
            failed.update(good)
            continue
        out.answers.update(dict.fromkeys(good, doc))
    silent = [n for n in nodes if n not in out.answers and n not in failed]
    out.fail(silent, "no output")
    return out


def fan_out(nodes: NodeSet, command: str, *, exec_template: str | None = None,
            fanout: int = DEFAULT_FANOUT, timeout: float = DEFAULT_TIMEOUT_S) -> Collected:
    """Run ``command`` on ``nodes`` and collect each node's audit document."""
    worker = start(nodes, command, exec_template, fanout, timeout)
    return collect(worker, nodes, timeout)


def group_reasons(no_answer: dict[str, NodeSet]) -> dict[str, str]:
    """reason -> folded node set (JSON-ready), the biggest group first."""
    items = sorted(no_answer.items(), key=lambda kv: (-len(kv[1]), str(kv[1])))
    return {reason: str(ns) for reason, ns in items if len(ns)}

