"""Progress of long work (issue 25, item 7): without a terminal at most a line per phase,
and one line at the end of what missed its precision."""

from __future__ import annotations

import subprocess
import sys

from beoperf.cli.progress import (
    CountBar,
    PartsProgress,
    PassLines,
    Progress,
    precision_summary,
)
from helpers import child_env


def test_cluster_pass_lines_become_a_line_per_measurement_and_a_summary():
    """470 lines of passes (as `cluster ring` printed) over two measurements, piped: two
    lines, each measurement's first; other lines pass through; the summary says which
    missed its precision, from each one's last pass."""
    said: list[str] = []
    lines = PassLines(Progress(None, enabled=False), say=said.append)
    lines("launching 4 ranks")
    for n in range(1, 236):
        lines(f"ring latency: pass {n}, {min(n, 12)} of 40 figures within 5%")
    for n in range(1, 236):
        lines(f"ring bandwidth: pass {n}, 8 of 8 figures within 5%")
    assert said == ["launching 4 ranks",
                    "ring latency: measuring (a line per pass on a terminal only)",
                    "ring bandwidth: measuring (a line per pass on a terminal only)"]
    assert lines.summary() == ("precision not reached: ring latency 28 of 40 figures "
                               "outside 5% after 235 passes")
    done = PassLines(Progress(None, enabled=False), say=said.append)
    done("pairs: pass 3, 6 of 6 figures within 5%")
    assert done.summary() == "precision: every figure of 1 measurement(s) reached it"
    assert PassLines(Progress(None, enabled=False), say=said.append).summary() is None


def test_a_piped_sweep_prints_a_line_per_value_not_per_pass(tmp_path):
    """`pingpong --sweep` with stderr not a terminal: the plan, then one line per value
    on stderr, however many passes each took; each value's summary on stdout."""
    values = ["64K", "128K", "256K"]
    res = subprocess.run([sys.executable, "-m", "beoperf", "pingpong", "--sizes", "1,1K",
                          "--time-budget", "0.5", "--history", "off", "--sweep",
                          f"sndbuf={','.join(values)}", "-o", str(tmp_path / "S")],
                         capture_output=True, text=True, env=child_env(), timeout=300)
    assert res.returncode == 0, res.stderr
    err = [line for line in res.stderr.splitlines() if line.strip()]
    assert err[0].startswith("== --sweep sndbuf: 3 values x 0.5 s")
    assert err[1:] == [f"== sndbuf={v} ({i + 1} of 3), at most 0.5 s"
                       for i, v in enumerate(values)]
    assert [line for line in res.stdout.splitlines() if line.startswith("== ")] == \
        [f"== sndbuf={v}" for v in values]


def test_the_node_suite_prints_a_line_per_part_and_what_missed_its_precision():
    """`node` piped: one line when each part starts however many passes its kernels take
    (it had a spinner and nothing else); the end names the figures short of precision."""
    said: list[str] = []
    parts = ["stream", "kernels", "io"]
    with PartsProgress(parts, enabled=False, say=said.append) as progress:
        progress("stream: 1 thread, 5 repetitions")
        progress("stream: 2 threads, 5 repetitions")
        for n in range(1, 50):
            progress(f"kernels: daxpy pass {n}, 3/10 lengths within 2%")
        progress("io: /tmp, 10 MiB file, repetition 1/3")
    assert said == ["part 1 of 3: stream", "part 2 of 3: kernels", "part 3 of 3: io"]
    metrics = [{"part": "kernels", "converged": c} for c in (True, False, False)] + \
        [{"part": "stream"}]
    assert precision_summary(metrics, 0.02) == \
        "precision not reached: kernels 2 of 3 figures outside 2%"
    assert precision_summary([{"part": "kernels", "converged": True}]) is None


class Recorder(Progress):
    """A bar that records what it is told instead of drawing."""

    def __init__(self) -> None:
        super().__init__(None, enabled=True)
        self.restarts: list[float | None] = []

    def __enter__(self) -> Recorder:
        return self

    def restart(self, budget_s: float | None) -> None:
        self.restarts.append(budget_s)

    def update(self, text: str) -> None:
        pass


def test_each_cluster_measurement_restarts_the_bar_on_its_budget():
    """On a terminal the cluster tests' bar runs over each measurement's time budget (its
    ETA), starting over when the next measurement begins."""
    bar = Recorder()
    lines = PassLines(bar, say=lambda _line: None, budget_s=120.0)
    for n in range(1, 4):
        lines(f"ring latency: pass {n}, 2 of 8 figures within 5%")
    lines("ring bandwidth: pass 1, 1 of 8 figures within 5%")
    assert bar.restarts == [120.0, 120.0]


def test_a_count_bar_off_a_terminal_draws_nothing():
    with CountBar(enabled=False) as bar:
        bar(54)
        bar(0)
    assert bar._bar is None
