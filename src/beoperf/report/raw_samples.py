"""Every sample of a ping-pong sweep as CSV (``beoperf pingpong --raw-samples FILE``).

One row per timed repetition: ``size,trial,iteration,seconds``: the message size in
bytes, the trial's number within its size in the order measured (0: the calibration
trial), the repetition's number within the trial (warm-up repetitions left out, as in
the document) and the time in seconds as the document counts it (one-way: half the
round trip in ping-pong mode; one exchange in bidir mode).  Sizes ascend.

A long run could make gigabytes, so at most CAP rows are written (the first ones, in
that order) and the caller warns when the cap cut the file; the document's histogram
keeps every sample whatever the cap.
"""

from __future__ import annotations

import io

import numpy as np

CAP = 2_000_000  # rows: about 60 MB of CSV
HEADER = "size,trial,iteration,seconds\n"


def raw_csv(samples: dict[int, list[np.ndarray]], cap: int = CAP) -> tuple[bytes, int, int]:
    """The CSV text of ``samples`` (size -> one array of one-way ns per trial), with the
    rows written and the rows there were."""
    out = io.BytesIO()
    out.write(HEADER.encode())
    total = sum(len(chunk) for chunks in samples.values() for chunk in chunks)
    written = 0
    for size in sorted(samples):
        for trial, chunk in enumerate(samples[size]):
            take = min(len(chunk), cap - written)
            if take <= 0:
                return out.getvalue(), written, total
            rows = np.column_stack([np.full(take, size), np.full(take, trial),
                                    np.arange(take), np.asarray(chunk[:take]) * 1e-9])
            np.savetxt(out, rows, fmt=("%d", "%d", "%d", "%.12g"), delimiter=",")
            written += take
    return out.getvalue(), written, total
