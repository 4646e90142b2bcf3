"""`beoperf cluster rma`: one-sided MPI_Put and MPI_Get with fence and passive-target
synchronisation between rank 0 and rank 1, beside the two-sided ping-pong."""

from __future__ import annotations

import argparse

from beoperf.cli import UsageError
from beoperf.cli.cluster_mpi import PLACES, _parser, _size, common_of, finish, measured
from beoperf.suites import cluster_rma

RMA_EXAMPLES = f"""examples:
  beoperf cluster rma --hosts a,b --op put,get --sync fence,lock -o rma.json
  beoperf cluster rma --ranks-per-node 2 --sizes 8,64K,1M     # here: shared memory
  beoperf cluster rma --hosts a,b --ranks-per-node 1,2 --format csv

As osu_put_latency and osu_get_latency: rank 0 puts to (or gets from) rank 1's window
(MPI_Win_allocate, one per synchronisation). fence: per repetition fence, rank 0's
operation, fence, rank 1's operation back, fence; the time per operation is the loop's
halved. lock: MPI_Win_lock (shared), the operation, MPI_Win_unlock. flush: one lock
around the loop, the operation and MPI_Win_flush (osu's default). lock_all:
MPI_Win_lock_all, the operation, MPI_Win_unlock_all. put_bw and get_bw are osu_put_bw's
and osu_get_bw's: --bw-burst operations per synchronisation (fence: one way), the time
per operation the loop's over the operations. Rank 1 waits in MPI_Barrier while
rank 0 runs a passive-target loop. Beside them the two-sided ping-pong's one-way time
of each size (--no-two-sided: not measured). Every trial's data is checked outside the
timed loop: a put lands in the window, a get returns what the target holds.
{PLACES}"""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = _parser(sub, "rma", "one-sided MPI_Put and MPI_Get, fence and passive target",
                "Time of MPI_Put and MPI_Get between rank 0 and rank 1 with their "
                "synchronisation (fence, lock/unlock, lock_all, flush), over message sizes, "
                "as osu_put_latency and osu_get_latency, beside the two-sided ping-pong.",
                RMA_EXAMPLES)
    p.add_argument("--op", default="put,get", metavar="LIST",
                   help="put, get, put_bw, get_bw (default %(default)s)")
    p.add_argument("--bw-burst", type=int, default=cluster_rma.DEFAULT_BURST, metavar="N",
                   help="put_bw and get_bw: operations per synchronisation (default "
                        "%(default)s, osu_put_bw's window)")
    p.add_argument("--sync", default=",".join(cluster_rma.DEFAULT_SYNCS), metavar="LIST",
                   help="fence, lock, flush, lock_all (default %(default)s)")
    p.add_argument("--sizes", default="8,1K,64K,1M", metavar="LIST",
                   help="message sizes (default %(default)s)")
    p.add_argument("--no-two-sided", dest="two_sided", action="store_false",
                   help="leave out the two-sided ping-pong of each size")
    p.set_defaults(func=run_rma)


def _names(text: str, name: str) -> tuple[str, ...]:
    found = tuple(dict.fromkeys(v.strip().lower() for v in text.split(",") if v.strip()))
    if not found:
        raise UsageError(f"{name} {text!r}: expected a list such as put,get")
    return found


def run_rma(args: argparse.Namespace) -> int:
    sizes = tuple(_size(s, "--sizes") for s in args.sizes.split(",") if s.strip())
    spec = cluster_rma.Spec(common=common_of(args), ops=_names(args.op, "--op"),
                            syncs=_names(args.sync, "--sync"), sizes=sizes,
                            two_sided=args.two_sided, bw_burst=args.bw_burst)
    return finish(measured(cluster_rma.run, spec, args), args)
