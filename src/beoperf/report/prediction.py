"""Text and Markdown of a prediction (kind "prediction") and a replay (kind "replay").

A prediction prints one line per network (predicted communication time, its interval,
the ratio to the first network, whether the method claims it, and with a compute time
the whole run's time and speedup), then which sizes dominate on each network and each
class's time; a replay prints each class's measured time (median and range over the
repeats) and the total."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from beoperf.analysis.predict import NetPrediction, Prediction
from beoperf.model.document import Document
from beoperf.model.prediction import PREDICTION, REPLAY
from beoperf.model.profile import Profile
from beoperf.report import conditions, renderer
from beoperf.report.answer import (
    Level,
    Line,
    answer,
    from_strings,
    lines_of,
    status_lines,
    text_block,
)
from beoperf.report.compare import _aligned
from beoperf.units import format_size, format_time


def secs(x: float | None) -> str:
    return "-" if x is None else format_time(x) if x > 0 else "0 s"


def profile_line(profile: Profile) -> str:
    return (f"profile {profile.source} ({profile.format}): {len(profile.entries)} message "
            f"class(es), {profile.messages():,} messages, {format_size(profile.bytes())}")


def network_rows(found: Prediction) -> tuple[list[str], list[list[str]]]:
    """The networks table: header and rows."""
    compute = found.compute_s
    head = ["network", "method", "predicted", "interval", "ratio", "claimed"]
    if compute is not None:
        head += [f"whole (+{secs(compute)} compute)", "speedup", "comm share"]
    rows = []
    for n in found.networks:
        method = n.model.method
        row = [n.model.name, method, secs(n.total_s), f"{secs(n.lo_s)}..{secs(n.hi_s)}",
               "-" if n.ratio is None else f"{n.ratio:.3f}",
               "yes" if n.claimed else ("n/a" if method == "given" else "no")]
        if compute is not None:
            whole = n.whole
            row += [secs(whole.whole_s if whole else None),
                    "-" if whole is None or whole.speedup is None else f"{whole.speedup:.3f}",
                    "-" if whole is None or whole.comm_fraction is None
                    else f"{whole.comm_fraction:.1%}"]
        rows.append(row)
    return head, rows


def dominant_line(n: NetPrediction) -> str:
    parts = [f"{c.size} B x {c.count:,} ({c.share:.0%})" for c in n.dominant_classes]
    return f"{n.model.name}: {', '.join(parts)}"


CLASS_HEAD = ["size B", "count", "pattern", "time", "interval", "share", "claimed"]


def class_rows(n: NetPrediction) -> list[list[str]]:
    out = []
    for c in n.classes:
        pattern = c.pattern + (f" x{c.concurrency}" if c.concurrency > 1 else "")
        out.append([str(c.size), f"{c.count:,}", pattern, secs(c.time_s),
                    f"{secs(c.lo_s)}..{secs(c.hi_s)}", f"{c.share:.1%}",
                    "yes" if c.claimed else f"no: {c.note}"])
    return out


@renderer(PREDICTION, "text")
def text(doc: Document, **_options: Any) -> str:
    b = Prediction.from_document(doc)
    head, rows = network_rows(b)
    top = text_block(lines_of(doc))
    lines = [f"beoperf predict: {profile_line(b.profile)}", *top, "",
             *_aligned(head, rows, {2, 4, 6, 7, 8}), "", "Sizes that dominate (80% of the "
             "time):", *(f"  {dominant_line(n)}" for n in b.networks)]
    first = b.networks[0]
    lines += ["", f"Per class on {first.model.name}:",
              *(f"  {line}" for line in _aligned(CLASS_HEAD, class_rows(first), {0, 1, 3, 5}))]
    lines += [f"  note: {note}" for note in b.profile.notes]
    lines.append("Times: the model's mean one-way time per message (see --help for the "
                 "method); interval: the model's residuals, not the link's noise.")
    return "\n".join(lines) + "\n"


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(head), line(["---"] * len(head)), *(line(r) for r in rows)]


@renderer(PREDICTION, "markdown")
def markdown(doc: Document, **_options: Any) -> str:
    b = Prediction.from_document(doc)
    head, rows = network_rows(b)
    out = ["# Predicted communication time", "", profile_line(b.profile), "",
           *_md_table(head, rows), "", "## Sizes that dominate", "",
           *(f"- {dominant_line(n)}" for n in b.networks)]
    for n in b.networks:
        out += ["", f"## {n.model.name}", "", *_md_table(CLASS_HEAD, class_rows(n))]
    out += ["", "## Method", "", *(f"- **{k}**: {v}" for k, v in b.method.items())]
    if b.warnings:
        out += ["", "## Warnings", "", *(f"- {w}" for w in b.warnings)]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- replay


REPLAY_HEAD = ["size B", "count", "pattern", "median", "min..max", "messages timed"]


def replay_rows(body: Mapping[str, Any]) -> list[list[str]]:
    return [[str(c["size"]), f"{c['count']:,}", c["pattern"], secs(c["median_s"]),
             f"{secs(c['min_s'])}..{secs(c['max_s'])}", f"{c['messages_timed']:,}"]
            for c in body["classes"]]


@renderer(REPLAY, "text")
def replay_text(doc: Document, **_options: Any) -> str:
    b = doc.body
    t = b["total_s"]
    lines = [f"beoperf replay: {profile_line(Profile.from_dict(b['profile']))}",
             f"  to {b['peer']} over {b['transport']}, {b['repeats']} repeat(s) ({b['status']})",
             *text_block(lines_of(doc)),
             "", *_aligned(REPLAY_HEAD, replay_rows(b), {0, 1, 3, 5}), "",
             f"total {secs(t['median'])} (each class's median over the repeats, summed); "
             f"{len(t['per_repeat'])} complete repeat(s) took {secs(t['min'])}.."
             f"{secs(t['max'])}", *conditions.text_lines(doc.meta, "")]
    return "\n".join(lines) + "\n"


@renderer(REPLAY, "markdown")
def replay_markdown(doc: Document, **_options: Any) -> str:
    b = doc.body
    return "\n".join([f"# Replay of {b['profile']['source']}", "",
                      profile_line(Profile.from_dict(b["profile"])),
                      "", *_md_table(REPLAY_HEAD, replay_rows(b)), "",
                      f"Total: {secs(b['total_s']['median'])} (each class's median over the "
                      "repeats, summed).",
                      "", b["method"]]) + "\n"


# --------------------------------------------------------------------------- the answer


@answer(PREDICTION)
def prediction_answer(doc: Document) -> list[Line]:
    """Networks the method does not claim (their model's error is too large to say),
    classes priced outside the measured sizes, the models' notes."""
    out = []
    for line in from_strings(Prediction.from_document(doc).warnings):
        if "not claimed" in line.text:
            out.append(Line(Level.IMPRECISE, line.text, "measure that network over the "
                                                        "profile's sizes (beoperf pingpong) "
                                                        "and predict from the run"))
        else:
            out.append(Line(Level.NOTE, line.text, line.todo, line.topic))
    return out


@answer(REPLAY)
def replay_answer(doc: Document) -> list[Line]:
    """A replay that did not complete, and its warnings."""
    b = doc.body
    return [*status_lines(b, "replay"), *from_strings(b["warnings"])]
