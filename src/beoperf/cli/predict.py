"""`beoperf predict`: an application's communication time on measured or given networks."""

from __future__ import annotations

import argparse
import sys

from beoperf import report, units
from beoperf.cli import CliError, ExitStatus, UsageError
from beoperf.model.profile import FORMATS
from beoperf.suites import predict

EXAMPLES = """examples:
  beoperf predict --profile app.csv --network gige.json --network ib.json
  beoperf predict --profile app.csv --network now.json --model alpha=2us,bw=100Gbit/s
  beoperf predict --profile app.csv --network now.json --scale now.json 1Gbit/s 10Gbit/s \\
      --compute 120 -o prediction.json
  beoperf predict --profile IMB-PingPong.txt --network IMB-PingPong.txt   # a sanity case

PROFILE: a CSV with a header naming size and count (and optionally pattern:
pingpong, stream or bidir, and concurrency: pairs sending at once), sizes as
beoperf reads them (64K = 65536); or an IMB PingPong / OSU osu_latency or
osu_bw output (the messages that run sent); or an mpiP report (its
point-to-point call sites: count and mean size).

Each RESULT is a ping-pong run (beoperf JSON, TCP or MPI; NetPIPE, IMB, OSU
imports): its piecewise model t(n) = alpha + beta x n, fitted to the mean
one-way times, prices every message class. Printed per network: the
predicted communication time, an interval from the model's residuals, the
ratio to the first network, whether the method claims it (what beoperf
replay is expected to confirm), the sizes that dominate; with --compute S
the whole run's time and speedup (Amdahl).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict an application's communication time on "
                                       "measured networks",
                       description="Predict the communication time of an application's "
                                   "message profile on each network from its measured model.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", required=True, metavar="PROFILE",
                   help="the application's messages (CSV, IMB/OSU output, mpiP report)")
    p.add_argument("--profile-format", choices=("auto", *FORMATS), default="auto",
                   help="how to read PROFILE (default: from its content)")
    p.add_argument("--network", action="append", default=[], metavar="RESULT",
                   help="a measured network: a ping-pong result (repeatable)")
    p.add_argument("--scale", action="append", nargs=3, default=[],
                   metavar=("RESULT", "FROM", "TO"),
                   help="RESULT's network with its bottleneck rate FROM changed to TO "
                        "(same path and MTU)")
    p.add_argument("--model", action="append", default=[], metavar="alpha=T,bw=R",
                   help="a network not yet built: latency and bandwidth "
                        "(e.g. alpha=50us,bw=100Mbit/s[,name=TEXT])")
    p.add_argument("--compute", metavar="SECONDS",
                   help="the application's time outside communication: adds the whole "
                        "run's time and speedup (Amdahl)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                   help="output format (default: text)")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON document here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    compute = None
    if args.compute is not None:
        try:
            compute = units.parse_time(args.compute)
        except ValueError as exc:
            raise UsageError(f"--compute {args.compute!r}: {exc}") from None
    spec = predict.Spec(profile=args.profile, networks=tuple(args.network),
                        models=tuple(args.model),
                        scales=tuple(tuple(s) for s in args.scale),
                        profile_format=args.profile_format, compute_s=compute,
                        command_line=tuple(args.argv))
    doc = predict.run(spec)
    if args.output:
        try:
            doc.save(args.output)
        except OSError as exc:
            raise CliError(ExitStatus.ERROR, "output error",
                           f"cannot write {exc.filename or args.output}: {exc.strerror or exc}",
                           "check that -o FILE is in a writable directory") from None
    sys.stdout.write(report.render(doc, args.format))
    return ExitStatus.OK
