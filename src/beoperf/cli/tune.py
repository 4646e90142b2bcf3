"""`beoperf tune`: plan, apply and roll back the changes the audit asks for."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from beoperf import report, safeio, units
from beoperf.cli import CliError, ExitStatus, UsageError
from beoperf.cli.audit import add_interface_options, command_line
from beoperf.cli.progress import CountBar
from beoperf.model.document import Document
from beoperf.model.tune import Procedure
from beoperf.report import tune as tune_report
from beoperf.suites import tune as suite

EXAMPLES = f"""examples:
  beoperf tune                                   # the plan for the latency profile (default)
  beoperf tune --profile latency --plan --json   # the plan as a JSON document
  beoperf tune --apply                           # as root: snapshot, then apply
  beoperf tune --rollback beoperf-rollback-20260101T120000Z.json
  beoperf tune --profile-file my-profile.json --interface eth1 --plan
  beoperf tune --procedure --peer node02 --repeats 10   # as root: measure between changes
  beoperf tune --persist ./persist               # sysctl.d file + systemd unit for the plan

Only sysctls (/proc/sys), ethtool settings (-C, -K, -A, -G) and the MTU (ip link) are
changed, because only those can be restored exactly; everything else is listed as advice
only.  Nothing changes without --apply or --rollback.  --apply first writes every previous
value to a rollback file (--rollback-file, default ./beoperf-rollback-<UTC>.json), then
applies one change at a time, reading each back; if one fails, the ones already made are
rolled back.  One tune at a time changes a node: each takes a lock per network namespace
in /run/beoperf (a 0700 directory of root's) before it reads anything.

A rollback file may only name the settings listed above, with values each of them takes
(e.g. an MTU from 68 to 65536, on/off for offloads), and a --profile-file only keys the
audit reports, with such values for the ones tune sets; anything else refuses the whole
file and changes nothing.  A rollback file must be owned by the user running beoperf and
writable by no one else (as ssh demands of key files); it is restored only on the host and
network namespace that wrote it (unless --force).  Rollback files are read up to
{safeio.LIMITS["rollback"]:,} bytes (those earlier versions wrote too), profiles up to
{safeio.LIMITS["profile"]:,} bytes.  Changes last until reboot: --persist DIR writes files
that make the plan permanent (to review and install by hand).

Exit status: 0 done; 1 a change or restore failed, not root, another tune running, or a
bad rollback file; 2 usage (unknown profile, interface or host, bad --profile-file);
--procedure: {ExitStatus.CONNECTION:d} the peer cannot be reached or was lost, \
{ExitStatus.PEER:d} it refuses (as in pingpong),
after what was applied is rolled back.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="plan, apply or roll back the changes the audit asks for",
                       description="Turn the audit's warnings and failures into changes "
                                   "that can be restored exactly; plan, apply or roll back.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_interface_options(p, "tune")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--profile", default="latency", metavar="NAME",
                       help=f"{' | '.join(suite.PROFILES)} (default %(default)s)")
    which.add_argument("--profile-file", metavar="PATH",
                       help="a profile of your own: JSON {\"name\", \"expect\": {key: rule}}")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--plan", action="store_true",
                      help="print the ordered plan, change nothing (the default)")
    mode.add_argument("--apply", action="store_true", help="apply the plan (root)")
    mode.add_argument("--rollback", metavar="FILE",
                      help="restore the previous values saved in FILE by --apply (root)")
    mode.add_argument("--procedure", action="store_true",
                      help="measured procedure against --peer's 'beoperf serve' (root): "
                           "one change at a time, measured in blocks between blocks of the "
                           "current state, kept only when latency is shown to improve")
    p.add_argument("--port", type=int, default=suite.DEFAULT_PORT,
                   help="the peer's beoperf serve port: --procedure, and the probe of the "
                        "path's MTU with --peer (default %(default)s)")
    p.add_argument("--repeats", type=int, default=10, metavar="N",
                   help="--procedure: blocks of each change, each between two blocks of "
                        "the state it is judged against (default %(default)s)")
    p.add_argument("--keep-all", action="store_true",
                   help="--procedure: keep every change, shown to help or not")
    p.add_argument("--margin", metavar="FRACTION", default="10%",
                   help="--procedure: a change whose interval lies within it counts as "
                        "none and is not kept, as in 'beoperf study' (default %(default)s)")
    p.add_argument("--rollback-file", metavar="PATH",
                   help="where --apply saves the previous values "
                        "(default ./beoperf-rollback-<UTC>.json)")
    p.add_argument("--force", action="store_true",
                   help="--rollback: restore even if FILE was written on another host or "
                        "network namespace")
    p.add_argument("--persist", metavar="DIR",
                   help="write the plan as a sysctl.d file and a systemd unit into DIR "
                        "(created; nothing is installed or changed)")
    p.add_argument("--json", action="store_true", help="print the plan as a JSON document")
    p.set_defaults(func=run)


def say(line: str) -> None:
    print(line, flush=True)


def profile_rules(path: str | None) -> Any:
    """The --profile-file's content (bounded, regular files only); None without one."""
    if path is None:
        return None
    try:
        return safeio.load_json(path, safeio.LIMITS["profile"], "a profile")
    except safeio.FileInputError as exc:
        raise UsageError(f"--profile-file: {exc}", "nothing was changed") from None


def margin_of(text: str) -> float:
    """--margin as a fraction ('5%', '0.05'); a usage error otherwise."""
    try:
        return units.parse_fraction(text)
    except ValueError as exc:
        raise UsageError(f"--margin: {exc}") from None


def spec_of(args: argparse.Namespace, rules: Any = None) -> suite.Spec:
    """The spec; --apply and --procedure get their rollback file's default path here, so
    that the CLI can say where it is."""
    changes = args.apply or args.procedure
    path = args.rollback_file or (suite.default_rollback_path() if changes else None)
    return suite.Spec(profile=args.profile, rules=rules, source=args.profile_file,
                      interface=args.interface, peer=args.peer, port=args.port,
                      repeats=args.repeats, keep_all=args.keep_all, rollback_file=path,
                      command_line=command_line(args), margin=margin_of(args.margin))


def write_persist(directory: str, plan: Document) -> int:
    """The persist files in ``directory``, each new (never overwritten, never written
    through a link: safeio.write_atomic); none is written if any of them exists."""
    files = tune_report.persist_files(plan)
    if not files:
        print("nothing to persist: the plan has no changes")
        return int(ExitStatus.OK)
    paths = {name: os.path.join(directory, name) for name in files}
    there = [p for p in paths.values() if os.path.lexists(p)]
    if there:
        raise UsageError(f"--persist: {there[0]} exists; not overwritten")
    try:
        os.makedirs(directory, exist_ok=True)
        for name, text in files.items():
            safeio.write_atomic(paths[name], text, overwrite=False)
    except FileExistsError as exc:
        raise UsageError(f"--persist: {exc.filename} exists; not overwritten") from None
    except OSError as exc:
        raise CliError(ExitStatus.ERROR, "persist failed", f"--persist {directory}: "
                       f"{exc.strerror or exc}") from None
    for name in files:
        print(f"wrote {os.path.join(directory, name)}")
    print(tune_report.PERSIST_INSTALL)
    return int(ExitStatus.OK)


def run_procedure(spec: suite.Spec, fmt: str) -> int:
    """The procedure: on a terminal a bar over its measurements with the time left, and a
    line per change as it is decided (not with --json)."""
    with CountBar(sys.stderr.isatty(), "measured procedure") as bar:
        doc = suite.procedure(spec, None if fmt == "json" else say, bar)
    if fmt == "text" and Procedure.from_document(doc).rows:
        print()  # after the progress lines
    print(report.render(doc, fmt))
    return int(ExitStatus.OK)


def run(args: argparse.Namespace) -> int:
    if args.force and not args.rollback:
        raise UsageError("--force goes with --rollback FILE")
    if args.rollback:
        doc, already = suite.rollback_counted(suite.RollbackSpec(args.rollback, args.force,
                                                                 command_line(args)), say)
        print(report.render(doc, "text", restored_from=args.rollback, already=already))
        return int(ExitStatus.OK)
    spec = spec_of(args, profile_rules(args.profile_file))
    fmt = "json" if args.json else "text"
    if args.procedure:
        return run_procedure(spec, fmt)
    if args.apply:
        doc = suite.apply(spec, say)
        print(report.render(doc, "text", saved_to=spec.rollback_file))
        return int(ExitStatus.OK)
    plan = suite.plan(spec)
    if args.persist:
        return write_persist(args.persist, plan)
    print(report.render(plan, fmt))
    return int(ExitStatus.OK)
