"""`beoperf audit`: read this node's network, CPU and firewall settings and judge them."""

from __future__ import annotations

import argparse
import json
import os
import sys

from beoperf import protocol, sysinfo
from beoperf.audit.base import PROFILES, Finding, run_audit, show_value
from beoperf.audit.buffers import BufferAdvice, buffer_advice, parse_rate
from beoperf.cli import CliError, ExitStatus, UsageError, check_seconds
from beoperf.protocol import DEFAULT_PORT

FORMAT = "beoperf.audit"
SCHEMA_VERSION = 1
MARKS = {"pass": "ok", "warn": "WARN", "fail": "FAIL", "unknown": "?"}

EXAMPLES = """examples:
  beoperf audit                              # default route's interface, latency profile
  beoperf audit --interface eth1 --profile throughput
  beoperf audit --peer node02 --json         # the interface that reaches node02
  beoperf audit --peer 10.0.0.2 --link-speed 10G   # + socket buffers from the BDP

Read-only: nothing is changed.  The commands to change the settings that warn or fail,
and how to make them persistent, are printed after the table.  Exit status 0 even with
warnings and failures (this is a report); 2 for an unknown profile or interface.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="judge this node's settings against a tuning profile",
                       description="Collect this node's network, CPU and firewall settings "
                                   "(read-only) and judge them against a profile.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_interface_options(p, "audit")
    p.add_argument("--profile", default="latency", metavar="NAME",
                   help=f"{' | '.join(PROFILES)} (default %(default)s)")
    p.add_argument("--link-speed", metavar="RATE",
                   help="with --peer: measure the RTT to the peer's 'beoperf serve' and "
                        "recommend socket buffers from the bandwidth-delay product (e.g. 10G)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help="port of 'beoperf serve' on --peer (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print a JSON document instead")
    add_fleet_options(p)
    p.set_defaults(func=run)


def add_interface_options(p: argparse.ArgumentParser, verb: str) -> None:
    """--interface and --peer (which interface a command looks at), for audit and tune."""
    p.add_argument("--interface", "-i", metavar="IF",
                   help=f"interface to {verb} (default: the route to --peer, else the "
                        "default route's)")
    p.add_argument("--peer", metavar="ADDR", help=f"{verb} the interface that routes to ADDR")


def add_fleet_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("fleet (audit many nodes at once with ClusterShell)")
    g.add_argument("-w", "--nodes", metavar="NODESET",
                   help="audit these nodes (e.g. 'node[01-32]') and group identical results")
    g.add_argument("--exec-template", metavar="TEMPLATE",
                   help="run a local command per node instead of ssh; %%h is the node "
                        "name (e.g. 'ip netns exec %%h')")
    g.add_argument("--fanout", type=int, default=64, metavar="N",
                   help="at most N nodes at a time (default %(default)s)")
    g.add_argument("--remote-command", default="python3 -m beoperf", metavar="CMD",
                   help="how to start beoperf on a node (default '%(default)s')")
    g.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="per-node time limit (default %(default)s)")


def pick_interface(interface: str | None, peer: str | None) -> str | None:
    """The interface to audit; UsageError if the one named does not exist."""
    from beoperf.audit.checks import default_route_interface

    if interface:
        bad = "/" in interface or interface in (".", "..")
        if bad or not os.path.isdir(f"/sys/class/net/{interface}"):
            raise UsageError(f"unknown interface {interface!r}",
                             "see 'ip link' for this node's interfaces")
        return interface
    if peer:
        route = sysinfo.route_interface(peer)
        if route is None:
            raise UsageError(f"no route to --peer {peer!r} (give an IP address)")
        return route["dev"]
    return default_route_interface()


def document(profile: str, interface: str | None, findings: list[Finding]) -> dict:
    return {"format": FORMAT, "schema_version": SCHEMA_VERSION, "host": sysinfo.host_facts(),
            "profile": profile, "interface": interface,
            "findings": [f.to_dict() for f in findings]}


def format_table(findings: list[Finding]) -> list[str]:
    rows = [(MARKS[f.status], f.check, f.key, show_value(f.value), f.reason) for f in findings]
    widths = [max(len(r[i]) for r in rows) for i in range(4)] if rows else [0] * 4
    widths = [min(w, 40) for w in widths]
    return [" ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
            for r in rows]


def format_fixes(findings: list[Finding]) -> list[str]:
    todo = [f for f in findings if f.status in ("warn", "fail") and (f.command or f.persist)]
    if not todo:
        return []
    lines = ["", "To change (as root):"]
    lines += [f"  {f.command}" for f in todo if f.command]
    lines += ["", "To make persistent:"]
    lines += [f"  {f.key}: {f.persist}" for f in todo if f.persist]
    return lines


def summary_line(profile: str, interface: str | None, findings: list[Finding]) -> str:
    counts = {s: sum(1 for f in findings if f.status == s) for s in MARKS}
    parts = ", ".join(f"{n} {s}" for s, n in counts.items())
    return f"profile {profile}, interface {interface or '(none)'}: {parts}"


def buffer_section(args: argparse.Namespace) -> BufferAdvice | None:
    """--peer with --link-speed: the BDP advice (measures the RTT with the engine)."""
    if not args.link_speed:
        return None
    if not args.peer:
        raise UsageError("--link-speed needs --peer HOST (running 'beoperf serve')")
    try:
        rate = parse_rate(args.link_speed)
    except ValueError as exc:
        raise UsageError(f"--link-speed: {exc}") from None
    try:
        return buffer_advice(args.peer, args.port, rate)
    except (OSError, ConnectionError, protocol.ProtocolError, protocol.PeerRefused) as exc:
        raise CliError(ExitStatus.CONNECTION, "connection error",
                       f"cannot measure the RTT to {args.peer}: {exc}",
                       "is 'beoperf serve' running there?") from None


def format_advice(advice: BufferAdvice) -> list[str]:
    out = ["", f"Socket buffers for {advice.rate_bps / 1e9:g} Gbit/s:"]
    out += [f"  {line}" for line in advice.arithmetic]
    for key, ok in advice.sufficient.items():
        verdict = "unknown" if ok is None else ("enough" if ok else "too small")
        out.append(f"  {key} = {advice.current.get(key)}: {verdict}")
    return out + [f"  {line}" for line in advice.commands]


def run_fleet(args: argparse.Namespace) -> int:
    """-w NODESET: the audit on every node through ClusterShell, identical results grouped."""
    from ClusterShell.NodeSet import NodeSet, NodeSetParseError

    from beoperf import fleet
    from beoperf.fleet import fanout

    if args.link_speed:
        raise UsageError("--link-speed is for one node: drop -w/--nodes")
    if args.fanout < 1:
        raise UsageError(f"--fanout {args.fanout}: give at least 1")
    check_seconds("--timeout", args.timeout)
    try:
        nodes = NodeSet(args.nodes)
    except NodeSetParseError as exc:
        raise UsageError(f"-w/--nodes {args.nodes!r}: {exc}") from None
    command = fanout.audit_command(args.remote_command, args.profile, args.interface,
                                   args.peer)
    got = fanout.fan_out(nodes, command, exec_template=args.exec_template,
                         fanout=args.fanout, timeout=args.timeout)
    groups = fleet.group_findings(got.answers)
    no_answer = fanout.group_reasons(got.no_answer)
    if args.json:
        json.dump(fleet.fleet_document(nodes, groups, no_answer), sys.stdout, indent=2)
        print()
    else:
        print("\n".join(fleet.format_report(nodes, groups, no_answer)))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.profile not in PROFILES:
        raise UsageError(f"unknown profile {args.profile!r}: choose {', '.join(PROFILES)}")
    if getattr(args, "nodes", None):
        return run_fleet(args)
    interface = pick_interface(args.interface, getattr(args, "peer", None))
    advice = buffer_section(args)
    findings = run_audit(args.profile, interface)
    if args.json:
        doc = document(args.profile, interface, findings)
        doc["buffer_advice"] = advice.to_dict() if advice else None
        json.dump(doc, sys.stdout, indent=2)
        print()
        return 0
    print(summary_line(args.profile, interface, findings))
    lines = format_table(findings) + format_fixes(findings)
    print("\n".join(lines + (format_advice(advice) if advice else [])))
    return 0
