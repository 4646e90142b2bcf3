"""`beoperf plot`: the throughput, signature and saturation graphs of one or more runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from beoperf.cli import CliError, ExitStatus
from beoperf.cli.inputs import check_label_count, labels_for, load_result

EXAMPLES = """examples:
  beoperf plot runs/n01-n02.json                       # ./throughput.png, signature.png, ...
  beoperf plot a.json b.json --label "MTU 1500" --label "MTU 9000" -o figs
  beoperf plot runs/*.json --format svg -o figs

Writes DIR/throughput, DIR/signature and DIR/saturation (.png or .svg), one
curve per result: the central one-way time (median; imports: what the source
has), a band from the minimum to the 90th percentile when the result has them,
and the saturation point ringed. Throughput is in SI Mbit/s (10^6 bit/s).
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
        from beoperf.plots import figures
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("matplotlib"):
            raise
        raise CliError(ExitStatus.ERROR, "missing dependency",
                       "beoperf plot needs matplotlib", "pip install 'matplotlib>=3.6'") from None
    return figures


def run(args: argparse.Namespace) -> int:
    check_label_count(args.label, args.results)  # before any file is read
    figures = _figures_module()
    runs = [load_result(path) for path in args.results]
    labels = labels_for(args.label, args.results, runs)
    outdir = Path(args.output)
    try:
        paths = figures.write_figures(runs, labels, outdir, args.format)
    except OSError as exc:
        where = exc.filename or outdir
        raise CliError(ExitStatus.ERROR, "output error",
                       f"cannot write {where}: {exc.strerror or exc}",
                       "check that -o DIR is a writable directory") from None
    for path in paths:
        print(path)
    return ExitStatus.OK
