#!/usr/bin/env python3
"""CPU and memory of `beoperf monitor` at the default schedule, side by side with the
published shell loop around ping, over the same wall time in one run.

    python bench/bench_monitor.py --seconds 600 [--host 127.0.0.1]

Both run as child processes at the same time against the same host (loopback by
default); each is stopped with SIGTERM and its resource usage read from wait4(): user +
system CPU seconds (its waited-for children included, so the loop's pings count) and the
largest resident set of the process or any child it waited for.  Prints a Markdown table
and the ratios monitor/loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

LOOP = ("while true; do ping -q -c 3 -s 8 -i 1 {h} >/dev/null; "
        "ping -q -c 1 -s 20000 {h} >/dev/null; sleep 5; done")


def finish(proc: subprocess.Popen) -> tuple[float, float, int]:
    """SIGTERM, wait4; (user s, system s, max RSS KiB)."""
    os.killpg(proc.pid, signal.SIGTERM)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return usage.ru_utime, usage.ru_stime, usage.ru_maxrss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args()
    if shutil.which("ping") is None:
        print("bench_monitor: ping (iputils-ping) is needed for the reference loop",
              file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="bench-monitor-")
    db = os.path.join(tmp, "m.db")
    monitor = subprocess.Popen([sys.executable, "-m", "beoperf", "monitor", args.host,
                                "--db", db, "--start-offset", "0"],
                               stdout=subprocess.DEVNULL, start_new_session=True)
    loop = subprocess.Popen(["bash", "-c", LOOP.format(h=args.host)],
                            stdout=subprocess.DEVNULL, start_new_session=True)
    time.sleep(args.seconds)
    m_user, m_sys, m_rss = finish(monitor)
    l_user, l_sys, l_rss = finish(loop)
    import sqlite3

    probes = sqlite3.connect(db).execute("SELECT count(*), sum(outcome='ok') FROM probes") \
        .fetchone()
    m_cpu, l_cpu = m_user + m_sys, l_user + l_sys
    print(f"| {args.seconds:.0f} s, host {args.host} | CPU s (user+sys) | CPU % of one core "
          "| max RSS MiB |")
    print("|---|---|---|---|")
    print(f"| beoperf monitor ({probes[0]} probes, {probes[1]} answered) | {m_cpu:.2f} | "
          f"{100 * m_cpu / args.seconds:.3f} | {m_rss / 1024:.1f} |")
    print(f"| ping shell loop | {l_cpu:.2f} | {100 * l_cpu / args.seconds:.3f} | "
          f"{l_rss / 1024:.1f} |")
    print(f"\nratio monitor/loop: CPU {m_cpu / max(l_cpu, 1e-9):.2f}, "
          f"max RSS {m_rss / max(l_rss, 1):.2f}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
