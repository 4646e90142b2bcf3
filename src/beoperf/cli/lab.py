"""`beoperf lab up|down|status`: namespace hosts joined by a bridge, to try every
command (study, audit -w, cluster, monitor) without a cluster."""

from __future__ import annotations

import argparse
import json
import re

from beoperf import units
from beoperf.cli import ExitStatus, UsageError
from beoperf.suites import lab as suite

EXAMPLES = """examples:
  beoperf lab up                                  # 4 hosts, MTU 1500, unshaped
  beoperf lab up --hosts 2 --rate 100M --mtu 9000 --switch-mtu 1500
  beoperf lab up --name b --hosts 3 --host-mtu 2=9000 --json
  beoperf lab status
  beoperf lab down                                # also after a crashed 'lab up'

Each host is a network namespace beolab-NAME-I with eth0 at 198.18.0.(I+1)/24 and
2001:2::(I+1)/64, plugged into a bridge in beolab-NAME-sw; beolab-NAME-ctl is an unshaped
controller on the same bridge.  --rate shapes each host's egress with tbf (which counts
the 14-byte Ethernet header); the bridge ports carry any frame unless --switch-mtu M (a
switch that drops larger frames).  Each host runs an sshd on its lab addresses that
accepts the lab's key (printed).  There is no delay option: this kernel has no netem.
The state is /run/beoperf/lab/NAME.json, written before any namespace is made, so
'lab down' removes everything, also after 'lab up' crashed.  Needs root.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="namespace hosts on a bridge, to try beoperf in",
                       description="Build, show or remove a lab of namespace hosts.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True,
                               parser_class=type(p))
    up = actions.add_parser("up", help="build a lab", epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    _name(up)
    up.add_argument("--hosts", type=int, default=4, help="how many hosts (default 4)")
    up.add_argument("--rate", metavar="RATE", help="shape each host's egress to RATE with "
                    "tbf, e.g. 100M, 1G (default: unshaped)")
    up.add_argument("--burst", metavar="SIZE", help="tbf's bucket (default: 4 ms at the "
                    "rate, at least 64K)")
    up.add_argument("--mtu", type=int, default=1500, help="every host's MTU (default 1500)")
    up.add_argument("--host-mtu", action="append", default=[], metavar="I=MTU",
                    help="host I's MTU instead (repeatable)")
    up.add_argument("--switch-mtu", type=int, metavar="MTU", help="the bridge ports' MTU: "
                    "larger frames are dropped (default 65535: all pass)")
    up.add_argument("--no-sshd", action="store_true", help="no sshd in the hosts")
    up.add_argument("--no-controller", action="store_true",
                    help="no beolab-NAME-ctl namespace")
    up.add_argument("--json", action="store_true", help="print the lab's state as JSON")
    up.set_defaults(func=run_up)
    down = actions.add_parser("down", help="remove a lab (idempotent)")
    _name(down)
    down.set_defaults(func=run_down)
    status = actions.add_parser("status", help="show a lab")
    _name(status)
    status.add_argument("--json", action="store_true", help="print the state as JSON")
    status.set_defaults(func=run_status)


def _name(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=suite.DEFAULT_NAME,
                   help=f"the lab's name (default {suite.DEFAULT_NAME})")


def _host_mtus(items: list[str]) -> dict[int, int]:
    out = {}
    for item in items:
        m = re.fullmatch(r"(\d{1,3})=(\d{1,6})", item.strip())
        if not m:
            raise UsageError(f"--host-mtu {item!r}: give HOST_INDEX=MTU, e.g. 1=9000")
        out[int(m.group(1))] = int(m.group(2))
    return out


def spec_from(args: argparse.Namespace) -> suite.Spec:
    try:
        rate = units.parse_rate(args.rate) if args.rate else None
        burst = units.parse_size(args.burst) if args.burst else None
    except ValueError as exc:
        raise UsageError(f"--rate/--burst: {exc}") from None
    return suite.Spec(name=args.name, hosts=args.hosts, rate=rate, burst=burst,
                      mtu=args.mtu, host_mtu=_host_mtus(args.host_mtu),
                      switch_mtu=args.switch_mtu, sshd=not args.no_sshd,
                      controller=not args.no_controller)


def run_up(args: argparse.Namespace) -> int:
    state = suite.up(spec_from(args))
    if args.json:
        print(json.dumps(state, indent=1))
    else:
        print("\n".join(suite.up_lines(state)))
    return ExitStatus.OK


def run_down(args: argparse.Namespace) -> int:
    removed = suite.down(args.name)
    print(f"lab {args.name}: " + (f"removed {len(removed)} namespaces" if removed
                                  else "nothing to remove"))
    return ExitStatus.OK


def run_status(args: argparse.Namespace) -> int:
    state = suite.status(args.name)
    if args.json:
        print(json.dumps(state, indent=1))
    else:
        print("\n".join(suite.status_lines(state)))
    return ExitStatus.OK
