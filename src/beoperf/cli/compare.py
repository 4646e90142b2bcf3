"""`beoperf compare`: runs side by side, and whether each is better, worse, no different, or
cannot be told apart from a baseline."""

from __future__ import annotations

import argparse
import sys

from beoperf import model, report, units
from beoperf.cli import ExitStatus, UsageError
from beoperf.cli.cluster import add_reference_options
from beoperf.cli.cluster_docs import any_hpcc, run_hpcc_compare
from beoperf.model.monitor import MonitorReport
from beoperf.suites import compare

FORMATS = ("csv", "impact", "json", "markdown", "table")

EXAMPLES = """examples:
  beoperf compare default.json coalesce.json combined.json
  beoperf compare a.json b.json --baseline b.json --format markdown
  beoperf compare default.json tuned.json --label Default --label Tuned --format impact
  beoperf compare runs/*.json --format csv > runs.csv
  beoperf compare runs/medusa/scaling.json --reference XC4000 --reference P575
      # HPC Challenge results (cluster/scaling documents, hpccoutf.txt): per metric
      # beside other runs and reference systems, with the ratio
  beoperf compare node-before.json node-after.json   # beoperf node documents
  beoperf compare class-week.json vacation.json      # two monitor reports, days as replicates

  beoperf compare a1.json a2.json a3.json b1.json b2.json b3.json \\
      --label A --label A --label A --label B --label B --label B   # repeated runs

Verdicts (docs/STATISTICS.md): each run is one replicate of a machine whose level
moves between runs. The change of a figure is a ratio with an interval made of
both runs' own uncertainty and the spread between runs: from repeated runs
(files given the same --label form one configuration), else from the runs'
history (earlier runs of the same setup; or borrowed from the host's other
setups, which the output says), else 10%. Latency (lower is better) is compared at
one size every run measured, peak (higher is better) as each run's highest
throughput over the sizes every run measured, and every common size on its own
(each interval widened for the number of sizes). "better" or
"worse": the interval excludes no change; "no difference shown": it lies within
+-MARGIN (--margin, default 10%); "cannot tell": it is wider. With one run a
side and no history, only changes of about 30% or more can be told.

Figures: latency (median, p99; one-way, us: the median time of the middle
size among sizes <= 16 B), peak Mbit/s (SI, 10^6 bit/s) and the size it is
reached at, saturation point and n1/2 (bytes), Hockney alpha (us) and 1/beta
(Mbit/s), and the throughput collapses those figures leave out (sizes whose
throughput fell below 1/10 of the best at a smaller size).

Node documents (beoperf node -o FILE): one row per metric, each configuration's
mean and its verdict against the baseline, the same way (each node run one
replicate; its repetitions give its own uncertainty).

Monitor reports (beoperf monitor report --json, or -o's report.json): two at a
time, the first the baseline ("class week 0.660 ms vs vacation week 0.280 ms,
-57.6%"): each side's days monitored at least half of their length are its
replicates (median and p95 one-way latency per day), judged the same way.

--format impact prints a tuning study's table: label, latency mean (variance)
of the trial medians at the size compared, and the impact
(baseline mean - mean) / baseline mean in %.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare runs against a baseline, with verdicts",
                       description="Show the figures of several runs side by side and whether "
                                   "each is better, worse, no different or cannot be told "
                                   "apart from a baseline.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="results: beoperf JSON (or NetPIPE, IMB, OSU output when supported)")
    p.add_argument("--baseline", metavar="FILE",
                   help="the run to compare against: one of FILEs, or its label "
                        "(default: the first)")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="output format (default: table)")
    p.add_argument("--label", action="append", metavar="NAME",
                   help="name of a run, once per FILE in order (default: from the metadata); "
                        "runs given the same name are repeated runs of one configuration")
    p.add_argument("--margin", "--min-change", dest="margin", default="0.10",
                   metavar="FRACTION",
                   help="a change whose interval lies within +-this counts as none ('no "
                        "difference shown'), a fraction or a percentage (default 0.10 = "
                        "10%%)")
    add_reference_options(p)
    p.set_defaults(func=run)


def is_monitor_report(path: str) -> bool:
    """Whether a file is a monitor-report document (any other file, or one that does not
    load, is left to the ping-pong comparison, which says what it is)."""
    try:
        return model.load(path).kind == "monitor-report"
    except (model.DocumentError, OSError):
        return False


def run_monitor_compare(args: argparse.Namespace) -> int:
    """`beoperf compare` of two monitor reports: days as replicates."""
    from beoperf.analysis import monitor_compare
    from beoperf.report.monitor import comparison_lines

    if len(args.files) != 2 or not all(is_monitor_report(f) for f in args.files):
        raise UsageError("monitor reports compare two at a time: BASELINE.json OTHER.json "
                         "(each written by 'beoperf monitor report --json' or -o)")
    if args.format not in ("table", "markdown"):
        raise UsageError(f"--format {args.format}: monitor reports compare as table or "
                         "markdown")
    if args.baseline is not None:
        raise UsageError("--baseline: with monitor reports the first FILE is the baseline")
    if args.label is not None and len(args.label) != 2:
        raise UsageError("--label: give two, one per monitor report")
    docs = [MonitorReport.from_document(model.load(f)) for f in args.files]
    labels = tuple(args.label) if args.label else tuple(_monitor_label(d) for d in docs)
    rows = monitor_compare.compare(docs[0], docs[1], parse_margin(args.margin))
    print("\n".join(comparison_lines((labels[0], labels[1]), rows)))
    return ExitStatus.OK


def _monitor_label(doc: MonitorReport) -> str:
    """'peer 2026-11-02..2026-11-08': the host and the days of a report."""
    days = [d.period for d in doc.days] or ["?"]
    return f"{doc.source.host} {days[0]}..{days[-1]}"


def parse_margin(text: str) -> float:
    """'0.1' or '10%' -> 0.1; a fraction in [0, 1)."""
    try:
        value = units.parse_fraction(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise UsageError(f"--margin {text!r}: expected a fraction such as 0.1, or 10%")
    return value


def run(args: argparse.Namespace) -> int:
    if args.reference or args.reference_file or any_hpcc(args.files):
        return run_hpcc_compare(args)
    if any(is_monitor_report(f) for f in args.files):
        return run_monitor_compare(args)
    from beoperf.cli import cluster_coll  # collectives: analysis/coll_compare.py

    if any(cluster_coll.is_coll(f) for f in args.files):
        return cluster_coll.run_compare(args)
    spec = compare.Spec(files=tuple(args.files),
                        labels=tuple(args.label) if args.label is not None else None,
                        baseline=args.baseline, margin=parse_margin(args.margin),
                        command_line=tuple(args.argv))
    notes: list[str] = []
    doc = compare.run(spec, notes)
    if doc.kind != "comparison" and args.format == "impact":
        raise UsageError("--format impact is for ping-pong runs; node documents: table, "
                         "markdown, csv or json")
    sys.stdout.write(report.render(doc, args.format))
    if args.format == "csv":  # the table stays machine-readable; the test goes to stderr
        print(doc.body["test"]["statement"], file=sys.stderr)
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    return ExitStatus.OK
