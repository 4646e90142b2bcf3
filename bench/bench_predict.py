"""Predicted against replayed communication time on shaped namespace links.

For each tbf rate and MTU (both ends of a veth pair, tests/predict_links.py says how
they are shaped): `beoperf pingpong` measures the link, `beoperf replay` sends a mixed
profile (64 B to 256 KiB) over it, and `beoperf predict` prices the profile from the
same link's model and from every other link's model scaled to this link's rate.  Prints
the table bench/RESULTS.md records (error = predicted / replayed - 1) with the load
average before and after; the raw documents stay in OUT.

    python bench/bench_predict.py --rates 50,100,200 --mtus 1500,9000 --out bench/out
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import netns  # noqa: E402
import predict_links as pl  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="50,100,200", help="tbf rates in Mbit/s")
    ap.add_argument("--mtus", default="1500,9000")
    ap.add_argument("--budget", type=float, default=8.0, help="sweep time budget (s)")
    ap.add_argument("--repeats", type=int, default=3, help="replay repeats")
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--report", metavar="DIR", help="predict again from a run's documents "
                                                   "(no measuring)")
    args = ap.parse_args()
    if args.report:
        return again(Path(args.report))
    ok, why = netns.can_use_netns()
    if not ok:
        print(f"needs network namespaces: {why}", file=sys.stderr)
        return 1
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) / f"predict-{stamp}"
    out.mkdir(parents=True)
    profile = out / "mixed.csv"
    profile.write_text(pl.PROFILE)
    links = [pl.Link(float(r), int(m)) for m in args.mtus.split(",")
             for r in args.rates.split(",")]
    load0, started = os.getloadavg(), time.monotonic()
    with pl.hosts() as (server, client):
        for link in links:
            pl.measure(server, client, link, out, budget=args.budget, repeats=args.repeats,
                       profile=profile)
            print(f"{link.name}: replayed {link.replayed_s * 1e3:.1f} ms "
                  f"(sweep {link.seconds['sweep']:.0f} s, replay {link.seconds['replay']:.0f} s)",
                  file=sys.stderr)
    load1 = os.getloadavg()
    record = {"utc": stamp, "argv": sys.argv, "load_before": load0, "load_after": load1,
              "links": [{"name": k.name, "seconds": k.seconds} for k in links]}
    (out / "results.json").write_text(json.dumps(record, indent=1))  # measured: kept
    rows = pl.predictions(links, profile, out)
    git = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip()
    record = {"utc": stamp, "git": git, "argv": sys.argv, "load_before": load0,
              "load_after": load1, "seconds": round(time.monotonic() - started, 1),
              "links": [{"name": k.name, "replayed_s": k.replayed_s,
                         "replay_range": k.replay_range, "seconds": k.seconds}
                        for k in links],
              "rows": [{**r.__dict__, "error": r.error} for r in rows],
              "summary": pl.summary(rows)}
    (out / "results.json").write_text(json.dumps(record, indent=1))
    print(f"UTC {stamp}, git {git}, load average {load0[0]:.2f} before, {load1[0]:.2f} after, "
          f"{record['seconds']} s; documents in {out}")
    print("\n".join(pl.table(rows)))
    print(json.dumps(record["summary"]))
    return 0


def again(out: Path) -> int:
    """The table of an earlier run, predicted again from its stored documents."""
    record = json.loads((out / "results.json").read_text())
    links = []
    for k in record["links"]:
        rate, mtu = k["name"].split("mbit-mtu")
        link = pl.Link(float(rate), int(mtu), out / f"{k['name']}.json",
                       out / f"{k['name']}-replay.json")
        total = json.loads(link.replay.read_text())["body"]["total_s"]
        link.replayed_s, link.replay_range = total["median"], (total["min"], total["max"])
        links.append(link)
    rows = pl.predictions(links, out / "mixed.csv", out)
    print("\n".join(pl.table(rows)))
    print(json.dumps(pl.summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
