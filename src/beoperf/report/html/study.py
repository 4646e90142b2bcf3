"""A study in the HTML report: the verdict lines, the effects against Default, the impact
table of each headline figure, one chart per curve measurement with one line per
configuration (the papers' throughput graph with one line per MTU), a strip of every
block's figure against its index with the Default blocks joined (so a drift shows), how
each host ended and the method."""

from __future__ import annotations

import json
from typing import Any

from beoperf import units
from beoperf.analysis import study as analysis
from beoperf.model.document import Document
from beoperf.model.study import Impact, Study
from beoperf.model.study_rollback import StudyRollback
from beoperf.report import renderer
from beoperf.report.html import svg
from beoperf.report.html.markup import (
    Markup,
    bullet_list,
    code,
    esc,
    figure,
    heading,
    join,
    num,
    pairs,
    para,
    table,
)
from beoperf.report.study import figure_text, impact_caption


@renderer("study", "title")
def study_title(doc: Document, **_options: Any) -> str:
    s = Study.from_document(doc)
    hosts = ", ".join(h.name for h in s.hosts[:4]) + (" ..." if len(s.hosts) > 4 else "")
    return (f"Study {s.name} ({s.design}, {s.status}) on {hosts or 'no host'}: "
            f"{len(s.configurations)} configurations, {len(s.blocks)} blocks")


PLAIN_UNITS = ("bit/s", "us", "µs")  # shown scaled with their unit; others as numbers


def _shown(value: float | None, unit: str, key: str) -> Markup:
    """A figure marked with where it is stored; a unit the report does not scale is left
    to the caption (the number alone)."""
    if unit in PLAIN_UNITS:
        return num(value, figure_text(value, unit), key)
    return num(value, "n/a" if value is None else f"{value:.4g}", key)


def impact_table(s: Study, i: int, found: Impact) -> Markup:
    rows = []
    for j, r in enumerate(found.rows):
        k = f"body.impact.{i}.rows.{j}"
        rows.append([r.configuration, _shown(r.mean, found.unit, f"{k}.mean"),
                     _shown(r.sd, found.unit, f"{k}.sd"), num(r.n, str(r.n), f"{k}.n"),
                     "-" if r.impact_pct is None else
                     num(r.impact_pct, f"{r.impact_pct:+.2f}%", f"{k}.impact_pct")])
    classes = ["base" if r.impact_pct is None else None for r in found.rows]
    return table(["configuration", "mean", "deviation (sd)", "blocks", "impact"], rows,
                 numeric=[1, 2, 3, 4], caption=impact_caption(found), row_classes=classes,
                 empty="no block of this figure was measured")


def _ratio_cells(effect: dict, key: str) -> list[Any]:
    out: list[Any] = []
    for field in ("ratio", "low", "high"):
        value = effect.get(field)
        out.append(num(value, f"{value:.4f}", f"{key}.{field}")
                   if isinstance(value, float | int) else "-")
    return out


def main_label(term: str) -> str:
    """'mtu=9000' -> 'MTU 9000 (main effect)'."""
    name, _, label = term.partition("=")
    return f"{analysis.shown_factor(name)} {label} (main effect)"


def effects_table(s: Study) -> Markup:
    rows = []
    entries = [(f"body.effects.{k}", e) for k, e in enumerate(s.effects)]
    if s.combined is not None:
        entries += [(f"body.combined.effects.{k}", e) for k, e in enumerate(s.combined.effects)]
    entries += [(f"body.main_effects.{k}", e) for k, e in enumerate(s.main_effects)]
    mains = {id(e) for e in s.main_effects}
    for key, e in entries:
        eff = analysis.effect_value(e)
        label = main_label(e.config) if id(e) in mains else s.label_of(e.config)
        rows.append([label, analysis.figure_name(e.figure), e.pair or "all",
                     *_ratio_cells(e.effect, f"{key}.effect"),
                     analysis.effect_words(eff), e.against,
                     num(e.blocks, str(e.blocks), f"{key}.blocks")])
    return table(["configuration", "figure", "pair", "ratio", "low", "high", "verdict",
                  "against", "blocks"], rows, numeric=[3, 4, 5, 8],
                 caption="Effects (candidate / baseline, interval at the corrected level)",
                 empty="no configuration was judged (nothing measured after the warm-up)")


def curve_charts(s: Study) -> list[Markup]:
    """One chart per curve measurement: one line per configuration, log2 sizes."""
    out = []
    for name in dict.fromkeys(c.measurement for c in s.curves):
        lines: list[svg.Line] = []
        for i, c in enumerate(s.curves):
            if c.measurement != name or not c.points:
                continue
            k = len(lines)
            lines.append(svg.Line(
                s.label_of(c.config), [x for x, _ in c.points], [y for _, y in c.points],
                [f"{s.label_of(c.config)}: {units.size_tick(x)} B, {figure_text(y, c.unit)}"
                 for x, y in c.points], color=k,
                keys=[f"body.curves.{i}.points.{j}.1" for j in range(len(c.points))],
                raw=[y for _, y in c.points]))
        if not lines:
            continue
        xs = [x for ln in lines for x in ln.x]
        ys = [float(y) for ln in lines for y in ln.y if y is not None]
        unit = next(c.unit for c in s.curves if c.measurement == name)
        lo, hi = svg.padded(min(xs), max(xs), True)
        x = svg.Axis("message size (bytes; K = 1024)", lo, hi, log=True, base2=True,
                     tick_text=units.size_tick)
        y = svg.Axis(unit, 0.0, max(ys) * 1.05 or 1.0, tick_text=_tick(unit))
        chart = svg.chart(f"{name}: one line per configuration", x, y, lines)
        out.append(figure(chart, join([svg.legend(lines), esc(
            f"{name} at every size, one line per configuration measured (its curve from "
            f"its blocks); {unit} against the message size on a log2 axis.")]),
            kind="study-curve"))
    return out


def _tick(unit: str) -> Any:
    if unit == "bit/s":
        return lambda v: units.format_rate(v, 3) if v else "0"
    return lambda v: f"{v:g}"


def block_strips(s: Study) -> list[Markup]:
    """Per headline figure: every block's value against its index, Default joined by a
    line (a drift shows as its slope), each other configuration as dots."""
    out = []
    base = s.default_id()
    for f in s.figures():
        lines: list[svg.Line] = []
        order = [base, *(c.id for c in s.configurations if c.id != base)]
        for cid in order:
            pts = [(i, b) for i, b in enumerate(s.blocks)
                   if b.config == cid and b.status == "ok" and f.key in b.figures]
            if not pts:
                continue
            lines.append(svg.Line(
                s.label_of(cid), [b.index for _, b in pts], [b.figures[f.key] for _, b in pts],
                [f"block {b.index}{' (warm-up)' if b.warmup else ''}, {s.label_of(cid)}: "
                 f"{figure_text(b.figures[f.key], f.unit)}" for _, b in pts],
                color=len(lines), keys=[f"body.blocks.{i}.figures.{f.key}" if "." not in f.key
                                        else None for i, _ in pts],
                raw=[b.figures[f.key] for _, b in pts], dots_only=cid != base))
        if not lines:
            continue
        idx = [b.index for b in s.blocks]
        vals = [float(v) for ln in lines for v in ln.y if v is not None]
        lo, hi = min(vals), max(vals)
        pad = (hi - lo) * 0.1 or hi * 0.05
        x = svg.Axis("block (in the order measured)", min(idx) - 0.5, max(idx) + 0.5)
        y = svg.Axis(f.unit, lo - pad, hi + pad, tick_text=_tick(f.unit))
        chart = svg.chart(f"Every block of {f.key}", x, y, lines)
        drift = next((d for d in s.drift if d.figure == f.key), None)
        said = ("" if drift is None or drift.over_study_pct is None else
                f" Default drifted {drift.over_study_pct:+.1f}% over the study "
                f"({drift.slope_pct_per_block:+.2f}% a block, spread ±{drift.spread_pct:.1f}%).")
        out.append(figure(chart, join([svg.legend(lines), esc(
            f"Each block's {f.key} against its position in the study; the Default blocks "
            "are joined, so a drift of the machine shows as their slope, each other "
            f"configuration is a dot between two Default blocks.{said}")]),
            kind="study-blocks"))
    return out


def hosts_table(s: Study) -> Markup:
    rows = [[h.name, h.role, h.reach, h.data_address or "-", h.interface or "-",
             h.end.state if h.end else "-", (h.end.detail or "-") if h.end else "-",
             code(h.end.restore_command) if h.end and h.end.restore_command else "-"]
            for h in s.hosts]
    return table(["host", "role", "reach", "data address", "interface", "end", "detail",
                  "restore command"], rows, caption="How each host ended",
                 empty="no host (nothing was changed)")


@renderer("study", "html")
def study_html(doc: Document, **_options: Any) -> str:
    s = Study.from_document(doc)
    facts = pairs([("design", s.design), ("status", s.status + (f" ({s.status_reason})"
                                                                  if s.status_reason else "")),
                   ("applied", s.applied), ("pairs", ", ".join(f"{a} > {b}" for a, b in s.pairs)),
                   ("repeats", s.schedule.repeats),
                   ("precision", None if s.schedule.precision is None else
                    f"±{100 * s.schedule.precision:g}%, up to {s.schedule.max_repeats} "
                    "blocks of a configuration"),
                   ("seed", s.schedule.seed),
                   ("margin", f"±{100 * s.method.margin:g}%"),
                   ("kept", ", ".join(f"{k.factor} {k.level}" for k in s.kept) or None)])
    return join([
        facts,
        heading("Verdicts"),
        bullet_list(s.verdicts) if s.verdicts else para("No level was judged.", "none"),
        *(impact_table(s, i, found) for i, found in enumerate(s.impact)),
        effects_table(s),
        *curve_charts(s),
        *block_strips(s),
        hosts_table(s),
        para(f"Method: {s.method.statement}", "none")])


@renderer("study-rollback", "title")
def study_rollback_title(doc: Document, **_options: Any) -> str:
    saved = StudyRollback.from_document(doc)
    return (f"Study {saved.study_id}: snapshot of {len(saved.entries)} factor(s) on "
            f"{saved.host}, interface {saved.interface or '(none)'}")


@renderer("study-rollback", "html")
def study_rollback_html(doc: Document, **_options: Any) -> str:
    """What `beoperf study restore FILE` puts back on the host, in the order it does."""
    saved = StudyRollback.from_document(doc)
    rows = [[str(i), e.factor, code(json.dumps(e.saved, sort_keys=True)[:300])]
            for i, e in enumerate(saved.restore_order(), 1)]
    return join([
        pairs([("study", saved.study_id), ("host", saved.host),
               ("network namespace", saved.netns), ("interface", saved.interface or "(none)"),
               ("lease", f"{saved.lease_s:g} s")]),
        table(["restored", "factor", "snapshot"], rows, numeric=[0],
              caption="What 'beoperf study restore FILE' puts back, in this order",
              empty="no factor was saved"),
        table(["file", "sha256"], [[f.name, f.sha256] for f in saved.files],
              caption="Saved files (checked by their sha256 before a restore)",
              empty="no file was saved")])
