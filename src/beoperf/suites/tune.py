"""Tune: plan, apply, roll back, and the measured procedure, each a function to a document.

* :func:`plan`: the changes the audit asks for, in apply order, and the advice only
  ("tune-plan"); nothing changes.
* :func:`apply` (root): takes the per-namespace lock, reads the settings, writes the
  snapshot of every previous value (the rollback file), then applies one change at a
  time, reading each back; a failure rolls back what was applied.  Returns the snapshot
  ("rollback").
* :func:`rollback` (root): reads a rollback file (bounded, private, any version since
  issue 9), refuses one written on another host or network namespace (unless forced),
  checks every entry against the allow-list, and only then takes the lock and restores.
* :func:`procedure` (root): the measured procedure against a peer's ``beoperf serve``
  (``beoperf.audit.procedure``), returning the "procedure" document.  It is the greedy
  design of ``beoperf study`` on this node alone: the same loop and decision rule
  (``analysis.greedy``), measured here by ping-pong without dead-man agents.

The lock is taken before the settings are read (what the audit reads becomes the
snapshot's "previous" values).  Progress lines go to the ``progress`` callback.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from beoperf import errors
from beoperf.analysis.effect import DEFAULT_MARGIN
from beoperf.audit import procedure as measured
from beoperf.audit import tune
from beoperf.audit.base import PROFILES, load_profile, run_audit
from beoperf.audit.tune import ApplyFailed, Change, Plan, TuneError, TuneLock
from beoperf.engines.protocol import DEFAULT_PORT
from beoperf.model import tune as documents
from beoperf.model.document import Document, JsonObject, make_meta, utc_now
from beoperf.suites.audit import path_facts, pick_interface
from beoperf.sweep.probe import measure_size

__all__ = ["PROFILES", "DEFAULT_PORT", "MIN_REPEATS", "Spec", "RollbackSpec", "plan", "apply",
           "rollback", "procedure", "default_rollback_path"]

MIN_REPEATS = measured.MIN_REPEATS
MEASURE_TIMEOUT_S = 10.0

Progress = Callable[[str], None]


class BadRollbackFile(errors.InputError):
    """A rollback file that cannot be restored (unreadable, malformed, not allowed)."""

    category = "bad rollback file"


class RollbackRefused(errors.Failed):
    """A rollback file written on another host or network namespace."""

    category = "rollback refused"


class RollbackFailed(errors.Failed):
    """Some values of a rollback file could not be restored."""

    category = "rollback failed"


class ProcedureError(errors.Failed):
    """The measured procedure failed; what it applied was rolled back."""

    category = "tune procedure failed"


@dataclass(frozen=True)
class Spec:
    """A tune: the profile (a built-in one's name, or ``rules`` of one's own read from
    ``source``), the interface (None: the route to ``peer``, else the default route's),
    where apply and procedure save the previous values (``rollback_file``), and for the
    procedure the peer's ``beoperf serve`` port, the repeats per configuration, whether
    every change is kept and the margin within which a change counts as none (the
    greedy study's ``--margin``)."""

    profile: str = "latency"
    rules: Mapping[str, Any] | None = None
    source: str | None = None
    interface: str | None = None
    peer: str | None = None
    port: int = DEFAULT_PORT
    repeats: int = 10
    keep_all: bool = False
    rollback_file: str | None = None
    command_line: tuple[str, ...] = ()
    margin: float = DEFAULT_MARGIN


@dataclass(frozen=True)
class RollbackSpec:
    """A rollback file to restore; ``force`` restores one written elsewhere (every entry
    is still checked)."""

    path: str
    force: bool = False
    command_line: tuple[str, ...] = ()


def default_rollback_path() -> str:
    """./beoperf-rollback-<UTC>.json"""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join(os.getcwd(), f"beoperf-rollback-{stamp}.json")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise errors.NotPermitted(f"{what} changes kernel and interface settings: run it as "
                                  "root", "nothing was changed")


def profile_of(spec: Spec) -> tuple[str, dict]:
    """(name, rules) of the spec's profile; BadSpec if unknown or not usable."""
    if spec.rules is None:
        if spec.profile not in PROFILES:
            raise errors.BadSpec(f"unknown profile {spec.profile!r}: choose "
                                 f"{', '.join(PROFILES)}")
        return spec.profile, load_profile(spec.profile)
    source = spec.source or "profile"
    try:
        rules = tune.check_profile(spec.rules, source)
    except ValueError as exc:
        raise errors.BadSpec(f"--profile-file: {exc}", "nothing was changed") from None
    return str(rules.get("name", source)), dict(rules)


def plan_here(spec: Spec, rules: dict) -> tuple[str | None, Plan]:
    """The interface and the plan, from this node's settings now (call with the lock held
    when changing: what the audit reads becomes the snapshot's "previous" values); with a
    peer, the path to it probed as the audit does (no MTU it has not seen cross)."""
    interface = pick_interface(spec.interface, spec.peer)
    path = path_facts(spec.peer, spec.port, interface) if spec.peer else None
    return interface, tune.make_plan(run_audit(rules, interface, path), rules, interface)


def _meta(spec: Spec | RollbackSpec, started: str) -> JsonObject:
    return make_meta(list(spec.command_line), utc_start=started, utc_end=utc_now())


# --------------------------------------------------------------------------- plan


def plan(spec: Spec, progress: Progress | None = None) -> Document:
    """The plan ("tune-plan"); nothing is changed."""
    started = utc_now()
    name, rules = profile_of(spec)
    interface, found = plan_here(spec, rules)
    return tune.plan_document(found, name, interface, _meta(spec, started))


# --------------------------------------------------------------------------- apply


def save_snapshot(path: str, snapshot: Document) -> None:
    """The rollback file, new, private, never through a link; BadSpec if something is
    there already, TuneError if it cannot be written (nothing changed either way)."""
    try:
        tune.write_new_file(path, snapshot)
    except FileExistsError:
        raise errors.BadSpec(f"--rollback-file {path} exists; nothing was changed",
                             "give another --rollback-file") from None
    except OSError as exc:
        raise TuneError(f"cannot write the rollback file {path}: {exc.strerror or exc}; "
                        "nothing was changed") from None


def _reporter(verb: str, progress: Progress | None) -> tune.Report:
    def report(change: Change, value: str) -> None:
        if progress:
            progress(f"{verb} {change.key} = {value!r} (read back)")

    return report


def apply_failed(exc: ApplyFailed, path: str) -> TuneError:
    reason = str(exc).rstrip(".")
    msg = f"{exc.change.key}: {reason}; rolled back the {exc.rolled_back} change(s) applied before"
    if exc.restore_errors:
        msg += (f", but {len(exc.restore_errors)} restore(s) failed ({exc.restore_errors[0]}); "
                f"try 'beoperf tune --rollback {path}'")
    return TuneError(msg)


def apply(spec: Spec, progress: Progress | None = None) -> Document:
    """Snapshot, then apply the plan (root; under the lock).  The snapshot saved (no
    changes and no file when there is nothing to change)."""
    started = utc_now()
    require_root("--apply")
    name, rules = profile_of(spec)
    path = spec.rollback_file or default_rollback_path()
    with TuneLock():
        interface, found = plan_here(spec, rules)
        snapshot = tune.rollback_document(found.changes, name, interface,
                                          _meta(spec, started))
        if not found.changes:
            return snapshot
        save_snapshot(path, snapshot)
        if progress:
            progress(f"previous values saved to {path}")
        try:
            tune.apply_changes(found.changes, _reporter("set", progress))
        except ApplyFailed as exc:
            raise apply_failed(exc, path) from None
    return snapshot


# --------------------------------------------------------------------------- rollback


def rollback(spec: RollbackSpec, progress: Progress | None = None) -> Document:
    """Restore a rollback file: every entry checked before the lock is taken and anything
    is written (the file is input, not the node's state).  The document restored."""
    return rollback_counted(spec, progress)[0]


def rollback_counted(spec: RollbackSpec,
                     progress: Progress | None = None) -> tuple[Document, int]:
    """:func:`rollback`, and how many of the file's keys had their previous value already
    (left alone: never changed, or undone when the apply failed)."""
    path = spec.path
    try:
        doc = tune.read_rollback(path)
        elsewhere = tune.wrong_place(doc)
        if elsewhere and not spec.force:
            raise RollbackRefused(f"{path}: {elsewhere}; nothing was changed (--force "
                                  "restores it here anyway)")
        changes = tune.rollback_changes(path, doc.body)
    except TuneError as exc:
        raise BadRollbackFile(str(exc), "nothing was changed") from None
    require_root("--rollback")
    unchanged: list[Change] = []
    already = _reporter("already", progress)

    def left(change: Change, value: str) -> None:
        unchanged.append(change)
        already(change, value)

    with TuneLock():
        failures = tune.restore(reversed(changes), _reporter("restored", progress), left)
    if failures:
        raise RollbackFailed(f"{len(failures)} of {len(changes)} value(s) not restored: "
                             f"{'; '.join(failures)}")
    return doc, len(unchanged)


# --------------------------------------------------------------------------- procedure


def peer_measure(host: str, port: int,
                 max_time: float = measured.REPEAT_TIME) -> measured.Measure:
    """One repeat of the procedure: the median one-way time (us) of 16-byte ping-pongs on a
    new connection to the peer's ``beoperf serve`` (its errors are beoperf.errors)."""
    def measure() -> float:
        found = measure_size(host, port, measured.SIZE, max_time, MEASURE_TIMEOUT_S)
        return found.central_time_us()

    return measure


def check_procedure(spec: Spec) -> None:
    if not spec.peer:
        raise errors.BadSpec("--procedure needs --peer HOST (running 'beoperf serve')")
    if spec.repeats < MIN_REPEATS:
        raise errors.BadSpec(f"--repeats {spec.repeats}: give at least {MIN_REPEATS} "
                             "(with fewer no change can be shown to help)")
    if not 0 < spec.port < 65536:
        raise errors.BadSpec(f"--port {spec.port}: give 1..65535")
    if not 0 <= spec.margin < 1:
        raise errors.BadSpec(f"--margin {spec.margin:g}: give a fraction below 1 (e.g. 5%)")


def procedure_failed(exc: measured.ProcedureFailed, path: str) -> errors.BeoperfError:
    """The error to report: what stopped it (an unreachable or refusing peer keeps its own
    class, as in every command), what was rolled back, and any restore that failed."""
    reason = str(exc).rstrip(".") + f"; rolled back the {exc.rolled_back} change(s) applied"
    if exc.restore_errors:
        return ProcedureError(f"{reason}, but {len(exc.restore_errors)} restore(s) failed "
                              f"({exc.restore_errors[0]}); try 'beoperf tune --rollback "
                              f"{path}'")
    cause = exc.cause
    if cause is not None and not isinstance(cause, TuneError):
        return type(cause)(reason, cause.hint, cause.category)
    return ProcedureError(reason)


def _procedure_body(spec: Spec, name: str, interface: str | None, out: measured.Outcome,
                    path: str | None) -> JsonObject:
    assert spec.peer is not None
    return measured.body(out, profile=name, interface=interface, peer=spec.peer,
                         port=spec.port, repeats=spec.repeats, keep_all=spec.keep_all,
                         rollback_file=path, margin=spec.margin)


def procedure(spec: Spec, progress: Progress | None = None,
              on_block: Callable[[int], None] | None = None) -> Document:
    """The measured procedure (root; under the lock): warm-up, snapshot, one change at a
    time in blocks between blocks of the current state, kept only when it is shown to
    help, the combined state against Default.  No rows when there is
    nothing to change (and then no rollback file)."""
    started = utc_now()
    check_procedure(spec)
    require_root("--procedure")
    name, rules = profile_of(spec)
    assert spec.peer is not None
    path = spec.rollback_file or default_rollback_path()
    with TuneLock():
        interface, found = plan_here(spec, rules)
        if not found.changes:
            body = _procedure_body(spec, name, interface, measured.Outcome(), None)
            return documents.procedure(body, _meta(spec, started))
        measure = peer_measure(spec.peer, spec.port)
        if on_block is not None:  # told the plan's size first, then once per measurement
            on_block(measured.blocks_at_most(len(found.changes), spec.repeats))
            measure = measured.counted(measure, lambda: on_block(0))
        measured.warm_up(measure)  # the peer answers before anything is changed
        save_snapshot(path, tune.rollback_document(found.changes, name, interface,
                                                   _meta(spec, started)))
        if progress:
            progress(f"previous values saved to {path}; {len(found.changes)} change(s), "
                     f"{spec.repeats} blocks each between blocks of the current state")
        try:
            out = measured.run_changes(found.changes, measure, spec.repeats,
                                       spec.keep_all, progress, spec.margin)
        except measured.ProcedureFailed as exc:
            raise procedure_failed(exc, path) from None
    body = _procedure_body(spec, name, interface, out, path)
    return documents.procedure(body, _meta(spec, started))
