"""The documents of `beoperf tune` as text: the plan, what an apply saved or a rollback
restored, the measured procedure's table, and the files that make a plan persistent."""

from __future__ import annotations

import shlex
from typing import Any

from beoperf.model import narrow
from beoperf.model.audit import as_text
from beoperf.model.document import Document, JsonObject
from beoperf.model.tune import Procedure, Rollback, TunePlan, action_text
from beoperf.report import renderer
from beoperf.report.answer import Level, Line, answer, text_block
from beoperf.report.compare import impact_lines

NOTHING_TO_CHANGE = "nothing to change (no rollback file written)"
PERSIST_INSTALL = ("review them, then install: 90-beoperf.conf in /etc/sysctl.d/, "
                   "beoperf-tune.service in /etc/systemd/system/ (systemctl enable beoperf-tune)")


# --------------------------------------------------------------------------- the plan


def plan_lines(found: TunePlan) -> list[str]:
    changes, advice = found.changes, found.advice
    lines = [f"tune plan: profile {found.profile}, interface {found.interface or '(none)'}"
             f": {len(changes)} change(s), {len(advice)} advice only"]
    for i, c in enumerate(changes, 1):
        lines.append(f"  {i}. {c.key}: {c.current!r} -> {c.target!r}")
        lines.append(f"       apply:   {action_text(c.apply)}")
        lines.append(f"       restore: {action_text(c.restore)}")
    if advice:
        lines += ["", "Advice only (not changed by beoperf tune):"]
        lines += [f"  {a.key} = {as_text(a.value)}: {a.reason}"
                  + (f" [{a.command}]" if a.command else "") for a in advice]
    return lines


@renderer("tune-plan", "text")
def plan_text(doc: Document, **_options: Any) -> str:
    return "\n".join(plan_lines(TunePlan.from_document(doc))) + \
        "\n\nNothing was changed; apply with 'beoperf tune --apply' (as root)."


def persist_files(doc: Document) -> dict[str, str]:
    """Files that make a plan's changes survive a reboot: a sysctl.d drop-in for the
    sysctls and a systemd oneshot unit that re-applies the interface settings once the
    network is up (name -> content; none for a plan without changes)."""
    changes = TunePlan.from_document(doc).changes
    sysctls = [c for c in changes if c.check == "sysctl"]
    links = [c for c in changes if c.check != "sysctl"]
    out = {}
    if sysctls:
        lines = ["# written by 'beoperf tune --persist'; install in /etc/sysctl.d/"]
        lines += [f"{c.key} = {c.target}" for c in sysctls]
        out["90-beoperf.conf"] = "\n".join(lines) + "\n"
    if links:
        execs = [f"ExecStart={shlex.join(narrow.texts_or_empty(c.apply, 'argv'))}" for c in links]
        out["beoperf-tune.service"] = "\n".join([
            "# written by 'beoperf tune --persist'; install in /etc/systemd/system/, then",
            "# systemctl daemon-reload && systemctl enable beoperf-tune.service",
            "[Unit]", "Description=beoperf tune: interface settings",
            "Wants=network-online.target", "After=network-online.target", "",
            "[Service]", "Type=oneshot", "RemainAfterExit=yes", *execs, "",
            "[Install]", "WantedBy=multi-user.target", ""])
    return out


# --------------------------------------------------------------------------- rollback


@renderer("rollback", "text")
def rollback_text(doc: Document, *, saved_to: str | None = None,
                  restored_from: str | None = None, already: int = 0,
                  **_options: Any) -> str:
    """After --apply (``saved_to``: where the snapshot went) or --rollback
    (``restored_from``; ``already``: how many keys had their previous value and were left
    alone); else what the snapshot holds."""
    saved = Rollback.from_document(doc)
    changes = saved.changes
    if restored_from is not None:
        left = f"; {already} already had it" if already else ""
        return (f"restored {len(changes) - already} value(s) from {restored_from} (host "
                f"{saved.host}){left}")
    if saved_to is not None:
        if not changes:
            return NOTHING_TO_CHANGE
        return (f"applied {len(changes)} change(s); undo with "
                f"'beoperf tune --rollback {saved_to}'")
    lines = [f"rollback of {len(changes)} change(s) for host {saved.host}, network "
             f"namespace {saved.netns}, interface {saved.interface or '(none)'}"]
    return "\n".join(lines + [f"  {c.key}: restore {c.previous!r} "
                              f"({action_text(c.restore)})" for c in changes])


# --------------------------------------------------------------------------- procedure


def procedure_lines(found: Procedure) -> list[Line]:
    """The outcome first: what was kept and the combined effect against Default (OK),
    nothing kept (NOTE), and how to undo it all."""
    rows = found.rows
    if not rows:
        return [Line(Level.OK, "nothing to change: the node already meets the profile")]
    kept, path = found.kept, found.rollback_file
    undo = f"undo everything with 'beoperf tune --rollback {path}'" if path else ""
    if not kept:
        return [Line(Level.NOTE, "no change was shown to improve latency: nothing kept, the "
                                 "node is as it was", "more --repeats narrow each change's "
                                                      "interval")]
    out = [Line(Level.OK, f"kept {len(kept)} change(s): {', '.join(kept)}", undo)]
    combined = rows[-1]
    if combined.decision and combined.same_as is None:
        out.append(Line(Level.OK, f"combined against Default: {combined.decision}"))
    return out


@answer("procedure")
def procedure_answer(doc: Document) -> list[Line]:
    return procedure_lines(Procedure.from_document(doc))


def _first(keys: list[str]) -> str:
    return f"{', '.join(keys[:6])}{' ...' if len(keys) > 6 else ''}"


@answer("tune-plan")
def plan_answer(doc: Document) -> list[Line]:
    found = TunePlan.from_document(doc)
    changes, advice = found.changes, found.advice
    out = []
    if changes:
        out.append(Line(Level.WARN, f"{len(changes)} setting(s) to change: "
                                    f"{_first([c.key for c in changes])}",
                        "beoperf tune --apply (as root; a rollback file is written first)"))
    if advice:
        out.append(Line(Level.NOTE, f"{len(advice)} advice only (not changed by beoperf "
                                    f"tune): {_first([a.key for a in advice])}"))
    return out or [Line(Level.OK, "nothing to change")]


@answer("rollback")
def rollback_answer(doc: Document) -> list[Line]:
    saved = Rollback.from_document(doc)
    return [Line(Level.NOTE, f"a snapshot of {len(saved.changes)} value(s) on "
                             f"{saved.host}: 'beoperf tune --rollback FILE' restores "
                             "them")]


def _old_method(test: JsonObject) -> str:
    """The method of a version 1 procedure (whose test has no statement): Mann-Whitney U
    on the repeats, with a least improvement."""
    return (f"Kept when two-sided Mann-Whitney U p < {narrow.num_at(test, 'alpha')} on the "
            "repeats against the current kept state and the mean is more than "
            f"{narrow.num_at(test, 'min_improvement_pct') / 100:.0%} lower.")


@renderer("procedure", "text")
def procedure_text(doc: Document, **_options: Any) -> str:
    """The outcome, the tuning-study table (as ``compare --format impact``), each change's
    decision and the method."""
    found = Procedure.from_document(doc)
    rows = found.rows
    if not rows:
        return NOTHING_TO_CHANGE
    lines = impact_lines([(r.shown_label, r.mean_us, r.variance_us2, r.impact_pct)
                          for r in rows])
    verdicts = "; ".join(f"{r.label}: {r.decision}" for r in rows if r.decision)
    path, method = found.rollback_file, found.statement or _old_method(found.test)
    unit = "blocks" if found.statement is not None else "repeats"
    notes = [
        f"Latency: mean and variance (ddof=1) of {found.repeats} {unit}, each the median "
        f"one-way time at {found.size} B, us; impact = (Default mean - mean) / Default "
        "mean.",
        f"Changes: {verdicts}." if verdicts else "",
        method,
        f"Undo everything with 'beoperf tune --rollback {path}'." if path else "",
    ]
    head = text_block(procedure_lines(found)) if found.statement is not None else []
    return "\n".join([*head, *([""] if head else []), *lines, "", *(n for n in notes if n)])
