"""`beoperf report`: one self-contained HTML file of every beoperf document found."""

from __future__ import annotations

import argparse
import sys

from beoperf import safeio
from beoperf.cli import CliError, ExitStatus
from beoperf.suites import report

EXAMPLES = """examples:
  beoperf report results/ -o report.html          # every document under results/
  beoperf report runs/a.json runs/b.json audits/ --title "Cluster acceptance, rack 3"

Reads every *.json beoperf document under the paths (ping-pong runs, comparisons,
audits and fleet audits, tune plans, procedures and rollbacks, monitor reports,
predictions, replays, ...) and writes one HTML file: what needs attention in every
study first (failures, then warnings, figures short of their precision and notes,
each with what to do), a table of contents, then one section per document with its
own answer, where it came from, the command line that made it, its figures with
units and spread, and its plots
as inline SVG (hover a point for its values). The file needs nothing else: no
script, no fonts, no network; it opens from disk and prints.

Inside a folder no symbolic link is followed, hidden entries are skipped, and
each file is read bounded (64 MiB); files that are not beoperf documents are
listed at the end of the report with the reason.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="one HTML report of every document under some paths",
                       description="Write one self-contained HTML report of every beoperf "
                                   "document found under the paths.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="folders or document files")
    p.add_argument("-o", "--output", metavar="FILE", default="report.html",
                   help="the HTML file to write (default: report.html; - for stdout)")
    p.add_argument("--title", default="beoperf report", help="the page's title")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    built = report.run(report.Spec(paths=tuple(args.paths), title=args.title,
                                   command_line=tuple(args.argv)))
    if args.output == "-":
        sys.stdout.write(built.html)
    else:
        try:
            safeio.write_atomic(args.output, built.html)
        except OSError as exc:
            raise CliError(ExitStatus.ERROR, "output error",
                           f"cannot write {exc.filename or args.output}: {exc.strerror or exc}",
                           "check that -o FILE is in a writable directory") from None
    skipped = f"; {len(built.notes)} note(s) on skipped files at its end" if built.notes else ""
    where = "" if args.output == "-" else f" to {args.output}"
    print(f"wrote a report of {built.documents} document(s){where}{skipped}",
          file=sys.stderr)
    return ExitStatus.OK
