"""`beoperf replay`: send an application's message profile to a peer and time it."""

from __future__ import annotations

import argparse
import socket
import sys

from beoperf import interrupts, report, units
from beoperf.cli import CliError, ExitStatus, UsageError, check_seconds, peer_host
from beoperf.model.profile import FORMATS
from beoperf.report import conditions
from beoperf.suites import replay

EXAMPLES = """examples:
  beoperf replay app.csv node02                  # against 'beoperf serve' on node02
  beoperf replay app.csv                         # an embedded server on loopback
  beoperf replay app.csv --transport mpi         # two MPI ranks here (shared memory)
  mpirun -np 2 --host a,b beoperf replay app.csv --transport mpi   # ranks on a and b
  beoperf replay app.csv node02 --repeats 5 -o replay.json

Sends every message class of PROFILE (see 'beoperf predict --help' for the
formats) as one timed trial after an untimed warm-up message: pingpong as
round trips, bidir as exchanges, stream one way back to back; the whole
profile --repeats times. Prints each class's median time and range, and the
total; -o writes the document, which 'beoperf report' shows beside the
prediction. Classes with concurrency > 1 are refused (one pair is replayed).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="send a message profile to a peer and time it",
                       description="Replay an application's message profile against a "
                                   "'beoperf serve' peer and time every message class.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profile", metavar="PROFILE", help="the application's messages")
    p.add_argument("host", nargs="?", metavar="HOST", type=peer_host,
                   help="the peer running 'beoperf serve' (default: an embedded server on "
                        "loopback)")
    p.add_argument("-p", "--port", type=int, default=replay.DEFAULT_PORT)
    p.add_argument("-6", dest="family", action="store_const", const=socket.AF_INET6,
                   default=socket.AF_UNSPEC, help="IPv6 only")
    p.add_argument("--transport", default="tcp",
                   help="transport by name (default: tcp; mpi: between two MPI ranks "
                        "started here, or the ranks of the job this runs in)")
    p.add_argument("--mpi", choices=("openmpi", "mpich"),
                   help="with --transport mpi: the MPI to launch (default: Open MPI if "
                        "installed)")
    p.add_argument("--repeats", type=int, default=3, help="times the whole profile is sent "
                                                          "(default 3)")
    p.add_argument("--timeout", default="10", metavar="SECONDS",
                   help="give up on a silent peer after this long (default 10 s)")
    p.add_argument("--profile-format", choices=("auto", *FORMATS), default="auto")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON document here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        timeout = units.parse_time(args.timeout)
    except ValueError as exc:
        raise UsageError(f"--timeout {args.timeout!r}: {exc}") from None
    check_seconds("--timeout", timeout)
    spec = replay.Spec(profile=args.profile, host=args.host, port=args.port,
                       family=args.family, transport=args.transport, repeats=args.repeats,
                       timeout=timeout, profile_format=args.profile_format,
                       command_line=tuple(args.argv), mpi=args.mpi)
    if args.mpi and args.transport != "mpi":
        raise UsageError("--mpi goes with --transport mpi")
    if args.transport == "mpi" and args.host:
        raise UsageError("with --transport mpi the peer is rank 1 of the job: give no HOST "
                         "(start the ranks with mpirun or srun to place them)")
    done = replay.run(spec, progress=lambda line: print(line, file=sys.stderr, flush=True))
    if done is None:  # an MPI rank other than 0: rank 0 reports
        return ExitStatus.OK
    with interrupts.deferred():
        if args.output:
            try:
                done.document.save(args.output)
            except OSError as exc:
                raise CliError(ExitStatus.ERROR, "output error",
                               f"cannot write {exc.filename or args.output}: "
                               f"{exc.strerror or exc}", "check that -o FILE is writable") from None
        sys.stdout.write(report.render(done.document, args.format))
    for warning in conditions.warnings_of(done.document.meta):
        print(f"beoperf: WARN: {warning}", file=sys.stderr)
    if done.interrupt is not None:
        raise done.interrupt
    if done.error is not None:
        raise done.error
    return ExitStatus.OK
