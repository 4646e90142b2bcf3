"""`beoperf cluster coll`: MPI collectives over a size schedule, with statistics (the
places, MPI, precision and output options are the cluster MPI tests' own:
cli/cluster_mpi.py)."""

from __future__ import annotations

import argparse

from beoperf.cli import UsageError
from beoperf.cli.cluster_mpi import PLACES, _parser, _size, common_of, finish, measured
from beoperf.suites import cluster_coll

EXAMPLES = f"""examples:
  beoperf cluster coll --hosts 'node[01-08]' --ops allreduce,alltoall --sizes 8,1K,64K,1M
  beoperf cluster coll --hosts a,b --ranks-per-node 1,2 -o coll.json
  beoperf cluster coll --ranks-per-node 4 --nocache       # four ranks here: shared memory

Collectives: {', '.join(cluster_coll.DEFAULT_OPERATIONS)}
(reduce_scatter is MPI_Reduce_scatter_block).
A size is the vector for allreduce, reduce and bcast, each rank's block for allgather,
alltoall, gather and scatter, the whole vector for reduce_scatter (as OSU and IMB);
reductions sum MPI_DOUBLEs. As OSU, MPI_Barrier before every call and only the call
timed; each rank's mean time per call is reduced over the ranks as IMB does (t_min,
t_avg, t_max), the headline t_avg (OSU's Avg Latency) with its 95% interval over the
trials. Each (collective, size) checks its result once, untimed (the exact sum; each
block from the rank it must come from); the document counts the elements found wrong.
{PLACES}"""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = _parser(sub, "coll", "MPI collectives (allreduce, alltoall ...) over message sizes",
                "Time per call of MPI collectives over a size schedule and process "
                "counts, as OSU and IMB-MPI1 measure them, with the precision loop's "
                "intervals and the results checked.", EXAMPLES)
    p.add_argument("--ops", default=",".join(cluster_coll.DEFAULT_OPERATIONS),
                   metavar="LIST", help="the collectives (default: all)")
    p.add_argument("--sizes", default="8,1K,64K", metavar="LIST",
                   help="message sizes (default %(default)s)")
    p.add_argument("--root", type=int, default=0, metavar="RANK",
                   help="root of bcast, reduce, gather and scatter (default %(default)s)")
    p.add_argument("--nocache", action="store_true",
                   help="each call on other buffers (spanning twice the last-level cache)")
    p.set_defaults(func=run_coll)


def run_coll(args: argparse.Namespace) -> int:
    sizes = tuple(_size(s, "--sizes") for s in args.sizes.split(",") if s.strip())
    ops = tuple(o.strip() for o in args.ops.split(",") if o.strip())
    if not sizes:
        raise UsageError("--sizes: no size given")
    spec = cluster_coll.Spec(common=common_of(args), operations=ops, sizes=sizes,
                             root=args.root, nocache=args.nocache)
    return finish(measured(cluster_coll.run, spec, args), args)
