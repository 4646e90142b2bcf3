"""Time the monitor report (the suite, then the CLI's writer) on the synthetic 4-week database.

Target (issue 5): under 5 s on the 2-vCPU VM.  Each round is a fresh Python process
(so imports, numpy's and matplotlib's included, are paid every time, as by a user);
it times its own report (suites.monitor.report: the store's query and the analysis) and
write_report (cli/monitor.py: Markdown, JSON and the plots) and the parent times the
whole process.
The database is made by bench/make_monitor_db.py if missing.  The report's findings
are checked against the database's known truth and printed.

    python bench/bench_monitor_report.py [--db bench/out/monitor-4w.sqlite] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_monitor_db  # noqa: E402

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from beoperf.cli.monitor import write_report
from beoperf.suites import monitor
doc = monitor.report(monitor.ReportSpec(db=sys.argv[1], plots=True))
t1 = time.perf_counter()
paths = write_report(doc, sys.argv[2])
t2 = time.perf_counter()
print(json.dumps({"build_s": t1 - t0, "write_s": t2 - t1, "paths": paths}))
"""


def one_round(db: Path, outdir: Path) -> dict:
    """Wall and in-process seconds of one report in a fresh interpreter."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(db), str(outdir)], check=True,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return json.loads(done.stdout) | {"wall_s": wall}


def findings(outdir: Path) -> list[str]:
    """What the report found, next to what the database holds."""
    doc = json.loads((outdir / "report.json").read_text())["body"]
    s = doc["summary"]
    hours = sorted({e["start_utc"] % 86400 // 3600 for e in doc["congestion"]})
    return [
        f"probes {s['probes']:,}, answered {s['answered_pct']} %, uptime {s['uptime_pct']} %",
        f"outages {len(doc['outages'])} (truth {len(make_monitor_db.OUTAGES)}): "
        + ", ".join(f"{o['duration_s']:.0f} s {o['kind']}" for o in doc["outages"]),
        f"not monitored {len(doc['not_monitored'])} (truth 1): "
        + ", ".join(f"{g['duration_s']:.0f} s" for g in doc["not_monitored"]),
        f"congestion events {len(doc['congestion'])} (truth 28, 20:00-21:00 UTC), "
        f"starting in UTC hours {hours}",
        f"level shifts {len(doc['level_shifts'])} (truth 1): "
        + ", ".join(f"{x['from_ms']} -> {x['to_ms']} ms" for x in doc["level_shifts"]),
        f"bandwidth median {s['bandwidth_bps']['median'] / 1e6:.2f} Mbit/s (truth 100 off "
        "the congested hours, 40 in them)",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path("bench/out/monitor-4w.sqlite"))
    ap.add_argument("--out", type=Path, default=Path("bench/out/monitor-report"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not args.db.exists():
        print(f"writing {args.db} ...", flush=True)
        make_monitor_db.write(args.db, 28)
    rounds = [one_round(args.db, args.out) for _ in range(args.repeat)]
    print(f"{args.db}: report in {args.out}")
    print("| measure | median s | rounds |")
    print("|---|---|---|")
    for key, label in (("build_s", "report (with imports)"),
                       ("write_s", "write_report (md, json, 4 PNG)"),
                       ("wall_s", "whole process")):
        values = [r[key] for r in rounds]
        print(f"| {label} | {statistics.median(values):.2f} | "
              f"{', '.join(f'{v:.2f}' for v in values)} |")
    print(*findings(args.out), sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
