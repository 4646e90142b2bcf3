"""`beoperf pingpong --raw-samples FILE`: every sample as CSV (beoperf.report.raw_samples),
checked before the run and written after the result document."""

from __future__ import annotations

import argparse
import os
import sys

from beoperf import errors, interrupts, safeio
from beoperf.report import raw_samples
from beoperf.suites.pingpong import Measured

HINT = "see 'beoperf pingpong --help'"


def add_option(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--raw-samples", metavar="FILE",
                       help="also write every sample as CSV (size,trial,iteration,seconds; "
                            f"one-way times; at most {raw_samples.CAP:,} rows); ping-pong and "
                            "bidir modes over TCP")


def check(args: argparse.Namespace) -> None:
    """BadSpec, before anything is measured, for a run without samples to write or a
    FILE that cannot be one (its directory missing, a directory itself)."""
    path = args.raw_samples
    if path is None:
        return
    if args.sweep:
        raise errors.BadSpec("--raw-samples writes one run's samples: not with --sweep", HINT)
    if args.transport != "tcp":
        raise errors.BadSpec("--raw-samples: the MPI ranks keep their samples; TCP only", HINT)
    if args.mode == "stream":
        raise errors.BadSpec("--raw-samples: stream mode times whole trials, not messages; "
                             "use --mode pingpong or bidir", HINT)
    directory = os.path.dirname(os.path.abspath(path))
    if not path or os.path.isdir(path) or not os.path.isdir(directory):
        raise errors.BadSpec(f"--raw-samples {path!r}: not a file in an existing directory",
                             HINT)


def write(path: str, measured: Measured) -> errors.OutputError | None:
    """Write the CSV atomically (never through a link at FILE); a cap reached is a warning
    on stderr.  The error to raise after the summary, if it could not be written."""
    samples = measured.samples or {}
    data, written, total = raw_samples.raw_csv(samples, raw_samples.CAP)
    try:
        with interrupts.deferred():
            safeio.write_atomic(path, data)
    except OSError as exc:
        return errors.OutputError(f"cannot write the raw samples to {path}: "
                                  f"{exc.strerror or exc}",
                                  "the result document was written; give another FILE")
    if written < total:
        print(f"beoperf: WARN: --raw-samples: {written:,} of {total:,} samples written (the "
              f"cap is {raw_samples.CAP:,} rows, the first sizes' first); the document's "
              "histogram counts them all", file=sys.stderr)
    return None
