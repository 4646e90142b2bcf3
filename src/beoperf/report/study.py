"""The study document as text, Markdown and CSV, and its answer.

The answer comes first: a host left changed (FAIL, with the command that restores it), a
level not measured, a failed block or a drift (WARN), an effect that cannot be told
(IMPRECISE, "more --repeats"), else "N configurations on H hosts; all restored" (OK).
Then one verdict line per level, the impact table of each headline figure (the tuning
papers' ``Configuration | mean (deviation) | Impact``), how each host ended and the
method, with the margin it judged by.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from beoperf import units
from beoperf.analysis import effect
from beoperf.analysis import study as analysis
from beoperf.model.document import Document
from beoperf.model.study import EffectEntry, Impact, Study
from beoperf.report import renderer, tables
from beoperf.report.answer import Level, Line, answer, lines_of, markdown_block, text_block

RESTORED = ("restored", "restored-by-agent", "not-changed")
LEFT_CHANGED = ("unreachable", "restore-failed")


def figure_text(value: float | None, unit: str) -> str:
    """A figure with its unit, scaled for a reader: '941.2 Mbit/s', '25.10 us'."""
    if value is None:
        return "n/a"
    if unit == "bit/s":
        return units.format_rate(value)
    if unit in ("us", "µs"):
        return f"{value:.2f} us"
    return f"{value:.4g} {unit}".rstrip()


def impact_caption(found: Impact) -> str:
    sign = ("(mean - Default) / Default, a rate" if found.higher_is_better else
            "(Default - mean) / Default, a time")
    return f"{found.figure} ({found.unit}): impact = {sign}; positive is an improvement"


# --------------------------------------------------------------------------- the answer


def _host_lines(study: Study) -> list[Line]:
    out = []
    for h in study.hosts:
        if h.end is not None and h.end.state in LEFT_CHANGED:
            detail = f": {h.end.detail}" if h.end.detail else ""
            out.append(Line(Level.FAIL, f"host {h.name} {h.end.state}{detail}",
                            h.end.restore_command or "restore it by hand from its "
                                                     "rollback file",
                            topic="hosts left changed"))
    return out


def _level_lines(study: Study) -> list[Line]:
    out = []
    for f in study.factors:
        for lv in f.levels:
            if not lv.default and lv.status != "measured":
                why = f": {lv.why}" if lv.why else ""
                out.append(Line(Level.WARN, f"{analysis.shown_factor(f.name)} {lv.label} "
                                            f"{lv.status}, not measured{why}",
                                topic="levels not measured"))
    return out


def _block_lines(study: Study) -> list[Line]:
    failed = [b for b in study.blocks if b.status == "failed"]
    if not failed:
        return []
    first = failed[0]
    return [Line(Level.WARN, f"{len(failed)} of {len(study.blocks)} block(s) failed (first: "
                             f"block {first.index}, {study.label_of(first.config)}: "
                             f"{first.error or 'no reason given'}); their triples are left "
                             "out", topic="failed blocks")]


def _imprecise_lines(study: Study) -> list[Line]:
    unsure = [e for e in study.effects if e.pair is None
              and e.effect.get("verdict") == effect.CANNOT_TELL]
    if not unsure:
        return []
    names = sorted({f"{study.label_of(e.config)} ({analysis.figure_name(e.figure)})"
                    for e in unsure})
    s = study.schedule
    todo = (f"more --repeats (now {s.repeats}) narrow each interval; --precision goes "
            "on until the deciding figure's is narrow enough" if s.precision is None else
            f"more --repeats (now {s.repeats}) or --max-repeats (now {s.max_repeats}) "
            "narrow each interval")
    return [Line(Level.IMPRECISE, f"cannot tell: {', '.join(names)}", todo,
                 topic="effects that cannot be told")]


def study_lines(study: Study) -> list[Line]:
    """The answer of a study, in the order of ``answer.Level``."""
    out = _host_lines(study)
    if study.status == "failed":
        out.append(Line(Level.FAIL, f"study failed: {study.status_reason or 'no reason'}"))
    elif study.status in ("partial", "interrupted"):
        out.append(Line(Level.WARN, f"study {study.status}: "
                                    f"{study.status_reason or 'no reason given'}"))
    out += _level_lines(study) + _block_lines(study)
    out += [Line(Level.WARN, w, topic="drift") for w in study.warnings]
    out += _imprecise_lines(study)
    if not study.applied:
        out.append(Line(Level.NOTE, f"plan only: {len(study.configurations)} "
                                    f"configuration(s) on {len(study.hosts)} host(s), "
                                    "nothing changed", "add --apply to run it"))
        return out
    if study.kept:
        kept = ", ".join(f"{analysis.shown_factor(k.factor)} {k.level}" for k in study.kept)
        out.append(Line(Level.OK, f"kept: {kept}",
                        "undo with the restore command of each host below"))
    ends = [h.end.state for h in study.hosts if h.end is not None]
    if not any(s in LEFT_CHANGED for s in ends):
        all_back = "all restored" if all(s in RESTORED for s in ends) else "none left changed"
        out.append(Line(Level.OK, f"{len(study.configurations)} configurations on "
                                  f"{len(study.hosts)} host(s); {all_back}"))
    return out


@answer("study")
def study_answer(doc: Document) -> list[Line]:
    return study_lines(Study.from_document(doc))


# --------------------------------------------------------------------------- tables


def impact_cells(found: Impact) -> list[list[str]]:
    out = []
    for r in found.rows:
        sd = "" if r.sd is None else f" ({figure_text(r.sd, found.unit)})"
        out.append([r.configuration, figure_text(r.mean, found.unit) + sd, str(r.n),
                    "-" if r.impact_pct is None else f"{r.impact_pct:+.2f}%"])
    return out


IMPACT_HEAD = ("Configuration", "mean (deviation)", "blocks", "Impact")


def host_cells(study: Study) -> list[list[str]]:
    return [[h.name, h.role, h.reach, h.data_address or "-",
             h.end.state if h.end else "-", (h.end.detail or "") if h.end else "",
             (h.end.restore_command or "") if h.end else ""] for h in study.hosts]


HOST_HEAD = ("host", "role", "reach", "data address", "end", "detail", "restore command")


def headline(study: Study) -> str:
    hosts = ", ".join(h.name for h in study.hosts) or "no host"
    return (f"study {study.name} ({study.design}, {study.status}"
            f"{', applied' if study.applied else ', plan only'}) on {hosts}: "
            f"{len(study.configurations)} configurations, {len(study.blocks)} blocks")


def pair_lines(study: Study) -> list[str]:
    """Each pair's own verdicts, beneath the headline ones (with several pairs only)."""
    found = [e for e in study.effects if e.pair is not None]
    if not found:
        return []
    return ["", "Per pair:", *(f"  {e.pair}: {study.label_of(e.config)}: "
                               f"{analysis.figure_name(e.figure)} "
                               f"{analysis.effect_words(analysis.effect_value(e))}"
                               for e in found)]


@renderer("study", "text")
def study_text(doc: Document, **_options: Any) -> str:
    """The answer, the verdict lines, the impact tables, each host's end, the method."""
    study = Study.from_document(doc)
    lines = [*text_block(lines_of(doc)), "", headline(study), ""]
    lines += ["Verdicts:", *(f"  {v}" for v in study.verdicts or ["none (nothing measured)"])]
    lines += pair_lines(study)
    for found in study.impact:
        lines += ["", impact_caption(found),
                  *tables.aligned(IMPACT_HEAD, impact_cells(found), {1, 2, 3}, gap="   ")]
    if study.hosts:
        lines += ["", "Hosts:", *tables.aligned(HOST_HEAD, host_cells(study), set())]
    lines += ["", f"Method: {study.method.statement}"]
    return "\n".join(lines) + "\n"


@renderer("study", "markdown")
def study_markdown(doc: Document, **_options: Any) -> str:
    study = Study.from_document(doc)
    lines = [f"## {headline(study)}", "", *markdown_block(lines_of(doc)), "### Verdicts", ""]
    lines += [f"- {v}" for v in study.verdicts or ["none (nothing measured)"]]
    lines += [f"- {t.strip()}" if t.startswith("  ") else t for t in pair_lines(study)]
    for found in study.impact:
        lines += ["", f"### {impact_caption(found)}", "",
                  *tables.markdown(IMPACT_HEAD, impact_cells(found), {1, 2, 3})]
    if study.hosts:
        lines += ["", "### Hosts", "", *tables.markdown(HOST_HEAD, host_cells(study), set())]
    lines += ["", "### Method", "", study.method.statement]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- csv

CSV_HEAD = ("config", "configuration", "levels", "figure", "unit", "n", "mean", "sd",
            "ratio", "low", "high", "verdict", "against")


def _headline_effects(study: Study) -> dict[tuple[str, str], EffectEntry]:
    found = [*study.effects, *(study.combined.effects if study.combined else [])]
    return {(e.config, e.figure): e for e in found if e.pair is None}


def _csv_num(value: float | None) -> str:
    return "" if value is None else repr(value)


def effect_rows(study: Study) -> list[list[str]]:
    """A row per configuration x headline figure: its blocks' mean and sd and its effect
    against its baseline (none for Default)."""
    effects = _headline_effects(study)
    rows = []
    for found in study.impact:
        figure = study.figure(found.figure)
        for config in study.configurations:
            row = next((r for r in found.rows if r.configuration == config.label), None)
            e = effects.get((config.id, found.figure))
            eff = analysis.effect_value(e) if e is not None else None
            levels = ";".join(f"{k}={v}" for k, v in config.levels.items())
            rows.append([config.id, config.label, levels, found.figure,
                         figure.unit if figure else found.unit,
                         str(row.n) if row else "0", _csv_num(row.mean if row else None),
                         _csv_num(row.sd if row else None),
                         *(_csv_num(getattr(eff, k)) if eff else "" for k in
                           ("ratio", "low", "high")),
                         eff.verdict if eff else "", e.against if e else ""])
    for e in study.main_effects:
        eff = analysis.effect_value(e)
        name, _, label = e.config.partition("=")
        figure = study.figure(e.figure)
        rows.append([e.config, f"{analysis.shown_factor(name)} {label} (main effect)",
                     e.config, e.figure, figure.unit if figure else "", str(e.blocks), "", "",
                     *(_csv_num(getattr(eff, k)) for k in ("ratio", "low", "high")),
                     eff.verdict, e.against])
    return rows


def block_rows(study: Study, keys: Sequence[str]) -> list[list[str]]:
    return [[str(b.index), b.config, study.label_of(b.config), "yes" if b.warmup else "no",
             b.status, b.utc_start or "", repr(b.duration_s), repr(b.apply_s),
             *(_csv_num(b.figures.get(k)) for k in keys), b.error or ""]
            for b in sorted(study.blocks, key=lambda b: b.index)]


@renderer("study", "csv")
def study_csv(doc: Document, **_options: Any) -> str:
    """Two tables, a blank line between: the effects (a row per configuration x figure),
    then the blocks (a row per block, a column per figure)."""
    study = Study.from_document(doc)
    keys = [f.key for f in study.figures()]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEAD)
    writer.writerows(effect_rows(study))
    writer.writerow([])
    writer.writerow(["block", "config", "configuration", "warmup", "status", "utc_start",
                     "duration_s", "apply_s", *keys, "error"])
    writer.writerows(block_rows(study, keys))
    return buf.getvalue()
