"""Audit machinery: findings, the check registry, profiles, and judging facts against them.

A check is one unit with five parts:

* ``collect()`` reads facts (read-only) into a flat dict of key -> value (an
  :class:`Unknown` when a value could not be read, with the reason);
* ``judge(facts, profile)`` turns them into :class:`Finding` objects: the default judge
  compares each fact with the profile's rule for its key (profiles are JSON data files in
  ``beoperf/audit/profiles``; a rule value "@other.key" means "the value of that fact");
* ``fix(key, rule)`` advises: the command that changes a fact, and how to persist it;
* ``set_action(key, value)`` / ``read_action(key)`` describe how ``beoperf tune`` applies
  a value and reads it back, for the keys it can restore exactly; applying the previous
  value is the restore.  Other keys are advice only (``advice_reason``).

What ``beoperf tune`` may change is an explicit allow-list, never a pattern: a check's
``VALUES`` maps each key it sets to the values that key may take (:class:`Integers`,
:class:`Words`).  Rollback files and profiles come from users and colleagues, so every
key and value they name is checked against it before anything is written as root.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any, ClassVar

from beoperf.model.audit import STATUSES, as_text

__all__ = ["STATUSES", "as_text", "Check", "Finding", "Unknown", "Unavailable", "register",
           "run_audit", "load_profile", "PROFILES"]

PROFILES = ("latency", "throughput", "balanced")
TOOL_TIMEOUT_S = 5.0
INT_MAX = 2**31 - 1  # what a sysctl of type int holds
# an interface name the kernel accepts and no tool mistakes for an option or a path
IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}")


@dataclass(frozen=True)
class Finding:
    """One judged fact: what was seen, how it compares, and how to change it."""

    check: str
    key: str
    value: Any
    status: str  # pass | warn | fail | unknown
    reason: str
    command: str | None = None  # the exact command that changes it
    persist: str | None = None  # how to make the change survive a reboot
    target: str | None = None  # the single value that fixes it, when there is one

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Unknown:
    """A fact that could not be read, and why (e.g. "ethtool not installed")."""

    reason: str


class Unavailable(Exception):
    """A source of facts (tool, file) could not be read; the message is the reason."""


class UnknownInterface(ValueError):
    """The interface asked for does not exist on this node."""


def valid_ifname(name: Any) -> bool:
    """Whether ``name`` is an interface name beoperf passes to ip/ethtool and /sys paths."""
    return isinstance(name, str) and bool(IFNAME.fullmatch(name)) and name not in (".", "..")


# --------------------------------------------------------------------------- values


def quoted(text: Any, limit: int = 80) -> str:
    """A value from a file for an error message: quoted, control characters escaped, cut
    short (files are hostile: a 1 MiB "value" must not become a 1 MiB message)."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit - 4] + "...'"


@dataclass(frozen=True)
class Integers:
    """``count`` decimal integers from ``low`` to ``high``, blank-separated (a sysctl
    triple such as tcp_rmem is three)."""

    low: int
    high: int
    count: int = 1

    def describe(self) -> str:
        what = f"from {self.low} to {self.high}"
        return f"an integer {what}" if self.count == 1 else f"{self.count} integers {what}"

    def check(self, text: str) -> None:
        """ValueError saying what was expected unless ``text`` is such integers."""
        shape = rf"\d{{1,19}}(?:[ \t]+\d{{1,19}}){{{self.count - 1}}}"
        if not (isinstance(text, str) and re.fullmatch(shape, text)
                and all(self.low <= int(p) <= self.high for p in text.split())):
            raise ValueError(f"{quoted(text)} is not {self.describe()}")

    def example(self) -> str:
        return " ".join([str(self.low)] * self.count)


@dataclass(frozen=True)
class Words:
    """One of a set of words; ``choices`` is the set or a function that reads it (e.g. the
    kernel's available congestion controls)."""

    choices: tuple[str, ...] | Callable[[], tuple[str, ...]]

    def words(self) -> tuple[str, ...]:
        return self.choices() if callable(self.choices) else self.choices

    def check(self, text: str) -> None:
        words = self.words()
        if not words:
            raise ValueError(f"{quoted(text)} cannot be checked: the values it may take "
                             "could not be read")
        if text not in words:
            raise ValueError(f"{quoted(text)} is not one of {', '.join(words)}")

    def example(self) -> str:
        return next(iter(self.words()), "")


ValueSpec = Integers | Words
ON_OFF = Words(("on", "off"))


# --------------------------------------------------------------------------- tools


def run_tool(argv: list[str], timeout: float = TOOL_TIMEOUT_S,
             accept: tuple[int, ...] = (0,)) -> str:
    """stdout of a read-only command (LC_ALL=C, 5 s timeout); Unavailable on any failure,
    an exit status outside ``accept`` among them (``systemctl is-active`` answers
    "inactive" with status 3: a caller that reads the answer accepts it)."""
    if shutil.which(argv[0]) is None:
        raise Unavailable(f"{argv[0]} not installed")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise Unavailable(f"{' '.join(argv)} timed out after {timeout:g} s") from exc
    except OSError as exc:
        raise Unavailable(f"{argv[0]}: {exc.strerror or exc}") from exc
    if proc.returncode not in accept:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        detail = lines[0].strip() if lines else f"exit status {proc.returncode}"
        raise Unavailable(f"{' '.join(argv)}: {detail}")
    return proc.stdout


def read_file(path: str) -> str:
    """Stripped content of a (proc/sys) file; Unavailable with the reason if unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except FileNotFoundError as exc:
        raise Unavailable(f"{path} does not exist") from exc
    except PermissionError as exc:
        raise Unavailable(f"{path}: permission denied") from exc
    except OSError as exc:
        raise Unavailable(f"{path}: {exc.strerror or exc}") from exc


# --------------------------------------------------------------------------- profiles


def load_profile(name: str) -> dict:
    """The profile's rules ({"name", "description", "expect": {key: rule}}); KeyError if none."""
    if name not in PROFILES:
        raise KeyError(name)
    text = resources.files("beoperf.audit").joinpath("profiles", f"{name}.json").read_text(
        encoding="utf-8")
    return json.loads(text)


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple) and value:
        return _as_number(value[-1])  # tcp_rmem "min default max": judge the max
    return None


def _normal(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def rule_met(rule: dict, value: Any) -> bool | None:
    """Whether ``value`` meets the rule (None if the rule cannot judge this value)."""
    op, want = rule.get("op", "eq"), rule.get("value")
    if op == "eq":
        return _normal(value) == _normal(want)
    if op == "in":
        return _normal(value) in [_normal(w) for w in want or ()]
    number = _as_number(value)
    if number is None or want is None:
        return None
    if op == "ge":
        return number >= want
    if op == "le":
        return number <= want
    raise ValueError(f"unknown rule op {op!r}")


# --------------------------------------------------------------------------- checks


def target_of(rule: dict | None) -> str | None:
    """The single value a rule asks for ("set", else the value of eq/le/ge), or None."""
    if not rule or rule.get("note"):
        return None
    if "set" in rule:
        return as_text(rule["set"])
    want = rule.get("value")
    if isinstance(want, str) and want.startswith("@"):  # a fact not yet resolved: no value
        return None
    if rule.get("op", "eq") in ("eq", "le", "ge") and want is not None:
        return as_text(want)
    return None


def resolve_rule(rule: dict | None, facts: dict) -> dict | None | Unknown:
    """``rule`` with an "@key" value replaced by that fact (Unknown if it is unknown)."""
    want = rule.get("value") if rule else None
    if rule is None or not (isinstance(want, str) and want.startswith("@")):
        return rule
    other = facts.get(want[1:], Unknown(f"{want[1:]} was not collected"))
    if isinstance(other, Unknown):
        return Unknown(f"{want[1:]} is unknown ({other.reason})")
    return {**rule, "value": other}


class Check:
    """One audit check.  Subclasses set ``name`` and implement ``collect``; those that can
    change a key exactly also implement ``settable``, ``set_action`` and ``read_action``."""

    name: ClassVar[str] = "check"
    KEYS: ClassVar[tuple[str, ...]] = ()  # the keys it reports
    VALUES: ClassVar[dict[str, ValueSpec]] = {}  # the keys tune may set: the allow-list
    advice_reason: ClassVar[str | None] = None  # why its keys are not changed by tune
    persist_advice: ClassVar[str | None] = None  # how a change is made persistent
    per_interface: ClassVar[bool] = False  # its keys belong to the audited interface

    def __init__(self, interface: str | None = None, path: dict | None = None) -> None:
        self.interface = interface
        self.peer_path = path  # with --peer: what the probes of the path to it found

    # ------------------------------------------------------------------ collect, judge

    def collect(self) -> dict:
        """Facts of this node: key -> value, or Unknown(reason). Must not change anything."""
        raise NotImplementedError

    def judge(self, facts: dict, profile: dict) -> list[Finding]:
        """Each fact against the profile's rule for its key."""
        rules = profile.get("expect", {})
        out = []
        for key, value in facts.items():
            rule = resolve_rule(rules.get(key), facts)
            if isinstance(rule, Unknown):  # a fact not read is no value (None), as in judge_one
                shown = None if isinstance(value, Unknown) else value
                out.append(Finding(self.name, key, shown, "unknown", rule.reason))
            else:
                out.append(self.judge_one(key, value, rule))
        return out

    def judge_one(self, key: str, value: Any, rule: dict | None) -> Finding:
        if isinstance(value, Unknown):
            note = f"{value.reason}; {rule['reason']}" if rule and rule.get("note") else None
            return Finding(self.name, key, None, "unknown", note or value.reason)
        if rule is None:
            return Finding(self.name, key, value, "pass", "recorded (no expectation)")
        if rule.get("note"):  # a setting with no effect: say so, never fail it
            return Finding(self.name, key, value, rule.get("status", "pass"), rule["reason"])
        met = rule_met(rule, value)
        if met is None:
            return Finding(self.name, key, value, "unknown", f"cannot judge {value!r}: "
                           f"{rule['reason']}")
        if met:
            return Finding(self.name, key, value, "pass", rule["reason"])
        command, persist = self.fix(key, rule)
        return Finding(self.name, key, value, rule.get("severity", "warn"), rule["reason"],
                       command, persist, target_of(rule))

    # ------------------------------------------------------------------ advise

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        """(command, persist) that set ``key`` as ``rule`` wants; (None, None) if none.

        By default the command is this check's own ``set_action`` for settable keys."""
        target = target_of(rule)
        if target is None or not self.settable(key):
            return None, None
        try:
            action = self.set_action(key, target)
        except ValueError:  # a value tune would refuse: no command for it either
            return None, None
        command = (shlex.join(action["argv"]) if "argv" in action
                   else f"echo {shlex.quote(action['value'])} > {action['write']}")
        return command, self.persist_advice

    # ------------------------------------------------------------------ apply, restore

    def owns(self, key: str) -> bool:
        """Whether this check reports ``key`` (a profile may only have rules for such keys)."""
        return key in self.KEYS or key in self.VALUES

    def settable(self, key: str) -> bool:
        """Whether ``beoperf tune`` can set ``key`` and restore it exactly: the key is in
        the allow-list, and a per-interface check has a valid interface."""
        if key not in self.VALUES:
            return False
        return valid_ifname(self.interface) if self.per_interface else True

    def check_value(self, key: str, value: str) -> None:
        """KeyError unless ``key`` is settable; ValueError naming the key and saying what it
        takes unless ``value`` is one of its values."""
        if not self.settable(key):
            raise KeyError(key)
        try:
            self.VALUES[key].check(value)
        except ValueError as exc:
            raise ValueError(f"{key} = {exc}") from None

    def set_action(self, key: str, value: str) -> dict:
        """How ``value`` is set: {"write": path, "value": v} or {"argv": [...]}; KeyError
        for a key tune does not set, ValueError for a value it refuses."""
        raise KeyError(key)

    def read_action(self, key: str) -> dict:
        """How the value is read back: {"file": path} or {"argv": [...], "field": name}."""
        raise KeyError(key)

    def parse_read(self, key: str, output: str) -> Any:
        """The value of ``key`` in the output of ``read_action``'s command (None if absent)."""
        return output

    def apply(self, key: str, value: str) -> None:
        """Set ``key`` to ``value`` (Unavailable with the reason on failure)."""
        action = self.set_action(key, value)
        if "argv" in action:
            run_tool(action["argv"])
            return
        try:
            with open(action["write"], "w", encoding="ascii") as f:
                f.write(action["value"] + "\n")
        except OSError as exc:
            raise Unavailable(f"writing {action['value']!r} to {action['write']}: "
                              f"{exc.strerror or exc}") from None

    def read(self, key: str) -> str:
        """The value of ``key`` now, as text (Unavailable if it cannot be read)."""
        how = self.read_action(key)
        if "file" in how:
            return read_file(how["file"])
        value = self.parse_read(key, run_tool(how["argv"]))
        if value is None:
            raise Unavailable(f"not reported by {' '.join(how['argv'])}")
        return as_text(value)

    def restore(self, key: str, previous: str) -> None:
        """Put back the value read before a change (the same operation as apply)."""
        self.apply(key, previous)


REGISTRY: list[type[Check]] = []


def register(cls: type[Check]) -> type[Check]:
    """Class decorator: add a check to the audit."""
    REGISTRY.append(cls)
    return cls


def check_named(name: str) -> type[Check]:
    """The registered check class called ``name``; KeyError if there is none."""
    from beoperf.audit import checks  # noqa: F401 - fills REGISTRY

    for cls in REGISTRY:
        if cls.name == name:
            return cls
    raise KeyError(name)


def owner_of(key: str) -> type[Check] | None:
    """The registered check that reports or sets ``key`` (None: no check does)."""
    from beoperf.audit import checks  # noqa: F401 - fills REGISTRY

    for cls in REGISTRY:
        if cls(None).owns(key):
            return cls
    return None


def _run_check(cls: type[Check], interface: str | None, profile: dict,
               path: dict | None = None) -> list[Finding]:
    check = cls(interface, path)
    try:
        return check.judge(check.collect(), profile)
    except Unavailable as exc:
        return [Finding(cls.name, "*", None, "unknown", str(exc))]
    except Exception as exc:  # one broken check must not stop the audit
        return [Finding(cls.name, "*", None, "unknown", f"check failed: {exc!r}")]


def run_audit(profile: str | dict, interface: str | None,
              path: dict | None = None) -> list[Finding]:
    """All registered checks, judged against ``profile`` (a name or a loaded profile);
    ``path``: what the probes of the path to a peer found (with --peer; see
    ``beoperf.audit.checks.PathMtu``), which the checks of the MTU judge by."""
    from beoperf.audit import checks  # noqa: F401 - fills REGISTRY

    rules = load_profile(profile) if isinstance(profile, str) else profile
    findings: list[Finding] = []
    for cls in REGISTRY:
        findings.extend(_run_check(cls, interface, rules, path))
    return findings
