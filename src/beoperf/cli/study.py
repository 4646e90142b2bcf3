"""`beoperf study`: one factor at a time on every host involved, measured in interleaved
blocks beside Default, concluded, and every host put back.

``mtu``, ``buffers`` and ``latency-checklist`` are the published experiments, each one
line; ``run FILE`` reads a study file (TOML) for anything else.  ``restore`` and the
internal ``agent`` are ``cli/study_agent.py``.  Without ``--apply`` a study prints its plan
(each host's current values, the configurations, the schedule) and changes nothing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence

from beoperf import report, safeio, units
from beoperf.cli import ExitStatus, UsageError, check_seconds
from beoperf.model.document import Document
from beoperf.model.study import Study
from beoperf.suites import study as suite
from beoperf.suites import study_spec as specs

# subcommand -> the module that adds its parser (a literal table: tests/test_architecture)
SUBCOMMANDS = {"mtu": "beoperf.cli.study", "buffers": "beoperf.cli.study",
               "latency-checklist": "beoperf.cli.study", "run": "beoperf.cli.study",
               "restore": "beoperf.cli.study_agent", "agent": "beoperf.cli.study_agent"}
FORMATS = ("text", "markdown", "csv")
LATENCY_LIMIT = 4096  # --size: a size under it is the latency's, the other the goodput's

DESCRIPTION = """A study: hosts x factors (each with levels) x measurements, measured in
interleaved, randomised blocks, each next to a block of Default, with repeats; each level's
effect against Default with a 95% interval, the combination of what helped, and every
host put back.  Every host arms a dead-man agent before any change: if the study's
controller stops renewing its lease (killed, cut off), the host restores itself."""

EXAMPLES = """examples:
  beoperf study mtu --peer node02 --levels 1500,3000,9000            # the plan only
  beoperf study mtu --peer node02 --levels 1500,9000 --apply -o mtu.json
  beoperf study buffers --peer node02 --levels default,64K,256K,4M --apply
  beoperf study latency-checklist -w 'node[01-16]' --measure pingpong,hpl --apply
  beoperf study run my-study.toml --apply
  beoperf lab up --hosts 2 --rate 100M     # namespace hosts to try it in, then e.g.
  beoperf study mtu -w beolab-x-[0-1] --exec-template 'ip netns exec %h' \\
      --data-address beolab-x-0=198.18.0.1 --data-address beolab-x-1=198.18.0.2 \\
      --levels 1500,9000 --margin 1% --apply
  beoperf study mtu -w 198.18.0.1,198.18.0.2 --levels 1500,9000 --apply \\
      --ssh-command 'ip netns exec beolab-x-ctl ssh -i ...'  # the lab's ssh agent line

Without --apply nothing is changed: each host's current values are read and the plan is
printed.  With --apply (root on every host): each host's dead-man agent takes the tune
lock and writes its rollback file before the first change, and restores the host by
itself when its lease (--lease) is not renewed.  The servers of the pairs must run
'beoperf serve' (--port).  A study file may make root run commands and load rulesets: it
must be yours and writable by you only, at most 1 MiB of TOML of the study-file schema.

Exit status: 0 done (all hosts restored, or what helped kept with --keep best); 2 bad
input, nothing contacted; 1 a host refused (busy, Slurm jobs, not root) or a change
failed, after every host was restored; 6 a host was lost (it restores itself when its
lease lapses); 130/143 Ctrl-C/SIGTERM, after every host was restored.  The document is
written with -o in every case but a refusal before any host is armed (bad input, a
Slurm node running a job, a factor a host cannot study: one line, nothing changed).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_parser_for(sub, ())


def add_parser_for(sub: argparse._SubParsersAction, rest: Sequence[str]) -> None:
    """The `study` parser; only the named subcommand's module is imported."""
    p = sub.add_parser("study", help="change one thing on the hosts, measure, conclude, "
                       "restore", description=DESCRIPTION, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    inner = p.add_subparsers(dest="study_command", metavar="SUBCOMMAND", parser_class=type(p))
    named = SUBCOMMANDS.get(rest[0]) if rest else None
    for module in (named,) if named else dict.fromkeys(SUBCOMMANDS.values()):
        importlib.import_module(module).add_parsers(inner)
    p.set_defaults(func=_no_subcommand)


def _no_subcommand(_args: argparse.Namespace) -> int:
    raise UsageError("beoperf study: no subcommand given",
                     f"one of {', '.join(SUBCOMMANDS)}; see 'beoperf study --help'")


PRESET_HELP = {
    "mtu": "the MTU on both ends of every pair: latency at 16 B and stream goodput at 1 MiB "
           "(the system's congestion control); a level the path does not carry is skipped",
    "buffers": "the socket buffers at both ends (default = the system's), the hosts' limits "
               "raised to the largest level in every configuration",
    "latency-checklist": "each change the latency audit asks for, irqbalance off, the "
                         "firewall flushed, busy polling: each alone against Default, "
                         "then all that helped combined",
}


def add_parsers(inner: argparse._SubParsersAction) -> None:
    for name in specs.PRESETS:
        p = inner.add_parser(name, help=PRESET_HELP[name], description=PRESET_HELP[name],
                             epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
        add_options(p, preset=True)
        p.set_defaults(func=run, preset=name)
    p = inner.add_parser("run", help="a study file (TOML): any factors and measurements",
                         epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", help="the study file (TOML, yours, 0600)")
    add_options(p, preset=False)
    p.set_defaults(func=run, preset=None)


def add_options(p: argparse.ArgumentParser, preset: bool) -> None:
    hosts = p.add_argument_group("hosts")
    hosts.add_argument("--peer", metavar="HOST", help="this host and HOST, both ends changed")
    hosts.add_argument("-w", "--nodes", metavar="NODESET",
                       help="these hosts (e.g. 'node[01-16]'); each measured against the first")
    hosts.add_argument("--exec-template", metavar="TEMPLATE",
                       help="reach each host by a local command with %%h, its name "
                            "(e.g. 'ip netns exec %%h'), not ssh")
    hosts.add_argument("--ssh-command", metavar="CMD",
                       help="reach each host by this ssh-like command, the host's name "
                            "after it (e.g. 'ssh -p 2222', or the ssh agent line "
                            "'beoperf lab up' prints), not plain ssh")
    hosts.add_argument("--remote-command", default=specs.HostsSpec.remote_command,
                       metavar="CMD", help="how beoperf starts on a host (default '%(default)s')")
    hosts.add_argument("--fanout", type=int, default=specs.HostsSpec.fanout, metavar="N",
                       help="at most N hosts at a time (default %(default)s)")
    hosts.add_argument("--timeout", type=float, default=specs.HostsSpec.timeout,
                       metavar="SECONDS", help="per-host time limit of a command "
                       "(default %(default)s)")
    hosts.add_argument("--pairs", metavar="FILE", help="the pairs measured: 'CLIENT SERVER' a line")
    hosts.add_argument("--data-address", action="append", default=[], metavar="HOST=ADDR",
                       help="the address HOST is measured at (repeatable)")
    hosts.add_argument("--interface", metavar="IF", help="the interface changed (default: "
                       "the route to the data address)")
    hosts.add_argument("--port", type=int, default=specs.HostsSpec.port,
                       help="the servers' 'beoperf serve' port (default %(default)s)")
    hosts.add_argument("--force", action="store_true",
                       help="change Slurm nodes even when they run jobs")
    factors = p.add_argument_group("factors")
    if preset:
        factors.add_argument("--levels", metavar="L1,L2,...",
                             help="the preset factor's levels ('default': the hosts' own)")
    factors.add_argument("--factor", action="append", default=[], metavar="NAME=L1,L2",
                         help="another factor and its levels (repeatable)")
    add_measure_options(p)
    add_design_options(p)
    end = p.add_argument_group("safety and end")
    end.add_argument("--apply", action="store_true",
                     help="run the study (root on every host); without it, the plan only")
    end.add_argument("--lease", default="60", metavar="T",
                     help="each host restores itself when not renewed for T (default 60 s)")
    end.add_argument("--settle", default="1", metavar="T",
                     help="wait after an MTU or link change, beyond the carrier's return "
                          "(default 1 s; 0: the carrier alone, as on veth)")
    end.add_argument("--keep", choices=("best", "none"), default="none",
                     help="best: leave the levels that helped applied (default none)")
    end.add_argument("--persist", metavar="DIR",
                     help="with --keep best: files that make what is kept permanent")
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="PATH", help="write the document to PATH")
    out.add_argument("--json", action="store_true", help="print the document")
    out.add_argument("--format", choices=FORMATS, default="text", help="what is printed")


def add_measure_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("measurements")
    g.add_argument("--measure", metavar="NAMES",
                   help=f"more measurements: {', '.join(specs.MEASUREMENT_NAMES)} "
                        "(node:KERNEL)")
    g.add_argument("--measure-command", metavar="CMD",
                   help="an application's wall time (no shell unless 'sh -c')")
    g.add_argument("--figure-regex", metavar="RE",
                   help="with --measure-command: a figure from its output (one group)")
    g.add_argument("--figure-unit", metavar="UNIT", help="the unit of --figure-regex's figure")
    g.add_argument("--figure-higher-is-better", action="store_true",
                   help="--figure-regex's figure is a rate, not a time")
    g.add_argument("--size", metavar="SIZES",
                   help="pingpong's latency size and stream size (e.g. 16,1M: the one "
                        "under 4 KiB is the latency's, the other the goodput's)")
    g.add_argument("--mode", choices=("pingpong", "stream"),
                   help="pingpong's latency only (pingpong) or goodput only (stream)")
    g.add_argument("--curve", action="store_true", help="pingpong's whole curve per level")
    g.add_argument("--np", type=int, metavar="N", help="processes of hpl and hpcc")


def add_design_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("design")
    g.add_argument("--design", choices=specs.DESIGNS, default="one-at-a-time",
                   help="one-at-a-time (default), greedy or factorial")
    g.add_argument("--repeats", type=int, default=specs.DEFAULT_REPEATS, metavar="N",
                   help=f"blocks of each configuration (default %(default)s, at least "
                        f"{specs.MIN_REPEATS})")
    g.add_argument("--time-budget", metavar="T", help="the study's time (e.g. 10min)")
    g.add_argument("--block-time", default=str(specs.DEFAULT_BLOCK_S), metavar="T",
                   help="each measurement's time in a block (default %(default)s s)")
    g.add_argument("--seed", type=int, metavar="N", help="the order's seed (reproducible)")
    g.add_argument("--margin", metavar="FRACTION", default="10%",
                   help="a change within it counts as none (default %(default)s)")
    g.add_argument("--decide-by", metavar="FIGURE",
                   help="the figure that decides what helped (default the first; the "
                        "mtu and buffers presets: the stream goodput)")
    g.add_argument("--precision", metavar="FRACTION",
                   help="after --repeats, go on a round at a time while a level's 95%% "
                        "interval on the deciding figure is wider than ±FRACTION (e.g. 1%%)")
    g.add_argument("--max-repeats", type=int, metavar="N",
                   help="with --precision: at most N blocks of a configuration (default "
                        f"{specs.PRECISION_ROUNDS} x --repeats)")


# --------------------------------------------------------------------------- spec


def _is_zero(text: str | None) -> bool:
    """'0', '0s', '0 ms': no time at all (the time grammar takes positive times only)."""
    return text is not None and text.strip().rstrip("ms").strip() in ("0", "0.0")


def seconds(text: str | None, name: str) -> float | None:
    """A time option ('10min', '2.5', '500ms') in seconds; UsageError otherwise."""
    if text is None:
        return None
    try:
        value = units.parse_time(text)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None
    if value:
        check_seconds(name, value)
    return value


def fraction(text: str, name: str) -> float:
    try:
        return units.parse_fraction(text)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None


def hosts_of(args: argparse.Namespace) -> specs.HostsSpec:
    if args.nodes and args.peer:
        raise UsageError("give --peer HOST or -w NODESET, not both")
    check_seconds("--timeout", args.timeout)
    if args.fanout < 1:
        raise UsageError(f"--fanout {args.fanout}: give at least 1")
    if args.exec_template is not None and "%h" not in args.exec_template:
        raise UsageError("--exec-template must contain %h, the host's name")
    if args.ssh_command is not None:
        check_ssh_command(args)
    pairs = specs.read_pairs(args.pairs) if args.pairs else ()
    return specs.HostsSpec(peer=args.peer, nodes=args.nodes, exec_template=args.exec_template,
                           remote_command=args.remote_command, fanout=args.fanout,
                           timeout=args.timeout, pairs=pairs,
                           data_address=specs.parse_data_addresses(args.data_address),
                           interface=args.interface, port=args.port, force=args.force,
                           ssh_command=args.ssh_command)


def check_ssh_command(args: argparse.Namespace) -> None:
    """--ssh-command: one ssh-like command, the host's name put after it (an exec
    template, whose words it runs as its own arguments, is --exec-template)."""
    if args.exec_template is not None:
        raise UsageError("give --exec-template or --ssh-command, not both")
    if not args.ssh_command.split() or "%" in args.ssh_command:
        raise UsageError(f"--ssh-command {args.ssh_command!r}: give an ssh-like command; "
                         "the host's name goes after it (no %h: that is --exec-template)")


def design_of(args: argparse.Namespace) -> specs.DesignSpec:
    return specs.DesignSpec(
        name=args.design, repeats=args.repeats,
        time_budget=seconds(args.time_budget, "--time-budget"),
        block_time=seconds(args.block_time, "--block-time") or specs.DEFAULT_BLOCK_S,
        seed=args.seed, margin=fraction(args.margin, "--margin"), decide_by=args.decide_by,
        precision=None if args.precision is None else fraction(args.precision, "--precision"),
        max_repeats=args.max_repeats,
        lease=seconds(args.lease, "--lease") or 0.0,
        settle=0.0 if _is_zero(args.settle) else seconds(args.settle, "--settle") or 0.0)


def sizes_of(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return [units.parse_size(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise UsageError(f"--size: {exc}") from None


def measures_of(args: argparse.Namespace) -> list[specs.MeasureSpec]:
    """--measure NAMES and --measure-command CMD as measurements."""
    out = []
    for name in (args.measure or "").split(","):
        name = name.strip()
        if not name:
            continue
        kind, _, kernel = name.partition(":")
        if kind not in specs.MEASUREMENT_NAMES or kind == "command" or \
                (kernel and kind != "node"):
            raise UsageError(f"--measure {name}: choose pingpong, ring, hpl, hpcc or "
                             "node:METRIC")
        params: dict = {"metric": kernel} if kernel else {}
        if args.np is not None and kind in ("hpl", "hpcc"):
            params["np"] = args.np
        out.append(specs.MeasureSpec(kind, params))
    if args.measure_command:
        params = {"command": args.measure_command}
        if args.figure_regex:
            params.update(figure_regex=args.figure_regex, figure_unit=args.figure_unit or "",
                          figure_higher_is_better=bool(args.figure_higher_is_better))
        out.append(specs.MeasureSpec("command", params))
    elif args.figure_regex:
        raise UsageError("--figure-regex goes with --measure-command")
    return out


def pingpong_params(args: argparse.Namespace, measures: list[specs.MeasureSpec]
                    ) -> list[specs.MeasureSpec]:
    """The preset's pingpong with --size and --mode applied."""
    sizes = sizes_of(args.size)
    small = [s for s in sizes if s < LATENCY_LIMIT]
    large = [s for s in sizes if s >= LATENCY_LIMIT]
    if len(small) > 1 or len(large) > 1:
        raise UsageError(f"--size {args.size}: one latency size (under 4 KiB) and one "
                         "stream size")
    out = []
    for m in measures:
        if m.name == "pingpong":
            params = dict(m.params)
            if small:
                params["latency_size"] = small[0]
            if large:
                params["goodput_size"] = large[0]
            if args.mode == "pingpong":
                params["goodput_size"] = None
            elif args.mode == "stream":
                params["latency_size"] = None
            m = specs.MeasureSpec(m.name, params)
        out.append(m)
    return out


def study_of(args: argparse.Namespace) -> specs.StudySpec:
    """The study the options (and the file of `run`) describe."""
    hosts, design = hosts_of(args), design_of(args)
    extra = tuple(specs.parse_factor_option(f) for f in args.factor)
    measures = measures_of(args)
    if args.preset is None:
        content = specs.read_study_file(args.file)
        found = specs.from_file(content, args.file, hosts, design)
        factors = specs.merged(found.factors, extra)
        return specs.StudySpec(found.name, found.hosts, factors,
                               tuple(pingpong_params(args, [*found.measures, *measures])),
                               found.design)
    levels = specs.split_levels(args.levels, "--levels") if args.levels else ()
    factors, ms = specs.preset(args.preset, levels, extra, measures, curve=args.curve)
    ms = tuple(pingpong_params(args, list(ms)))
    return specs.StudySpec(args.preset, hosts, factors, ms, preset_design(args.preset, design, ms))


def preset_design(name: str, design: specs.DesignSpec,
                  measures: Sequence[specs.MeasureSpec]) -> specs.DesignSpec:
    """The mtu and buffers presets decide (--keep best, greedy, --precision) by the
    stream goodput, what the papers change MTU and buffers for, unless --decide-by names
    another figure or the goodput is not measured (--only latency)."""
    from dataclasses import replace

    from beoperf.suites.study_measure import size_key

    if design.decide_by is not None or name not in ("mtu", "buffers"):
        return design
    for m in measures:
        size = m.params.get("goodput_size") if m.name == "pingpong" else None
        if isinstance(size, int) and size > 0:
            return replace(design, decide_by=f"goodput_bps@{size_key(size)}")
    return design


def spec_of(args: argparse.Namespace) -> suite.Spec:
    if args.persist and args.keep != "best":
        raise UsageError("--persist DIR goes with --keep best")
    return suite.Spec(study_of(args), apply=args.apply, keep=args.keep, persist=args.persist,
                      command_line=tuple(getattr(args, "argv", ())))


# --------------------------------------------------------------------------- run


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def writer(path: str | None) -> suite.KeepDocument:
    """Where the document goes (-o), written whole or not at all, never through a link."""
    def keep(doc: Document) -> None:
        if path:
            safeio.write_atomic(path, doc.dumps())
            say(f"wrote {path}")

    return keep


def exit_status(doc: Document) -> int:
    status = doc.body.get("status")
    if status == "partial":
        return int(ExitStatus.PARTIAL)
    if status == "failed":
        return int(ExitStatus.ERROR)
    return int(ExitStatus.OK)


def plan_lines(study: Study, block_time: float) -> list[str]:
    """What a study would do, in full: every host's current values, the pairs, each
    factor's levels (every file a level names), each measurement with its parameters
    (every command), the configurations and the order of blocks."""
    lines = ["Plan (nothing was changed; --apply runs it):", "  hosts:"]
    for h in study.hosts:
        values = ", ".join(f"{k} {json.dumps(v)}" for k, v in h.snapshot.items()) or "-"
        lines.append(f"    {h.name} ({h.role}, {h.reach}, measured at "
                     f"{h.data_address or '-'}): {values}")
    lines.append("  pairs (client > server): "
                 + ", ".join(f"{c} > {s}" for c, s in study.pairs))
    lines.append("  factors:")
    for f in study.factors:
        levels = ", ".join(lv.label + (f" ({lv.value})" if lv.value not in (None, lv.label)
                                       else "")
                           + (" (Default: the hosts' own)" if lv.default and not lv.why
                              else f" ({lv.why})" if lv.why else "")
                           for lv in f.levels)
        lines.append(f"    {f.name} ({f.scope}) on {', '.join(f.hosts)}: {levels}")
    lines.append("  measurements:")
    for m in study.measurements:
        lines.append(f"    {m.name} {json.dumps(m.params, sort_keys=True)}: "
                     + ", ".join(f.key for f in m.figures))
    lines.append("  configurations: " + "; ".join(f"{c.id} {c.label}"
                                                   for c in study.configurations))
    order = study.schedule.order
    seconds = len(order) * block_time * max(1, len(study.measurements))
    lines.append(f"  blocks (seed {study.schedule.seed}; the first {study.schedule.warmup} "
                 f"are warm-up): {' '.join(order)}")
    lines.append(f"  about {units.format_time(seconds, 2)} of measuring, plus the "
                 "combination of what helped")
    return lines


def run(args: argparse.Namespace) -> int:
    spec = spec_of(args)
    keep = writer(args.output)
    fmt = "json" if args.json else args.format
    if not spec.apply:
        doc = suite.plan(spec, progress=say)
        keep(doc)
        if fmt == "text":
            print("\n".join(plan_lines(Study.from_document(doc),
                                        spec.study.design.block_time)) + "\n")
    else:
        doc = suite.run(spec, say, keep)
    print(report.render(doc, fmt))
    return exit_status(doc)
