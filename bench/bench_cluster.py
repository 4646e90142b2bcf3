"""What `beoperf cluster hpcc` costs on top of the HPCC runs it orchestrates.

Side by side, in the same order and with the same input file:

- by hand: for each repeat and process count, a fresh directory with the hpccinf.txt
  beoperf would write, and ``mpirun.openmpi -np P --bind-to none [--allow-run-as-root]
  hpcc`` in it (the ten runs of ``--np 1,2 --repeat 5``), timed as a whole; each mpirun
  in a session of its own as beoperf starts them (with the kernel's autogroup
  scheduling, ``/proc/sys/kernel/sched_autogroup_enabled``, a new session is also a new
  CPU share: on a shared machine that alone made beoperf's runs up to 2x faster than
  the same mpirun started in the benchmark's session);
- beoperf: ``python -m beoperf cluster hpcc --np 1,2 --repeat 5 --n N -o DIR --quiet``
  as a subprocess (Python's start, planning, launching, parsing, writing ten documents
  and the scaling document included), timed as a whole.

The two alternate for ``--rounds`` rounds, in the order by hand, beoperf, then beoperf,
by hand, and so on (ABBA), so that a busy spell of the shared machine, or a load that
drifts, hits both alike.  Reported: each total, the overhead
(beoperf - by hand) / beoperf, and beoperf's own account of its orchestration (its wall
time minus the time its ten launcher processes ran, from the documents), which does not
depend on the runs' noise.  The load average before and after is printed.

Usage::

    python bench/bench_cluster.py [--n 1000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from beoperf.model import hpcc  # noqa: E402
from helpers import child_env  # noqa: E402

COUNTS = (1, 2)
REPEAT = 5


def by_hand(n: int, root: Path) -> float:
    """The ten mpirun runs one after the other (repeat by repeat, as beoperf orders them)."""
    mpirun, binary = shutil.which("mpirun.openmpi"), shutil.which("hpcc")
    root_flag = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    start = time.perf_counter()
    for repeat in range(1, REPEAT + 1):
        for np_ in COUNTS:
            rundir = root / f"np{np_}-r{repeat}"
            rundir.mkdir(parents=True)
            p, q = hpcc.square_grid(np_)
            (rundir / "hpccinf.txt").write_text(hpcc.Input(n, 80, p, q).text())
            # in a session of its own, as beoperf starts each launcher (to end its process
            # group): with the kernel's autogroup scheduling a session is also a CPU share
            subprocess.run([mpirun, "-np", str(np_), "--bind-to", "none", *root_flag, binary],
                           cwd=rundir, check=True, start_new_session=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def with_beoperf(n: int, out: Path) -> tuple[float, float]:
    """(wall seconds, seconds its launcher processes ran) of the same study."""
    argv = [sys.executable, "-m", "beoperf", "cluster", "hpcc", "--np",
            ",".join(map(str, COUNTS)), "--repeat", str(REPEAT), "--n", str(n), "-o",
            str(out), "--quiet", "--format", "json"]
    start = time.perf_counter()
    proc = subprocess.run(argv, check=True, capture_output=True, text=True,
                          env=child_env())
    wall = time.perf_counter() - start
    runs = json.loads(proc.stdout)["body"]["runs"]
    assert len(runs) == len(COUNTS) * REPEAT and all(r["status"] == "ok" for r in runs)
    return wall, sum(r["elapsed_s"] for r in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="HPL's N (default 1000)")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        for r in range(args.rounds):
            if r % 2 == 0:
                hand = by_hand(args.n, Path(tmp) / f"hand{r}")
                wall, launched = with_beoperf(args.n, Path(tmp) / f"beoperf{r}")
            else:
                wall, launched = with_beoperf(args.n, Path(tmp) / f"beoperf{r}")
                hand = by_hand(args.n, Path(tmp) / f"hand{r}")
            rows.append((hand, wall, launched))
            print(f"round {r + 1}: by hand {hand:.2f} s, beoperf {wall:.2f} s "
                  f"(overhead {(wall - hand) / wall:+.2%}); beoperf's own orchestration "
                  f"{wall - launched:.2f} s = {(wall - launched) / wall:.2%} of its wall time")
    hand = sum(r[0] for r in rows)
    wall = sum(r[1] for r in rows)
    launched = sum(r[2] for r in rows)
    print(f"all rounds: by hand {hand:.2f} s, beoperf {wall:.2f} s, overhead "
          f"{(wall - hand) / wall:+.2%}; orchestration {wall - launched:.2f} s = "
          f"{(wall - launched) / wall:.2%}")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
