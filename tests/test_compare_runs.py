"""Verdicts on real runs: two runs of one setup (A/A) get no "better" or "worse", and a
known effect is still found with one run a side (issue 25).

The runs keep no history (conftest): each comparison uses the stated default spread
between runs, the case of an admin comparing two files.  bench/bench_verdicts.py repeats
these pairs ten times and records the shares in bench/RESULTS.md."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from beoperf.analysis.effect import BETTER, CANNOT_TELL, NO_DIFFERENCE, WORSE
from helpers import checked, cli
from test_netns import start_server

SIZES = "1,2,4,8,16,64,256,1K,4K,16K,64K"
JUDGED = (BETTER, WORSE)


def compared(*paths: Path) -> dict:
    res = cli("compare", *map(str, paths), "--format", "json")
    assert res.status == 0, res.stderr
    return res.json["body"]


def no_headline_verdict(body: dict) -> None:
    row = body["rows"][1]
    for name in ("latency_test", "peak_test"):
        assert row[name]["verdict"] not in JUDGED, (name, row[name])
        assert row[name]["low"] > 0 and row[name]["high"] > row[name]["low"]


def test_aa_on_loopback_gets_no_verdict(tmp_path):
    """The embedded peer, as the README's main job runs (both ends placed on two CPUs: an
    external server left to the scheduler shares the client's CPU in some runs and not in
    others, which moves 16 B 3x between runs here; bench/RESULTS.md A2)."""
    paths = []
    for name in ("a", "b"):
        res = cli("pingpong", "--sizes", SIZES, "--time-budget", "3", "-o",
                  str(tmp_path / name))
        assert res.status == 0, res.stderr
        paths.append(tmp_path / f"{name}.json")
    no_headline_verdict(compared(*paths))


def test_a_socket_buffer_sweep_cannot_change_the_one_byte_latency(tmp_path):
    """The issue's false positive: --sweep sndbuf=64K,256K called the latency change
    significant.  At 1 B the verdict is 'no difference shown' or 'cannot tell'."""
    prefix = tmp_path / "bufs"
    res = cli("pingpong", "--sizes", SIZES, "--time-budget", "3", "--sweep",
              "sndbuf=64K,256K", "-o", str(prefix))
    assert res.status == 0, res.stderr
    body = compared(tmp_path / "bufs-sndbuf-64K.json", tmp_path / "bufs-sndbuf-256K.json")
    row = body["rows"][1]
    at_one = next(e for e in row["size_effects"] if e["size"] == 1)
    assert at_one["verdict"] in (NO_DIFFERENCE, CANNOT_TELL), at_one
    assert row["latency_test"]["verdict"] in (NO_DIFFERENCE, CANNOT_TELL)
    assert row["differs"] == ["sndbuf 65536 -> 262144"]  # and nothing else
    table = (tmp_path / "bufs-compare.md").read_text()
    assert "significant" not in table and "sndbuf=256K vs sndbuf=64K: latency at" in table
    assert "sndbuf=256K is unlike the baseline in: sndbuf 65536 -> 262144" in table


def pingpong_json(host, *args: str) -> Path:
    out = Path(args[args.index("-o") + 1])
    res = host.run([sys.executable, "-m", "beoperf", "pingpong", *args], check=False,
                   timeout=300)
    assert res.returncode == 0, res.stderr
    checked(json.loads(Path(f"{out}.json").read_text()))
    return Path(f"{out}.json")


def two_cpus() -> tuple[str, ...]:
    """Both ends on two CPUs, as the embedded peer places them: left to the scheduler, the
    server shares the client's CPU in some runs and not in others (bench/RESULTS.md A2)."""
    cpus = sorted(os.sched_getaffinity(0))
    return ("--cpu", f"{cpus[0]},{cpus[1]}") if len(cpus) >= 2 else ()


def test_aa_on_a_namespace_link_gets_no_verdict(netns_pair, tmp_path):
    server, client = netns_pair
    start_server(server)
    paths = [pingpong_json(client, server.addr4, "--sizes", SIZES, "--time-budget", "3",
                           *two_cpus(), "-o", str(tmp_path / name)) for name in ("a", "b")]
    no_headline_verdict(compared(*paths))


def tbf(host, mbit: int) -> None:
    """A wire of ``mbit`` Mbit/s (a peak rate just above it, so that the bucket refilled
    while the other direction talked does not let a large message through at veth speed;
    see test_netns.shape)."""
    host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf", "rate",
              f"{mbit}mbit", "burst", "16kb", "latency", "50ms", "peakrate",
              f"{mbit + mbit // 100}mbit", "mtu", "1600"])


def test_a_doubled_rate_is_better_at_large_sizes_with_one_run_a_side(netns_pair, tmp_path):
    server, client = netns_pair
    start_server(server)
    paths = []
    for mbit in (100, 200):
        tbf(server, mbit)
        tbf(client, mbit)
        paths.append(pingpong_json(client, server.addr4, "--sizes", "64K,256K,1M",
                                   "--max-time", "4", "-o", str(tmp_path / f"r{mbit}")))
    row = compared(*paths)["rows"][1]
    assert row["peak_test"]["verdict"] == BETTER, row["peak_test"]
    large = {e["size"]: e["verdict"] for e in row["size_effects"] if e["size"] >= 256 * 1024}
    assert set(large.values()) == {BETTER}, row["size_effects"]
    assert row["size_verdicts"][WORSE] == 0
