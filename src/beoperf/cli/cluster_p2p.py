"""`beoperf cluster bibw | incast | bisect`: the point-to-point patterns of the cluster's
MPI tests (suites/cluster_p2p.py), through the same hosts, launchers and output as
`ring | pairs | mbw` (cli/cluster_mpi.py)."""

from __future__ import annotations

import argparse

from beoperf.cli.cluster_mpi import PLACES, _counts, _parser, _size, common_of, finish, measured
from beoperf.model.mpi_options import DEFAULT_WINDOW
from beoperf.suites import cluster_p2p

BIBW_EXAMPLES = f"""examples:
  beoperf cluster bibw --hosts a,b --sizes 64K,1M
  beoperf cluster bibw --hosts 'node[01-08]' --pairs 1,4 -o bibw.json

As osu_bibw, with N pairs at once placed as osu_mbw_mr places them (rank i with rank
i + N): both ends post a window of receives, send a window, and wait for all; after a
warm-up window and a barrier. A pair's rate = both directions' bytes / its slower end's
time; the aggregate = the sum of the pairs'. The slowest pair is named. {PLACES}"""

INCAST_EXAMPLES = f"""examples:
  beoperf cluster incast --hosts recv,s1,s2,s3 --senders 1,2,3
  beoperf cluster incast --hosts 'node[01-09]' --sizes 1M --format markdown

Many to one: N senders stream to rank 0 (the first host) at once, each in windows of
--window non-blocking sends acknowledged by the receiver, which keeps a window posted
for every sender (at most 256) and acknowledges each as it arrives. The aggregate = all
senders' bytes / the receiver's time (what its NIC and links took in); each sender's
rate = its bytes / its own time. The slowest sender is named. {PLACES}"""

BISECT_EXAMPLES = f"""examples:
  beoperf cluster bisect --hosts 'node[01-08]'            # node i with node i + 4
  beoperf cluster bisect --hosts a,b,c,d --pairs a:d,b:c
  beoperf cluster bisect --hostfile hosts --pairs pairs.txt   # 'A B' a line

Half the nodes to the other half, every pair at once, both ways (osu_bibw's windows on
each pair). Pairs name nodes (or their indexes from 0); with K ranks per node a node
pair is K rank pairs. The aggregate = the sum of the pairs' rates; the slowest pair is
named. {PLACES}"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", default="8,1K,64K,1M", metavar="LIST",
                   help="message sizes (default %(default)s)")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, metavar="N",
                   help="messages per window (default %(default)s, as osu)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = _parser(sub, "bibw", "bidirectional bandwidth of N pairs at once (osu_bibw)",
                "Bidirectional bandwidth of N concurrent pairs of ranks, both ends sending "
                "at once, as osu_bibw; the aggregate and every pair's, the slowest named.",
                BIBW_EXAMPLES)
    _common(p)
    p.add_argument("--pairs", metavar="LIST",
                   help="pair counts (default: 1, 2, 4 ... and all the ranks make)")
    p.set_defaults(func=run_pattern, pattern="bibw")

    p = _parser(sub, "incast", "many senders to one receiver at once (incast)",
                "N senders streaming to one receiver at once: the receiver's aggregate "
                "rate and every sender's, the slowest named.", INCAST_EXAMPLES)
    _common(p)
    p.add_argument("--senders", metavar="LIST",
                   help="sender counts (default: 1, 2, 4 ... and all the other ranks)")
    p.set_defaults(func=run_pattern, pattern="incast")

    p = _parser(sub, "bisect", "half the nodes to the other half, both ways (bisection)",
                "Every pair of a bisection at once, both directions: the aggregate and "
                "every pair's rate, the slowest named.", BISECT_EXAMPLES)
    _common(p)
    p.add_argument("--pairs", metavar="A:B,...|FILE",
                   help="node pairs (names or indexes), or a file of them (default: node i "
                        "with node i + n/2)")
    p.set_defaults(func=run_pattern, pattern="bisect")


def run_pattern(args: argparse.Namespace) -> int:
    sizes = tuple(_size(s, "--sizes") for s in args.sizes.split(",") if s.strip())
    counts = pairs = None
    if args.pattern == "bibw" and args.pairs:
        counts = _counts(args.pairs, "--pairs")
    elif args.pattern == "incast" and args.senders:
        counts = _counts(args.senders, "--senders")
    elif args.pattern == "bisect" and args.pairs:
        pairs = cluster_p2p.parse_pairs(args.pairs)
    spec = cluster_p2p.Spec(common=common_of(args), pattern=args.pattern, sizes=sizes,
                            counts=counts, pairs=pairs, window=args.window)
    return finish(measured(cluster_p2p.run, spec, args), args)
