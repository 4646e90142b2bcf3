"""A study's dead-man agent: the one process allowed to outlive beoperf, ending with a restore.

``beoperf study agent arm`` starts it on a host, detached
(:func:`beoperf.launch.detach.detach`), with the host's plan on its data pipe: the study,
the host factors and their levels (parsed and checked before anything is touched), the
data address whose route names the interface, the lease T and a lifetime.  The agent then

1. takes the host's :class:`~beoperf.audit.lock.TuneLock` and holds it until it exits (a
   ``tune`` or a second study is refused meanwhile);
2. takes every factor's snapshot and writes ``rollback.json`` (new, 0600, atomic, never
   through a link) in ``/run/beoperf/study/<id>.net<netns inode>/`` (0700, root's);
3. only then opens its control socket ``ctl`` there (AF_UNIX, SOCK_SEQPACKET, 0600,
   root's callers only) and reports ``armed {...}`` on its ready pipe.

So the rollback file exists before any change can be asked for; and the controller never
changes a host itself: every change goes through the agent holding the lock.  One JSON
request per connection, one JSON reply: ``renew``, ``set {factor, level}`` (a level label
of the plan: nothing else can be applied), ``default {factor}``, ``read``, ``status``,
``finish {keep}``.

The lease: every ``renew`` moves the deadline to now + T (CLOCK_MONOTONIC); the lifetime
bounds the agent even while renewals go on (a controller hung with its renewer alive).
When the lease lapses, the lifetime ends, SIGTERM/SIGINT/SIGHUP arrives or ``finish``
asks, the agent restores every factor it changed from its in-memory snapshot, in reverse
order (a ``finish`` keeps those it is told to keep), writes ``result.json`` (why, and
each factor's end), releases the lock, removes ``ctl`` and exits.  Restoring needs neither
the controller nor the network: the snapshot is in memory, and restores are local
commands and /proc, /sys writes.  Killed with SIGKILL, it leaves ``rollback.json`` for
``beoperf study restore``.

It imports nothing heavy (no numpy, no scipy): a control request costs one short Python
start on the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from beoperf import errors, factors, safeio, sysinfo
from beoperf.audit import lock
from beoperf.factors.base import Context, Factor, Level
from beoperf.model.document import JsonObject, JsonValue, utc_now
from beoperf.model.study_rollback import SavedFactor, SavedFile, StudyRollback

LEASE_S = 60.0
MIN_LEASE_S = 3.0
MAX_LIFE_S = 7 * 86400.0
DEFAULT_LIFE_S = 4 * 3600.0
MAX_SETTLE_S = 60.0
MESSAGE_LIMIT = 256 * 1024  # bytes of one request or reply
PLAN_LIMIT = 1024 * 1024
ACCEPT_TIMEOUT_S = 5.0  # a caller that connects and says nothing
ACCEPT_BACKOFF_S = 0.05  # after a failed accept (out of descriptors): no busy loop
ROLLBACK, RESULT, CTL = "rollback.json", "result.json", "ctl"
STUDY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # within the rollback schema's
LAPSED, LIFETIME, SIGNAL, FINISH = "lease lapsed", "lifetime", "signal", "finish"
RESTORED, KEPT, NOT_CHANGED, RESTORE_FAILED = "restored", "kept", "not-changed", \
    "restore-failed"


class AgentError(errors.Failed):
    category = "study agent"


# --------------------------------------------------------------------------- the plan


@dataclass
class HostFactor:
    """One factor of the plan: the factor, its levels (label -> level) and apply order."""

    factor: Factor
    levels: dict[str, Level]

    def find(self, named: object) -> Level | None:
        """The plan's level with this label (or, failing that, this value)."""
        if not isinstance(named, str):
            return None
        return self.levels.get(named) or next(
            (lv for lv in self.levels.values() if lv.value == named), None)


@dataclass
class Plan:
    """What the controller asks of this host (checked before anything is touched)."""

    study_id: str
    host: str
    data_address: str | None
    interface: str | None
    lease_s: float
    max_life_s: float
    root: str
    settle_s: float = 1.0
    factors: list[HostFactor] = field(default_factory=list)


def check_study_id(text: object) -> str:
    """A study id fit for a directory name; BadSpec otherwise."""
    if not isinstance(text, str) or not STUDY_ID.fullmatch(text):
        raise errors.BadSpec(f"study id {text!r}: letters, digits, '_', '.', '-' (at most "
                             "64, the first a letter or digit)")
    return text


def _number(raw: JsonObject, key: str, default: float, low: float, high: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not low <= value <= high:
        raise errors.BadSpec(f"plan: {key} {value!r}: give seconds from {low:g} to {high:g}")
    return float(value)


def _text(raw: JsonObject, key: str) -> str | None:
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value or len(value) > 255
                              or not value.isprintable()):
        raise errors.BadSpec(f"plan: {key} {value!r} is not a short printable text")
    return value


def parse_plan(raw: object) -> Plan:
    """The plan from its JSON form; BadSpec naming the first thing wrong (an unknown
    factor, a level the factor refuses, a lease under 3 s ...)."""
    if not isinstance(raw, dict):
        raise errors.BadSpec("plan: not a JSON object")
    root = _text(raw, "root") or "/"
    if not os.path.isabs(root):
        raise errors.BadSpec(f"plan: root {root!r} is not an absolute path")
    plan = Plan(check_study_id(raw.get("study_id")), _text(raw, "host") or "",
                _text(raw, "data_address"), _text(raw, "interface"),
                _number(raw, "lease_s", LEASE_S, MIN_LEASE_S, MAX_LIFE_S),
                _number(raw, "max_life_s", DEFAULT_LIFE_S, MIN_LEASE_S, MAX_LIFE_S), root,
                _number(raw, "settle_s", 1.0, 0.0, MAX_SETTLE_S))
    entries = raw.get("factors")
    if not isinstance(entries, list):
        raise errors.BadSpec("plan: factors is not a list")
    for entry in entries:
        plan.factors.append(_plan_factor(entry, {f.factor.name for f in plan.factors}))
    plan.factors.sort(key=lambda f: f.factor.order)
    return plan


def _plan_factor(entry: object, seen: set[str]) -> HostFactor:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or \
            not isinstance(entry.get("levels"), list) or \
            not all(isinstance(t, str) for t in entry["levels"]):
        raise errors.BadSpec("plan: each factor is {\"name\": str, \"levels\": [str]}")
    factor = factors.get(entry["name"])
    if factor.scope != "host":
        raise errors.BadSpec(f"plan: factor {factor.name} is not a host factor")
    if factor.name in seen:
        raise errors.BadSpec(f"plan: factor {factor.name} named twice")
    return HostFactor(factor, {lv.label: lv for lv in factor.parse(entry["levels"])})


# --------------------------------------------------------------------------- the directory


def study_dir(study_id: str, base: str = lock.LOCK_DIR) -> str:
    """This host's directory of ``study_id`` (its network namespace's inode in the name:
    namespace hosts share /run)."""
    return os.path.join(base, "study", f"{check_study_id(study_id)}.net{lock.netns_id() or 0}")


def make_study_dir(study_id: str, base: str = lock.LOCK_DIR) -> str:
    """The study's directory, created private (0700, ours, writable by no one else) along
    with its parents under ``base``; AgentError when one is not."""
    where = study_dir(study_id, base)
    for path in (base, os.path.join(base, "study"), where):
        os.close(lock.private_run_dir(path, "the study directory", AgentError))
    return where


# --------------------------------------------------------------------------- rollback file


def forget_namespaces(inodes: Collection[int], base: str = lock.LOCK_DIR) -> list[str]:
    """Remove the study directories of network namespaces that are gone (``inodes``: a
    lab's, as `lab down` deletes them; their agents ended first): a namespace made later
    may get the same inode, and must not find an old study's rollback file as its own.
    The names removed."""
    where = os.path.join(base, "study")
    try:
        if not stat.S_ISDIR(os.lstat(where).st_mode):
            return []
        os.close(lock.private_run_dir(where, "the study directory", AgentError))
        names = os.listdir(where)
    except (OSError, AgentError):
        return []
    removed = []
    for name in names:
        found = re.fullmatch(r"[^/]+\.net(\d+)", name)
        if found and int(found.group(1)) in inodes:
            shutil.rmtree(os.path.join(where, name), ignore_errors=True)  # no link followed
            removed.append(name)
    return removed


def rollback_document(plan: Plan, interface: str | None,
                      saved: Sequence[tuple[Factor, JsonObject]]) -> JsonObject:
    """One host's snapshot as a ``study-rollback`` document (its JSON form)."""
    body = StudyRollback(plan.study_id, os.uname().nodename, lock.netns_id(), interface,
                         plan.lease_s, [SavedFactor(f.name, f.order, s) for f, s in saved],
                         [SavedFile(str(file["name"]), str(file["sha256"]))
                          for f, s in saved for file in f.files(s)])
    return body.to_document({"utc_start": utc_now(), "pid": os.getpid()}).to_json()


def write_rollback(where: str, doc: JsonObject, *, new: bool) -> str:
    """``doc`` written as ``where/rollback.json``: 0600, atomic, never through a link, and
    (``new``) never over a file already there."""
    path = os.path.join(where, ROLLBACK)
    try:
        safeio.write_atomic(path, safeio.dump_json(doc, indent=1), overwrite=not new,
                            mode=0o600)
    except FileExistsError:
        raise AgentError(f"{path} is there already: an earlier agent of this study did not "
                         f"restore; run 'beoperf study restore {path}'") from None
    return path


# --------------------------------------------------------------------------- the agent


@dataclass
class Agent:
    """An armed agent: its plan, snapshot, lock and control socket."""

    plan: Plan
    ctx: Context
    saved: dict[str, JsonObject]
    where: str
    held: lock.TuneLock
    sock: socket.socket
    wake: int
    touched: list[str] = field(default_factory=list)  # in the order first changed
    current: dict[str, str] = field(default_factory=dict)  # factor -> level label
    lease_end: float = 0.0
    life_end: float = 0.0
    stop: str | None = None
    signals: list[int] = field(default_factory=list)  # noted by the handlers

    def by_name(self, name: object) -> HostFactor:
        for hf in self.plan.factors:
            if hf.factor.name == name:
                return hf
        raise AgentError(f"factor {name!r} is not in this host's plan")

    # ---- the loop

    def serve(self) -> str:
        """Answer requests until the lease lapses, the lifetime ends, a signal comes or
        ``finish`` is asked: why it stopped."""
        while self.stop is None:
            if self.signals:
                return SIGNAL
            now = time.monotonic()
            left = min(self.lease_end, self.life_end) - now
            if left <= 0:
                if self.life_end <= now:
                    return LIFETIME
                # a request that waited while a long one ran (a renewal?) is answered;
                # none, or one that cannot be accepted (out of descriptors), is a lapse
                if not (select.select([self.sock.fileno()], [], [], 0)[0]
                        and self._answer_one()):
                    return LAPSED
                continue
            ready = select.select([self.sock.fileno(), self.wake], [], [], left)[0]
            if self.wake in ready:
                _drain(self.wake)
            if self.sock.fileno() in ready and self.stop is None and not self._answer_one():
                time.sleep(ACCEPT_BACKOFF_S)  # accept failed: not a busy loop until the lapse
        return self.stop

    def _answer_one(self) -> bool:
        """One request answered (False: accept failed, e.g. out of descriptors)."""
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return False
        with conn:
            conn.settimeout(ACCEPT_TIMEOUT_S)
            try:
                if _peer_uid(conn) != os.geteuid():
                    raise AgentError("only root talks to a study agent")
                request = json.loads(conn.recv(MESSAGE_LIMIT) or b"null")
                reply = self.handle(request)
            except (OSError, ValueError) as exc:
                reply = {"ok": False, "error": f"bad request: {exc}"}
            except errors.BeoperfError as exc:
                reply = {"ok": False, "error": str(exc)}
            except Exception as exc:  # the agent is the way back: it never dies of one request
                reply = {"ok": False, "error": f"the agent failed: {type(exc).__name__}: {exc}"}
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(reply).encode()[:MESSAGE_LIMIT])
        return True

    def handle(self, request: object) -> JsonObject:
        """One request's reply."""
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            raise AgentError("a request is {\"op\": ...}")
        op = request["op"]
        if op == "renew":
            now = time.monotonic()
            left, self.lease_end = self.lease_end - now, now + self.plan.lease_s
            return {"ok": True, "lease_s": self.plan.lease_s, "left_s": round(left, 3),
                    "life_left_s": round(self.life_end - now, 3)}
        if op == "set":
            return self.set_level(self.by_name(request.get("factor")), request.get("level"))
        if op == "default":
            return self.to_default(self.by_name(request.get("factor")))
        if op == "read":
            return {"ok": True, "values": self.read()}
        if op == "status":
            return self.status()
        if op == "finish":
            keep = request.get("keep") or []
            return self.finish([str(k) for k in keep] if isinstance(keep, list) else [])
        raise AgentError(f"unknown request {op!r}")

    # ---- the requests

    def set_level(self, hf: HostFactor, label: object) -> JsonObject:
        """Apply a level of the plan (named by its label), then let it settle; restored at
        once if it fails."""
        level = hf.find(label)
        if level is None:
            raise AgentError(f"{hf.factor.name}: level {label!r} is not in this host's plan")
        name = hf.factor.name
        if level.value is None:  # the level "default": the snapshot put back
            back = self.to_default(hf)
            return {**back, "read_back": self.read().get(name)} if back["ok"] else back
        if self.current.get(name, level.label) != level.label:
            # at another level: back to the snapshot first, so that the host carries this
            # level alone (sysctl A=0 then B=1 must not leave A changed under B's blocks)
            back = self._restore_one(hf, self._level_now(hf))
            if back["status"] != RESTORED:
                return {"ok": False, "error": back["detail"], "restored": back}
        if name not in self.touched:
            self.touched.append(name)  # before: a failed apply may have changed something
        try:
            got = hf.factor.set_level(self.ctx, level, self.saved[name])
            settled = hf.factor.settle(self.ctx)
        except Exception as exc:  # whatever failed, the factor goes back
            back = self._restore_one(hf, level)
            return {"ok": False, "error": _why(exc), "restored": back}
        self.current[name] = level.label
        return {"ok": True, "read_back": got.get("read_back"), "detail": got,
                "settled_s": settled}

    def to_default(self, hf: HostFactor) -> JsonObject:
        """Back to the snapshot (a no-op for a factor not changed)."""
        if hf.factor.name not in self.touched:
            return {"ok": True, "settled_s": 0.0, "changed": False}
        back = self._restore_one(hf, self._level_now(hf))
        if back["status"] != RESTORED:
            return {"ok": False, "error": back["detail"]}
        return {"ok": True, "settled_s": back.get("settled_s", 0.0), "changed": True}

    def read(self) -> JsonObject:
        return read_all(self.plan, self.ctx)

    def status(self) -> JsonObject:
        now = time.monotonic()
        return {"ok": True, "armed": True, "pid": os.getpid(), "study_id": self.plan.study_id,
                "lease_left_s": round(self.lease_end - now, 3),
                "life_left_s": round(self.life_end - now, 3), "touched": list(self.touched),
                "levels": dict(self.current)}

    def finish(self, keep: Sequence[str]) -> JsonObject:
        """Restore all but ``keep``; the agent stops after this reply."""
        restored = self.restore_all(keep)
        self.stop = FINISH
        kept: list[JsonValue] = [r["factor"] for r in restored if r["status"] == KEPT]
        self.end(FINISH, restored)
        return {"ok": all(r["status"] != RESTORE_FAILED for r in restored),
                "restored": list[JsonValue](restored), "kept": kept}

    # ---- restoring

    def _level_now(self, hf: HostFactor) -> Level | None:
        """The plan's level the factor was last set to (None: not known)."""
        return hf.levels.get(self.current.get(hf.factor.name, ""))

    def _restore_one(self, hf: HostFactor, level: Level | None) -> JsonObject:
        """The factor back to its snapshot: what ``level`` changed (None: all of it, as
        after a failure whose level is not known)."""
        name = hf.factor.name
        try:
            if level is None:
                hf.factor.restore(self.ctx, self.saved[name])
            else:
                hf.factor.restore_level(self.ctx, self.saved[name], level)
            settled = hf.factor.settle(self.ctx)
        except Exception as exc:  # one factor's failure never stops the others'
            return {"factor": name, "status": RESTORE_FAILED, "detail": _why(exc)}
        if name in self.touched:
            self.touched.remove(name)
        self.current.pop(name, None)
        return {"factor": name, "status": RESTORED, "detail": "back to the snapshot",
                "settled_s": settled}

    def restore_all(self, keep: Sequence[str] = ()) -> list[JsonObject]:
        """Every factor's end, restoring the changed ones in reverse apply order."""
        out: list[JsonObject] = []
        for hf in reversed(self.plan.factors):
            name = hf.factor.name
            if name not in self.touched:
                out.append({"factor": name, "status": NOT_CHANGED, "detail": "not changed"})
            elif name in keep:
                out.append({"factor": name, "status": KEPT,
                            "detail": f"left at {self.current.get(name, '?')}"})
            else:
                out.append(self._restore_one(hf, self._level_now(hf)))
        return out

    def end(self, why: str, restored: list[JsonObject]) -> None:
        """result.json; the rollback file reduced to what is left changed (removed when
        nothing is); ctl removed; the lock released."""
        left = {str(r["factor"]) for r in restored if r["status"] in (KEPT, RESTORE_FAILED)}
        result: JsonObject = {"study_id": self.plan.study_id, "pid": os.getpid(), "why": why,
                  "utc": utc_now(), "restored": list[JsonValue](restored)}
        with contextlib.suppress(OSError):
            safeio.write_atomic(os.path.join(self.where, RESULT),
                                safeio.dump_json(result, indent=1), mode=0o600)
        with contextlib.suppress(OSError):
            self._reduce_rollback(left)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.where, CTL))
        self.sock.close()
        self.held.__exit__(None, None, None)

    def _reduce_rollback(self, left: set[str]) -> None:
        path = os.path.join(self.where, ROLLBACK)
        if not left:
            os.unlink(path)
            return
        saved = [(hf.factor, self.saved[hf.factor.name]) for hf in self.plan.factors
                 if hf.factor.name in left]
        write_rollback(self.where, rollback_document(self.plan, self.ctx.interface, saved),
                       new=False)


def read_all(plan: Plan, ctx: Context) -> JsonObject:
    """Each factor of the plan as it is now (``{"error": ...}`` for one that cannot say)."""
    out: JsonObject = {}
    for hf in plan.factors:
        try:
            out[hf.factor.name] = hf.factor.read(ctx)
        except errors.BeoperfError as exc:
            out[hf.factor.name] = {"error": str(exc)}
    return out


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _why(exc: Exception) -> str:
    """One line: a beoperf error's message, anything else with its class (a bug)."""
    if isinstance(exc, errors.BeoperfError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _drain(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.read(fd, 4096)


# --------------------------------------------------------------------------- arming


def interface_of(plan: Plan) -> str | None:
    """The plan's interface, or the one the route to its data address leaves by."""
    if plan.interface or not plan.data_address:
        return plan.interface
    route = sysinfo.route_interface(plan.data_address)
    if route is None:
        raise AgentError(f"no route to {plan.data_address}: cannot tell the interface")
    return str(route["dev"])


def arm(plan: Plan, wake: int, base: str = lock.LOCK_DIR) -> Agent:
    """Lock, snapshot, rollback file, then the control socket (in that order: nothing
    can be changed before the way back is on disk)."""
    held = lock.TuneLock(base)
    try:
        held.__enter__()
    except lock.LockBusy as exc:
        raise errors.Busy(f"busy: {exc}") from None
    try:
        return _armed(plan, wake, held, base)
    except BaseException:
        held.__exit__(None, None, None)
        raise


def _armed(plan: Plan, wake: int, held: lock.TuneLock, base: str) -> Agent:
    where = make_study_dir(plan.study_id, base)
    ctx = Context(interface_of(plan), plan.root, where, plan.settle_s)
    saved = {hf.factor.name: hf.factor.snapshot(ctx) for hf in plan.factors}
    doc = rollback_document(plan, ctx.interface,
                            [(hf.factor, saved[hf.factor.name]) for hf in plan.factors])
    path = write_rollback(where, doc, new=True)
    try:
        sock = _listen(os.path.join(where, CTL))
    except BaseException:  # nothing was changed: no rollback file to send an admin to
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    now = time.monotonic()
    return Agent(plan, ctx, saved, where, held, sock, wake, lease_end=now + plan.lease_s,
                 life_end=now + plan.max_life_s)


def _listen(path: str) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)  # a killed agent's (we hold the lock: no agent listens)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(8)
    sock.setblocking(False)
    return sock


def armed_line(agent: Agent) -> str:
    facts = {"pid": os.getpid(), "dir": agent.where,
             "rollback_file": os.path.join(agent.where, ROLLBACK),
             "interface": agent.ctx.interface, "lease_s": agent.plan.lease_s,
             "max_life_s": agent.plan.max_life_s, "snapshot": agent.saved}
    return "armed " + json.dumps(facts)


# --------------------------------------------------------------------------- the client


def request(study_id: str, message: JsonObject, timeout: float,
            base: str = lock.LOCK_DIR) -> JsonObject:
    """One request to this host's agent of ``study_id``, its reply; AgentError when no
    agent answers (FileNotFoundError-like cases say the agent is gone)."""
    path = os.path.join(study_dir(study_id, base), CTL)
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
            sock.sendall(json.dumps(message).encode())
            raw = sock.recv(MESSAGE_LIMIT)
        except (FileNotFoundError, ConnectionRefusedError):
            raise AgentGone(f"no agent of study {study_id} here") from None
        except OSError as exc:
            raise AgentError(f"the agent of study {study_id}: {exc}") from None
    reply = safeio.parse_json(raw or b"null", "the agent's reply")
    if not isinstance(reply, dict):
        raise AgentError("the agent's reply is not a JSON object")
    return reply


class AgentGone(AgentError):
    """No agent of that study listens on this host (it ended, or never armed)."""


def result_of(study_id: str, base: str = lock.LOCK_DIR) -> JsonObject | None:
    """The agent's result.json (what it restored, and why), None if it has none."""
    path = os.path.join(study_dir(study_id, base), RESULT)
    try:
        doc = safeio.load_json(path, MESSAGE_LIMIT, "an agent's result", private=True)
    except safeio.FileInputError:
        return None
    return doc if isinstance(doc, dict) else None


# --------------------------------------------------------------------------- entry


def _fd(name: str) -> int:
    try:
        return int(os.environ.pop(name))
    except (KeyError, ValueError):
        raise SystemExit(f"{name} is not set: this is started by 'beoperf study agent arm'") \
            from None


def _read_plan(fd: int) -> Plan:
    data = b""
    with os.fdopen(fd, "rb") as f:
        data = f.read(PLAN_LIMIT + 1)
    if len(data) > PLAN_LIMIT:
        raise errors.BadSpec(f"plan over {PLAN_LIMIT} bytes")
    return parse_plan(safeio.parse_json(data, "the plan"))


def _signals() -> tuple[int, list[int]]:
    """SIGTERM, SIGINT, SIGHUP noted (and the loop woken), never a Python exception."""
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    got: list[int] = []

    def note(signum: int, _frame: Any) -> None:
        got.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, note)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    return r, got


def main() -> int:
    """The detached agent: arm, say so on the ready pipe, serve, restore, exit."""
    ready = _fd("BEOPERF_READY_FD")
    data = _fd("BEOPERF_DATA_FD")
    wake, got = _signals()
    try:
        agent = arm(_read_plan(data), wake)
    except (errors.BeoperfError, OSError) as exc:
        _say(ready, "failed " + " ".join(str(exc).split()))
        return 1
    agent.signals = got
    _say(ready, armed_line(agent))
    try:
        why = agent.serve()
    except Exception as exc:  # a bug here must still end in the restore
        why = f"agent error: {_why(exc)}"
    if why != FINISH:
        agent.end(why, agent.restore_all())
    return 0


def _say(fd: int, line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, (line + "\n").encode())
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main())
