"""`beoperf compare`: runs side by side, and which differences are significant."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from beoperf.analysis import compare
from beoperf.cli import ExitStatus, UsageError
from beoperf.cli.inputs import check_label_count, labels_for, load_result

EXAMPLES = """examples:
  beoperf compare default.json coalesce.json combined.json
  beoperf compare a.json b.json --baseline b.json --format markdown
  beoperf compare default.json tuned.json --label Default --label Tuned --format impact
  beoperf compare runs/*.json --format csv > runs.csv

Figures: latency (median, p99; one-way, us), peak Mbit/s (SI, 10^6 bit/s) and
the size it is reached at, saturation point and n1/2 (bytes), Hockney alpha
(us) and 1/beta (Mbit/s). Against the baseline (the first file unless
--baseline): the change of latency and peak in %, and whether it is
significant: two-sided Mann-Whitney U on the per-trial medians (normal
approximation, tie- and continuity-corrected), p < 0.05 AND a change of the
medians over --min-change (default 2%): run-to-run noise on shared machines
shifts whole runs by about that much, which no number of trials averages away.
Fewer than 6 trials on a side: "too few trials"; imported results (NetPIPE,
IMB, OSU) have no trials: "n/a (source lacks trial data)".

--format impact prints a tuning study's table: label, latency mean (variance)
of the trial medians at the smallest size, and the impact
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
    p.add_argument("--format", choices=sorted(compare.RENDERERS), default="table",
                   help="output format (default: table)")
    p.add_argument("--label", action="append", metavar="NAME",
                   help="name of a run, once per FILE in order (default: from the metadata)")
    p.add_argument("--min-change", default="0.02", metavar="FRACTION",
                   help="smallest change of the medians called significant, a fraction or "
                        "a percentage (default 0.02 = 2%%)")
    p.set_defaults(func=run)


def parse_min_change(text: str) -> float:
    """'0.02' or '2%' -> 0.02; a fraction in [0, 1)."""
    try:
        value = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise UsageError(f"--min-change {text!r}: expected a fraction such as 0.02, or 2%")
    return value


def baseline_index(args: argparse.Namespace, labels: list[str]) -> int:
    """Position of --baseline among the files (same path) or the labels."""
    if args.baseline is None:
        return 0
    wanted = Path(args.baseline)
    for i, name in enumerate(args.files):
        if name == args.baseline or _same_file(Path(name), wanted):
            return i
    if args.baseline in labels:
        return labels.index(args.baseline)
    raise UsageError(f"--baseline {args.baseline}: not among the files compared",
                     "name one of the FILEs (or its label)")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    min_change = parse_min_change(args.min_change)
    check_label_count(args.label, args.files)
    runs = [load_result(f) for f in args.files]
    names = labels_for(args.label, args.files, runs)
    table = compare.rows(runs, baseline_index(args, names), min_change, names)
    sys.stdout.write(compare.RENDERERS[args.format](table, min_change))
    if args.format == "csv":  # the table stays machine-readable; the test goes to stderr
        print(compare.describe_test(min_change)["statement"], file=sys.stderr)
    return ExitStatus.OK
