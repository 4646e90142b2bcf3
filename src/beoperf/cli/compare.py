"""`beoperf compare`: runs side by side, and which differences are significant."""

from __future__ import annotations

import argparse
import sys

from beoperf import report, units
from beoperf.cli import ExitStatus, UsageError
from beoperf.cli.cluster import add_reference_options
from beoperf.cli.cluster_docs import any_hpcc, run_hpcc_compare
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

Node documents (beoperf node -o FILE): one row per metric, each run's mean, its change
against the baseline and a verdict (Mann-Whitney U over the repetitions, p < 0.05 and a
change over --min-change; fewer than 4 repetitions a side: "too few samples").

Figures: latency (median, p99; one-way, us: the median time of the middle
size among sizes <= 16 B), peak Mbit/s (SI, 10^6 bit/s) and the size it is
reached at, saturation point and n1/2 (bytes), Hockney alpha (us) and 1/beta
(Mbit/s), and the throughput collapses those figures leave out (sizes whose
throughput fell below 1/10 of the best at a smaller size). Against the
baseline (the first file unless --baseline): the change of the latency and
peak figures in %, and whether that change is significant: two-sided
Mann-Whitney U on the per-trial medians behind each figure (latency: at each
run's latency size; peak: at each run's peak size; normal approximation,
tie- and continuity-corrected), p < 0.05 AND a change over --min-change
(default 2%): run-to-run noise on shared machines shifts whole runs by about
that much, which no number of trials averages away. Fewer than 6 trials on a
side: "too few trials"; imported results (NetPIPE, IMB, OSU) have no trials:
"n/a (source lacks trial data)".

--format impact prints a tuning study's table: label, latency mean (variance)
of the same trial medians the latency verdict tests, and the impact
(baseline mean - mean) / baseline mean in %.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare runs against a baseline, with significance",
                       description="Show the figures of several runs side by side and whether "
                                   "each differs significantly from a baseline.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="results: beoperf JSON (or NetPIPE, IMB, OSU output when supported)")
    p.add_argument("--baseline", metavar="FILE",
                   help="the run to compare against: one of FILEs, or its label "
                        "(default: the first)")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="output format (default: table)")
    p.add_argument("--label", action="append", metavar="NAME",
                   help="name of a run, once per FILE in order (default: from the metadata)")
    p.add_argument("--min-change", default="0.02", metavar="FRACTION",
                   help="smallest change of the medians called significant, a fraction or "
                        "a percentage (default 0.02 = 2%%)")
    add_reference_options(p)
    p.set_defaults(func=run)


def parse_min_change(text: str) -> float:
    """'0.02' or '2%' -> 0.02; a fraction in [0, 1)."""
    try:
        value = units.parse_fraction(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise UsageError(f"--min-change {text!r}: expected a fraction such as 0.02, or 2%")
    return value


def run(args: argparse.Namespace) -> int:
    if args.reference or args.reference_file or any_hpcc(args.files):
        return run_hpcc_compare(args)
    spec = compare.Spec(files=tuple(args.files),
                        labels=tuple(args.label) if args.label is not None else None,
                        baseline=args.baseline, min_change=parse_min_change(args.min_change),
                        command_line=tuple(args.argv))
    doc = compare.run(spec)
    if doc.kind != "comparison" and args.format == "impact":
        raise UsageError("--format impact is for ping-pong runs; node documents: table, "
                         "markdown, csv or json")
    sys.stdout.write(report.render(doc, args.format))
    if args.format == "csv":  # the table stays machine-readable; the test goes to stderr
        print(doc.body["test"]["statement"], file=sys.stderr)
    return ExitStatus.OK
