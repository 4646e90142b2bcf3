"""How often ``beoperf compare`` says "better" or "worse" when nothing changed, and how
often it finds a change that is there (issue 25).

For each link (loopback; a veth pair between two network namespaces built with
tests/netns.py) it makes ``--pairs`` A/A pairs: two ``beoperf pingpong`` runs of one setup,
back to back, compared with ``beoperf compare`` (one run a side).  Over all pairs it
counts the headline verdicts (latency, peak) and every size's verdict that is "better" or
"worse" (each is wrong).  Then, on the veth link shaped with ``tc tbf`` at 100 and at
200 Mbit/s (both ends), it makes ``--pairs`` known-effect pairs and counts how often the
200 Mbit/s run's peak is "better" and at how many of the large sizes.

The runs keep no history by default (``--history off``: each comparison uses the stated
default spread between runs); ``--history DIR`` gives every setup a history in DIR
(``DIR/<link>``), as a root user's runs have, so that later pairs use the spread the
earlier ones showed.  The load average is read before and after each link.

Usage::

    python bench/bench_verdicts.py [--pairs 10] [--links loopback,veth] [--shaped]
        [--sweep-args "--end 1M --time-budget 8"] [--out bench/out]

Prints a Markdown table, writes every comparison to OUT/verdicts-<UTC>.json.  The veth
link and --shaped need root.  Results: bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import netns  # noqa: E402

JUDGED = ("better", "worse")
PORT = "5301"


def beoperf(*args: str) -> list[str]:
    return [sys.executable, "-m", "beoperf", *args]


def loadavg() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


@contextlib.contextmanager
def link(name: str) -> Iterator[tuple[list[str], str | None, netns.VethPair | None]]:
    """(the client's command prefix, the server's address, the topology) of a link, with
    a ``beoperf serve`` running on its far end; loopback: no address, the embedded server
    (the README's main job, both ends placed on two CPUs: an external server left to the
    scheduler shares the client's CPU in some runs and not in others, 3x apart here)."""
    if name == "loopback":
        yield [], None, None
        return
    with netns.VethPair(2) as topo:
        server, client = topo.hosts
        proc = server.popen(beoperf("serve", "--port", PORT), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
        proc.stdout.readline()
        yield client.argv([]), server.addr4, topo


def run(prefix: list[str], host: str | None, out: Path, extra: Sequence[str],
        history: str) -> Path:
    peer = [host, "--port", PORT] if host else []
    argv = [*prefix, *beoperf("pingpong", *peer, "--history", history, *extra, "-o",
                              str(out))]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)}: {res.stderr.strip()}")
    return Path(f"{out}.json")


def compare(a: Path, b: Path) -> dict:
    res = subprocess.run(beoperf("compare", str(a), str(b), "--format", "json"),
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout)["body"]["rows"][1]


def tally(rows: list[dict]) -> dict:
    heads = [r[k]["verdict"] for r in rows for k in ("latency_test", "peak_test")]
    sizes = [e["verdict"] for r in rows for e in r["size_effects"]]
    return {"pairs": len(rows), "headline_judged": sum(v in JUDGED for v in heads),
            "headline": len(heads), "sizes_judged": sum(v in JUDGED for v in sizes),
            "sizes": len(sizes),
            "sources": sorted({r["latency_test"]["spread_source"] for r in rows})}


def aa_pairs(name: str, args: argparse.Namespace, work: Path) -> dict:
    rows = []
    history = "off" if args.history == "off" else str(Path(args.history) / name)
    load0 = loadavg()
    with link(name) as (prefix, host, _topo):
        for i in range(args.pairs):
            a = run(prefix, host, work / f"{name}-aa{i}a", args.sweep_args, history)
            b = run(prefix, host, work / f"{name}-aa{i}b", args.sweep_args, history)
            rows.append(compare(a, b))
            print(f"{name} A/A {i + 1}/{args.pairs}: {rows[-1]['latency_test']['verdict']}, "
                  f"{rows[-1]['peak_test']['verdict']}, {rows[-1]['size_verdicts']}",
                  file=sys.stderr)
    return {**tally(rows), "loadavg_before": load0, "loadavg_after": loadavg(), "rows": rows}


def shape(topo: netns.VethPair, mbit: int) -> None:
    for host in topo.hosts:
        host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf", "rate",
                  f"{mbit}mbit", "burst", "16kb", "latency", "50ms", "peakrate",
                  f"{mbit + mbit // 100}mbit", "mtu", "1600"])


def known_effect(args: argparse.Namespace, work: Path) -> dict:
    rows = []
    history = "off" if args.history == "off" else str(Path(args.history) / "shaped")
    load0 = loadavg()
    with link("veth") as (prefix, host, topo):
        assert topo is not None
        for i in range(args.pairs):
            paths = []
            for mbit in (100, 200):
                shape(topo, mbit)
                paths.append(run(prefix, host, work / f"tbf{mbit}-{i}", args.shaped_args,
                                 history))
            rows.append(compare(*paths))
            print(f"tbf 100 vs 200 {i + 1}/{args.pairs}: {rows[-1]['peak_test']['verdict']}"
                  f", {rows[-1]['size_verdicts']}", file=sys.stderr)
    found = sum(r["peak_test"]["verdict"] == "better" for r in rows)
    large = [e for r in rows for e in r["size_effects"] if e["size"] >= 256 * 1024]
    return {"pairs": len(rows), "peak_better": found,
            "large_sizes_better": sum(e["verdict"] == "better" for e in large),
            "large_sizes": len(large), "loadavg_before": load0, "loadavg_after": loadavg(),
            "rows": rows}


def table(results: dict) -> str:
    lines = ["| link | A/A pairs | latency/peak better or worse | sizes better or worse | "
             "spread used | load avg before -> after |", "|---|---:|---:|---:|---|---|"]
    for name, r in results["aa"].items():
        share = r["sizes_judged"] / r["sizes"] if r["sizes"] else 0.0
        lines.append(f"| {name} | {r['pairs']} | {r['headline_judged']} of {r['headline']} | "
                     f"{r['sizes_judged']} of {r['sizes']} ({share:.1%}) | "
                     f"{'; '.join(r['sources'])} | {' '.join(r['loadavg_before'])} -> "
                     f"{' '.join(r['loadavg_after'])} |")
    k = results.get("known")
    if k:
        lines += ["", "| tbf 100 vs 200 Mbit/s | pairs | peak better | sizes >= 256 KiB better "
                  "| load avg before -> after |", "|---|---:|---:|---:|---|",
                  f"| veth | {k['pairs']} | {k['peak_better']} of {k['pairs']} | "
                  f"{k['large_sizes_better']} of {k['large_sizes']} | "
                  f"{' '.join(k['loadavg_before'])} -> {' '.join(k['loadavg_after'])} |"]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--links", default="loopback,veth")
    p.add_argument("--shaped", action="store_true", help="also the tbf 100 vs 200 Mbit/s pairs")
    p.add_argument("--sweep-args", default="--end 1M --time-budget 8",
                   help="the A/A runs' pingpong options (default: %(default)s)")
    p.add_argument("--shaped-args", default="--sizes 64K,256K,1M --max-time 4",
                   help="the shaped runs' pingpong options (default: %(default)s)")
    p.add_argument("--history", default="off", metavar="DIR|off")
    p.add_argument("--out", default=str(REPO / "bench" / "out"))
    args = p.parse_args(argv)
    args.sweep_args = shlex.split(args.sweep_args)
    args.shaped_args = shlex.split(args.shaped_args)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"utc": stamp, "argv": sys.argv, "aa": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.links.split(","):
            results["aa"][name] = aa_pairs(name, args, Path(tmp))
        if args.shaped:
            results["known"] = known_effect(args, Path(tmp))
    (out / f"verdicts-{stamp}.json").write_text(json.dumps(results, indent=1))
    print(table(results))
    print(f"\nraw: {out / f'verdicts-{stamp}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
