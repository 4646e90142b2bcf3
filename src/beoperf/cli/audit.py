"""`beoperf audit`: read this node's network, CPU and firewall settings and judge them."""

from __future__ import annotations

import argparse

from beoperf import report, safeio
from beoperf.cli import ExitStatus, UsageError, check_seconds, link_speed
from beoperf.model.fleet import answer_counts
from beoperf.suites import audit as suite
from beoperf.suites import fleet as fleet_suite

EXAMPLES = f"""examples:
  beoperf audit                              # default route's interface, latency profile
  beoperf audit --interface eth1 --profile throughput
  beoperf audit --peer node02 --json         # the interface that reaches node02, and
                                             # whether the path carries its MTU
  beoperf audit --peer 10.0.0.2 --link-speed 10G   # + socket buffers from the BDP
  beoperf audit -w 'node[01-32]'             # every node over ssh, identical results grouped

Read-only: nothing is changed.  The commands to change the settings that warn or fail,
and how to make them persistent, are printed after the table.  Exit status 0 even with
warnings and failures (this is a report); 2 for an unknown profile, interface or host;
with --link-speed {ExitStatus.CONNECTION:d} when the peer cannot be reached, \
{ExitStatus.PEER:d} when it refuses (as in pingpong).
--link-speed is in bit/s with SI prefixes (10G = 10Gbit/s = 10^10 bit/s); a capital B
means bytes (10GB/s = 8 x 10^10 bit/s).

Fleet (-w): each node runs 'beoperf audit --json' (ssh, or --exec-template with %h for the
node's name).  At most {safeio.LIMITS["answer"]:,} bytes of output are read per node (one
sending more is "output over" that, not used); a node running another beoperf version is
listed, not used.  Exit status 0 every node answered; {ExitStatus.PARTIAL:d} some did not
(or run another version): the report covers those that did; {ExitStatus.NO_ANSWER:d} none did.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="judge this node's settings against a tuning profile",
                       description="Collect this node's network, CPU and firewall settings "
                                   "(read-only) and judge them against a profile.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_interface_options(p, "audit")
    p.add_argument("--profile", default="latency", metavar="NAME",
                   help=f"{' | '.join(suite.PROFILES)} (default %(default)s)")
    p.add_argument("--link-speed", metavar="RATE",
                   help="with --peer: measure the RTT to the peer's 'beoperf serve' and "
                        "recommend socket buffers from the bandwidth-delay product (e.g. 10G)")
    p.add_argument("--port", type=int, default=suite.DEFAULT_PORT,
                   help="port of 'beoperf serve' on --peer (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print a JSON document instead")
    add_fleet_options(p)
    p.set_defaults(func=run)


def add_interface_options(p: argparse.ArgumentParser, verb: str) -> None:
    """--interface and --peer (which interface a command looks at), for audit and tune."""
    p.add_argument("--interface", "-i", metavar="IF",
                   help=f"interface to {verb} (default: the route to --peer, else the "
                        "default route's)")
    p.add_argument("--peer", metavar="HOST",
                   help=f"{verb} the interface that routes to HOST (a name or an address); "
                        "against its 'beoperf serve', probe whether the path carries this "
                        "interface's MTU both ways (no jumbo frames advised before)")


def add_fleet_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("fleet (audit many nodes at once with ClusterShell)")
    g.add_argument("-w", "--nodes", metavar="NODESET",
                   help="audit these nodes (e.g. 'node[01-32]') and group identical results")
    g.add_argument("--exec-template", metavar="TEMPLATE",
                   help="run a local command per node instead of ssh; it must contain %%h, "
                        "the node name (e.g. 'ip netns exec %%h')")
    g.add_argument("--fanout", type=int, default=fleet_suite.DEFAULT_FANOUT, metavar="N",
                   help="at most N nodes at a time (default %(default)s)")
    g.add_argument("--remote-command", default=fleet_suite.DEFAULT_REMOTE, metavar="CMD",
                   help="how to start beoperf on a node (default '%(default)s')")
    g.add_argument("--timeout", type=float, default=fleet_suite.DEFAULT_TIMEOUT_S,
                   metavar="SECONDS", help="per-node time limit (default %(default)s)")


def command_line(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(getattr(args, "argv", ()))


def spec_of(args: argparse.Namespace) -> suite.Spec:
    return suite.Spec(profile=args.profile, interface=args.interface, peer=args.peer,
                      link_speed=link_speed(args.link_speed), port=args.port,
                      command_line=command_line(args))


def fleet_spec_of(args: argparse.Namespace) -> fleet_suite.Spec:
    if args.link_speed:
        raise UsageError("--link-speed is for one node: drop -w/--nodes")
    check_seconds("--timeout", args.timeout)
    return fleet_suite.Spec(nodes=args.nodes, profile=args.profile, interface=args.interface,
                            peer=args.peer, exec_template=args.exec_template,
                            fanout=args.fanout, timeout=args.timeout,
                            remote_command=args.remote_command,
                            command_line=command_line(args))


def fleet_status(answered: int, nodes: int) -> ExitStatus:
    """OK when every node answered, PARTIAL when some did not, NO_ANSWER when none did."""
    if answered == nodes:
        return ExitStatus.OK
    return ExitStatus.PARTIAL if answered else ExitStatus.NO_ANSWER


def run(args: argparse.Namespace) -> int:
    fmt = "json" if args.json else "text"
    if getattr(args, "nodes", None):
        doc = fleet_suite.run(fleet_spec_of(args))
        print(report.render(doc, fmt))
        return int(fleet_status(*answer_counts(doc.body)))
    print(report.render(suite.run(spec_of(args)), fmt))
    return int(ExitStatus.OK)
