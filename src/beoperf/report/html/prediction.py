"""Predictions and replays in the HTML report: per network the predicted communication
time with its interval, its ratio to the first network, whether the method claims it,
the whole run's time and speedup with a compute time; the sizes that dominate; each
message class's time; the model each network was priced with.  A replay: each class's
measured time over the repeats, and the total."""

from __future__ import annotations

from typing import Any

from beoperf.analysis.predict import NetPrediction, Prediction, WholeRun
from beoperf.model.document import Document
from beoperf.model.prediction import PREDICTION, REPLAY
from beoperf.model.profile import Profile
from beoperf.report import renderer
from beoperf.report.html import svg
from beoperf.report.html.markup import (
    Markup,
    bullet_list,
    details,
    esc,
    figure,
    heading,
    join,
    num,
    pairs,
    para,
    table,
    tag,
)
from beoperf.report.html.pingpong import time_text
from beoperf.report.prediction import profile_line, secs
from beoperf.units import format_rate, format_size


def _k(i: int, field: str) -> str:
    return f"body.networks.{i}.{field}"


@renderer(PREDICTION, "title")
def title(doc: Document, **_options: Any) -> str:
    b = Prediction.from_document(doc)
    nets = b.networks
    return (f"Prediction for {b.profile.source} on {len(nets)} network"
            f"{'s' if len(nets) > 1 else ''}")


def _whole_cells(i: int, whole: WholeRun | None) -> list[Markup | str]:
    """The whole run's time, speedup and communication share (with a compute time)."""
    if whole is None:
        return [num(None, secs(None), _k(i, "whole_s")), num(None, "-", _k(i, "speedup")), "-"]
    return [num(whole.whole_s, secs(whole.whole_s), _k(i, "whole_s")),
            num(whole.speedup, f"{whole.speedup:.3f}" if whole.speedup else "-",
                _k(i, "speedup")),
            f"{whole.comm_fraction:.1%}" if whole.comm_fraction is not None else "-"]


def networks_table(b: Prediction) -> Markup:
    compute = b.compute_s
    head = ["network", "method", "predicted", "interval", "ratio", "claimed"]
    if compute is not None:
        head += [f"whole run (+{secs(compute)} compute)", "speedup", "communication share"]
    rows = []
    for i, n in enumerate(b.networks):
        method = n.model.method
        claimed = tag("span", "yes" if n.claimed else "n/a (given)"
                      if method == "given" else "no", title=n.claim_reason)
        row = [n.model.name, method, num(n.total_s, secs(n.total_s), _k(i, "total_s")),
               f"{secs(n.lo_s)}..{secs(n.hi_s)}",
               num(n.ratio, f"{n.ratio:.3f}" if n.ratio is not None else "-",
                   _k(i, "ratio")), claimed]
        if compute is not None:
            row += _whole_cells(i, n.whole)
        rows.append(row)
    return table(head, rows, numeric=[2, 4, 6, 7, 8],
                 caption="Predicted communication time per network (ratio: to the first)")


def totals_chart(b: Prediction) -> Markup:
    nets = b.networks
    tips = [f"{n.model.name}: {secs(n.total_s)} (interval {secs(n.lo_s)}.."
            f"{secs(n.hi_s)}); ratio {n.ratio:.3f}" if n.ratio is not None
            else n.model.name for n in nets]
    return svg.bars("Predicted communication time", [n.model.name for n in nets],
                    [n.total_s for n in nets], "communication time (bars from 0)", tips, secs,
                    keys=[_k(i, "total_s") for i in range(len(nets))])


def classes_table(i: int, n: NetPrediction) -> Markup:
    rows, classes = [], []
    for j, c in enumerate(n.classes):
        pattern = c.pattern + (f" x{c.concurrency}" if c.concurrency > 1 else "")
        rows.append([c.label or "", num(c.size, str(c.size), _k(i, f"classes.{j}.size")),
                     f"{c.count:,}", pattern,
                     num(c.time_s, secs(c.time_s), _k(i, f"classes.{j}.time_s")),
                     f"{secs(c.lo_s)}..{secs(c.hi_s)}",
                     num(c.share * 100, f"{c.share:.1%}"), f"piece {c.piece + 1}",
                     "yes" if c.claimed else f"no: {c.note}"])
        classes.append("warn" if not c.claimed and n.model.method != "given" else None)
    return table(["site", "size B", "count", "pattern", "time", "interval", "share", "model",
                  "claimed"], rows, numeric=[1, 2, 4, 6], row_classes=classes)


def model_table(n: NetPrediction) -> Markup:
    m = n.model
    rows = [[k + 1, f"{format_size(p.first_size)}..{format_size(p.last_size)}",
             time_text(p.alpha_us),
             format_rate(8e6 / p.beta_us_per_byte) if p.beta_us_per_byte > 0 else "-",
             f"{p.lo_rel:+.1%}..{p.hi_rel:+.1%}", p.points,
             "-" if p.wire_fraction is None else f"{p.wire_fraction:.2f}"]
            for k, p in enumerate(m.pieces)]
    measured = m.measured
    return join([table(["piece", "sizes", "alpha", "1/beta", "residuals", "points",
                        "wire fraction"],
                       rows, numeric=[0, 2, 3, 5]),
                 para(f"Source: {m.source}"
                      + (f"; fitted on {measured[0]}..{measured[1]} B" if measured else "")
                      + (f"; saturation point {format_size(m.saturation_size)}"
                         if m.saturation_size else "") + ".", "none"),
                 bullet_list(m.notes) if m.notes else Markup("")])


def dominant(n: NetPrediction) -> str:
    return ", ".join(f"{c.size} B x {c.count:,} ({c.share:.0%})" for c in n.dominant_classes)


@renderer(PREDICTION, "html")
def html(doc: Document, *, anchor: str = "prediction", **_options: Any) -> str:
    b = Prediction.from_document(doc)
    nets = b.networks
    parts = [pairs([("profile", profile_line(b.profile)), ("statistic", b.statistic),
                    ("compute time", secs(b.compute_s) if b.compute_s is not None
                     else None)]),
             bullet_list(b.profile.notes) if b.profile.notes else Markup(""),
             networks_table(b),
             figure(totals_chart(b), esc("One bar per network; hover for the interval and "
                                         "the ratio. Seconds of communication for the whole "
                                         "profile, the model's mean times."),
                    f"{anchor}-totals", "prediction"),
             heading("Sizes that dominate (80% of the time)"),
             bullet_list([join([esc(f"{n.model.name}: "), esc(dominant(n))]) for n in nets])]
    for i, n in enumerate(nets):
        block = join([classes_table(i, n), heading("Model", 4), model_table(n)])
        parts.append(details(f"{n.model.name}: every message class and the model", block,
                             open_=i == 0))
    parts += [heading("Method"), bullet_list([f"{k}: {v}" for k, v in b.method.items()])]
    return join(parts)


# --------------------------------------------------------------------------- replay


@renderer(REPLAY, "title")
def replay_title(doc: Document, **_options: Any) -> str:
    b = doc.body
    return f"Replay of {b['profile']['source']} to {b['peer']} over {b['transport']}"


@renderer(REPLAY, "html")
def replay_html(doc: Document, *, anchor: str = "replay", **_options: Any) -> str:
    b = doc.body
    t = b["total_s"]
    rows = []
    for j, c in enumerate(b["classes"]):
        rows.append([c["size"], f"{c['count']:,}", c["pattern"],
                     num(c["median_s"], secs(c["median_s"]), f"body.classes.{j}.median_s"),
                     f"{secs(c['min_s'])}..{secs(c['max_s'])}", f"{c['messages_timed']:,}"])
    labels = [f"{format_size(c['size'])} x {c['count']:,}" for c in b["classes"]]
    values = [c["median_s"] or 0.0 for c in b["classes"]]
    tips = [f"{lab}: {secs(v)} (median of {len(c['times_s'])} repeats)"
            for lab, v, c in zip(labels, values, b["classes"], strict=True)]
    return join([
        pairs([("profile", profile_line(Profile.from_dict(b["profile"]))),
               ("peer", f"{b['peer']} over {b['transport']}"),
               ("total", join([num(t["median"], secs(t["median"]), "body.total_s.median"),
                               esc(f" (each class's median over the repeats, summed; "
                                   f"{len(t['per_repeat'])} complete repeat(s) took "
                                   f"{secs(t['min'])}..{secs(t['max'])})")]))]),
        table(["size B", "count", "pattern", "median", "min..max", "messages timed"], rows,
              numeric=[0, 1, 3, 5], caption="Measured time per message class"),
        figure(svg.bars("Replayed time per message class", labels, values,
                        "time of the class's messages (bars from 0)", tips, secs,
                        keys=[f"body.classes.{j}.median_s" for j in range(len(values))]),
               esc(f"Each class's median over {b['repeats']} repeat(s), to {b['peer']} over "
                   f"{b['transport']}."), f"{anchor}-classes", "replay"),
        para(b["method"], "none")])
