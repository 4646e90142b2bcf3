"""A rank of an MPI job that `beoperf cluster ring | pairs | mbw` launched.

``python -m beoperf.suites.cluster_mpi_rank PLAN`` (PLAN: the test, its parameters and
the precision loop's settings, as JSON): rank 0 measures and prints its series' document
on one marked line of standard output, then any error on another, *before* MPI_Finalize
(a library that hangs in MPI_Finalize cannot take the result with it); the other ranks
carry out rank 0's orders.  SIGUSR1, which mpirun and hydra forward to the ranks, stops
rank 0 after its current trial, as Ctrl-C does; other ranks ignore it.
"""

from __future__ import annotations

import json
import signal
import sys

from beoperf import errors, interrupts, safeio
from beoperf.launch import ranks
from beoperf.suites.cluster_mpi import as_rank
from beoperf.suites.mpi_job import ERROR_MARKER, MARKER, error_text

TESTS = ("ring", "pairs", "mbw")


def _stop(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def plan_from(text: str) -> dict:
    """The plan the launcher passed; ValueError if it is not one."""
    plan = json.loads(text)
    if not isinstance(plan, dict) or plan.get("test") not in TESTS:
        raise ValueError("not a cluster test plan")
    return plan


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    info = ranks.rank_of()
    try:
        plan = plan_from(args[0]) if info is not None and len(args) == 1 else None
    except ValueError:
        plan = None
    if plan is None:
        print("beoperf.suites.cluster_mpi_rank: run by 'beoperf cluster ring|pairs|mbw' as "
              "a rank of an MPI job", file=sys.stderr)
        return 2
    assert info is not None
    if info.rank == 0:
        signal.signal(signal.SIGUSR1, _stop)
    else:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    with interrupts.handling():
        try:
            outcome = as_rank(plan, info)
        except errors.BeoperfError as exc:
            if info.rank == 0:
                print(ERROR_MARKER + error_text(exc), flush=True)
            else:
                print(f"beoperf rank {info.rank}: {exc}", file=sys.stderr)
            return 1
    if outcome is not None:
        print(MARKER + safeio.dump_json(outcome.document.to_json(), indent=None).rstrip(),
              flush=True)
        if outcome.error is not None:
            print(ERROR_MARKER + error_text(outcome.error), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
