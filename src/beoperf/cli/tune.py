"""`beoperf tune`: plan, apply and roll back the changes the audit asks for."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime

from beoperf.audit import procedure, tune
from beoperf.audit.base import PROFILES, load_profile, run_audit
from beoperf.audit.tune import ApplyFailed, Change, Plan, TuneError
from beoperf.cli import CliError, ExitStatus, UsageError
from beoperf.cli.audit import add_interface_options, pick_interface
from beoperf.protocol import DEFAULT_PORT

EXAMPLES = """examples:
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
rolled back.  One tune at a time changes a node (a lock per network namespace); a rollback
file is only restored on the host and network namespace that wrote it (unless --force).
Changes last until reboot: --persist DIR writes files that make the plan permanent (to
review and install by hand).  Exit status: 0 done; 1 a change or restore failed, not
root, another tune running, or a bad rollback file; 2 usage (unknown profile or
interface, bad --profile-file).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="plan, apply or roll back the changes the audit asks for",
                       description="Turn the audit's warnings and failures into changes "
                                   "that can be restored exactly; plan, apply or roll back.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_interface_options(p, "tune")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--profile", default="latency", metavar="NAME",
                       help=f"{' | '.join(PROFILES)} (default %(default)s)")
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
                           "apply one change at a time, keep it only if latency improves "
                           "significantly")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help="--procedure: the peer's beoperf serve port (default %(default)s)")
    p.add_argument("--repeats", type=int, default=10, metavar="N",
                   help="--procedure: measurements per configuration (default %(default)s)")
    p.add_argument("--keep-all", action="store_true",
                   help="--procedure: keep every change, significant or not")
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


def profile_from_args(args: argparse.Namespace) -> tuple[str, dict]:
    """(name, rules) from --profile-file or --profile; UsageError if unusable."""
    if not args.profile_file:
        if args.profile not in PROFILES:
            raise UsageError(f"unknown profile {args.profile!r}: choose {', '.join(PROFILES)}")
        return args.profile, load_profile(args.profile)
    try:
        with open(args.profile_file, encoding="utf-8") as f:
            profile = json.load(f)
    except OSError as exc:
        raise UsageError(f"--profile-file: cannot read {args.profile_file}: "
                         f"{exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--profile-file: {args.profile_file} is not JSON: {exc}") from None
    if not isinstance(profile, dict) or not isinstance(profile.get("expect"), dict):
        raise UsageError(f"--profile-file: {args.profile_file} has no 'expect' object")
    bad = [k for k, r in profile["expect"].items() if not isinstance(r, dict)]
    if bad:
        raise UsageError(f"--profile-file: the rule for {bad[0]!r} is not an object")
    return str(profile.get("name", args.profile_file)), profile


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise CliError(ExitStatus.ERROR, "not root",
                       f"{what} changes kernel and interface settings: run it as root",
                       "nothing was changed")


def _action_text(action: dict) -> str:
    if "argv" in action:
        return " ".join(action["argv"])
    return f"write {action['value']!r} to {action['write']}"


def format_plan(plan: Plan, profile: str, interface: str | None) -> list[str]:
    lines = [f"tune plan: profile {profile}, interface {interface or '(none)'}: "
             f"{len(plan.changes)} change(s), {len(plan.advice)} advice only"]
    for i, c in enumerate(plan.changes, 1):
        lines.append(f"  {i}. {c.key}: {c.current!r} -> {c.target!r}")
        lines.append(f"       apply:   {_action_text(c.action(c.target))}")
        lines.append(f"       restore: {_action_text(c.action(c.current))}")
    if plan.advice:
        lines += ["", "Advice only (not changed by beoperf tune):"]
        lines += [f"  {a.key} = {tune.as_text(a.value)}: {a.reason}"
                  + (f" [{a.command}]" if a.command else "") for a in plan.advice]
    return lines


def default_rollback_path() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join(os.getcwd(), f"beoperf-rollback-{stamp}.json")


def _report(verb: str):
    def report(change: Change, value: str) -> None:
        print(f"{verb} {change.key} = {value!r} (read back)", flush=True)

    return report


def save_snapshot(path: str, changes: list[Change], profile: str,
                  interface: str | None) -> None:
    created = datetime.now(UTC).isoformat(timespec="seconds")
    doc = tune.rollback_document(changes, profile, interface, created)
    try:
        tune.write_new_file(path, doc)
    except FileExistsError:
        raise UsageError(f"--rollback-file {path} exists; nothing was changed",
                         "give another --rollback-file") from None
    except OSError as exc:
        raise CliError(ExitStatus.ERROR, "tune failed", f"cannot write the rollback file "
                       f"{path}: {exc.strerror or exc}; nothing was changed") from None


def failure_message(exc: ApplyFailed, path: str) -> str:
    reason = str(exc).rstrip(".")
    msg = f"{exc.change.key}: {reason}; rolled back the {exc.rolled_back} change(s) applied before"
    if exc.restore_errors:
        msg += (f", but {len(exc.restore_errors)} restore(s) failed ({exc.restore_errors[0]}); "
                f"try 'beoperf tune --rollback {path}'")
    return msg


def do_apply(plan: Plan, profile: str, interface: str | None, path: str | None) -> int:
    if not plan.changes:
        print("nothing to change (no rollback file written)")
        return int(ExitStatus.OK)
    path = path or default_rollback_path()
    save_snapshot(path, plan.changes, profile, interface)
    print(f"previous values saved to {path}", flush=True)
    try:
        tune.apply_changes(plan.changes, _report("set"))
    except ApplyFailed as exc:
        raise CliError(ExitStatus.ERROR, "tune failed", failure_message(exc, path)) from None
    print(f"applied {len(plan.changes)} change(s); undo with 'beoperf tune --rollback {path}'")
    return int(ExitStatus.OK)


def do_rollback(path: str, force: bool = False) -> int:
    try:
        doc, changes = tune.load_rollback(path)
    except TuneError as exc:
        raise CliError(ExitStatus.ERROR, "bad rollback file", str(exc)) from None
    elsewhere = tune.wrong_place(doc)
    if elsewhere and not force:
        raise CliError(ExitStatus.ERROR, "rollback refused", f"{path}: {elsewhere}; nothing "
                       "was changed (--force restores it here anyway)")
    require_root("--rollback")
    errors = tune.restore(reversed(changes), _report("restored"))
    if errors:
        raise CliError(ExitStatus.ERROR, "rollback failed", f"{len(errors)} of {len(changes)} "
                       f"value(s) not restored: {'; '.join(errors)}")
    print(f"restored {len(changes)} value(s) from {path} (host {doc.get('host')})")
    return int(ExitStatus.OK)


def check_procedure_args(args: argparse.Namespace) -> None:
    if not args.peer:
        raise UsageError("--procedure needs --peer HOST (running 'beoperf serve')")
    if args.repeats < procedure.MIN_REPEATS:
        raise UsageError(f"--repeats {args.repeats}: give at least {procedure.MIN_REPEATS} "
                         "(with fewer no change can be significant)")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: give 1..65535")


def _procedure_failed(exc: TuneError, path: str | None) -> CliError:
    reason = str(exc).rstrip(".")
    if isinstance(exc, procedure.ProcedureFailed):
        reason += f"; rolled back the {exc.rolled_back} change(s) applied"
        if exc.restore_errors:
            reason += (f", but {len(exc.restore_errors)} restore(s) failed "
                       f"({exc.restore_errors[0]}); try 'beoperf tune --rollback {path}'")
    return CliError(ExitStatus.ERROR, "tune procedure failed", reason)


def run_procedure(args: argparse.Namespace) -> int:
    """--procedure: baseline, snapshot, one change at a time, combined; the impact table."""
    check_procedure_args(args)
    require_root("--procedure")
    profile_name, profile = profile_from_args(args)
    interface = pick_interface(args.interface, args.peer)
    plan = tune.make_plan(run_audit(profile, interface), profile, interface)
    if not plan.changes:
        print("nothing to change (no rollback file written)")
        return int(ExitStatus.OK)
    say = None if args.json else (lambda line: print(line, flush=True))
    measure = procedure.peer_measure(args.peer, args.port)
    path = args.rollback_file or default_rollback_path()
    try:
        default = procedure.baseline(measure, args.repeats)
        save_snapshot(path, plan.changes, profile_name, interface)
        if say:
            say(f"Default: {default.mean_us:.2f} us; previous values saved to {path}")
        out = procedure.run_changes(plan.changes, default, measure, args.repeats,
                                    args.keep_all, say)
    except TuneError as exc:
        raise _procedure_failed(exc, path) from None
    if args.json:
        doc = procedure.document(out, profile=profile_name, interface=interface,
                                 peer=args.peer, port=args.port, repeats=args.repeats,
                                 keep_all=args.keep_all, rollback_file=path)
        json.dump(doc, sys.stdout, indent=2)
        print()
    else:
        print("\n" + procedure.render(out, args.repeats, path), end="")
    return int(ExitStatus.OK)


def write_persist(directory: str, plan: Plan) -> int:
    files = tune.persist_files(plan.changes)
    if not files:
        print("nothing to persist: the plan has no changes")
        return int(ExitStatus.OK)
    try:
        os.makedirs(directory, exist_ok=True)
        for name, text in files.items():
            with open(os.path.join(directory, name), "x", encoding="utf-8") as f:
                f.write(text)
    except FileExistsError as exc:
        raise UsageError(f"--persist: {exc.filename} exists; not overwritten") from None
    except OSError as exc:
        raise CliError(ExitStatus.ERROR, "persist failed", f"--persist {directory}: "
                       f"{exc.strerror or exc}") from None
    for name in files:
        print(f"wrote {os.path.join(directory, name)}")
    print("review them, then install: 90-beoperf.conf in /etc/sysctl.d/, "
          "beoperf-tune.service in /etc/systemd/system/ (systemctl enable beoperf-tune)")
    return int(ExitStatus.OK)


def locked(func, *args):
    """Run ``func(*args)`` holding the per-namespace tune lock (CliError if it is taken)."""
    try:
        with tune.TuneLock():
            return func(*args)
    except tune.LockBusy as exc:
        raise CliError(ExitStatus.ERROR, "tune busy", str(exc)) from None


def run(args: argparse.Namespace) -> int:
    if args.force and not args.rollback:
        raise UsageError("--force goes with --rollback FILE")
    if args.rollback:
        return locked(do_rollback, args.rollback, args.force)
    if args.procedure:
        return locked(run_procedure, args)
    if args.apply:
        require_root("--apply")
    profile_name, profile = profile_from_args(args)
    interface = pick_interface(args.interface, args.peer)
    plan = tune.make_plan(run_audit(profile, interface), profile, interface)
    if args.apply:
        return locked(do_apply, plan, profile_name, interface, args.rollback_file)
    if args.persist:
        return write_persist(args.persist, plan)
    if args.json:
        json.dump(tune.plan_document(plan, profile_name, interface), sys.stdout, indent=2)
        print()
        return int(ExitStatus.OK)
    print("\n".join(format_plan(plan, profile_name, interface)))
    print("\nNothing was changed; apply with 'beoperf tune --apply' (as root).")
    return int(ExitStatus.OK)
