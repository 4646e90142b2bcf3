"""`beoperf study restore FILE` and the internal `beoperf study agent arm|ctl|status|read|probe`.

`study agent` is what a study's controller runs on each host through the remote-host
layer (its data on standard input, one line on standard output); it is not meant to be
typed, and its help says so.  It imports nothing heavy: each request is a short Python
start on the host.
"""

from __future__ import annotations

import argparse
import json
import sys

from beoperf import errors
from beoperf.suites import study_agent

INPUT_LIMIT = 1024 * 1024 + 1
AGENT_HELP = """Internal: what 'beoperf study' runs on each host to arm, ask and probe its
dead-man agent. Data comes on standard input, one line goes to standard output."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("restore", help="put a host back from a study's rollback file",
                       description="Put this host back from the rollback file a study's "
                       "agent left (run it where the study left a host changed: the "
                       "study names the file and the command). Every entry is checked "
                       "before anything is written.")
    p.add_argument("file", metavar="FILE", help="the rollback.json the study named")
    p.add_argument("--force", action="store_true",
                   help="restore a file written on another host or network namespace")
    p.set_defaults(func=_restore)
    _agent_parsers(sub)


def _agent_parsers(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("agent", help="internal: a study's host side", description=AGENT_HELP)
    inner = a.add_subparsers(dest="agent_command", metavar="ACTION", parser_class=type(a))
    arm = inner.add_parser("arm", help="start the agent (the plan on stdin)")
    arm.add_argument("study_id", metavar="ID")
    arm.set_defaults(func=_arm)
    ctl = inner.add_parser("ctl", help="one request to the agent (JSON on stdin, or given)")
    ctl.add_argument("study_id", metavar="ID")
    ctl.add_argument("request", metavar="REQUEST", help="'-' (stdin) or the JSON request")
    ctl.set_defaults(func=_ctl)
    status = inner.add_parser("status", help="the agent's state, or what it restored")
    status.add_argument("study_id", metavar="ID")
    status.set_defaults(func=_status)
    read = inner.add_parser("read", help="the plan's factors as they are (plan on stdin)")
    read.set_defaults(func=_read)
    probe = inner.add_parser("probe", help="the path to a peer's serve, DF both ways")
    probe.add_argument("address", metavar="ADDR")
    probe.add_argument("--port", type=int, required=True)
    probe.add_argument("--interface")
    probe.set_defaults(func=_probe)
    a.set_defaults(func=_no_action)


def _stdin() -> bytes:
    data = sys.stdin.buffer.read(INPUT_LIMIT)
    if len(data) >= INPUT_LIMIT:
        raise errors.BadSpec(f"standard input over {INPUT_LIMIT - 1:,} bytes")
    return data


def _print(doc: object) -> None:
    print(json.dumps(doc, separators=(",", ":")))


def _arm(args: argparse.Namespace) -> int:
    line = study_agent.arm(args.study_id, _stdin())
    print(line)
    return 0 if line.startswith("armed ") else 1


def _ctl(args: argparse.Namespace) -> int:
    data = _stdin() if args.request == "-" else args.request.encode()
    reply = study_agent.control(args.study_id, data)
    _print(reply)
    return 0


def _status(args: argparse.Namespace) -> int:
    _print(study_agent.control(args.study_id, b'{"op": "status"}'))
    return 0


def _read(_args: argparse.Namespace) -> int:
    _print(study_agent.read_values(_stdin()))
    return 0


def _probe(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise errors.BadSpec(f"--port {args.port}: give 1 to 65535")
    _print(study_agent.probe(args.address, args.port, args.interface))
    return 0


def _restore(args: argparse.Namespace) -> int:
    ends = study_agent.restore(args.file, args.force)
    for end in ends:
        print(f"{end['factor']}: {end['status']} ({end['detail']})")
    if all(e["status"] == "restored" for e in ends):
        print(f"{args.file}: renamed {args.file}{study_agent.RESTORED} (restored from; a "
              "second restore would put back an old snapshot)")
        return 0
    return 1


def _no_action(_args: argparse.Namespace) -> int:
    raise errors.BadSpec("beoperf study agent: no action given (arm, ctl, status, read, "
                         "probe); it is internal: see 'beoperf study --help'")
