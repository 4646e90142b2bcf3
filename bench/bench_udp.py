"""``beoperf pingpong --mode stream --udp --rate R`` against ``iperf3 -u -b R -l SIZE`` through
a token bucket between two network namespaces (tests/netns.py), side by side.

Three namespaces: the server, the client and a switch (a bridge) between them; the
switch's port towards the server is shaped with ``tc tbf`` at ``--limit`` (burst 256 KB,
latency 100 ms, as bench_streams.py), so that the bottleneck is on the path, not on the
sender's own interface (a qdisc there holds a sender back through its socket buffer, and
neither tool then sends at the rate asked for); for each rate of ``--rates``
(one below the limit, one above, by default) each round runs beoperf (``--sizes SIZE
--trial-time T``) and then iperf3 (``-u -b R -l SIZE -t T``), and the table gives each
one's loss, jitter and goodput, with the loss the limit implies (1 - limit's payload rate /
rate sent) and the load average before and after.

Usage (root, about a minute at the defaults)::

    python bench/bench_udp.py [--limit 20mbit] [--rates 10M,40M] [--size 1472] [--time 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import netns  # noqa: E402 - the tests' namespace hosts

PORT_BEOPERF, PORT_IPERF = 5202, 5301
UDP_IP_ETHERNET = 8 + 20 + 14  # bytes a datagram's frame adds to its payload (IPv4)


def shape(switch: str, port: str, rate: str) -> None:
    subprocess.run(["ip", "netns", "exec", switch, "tc", "qdisc", "replace", "dev", port,
                    "root", "tbf", "rate", rate, "burst", "256kb", "latency", "100ms"],
                   check=True, timeout=30)


def beoperf_round(client: netns.Host, addr: str, rate: str, size: int, seconds: float) -> dict:
    cmd = [sys.executable, "-m", "beoperf", "pingpong", addr, "--port", str(PORT_BEOPERF),
           "--mode", "stream", "--udp", "--rate", rate, "--sizes", str(size), "--trial-time",
           str(seconds), "--history", "off", "--json"]
    res = client.run(cmd, check=False, timeout=120)
    if res.returncode != 0:
        raise SystemExit(f"beoperf failed: {res.stderr.strip()}")
    f = json.loads(res.stdout)["body"]["sizes"][0]["udp"]
    return {"loss": f["loss"], "jitter_us": f["jitter_us"], "goodput_bps": f["goodput_bps"],
            "sent_bps": f["sent_bps"], "sent": f["sent"], "lost": f["lost"],
            "cmd": " ".join(cmd[1:])}


def iperf3_round(server: netns.Host, client: netns.Host, rate: str, size: int,
                 seconds: float, pacing_us: int | None = None) -> dict:
    srv = server.popen(["iperf3", "-s", "-1", "-p", str(PORT_IPERF)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        cmd = ["iperf3", "-c", server.addr4, "-p", str(PORT_IPERF), "-u", "-b", rate, "-l",
               str(size), "-t", f"{seconds:g}", "-J"]
        if pacing_us is not None:  # iperf3 sends a burst per pacing timer tick (1000 us)
            cmd += ["--pacing-timer", str(pacing_us)]
        res = client.run(cmd, check=False, timeout=seconds + 60)
    finally:
        srv.wait(timeout=30)
    if res.returncode != 0:
        raise SystemExit(f"iperf3 failed: {res.stdout[-300:]} {res.stderr.strip()}")
    end = json.loads(res.stdout)["end"]
    got = end.get("sum_received") or end["sum"]
    summed = end["sum"]
    packets = summed["packets"]
    return {"loss": summed["lost_packets"] / packets if packets else None,
            "jitter_us": summed["jitter_ms"] * 1e3,
            "goodput_bps": got["bits_per_second"] * (1 - summed["lost_packets"] / packets)
            if "sum_received" not in end and packets else got["bits_per_second"],
            "sent_bps": summed["bits_per_second"], "sent": packets,
            "lost": summed["lost_packets"], "cmd": " ".join(cmd)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", default="20mbit")
    ap.add_argument("--rates", default="10M,40M")
    ap.add_argument("--size", type=int, default=1472)
    ap.add_argument("--time", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--pacing-timer", type=int, default=None, metavar="US",
                    help="iperf3's --pacing-timer (default: iperf3's own, 1000 us: it sends "
                         "a burst per tick, which above the limit reads as more jitter)")
    args = ap.parse_args()
    ok, why = netns.can_use_netns()
    if not ok:
        raise SystemExit(f"cannot build namespaces: {why}")
    version = subprocess.run(["iperf3", "--version"], capture_output=True, text=True,
                             check=False).stdout.splitlines()[0]
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    rows = []
    with netns.VethPair(3) as topo:
        server, client = topo.hosts[0], topo.hosts[1]
        assert topo.switch is not None
        shape(topo.switch, "p0", args.limit)  # the switch's port towards the server
        serve = server.popen([sys.executable, "-m", "beoperf", "serve", "--port",
                              str(PORT_BEOPERF)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        if "port" not in (serve.stdout.readline() if serve.stdout else ""):
            raise SystemExit("beoperf serve did not start")
        try:
            for _ in range(args.rounds):
                for rate in args.rates.split(","):
                    rows.append((rate, beoperf_round(client, server.addr4, rate, args.size,
                                                     args.time),
                                 iperf3_round(server, client, rate, args.size, args.time,
                                              args.pacing_timer)))
        finally:
            serve.terminate()
            serve.wait(timeout=10)
    load1 = Path("/proc/loadavg").read_text().split()[:3]
    payload = netns.rate_bytes_per_sec(args.limit) * 8 * args.size / (args.size +
                                                                      UDP_IP_ETHERNET)
    print(f"{version}; tbf {args.limit} on the switch's port to the receiver, burst 256kb, "
          f"latency 100ms; {args.size} B datagrams for {args.time:g} s; load average "
          f"{' '.join(load0)} before, {' '.join(load1)} after")
    print("| rate | tool | sent Mbit/s | loss | implied loss | jitter us | goodput Mbit/s |")
    print("|---|---|---|---|---|---|---|")
    for rate, beo, ipf in rows:
        for name, r in (("beoperf", beo), ("iperf3", ipf)):
            implied = max(0.0, 1 - payload / r["sent_bps"]) if r["sent_bps"] else 0.0
            print(f"| {rate} | {name} | {r['sent_bps'] / 1e6:.2f} | {r['loss'] * 100:.2f}% "
                  f"({r['lost']}/{r['sent']}) | {implied * 100:.1f}% | {r['jitter_us']:.1f} | "
                  f"{r['goodput_bps'] / 1e6:.2f} |")
    print(f"commands: {rows[0][1]['cmd']}  |  {rows[0][2]['cmd']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
