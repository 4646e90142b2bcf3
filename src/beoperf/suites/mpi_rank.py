"""A rank of an MPI job that `beoperf pingpong --transport mpi` launched.

``python -m beoperf.suites.mpi_rank SPEC`` (SPEC: the sweep's spec as JSON): rank 0
measures and prints its document on one marked line of standard output, then any error
on another, *before* MPI_Finalize, so that a library that hangs in MPI_Finalize cannot
take the result with it (the launching process reads the lines and ends the job at its
deadline).  SIGUSR1, which mpirun and hydra forward to the ranks, stops rank 0's sweep
after its current trial, as Ctrl-C does; other ranks ignore it.
"""

from __future__ import annotations

import signal
import sys

from beoperf import errors, interrupts, safeio
from beoperf.launch import ranks
from beoperf.suites.mpi_job import ERROR_MARKER, MARKER, error_text
from beoperf.suites.mpi_pingpong import on_stop_signal, run_as_rank, spec_from_text


def _stop(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    info = ranks.rank_of()
    if info is None or len(args) != 1:
        print("beoperf.suites.mpi_rank: run by 'beoperf pingpong --transport mpi' as a rank "
              "of an MPI job", file=sys.stderr)
        return 2
    spec = spec_from_text(args[0])
    if info.rank == 0:
        on_stop_signal(_stop)
    else:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    with interrupts.handling():
        try:
            measured = run_as_rank(spec, info)
        except errors.BeoperfError as exc:
            if info.rank == 0:
                print(ERROR_MARKER + error_text(exc), flush=True)
            else:
                print(f"beoperf rank {info.rank}: {exc}", file=sys.stderr)
            return 1
    if measured is not None:
        print(MARKER + safeio.dump_json(measured.document.to_json(), indent=None).rstrip(),
              flush=True)
        if measured.error is not None:
            print(ERROR_MARKER + error_text(measured.error), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
