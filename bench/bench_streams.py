"""``beoperf pingpong --mode stream --streams N`` against ``iperf3 -P N`` through a token
bucket between two network namespaces (tests/netns.py), side by side.

Both ends' egress is shaped with ``tc tbf`` at ``--rate`` (burst 256 KB, as
bench_pingpong.py --shaped); each round runs beoperf (``--sizes 1M``, its stream trials
settled against the shaper) and then iperf3 (``-P N -t T -l 1M``, the same write size),
and the table gives each round's sums, their ratio and the goodput limit the shaper
allows (rate x MSS / (MTU + 14)), with the load average before and after.

iperf3 before 3.16 (Debian 12 ships 3.12) runs all of ``-P``'s streams in one thread;
beoperf runs one thread per stream, as iperf3 3.16+ does.  Through a shaper far below
what one core moves this does not matter; on loopback or a fast veth it does, so the
version is printed with the figures.

Usage (root, about a minute at the defaults)::

    python bench/bench_streams.py [--streams 4] [--rate 100mbit|none] [--size 1M]
                                  [--rounds 2] [--time 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import netns  # noqa: E402 - the tests' namespace hosts

PORT_BEOPERF, PORT_IPERF = 5202, 5301


def shape(host: netns.Host, rate: str) -> None:
    host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf", "rate", rate,
              "burst", "256kb", "latency", "100ms"])


def wait_listening(proc: subprocess.Popen, what: str) -> None:
    line = proc.stdout.readline() if proc.stdout else ""
    if "port" not in line and "listening" not in line.lower():
        raise SystemExit(f"{what} did not start: {line!r}")


def beoperf_round(client: netns.Host, addr: str, streams: int, size: str) -> dict:
    cmd = [sys.executable, "-m", "beoperf", "pingpong", addr, "--port", str(PORT_BEOPERF),
           "--mode", "stream", "--streams", str(streams), "--sizes", size, "--time-budget",
           "10", "--history", "off", "--json"]
    started = time.monotonic()
    res = client.run(cmd, check=False, timeout=300)
    if res.returncode != 0:
        raise SystemExit(f"beoperf failed: {res.stderr.strip()}")
    body = json.loads(res.stdout)["body"]
    (size,) = body["sizes"]
    bps = size["throughput_bps"]["from_median"]
    return {"bps": bps, "streams_bps": size.get("streams_bps") or [bps],
            "mss": body["local"]["socket"]["mss"], "mtu": body["local"]["interface"]["mtu"],
            "wall_s": round(time.monotonic() - started, 1), "cmd": " ".join(cmd[1:])}


def iperf3_round(server: netns.Host, client: netns.Host, streams: int, seconds: int,
                 size: str) -> dict:
    srv = server.popen(["iperf3", "-s", "-1", "-p", str(PORT_IPERF)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        cmd = ["iperf3", "-c", server.addr4, "-p", str(PORT_IPERF), "-P", str(streams), "-t",
               str(seconds), "-l", size, "-J"]
        res = client.run(cmd, check=False, timeout=seconds + 60)
    finally:
        srv.wait(timeout=30)
    if res.returncode != 0:
        raise SystemExit(f"iperf3 failed: {res.stdout[-300:]} {res.stderr.strip()}")
    end = json.loads(res.stdout)["end"]
    return {"bps": end["sum_received"]["bits_per_second"],
            "streams_bps": [s["receiver"]["bits_per_second"] for s in end["streams"]],
            "cmd": " ".join(cmd)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--rate", default="100mbit",
                    help="tbf rate both ways, or 'none' for the bare veth pair")
    ap.add_argument("--size", default="1M",
                    help="write size: beoperf --sizes and iperf3 -l (binary suffixes: 1M, 128K)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--time", type=int, default=5, help="iperf3 -t seconds")
    args = ap.parse_args()
    ok, why = netns.can_use_netns()
    if not ok:
        raise SystemExit(f"cannot build namespaces: {why}")
    version = subprocess.run(["iperf3", "--version"], capture_output=True, text=True,
                             check=False).stdout.splitlines()[0]
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    rows = []
    with netns.VethPair(2) as topo:
        server, client = topo.hosts
        if args.rate != "none":
            shape(server, args.rate)
            shape(client, args.rate)
        serve = server.popen([sys.executable, "-m", "beoperf", "serve", "--port",
                              str(PORT_BEOPERF)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        wait_listening(serve, "beoperf serve")
        try:
            for _ in range(args.rounds):
                beo = beoperf_round(client, server.addr4, args.streams, args.size)
                ipf = iperf3_round(server, client, args.streams, args.time, args.size)
                rows.append({"beoperf": beo, "iperf3": ipf})
        finally:
            serve.terminate()
            serve.wait(timeout=10)
    load1 = Path("/proc/loadavg").read_text().split()[:3]
    mss, mtu = rows[0]["beoperf"]["mss"], rows[0]["beoperf"]["mtu"]
    if args.rate == "none":
        limit_text, link = "n/a", "a bare veth pair"
    else:
        limit_text = f"{netns.rate_bytes_per_sec(args.rate) * 8 * mss / (mtu + 14) / 1e6:.2f}"
        link = f"tbf {args.rate} both ways, burst 256kb"
    print(f"{version}; {link}; writes of {args.size}; --streams {args.streams} vs "
          f"-P {args.streams}; load average {' '.join(load0)} before, {' '.join(load1)} after")
    print("| round | beoperf SUM, Mbit/s | per stream | iperf3 SUM, Mbit/s | per stream | "
          "ratio | goodput limit |")
    print("|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        b, p = r["beoperf"], r["iperf3"]
        spread = [f"{min(x['streams_bps']) / 1e6:.1f}..{max(x['streams_bps']) / 1e6:.1f}"
                  for x in (b, p)]
        print(f"| {i} | {b['bps'] / 1e6:.2f} | {spread[0]} | {p['bps'] / 1e6:.2f} | {spread[1]} "
              f"| {b['bps'] / p['bps']:.3f} | {limit_text} |")
    ratio = statistics.median(r["beoperf"]["bps"] / r["iperf3"]["bps"] for r in rows)
    print(f"median ratio beoperf / iperf3: {ratio:.3f}")
    print(f"commands: {rows[0]['beoperf']['cmd']}  |  {rows[0]['iperf3']['cmd']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
