"""Write a synthetic 4-week monitor database at the default schedule, with known events.

One cycle per 9 s (3 probes of 8 B, 1 s apart, then one of 20,000 B), ICMP, from
Monday 2026-11-02 00:00 UTC for 28 days: ~268,800 cycles, ~1.07 M probe rows.
What is in it (the truth a report should find):

- path: one-way 10 ms (RTT 20 ms, IQR of RTT ~0.4 ms), bandwidth 100 Mbit/s;
- every day 20:00-21:00 UTC congestion: RTT +8 ms, 5x the dispersion, 2 % loss,
  bandwidth 40 Mbit/s;
- a level shift (path change) on day 18 at 06:00: RTT 20 -> 26 ms, same dispersion,
  until the end;
- outages: day 5 03:00-03:20 (timeout), day 12 14:00-14:05 (unreachable), day 20
  09:00-11:00 (timeout);
- not monitored: day 15 10:00-12:00 (the monitor was stopped; a second run follows);
- 0.1 % random loss everywhere.

    python bench/make_monitor_db.py [--out bench/out/monitor-4w.sqlite] [--days 28]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from beoperf.monitor import store

T0 = 1793577600.0  # 2026-11-02T00:00:00Z, a Monday
DAY = 86400.0
PERIOD_S = 9.0
SMALL, LARGE = 8, 20000
SCHEDULE = [{"size": SMALL, "count": 3, "spacing_s": 1.0},
            {"size": LARGE, "count": 1, "spacing_s": 5.0}]
BASE_RTT_US, SHIFT_RTT_US = 20_000.0, 26_000.0
BANDWIDTH_BPS, CONGESTED_BPS = 100e6, 40e6
SHIFT_AT = T0 + 17 * DAY + 6 * 3600
OUTAGES = [(T0 + 4 * DAY + 3 * 3600, T0 + 4 * DAY + 3 * 3600 + 1200, "timeout"),
           (T0 + 11 * DAY + 14 * 3600, T0 + 11 * DAY + 14 * 3600 + 300, "unreachable"),
           (T0 + 19 * DAY + 9 * 3600, T0 + 19 * DAY + 11 * 3600, "timeout")]
GAP = (T0 + 14 * DAY + 10 * 3600, T0 + 14 * DAY + 12 * 3600)
BATCH = 200_000  # rows per transaction


def probe_times(days: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(run id, cycle number, cycle start UTC s) of every cycle, the gap left out."""
    starts = T0 + PERIOD_S * np.arange(int(days * DAY / PERIOD_S))
    keep = (starts < GAP[0]) | (starts >= GAP[1])
    starts = starts[keep]
    run = np.where(starts < GAP[0], 1, 2)
    cycle = np.where(run == 1, np.arange(starts.size),
                     np.arange(starts.size) - np.count_nonzero(run == 1))
    return run, cycle, starts


def congested(t: np.ndarray) -> np.ndarray:
    """True in the daily congested hour, 20:00-21:00 UTC."""
    return ((t - T0) % DAY // 3600) == 20


def rtts(t: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Synthetic RTT (µs) of probes of `size` bytes sent at `t`."""
    busy = congested(t)
    base = np.where(t >= SHIFT_AT, SHIFT_RTT_US, BASE_RTT_US) + np.where(busy, 8000.0, 0.0)
    noise = rng.gamma(2.0, 150.0, t.size) * np.where(busy, 5.0, 1.0)
    if size > SMALL:
        bps = np.where(busy, CONGESTED_BPS, BANDWIDTH_BPS)
        base = base + 2 * (size - SMALL) * 8 / bps * 1e6
    return base + noise


def outcomes(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Outcome of each probe: random and congestion loss, then the outages."""
    lost = rng.random(t.size) < np.where(congested(t), 0.02, 0.001)
    out = np.where(lost, "timeout", "ok").astype(object)
    for lo, hi, kind in OUTAGES:
        out[(t >= lo) & (t < hi)] = kind
    return out


def rows(days: int, seed: int = 5) -> list[tuple]:
    """All probe rows, in time order, as store.probes tuples (without the id)."""
    rng = np.random.default_rng(seed)
    run, cycle, starts = probe_times(days)
    slot_offsets = np.array([0.0, 1.0, 2.0, 3.0])
    t = (starts[:, None] + slot_offsets).ravel()
    sizes = np.tile([SMALL, SMALL, SMALL, LARGE], starts.size)
    rtt = np.where(sizes == SMALL, rtts(t, SMALL, rng), rtts(t, LARGE, rng))
    outcome = outcomes(t, rng)
    rtt_list = [float(r) if o == "ok" else None for r, o in zip(rtt.tolist(), outcome, strict=True)]
    wire = np.where(sizes == SMALL, SMALL + 28, LARGE + 28 * 14)
    return list(zip(np.repeat(run, 4).tolist(), np.repeat(cycle, 4).tolist(),
                    np.tile([0, 1, 2, 3], starts.size).tolist(), t.tolist(), sizes.tolist(),
                    wire.tolist(), ["icmp"] * t.size, outcome.tolist(), rtt_list,
                    [None] * t.size, strict=True))


def write(path: Path, days: int) -> int:
    """Create the database at `path` (replacing it); the number of probe rows."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = store.connect(str(path))
    config = {"period_s": PERIOD_S, "schedule": SCHEDULE, "timeout_s": 2.0}
    for started, ended in ((T0, GAP[0]), (GAP[1], T0 + days * DAY)):
        run_id = store.start_run(db, host="peer.example", address="198.51.100.7",
                                 transport="icmp", period_s=PERIOD_S, config=config,
                                 started_utc=started)
        store.end_run(db, run_id, "synthetic", ended_utc=ended)
    data = rows(days)
    for i in range(0, len(data), BATCH):
        with store.transaction(db):
            db.executemany("INSERT INTO probes (run_id, cycle, slot, t_utc, size, wire_bytes, "
                           "transport, outcome, rtt_us, error) VALUES (?,?,?,?,?,?,?,?,?,?)",
                           data[i:i + BATCH])
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return len(data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench/out/monitor-4w.sqlite"))
    ap.add_argument("--days", type=int, default=28)
    args = ap.parse_args()
    t0 = time.perf_counter()
    n = write(args.out, args.days)
    print(f"{args.out}: {n:,} probes, {os.path.getsize(args.out) / 1e6:.0f} MB, "
          f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
