"""Audit machinery: findings, the check registry, profiles, and judging facts against them.

A check is one class: ``collect()`` reads facts (read-only) into a flat dict of
key -> value (an :class:`Unknown` when a value could not be read, with the reason), and
``judge(facts, profile)`` turns them into :class:`Finding` objects.  The default judge
compares each fact with the profile's rule for its key (profiles are JSON data files in
``beoperf/audit/profiles``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any, ClassVar

STATUSES = ("pass", "warn", "fail", "unknown")
PROFILES = ("latency", "throughput", "balanced")
TOOL_TIMEOUT_S = 5.0


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


# --------------------------------------------------------------------------- tools


def run_tool(argv: list[str], timeout: float = TOOL_TIMEOUT_S) -> str:
    """stdout of a read-only command (LC_ALL=C, 5 s timeout); Unavailable on any failure."""
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
    if proc.returncode != 0:
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
        return _normal(value) in [_normal(w) for w in want]
    number = _as_number(value)
    if number is None:
        return None
    if op == "ge":
        return number >= want
    if op == "le":
        return number <= want
    raise ValueError(f"unknown rule op {op!r}")


# --------------------------------------------------------------------------- checks


class Check:
    """One audit check.  Subclasses set ``name`` and implement ``collect``."""

    name: ClassVar[str] = "check"

    def __init__(self, interface: str | None = None) -> None:
        self.interface = interface

    def collect(self) -> dict:
        """Facts of this node: key -> value, or Unknown(reason). Must not change anything."""
        raise NotImplementedError

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        """(command, persist) that set ``key`` as ``rule`` wants; (None, None) if none."""
        return None, None

    def judge(self, facts: dict, profile: dict) -> list[Finding]:
        """Each fact against the profile's rule for its key."""
        rules = profile.get("expect", {})
        return [self.judge_one(key, value, rules.get(key)) for key, value in facts.items()]

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
                       command, persist)


REGISTRY: list[type[Check]] = []


def register(cls: type[Check]) -> type[Check]:
    """Class decorator: add a check to the audit."""
    REGISTRY.append(cls)
    return cls


def _run_check(cls: type[Check], interface: str | None, profile: dict) -> list[Finding]:
    check = cls(interface)
    try:
        return check.judge(check.collect(), profile)
    except Unavailable as exc:
        return [Finding(cls.name, "*", None, "unknown", str(exc))]
    except Exception as exc:  # one broken check must not stop the audit
        return [Finding(cls.name, "*", None, "unknown", f"check failed: {exc!r}")]


def run_audit(profile: str | dict, interface: str | None) -> list[Finding]:
    """All registered checks, judged against ``profile`` (a name or a loaded profile)."""
    from beoperf.audit import checks  # noqa: F401 - fills REGISTRY

    rules = load_profile(profile) if isinstance(profile, str) else profile
    findings: list[Finding] = []
    for cls in REGISTRY:
        findings.extend(_run_check(cls, interface, rules))
    return findings
