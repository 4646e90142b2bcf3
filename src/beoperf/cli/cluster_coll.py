"""`beoperf cluster coll`: MPI collectives over a size schedule, with statistics (the
places, MPI, precision and output options are the cluster MPI tests' own:
cli/cluster_mpi.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from beoperf import model
from beoperf.cli import ExitStatus, UsageError
from beoperf.cli.cluster_mpi import PLACES, _parser, _size, common_of, finish, measured
from beoperf.model import coll_import
from beoperf.model.cluster_mpi import COLL_KIND, MpiRun, Series
from beoperf.suites import cluster_coll
from beoperf.suites.cluster_mpi import Outcome

EXAMPLES = f"""examples:
  beoperf cluster coll --hosts 'node[01-08]' --ops allreduce,alltoall --sizes 8,1K,64K,1M
  beoperf cluster coll --hosts a,b --ranks-per-node 1,2 -o coll.json
  beoperf cluster coll --ranks-per-node 4 --nocache       # four ranks here: shared memory

Collectives: {', '.join(cluster_coll.DEFAULT_OPERATIONS)}
(reduce_scatter is MPI_Reduce_scatter_block), and their non-blocking forms with --ops
iallreduce,ialltoall ... (posted, then MPI_Wait at once: nothing overlapped).
A size is the vector for allreduce, reduce and bcast, each rank's block for allgather,
alltoall, gather and scatter, the whole vector for reduce_scatter (as OSU and IMB);
reductions sum MPI_DOUBLEs. As OSU, MPI_Barrier before every call and only the call
timed; each rank's mean time per call is reduced over the ranks as IMB does (t_min,
t_avg, t_max), the headline t_avg (OSU's Avg Latency) with its 95% interval over the
trials. Each (collective, size) checks its result once, untimed (the exact sum; each
block from the rank it must come from); the document counts the elements found wrong.
{PLACES}

Importing: --import osu_allreduce.txt --np 16 (OSU's blocking collectives; run them with
-f for t_min and t_max) or --import IMB-MPI1.out (its collective sections, one series per
#processes) reads other tools' outputs into the same document, to render or compare."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = _parser(sub, "coll", "MPI collectives (allreduce, alltoall ...) over message sizes",
                "Time per call of MPI collectives over a size schedule and process "
                "counts, as OSU and IMB-MPI1 measure them, with the precision loop's "
                "intervals and the results checked.", EXAMPLES)
    p.add_argument("--ops", default=",".join(cluster_coll.DEFAULT_OPERATIONS),
                   metavar="LIST",
                   help="the collectives (default: every blocking one; iallreduce ... the "
                        "non-blocking forms)")
    p.add_argument("--sizes", default="8,1K,64K", metavar="LIST",
                   help="message sizes (default %(default)s)")
    p.add_argument("--root", type=int, default=0, metavar="RANK",
                   help="root of bcast, reduce, gather and scatter (default %(default)s)")
    p.add_argument("--nocache", action="store_true",
                   help="each call on other buffers (spanning twice the last-level cache)")
    g = p.add_argument_group("importing instead of measuring")
    g.add_argument("--import", dest="imports", action="append", default=[], metavar="FILE",
                   help="read an OSU collective (osu_allreduce ... -f for t_min/t_max) or "
                        "IMB-MPI1 output into the same document; repeatable; nothing runs")
    g.add_argument("--np", type=int, metavar="N",
                   help="the processes an OSU output ran with (OSU does not print it)")
    p.set_defaults(func=run_coll)


def run_coll(args: argparse.Namespace) -> int:
    if args.imports:
        return imported(args)
    sizes = tuple(_size(s, "--sizes") for s in args.sizes.split(",") if s.strip())
    ops = tuple(o.strip() for o in args.ops.split(",") if o.strip())
    if not sizes:
        raise UsageError("--sizes: no size given")
    spec = cluster_coll.Spec(common=common_of(args), operations=ops, sizes=sizes,
                             root=args.root, nocache=args.nocache)
    return finish(measured(cluster_coll.run, spec, args), args)


def imported(args: argparse.Namespace) -> int:
    """--import: the files as one cluster-coll document, written and printed as a run."""
    if args.np is not None and not 1 <= args.np <= 1 << 24:
        raise UsageError(f"--np {args.np}: from 1 on")
    doc = coll_import.import_files([Path(f) for f in args.imports], args.np, args.label,
                                   list(args.argv))
    return finish(Outcome(doc), args)


# --------------------------------------------------------------------------- comparing


def is_coll(path: str) -> bool:
    """Whether a file is a cluster-coll document (any other is left to the others)."""
    try:
        return model.load(path).kind == COLL_KIND
    except (model.DocumentError, OSError):
        return False


def column_label(path: str, s: Series, given: str | None, several: bool) -> str:
    """--label's name (with the series' when the file has several), else the file's stem,
    the MPI and the ranks: 'a: openmpi 4 ranks (2/node)'."""
    impl = s.mpi.get("implementation") or s.launch.get("tool") or "?"
    per = f" ({s.ranks_per_node}/node)" if s.ranks_per_node else ""
    what = f"{impl} {s.np} ranks{per}"
    if given is not None:
        return f"{given} {what}" if several else given
    return f"{Path(path).stem}: {what}"


def run_compare(args: argparse.Namespace) -> int:
    """`beoperf compare A.json B.json ...` of cluster-coll documents: every series a
    column, the first the baseline (analysis/coll_compare.py)."""
    from beoperf.analysis import coll_compare
    from beoperf.cli.compare import parse_margin
    from beoperf.report.cluster_coll import comparison_lines

    if not all(is_coll(f) for f in args.files):
        raise UsageError("collectives compare with collectives: every FILE a cluster-coll "
                         "document (beoperf cluster coll -o, or --import)")
    if args.format not in ("table", "markdown"):
        raise UsageError(f"--format {args.format}: collectives compare as table or markdown")
    if args.baseline is not None:
        raise UsageError("--baseline: with collectives the first FILE is the baseline")
    if args.label is not None and len(args.label) != len(args.files):
        raise UsageError(f"--label: give {len(args.files)}, one per FILE")
    named = []
    for i, f in enumerate(args.files):
        series = MpiRun.from_document(model.load(f)).series
        given = args.label[i] if args.label else None
        named += [(column_label(f, s, given, len(series) > 1), s) for s in series]
    columns = coll_compare.columns_of(named)
    if len(columns) < 2:
        raise UsageError("one column only: give two files or more, or a file of several "
                         "series (--ranks-per-node 1,2)")
    rows, missing = coll_compare.compare(columns, parse_margin(args.margin))
    if not rows:
        raise UsageError("no (collective, size) is in every file: nothing to compare")
    lines = comparison_lines([c.label for c in columns], rows, missing,
                             coll_compare.STATEMENT, args.format == "markdown")
    print("\n".join(lines))
    return ExitStatus.OK
