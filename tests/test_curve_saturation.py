"""The saturation point's definition and the README's worked example (issue 28, item 8):
on a Hockney curve t(n) = L + n/B the local slope d log t / d log n is n/(n + L*B), which
is also the throughput's share of B, so beoperf's rule (slope >= 0.9 from there on) is the
size from which throughput stays at 90% of the asymptotic rate or more."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from beoperf.analysis.curve import SATURATED_SLOPE, analyze, local_slopes
from beoperf.sweep.schedule import netpipe_schedule

README = Path(__file__).parent.parent / "README.md"
LATENCY_US, RATE_BPS = 28.0, 900e6  # the README's example: Gigabit TCP, 28 us, 900 Mbit/s
SHOWN = (2048, 4096, 8192, 16384, 32768, 65536)


def example() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = np.array(netpipe_schedule(), float)
    t = LATENCY_US + n * 8e6 / RATE_BPS
    return n, t, n * 8.0 / (t * 1e-6)


def example_lines() -> list[str]:
    """The worked example's table rows, as the README prints them."""
    n, t, bps = example()
    s = local_slopes(n, t)
    rows = []
    for size in SHOWN:
        k = int(np.nonzero(n == size)[0][0])
        rows.append(f"| {size:>6} | {t[k]:7.2f} | {bps[k] / 1e6:5.0f} | {bps[k] / RATE_BPS:5.1%}"
                    f" | {s[k]:5.3f} |")
    return rows


def test_the_slope_of_a_hockney_curve_is_its_throughputs_share_of_the_rate():
    """Exactly for the derivative; beoperf's slope, a line through the sizes one octave
    either side, stays within 0.05 of it (0.045 at the knee's perturbed sizes)."""
    n, t, bps = example()
    share = bps / RATE_BPS
    assert np.abs(local_slopes(n, t) - share).max() < 0.05
    shown = np.isin(n, SHOWN)
    assert np.abs(local_slopes(n, t)[shown] - share[shown]).max() < 0.01


def test_the_readme_works_the_saturation_point_out_on_the_example():
    n, t, bps = example()
    a = analyze(n.astype(int).tolist(), t.tolist(), [None] * n.size, bps.tolist())
    text = README.read_text()
    for row in example_lines():
        assert row in text, row
    assert f"saturation point {a.saturation_size} B" in text
    assert f"n1/2 {a.n_half:.0f} B" in text
    k = int(np.nonzero(n == a.saturation_size)[0][0])
    assert local_slopes(n, t)[k] >= SATURATED_SLOPE > local_slopes(n, t)[k - 1]
    assert bps[k] / RATE_BPS == pytest.approx(SATURATED_SLOPE, abs=0.02)
