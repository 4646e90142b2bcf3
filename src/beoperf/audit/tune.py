"""Plan, apply and roll back the changes an audit asks for.

Only changes that can be applied *and restored exactly* are planned:

* sysctls: written to ``/proc/sys/...`` and read back from the same file;
* interface settings through ethtool (coalescing ``-C``, offloads ``-K``, pause ``-A``), the
  previous values taken from the audit's parsed ``ethtool -c/-k/-a`` facts;
* the MTU, through ``ip link set dev IF mtu N`` (read back from sysfs).

Every other warn/fail finding (irqbalance, CPU governor, C-states, THP, firewall ...) is
"advice only", with the reason.  Commands are argv lists, never shell strings.
"""

from __future__ import annotations

import json
import os
import platform
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from beoperf.audit.base import Finding, Unavailable, read_file, run_tool

ROLLBACK_FORMAT = "beoperf.rollback"
PLAN_FORMAT = "beoperf.tune-plan"
SCHEMA_VERSION = 1
KINDS = ("sysctl", "ethtool", "mtu")  # also the order in which changes are applied
SYSCTL_KEY = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_-]+)+")
IFNAME = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
ETHTOOL = {"coalesce.": ("-C", "-c"), "offload.": ("-K", "-k"), "pause.": ("-A", "-a")}
OFFLOAD_SHORT = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                 "generic-receive-offload": "gro", "large-receive-offload": "lro",
                 "rx-checksumming": "rx", "tx-checksumming": "tx"}
PAUSE_FIELDS = {"autonegotiate": "autoneg", "rx": "rx", "tx": "tx"}  # ethtool -A's names
ADVICE_ORDER = {"sysctl": 0, "interface": 1, "coalesce": 1, "offloads": 1, "pause": 1,
                "rings": 1, "irqbalance": 2, "cpufreq": 3, "cstates": 3, "thp": 4}
ADVICE_REASONS = {
    "irqbalance": "stopping a service is not restored exactly (its enabled state and the IRQ "
                  "affinities it wrote); do it by hand",
    "cpufreq": "the governor is per CPU (possibly mixed) and set through cpupower; not "
               "restored exactly, do it by hand",
    "cstates": "C-states are set through cpupower or the kernel command line; do it by hand",
    "thp": "transparent huge pages are best set on the kernel command line; do it by hand",
    "firewall": "firewall rules and connection tracking need reviewing by hand",
}


class TuneError(Exception):
    """A change could not be made, read back, or restored; the message says which."""


def as_text(value: Any) -> str:
    """A fact or rule value as the text ethtool/sysctl take: bools on/off, lists joined."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return " ".join(as_text(v) for v in value)
    return str(value)


def same(a: str, b: str) -> bool:
    """Equal up to whitespace and case ("4096\\t131072" == "4096 131072")."""
    return a.split() == b.split() or " ".join(a.split()).lower() == " ".join(b.split()).lower()


# --------------------------------------------------------------------------- changes


@dataclass(frozen=True)
class Change:
    """One setting to change: ``current`` is what a rollback restores."""

    key: str
    kind: str  # sysctl | ethtool | mtu
    interface: str | None
    current: str
    target: str

    @property
    def path(self) -> str | None:
        """The file written (sysctl) or read back (sysctl, mtu)."""
        if self.kind == "sysctl":
            return "/proc/sys/" + self.key.replace(".", "/")
        if self.kind == "mtu":
            return f"/sys/class/net/{self.interface}/mtu"
        return None

    def argv(self, value: str) -> list[str] | None:
        """The command that sets ``value`` (None for sysctls: their file is written)."""
        if self.kind == "mtu":
            return ["ip", "link", "set", "dev", str(self.interface), "mtu", value]
        if self.kind == "ethtool":
            prefix, field_name, _parsed = ethtool_field(self.key)
            return ["ethtool", ETHTOOL[prefix][0], str(self.interface), field_name, value]
        return None

    def action(self, value: str) -> dict:
        """How ``value`` is set: {"write": path, "value": v} or {"argv": [...]}."""
        if self.kind == "sysctl":
            return {"write": self.path, "value": value}
        return {"argv": self.argv(value)}

    def readback(self) -> dict:
        """How the value is read back: {"file": path} or {"argv": [...], "field": name}."""
        if self.kind == "ethtool":
            prefix, _field, parsed = ethtool_field(self.key)
            return {"argv": ["ethtool", ETHTOOL[prefix][1], str(self.interface)],
                    "field": parsed}
        return {"file": self.path}

    def to_dict(self) -> dict:
        return {**asdict(self), "apply": self.action(self.target), "read": self.readback(),
                "restore": self.action(self.current)}

    def snapshot(self) -> dict:
        """This change's entry in a rollback file."""
        return {"key": self.key, "kind": self.kind, "interface": self.interface,
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


def ethtool_field(key: str) -> tuple[str, str, str]:
    """(key prefix, ethtool's field name, parser's field name); KeyError if not settable."""
    for prefix in ETHTOOL:
        if key.startswith(prefix):
            name = key.removeprefix(prefix)
            if prefix == "coalesce.":
                return prefix, name.replace("_", "-"), name
            if prefix == "offload.":
                return prefix, OFFLOAD_SHORT[name], name
            return prefix, PAUSE_FIELDS[name], name
    raise KeyError(key)


def target_of(rule: dict | None) -> str | None:
    """The single value a rule asks for ("set", else the value of eq/le/ge), or None."""
    if not rule or rule.get("note"):
        return None
    if "set" in rule:
        return as_text(rule["set"])
    if rule.get("op", "eq") in ("eq", "le", "ge") and rule.get("value") is not None:
        return as_text(rule["value"])
    return None


def kind_of(finding: Finding, interface: str | None) -> str | None:
    """sysctl | ethtool | mtu when beoperf can set and restore this key exactly, else None."""
    if finding.check == "sysctl" and SYSCTL_KEY.fullmatch(finding.key):
        return "sysctl"
    if not interface:
        return None
    if finding.key == "mtu":
        return "mtu"
    try:
        ethtool_field(finding.key)
    except KeyError:
        return None
    return "ethtool"


def change_for(finding: Finding, rule: dict | None, interface: str | None) -> Change | str:
    """The change that fixes ``finding``, or the reason there is none (advice only)."""
    kind = kind_of(finding, interface)
    if kind is None:
        return ADVICE_REASONS.get(finding.check,
                                  f"beoperf tune cannot set {finding.key} and restore it exactly")
    target = target_of(rule)
    if target is None:
        return "the profile names no single value to set"
    if kind == "mtu" and not target.isdigit():
        return f"MTU {target!r} is not a number"
    current = as_text(finding.value)
    if same(current, target):
        return "already at the target value"
    return Change(finding.key, kind, None if kind == "sysctl" else interface, current, target)


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
    plan.changes.sort(key=lambda c: KINDS.index(c.kind))
    plan.advice.sort(key=lambda a: ADVICE_ORDER.get(a.check, 5))
    return plan


def plan_document(plan: Plan, profile: str, interface: str | None) -> dict:
    return {"format": PLAN_FORMAT, "schema_version": SCHEMA_VERSION, "host": platform.node(),
            "profile": profile, "interface": interface,
            "changes": [c.to_dict() for c in plan.changes],
            "advice": [a.to_dict() for a in plan.advice]}


# --------------------------------------------------------------------------- set and read


def _write(path: str, value: str) -> None:
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(value + "\n")
    except OSError as exc:
        raise TuneError(f"writing {value!r} to {path}: {exc.strerror or exc}") from None


def set_value(change: Change, value: str) -> None:
    """Set ``change``'s key to ``value``; TuneError with the reason on failure."""
    argv = change.argv(value)
    if argv is None:
        _write(str(change.path), value)
        return
    try:
        run_tool(argv)
    except Unavailable as exc:
        raise TuneError(str(exc)) from None


def _ethtool_value(change: Change, text: str) -> Any:
    from beoperf.audit import parsers

    prefix, _field, name = ethtool_field(change.key)
    if prefix == "coalesce.":
        return parsers.parse_ethtool_coalesce(text).get(name)
    if prefix == "offload.":
        return (parsers.parse_ethtool_features(text).get(name) or {}).get("on")
    return parsers.parse_ethtool_pause(text).get(name)


def read_value(change: Change) -> str:
    """The key's value now, as text; TuneError if it cannot be read."""
    how = change.readback()
    try:
        if "file" in how:
            return read_file(how["file"])
        value = _ethtool_value(change, run_tool(how["argv"]))
    except Unavailable as exc:
        raise TuneError(f"reading back {change.key}: {exc}") from None
    if value is None:
        raise TuneError(f"reading back {change.key}: not reported by {' '.join(how['argv'])}")
    return as_text(value)


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
    """Apply in order, reading each back; on a failure undo the applied ones in reverse."""
    done: list[Change] = []
    for change in changes:
        try:
            set_checked(change, change.target)
        except TuneError as exc:
            errors = restore(reversed(done))
            raise ApplyFailed(change, str(exc), len(done), errors) from None
        done.append(change)
        report(change, change.target)


# --------------------------------------------------------------------------- rollback files


def rollback_document(changes: list[Change], profile: str, interface: str | None,
                      created: str) -> dict:
    return {"format": ROLLBACK_FORMAT, "schema_version": SCHEMA_VERSION,
            "host": platform.node(), "created": created, "profile": profile,
            "interface": interface, "changes": [c.snapshot() for c in changes]}


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
    if change.kind == "sysctl":
        return change.interface is None and bool(SYSCTL_KEY.fullmatch(change.key))
    if not (isinstance(change.interface, str) and IFNAME.fullmatch(change.interface)):
        return False
    if change.kind == "mtu":
        return change.key == "mtu" and change.current.isdigit()
    try:
        ethtool_field(change.key)
    except KeyError:
        return False
    return change.kind == "ethtool"


def change_from_entry(entry: Any) -> Change:
    """A rollback file's change entry, checked; TuneError naming what is wrong."""
    if not isinstance(entry, dict):
        raise TuneError(f"change entry {entry!r} is not an object")
    values = [entry.get(k) for k in ("key", "kind", "previous", "target")]
    if not all(isinstance(v, str) for v in values) or entry.get("kind") not in KINDS:
        raise TuneError(f"change entry {entry.get('key')!r}: needs key, kind, previous, target")
    key, kind, previous, target = values
    change = Change(key, kind, entry.get("interface"), previous, target)
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
