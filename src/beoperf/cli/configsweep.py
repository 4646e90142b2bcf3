"""`beoperf pingpong --sweep KEY=V1,V2,...`: one run per configuration, compared.

Each configuration is a full sweep against the same peer, stored as its own
result (PREFIX-KEY-VALUE.json and .np); then the comparison table against the
first configuration (PREFIX-compare.md) and the three graphs (PREFIX-plots/).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from beoperf.cli import ExitStatus, UsageError
from beoperf.cli.pingpong import (
    check_args,
    collect,
    finish,
    peer,
    pinned,
    print_summary,
    write_outputs,
)
from beoperf.engines.base import MODES
from beoperf.results.model import RunResult

SWEEPABLE = {"sndbuf": "sndbuf", "rcvbuf": "rcvbuf", "mode": "mode", "nocache": "nocache"}
ON_OFF = {"on": True, "off": False, "yes": True, "no": False, "true": True, "false": False}


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """'sndbuf=16K,64K' -> ('sndbuf', ['16K', '64K'])."""
    key, sep, values = text.partition("=")
    key = key.strip()
    items = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or key not in SWEEPABLE or not items:
        raise UsageError(f"--sweep {text!r}: expected KEY=V1,V2,... with KEY one of "
                         f"{', '.join(SWEEPABLE)}")
    if key == "nocache" and any(v.lower() not in ON_OFF for v in items):
        raise UsageError(f"--sweep {text!r}: nocache takes on or off")
    if key == "mode" and any(v not in MODES for v in items):
        raise UsageError(f"--sweep {text!r}: modes are {', '.join(MODES)}")
    return key, items


def configure(args: argparse.Namespace, key: str, value: str) -> argparse.Namespace:
    """A copy of the options with one setting changed and its own output prefix."""
    one = copy.copy(args)
    setattr(one, SWEEPABLE[key], ON_OFF[value.lower()] if key == "nocache" else value)
    one.output = f"{args.output}-{key}-{value}"
    one.json = False
    return one


def run_config_sweep(args: argparse.Namespace) -> int:
    key, values = parse_sweep(args.sweep)
    if not args.output:
        raise UsageError("--sweep writes one result per configuration: give -o PREFIX")
    configs = [configure(args, key, v) for v in values]
    checked = [check_args(c) for c in configs]  # every value is validated before any run
    results: list[RunResult] = []
    with pinned(checked[0][1]["client_cpu"]), peer(args, [p for _, p in checked]) as (host, port):
        for one, (cfg, params), value in zip(configs, checked, values, strict=True):
            print(f"== {key}={value}", file=sys.stderr)
            result, outcome = collect(one, cfg, params, host, port)
            write_outputs(one, result)
            if outcome.status != "complete":
                break
            print_summary(result, sys.stdout)
            results.append(result)
    if results:  # what completed is compared even when a later configuration failed
        write_comparison(results, [f"{key}={v}" for v in values[:len(results)]],
                         Path(args.output))
    if outcome.status != "complete":  # its own exit status: 130, 5, 3, ...
        return finish(result, outcome, host, quiet_stdout=True)
    return ExitStatus.OK


def write_comparison(results: list[RunResult], labels: list[str], prefix: Path) -> None:
    """The table against the first configuration, and the graphs."""
    from beoperf.analysis import compare
    from beoperf.plots.figures import write_figures

    rows = compare.rows(results, 0, labels=labels)
    table = compare.render_markdown(rows)
    out = prefix.with_name(prefix.name + "-compare.md")
    out.write_text(table + "\n")
    print(table)
    paths = write_figures(results, labels, prefix.with_name(prefix.name + "-plots"), "png")
    print(f"wrote {out} and {', '.join(str(p) for p in paths)}")
