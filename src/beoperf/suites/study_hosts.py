"""A study's controller side: its hosts, their dead-man agents, and how each host ended.

:class:`HostSet` reaches every host of a study through the remote-host layer
(:mod:`beoperf.launch.remote`: ssh, an ssh-like command or an exec template; the local
host through the exec template ``exec env BEOPERF_STUDY_HOST=%h``, so that every host
takes one code path) and runs ``beoperf study agent ...`` there
(:mod:`beoperf.suites.study_agent`).  It never changes a host itself: it arms an agent
on each (:meth:`HostSet.arm_all`, the plans on standard input), keeps their leases alive
(:class:`Renewer`, a thread renewing every T/3 whatever the measurements do; ClusterShell
runs a task per thread), asks them to set a level or go back to Default, and at the end
(:meth:`HostSet.finish`, from the study's ``finally``) has each restore and exit, then
says how each host ended: restored, kept, restore-failed, restored by its agent after
its lease lapsed, or unreachable with the levels it was last known to carry and the
command that restores it.

:func:`check_slurm` refuses a Slurm node running jobs before anything is armed.

Every answer is per host and data, as :mod:`beoperf.launch.remote` gives it: nothing here
raises for one host.
"""

from __future__ import annotations

import json
import shlex
import shutil
import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from beoperf import errors
from beoperf.factors.agent import MIN_LEASE_S, check_study_id
from beoperf.launch import hosts as hostnames
from beoperf.launch import job, remote
from beoperf.launch.base import LaunchSpec
from beoperf.launch.clush import REMOTE_GRACE_S
from beoperf.launch.remote import HostResult
from beoperf.model.document import JsonObject, JsonValue

LOCAL_TEMPLATE = "exec env BEOPERF_STUDY_HOST=%h"
LEASE_S = 60.0
ARM_TIMEOUT_S = 90.0  # the agent's snapshot and rollback file, on a slow host
SLURM_TIMEOUT_S = 10.0
RESTORED, KEPT, RESTORE_FAILED = "restored", "kept", "restore-failed"
BY_AGENT, UNREACHABLE, NOT_CHANGED = "restored-by-agent", "unreachable", "not-changed"


@dataclass(frozen=True)
class Reply:
    """One host's answer: ``ok`` (the command ran and the agent said ok), ``data`` (the
    JSON it printed, {} when none), ``error`` (one line, '' when ok) and the raw
    :class:`~beoperf.launch.remote.HostResult`."""

    host: str
    ok: bool
    data: JsonObject
    error: str
    result: HostResult


@dataclass(frozen=True)
class Armed:
    """What arming a host gave: ``ok``, and from the agent its ``pid``, study directory
    ``dir``, ``rollback_file``, ``interface``, ``snapshot`` (factor -> saved) and
    ``lease_s``; ``error`` when it failed (the host was not changed)."""

    host: str
    ok: bool
    pid: int | None = None
    dir: str | None = None
    rollback_file: str | None = None
    interface: str | None = None
    snapshot: JsonObject = field(default_factory=dict)
    lease_s: float | None = None
    error: str = ""
    result: HostResult | None = None

    def agent_dict(self) -> JsonObject:
        """The study document's ``agent`` entry of this host."""
        return {"pid": self.pid, "dir": self.dir, "rollback_file": self.rollback_file,
                "lease_s": self.lease_s}


@dataclass
class HostEnd:
    """How a host ended: ``state`` (restored, kept, restore-failed, restored-by-agent,
    unreachable, not-changed), one line of ``detail``, each factor's end (``restored``:
    {factor, status, detail}), the command that restores it when it is left changed, and
    the last command's result."""

    host: str
    state: str
    detail: str
    restored: list[JsonObject] = field(default_factory=list)
    restore_command: str | None = None
    result: HostResult | None = None

    def to_dict(self) -> JsonObject:
        """The study document's ``end`` entry of this host."""
        return {"state": self.state, "detail": self.detail,
                "restored": list[JsonValue](self.restored),
                "restore_command": self.restore_command,
                "result": None if self.result is None else self.result.to_dict()}


def agent_lease_ok(lease_s: float) -> bool:
    """Whether an agent takes this lease (at least MIN_LEASE_S seconds, finite)."""
    return MIN_LEASE_S <= lease_s < float("inf")


class HostSet:
    """The hosts of one study and their agents.

    ``hosts``: the names used to reach them; ``agent``: how (an exec template naming the
    host, an ssh-like command, or None: ClusterShell's ssh); ``local``: hosts reached as
    this one (the exec template ``LOCAL_TEMPLATE``); ``remote_command``: how beoperf is
    started on a host; ``timeout``: of each command; ``lease_s``: the agents' lease T.
    Thread-safe: the :class:`Renewer` runs beside the study's own requests."""

    def __init__(self, study_id: str, hosts: Sequence[str], *, agent: str | None = None,
                 remote_command: str = remote.DEFAULT_BEOPERF, local: Collection[str] = (),
                 fanout: int = remote.DEFAULT_FANOUT, timeout: float = remote.DEFAULT_TIMEOUT_S,
                 lease_s: float = LEASE_S, grace_s: float = REMOTE_GRACE_S) -> None:
        if not hosts or len(set(hosts)) != len(hosts):
            raise errors.BadSpec("a study needs hosts, each named once")
        if not agent_lease_ok(lease_s):
            raise errors.BadSpec(f"--lease {lease_s:g}: give at least {MIN_LEASE_S:g} s")
        check_study_id(study_id)
        self.study_id, self.hosts = study_id, list(hosts)
        self.agent, self.local, self.remote_command = agent, set(local), remote_command
        self.fanout, self.timeout, self.lease_s, self.grace_s = fanout, timeout, lease_s, \
            grace_s
        self.armed: dict[str, Armed] = {}
        self.arm_failed: dict[str, Armed] = {}
        self.levels: dict[str, dict[str, str]] = {h: {} for h in hosts}  # acknowledged
        self.last_ack: dict[str, float] = {}  # monotonic: the last reply of each agent
        # monotonic: when the last renewal (or the arm) each agent acknowledged was sent;
        # its lease runs at least T from then (the agent got it later)
        self.lease_from: dict[str, float] = {}
        self.lost: set[str] = set()  # renewals failed for longer than the lease
        self.finished: set[str] = set()
        self.renewer: Renewer | None = None
        self._mutex = threading.Lock()

    # ---------------------------------------------------------------- running commands

    def reach_of(self, host: str) -> str | None:
        """The remote layer's agent for ``host``."""
        return LOCAL_TEMPLATE if host in self.local else self.agent

    def run(self, args: Sequence[str], hosts: Iterable[str], *, stdin: remote.Stdin = None,
            timeout: float | None = None) -> dict[str, HostResult]:
        """``beoperf ARGS`` on ``hosts`` (each reached its way), one result per host."""
        groups: dict[str | None, list[str]] = {}
        for host in hosts:
            groups.setdefault(self.reach_of(host), []).append(host)
        if not groups:
            return {}
        argv = remote.node_argv(self.remote_command, list(args))
        specs = [LaunchSpec(argv=argv, hosts=tuple(names), agent=reach)
                 for reach, names in groups.items()]
        return remote.run_each(specs, timeout or self.timeout, self.fanout, stdin=stdin)

    def _replies(self, results: Mapping[str, HostResult]) -> dict[str, Reply]:
        return {h: reply_of(r) for h, r in results.items()}

    def ctl(self, request: JsonObject, hosts: Iterable[str] | None = None,
            timeout: float | None = None) -> dict[str, Reply]:
        """One request to the agents of ``hosts`` (default: those armed and not
        finished), all at once: host -> reply."""
        names = self.active() if hosts is None else list(hosts)
        args = ["study", "agent", "ctl", self.study_id, "-"]
        replies = self._replies(self.run(args, names, stdin=json.dumps(request).encode(),
                                         timeout=timeout))
        now = time.monotonic()
        with self._mutex:
            for host, reply in replies.items():
                if reply.ok:
                    self.last_ack[host] = now
        return replies

    def active(self) -> list[str]:
        """Armed hosts not yet finished (lost ones included: they may answer again)."""
        return [h for h in self.hosts if h in self.armed and h not in self.finished]

    # ---------------------------------------------------------------- arming

    def plan_for(self, host: str, plan: JsonObject) -> JsonObject:
        """A host's plan as its agent reads it (study id, host name, lease filled in)."""
        return {"lease_s": self.lease_s, **plan, "study_id": self.study_id, "host": host}

    def arm_all(self, plans: Mapping[str, JsonObject]) -> dict[str, Armed]:
        """Arm every host of ``plans`` at once (each its own plan: ``factors`` [{name,
        levels}], ``data_address`` or ``interface``, ``max_life_s``, ``root``): host ->
        what arming gave.  A host that failed was not changed and never will be."""
        stdin = {h: json.dumps(self.plan_for(h, p)).encode() for h, p in plans.items()}
        sent = time.monotonic()
        results = self.run(["study", "agent", "arm", self.study_id], list(plans), stdin=stdin,
                           timeout=max(self.timeout, ARM_TIMEOUT_S))
        now = time.monotonic()
        out = {h: armed_of(r) for h, r in results.items()}
        with self._mutex:
            for host, armed in out.items():
                if armed.ok:
                    self.armed[host], self.last_ack[host] = armed, now
                    self.lease_from[host] = sent
                else:
                    self.arm_failed[host] = armed
        return out

    def read_values(self, plans: Mapping[str, JsonObject]) -> dict[str, Reply]:
        """Each host's factors as they are now, without arming (a plan without
        ``--apply``): reply data ``{interface, values: {factor: snapshot}}``."""
        stdin = {h: json.dumps(self.plan_for(h, p)).encode() for h, p in plans.items()}
        return self._replies(self.run(["study", "agent", "read"], list(plans), stdin=stdin))

    # ---------------------------------------------------------------- leases

    def renew(self) -> dict[str, Reply]:
        """One renewal of every active host's lease (timeout T/3); hosts not heard from
        for longer than T become lost (their agents restore by themselves)."""
        sent = time.monotonic()
        replies = self.ctl({"op": "renew"}, timeout=self.lease_s / 3)
        now = time.monotonic()
        with self._mutex:
            for host, reply in replies.items():
                if reply.ok:
                    self.lost.discard(host)  # its agent is there after all
                    self.lease_from[host] = max(self.lease_from.get(host, sent), sent)
                elif now - self.last_ack.get(host, now) > self.lease_s:
                    self.lost.add(host)
        return replies

    def lapsed_by(self, when: float) -> list[str]:
        """The armed, unfinished hosts whose agents may have let their lease lapse (and
        restored their snapshot) before ``when`` (monotonic): no renewal they acknowledged
        was sent within the lease before it.  A block measured until ``when`` on such a
        host may have run at Default, whatever its levels were set to."""
        with self._mutex:
            return [h for h in self.active()
                    if when >= self.lease_from.get(h, float("-inf")) + self.lease_s]

    def start_renewer(self) -> Renewer:
        """Start (once) the thread renewing the leases every T/3."""
        if self.renewer is None:
            self.renewer = Renewer(self)
            self.renewer.start()
        return self.renewer

    # ---------------------------------------------------------------- levels

    def set_level(self, factor: str, level: str, hosts: Iterable[str] | None = None,
                  timeout: float | None = None) -> dict[str, Reply]:
        """``factor`` to the plan's level labelled ``level`` on ``hosts`` (default: every
        armed host), all at once so that both ends of a link change together: reply data
        ``{read_back, settled_s, detail}``, or ``ok`` false with the error (the agent
        has then put that factor back)."""
        replies = self.ctl({"op": "set", "factor": factor, "level": level}, hosts, timeout)
        with self._mutex:
            for host, reply in replies.items():
                if reply.ok:
                    self.levels[host][factor] = level
                elif _status_of(reply.data.get("restored")) == RESTORED:
                    self.levels[host].pop(factor, None)
        return replies

    def default(self, factor: str, hosts: Iterable[str] | None = None) -> dict[str, Reply]:
        """``factor`` back to each host's snapshot (Default)."""
        replies = self.ctl({"op": "default", "factor": factor}, hosts)
        with self._mutex:
            for host, reply in replies.items():
                if reply.ok:
                    self.levels[host].pop(factor, None)
        return replies

    def read(self, hosts: Iterable[str] | None = None) -> dict[str, Reply]:
        """The agents' factors as they are now: reply data ``{values: {factor: ...}}``."""
        return self.ctl({"op": "read"}, hosts)

    def status(self, hosts: Iterable[str] | None = None) -> dict[str, Reply]:
        """The agents' state ``{armed: true, pid, lease_left_s, levels ...}``, or, for an
        agent that ended, ``{armed: false, result: its result.json}``."""
        return self.ctl({"op": "status"}, hosts)

    def probe(self, client: str, address: str, port: int,
              interface: str | None = None) -> Reply:
        """The path from ``client`` to ``address`` (its ``beoperf serve`` on ``port``),
        probed with don't-fragment datagrams both ways there: reply data = PathFacts."""
        args = ["study", "agent", "probe", address, "--port", str(port)]
        args += ["--interface", interface] if interface else []
        return reply_of(self.run(args, [client])[client])

    # ---------------------------------------------------------------- the end

    def finish(self, keep: Collection[str] = ()) -> dict[str, HostEnd]:
        """Every host's end: the renewer stopped, each agent asked to restore all but the
        factors ``keep`` and exit; hosts that did not answer are waited for until their
        lease has lapsed and asked what their agent did; those still silent are
        unreachable, named with their last acknowledged levels and a restore command."""
        if self.renewer is not None:
            self.renewer.stop()
        ends = {h: HostEnd(h, NOT_CHANGED, f"not armed: {a.error}", result=a.result)
                for h, a in self.arm_failed.items()}
        pending = [h for h in self.active() if h not in self.lost]
        request: JsonObject = {"op": "finish", "keep": list[JsonValue](sorted(keep))}
        for host, reply in self.ctl(request, pending).items():
            end = self._end_of(host, reply) or self._agent_lost(host, reply)
            if end is not None:
                ends[host] = end
        silent = [h for h in self.active() if h not in ends]
        if silent:
            ends |= self._waited(silent)
        with self._mutex:
            self.finished |= set(ends) & set(self.armed)
        return {h: ends[h] for h in self.hosts if h in ends}

    def _end_of(self, host: str, reply: Reply) -> HostEnd | None:
        """A host's end from a finish or status reply; None when it said nothing yet."""
        data = reply.data
        restored = data.get("restored")
        if reply.ok and isinstance(restored, list):
            return self._ended(host, _objects(restored), None, reply.result)
        result = data.get("result")
        gone = result.get("restored") if isinstance(result, dict) else None
        if isinstance(result, dict) and isinstance(gone, list):
            why = f"{result.get('why', '?')} at {result.get('utc', '?')}"
            finished = result.get("why") == "finish"  # its reply to finish was lost
            return self._ended(host, _objects(gone), None if finished else why, reply.result)
        return None

    def _ended(self, host: str, restored: list[JsonObject], by_agent: str | None,
               result: HostResult) -> HostEnd:
        statuses = {r.get("status") for r in restored}
        left = [f"{r.get('factor')}: {r.get('detail')}" for r in restored
                if r.get("status") in (KEPT, RESTORE_FAILED)]
        command = self.restore_command(host) if left else None
        if RESTORE_FAILED in statuses:
            state, detail = RESTORE_FAILED, "; ".join(left)
        elif by_agent is not None:
            state, detail = BY_AGENT, f"restored by its agent ({by_agent})"
        elif KEPT in statuses:
            state, detail = KEPT, "; ".join(left)
        elif statuses <= {"not-changed"}:
            state, detail = NOT_CHANGED, "nothing was changed"
        else:
            state, detail = RESTORED, "back to its snapshot"
        return HostEnd(host, state, detail, restored, command, result)

    def _waited(self, hosts: list[str]) -> dict[str, HostEnd]:
        """The hosts whose renewals failed (or that did not answer the finish): asked at
        once (within T/3: a host whose agent has already restored it after a level cut it
        off answers as soon as the link is back), then, those still silent, again once
        their leases have surely lapsed, and until one more grace has passed (a host
        whose agent has just restored the link may take a moment to answer)."""
        ends: dict[str, HostEnd] = {}
        replies: dict[str, Reply] = {}
        self._ask(hosts, ends, replies, self.lease_s / 3)
        if len(ends) == len(hosts):
            return ends
        with self._mutex:
            last = max(self.last_ack.get(h, 0.0) for h in hosts)
        lapsed = last + self.lease_s + self.grace_s
        time.sleep(max(0.0, lapsed - time.monotonic()))
        while True:
            self._ask(hosts, ends, replies)
            if len(ends) == len(hosts) or time.monotonic() >= lapsed + self.grace_s:
                break
            time.sleep(min(1.0, self.grace_s / 2))
        return ends | {h: self._unreachable(h, replies[h]) for h in hosts if h not in ends}

    def _ask(self, hosts: list[str], ends: dict[str, HostEnd], replies: dict[str, Reply],
             timeout: float | None = None) -> None:
        """One status round of the ``hosts`` not in ``ends``: the ends it tells (an agent
        still armed is finished now) into ``ends``, every reply into ``replies``."""
        request: JsonObject = {"op": "status"}
        for host, reply in self.ctl(request, [h for h in hosts if h not in ends],
                                    timeout).items():
            replies[host] = reply
            end = self._end_of(host, reply)
            if end is None and reply.data.get("armed") is True:  # alive: finish it
                finished = self.ctl({"op": "finish", "keep": []}, [host])[host]
                end = self._end_of(host, finished)
            end = end or self._agent_lost(host, reply)
            if end is not None:
                ends[host] = end

    def _agent_lost(self, host: str, reply: Reply) -> HostEnd | None:
        """A host that answers but whose agent ended without a result (killed with
        SIGKILL): left as it was, with the command that restores it."""
        data = reply.data
        gone = data.get("gone") is True or data.get("armed") is False
        if not (reply.result.ok and gone and data.get("result") is None):
            return None
        levels = ", ".join(f"{f}={v}" for f, v in sorted(self.levels[host].items()))
        return HostEnd(host, RESTORE_FAILED, "its agent ended without restoring (killed?); "
                       f"last acknowledged: {levels or 'its snapshot'}", [],
                       self.restore_command(host), reply.result)

    def _unreachable(self, host: str, reply: Reply) -> HostEnd:
        levels = ", ".join(f"{f}={v}" for f, v in sorted(self.levels[host].items()))
        detail = (f"{reply.error or 'no answer'}; last acknowledged: "
                  f"{levels or 'its snapshot'}")
        return HostEnd(host, UNREACHABLE, detail, [], self.restore_command(host),
                       reply.result)

    def restore_command(self, host: str) -> str:
        """The command an admin runs here to restore ``host`` from its rollback file."""
        armed = self.armed.get(host)
        path = armed.rollback_file if armed and armed.rollback_file else "ROLLBACK_FILE"
        words = list(remote.node_argv(self.remote_command, ["study", "restore", path]))
        reach = self.reach_of(host)
        if reach == LOCAL_TEMPLATE:
            return shlex.join(words)
        if reach is None:
            return shlex.join(["ssh", host, *words])
        if "%" in reach:
            return reach.replace("%host", host).replace("%h", host) + " " + shlex.join(words)
        return f"{reach} {shlex.quote(host)} {shlex.quote(shlex.join(words))}"


def _status_of(entry: JsonValue) -> JsonValue:
    return entry.get("status") if isinstance(entry, dict) else None


def _objects(items: list[JsonValue]) -> list[JsonObject]:
    return [i for i in items if isinstance(i, dict)]


class Renewer(threading.Thread):
    """Renews a HostSet's leases every T/3 until stopped (a daemon thread: it never
    keeps beoperf alive; should beoperf die, the leases lapse and the hosts restore)."""

    def __init__(self, hosts: HostSet) -> None:
        super().__init__(name=f"renewer-{hosts.study_id}", daemon=True)
        self.hosts = hosts
        self.period = hosts.lease_s / 3
        self.rounds = self.failures = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.period):
            replies = self.hosts.renew()
            self.rounds += 1
            self.failures += sum(not r.ok for r in replies.values())

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()


# --------------------------------------------------------------------------- replies


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def reply_of(result: HostResult) -> Reply:
    """A host's JSON answer (its last line of output), ok when it says so."""
    lines = result.stdout.decode(errors="replace").strip().splitlines()
    data: JsonObject = {}
    if lines:
        try:
            parsed = json.loads(lines[-1])
            data = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            data = {}
    ok = result.ok and data.get("ok") is True
    error = "" if ok else _one_line(str(data.get("error") or result.error or
                                        "no answer from the agent"))
    return Reply(result.host, ok, data, error, result)


def armed_of(result: HostResult) -> Armed:
    """What ``study agent arm`` printed: ``armed {...}`` or ``failed <why>``."""
    line = result.stdout.decode(errors="replace").strip().splitlines()
    last = line[-1] if line else ""
    if result.ok and last.startswith("armed "):
        try:
            facts = json.loads(last[len("armed "):])
        except ValueError:
            facts = None
        if isinstance(facts, dict):
            return Armed(result.host, True, facts.get("pid"), facts.get("dir"),
                         facts.get("rollback_file"), facts.get("interface"),
                         facts.get("snapshot") or {}, facts.get("lease_s"), "", result)
    why = last[len("failed "):] if last.startswith("failed ") else result.error or last
    return Armed(result.host, False, error=_one_line(why or "no answer"), result=result)


# --------------------------------------------------------------------------- Slurm


@dataclass
class SlurmState:
    """The Slurm check: whether it ran (``note`` says why not), and per host whether it
    is a Slurm node and the jobs running there ("JOBID user")."""

    checked: bool
    note: str = ""
    nodes: dict[str, bool] = field(default_factory=dict)
    jobs: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        """As the study document's hosts' ``slurm`` entries: host -> {node, jobs}."""
        return {"checked": self.checked, "note": self.note,
                "nodes": {h: {"node": n, "jobs": list[JsonValue](self.jobs.get(h, []))}
                          for h, n in self.nodes.items()}}


def check_slurm(hosts: Sequence[str], force: bool = False,
                timeout: float = SLURM_TIMEOUT_S) -> SlurmState:
    """Which hosts are Slurm nodes and what runs there; errors.Busy naming the first node
    running a job (its id and user), unless ``force``.  Without ``squeue`` here: not
    checked, and the state says so."""
    if shutil.which("squeue") is None or shutil.which("scontrol") is None:
        return SlurmState(False, "not checked (squeue not found)")
    state = SlurmState(True)
    for host in hosts:
        known = job.run(["scontrol", "-o", "show", "node", host], timeout)
        state.nodes[host], state.jobs[host] = known.returncode == 0, []
    nodes = [h for h in hosts if state.nodes[h]]
    if nodes:
        _running_jobs(state, nodes, timeout)
    busy = [(h, j) for h in nodes for j in state.jobs[h]]
    if busy:
        state.note = "; ".join(f"{h}: job {j}" for h, j in busy)
        if not force:
            host, what = busy[0]
            raise errors.Busy(f"Slurm node {host} is running job {what}: a study would "
                              "change it under the job", "wait for it, or give --force")
    return state


def _running_jobs(state: SlurmState, nodes: list[str], timeout: float) -> None:
    out = job.probe(["squeue", "-h", "-w", ",".join(nodes), "-t", "R", "-o", "%N %i %u"],
                    timeout)
    if out is None:
        raise errors.Failed("squeue did not answer: cannot tell whether the nodes run jobs")
    for line in out[0].splitlines():
        words = line.split()
        if len(words) != 3:
            continue
        for node in _expand(words[0]):
            if node in state.jobs:
                state.jobs[node].append(f"{words[1]} (user {words[2]})")


def _expand(nodeset: str) -> list[str]:
    try:
        return hostnames.expand(nodeset, "squeue's node list")
    except errors.BeoperfError:
        return [nodeset]
