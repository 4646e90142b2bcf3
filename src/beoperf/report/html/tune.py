"""The documents of `beoperf tune` in the HTML report: the plan (changes in apply order,
how each is applied and restored, the advice left to a person), the rollback snapshot
(what --rollback restores) and the measured procedure (the impact table: one row per
configuration, every repeat's figure, the test and the verdict)."""

from __future__ import annotations

from typing import Any

from beoperf.model import narrow
from beoperf.model.audit import as_text
from beoperf.model.document import Document, JsonObject
from beoperf.model.tune import Procedure, Rollback, TunePlan, action_text
from beoperf.report import renderer
from beoperf.report.html.markup import (
    Markup,
    code,
    heading,
    join,
    num,
    pairs,
    para,
    status_mark,
    table,
)


@renderer("tune-plan", "title")
def plan_title(doc: Document, **_options: Any) -> str:
    b = TunePlan.from_document(doc)
    return (f"Tune plan for {doc.meta.get('host', '?')}: profile {b.profile}, "
            f"{len(b.changes)} change(s), {len(b.advice)} advice only")


@renderer("tune-plan", "html")
def plan_html(doc: Document, **_options: Any) -> str:
    b = TunePlan.from_document(doc)
    rows = [[i, c.key, c.interface or "-", c.current, c.target, code(action_text(c.apply)),
             code(action_text(c.restore))] for i, c in enumerate(b.changes, 1)]
    advice = [[status_mark(a.status), a.key, as_text(a.value), a.reason,
               code(a.command) if a.command else "-"] for a in b.advice]
    return join([
        pairs([("profile", b.profile), ("interface", b.interface or "(none)")]),
        table(["#", "setting", "interface", "now", "target", "apply", "restore"], rows,
              numeric=[0], caption="Changes, in the order --apply makes them"),
        para("Nothing was changed by this plan; 'beoperf tune --apply' (as root) applies "
             "them one at a time, reading each back, after saving a rollback file.", "none"),
        heading("Advice only (not changed by beoperf tune)"),
        table(["verdict", "setting", "value", "why", "command"], advice)])


@renderer("rollback", "title")
def rollback_title(doc: Document, **_options: Any) -> str:
    b = Rollback.from_document(doc)
    return (f"Rollback snapshot of {len(b.changes)} change(s) on {b.host}, "
            f"interface {b.interface or '(none)'}")


@renderer("rollback", "html")
def rollback_html(doc: Document, **_options: Any) -> str:
    b = Rollback.from_document(doc)
    rows = [[c.key, c.interface or "-", c.previous, c.target, code(action_text(c.restore))]
            for c in b.changes]
    return join([
        pairs([("host", b.host), ("network namespace", b.netns), ("profile", b.profile),
               ("interface", b.interface or "(none)")]),
        table(["setting", "interface", "previous (restored)", "set to", "restore action"],
              rows, caption="Values this snapshot restores (in reverse order of applying)")])


@renderer("procedure", "title")
def procedure_title(doc: Document, **_options: Any) -> str:
    b = Procedure.from_document(doc)
    return (f"Tuning procedure on {doc.meta.get('host', '?')} against {b.peer}: "
            f"{len(b.rows)} configurations, kept {', '.join(b.kept) or 'none'}")


def _old_method(test: JsonObject) -> str:
    """The method of a version 1 procedure (no statement in its test)."""
    least = narrow.opt_num_at(test, "min_improvement_pct")
    return (f"A change is kept when two-sided Mann-Whitney U p < "
            f"{narrow.num_at(test, 'alpha')} on the repeats against the current kept state "
            f"and the mean is more than {2 if least is None else least:g}% lower.")


def _k(i: int, field: str) -> str:
    return f"body.rows.{i}.{field}"


@renderer("procedure", "html")
def procedure_html(doc: Document, **_options: Any) -> str:
    b = Procedure.from_document(doc)
    rows = []
    for i, r in enumerate(b.rows):
        rows.append([r.shown_label,
                     num(r.mean_us, f"{r.mean_us:.2f}", _k(i, "mean_us"), unit="µs"),
                     num(r.variance_us2, f"{r.variance_us2:.2f}", _k(i, "variance_us2"),
                         unit="µs²"),
                     "-" if r.impact_pct is None else
                     num(r.impact_pct, f"{r.impact_pct:.2f}%", _k(i, "impact_pct")),
                     r.verdict or "-", r.decision or "-"])
    classes = ["base" if r.verdict == "baseline" else None for r in b.rows]
    method = b.statement or _old_method(b.test)
    return join([
        table(["configuration", "latency mean µs", "variance µs²", "impact", "verdict",
               "decision"], rows, numeric=[1, 2, 3], row_classes=classes,
              caption="Impact of each change, measured one at a time"),
        para(f"Latency: mean and variance (ddof=1) of {b.repeats} measurements, each the "
             f"median one-way time of {b.size}-byte messages to {b.peer} port "
             f"{b.port}; impact = (Default mean - mean) / Default mean. {method}", "none"),
        para(f"Undo everything with 'beoperf tune --rollback {b.rollback_file}'."
             if b.rollback_file else "No rollback file.", "none"),
        Markup("")])
