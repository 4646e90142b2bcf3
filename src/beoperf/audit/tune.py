"""Plan, apply and roll back the changes an audit asks for.

The mechanics live in the checks themselves (``beoperf.audit.checks``): each check says
which of its keys it can set *and restore exactly* (``settable``), how a value is set
(``set_action``) and read back (``read_action``).  Today those are sysctls (written to
``/proc/sys`` and read back), ethtool settings (coalescing ``-C``, offloads ``-K``, pause
``-A``, rings ``-G``) and the MTU (``ip link``).  Every other warn/fail finding
(irqbalance, CPU governor, C-states, THP, firewall ...) is "advice only", with the
check's reason.  Commands are argv lists, never shell strings.

Only one tune runs per network namespace at a time (:class:`TuneLock`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import platform
import re
import shlex
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from beoperf.audit.base import Check, Finding, Unavailable, as_text, check_named, target_of

__all__ = ["Change", "Plan", "Advice", "TuneError", "ApplyFailed", "TuneLock", "LockBusy",
           "as_text", "make_plan", "apply_changes", "restore", "load_rollback",
           "rollback_document"]

ROLLBACK_FORMAT = "beoperf.rollback"
PLAN_FORMAT = "beoperf.tune-plan"
SCHEMA_VERSION = 2  # 2: changes name their check (1 had a "kind")
# the order in which changes are applied: host-wide first, then the interface, MTU last
ORDER = ("sysctl", "coalesce", "offloads", "pause", "rings", "interface")
IFNAME = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
ADVICE_ORDER = {"sysctl": 0, "interface": 1, "coalesce": 1, "offloads": 1, "pause": 1,
                "rings": 1, "irqbalance": 2, "cpufreq": 3, "cstates": 3, "thp": 4}
LOCK_DIRS = ("/run/lock", "/run", tempfile.gettempdir())


class TuneError(Exception):
    """A change could not be made, read back, or restored; the message says which."""


class LockBusy(TuneError):
    """Another tune holds this network namespace's lock (or the lock cannot be taken)."""


def same(a: str, b: str) -> bool:
    """Equal up to whitespace and case ("4096\\t131072" == "4096 131072")."""
    return a.split() == b.split() or " ".join(a.split()).lower() == " ".join(b.split()).lower()


def netns_id() -> int | None:
    """The inode of this process's network namespace (what tells two namespaces apart)."""
    try:
        return os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return None


# --------------------------------------------------------------------------- changes


@dataclass(frozen=True)
class Change:
    """One setting to change: ``current`` is what a rollback restores."""

    key: str
    check: str  # the name of the check that sets and restores it
    interface: str | None
    current: str
    target: str

    def unit(self) -> Check:
        """The check that owns this key (KeyError if there is none)."""
        return check_named(self.check)(self.interface)

    def action(self, value: str) -> dict:
        """How ``value`` is set: {"write": path, "value": v} or {"argv": [...]}."""
        return self.unit().set_action(self.key, value)

    def readback(self) -> dict:
        """How the value is read back: {"file": path} or {"argv": [...], "field": name}."""
        return self.unit().read_action(self.key)

    def to_dict(self) -> dict:
        return {**asdict(self), "apply": self.action(self.target), "read": self.readback(),
                "restore": self.action(self.current)}

    def snapshot(self) -> dict:
        """This change's entry in a rollback file."""
        return {"key": self.key, "check": self.check, "interface": self.interface,
                "previous": self.current, "target": self.target,
                "restore": self.action(self.current)}


@dataclass(frozen=True)
class Advice:
    """A warn/fail finding that ``beoperf tune`` does not change, and why."""

    key: str
    check: str
    value: Any
    status: str
    reason: str
    command: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)


def _unit(finding: Finding, interface: str | None) -> Check | None:
    try:
        return check_named(finding.check)(interface)
    except KeyError:
        return None


def change_for(finding: Finding, rule: dict | None, interface: str | None) -> Change | str:
    """The change that fixes ``finding``, or the reason there is none (advice only)."""
    unit = _unit(finding, interface)
    if unit is None or not unit.settable(finding.key):
        if unit is not None and unit.advice_reason:
            return unit.advice_reason
        return f"beoperf tune cannot set {finding.key} and restore it exactly" + (
            "" if interface else " (no interface)")
    target = finding.target if finding.target is not None else target_of(rule)
    if target is None:
        return "the profile names no single value to set"
    try:
        unit.set_action(finding.key, target)
    except KeyError:
        return f"{target!r} is not a value beoperf tune can set for {finding.key}"
    current = as_text(finding.value)
    if same(current, target):
        return "already at the target value"
    return Change(finding.key, finding.check, interface if unit.per_interface else None,
                  current, target)


def _order(change: Change) -> int:
    return ORDER.index(change.check) if change.check in ORDER else len(ORDER) - 1


def make_plan(findings: Iterable[Finding], profile: dict, interface: str | None) -> Plan:
    """Every warn/fail finding as a change (in apply order) or as advice only."""
    rules = profile.get("expect", {})
    plan = Plan()
    for f in findings:
        if f.status not in ("warn", "fail"):
            continue
        got = change_for(f, rules.get(f.key), interface)
        if isinstance(got, Change):
            plan.changes.append(got)
        else:
            plan.advice.append(Advice(f.key, f.check, f.value, f.status, got, f.command))
    plan.changes.sort(key=_order)
    plan.advice.sort(key=lambda a: ADVICE_ORDER.get(a.check, 5))
    return plan


def plan_document(plan: Plan, profile: str, interface: str | None) -> dict:
    return {"format": PLAN_FORMAT, "schema_version": SCHEMA_VERSION, "host": platform.node(),
            "profile": profile, "interface": interface,
            "changes": [c.to_dict() for c in plan.changes],
            "advice": [a.to_dict() for a in plan.advice]}


# --------------------------------------------------------------------------- set and read


def set_value(change: Change, value: str) -> None:
    """Set ``change``'s key to ``value``; TuneError with the reason on failure."""
    try:
        change.unit().apply(change.key, value)
    except Unavailable as exc:
        raise TuneError(str(exc)) from None


def read_value(change: Change) -> str:
    """The key's value now, as text; TuneError if it cannot be read."""
    try:
        return change.unit().read(change.key)
    except Unavailable as exc:
        raise TuneError(f"reading back {change.key}: {exc}") from None


def set_checked(change: Change, value: str) -> None:
    """Set ``value`` and read it back; TuneError if either fails or the value differs."""
    set_value(change, value)
    got = read_value(change)
    if not same(got, value):
        raise TuneError(f"{change.key}: set {value!r} but read back {got!r}")


Report = Callable[[Change, str], None]


def _quiet(change: Change, value: str) -> None:
    return None


def restore(changes: Iterable[Change], report: Report = _quiet) -> list[str]:
    """Set each change back to its ``current`` value (in the order given); the errors."""
    errors = []
    for change in changes:
        try:
            set_checked(change, change.current)
        except TuneError as exc:
            errors.append(str(exc))
            continue
        report(change, change.current)
    return errors


class ApplyFailed(TuneError):
    """A change failed; the ones applied before it were rolled back (``restore_errors``)."""

    def __init__(self, change: Change, reason: str, rolled_back: int,
                 restore_errors: list[str]) -> None:
        self.change, self.rolled_back, self.restore_errors = change, rolled_back, restore_errors
        super().__init__(reason)


def apply_changes(changes: list[Change], report: Report = _quiet) -> None:
    """Apply in order, reading each back; on a failure undo the applied ones in reverse.
    On Ctrl-C or any other exception the applied ones and the one under way (restoring
    an untouched value rewrites it) are undone too, and the exception goes on."""
    done: list[Change] = []
    for change in changes:
        try:
            set_checked(change, change.target)
        except TuneError as exc:
            errors = restore(reversed(done))
            raise ApplyFailed(change, str(exc), len(done), errors) from None
        except BaseException:
            restore(reversed([*done, change]))
            raise
        done.append(change)
        report(change, change.target)


# --------------------------------------------------------------------------- one at a time


class TuneLock:
    """An exclusive lock per network namespace, held while a tune changes anything.

    A second ``beoperf tune --apply/--rollback/--procedure`` in the same namespace is
    refused (TuneError naming the holder's PID) instead of interleaving its changes and
    snapshots with the first one's.  The lock is released when the holder exits, even
    on kill -9 (flock)."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory
        self.fd: int | None = None

    def path(self) -> str:
        name = f"beoperf-tune.net{netns_id() or 0}.lock"
        if self.directory:
            return os.path.join(self.directory, name)
        for directory in LOCK_DIRS:
            if os.path.isdir(directory) and os.access(directory, os.W_OK):
                return os.path.join(directory, name)
        return os.path.join(tempfile.gettempdir(), name)

    def __enter__(self) -> TuneLock:
        path = self.path()
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LockBusy(f"cannot open the lock file {path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise LockBusy(f"another beoperf tune (pid {holder}) is changing this node "
                                f"(lock {path}); wait for it to finish") from None
            raise LockBusy(f"cannot lock {path}: {exc.strerror}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


# --------------------------------------------------------------------------- persistence


def persist_files(changes: Iterable[Change]) -> dict[str, str]:
    """Files that make ``changes`` survive a reboot: a sysctl.d drop-in for the sysctls and
    a systemd oneshot unit that re-applies the interface settings once the network is up."""
    sysctls = [c for c in changes if c.check == "sysctl"]
    links = [c for c in changes if c.check != "sysctl"]
    out = {}
    if sysctls:
        lines = ["# written by 'beoperf tune --persist'; install in /etc/sysctl.d/"]
        lines += [f"{c.key} = {c.target}" for c in sysctls]
        out["90-beoperf.conf"] = "\n".join(lines) + "\n"
    if links:
        execs = [f"ExecStart={shlex.join(c.action(c.target)['argv'])}" for c in links]
        out["beoperf-tune.service"] = "\n".join([
            "# written by 'beoperf tune --persist'; install in /etc/systemd/system/, then",
            "# systemctl daemon-reload && systemctl enable beoperf-tune.service",
            "[Unit]", "Description=beoperf tune: interface settings",
            "Wants=network-online.target", "After=network-online.target", "",
            "[Service]", "Type=oneshot", "RemainAfterExit=yes", *execs, "",
            "[Install]", "WantedBy=multi-user.target", ""])
    return out


# --------------------------------------------------------------------------- rollback files


def rollback_document(changes: list[Change], profile: str, interface: str | None,
                      created: str) -> dict:
    return {"format": ROLLBACK_FORMAT, "schema_version": SCHEMA_VERSION,
            "host": platform.node(), "netns": netns_id(), "created": created,
            "profile": profile, "interface": interface,
            "changes": [c.snapshot() for c in changes]}


def wrong_place(doc: dict) -> str | None:
    """Why the rollback file ``doc`` was not written here (another host or network
    namespace), or None if it was."""
    here = (platform.node(), netns_id())
    there = (doc.get("host"), doc.get("netns"))
    if there == here:
        return None
    return (f"it was written on host {there[0]!r} (network namespace {there[1]}), "
            f"this is {here[0]!r} (network namespace {here[1]})")


def write_new_file(path: str, doc: dict) -> None:
    """Write ``doc`` as JSON to a new file, atomically (complete or absent); never overwrite."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".beoperf-rollback-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)  # atomic, and fails if path exists
    finally:
        os.unlink(tmp)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _load_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise TuneError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TuneError(f"{path} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != ROLLBACK_FORMAT:
        raise TuneError(f"{path} is not a beoperf rollback file (format {ROLLBACK_FORMAT!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise TuneError(f"{path}: unsupported schema_version {doc.get('schema_version')!r} "
                        f"(this beoperf reads {SCHEMA_VERSION})")
    if not isinstance(doc.get("changes"), list):
        raise TuneError(f"{path}: 'changes' is not a list")
    return doc


def _valid(change: Change) -> bool:
    if change.interface is not None and not IFNAME.fullmatch(str(change.interface)):
        return False
    try:
        unit = change.unit()
    except KeyError:
        return False
    if (change.interface is not None) != unit.per_interface:
        return False
    try:
        return unit.settable(change.key) and bool(unit.set_action(change.key, change.current))
    except KeyError:
        return False


def change_from_entry(entry: Any) -> Change:
    """A rollback file's change entry, checked; TuneError naming what is wrong."""
    if not isinstance(entry, dict):
        raise TuneError(f"change entry {entry!r} is not an object")
    values = [entry.get(k) for k in ("key", "check", "previous", "target")]
    if not all(isinstance(v, str) for v in values) or entry.get("check") not in ORDER:
        raise TuneError(f"change entry {entry.get('key')!r}: needs key, check, previous, "
                        "target")
    key, check, previous, target = values
    change = Change(key, check, entry.get("interface"), previous, target)
    if not _valid(change):
        raise TuneError(f"change entry {key!r}: not a setting beoperf tune restores")
    if entry.get("restore") != change.action(previous):
        raise TuneError(f"change entry {key!r}: 'restore' does not match key and previous")
    return change


def load_rollback(path: str) -> tuple[dict, list[Change]]:
    """The rollback file and its changes (in the order applied); TuneError if bad."""
    doc = _load_json(path)
    try:
        return doc, [change_from_entry(e) for e in doc["changes"]]
    except TuneError as exc:
        raise TuneError(f"{path}: {exc}") from None
