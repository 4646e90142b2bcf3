"""Time `beoperf plot` and `beoperf compare` on N results of a full default-schedule sweep.

Target (issue 3): both finish in under 3 s on 20 results. The results are real
sweeps (124 sizes each) made here on loopback against a `beoperf serve` this
script starts and stops by PID; `--max-time` is lowered only to make them
quickly, which changes no part of what plot and compare read.

    python bench/bench_analysis.py [--runs 20] [--repeat 3] [--out bench/out/analysis]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def make_results(outdir: Path, runs: int) -> list[Path]:
    """Full-schedule sweeps on loopback, reusing any already made."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = [outdir / f"run-{i:02d}.json" for i in range(runs)]
    missing = [p for p in paths if not p.exists()]
    if not missing:
        return paths
    server = subprocess.Popen([sys.executable, "-m", "beoperf", "serve", "--bind", "127.0.0.1",
                               "--port", "0"], stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.DEVNULL)
    try:
        port = server.stdout.readline().rsplit(" port ", 1)[1].split()[0]
        for p in missing:
            subprocess.run([sys.executable, "-m", "beoperf", "pingpong", "127.0.0.1", "--port",
                            port, "--max-time", "0.25", "-o", str(p.with_suffix(""))],
                           check=True, stdout=subprocess.DEVNULL)
    finally:
        server.terminate()
        server.wait(10)
    return paths


def timed(argv: list[str], repeat: int) -> list[float]:
    """Wall seconds of each of `repeat` runs of a beoperf command (start-up included)."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "beoperf", *argv], check=True,
                       stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("bench/out/analysis"))
    args = ap.parse_args()
    paths = [str(p) for p in make_results(args.out, args.runs)]
    sizes = {len(json.loads(Path(p).read_text())["body"]["sizes"]) for p in paths}
    figures = {
        "plot": timed(["plot", *paths, "-o", str(args.out / "plots")], args.repeat),
        "compare": timed(["compare", *paths], args.repeat),
        "compare --format impact": timed(["compare", "--format", "impact", *paths], args.repeat),
        "python start-up (beoperf --version)": timed(["--version"], args.repeat),
    }
    print(f"{len(paths)} results, sizes per result: {sorted(sizes)}")
    print("| command | wall s, median of runs | runs | target |")
    print("|---|---|---|---|")
    for name, secs in figures.items():
        target = "< 3 s" if "start-up" not in name else "-"
        print(f"| `beoperf {name}` | {statistics.median(secs):.2f} | "
              f"{', '.join(f'{s:.2f}' for s in secs)} | {target} |")
    (args.out / "timings.json").write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
