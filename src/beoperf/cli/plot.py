"""`beoperf plot`: the throughput, signature and saturation graphs of one or more runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from beoperf import safeio
from beoperf.cli import CliError, ExitStatus
from beoperf.model.pingpong import RunResult
from beoperf.suites.results import check_label_count, import_warnings, labels_for, load_result

EXAMPLES = """examples:
  beoperf plot runs/n01-n02.json                       # ./throughput.png, signature.png, ...
  beoperf plot a.json b.json --label "MTU 1500" --label "MTU 9000" -o figs
  beoperf plot runs/*.json --format svg -o figs

Writes DIR/throughput, DIR/signature and DIR/saturation (.png or .svg), one
curve per result: the central one-way time (median; imports: what the source
has), a band from the minimum to the 90th percentile when the result has them,
the saturation point marked in the curve's colour (its size in the legend),
and throughput collapses shaded (sizes whose throughput fell below 1/10 of the
best at a smaller size). Throughput is SI: Gbit/s (10^9 bit/s) when the
largest throughput reaches 1000 Mbit/s, else Mbit/s (10^6 bit/s); time ticks
carry their own unit.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw throughput, signature and saturation graphs",
                       description="Draw the three graphs of an interconnect study from "
                                   "result files (beoperf JSON, or NetPIPE np.out, IMB and "
                                   "OSU output).",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", metavar="RESULT", help="result file(s), one curve each")
    p.add_argument("-o", "--output", metavar="DIR", default=".",
                   help="directory for the graphs (default: current directory)")
    p.add_argument("--format", choices=("png", "svg"), default="png",
                   help="image format (default %(default)s)")
    p.add_argument("--label", action="append", metavar="LABEL",
                   help="legend label, once per RESULT in order (default: from the metadata)")
    p.set_defaults(func=run)


def _figures_module():
    try:
        from beoperf.report import plots
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("matplotlib"):
            raise
        raise CliError(ExitStatus.ERROR, "missing dependency",
                       "beoperf plot needs matplotlib", "pip install 'matplotlib>=3.6'") from None
    return plots


def write_figures(runs: Sequence[RunResult], labels: Sequence[str], outdir: Path,
                  fmt: str = "png") -> list[Path]:
    """Write OUTDIR/{throughput,signature,saturation}.FMT (safely); the paths written.
    OSError (e.g. an unwritable directory) propagates."""
    files = _figures_module().figure_files(runs, labels, fmt)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in files.items():
        safeio.write_atomic(outdir / name, data)
        paths.append(outdir / name)
    return paths


def run(args: argparse.Namespace) -> int:
    check_label_count(args.label, args.results)  # before any file is read
    _figures_module()
    runs = [load_result(path) for path in args.results]
    labels = labels_for(args.label, args.results, runs)
    outdir = Path(args.output)
    try:
        paths = write_figures(runs, labels, outdir, args.format)
    except OSError as exc:
        where = exc.filename or outdir
        raise CliError(ExitStatus.ERROR, "output error",
                       f"cannot write {where}: {exc.strerror or exc}",
                       "check that -o DIR is a writable directory") from None
    for path in paths:
        print(path)
    for note in import_warnings(args.results, runs):
        print(f"warning: {note}", file=sys.stderr)
    return ExitStatus.OK
