"""Prediction against replay on shaped namespace links (the test and the benchmark).

Two namespace hosts joined by a veth pair (tests/netns.py); for each link (a tbf rate
and an MTU, set on both ends): `beoperf pingpong` measures the model, `beoperf replay`
sends the profile, and `beoperf predict` prices the same profile from the same link's
model, and from every other link's model scaled to this link's rate.  Both ends shape
their egress with tbf at the rate, a peak rate 1% above it and a peak bucket of one
frame (MTU + 64 bytes): a message of one frame crosses at veth speed (the peak bucket
holds it), every later byte is paced at the rate, so ping-pong cannot borrow a full
token bucket's burst (tests/test_netns.py's ``shape``).  The model sees the same shaper
as the replay: the first frame free, then the rate; its pieces say so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import netns

PORT = "5299"
# NetPIPE's nominal sizes (2^k and 1.5 x 2^k) from 1 B to 256 KiB, no perturbation
SIZES = "1,2,3,4,6,8,12,16,24,32,48,64,96,128,192,256,384,512,768,1K,1536,2K,3K,4K,6K,8K," \
        "12K,16K,24K,32K,48K,64K,96K,128K,192K,256K"
PROFILE = """size,count,pattern
64,2000,pingpong
1000,1000,pingpong
4096,200,pingpong
20000,100,pingpong
65536,40,pingpong
262144,10,pingpong
"""


@dataclass
class Link:
    rate_mbit: float
    mtu: int
    sweep: Path | None = None
    replay: Path | None = None
    replayed_s: float | None = None
    replay_range: tuple[float, float] | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.rate_mbit:g}mbit-mtu{self.mtu}"

    @property
    def rate(self) -> str:
        return f"{self.rate_mbit:g}Mbit/s"


def shape(host: netns.Host, rate_mbit: float, mtu: int) -> None:
    """tbf at the rate, peak rate 1% above it, a peak bucket of one frame."""
    host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf",
              "rate", f"{rate_mbit:g}mbit", "burst", "32kb", "latency", "100ms",
              "peakrate", f"{rate_mbit * 1.01:g}mbit", "mtu", str(mtu + 64)])


def beoperf(host: netns.Host, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    res = host.run([sys.executable, "-m", "beoperf", *args], check=False, timeout=timeout)
    assert res.returncode == 0, f"beoperf {' '.join(args)}: {res.stderr}"
    return res


@contextmanager
def hosts() -> Iterator[tuple[netns.Host, netns.Host]]:
    """(server, client) with `beoperf serve` listening on the server."""
    with netns.VethPair(2) as topo:
        server, client = topo.hosts
        proc = server.popen([sys.executable, "-m", "beoperf", "serve", "--port", PORT,
                             "--max-memory", "64M"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
        line = proc.stdout.readline()
        assert f"port {PORT}" in line, line
        yield server, client


def measure(server: netns.Host, client: netns.Host, link: Link, out: Path, *,
            budget: float, repeats: int, profile: Path) -> Link:
    """Shape the link, sweep it, replay the profile over it."""
    for h in (server, client):
        h.set_mtu(link.mtu)
        shape(h, link.rate_mbit, link.mtu)
    time.sleep(0.2)
    link.sweep = out / f"{link.name}.json"
    start = time.monotonic()
    beoperf(client, "pingpong", server.addr4, "--port", PORT, "--sizes", SIZES,
            "--time-budget", str(budget), "-o", str(out / link.name))
    link.seconds["sweep"] = time.monotonic() - start
    link.replay = out / f"{link.name}-replay.json"
    start = time.monotonic()
    beoperf(client, "replay", str(profile), server.addr4, "--port", PORT, "--repeats",
            str(repeats), "-o", str(link.replay), "--format", "json")
    link.seconds["replay"] = time.monotonic() - start
    total = json.loads(link.replay.read_text())["body"]["total_s"]
    link.replayed_s, link.replay_range = total["median"], (total["min"], total["max"])
    return link


@dataclass
class Row:
    """One prediction against one replay."""

    target: str
    source: str
    method: str  # measured | scaled
    same_mtu: bool
    predicted_s: float
    interval: tuple[float, float]
    replayed_s: float
    replay_range: tuple[float, float]
    claimed: bool
    claim_reason: str

    @property
    def error(self) -> float:
        return self.predicted_s / self.replayed_s - 1.0


def predictions(links: Sequence[Link], profile: Path, out: Path) -> list[Row]:
    """For each link: the prediction from its own model and from every other link's model
    scaled to its rate (in-process, as `beoperf predict --network/--scale`)."""
    from beoperf.suites import predict

    rows = []
    for target in links:
        for source in links:
            own = source is target
            spec = predict.Spec(profile=str(profile),
                                networks=(str(source.sweep),) if own else (),
                                scales=() if own else ((str(source.sweep), source.rate,
                                                        target.rate),))
            doc = predict.run(spec)
            doc.save(out / f"predict-{target.name}-from-{source.name}.json")
            net = doc.body["networks"][0]
            rows.append(Row(target.name, source.name, net["method"], source.mtu == target.mtu,
                            net["total_s"], tuple(net["interval_s"]), target.replayed_s,
                            target.replay_range, net["claimed"], net["claim_reason"]))
    return rows


def table(rows: Sequence[Row]) -> list[str]:
    """A Markdown table of the rows."""
    lines = ["| link (replayed) | model from | method | predicted | interval | replayed "
             "(classes' medians summed; repeats min..max) | error | claimed |",
             "|---|---|---|---:|---|---|---:|---|"]
    for r in rows:
        scope = "" if r.same_mtu else " (MTU differs: outside the method's scope)"
        lines.append(f"| {r.target} | {r.source} | {r.method} | {r.predicted_s * 1e3:.1f} ms "
                     f"| {r.interval[0] * 1e3:.1f}..{r.interval[1] * 1e3:.1f} ms | "
                     f"{r.replayed_s * 1e3:.1f} ms ({r.replay_range[0] * 1e3:.1f}.."
                     f"{r.replay_range[1] * 1e3:.1f}) | {r.error:+.1%} | "
                     f"{'yes' if r.claimed else 'no'}{scope} |")
    return lines


def summary(rows: Sequence[Row]) -> dict[str, Any]:
    own = [abs(r.error) for r in rows if r.method == "measured"]
    claimed = [abs(r.error) for r in rows if r.method == "scaled" and r.claimed and r.same_mtu]
    return {"own_max_error": max(own, default=None), "own_n": len(own),
            "scaled_claimed_max_error": max(claimed, default=None),
            "scaled_claimed_n": len(claimed)}
