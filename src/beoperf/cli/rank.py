"""The one entry of the children beoperf launches: ``python -m beoperf.cli.rank KIND PLAN``.

KIND names what the child is (an MPI rank of `pingpong --transport mpi`, of `replay
--transport mpi` or of `cluster ring | pairs | mbw | coll`; a DGEMM child of `node compute`),
PLAN is its plan as a JSON object, which is parsed here and handed to the suite's
``rank(plan)`` for that kind; it sends its result back on marked lines of standard
output (beoperf.launch.channel) and returns the exit status (BadSpec: the plan is not
one of that kind).

The suite's module is imported by name, from :data:`KINDS` only (a literal table that
tests/test_architecture.py reads and checks against the layer rules), so that a DGEMM
child loads no MPI and an MPI rank is prepared (its MPI chosen) before mpi4py loads.
"""

from __future__ import annotations

import importlib
import json
import sys

from beoperf import errors

KINDS = {
    "pingpong": "beoperf.suites.mpi_pingpong",
    "replay": "beoperf.suites.mpi_replay",
    "cluster-ring": "beoperf.suites.cluster_ring",
    "cluster-pairs": "beoperf.suites.cluster_pairs",
    "cluster-mbw": "beoperf.suites.cluster_mbw",
    "cluster-rma": "beoperf.suites.cluster_rma",
    "cluster-bibw": "beoperf.suites.cluster_p2p",
    "cluster-incast": "beoperf.suites.cluster_p2p",
    "cluster-bisect": "beoperf.suites.cluster_p2p",
    "cluster-coll": "beoperf.suites.cluster_coll",
    "dgemm": "beoperf.suites.node_dgemm",
}
USAGE = ("usage: python -m beoperf.cli.rank KIND PLAN (KIND: "
         f"{', '.join(KINDS)}): a child that beoperf launches, not a command")


def plan_of(text: str) -> dict | None:
    """The plan (a JSON object), or None if it is not one."""
    try:
        plan = json.loads(text)
    except ValueError:
        return None
    return plan if isinstance(plan, dict) else None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    plan = plan_of(args[1]) if len(args) == 2 and args[0] in KINDS else None
    if plan is None:
        print(USAGE, file=sys.stderr)
        return 2
    module = importlib.import_module(KINDS[args[0]])
    try:
        return int(module.rank(plan))
    except errors.BadSpec as exc:
        print(f"beoperf.cli.rank {args[0]}: not a plan of this kind ({exc})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
