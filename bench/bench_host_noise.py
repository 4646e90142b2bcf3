"""How much the probing host's own CPU state moves a fast path's RTT.

Two namespace hosts (tests/netns.py, one veth pair) and `beoperf monitor` (ICMP, six
8-byte probes every 0.5 s) between them; the path never changes, only the host's
load: phases with 0, 1 and 2 busy-loop processes (the machine's CPUs spinning instead
of idling), then idle again.  Prints the small-probe RTT median, IQR and p95 of each
phase.  This is the noise a userspace prober adds by itself, which the report's
events.NOISE_FLOOR_US keeps from being called congestion.

    python bench/bench_host_noise.py [--phase-seconds 20]
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import netns  # noqa: E402

SPIN = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"


def phase(label: str, spinners: int, seconds: float) -> tuple[str, float, float]:
    procs = [subprocess.Popen([sys.executable, "-c", SPIN.format(s=seconds)])
             for _ in range(spinners)]
    t0 = time.time()
    if procs:
        for p in procs:
            p.wait()
    else:
        time.sleep(seconds)
    return label, t0, time.time()


def stats(db: Path, t0: float, t1: float) -> tuple[int, float, float, float]:
    con = sqlite3.connect(db)
    rtt = np.array([r[0] for r in con.execute(
        "SELECT rtt_us FROM probes WHERE outcome = 'ok' AND size = 8 AND t_utc >= ? "
        "AND t_utc < ?", (t0 + 1.0, t1))], dtype=float)  # 1 s for the load to settle
    con.close()
    q25, q50, q75, q95 = np.percentile(rtt, (25, 50, 75, 95))
    return rtt.size, q50, q75 - q25, q95


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase-seconds", type=float, default=20.0)
    args = ap.parse_args()
    ok, reason = netns.can_use_netns()
    if not ok:
        print(f"bench_host_noise: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, netns.VethPair(2) as topo:
        server, client = topo.hosts
        db = Path(tmp) / "noise.db"
        mon = client.popen([sys.executable, "-m", "beoperf", "monitor", server.addr4,
                            "--db", db, "--step", "8:6:0.05", "--step", "20000:1:0.2",
                            "--start-offset", "0"], stdout=subprocess.DEVNULL)
        try:
            time.sleep(3.0)
            phases = [phase(label, n, args.phase_seconds)
                      for label, n in (("idle", 0), ("1 spinner", 1), ("2 spinners", 2),
                                       ("idle again", 0))]
        finally:
            mon.send_signal(signal.SIGTERM)
            mon.wait(timeout=20)
        print("| host load | small probes | median RTT µs | IQR µs | p95 µs |")
        print("|---|---|---|---|---|")
        for label, t0, t1 in phases:
            n, med, iqr, p95 = stats(db, t0, t1)
            print(f"| {label} | {n} | {med:.1f} | {iqr:.1f} | {p95:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
