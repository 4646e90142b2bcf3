"""Side-by-side benchmark of ``beoperf pingpong`` against NetPIPE, sockperf and iperf3.

One run measures, on each link (loopback, and a veth pair between two network
namespaces built with tests/netns.py), and with one pair of tools at a time:

1. latency at 16 B: beoperf vs sockperf ping-pong vs NPtcp, interleaved rounds (beoperf
   also in a sweep's 2 ms trials, ``--short-trial-time``);
2. throughput: beoperf --mode stream vs iperf3 (one stream), beoperf pingpong
   peak vs NPtcp's default-run peak;
3. wall time of a full default sweep: beoperf pingpong vs NPtcp, the sizes beoperf
   left imprecise, and how often one beoperf sweep's 95% interval of a size's median
   holds the median the next sweep measured (coverage): the stated interval
   (``ci95_us``, widened by the spread of the link's earlier sweeps in this run, kept in
   a history of the run's own: RAW/history-LINK, or with ``--shared-history`` one
   RAW/history for every link, as the setups of one host share a user's) against the
   next sweep, and the within-run interval (``ci95_within_run_us``) both ways;
4. with ``--shaped``: stream mode against iperf3 through ``tc tbf`` at 100 Mbit/s and
   1 Gbit/s (burst 256 KB) between two namespaces, beside the payload rate the shaper
   allows (rate x MSS / (MTU + 14)).

The load average is sampled every 5 s during the whole run.

Usage::

    python bench/bench_pingpong.py [--links loopback,veth] [--rounds N] [--out bench/out]

Prints a Markdown table and writes every raw figure to OUT/results-<UTC>.json
(tool outputs under OUT/raw-<UTC>/).  Only the veth link needs root.
``--report FILE`` prints an earlier run's tables again; ``--pin`` runs every
server on CPU 0 and every client on CPU 1.  Results: bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import netns  # noqa: E402

NETPIPE_MBPS = 2**20  # NetPIPE's "Mbps" is 2^20 bit/s
LAT_SIZE = 16
TOOLS = ("NPtcp", "sockperf", "iperf3", "beoperf", "ss")

# Targets from the issue.
LAT_TARGET = (0.97, 1.03)
TPUT_TARGET = 0.97
WALL_TARGET = 0.5


# --------------------------------------------------------------------------- links


class Link(Protocol):
    """Where servers and clients run, and the address the client dials."""

    name: str
    addr: str

    def server(self, argv: Sequence[str], log: Any, cwd: Path) -> subprocess.Popen: ...

    def client(self, argv: Sequence[str], timeout: float,
               cwd: Path) -> subprocess.CompletedProcess: ...

    def listening(self, port: int) -> bool: ...


def _ss_listening(out: str, port: int) -> bool:
    return any(line.split()[3].rsplit(":", 1)[-1] == str(port)
               for line in out.splitlines() if len(line.split()) > 3)


@dataclass
class LoopbackLink:
    """Both ends in this namespace, talking over 127.0.0.1."""

    name: str = "loopback"
    addr: str = "127.0.0.1"

    def server(self, argv: Sequence[str], log: Any, cwd: Path) -> subprocess.Popen:
        return subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, cwd=cwd)

    def client(self, argv: Sequence[str], timeout: float,
               cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              cwd=cwd, check=False)

    def listening(self, port: int) -> bool:
        out = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, check=False)
        return _ss_listening(out.stdout, port)


@dataclass
class VethLink:
    """Server in namespace host 0, client in host 1, joined by one veth pair."""

    server_host: netns.Host
    client_host: netns.Host
    name: str = "veth"
    addr: str = ""

    def __post_init__(self) -> None:
        self.addr = self.server_host.addr4

    def server(self, argv: Sequence[str], log: Any, cwd: Path) -> subprocess.Popen:
        return self.server_host.popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)

    def client(self, argv: Sequence[str], timeout: float,
               cwd: Path) -> subprocess.CompletedProcess:
        return self.client_host.run(argv, check=False, timeout=timeout, cwd=cwd)

    def listening(self, port: int) -> bool:
        out = self.server_host.run(["ss", "-Hltn"], check=False)
        return _ss_listening(out.stdout, port)


def free_port() -> int:
    """A TCP port nobody listens on right now (loopback; any port is free in a new netns)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- running


@dataclass
class Ctx:
    """One link under test plus where its raw files go."""

    link: Link
    raw: Path
    args: argparse.Namespace
    counter: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)

    def tag(self, what: str) -> str:
        self.counter += 1
        return f"{self.link.name}-{self.counter:03d}-{what}"


def stop_server(proc: subprocess.Popen, exits_alone: bool) -> None:
    """End a server we started, by its PID (grace period for one-shot servers)."""
    if exits_alone:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(3)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def serving(ctx: Ctx, argv: Sequence[str], port: int, tag: str,
            exits_alone: bool = False) -> Iterator[subprocess.Popen]:
    """Run a server for the duration of one client run."""
    with open(ctx.raw / f"{tag}.server.log", "w") as log:
        proc = ctx.link.server(argv, log, ctx.raw)
        try:
            deadline = time.monotonic() + 15
            while not ctx.link.listening(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start listening: {' '.join(argv)}")
                time.sleep(0.05)
            yield proc
        finally:
            stop_server(proc, exits_alone)


def run_pair(ctx: Ctx, server_argv: Sequence[str], client_argv: Sequence[str], port: int,
             tag: str, timeout: float,
             exits_alone: bool = False) -> tuple[dict, subprocess.CompletedProcess]:
    """Start the server, run the client once; return (record, the client's result)."""
    if ctx.args.pin:  # same placement for every tool: server on CPU 0, client on CPU 1
        server_argv = ["taskset", "-c", "0", *server_argv]
        client_argv = ["taskset", "-c", "1", *client_argv]
    with serving(ctx, server_argv, port, tag, exits_alone):
        t0 = time.monotonic()
        proc = ctx.link.client(client_argv, timeout, ctx.raw)
        wall = time.monotonic() - t0
    (ctx.raw / f"{tag}.client.out").write_text(proc.stdout + proc.stderr)
    record = {"tag": tag, "server": list(server_argv), "client": list(client_argv),
              "rc": proc.returncode, "wall_s": wall,
              "utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    ctx.log.append(record)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        what = " ".join(client_argv[:4])
        raise RuntimeError(f"{what} ... exited {proc.returncode}: {' | '.join(tail)}")
    return record, proc


def guarded(fn: Callable[[], dict]) -> dict:
    """Run one measurement; a failing tool gives an error entry, not a dead benchmark."""
    try:
        return fn()
    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        print(f"  ! {exc}", file=sys.stderr)
        return {"error": str(exc)}


# --------------------------------------------------------------------------- tools


def beoperf_run(ctx: Ctx, what: str, extra: Sequence[str], timeout: float) -> dict:
    """One beoperf pingpong client run against a fresh 'beoperf serve'; returns its JSON."""
    port, tag = free_port(), ctx.tag(f"beoperf-{what}")
    server = ["beoperf", "serve", "--bind", ctx.link.addr, "--port", str(port)]
    prefix = ctx.raw / tag
    client = ["beoperf", "pingpong", ctx.link.addr, "--port", str(port), *extra,
              "-o", str(prefix)]
    record, _ = run_pair(ctx, server, client, port, tag, timeout)
    envelope = json.loads(prefix.with_suffix(".json").read_text())
    return {"record": record, "wall_s": record["wall_s"], "doc": envelope["body"],
            "meta": envelope["meta"]}


def beoperf_latency(ctx: Ctx, trial_time: float | None = None) -> dict:
    a = ctx.args
    trial = a.beoperf_trial_time if trial_time is None else trial_time
    extra = ["--sizes", str(LAT_SIZE), *(["--trial-time", str(trial)] if trial else []),
             "--precision", str(a.beoperf_precision), "--time-budget", str(a.sockperf_time)]
    res = beoperf_run(ctx, "lat", extra, 60)
    size = res["doc"]["sizes"][0]
    return {"us": size["time_us"]["median"], "mean_us": size["time_us"]["mean"],
            "samples": size["samples"], "converged": size["converged"],
            "cmd": res["record"]["client"]}


def parse_sockperf(text: str) -> dict:
    """Median and mean one-way latency (us) and sample count from sockperf's summary."""
    p50 = re.search(r"percentile 50\.000 =\s*([0-9.]+)", text)
    avg = re.search(r"avg-latency=([0-9.]+)", text)
    obs = re.search(r"Total (\d+) observations", text)
    if not (p50 and avg and obs):
        raise ValueError("cannot parse sockperf output")
    return {"us": float(p50.group(1)), "mean_us": float(avg.group(1)),
            "samples": int(obs.group(1))}


def sockperf_latency(ctx: Ctx) -> dict:
    port, tag = free_port(), ctx.tag("sockperf-lat")
    addr = ["--tcp", "-i", ctx.link.addr, "-p", str(port)]
    client = ["sockperf", "ping-pong", *addr, "-m", str(LAT_SIZE),
              "-t", str(ctx.args.sockperf_time)]
    record, proc = run_pair(ctx, ["sockperf", "server", *addr], client, port, tag,
                            ctx.args.sockperf_time + 60)
    out = parse_sockperf(proc.stdout + proc.stderr)
    return {**out, "cmd": record["client"]}


def parse_netpipe(path: Path) -> list[tuple[int, float, float]]:
    """np.out rows: (bytes, bit/s, one-way seconds); NetPIPE Mbps = 2^20 bit/s."""
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3:
            rows.append((int(parts[0]), float(parts[1]) * NETPIPE_MBPS, float(parts[2])))
    if not rows:
        raise ValueError(f"no rows in {path}")
    return rows


def nptcp_run(ctx: Ctx, what: str, opts: Sequence[str], timeout: float) -> dict:
    """One NPtcp run; the receiver must get the same size options as the transmitter."""
    port, tag = free_port(), ctx.tag(f"nptcp-{what}")
    out = ctx.raw / f"{tag}.np"
    server = ["NPtcp", "-P", str(port), *opts]
    client = ["NPtcp", "-h", ctx.link.addr, "-P", str(port), *opts, "-o", str(out)]
    record, _ = run_pair(ctx, server, client, port, tag, timeout, exits_alone=True)
    return {"record": record, "wall_s": record["wall_s"], "rows": parse_netpipe(out)}


def nptcp_latency(ctx: Ctx) -> dict:
    s = str(LAT_SIZE)
    res = nptcp_run(ctx, "lat", ["-l", s, "-u", s, "-p", "0"], 60)
    row = next(r for r in res["rows"] if r[0] == LAT_SIZE)
    return {"us": row[2] * 1e6, "cmd": res["record"]["client"]}


def iperf3_tput(ctx: Ctx) -> dict:
    port, tag = free_port(), ctx.tag("iperf3")
    server = ["iperf3", "-s", "-1", "-B", ctx.link.addr, "-p", str(port)]
    client = ["iperf3", "-c", ctx.link.addr, "-p", str(port), "-t", str(ctx.args.iperf_time),
              "-J"]
    record, proc = run_pair(ctx, server, client, port, tag, ctx.args.iperf_time + 60,
                            exits_alone=True)
    doc = json.loads(proc.stdout)
    return {"bps": doc["end"]["sum_received"]["bits_per_second"],
            "retransmits": doc["end"]["sum_sent"].get("retransmits"), "cmd": record["client"]}


def size_bps(doc: dict, size: int) -> float | None:
    return next((s["throughput_bps"]["from_median"] for s in doc["sizes"]
                 if s["size"] == size), None)


def beoperf_stream(ctx: Ctx) -> dict:
    extra = ["--mode", "stream", "--start", ctx.args.stream_start, "--perturbation", "0"]
    res = beoperf_run(ctx, "stream", extra, 300)
    doc = res["doc"]
    return {"bps": doc["summary"]["peak_throughput_bps"], "peak_size": doc["summary"]["peak_size"],
            "bps_128k": size_bps(doc, 131072),
            "not_converged": doc["summary"]["sizes_not_converged"], "cmd": res["record"]["client"]}


def best_trial_peak(doc: dict) -> tuple[float | None, int | None]:
    """Peak of throughput_bps.from_best_trial (NetPIPE's statistic), if this beoperf has it."""
    rates = [(s["throughput_bps"].get("from_best_trial"), s["size"]) for s in doc["sizes"]]
    rates = [r for r in rates if r[0] is not None]
    return max(rates) if rates else (None, None)


def beoperf_sweep(ctx: Ctx) -> dict:
    where = "history" if ctx.args.shared_history else f"history-{ctx.link.name}"
    history = ["--history", str(ctx.raw / where)]
    res = beoperf_run(ctx, "sweep", [*history, *ctx.args.beoperf_sweep_args.split()], 600)
    s = res["doc"]["summary"]
    best, best_size = best_trial_peak(res["doc"])
    intervals = [[x["size"], x["time_us"]["median"], *(x.get("ci95_us") or [None, None])]
                 for x in res["doc"]["sizes"]]
    within = [[x["size"], x["time_us"]["median"],
               *(x.get("ci95_within_run_us") or x.get("ci95_us") or [None, None])]
              for x in res["doc"]["sizes"]]
    return {"wall_s": res["wall_s"], "duration_s": res["meta"]["duration_s"],
            "intervals": intervals, "within": within,
            "between_runs": res["doc"]["sweep"].get("between_runs"),
            "inflation": res["doc"]["sweep"]["interval_inflation"],
            "latency_us": s.get("latency_median_us"),
            "peak_bps": s["peak_throughput_bps"], "peak_size": s["peak_size"],
            "peak_best_trial_bps": best, "peak_best_trial_size": best_size,
            "sizes": s["sizes_measured"], "not_converged": s["sizes_not_converged"],
            "status": res["doc"]["status"], "cmd": res["record"]["client"]}


def nptcp_sweep(ctx: Ctx) -> dict:
    res = nptcp_run(ctx, "sweep", [], 600)
    peak = max(res["rows"], key=lambda r: r[1])
    return {"wall_s": res["wall_s"], "peak_bps": peak[1], "peak_size": peak[0],
            "sizes": len(res["rows"]), "cmd": res["record"]["client"]}


# --------------------------------------------------------------------------- benchmarks


def interleave(ctx: Ctx, tools: dict[str, Callable[[Ctx], dict]], rounds: int) -> dict:
    """rounds x every tool, the order rotated each round; per-tool list of results."""
    names = list(tools)
    out: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            print(f"  [{ctx.link.name}] round {r + 1}/{rounds}: {name}", file=sys.stderr)
            out[name].append(guarded(lambda fn=tools[name]: fn(ctx)))
    return out


def median_of(results: list[dict], key: str) -> float | None:
    values = [r[key] for r in results if r.get(key) is not None]
    return statistics.median(values) if values else None


def min_of(results: list[dict], key: str) -> float | None:
    values = [r[key] for r in results if r.get(key) is not None]
    return min(values) if values else None


def bench_link(ctx: Ctx) -> dict:
    a = ctx.args
    tools: dict[str, Callable[[Ctx], dict]] = {
        "beoperf": beoperf_latency, "sockperf": sockperf_latency, "NPtcp": nptcp_latency}
    if a.short_trial_time > 0:  # a sweep's trials, the client pausing between them
        tools["beoperf-short"] = functools.partial(beoperf_latency,
                                                   trial_time=a.short_trial_time)
    lat = interleave(ctx, tools, a.rounds)
    tput = interleave(ctx, {"beoperf-stream": beoperf_stream, "iperf3": iperf3_tput},
                      a.tput_rounds)
    sweep = interleave(ctx, {"beoperf": beoperf_sweep, "NPtcp": nptcp_sweep}, a.sweep_rounds)
    return {"latency": lat, "throughput": tput, "sweep": sweep}


def run_link(name: str, args: argparse.Namespace, raw: Path) -> dict:
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    if name == "loopback":
        ctx = Ctx(LoopbackLink(), raw, args)
        result = bench_link(ctx)
    else:
        ok, why = netns.can_use_netns()
        if not ok:
            print(f"skipping the veth link: {why}", file=sys.stderr)
            return {"skipped": why}
        with netns.VethPair(2) as topo:
            server, client = topo.hosts
            ctx = Ctx(VethLink(server, client), raw, args)
            result = bench_link(ctx) | {"mtu": server.link().get("mtu")}
    load1 = Path("/proc/loadavg").read_text().split()[:3]
    return result | {"runs": ctx.log, "loadavg_before": load0, "loadavg_after": load1}


def shaped_run(rate: str, args: argparse.Namespace, raw: Path) -> dict:
    """beoperf stream vs iperf3 through tbf at `rate` (burst 256 KB) on both ends."""
    with netns.VethPair(2) as topo:
        server, client = topo.hosts
        for h in (server, client):
            h.run(["tc", "qdisc", "replace", "dev", h.ifname, "root", "tbf", "rate", rate,
                   "burst", "256kb", "latency", "100ms"])
        ctx = Ctx(VethLink(server, client), raw, args)
        beo = beoperf_run(ctx, f"shaped-{rate}", ["--mode", "stream", "--sizes", "1M"], 300)
        ipf = guarded(lambda: iperf3_tput(ctx))
        pp = beoperf_run(ctx, f"shaped-pp-{rate}", ["--sizes", "64K,1M", "--time-budget", "5"],
                         300)
    doc = beo["doc"]
    mss, mtu = doc["local"]["socket"]["mss"], doc["local"]["interface"]["mtu"]
    rate_bps = netns.rate_bytes_per_sec(rate) * 8
    return {"rate": rate, "stream_bps": doc["sizes"][0]["throughput_bps"]["from_median"],
            "iperf3_bps": ipf.get("bps"), "goodput_limit_bps": rate_bps * mss / (mtu + 14),
            "shaper": doc["sweep"]["shaper"], "stream_wall_s": beo["wall_s"],
            "pingpong_peak_bps": pp["doc"]["summary"]["peak_throughput_bps"],
            "pingpong_note": [w for w in pp["doc"]["warnings"] if "token bucket" in w],
            "runs": ctx.log}


def shaped_markdown(rows: list[dict]) -> str:
    lines = ["| tbf rate | beoperf stream, Mbit/s | iperf3, Mbit/s | ratio | goodput limit, "
             "Mbit/s | ratio | burst seen, bytes | stream run, s | ping-pong peak, Mbit/s | "
             "doubled-figure note |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        shaper = r.get("shaper") or {}
        lines.append(
            f"| {r['rate']} | {fmt(r['stream_bps'], 1e6)} | {fmt(r['iperf3_bps'], 1e6)} | "
            f"{fmt(ratio(r['stream_bps'], r['iperf3_bps']), 1, 3)} | "
            f"{fmt(r['goodput_limit_bps'], 1e6)} | "
            f"{fmt(ratio(r['stream_bps'], r['goodput_limit_bps']), 1, 3)} | "
            f"{shaper.get('burst_bytes', 'none')} | {fmt(r['stream_wall_s'], 1, 1)} | "
            f"{fmt(r['pingpong_peak_bps'], 1e6)} | {'yes' if r['pingpong_note'] else 'no'} |")
    return "\n".join(lines)


class LoadSampler:
    """/proc/loadavg's 1-minute figure every `every` seconds, in a thread."""

    def __init__(self, every: float = 5.0) -> None:
        import threading

        self.every, self.samples = every, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            self.samples.append(float(Path("/proc/loadavg").read_text().split()[0]))

    def __enter__(self) -> LoadSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def summary(self) -> dict:
        if not self.samples:
            return {}
        return {"min": min(self.samples), "median": statistics.median(self.samples),
                "max": max(self.samples), "n": len(self.samples)}


# --------------------------------------------------------------------------- summary


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def coverage(a: list, b: list) -> float | None:
    """The share of sizes where sweep a's interval [lo, hi] holds sweep b's median."""
    medians = {size: med for size, med, *_ in b}
    hits = [lo <= medians[size] <= hi for size, _m, lo, hi in a
            if lo is not None and size in medians]
    return sum(hits) / len(hits) if hits else None


def coverages(sweeps: list[dict], key: str = "within") -> list[float]:
    """Coverage between consecutive beoperf sweeps, both ways, of their ``key`` intervals."""
    ok = [r.get(key, r["intervals"]) for r in sweeps if "intervals" in r]  # older: no key
    out = []
    for a, b in zip(ok, ok[1:], strict=False):
        out += [c for c in (coverage(a, b), coverage(b, a)) if c is not None]
    return out


def forward_coverages(sweeps: list[dict]) -> list[float]:
    """Coverage of each sweep's stated interval (widened by the sweeps before it, or by
    the other setups of the host) against the next sweep's median, for the sweeps whose
    interval was widened: only forward, as the next sweep played no part in it."""
    ok = [r for r in sweeps if "intervals" in r]
    return [c for a, b in zip(ok, ok[1:], strict=False)
            if (a.get("between_runs") or {}).get("added_to_intervals")
            and (c := coverage(a["intervals"], b["intervals"])) is not None]


def summarize(res: dict) -> dict:
    """Medians over rounds and the ratios the issue asks about."""
    lat, tput, sweep = res["latency"], res["throughput"], res["sweep"]
    s = {
        "lat_beoperf_us": median_of(lat["beoperf"], "us"),
        "lat_sockperf_us": median_of(lat["sockperf"], "us"),
        "lat_sockperf_avg_us": median_of(lat["sockperf"], "mean_us"),
        "lat_nptcp_us": median_of(lat["NPtcp"], "us"),
        "lat_beoperf_best_us": min_of(lat["beoperf"], "us"),
        "lat_beoperf_short_us": median_of(lat.get("beoperf-short", []), "us"),
        "lat_sockperf_best_us": min_of(lat["sockperf"], "us"),
        "stream_bps": median_of(tput["beoperf-stream"], "bps"),
        "stream_128k_bps": median_of(tput["beoperf-stream"], "bps_128k"),
        "iperf3_bps": median_of(tput["iperf3"], "bps"),
        "pp_peak_bps": median_of(sweep["beoperf"], "peak_bps"),
        "pp_peak_best_bps": median_of(sweep["beoperf"], "peak_best_trial_bps"),
        "np_peak_bps": median_of(sweep["NPtcp"], "peak_bps"),
        "wall_beoperf_s": median_of(sweep["beoperf"], "wall_s"),
        "wall_nptcp_s": median_of(sweep["NPtcp"], "wall_s"),
        "not_converged": [r.get("not_converged") for r in sweep["beoperf"]],
        "coverage": coverages(sweep["beoperf"]),
        "coverage_across": forward_coverages(sweep["beoperf"]),
    }
    s["r_lat_sockperf"] = ratio(s["lat_beoperf_us"], s["lat_sockperf_us"])
    s["r_lat_best_sockperf"] = ratio(s["lat_beoperf_best_us"], s["lat_sockperf_best_us"])
    s["r_lat_nptcp"] = ratio(s["lat_beoperf_us"], s["lat_nptcp_us"])
    s["r_lat_short_sockperf"] = ratio(s["lat_beoperf_short_us"], s["lat_sockperf_us"])
    s["r_stream_iperf3"] = ratio(s["stream_bps"], s["iperf3_bps"])
    s["r_stream128k_iperf3"] = ratio(s["stream_128k_bps"], s["iperf3_bps"])
    s["r_peak_nptcp"] = ratio(s["pp_peak_bps"], s["np_peak_bps"])
    s["r_peak_best_nptcp"] = ratio(s["pp_peak_best_bps"], s["np_peak_bps"])
    s["r_wall"] = ratio(s["wall_beoperf_s"], s["wall_nptcp_s"])
    return s


def fmt(x: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x / scale:.{digits}f}"


def verdict(r: float | None, lo: float | None, hi: float | None) -> str:
    if r is None:
        return "n/a"
    ok = (lo is None or r >= lo) and (hi is None or r <= hi)
    return "yes" if ok else "**no**"


def table_rows(link: str, s: dict) -> list[str]:
    g = 1e9
    rows = [
        ("16 B one-way median, us", s["lat_beoperf_us"], 1, "sockperf p50",
         s["lat_sockperf_us"], s["r_lat_sockperf"], "0.97-1.03", LAT_TARGET),
        ("16 B one-way median, us", s["lat_beoperf_us"], 1, "sockperf avg",
         s["lat_sockperf_avg_us"], ratio(s["lat_beoperf_us"], s["lat_sockperf_avg_us"]), "-",
         None),
        ("16 B one-way median, us", s["lat_beoperf_us"], 1, "NPtcp -l16 -u16",
         s["lat_nptcp_us"], s["r_lat_nptcp"], "-", None),
        ("16 B one-way median, a sweep's 2 ms trials, us", s.get("lat_beoperf_short_us"), 1,
         "sockperf p50", s["lat_sockperf_us"], s.get("r_lat_short_sockperf"), "-", None),
        ("16 B one-way, fastest round, us", s["lat_beoperf_best_us"], 1, "sockperf p50",
         s["lat_sockperf_best_us"], s["r_lat_best_sockperf"], "-", None),
        ("stream peak, Gbit/s", s["stream_bps"], g, "iperf3 1 stream", s["iperf3_bps"],
         s["r_stream_iperf3"], ">= 0.97", (TPUT_TARGET, None)),
        ("stream at 128 KiB, Gbit/s", s["stream_128k_bps"], g, "iperf3 1 stream",
         s["iperf3_bps"], s["r_stream128k_iperf3"], "-", None),
        ("pingpong peak, Gbit/s", s["pp_peak_bps"], g, "NPtcp peak", s["np_peak_bps"],
         s["r_peak_nptcp"], ">= 0.97", (TPUT_TARGET, None)),
        ("pingpong peak, best-trial mean, Gbit/s", s["pp_peak_best_bps"], g, "NPtcp peak",
         s["np_peak_bps"], s["r_peak_best_nptcp"], "-", None),
        ("default sweep wall time, s", s["wall_beoperf_s"], 1, "NPtcp default",
         s["wall_nptcp_s"], s["r_wall"], "<= 0.5", (None, WALL_TARGET)),
    ]
    out = []
    for what, b, scale, ref, rv, r, target, bounds in rows:
        met = verdict(r, *bounds) if bounds else "-"
        out.append(f"| {link} | {what} | {fmt(b, scale)} | {ref} | {fmt(rv, scale)} "
                   f"| {fmt(r, 1, 3)} | {target} | {met} |")
    counts = s["not_converged"]
    met = "n/a" if not counts else "yes" if not any(counts) else "**no**"
    nc = ", ".join(str(x) for x in counts) or "n/a"
    out.append(f"| {link} | sizes not converged (default sweep) | {nc} | - | - | - | 0 | {met} |")
    cov = s.get("coverage_across") or []
    text = ", ".join(f"{c:.2f}" for c in cov) or "n/a"
    met = "n/a" if not cov else "yes" if min(cov) >= 0.9 else "**no**"
    out.append(f"| {link} | stated interval (with the earlier sweeps' spread) holds the next "
               f"sweep's median (share of sizes) | {text} | - | - | - | >= 0.90 | {met} |")
    cov = s.get("coverage") or []
    text = ", ".join(f"{c:.2f}" for c in cov) or "n/a"
    out.append(f"| {link} | within-run interval holds the next sweep's median (each way) "
               f"| {text} | - | - | - | - | - |")
    return out


def markdown(results: dict) -> str:
    lines = ["| link | figure | beoperf | reference | ref. value | ratio | target | met |",
             "|---|---|---|---|---|---|---|---|"]
    for link, res in results["links"].items():
        if "skipped" in res:
            lines.append(f"| {link} | skipped: {res['skipped']} | | | | | | |")
            continue
        lines += table_rows(link, res["summary"])
    return "\n".join(lines)


def cell(r: dict, key: str) -> str:
    """One per-round figure: Gbit/s for rates, integers as they are."""
    if "error" in r:
        return "error"
    v = r.get(key)
    if isinstance(v, int):
        return str(v)
    return fmt(v, 1e9 if "bps" in key else 1.0)


def rounds_markdown(results: dict) -> str:
    """Per-round figures, so the spread behind each median is visible."""
    lines = ["| link | measurement | per round |", "|---|---|---|"]
    picks = [("latency", "beoperf", "us"), ("latency", "beoperf", "mean_us"),
             ("latency", "beoperf", "samples"), ("latency", "sockperf", "us"),
             ("latency", "sockperf", "mean_us"), ("latency", "sockperf", "samples"),
             ("latency", "NPtcp", "us"), ("throughput", "beoperf-stream", "bps"),
             ("throughput", "beoperf-stream", "peak_size"),
             ("throughput", "beoperf-stream", "bps_128k"),
             ("throughput", "beoperf-stream", "not_converged"), ("throughput", "iperf3", "bps"),
             ("sweep", "beoperf", "peak_bps"), ("sweep", "beoperf", "peak_size"),
             ("sweep", "beoperf", "peak_best_trial_bps"),
             ("sweep", "NPtcp", "peak_bps"), ("sweep", "NPtcp", "peak_size"),
             ("sweep", "beoperf", "wall_s"), ("sweep", "beoperf", "duration_s"),
             ("sweep", "NPtcp", "wall_s")]
    for link, res in results["links"].items():
        if "skipped" in res:
            continue
        for bench, tool, key in picks:
            vals = [cell(r, key) for r in res[bench][tool]]
            unit = " (Gbit/s)" if "bps" in key else ""
            lines.append(f"| {link} | {bench} {tool} {key}{unit} | {', '.join(vals)} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- machine


def first_line(argv: Sequence[str]) -> str:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    text = (p.stdout or p.stderr).strip()
    return re.sub(r"\x1b\[[0-9;]*m", "", text.splitlines()[0]) if text else "unknown"


def machine_facts() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"nproc": first_line(["nproc"]), "cpu_model": cpu, "kernel": platform.release(),
            "os": first_line(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
            "python": platform.python_version(), "hostname": platform.node()}


def tool_versions() -> dict:
    dpkg = ["dpkg-query", "-W", "-f", "${Package} ${Version}"]
    git = ["git", "-C", str(REPO), "describe", "--always", "--dirty"]
    return {"beoperf": first_line(["beoperf", "--version"]), "beoperf_git": first_line(git),
            "sockperf": first_line(["sockperf", "--version"]),
            "iperf3": first_line(["iperf3", "--version"]),
            "NPtcp": first_line([*dpkg, "netpipe-tcp"]),
            "sockperf_pkg": first_line([*dpkg, "sockperf"]),
            "iperf3_pkg": first_line([*dpkg, "iperf3"])}


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--links", default="loopback,veth", help="comma list of loopback,veth")
    p.add_argument("--shared-history", action="store_true",
                   help="one history directory for every link (a later link's first sweep "
                        "then has the earlier links' spread between runs)")
    p.add_argument("--rounds", type=int, default=5, help="latency rounds (default 5)")
    p.add_argument("--tput-rounds", type=int, default=3, help="stream/iperf3 rounds (3)")
    p.add_argument("--sweep-rounds", type=int, default=2,
                   help="full-sweep rounds, beoperf and NPtcp (default 2)")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    p.add_argument("--sockperf-time", type=float, default=3.0)
    p.add_argument("--iperf-time", type=int, default=5)
    p.add_argument("--beoperf-trial-time", type=float, default=None,
                   help="beoperf --trial-time for the latency test (default: beoperf's own, "
                        "for one size 0.25 s; the run lasts --sockperf-time, as sockperf's "
                        "does)")
    p.add_argument("--short-trial-time", type=float, default=0.002,
                   help="also beoperf's latency in trials this short, a sweep's (default "
                        "0.002 s; 0: not): on a VM whose cross-CPU wake-ups are cheap just "
                        "after a pause, they read lower than a sustained ping-pong")
    p.add_argument("--beoperf-precision", type=float, default=0.005)
    p.add_argument("--stream-start", default="64K", help="first size of the stream sweep")
    p.add_argument("--pin", action="store_true",
                   help="run every server under 'taskset -c 0' and every client under "
                        "'taskset -c 1' (default: no pinning, as the tools run by default)")
    p.add_argument("--shaped", action="store_true",
                   help="also stream vs iperf3 through tbf at 100 Mbit/s and 1 Gbit/s (root)")
    p.add_argument("--report", type=Path, metavar="RESULTS_JSON",
                   help="measure nothing; print the tables of an earlier run's JSON")
    p.add_argument("--beoperf-sweep-args", default="",
                   help="extra beoperf options for the full sweep (default: none, i.e. the "
                        "default sweep; use only for side experiments)")
    args = p.parse_args(argv)
    args.links = [x.strip() for x in args.links.split(",") if x.strip()]
    bad = set(args.links) - {"loopback", "veth"}
    if bad:
        p.error(f"unknown link(s): {', '.join(sorted(bad))}")
    return args


def report(path: Path) -> int:
    """Print the tables of an earlier run again (summaries recomputed from its raw figures)."""
    results = json.loads(path.read_text())
    for res in results["links"].values():
        if "skipped" not in res:
            res["summary"] = summarize(res)
    extra = ("\n\n" + shaped_markdown(results["shaped"])) if results.get("shaped") else ""
    print(markdown(results) + "\n\n" + rounds_markdown(results) + extra
          + f"\n\nload average: {results.get('loadavg')}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        return report(args.report)
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        print(f"missing tools: {', '.join(missing)}", file=sys.stderr)
        return 1
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    raw = (args.out / f"raw-{stamp}").resolve()
    raw.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "utc_start": stamp, "argv": sys.argv, "machine": machine_facts(),
        "versions": tool_versions(), "config": {k: str(v) for k, v in vars(args).items()},
        "links": {}}
    t0 = time.monotonic()
    with LoadSampler() as load:
        for name in args.links:
            res = run_link(name, args, raw)
            if "skipped" not in res:
                res["summary"] = summarize(res)
            results["links"][name] = res
        if args.shaped:
            results["shaped"] = [shaped_run(rate, args, raw) for rate in ("100mbit", "1gbit")]
    results["loadavg"] = load.summary()
    results["elapsed_s"] = time.monotonic() - t0
    results["beoperf_git_end"] = first_line(["git", "-C", str(REPO), "describe", "--always",
                                             "--dirty"])  # others may commit meanwhile
    path = args.out / f"results-{stamp}.json"
    path.write_text(json.dumps(results, indent=1, default=str))
    table = markdown(results) + "\n\n" + rounds_markdown(results)
    if results.get("shaped"):
        table += "\n\n" + shaped_markdown(results["shaped"])
    table += f"\n\nload average (1 min, every 5 s): {results['loadavg']}"
    (args.out / f"results-{stamp}.md").write_text(table + "\n")
    print(table)
    print(f"\nraw figures: {path} ({results['elapsed_s']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
