"""Plan, apply and roll back the changes an audit asks for.

The mechanics live in the checks themselves (``beoperf.audit.checks``): each check says
which of its keys it can set *and restore exactly* (``settable``), how a value is set
(``set_action``) and read back (``read_action``).  Today those are sysctls (written to
``/proc/sys`` and read back), ethtool settings (coalescing ``-C``, offloads ``-K``, pause
``-A``, rings ``-G``) and the MTU (``ip link``).  Every other warn/fail finding
(irqbalance, CPU governor, C-states, THP, firewall ...) is "advice only", with the
check's reason.  Commands are argv lists, never shell strings.

Only one tune runs per network namespace at a time (:class:`TuneLock`, in
``beoperf.audit.lock``).  Rollback files and profiles are input from users: every key
they name must be in a check's allow-list and every value must be one that key takes
(``Check.VALUES``), and a rollback file must be private to the user running beoperf;
otherwise nothing is changed and the error names the bad entry.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from beoperf import errors, safeio
from beoperf.audit.base import (
    Check,
    Finding,
    Unavailable,
    as_text,
    check_named,
    owner_of,
    quoted,
    target_of,
    valid_ifname,
)
from beoperf.audit.lock import LockBusy, TuneLock, netns_id
from beoperf.model import tune as documents
from beoperf.model.document import Document, DocumentError, JsonObject, from_json

__all__ = ["Change", "Plan", "Advice", "TuneError", "ApplyFailed", "TuneLock", "LockBusy",
           "as_text", "make_plan", "apply_changes", "restore", "load_rollback",
           "rollback_document", "check_profile", "netns_id"]

# the order in which changes are applied: host-wide first, then the interface, MTU last
ORDER = ("sysctl", "coalesce", "offloads", "pause", "rings", "interface")
ADVICE_ORDER = {"sysctl": 0, "interface": 1, "coalesce": 1, "offloads": 1, "pause": 1,
                "rings": 1, "irqbalance": 2, "cpufreq": 3, "cstates": 3, "thp": 4}
RULE_OPS = ("eq", "in", "ge", "le")


class TuneError(errors.Failed):
    """A change could not be made, read back, or restored; the message says which."""

    category = "tune failed"


def same(a: str, b: str) -> bool:
    """Equal up to whitespace and case ("4096\\t131072" == "4096 131072")."""
    return a.split() == b.split() or " ".join(a.split()).lower() == " ".join(b.split()).lower()


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

    def action(self, value: str) -> JsonObject:
        """How ``value`` is set: {"write": path, "value": v} or {"argv": [...]}."""
        return self.unit().set_action(self.key, value)

    def readback(self) -> JsonObject:
        """How the value is read back: {"file": path} or {"argv": [...], "field": name}."""
        return self.unit().read_action(self.key)

    def planned(self) -> documents.PlannedChange:
        """This change as a plan lists it: the values and how each is set and read."""
        return documents.PlannedChange(self.key, self.check, self.interface, self.current,
                                       self.target, self.action(self.target),
                                       self.readback(), self.action(self.current))

    def to_dict(self) -> JsonObject:
        return asdict(self.planned())

    def snapshot(self) -> documents.SavedChange:
        """This change's entry in a rollback file."""
        return documents.SavedChange(self.key, self.check, self.interface, self.current,
                                     self.target, self.action(self.current))


@dataclass(frozen=True)
class Advice:
    """A warn/fail finding that ``beoperf tune`` does not change, and why."""

    key: str
    check: str
    value: Any
    status: str
    reason: str
    command: str | None = None

    def planned(self) -> documents.PlannedAdvice:
        return documents.PlannedAdvice(self.key, self.check, self.value, self.status,
                                       self.reason, self.command)


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
    except (KeyError, ValueError):
        return f"{target!r} is not a value beoperf tune can set for {finding.key}"
    current = as_text(finding.value)
    if same(current, target):
        return "already at the target value"
    try:
        unit.check_value(finding.key, current)
    except ValueError as exc:
        return f"the current value could not be restored exactly ({exc})"
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


def plan_document(plan: Plan, profile: str, interface: str | None,
                  meta: JsonObject) -> Document:
    """The plan as a "tune-plan" document."""
    return documents.TunePlan(profile, interface, [c.planned() for c in plan.changes],
                              [a.planned() for a in plan.advice]).to_document(meta)


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


def restore(changes: Iterable[Change], report: Report = _quiet,
            already: Report = _quiet) -> list[str]:
    """Set each change back to its ``current`` value (in the order given); the errors.
    A key that reads as that value already is left alone (``already``): a change that
    was never made, or was undone when an apply failed, may be one the kernel refuses
    to write (a sysctl that is read-only in a network namespace), and writing it back
    must not fail the restore of the others."""
    errors = []
    for change in changes:
        try:
            if _reads_as(change, change.current):
                already(change, change.current)
                continue
            set_checked(change, change.current)
        except TuneError as exc:
            errors.append(str(exc))
            continue
        report(change, change.current)
    return errors


def _reads_as(change: Change, value: str) -> bool:
    """The key reads as ``value`` now (False if it cannot be read: then it is written)."""
    try:
        return same(read_value(change), value)
    except TuneError:
        return False


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


# --------------------------------------------------------------------------- rollback files


def rollback_document(changes: list[Change], profile: str, interface: str | None,
                      meta: JsonObject) -> Document:
    """The snapshot of ``changes`` (their previous values) for this host and network
    namespace, as a "rollback" document."""
    return documents.Rollback(platform.node(), netns_id(), profile, interface,
                              [c.snapshot() for c in changes]).to_document(meta)


def wrong_place(doc: Document) -> str | None:
    """Why the rollback document ``doc`` was not written here (another host or network
    namespace), or None if it was; TuneError if it is no rollback document."""
    try:
        saved = documents.Rollback.from_document(doc)
    except DocumentError as exc:
        raise TuneError(str(exc)) from None
    here = (platform.node(), netns_id())
    if (saved.host, saved.netns) == here:
        return None
    return (f"it was written on host {quoted(saved.host)} (network namespace {saved.netns}), "
            f"this is {here[0]!r} (network namespace {here[1]})")


def write_new_file(path: str, doc: Document) -> None:
    """Write ``doc`` as JSON to a new file readable by its owner only, atomically (complete
    or absent), never through a link; FileExistsError if anything is at ``path``."""
    safeio.write_atomic(path, safeio.dump_json(doc.to_json(), indent=2), overwrite=False,
                        mode=0o600)


def _printable(text: str) -> str:
    """One line with control characters escaped: messages quote what a file holds."""
    return " ".join("".join(c if c.isprintable() else repr(c)[1:-1] for c in text).split())


def read_rollback(path: str) -> Document:
    """The rollback file (any version: the old "beoperf.rollback" 2 too) as a current
    document, read bounded and private, its shape checked against the schema but its
    entries not yet against the allow-list (:func:`rollback_changes`); TuneError naming
    what is wrong."""
    try:
        raw = safeio.load_json(path, safeio.LIMITS["rollback"], "a rollback file",
                               private=True)
        doc = from_json(raw, path)
    except (safeio.FileInputError, DocumentError) as exc:
        raise TuneError(_printable(str(exc))) from None
    if doc.kind != documents.ROLLBACK:
        raise TuneError(f"{path} is not a beoperf rollback file (it is a {doc.kind} "
                        "document)")
    return doc


def _entry_unit(key: str, check: str, interface: Any) -> Check:
    """The check that restores ``key``, with the entry's interface checked; TuneError."""
    if check not in ORDER:
        raise TuneError(f"check {quoted(check)} does not set anything (tune sets: "
                        f"{', '.join(ORDER)})")
    unit = check_named(check)(interface)
    shown = quoted(interface)
    if unit.per_interface:
        if not valid_ifname(interface):
            raise TuneError(f"interface {shown} is not an interface name")
        if not os.path.isdir(f"/sys/class/net/{interface}"):
            raise TuneError(f"interface {shown} does not exist here")
    elif interface is not None:
        raise TuneError(f"{check} settings belong to no interface (got {shown})")
    if not unit.settable(key):
        raise TuneError(f"{quoted(key)} is not a setting beoperf tune restores (the {check} "
                        f"check sets only {', '.join(unit.VALUES)})")
    return unit


def change_from_entry(entry: Any) -> Change:
    """A rollback file's change entry, every field checked; TuneError saying what is wrong
    (the caller names the entry)."""
    if not isinstance(entry, dict):
        raise TuneError("not an object")
    values = [entry.get(k) for k in ("key", "check", "previous", "target")]
    strings = [v for v in values if isinstance(v, str)]
    if len(strings) < len(values):
        raise TuneError("needs key, check, previous and target (strings)")
    key, check, previous, target = strings
    unit = _entry_unit(key, check, entry.get("interface"))
    try:
        unit.check_value(key, previous)
        unit.check_value(key, target)
    except ValueError as exc:
        raise TuneError(str(exc)) from None
    change = Change(key, check, entry.get("interface"), previous, target)
    if entry.get("restore") != change.action(previous):
        raise TuneError("'restore' does not match key and previous")
    return change


def _entry_name(i: int, entry: Any) -> str:
    key = entry.get("key") if isinstance(entry, dict) else None
    return f"change {i + 1}" + (f" ({quoted(key)})" if isinstance(key, str) else "")


def load_rollback(path: str) -> tuple[Document, list[Change]]:
    """The rollback file and its changes (in the order applied); TuneError naming the file
    and the first bad entry.  Nothing is applied here: the caller restores only a file
    that passed every check."""
    doc = read_rollback(path)
    return doc, rollback_changes(path, doc.body)


def rollback_changes(path: str, body: dict) -> list[Change]:
    """Every entry of a rollback document's body (from ``path``) checked against the
    allow-list, as changes; TuneError naming the first bad entry."""
    changes = []
    for i, entry in enumerate(body["changes"]):
        try:
            changes.append(change_from_entry(entry))
        except TuneError as exc:
            raise TuneError(f"{path}: {_entry_name(i, entry)}: {exc}") from None
    return changes


# --------------------------------------------------------------------------- profiles


def _check_comparison(rule: dict) -> None:
    """ValueError unless the rule's op and value can be judged (see base.rule_met)."""
    op, want = rule.get("op", "eq"), rule.get("value")
    if op not in RULE_OPS:
        raise ValueError(f"op {quoted(str(op))} is not one of {', '.join(RULE_OPS)}")
    if op == "in" and not isinstance(want, list):
        raise ValueError("op 'in' needs a list as value")
    fact = isinstance(want, str) and want.startswith("@")
    if op in ("ge", "le") and not fact and (isinstance(want, bool)
                                            or not isinstance(want, int | float)):
        raise ValueError(f"op {op!r} needs a number (or '@key') as value")
    if rule.get("severity", "warn") not in ("warn", "fail"):
        raise ValueError("severity must be 'warn' or 'fail'")


def _check_rule(key: str, rule: Any) -> None:
    """ValueError saying what is wrong with one profile rule."""
    if not isinstance(rule, dict):
        raise ValueError("the rule is not an object")
    owner = owner_of(key)
    if owner is None:
        raise ValueError("no beoperf check reports or sets this key")
    if rule.get("note"):
        if rule.get("status", "pass") not in ("pass", "warn", "fail", "unknown"):
            raise ValueError("status must be pass, warn, fail or unknown")
    else:
        _check_comparison(rule)
        target, spec = target_of(rule), owner.VALUES.get(key)
        if target is not None and spec is not None:  # a value tune would set: one it takes
            spec.check(target)
    if not isinstance(rule.get("reason"), str) or not rule["reason"].strip():
        raise ValueError("the rule has no 'reason' (say why it matters)")


def check_profile(profile: Any, source: str) -> dict:
    """A profile from a file, checked: an object with an 'expect' object whose every rule
    is for a key a check owns and, for a key tune sets, names a value that key takes.
    ValueError naming ``source`` and the bad rule otherwise."""
    if not isinstance(profile, dict) or not isinstance(profile.get("expect"), dict):
        raise ValueError(f"{source} has no 'expect' object")
    for key, rule in profile["expect"].items():
        try:
            _check_rule(key, rule)
        except ValueError as exc:
            raise ValueError(f"{source}: the rule for {quoted(key)}: {exc}") from None
    return profile
