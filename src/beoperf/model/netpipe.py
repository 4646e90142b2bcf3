"""NetPIPE's text output format (np.out), written and read.

NPtcp 3.7 writes one line per message size: ``"%8d %lf %12.8lf"`` with
bytes, throughput in "Mbps" where 1 Mbps = 2**20 bits/s, and the one-way time
in **seconds** (half the round trip), from the fastest of its trials.
beoperf writes the same columns, units and statistic so existing NetPIPE
scripts and plots keep working.
"""

from __future__ import annotations

from pathlib import Path

from beoperf import safeio
from beoperf.model.pingpong import ResultFormatError, RunResult

NETPIPE_MBPS = 2.0**20


def netpipe_lines(run: RunResult) -> list[str]:
    """One NetPIPE line per size, with NetPIPE's statistic (the fastest trial's mean),
    so that the numbers mean what they mean in NetPIPE's own files."""
    factor = 2 if run.parameters.get("mode") == "bidir" else 1
    lines = []
    for s in run.sizes:
        seconds = (s.time_us.get("best_trial_mean") or s.central_time_us()) * 1e-6
        moved = factor * s.size  # NetPIPE's bidir rows count both directions' bytes
        mbps = moved * 8.0 / seconds / NETPIPE_MBPS
        lines.append(f"{moved:8d} {mbps:f} {seconds:12.8f}")
    return lines


def read_netpipe(path: Path) -> list[tuple[int, float, float]]:
    """(bytes, NetPIPE Mbps, seconds) rows; ResultFormatError on anything else."""
    try:
        text = safeio.read_text(path, safeio.LIMITS["result"], "a result file")
    except safeio.FileInputError as exc:
        raise ResultFormatError(str(exc)) from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            rows.append((int(parts[0]), float(parts[1]), float(parts[2])))
        except (ValueError, IndexError):
            raise ResultFormatError(f"{path}:{number}: not a NetPIPE data line") from None
    if not rows:
        raise ResultFormatError(f"{path}: no NetPIPE data lines")
    return rows
