"""`beoperf tune`: planning from fake findings, rollback files, and apply/rollback inside
network namespaces (per-namespace sysctls and the namespace's eth0 MTU only)."""

from __future__ import annotations

import argparse
import json
import os
import pwd
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from beoperf import errors, model, report, safeio
from beoperf.audit import base, checks, tune
from beoperf.audit import lock as lock_mod
from beoperf.audit.base import Finding
from beoperf.audit.tune import ApplyFailed, Change, TuneError
from beoperf.cli import Parser, UsageError
from beoperf.cli import tune as cli_tune
from beoperf.model.document import validate
from beoperf.report import tune as tune_report
from beoperf.suites import tune as suite
from helpers import cli

FIXTURES = Path(__file__).parent / "fixtures"

LATENCY = base.load_profile("latency")
MTU_RULE = {"op": "eq", "value": 9000, "severity": "warn", "reason": "jumbo frames"}


def parse(*argv: str) -> argparse.Namespace:
    parser = Parser(prog="beoperf")
    cli_tune.add_parser(parser.add_subparsers(dest="command", parser_class=Parser))
    return parser.parse_args(["tune", *argv])


def plan_of(changes: list[Change]) -> model.Document:
    doc = tune.plan_document(tune.Plan(changes=changes), "test", "eth9", model.make_meta())
    validate("tune-plan", doc.to_json())
    return doc


def tune_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "beoperf", "tune", *args]


def fake_findings() -> list[Finding]:
    return [
        Finding("thp", "thp.enabled", "always", "warn", "r"),
        Finding("cpufreq", "cpu.governor", "powersave", "fail", "r", "cpupower frequency-set"),
        Finding("interface", "mtu", 1500, "warn", "r"),
        Finding("irqbalance", "irqbalance.active", True, "warn", "r", "systemctl stop x"),
        Finding("coalesce", "coalesce.rx_usecs", 8, "fail", "r"),
        Finding("coalesce", "coalesce.adaptive_rx", True, "fail", "r"),
        Finding("pause", "pause.autonegotiate", True, "warn", "r"),
        Finding("sysctl", "net.core.busy_poll", 0, "warn", "r"),
        Finding("sysctl", "net.ipv4.tcp_timestamps", 0, "warn", "r"),
        Finding("sysctl", "net.core.busy_read", 50, "pass", "r"),
        Finding("sysctl", "net.core.rmem_max", None, "unknown", "permission denied"),
        Finding("firewall", "iptables.rules", 300, "warn", "r"),
    ]


def latency_with_mtu() -> dict:
    return {"expect": {**LATENCY["expect"], "mtu": MTU_RULE}}


# --------------------------------------------------------------------------- planning


def test_plan_orders_changes_and_lists_advice():
    plan = tune.make_plan(fake_findings(), latency_with_mtu(), "eth9")
    assert [c.key for c in plan.changes] == [
        "net.core.busy_poll", "net.ipv4.tcp_timestamps", "coalesce.rx_usecs",
        "coalesce.adaptive_rx", "pause.autonegotiate", "mtu"]
    assert [a.key for a in plan.advice] == [
        "irqbalance.active", "cpu.governor", "thp.enabled", "iptables.rules"]
    assert all(a.reason for a in plan.advice)
    assert plan.advice[1].command == "cpupower frequency-set"


def test_plan_changes_say_how_to_apply_read_and_restore():
    got = {c.key: c.to_dict() for c in tune.make_plan(fake_findings(), latency_with_mtu(),
                                                       "eth9").changes}
    busy = got["net.core.busy_poll"]
    assert (busy["current"], busy["target"]) == ("0", "50")
    assert busy["apply"] == {"write": "/proc/sys/net/core/busy_poll", "value": "50"}
    assert busy["read"] == {"file": "/proc/sys/net/core/busy_poll"}
    assert busy["restore"] == {"write": "/proc/sys/net/core/busy_poll", "value": "0"}
    assert got["net.ipv4.tcp_timestamps"]["target"] == "1"
    rx = got["coalesce.rx_usecs"]
    assert rx["apply"] == {"argv": ["ethtool", "-C", "eth9", "rx-usecs", "0"]}
    assert rx["restore"] == {"argv": ["ethtool", "-C", "eth9", "rx-usecs", "8"]}
    assert rx["read"] == {"argv": ["ethtool", "-c", "eth9"], "field": "rx_usecs"}
    adaptive = got["coalesce.adaptive_rx"]
    assert adaptive["restore"]["argv"][-2:] == ["adaptive-rx", "on"]
    assert got["pause.autonegotiate"]["apply"]["argv"] == ["ethtool", "-A", "eth9", "autoneg",
                                                           "off"]
    mtu = got["mtu"]
    assert mtu["apply"] == {"argv": ["ip", "link", "set", "dev", "eth9", "mtu", "9000"]}
    assert mtu["restore"]["argv"][-1] == "1500"
    assert mtu["read"] == {"file": "/sys/class/net/eth9/mtu"}


def test_plan_without_interface_keeps_interface_settings_as_advice():
    plan = tune.make_plan(fake_findings(), latency_with_mtu(), None)
    assert {c.check for c in plan.changes} == {"sysctl"}
    assert {"mtu", "coalesce.rx_usecs"} <= {a.key for a in plan.advice}


def test_plan_skips_rules_without_a_single_target():
    profile = {"expect": {"thp.enabled": {"op": "in", "value": ["madvise", "never"]},
                          "net.ipv4.tcp_rmem": {"op": "ge", "value": 16777216,
                                                "set": "4096 131072 16777216"}}}
    findings = [Finding("sysctl", "net.ipv4.tcp_rmem", [4096, 131072, 6291456], "fail", "r"),
                Finding("sysctl", "net.core.rmem_max", 5, "warn", "r")]
    plan = tune.make_plan(findings, profile, "eth0")
    assert [(c.current, c.target) for c in plan.changes] == [
        ("4096 131072 6291456", "4096 131072 16777216")]
    assert plan.advice[0].reason == "the profile names no single value to set"


def test_an_unresolved_fact_reference_is_never_a_target():
    profile = {"expect": {"rings.rx": {"op": "ge", "value": "@rings.rx_max", "reason": "r"}}}
    findings = [Finding("rings", "rings.rx", 256, "warn", "r")]  # no target carried
    plan = tune.make_plan(findings, profile, "eth0")
    assert plan.changes == []
    assert plan.advice[0].reason == "the profile names no single value to set"


def test_same_ignores_whitespace():
    assert tune.same("4096\t131072\t6291456", "4096 131072 6291456")
    assert not tune.same("4096 131072", "4096 131073")


def test_same_ignores_case_too():
    assert tune.same("On", "on") and tune.same("Cubic  BBR", "cubic bbr")
    assert not tune.same("cubic bbr", "cubic")


def test_set_and_read_go_through_the_check_and_say_what_failed(monkeypatch):
    change = Change("net.ipv4.tcp_sack", "sysctl", None, "1", "0")
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(base.Check, "apply", lambda self, key, value: calls.append((key, value)))
    monkeypatch.setattr(base.Check, "read", lambda self, key: {"net.ipv4.tcp_sack": "0"}[key])
    tune.set_value(change, "0")
    assert calls == [("net.ipv4.tcp_sack", "0")] and tune.read_value(change) == "0"

    def unavailable(*_args):
        raise base.Unavailable("permission denied")

    monkeypatch.setattr(base.Check, "apply", unavailable)
    monkeypatch.setattr(base.Check, "read", unavailable)
    with pytest.raises(TuneError, match="^permission denied$"):
        tune.set_value(change, "0")
    with pytest.raises(TuneError, match="^reading back net.ipv4.tcp_sack: permission denied$"):
        tune.read_value(change)


def test_restore_goes_on_after_a_failure_and_says_which(monkeypatch):
    state = {"net.x.a": "10", "net.x.b": "20", "net.x.c": "30"}
    reported: list[tuple[str, str]] = []

    def fake_set(change: Change, value: str) -> None:
        if change.key == "net.x.b":
            raise TuneError("net.x.b: device busy")
        state[change.key] = value

    monkeypatch.setattr(tune, "set_value", fake_set)
    monkeypatch.setattr(tune, "read_value", lambda c: state[c.key])
    changes = [Change(k, "sysctl", None, v[0], v) for k, v in state.items()]
    errors = tune.restore(changes, lambda c, v: reported.append((c.key, v)))
    assert errors == ["net.x.b: device busy"]
    assert reported == [("net.x.a", "1"), ("net.x.c", "3")]
    assert state == {"net.x.a": "1", "net.x.b": "20", "net.x.c": "3"}


# --------------------------------------------------------------------------- apply (faked)


def test_apply_failure_rolls_back_in_reverse(monkeypatch):
    state = {"a": "1", "b": "2", "c": "3"}
    log: list[tuple[str, str]] = []

    def fake_set(change: Change, value: str) -> None:
        if change.key == "net.x.c" and value == "30":
            raise TuneError("cannot set c")
        log.append((change.key, value))
        state[change.key[-1]] = value

    monkeypatch.setattr(tune, "set_value", fake_set)
    monkeypatch.setattr(tune, "read_value", lambda c: state[c.key[-1]])
    changes = [Change(f"net.x.{k}", "sysctl", None, v, v + "0") for k, v in state.items()]
    with pytest.raises(ApplyFailed) as info:
        tune.apply_changes(changes)
    assert info.value.change.key == "net.x.c" and info.value.rolled_back == 2
    assert info.value.restore_errors == [] and str(info.value) == "cannot set c"
    assert log == [("net.x.a", "10"), ("net.x.b", "20"), ("net.x.b", "2"), ("net.x.a", "1")]
    assert state == {"a": "1", "b": "2", "c": "3"}


def test_interrupt_during_apply_undoes_only_what_was_touched(monkeypatch):
    state = {"a": "1", "b": "2", "c": "3"}
    log: list[tuple[str, str]] = []

    def fake_set(change: Change, value: str) -> None:
        log.append((change.key, value))
        state[change.key[-1]] = value
        if change.key == "net.x.b" and value == "20":
            raise KeyboardInterrupt  # Ctrl-C just after b was written

    monkeypatch.setattr(tune, "set_value", fake_set)
    monkeypatch.setattr(tune, "read_value", lambda c: state[c.key[-1]])
    changes = [Change(f"net.x.{k}", "sysctl", None, v, v + "0") for k, v in state.items()]
    with pytest.raises(KeyboardInterrupt):
        tune.apply_changes(changes)
    assert log == [("net.x.a", "10"), ("net.x.b", "20"), ("net.x.b", "2"), ("net.x.a", "1")]
    assert state == {"a": "1", "b": "2", "c": "3"}  # c never touched


def test_readback_mismatch_is_a_failure(monkeypatch):
    monkeypatch.setattr(tune, "set_value", lambda c, v: None)
    monkeypatch.setattr(tune, "read_value", lambda c: "7")
    with pytest.raises(TuneError, match="read back '7'"):
        tune.set_checked(Change("net.x.y", "sysctl", None, "7", "8"), "8")


# --------------------------------------------------------------------------- rollback files

# Two changes of one key, recorded in the order applied (two applies' files merged into
# one): restoring them in that order would leave the first change's target in place.
MERGED = [Change("net.ipv4.tcp_rmem", "sysctl", None, "4096 131072 6291456", "4096 87380 4194304"),
          Change("net.ipv4.tcp_timestamps", "sysctl", None, "1", "0"),
          Change("net.ipv4.tcp_rmem", "sysctl", None, "4096 87380 4194304", "4096 65536 1048576"),
          Change("net.ipv4.tcp_timestamps", "sysctl", None, "0", "2")]


def test_rollback_restores_in_reverse_order(tmp_path, monkeypatch, lock_dir):
    """``tune --rollback FILE`` undoes the last change first, so every key ends at the
    value it had before the first change (faked writes; the namespace test below does it
    for real)."""
    path = rollback_file(tmp_path, MERGED)
    state = {"net.ipv4.tcp_rmem": "4096 65536 1048576", "net.ipv4.tcp_timestamps": "2"}
    writes: list[tuple[str, str]] = []

    def fake_set(change: Change, value: str) -> None:
        writes.append((change.key, value))
        state[change.key] = value

    monkeypatch.setattr(lock_mod, "LOCK_DIR", str(lock_dir))
    monkeypatch.setattr(suite, "require_root", lambda what: None)
    monkeypatch.setattr(tune, "set_value", fake_set)
    monkeypatch.setattr(tune, "read_value", lambda change: state[change.key])
    lines: list[str] = []
    applied: list[tuple[str, str]] = []
    tune.apply_changes(MERGED[:2], lambda c, v: applied.append((c.key, v)))
    assert applied == [(c.key, c.target) for c in MERGED[:2]]
    state.update({"net.ipv4.tcp_rmem": "4096 65536 1048576", "net.ipv4.tcp_timestamps": "2"})
    writes.clear()
    doc = suite.rollback(suite.RollbackSpec(str(path)), lines.append)
    assert [c["key"] for c in doc.body["changes"]] == [c.key for c in MERGED]
    assert writes == [(c.key, c.current) for c in reversed(MERGED)]
    assert state == {"net.ipv4.tcp_rmem": "4096 131072 6291456", "net.ipv4.tcp_timestamps": "1"}
    assert lines == [f"restored {c.key} = {c.current!r} (read back)" for c in reversed(MERGED)]


def test_rollback_says_what_it_could_not_restore(tmp_path, monkeypatch, lock_dir):
    path = rollback_file(tmp_path, MERGED)
    state = {"net.ipv4.tcp_rmem": "4096 65536 1048576", "net.ipv4.tcp_timestamps": "2"}

    def fake_set(change: Change, value: str) -> None:
        if change.key == "net.ipv4.tcp_timestamps":
            raise TuneError(f"{change.key}: read-only")
        state[change.key] = value

    monkeypatch.setattr(lock_mod, "LOCK_DIR", str(lock_dir))
    monkeypatch.setattr(suite, "require_root", lambda what: None)
    monkeypatch.setattr(tune, "set_value", fake_set)
    monkeypatch.setattr(tune, "read_value", lambda change: state[change.key])
    with pytest.raises(suite.RollbackFailed) as info:
        suite.rollback(suite.RollbackSpec(str(path)))
    assert str(info.value) == ("2 of 4 value(s) not restored: net.ipv4.tcp_timestamps: "
                               "read-only; net.ipv4.tcp_timestamps: read-only")
    assert state["net.ipv4.tcp_rmem"] == "4096 131072 6291456"


def test_rollback_needs_root_and_names_the_option(tmp_path, monkeypatch):
    """The file is checked first (as the user running beoperf), then root is required."""
    path = rollback_file(tmp_path, MERGED)
    asked: list[str] = []

    def not_root(what: str) -> None:
        asked.append(what)
        raise errors.NotPermitted("not root")

    monkeypatch.setattr(suite, "require_root", not_root)
    with pytest.raises(errors.NotPermitted):
        suite.rollback(suite.RollbackSpec(str(path)))
    assert asked == ["--rollback"]
    monkeypatch.undo()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(errors.NotPermitted) as info:
        suite.require_root("--rollback")
    assert str(info.value) == ("--rollback changes kernel and interface settings: run it as "
                               "root")




def snapshot(changes: list[Change]) -> model.Document:
    return tune.rollback_document(changes, "latency", "lo", model.make_meta())


def rollback_file(tmp_path: Path, changes: list[Change], name: str = "rb.json") -> Path:
    path = tmp_path / name
    tune.write_new_file(str(path), snapshot(changes))
    return path


def test_rollback_file_round_trip(tmp_path):
    changes = [Change("net.ipv4.tcp_rmem", "sysctl", None, "4096 131072 6291456", "1 2 3"),
               Change("mtu", "interface", "lo", "1500", "9000")]
    path = rollback_file(tmp_path, changes)
    doc, loaded = tune.load_rollback(str(path))
    assert loaded == changes
    validate("rollback", json.loads(path.read_text()))
    assert (doc.kind, doc.schema_version) == ("rollback", 3)
    assert doc.body["changes"][1]["restore"] == {"argv": ["ip", "link", "set", "dev", "lo",
                                                          "mtu", "1500"]}
    assert doc.body["netns"] == tune.netns_id() and doc.body["interface"] == "lo"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the previous values are root's
    assert [p.name for p in tmp_path.iterdir()] == ["rb.json"]  # no temporary left behind
    with pytest.raises(FileExistsError):  # never overwritten
        rollback_file(tmp_path, changes)


def test_rollback_file_never_written_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for name, target in (("rb.json", victim), ("dangling.json", tmp_path / "absent")):
        (tmp_path / name).symlink_to(target)
        with pytest.raises(errors.BadSpec, match="exists; nothing was changed"):
            suite.save_snapshot(str(tmp_path / name), snapshot([MTU_CHANGE]))
    assert victim.read_text() == "precious\n" and not (tmp_path / "absent").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.json", "rb.json",
                                                          "victim"]


MTU_CHANGE = Change("mtu", "interface", "lo", "1500", "9000")


def mangled(tmp_path: Path, mangle) -> Path:
    path = rollback_file(tmp_path, [MTU_CHANGE])
    doc = json.loads(path.read_text())
    mangle(doc)
    path.write_text(json.dumps(doc))
    return path


def entry(**fields) -> Callable[[dict], None]:
    return lambda d: d["body"]["changes"][0].update(fields)


@pytest.mark.parametrize("mangle, message", [
    (lambda d: d.update(format="other"), "not a beoperf document .format 'other'."),
    (lambda d: d.update(kind="tune-plan"), "not a valid tune-plan document"),
    (lambda d: d.update(kind=["rollback"]), "beoperf document of unknown kind \\['rollback'\\]"),
    (lambda d: d.update(schema_version=9), "rollback schema version 9 is newer"),
    (lambda d: d.update(schema_version=2), "rollback schema version 2 cannot be read"),
    (lambda d: d["body"].update(changes={}), "at body/changes: {} is not of type 'array'"),
    (lambda d: d["body"]["changes"].append(7), "at body/changes/1: 7 is not of type 'object'"),
    (lambda d: d["body"].update(netns="x"), "at body/netns: 'x' is not of type"),
    (lambda d: d["body"].pop("host"), "'host' is a required property"),
    (entry(previous="9000"), "change 1 .'mtu'.: 'restore' does not match"),
    (entry(previous=1500), "at body/changes/0/previous: 1500 is not of type 'string'"),
    (entry(restore={"argv": ["sh"], "x": 1}), "at body/changes/0/restore"),
    (entry(check="shell"), "check 'shell' does not set anything"),
    (entry(check="firewall"), "check 'firewall' does not set anything"),
    (entry(check="sysctl", interface=None), "'mtu' is not a setting beoperf tune restores"),
    (entry(key="driver"), "'driver' is not a setting beoperf tune restores"),
    (entry(interface="../x"), "interface '../x' is not an interface name"),
    (entry(interface="-v"), "interface '-v' is not an interface name"),
    (entry(interface="nosuchif9"), "interface 'nosuchif9' does not exist here"),
    (entry(interface=None), "interface None is not an interface name"),
    (entry(target="70000"), "mtu = '70000' is not an integer from 68 to 65536"),
    (entry(target="9000 up"), "mtu = '9000 up' is not an integer"),
    (entry(previous="67"), "mtu = '67' is not an integer from 68 to 65536"),
    (entry(previous="65537"), "mtu = '65537' is not an integer from 68 to 65536"),
])
def test_bad_rollback_files_are_refused(tmp_path, mangle, message):
    path = mangled(tmp_path, mangle)
    with pytest.raises(TuneError, match=message) as info:
        tune.load_rollback(str(path))
    assert str(info.value).startswith(str(path))


@pytest.mark.parametrize("key, value, message", [
    ("net.ipv4.tcp_rmem", "4096 131072", "is not 3 integers"),
    ("net.ipv4.tcp_rmem", "4096 131072 -1", "is not 3 integers"),
    ("net.ipv4.tcp_rmem", "4096\n131072\n6291456", "is not 3 integers"),
    ("net.ipv4.tcp_sack", "2", "from 0 to 1"),
    ("net.core.rmem_max", "99999999999", "from 0 to 2147483647"),
    ("net.ipv4.tcp_congestion_control", "no-such-cc", "is not one of"),
    ("net.ipv4.tcp_congestion_control", "../../x", "is not one of"),
])
def test_sysctl_values_are_checked_per_key(key, value, message):
    with pytest.raises(ValueError, match=message):
        checks.Sysctls(None).set_action(key, value)


def test_congestion_control_unknown_list_accepts_nothing(monkeypatch):
    monkeypatch.setattr(checks, "CONGESTION_CONTROLS", "/nonexistent/list")
    with pytest.raises(ValueError, match="could not be read"):
        checks.Sysctls(None).set_action("net.ipv4.tcp_congestion_control", "cubic")


def test_loopbacks_own_mtu_can_be_restored():
    lo_mtu = Path("/sys/class/net/lo/mtu").read_text().strip()  # 65536 by default
    assert checks.Interface("lo").set_action("mtu", lo_mtu)["argv"][-1] == lo_mtu


def test_ethtool_values_are_checked_per_field():
    assert checks.Coalescing("lo").set_action("coalesce.rx_usecs", "0")["argv"][-1] == "0"
    assert checks.Offloads("lo").set_action("offload.generic-receive-offload", "on")
    for unit, key, value in ((checks.Coalescing("lo"), "coalesce.rx_usecs", "-1"),
                             (checks.Coalescing("lo"), "coalesce.adaptive_rx", "1"),
                             (checks.Offloads("lo"), "offload.generic-receive-offload", "yes"),
                             (checks.Rings("lo"), "rings.rx", "0"),
                             (checks.Pause("lo"), "pause.rx", "on off")):
        with pytest.raises(ValueError, match=key):
            unit.set_action(key, value)
    with pytest.raises(KeyError):  # read-only fields are not in the allow-list
        checks.Rings("lo").set_action("rings.rx_max", "4096")
    with pytest.raises(KeyError):  # nor is anything on a badly named interface
        checks.Coalescing("../x").set_action("coalesce.rx_usecs", "0")


def core_pattern_file(tmp_path: Path, first: list[Change]) -> Path:
    """A genuine rollback file (host, netns) with kernel.core_pattern appended."""
    path = rollback_file(tmp_path, first, "genuine.json")
    doc = json.loads(path.read_text())
    pipe = "|/tmp/evil-script %p"
    doc["body"]["changes"].append({"key": "kernel.core_pattern", "check": "sysctl",
                                   "interface": None, "previous": pipe, "target": "core",
                                   "restore": {"write": "/proc/sys/kernel/core_pattern",
                                               "value": pipe}})
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(doc))
    hostile.chmod(0o600)
    return hostile


def test_core_pattern_rollback_file_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    """The attack of issue 9: a rollback file naming kernel.core_pattern, with the host and
    netns of a genuine one.  Nothing may be written, not even the genuine entry before it
    (the writes are intercepted: the host's sysctls are never touched)."""
    written: list[tuple[str, str]] = []
    monkeypatch.setattr(base.Check, "apply", lambda self, key, value:
                        written.append((key, value)))
    monkeypatch.setattr(suite, "require_root", lambda what: None)
    core_before = Path("/proc/sys/kernel/core_pattern").read_text()
    genuine = Change("net.ipv4.tcp_sack", "sysctl", None, "1", "0")
    path = core_pattern_file(tmp_path, [genuine])
    with pytest.raises(suite.BadRollbackFile, match="kernel.core_pattern") as info:
        suite.rollback(suite.RollbackSpec(str(path)))
    assert info.value.category == "bad rollback file"
    assert info.value.hint == "nothing was changed"
    assert str(info.value).startswith(f"{path}: change 2 ('kernel.core_pattern'): "
                                      "'kernel.core_pattern' is not a setting")
    assert written == []
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_before


def test_a_file_from_elsewhere_is_refused_as_such_before_its_entries(tmp_path):
    path = mangled(tmp_path, lambda d: (d["body"].update(host="x\x1b[2J" * 5000, netns=2**62),
                                        d["body"]["changes"][0].update(interface="nosuchif9")))
    with pytest.raises(suite.RollbackRefused, match="--force restores it here anyway") as info:
        suite.rollback(suite.RollbackSpec(str(path)))
    assert info.value.category == "rollback refused"
    assert "it was written on host 'x\\x1b[2Jx" in str(info.value)
    assert len(str(info.value)) < 500 and "\x1b" not in str(info.value)
    with pytest.raises(suite.BadRollbackFile, match="interface 'nosuchif9' does not exist here"):
        suite.rollback(suite.RollbackSpec(str(path), force=True))  # --force skips no check


def test_profile_may_not_name_a_key_no_check_owns(tmp_path):
    for expect, message in (
            ({"kernel.core_pattern": {"op": "eq", "value": "core", "set": "|/tmp/x %p"}},
             "'kernel.core_pattern': no beoperf check reports or sets this key"),
            ({"mtu": {"op": "eq", "value": 70000}}, "'mtu': '70000' is not an integer"),
            ({"coalesce.rx_usecs": {"op": "eq", "value": 0, "set": "0 tx-usecs 9"}},
             "'coalesce.rx_usecs': '0 tx-usecs 9' is not an integer"),
            ({"net.ipv4.tcp_sack": {"op": "between", "value": 1}}, "op 'between'"),
            ({"thp.enabled": {"op": "in", "value": "never"}}, "needs a list"),
            ({"thp.enabled": {"op": "ge", "value": "never"}}, "op 'ge' needs a number"),
            ({"mtu": {"op": "eq", "value": 9000, "severity": "panic", "reason": "r"}},
             "severity must be"),
            ({"mtu": {"op": "eq", "value": 9000}}, "'mtu': the rule has no 'reason'"),
            ({"mtu": 9000}, "'mtu': the rule is not an object"),
            ({"x" * 5000: {}}, "the rule for 'xxxx.*\\.\\.\\.': no beoperf check")):
        path = tmp_path / "p.json"
        path.write_text(json.dumps({"name": "bad", "expect": expect}))
        with pytest.raises(errors.BadSpec, match=message) as info:
            cli_tune.run(parse("--profile-file", str(path), "--interface", "lo"))
        assert len(str(info.value)) < 400


@pytest.mark.parametrize("name", base.PROFILES)
def test_builtin_profiles_pass_the_profile_check(name):
    assert tune.check_profile(base.load_profile(name), name)


def test_plan_never_sets_a_value_the_allow_list_refuses():
    findings = [Finding("interface", "mtu", 1500, "warn", "r"),
                Finding("coalesce", "coalesce.rx_usecs", 4294967295, "warn", "r")]
    profile = {"expect": {"mtu": {"op": "eq", "value": 70000, "reason": "r"},
                          "coalesce.rx_usecs": {"op": "eq", "value": 0, "reason": "r"}}}
    plan = tune.make_plan(findings, profile, "eth9")
    assert plan.changes == []
    reasons = {a.key: a.reason for a in plan.advice}
    assert reasons["mtu"] == "'70000' is not a value beoperf tune can set for mtu"
    assert "current value could not be restored exactly" in reasons["coalesce.rx_usecs"]


def test_loose_or_foreign_rollback_files_are_refused(tmp_path):
    path = rollback_file(tmp_path, [MTU_CHANGE])
    for mode in (0o620, 0o602, 0o666):
        path.chmod(mode)
        with pytest.raises(TuneError, match="writable by group or others"):
            tune.load_rollback(str(path))
    path.chmod(0o600)
    assert tune.load_rollback(str(path))[1] == [MTU_CHANGE]
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    os.chown(path, 65534, 65534)
    with pytest.raises(TuneError, match="owned by uid 65534"):
        tune.load_rollback(str(path))


def run_cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(tune_argv(*args), capture_output=True, text=True, timeout=timeout)


def test_cli_bad_rollback_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    big = tmp_path / "big.json"
    big.write_text(" " * (safeio.LIMITS["rollback"] + 1))
    nan = tmp_path / "nan.json"
    nan.write_text('{"format": "beoperf.rollback", "schema_version": NaN}')
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (bad, tmp_path / "missing.json", big, nan, deep, fifo, "/dev/zero", tmp_path):
        bad.chmod(0o600)
        res = run_cli("--rollback", str(path))
        assert res.returncode == 1, (path, res.stderr)
        assert res.stderr.strip().count("\n") == 0 and "bad rollback file" in res.stderr
    assert "over the 1,048,576-byte limit" in run_cli("--rollback", str(big)).stderr
    assert "is a FIFO" in run_cli("--rollback", str(fifo)).stderr


def test_cli_profile_file_that_is_no_file_is_one_line(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    huge.write_text(" " * (safeio.LIMITS["profile"] + 1))
    for path, words in ((fifo, "is a FIFO"), ("/dev/zero", "is a device"),
                        (huge, "byte limit"), (tmp_path, "is a directory")):
        res = run_cli("--profile-file", str(path), "--interface", "lo")
        assert res.returncode == 2, (path, res.stderr)
        assert res.stderr.strip().count("\n") == 0 and words in res.stderr


# --------------------------------------------------------------------------- CLI checks


def test_cli_apply_refuses_without_root(monkeypatch):
    monkeypatch.setattr(suite.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(suite, "run_audit", lambda *a: pytest.fail("audit ran"))
    with pytest.raises(errors.NotPermitted, match="run it as root") as info:
        cli_tune.run(parse("--apply", "--interface", "lo"))
    assert info.value.hint == "nothing was changed"
    res = cli("tune", "--apply", "--interface", "lo")
    assert res.status == 1 and res.error_lines == [
        "beoperf: not root: --apply changes kernel and interface settings: run it as root; "
        "nothing was changed"]


def test_cli_usage_errors(tmp_path):
    with pytest.raises(errors.BadSpec, match="unknown profile"):
        cli_tune.run(parse("--profile", "fastest"))
    bad = tmp_path / "p.json"
    bad.write_text('{"expect": []}')
    with pytest.raises(errors.BadSpec, match="no 'expect' object"):
        cli_tune.run(parse("--profile-file", str(bad)))
    with pytest.raises(UsageError, match="not allowed with"):
        parse("--apply", "--rollback", "x.json")


def test_cli_plan_on_this_machine_changes_nothing(capsys):
    before = Path("/proc/sys/net/ipv4/tcp_timestamps").read_text()
    assert cli_tune.run(parse("--interface", "lo", "--json")) == 0
    raw = json.loads(capsys.readouterr().out)
    validate("tune-plan", raw)
    doc = raw["body"]
    assert raw["kind"] == "tune-plan" and doc["interface"] == "lo"
    checks = [c["check"] for c in doc["changes"]]
    assert checks == sorted(checks, key=tune.ORDER.index)
    assert Path("/proc/sys/net/ipv4/tcp_timestamps").read_text() == before
    assert cli_tune.run(parse("--interface", "lo")) == 0
    assert "Nothing was changed" in capsys.readouterr().out


# --------------------------------------------------------------------------- the lock


HOLDER = """
import sys, time
from beoperf.audit.lock import TuneLock
with TuneLock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    return tmp_path / "locks"


@pytest.fixture
def holder(tmp_path: Path, lock_dir: Path):
    """A child process (started here, killed by its PID) holding the lock in lock_dir."""
    script = tmp_path / "lock_holder.py"
    script.write_text(HOLDER)
    child = subprocess.Popen([sys.executable, str(script), str(lock_dir)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        yield child
    finally:
        child.kill()
        child.wait()
        child.stdout.close()


def test_lock_names_its_holder_and_is_released_when_the_holder_is_killed(holder, lock_dir):
    user = pwd.getpwuid(os.geteuid()).pw_name
    with pytest.raises(tune.LockBusy) as info:
        with tune.TuneLock(str(lock_dir)):
            pytest.fail("a second locker got the lock")
    message = str(info.value)
    assert f"another beoperf tune (pid {holder.pid}, user {user}, command " in message
    assert "lock_holder.py" in message and str(lock_dir) in message
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with tune.TuneLock(str(lock_dir)) as lock:  # released by the kernel: not stale
        record = json.loads(os.pread(lock.fd, lock_mod.RECORD_SIZE, 0))
        assert record["pid"] == os.getpid() and record["user"] == user


def test_lock_directory_is_created_private(lock_dir):
    with tune.TuneLock(str(lock_dir)):
        st = lock_dir.stat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
        [lock_file] = lock_dir.iterdir()
        assert stat.S_IMODE(lock_file.stat().st_mode) == 0o600
    assert list(lock_dir.iterdir()) == []  # removed by its holder: nothing left behind
    with tune.TuneLock(str(lock_dir)):  # taken again once released
        pass


def test_lock_never_follows_a_planted_symlink(lock_dir, tmp_path):
    lock_dir.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.symlink(victim, lock_dir / tune.TuneLock(str(lock_dir)).name())
    with pytest.raises(tune.LockBusy, match="is a symlink; refusing it"):
        with tune.TuneLock(str(lock_dir)):
            pytest.fail("locked through a symlink")
    assert victim.read_text() == "precious\n"


def test_lock_refuses_a_hard_link_and_a_symlinked_directory(lock_dir, tmp_path):
    lock_dir.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.link(victim, lock_dir / tune.TuneLock(str(lock_dir)).name())
    with pytest.raises(tune.LockBusy, match="with one link"):
        with tune.TuneLock(str(lock_dir)):
            pytest.fail("locked a hard link")
    assert victim.read_text() == "precious\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "linked").symlink_to(elsewhere)
    with pytest.raises(tune.LockBusy, match="not a directory"):
        with tune.TuneLock(str(tmp_path / "linked")):
            pytest.fail("locked in a symlinked directory")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o720, 0o702])
def test_lock_refuses_a_directory_others_can_write(lock_dir, mode):
    lock_dir.mkdir()
    lock_dir.chmod(mode)
    with pytest.raises(tune.LockBusy, match=f"mode {mode:04o}"):
        with tune.TuneLock(str(lock_dir)):
            pytest.fail("locked in a loose directory")
    assert list(lock_dir.iterdir()) == []


def test_lock_refuses_a_directory_of_another_user(lock_dir):
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    lock_dir.mkdir(mode=0o700)
    os.chown(lock_dir, 65534, 65534)
    with pytest.raises(tune.LockBusy, match="owned by uid 65534"):
        with tune.TuneLock(str(lock_dir)):
            pytest.fail("locked in a foreign directory")


@pytest.mark.parametrize("mode", [["--apply"], ["--procedure", "--peer", "127.0.0.1"]])
def test_settings_are_read_only_with_the_lock_held(mode, lock_dir, monkeypatch, capsys):
    """Issue 9, 1.4: the audit (what becomes the snapshot's "previous" values) runs only
    while this process holds the lock."""
    monkeypatch.setattr(lock_mod, "LOCK_DIR", str(lock_dir))
    monkeypatch.setattr(suite, "require_root", lambda what: None)
    audits = []

    def audit_checking_the_lock(profile, interface, path=None):
        with pytest.raises(tune.LockBusy, match=f"pid {os.getpid()},"):
            with tune.TuneLock():
                pass
        audits.append(interface)
        return [Finding("sysctl", "net.ipv4.tcp_sack", 1, "pass", "r")]

    monkeypatch.setattr(suite, "run_audit", audit_checking_the_lock)
    assert cli_tune.run(parse(*mode, "--interface", "lo")) == 0
    assert audits == ["lo"]
    assert "nothing to change" in capsys.readouterr().out


def test_persist_files_never_written_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    plan = plan_of([Change("net.ipv4.tcp_sack", "sysctl", None, "1", "0"),
                    Change("mtu", "interface", "eth9", "1500", "9000")])
    for planted in ("90-beoperf.conf", "beoperf-tune.service"):
        out = tmp_path / f"p-{planted}"
        out.mkdir()
        (out / planted).symlink_to(victim)
        with pytest.raises(UsageError, match=f"{planted} exists; not overwritten"):
            cli_tune.write_persist(str(out), plan)
        assert [p.name for p in out.iterdir()] == [planted]  # nothing else written either
    assert victim.read_text() == "precious\n"


# --------------------------------------------------------------------------- namespaces


SYSCTLS = ("net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack", "net.ipv4.tcp_rmem")
RMEM_TARGET = "4096 87380 4194304"


def host_state() -> dict:
    """This (root namespace) host's values of the sysctls touched, and its MTUs."""
    state = {k: Path("/proc/sys/" + k.replace(".", "/")).read_text() for k in SYSCTLS}
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                      text=True, check=True).stdout)
    state["mtus"] = {link["ifname"]: link["mtu"] for link in links}
    return state


def ns_state(host) -> dict:
    paths = ["/proc/sys/" + k.replace(".", "/") for k in SYSCTLS]
    out = host.run(["cat", *paths, f"/sys/class/net/{host.ifname}/mtu"]).stdout.splitlines()
    return {**dict(zip(SYSCTLS, [" ".join(v.split()) for v in out[:3]], strict=True)),
            "mtu": out[3]}


def write_profile(tmp_path: Path, mtu: int) -> Path:
    expect = {
        "net.ipv4.tcp_timestamps": {"op": "eq", "value": 0, "reason": "test"},
        "net.ipv4.tcp_sack": {"op": "eq", "value": 0, "reason": "test"},
        "net.ipv4.tcp_rmem": {"op": "eq", "value": [int(v) for v in RMEM_TARGET.split()],
                              "set": RMEM_TARGET, "reason": "test"},
        "mtu": {"op": "eq", "value": mtu, "reason": "test"},
    }
    path = tmp_path / f"profile-{mtu}.json"
    path.write_text(json.dumps({"name": "test", "expect": expect}))
    return path


def ns_tune(host, *args: str):
    return host.run(tune_argv("--interface", host.ifname, *args), check=False)


@pytest.mark.tools("sysctl")
def test_netns_plan_apply_rollback(netns_pair, tmp_path):
    server, client = netns_pair
    host_before = host_state()
    server.run(["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 6291456"])
    before = ns_state(server)
    assert before["net.ipv4.tcp_rmem"] == "4096 131072 6291456"
    profile = str(write_profile(tmp_path, 9000))

    res = ns_tune(server, "--profile-file", profile, "--plan", "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)["body"]
    assert [c["key"] for c in plan["changes"]] == [
        "net.ipv4.tcp_rmem", "net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack", "mtu"]
    assert plan["changes"][-1]["current"] == before["mtu"] == "1500"
    assert ns_state(server) == before  # planning changes nothing

    rb = tmp_path / "rb.json"
    res = ns_tune(server, "--profile-file", profile, "--apply", "--rollback-file", str(rb))
    assert res.returncode == 0, res.stderr
    assert ns_state(server) == {"net.ipv4.tcp_timestamps": "0", "net.ipv4.tcp_sack": "0",
                                "net.ipv4.tcp_rmem": RMEM_TARGET, "mtu": "9000"}
    saved = json.loads(rb.read_text())
    validate("rollback", saved)
    assert saved["kind"] == "rollback" and saved["body"]["interface"] == "eth0"
    assert {c["key"]: c["previous"] for c in saved["body"]["changes"]}["net.ipv4.tcp_rmem"] == \
        "4096 131072 6291456"
    assert ns_state(client)["mtu"] == "1500"  # the other end is not touched

    res = server.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 0, res.stderr
    assert "restored 4 value(s)" in res.stdout
    assert ns_state(server) == before
    assert host_state() == host_before


@pytest.mark.tools("ethtool")
def test_netns_failure_halfway_rolls_back(netns_pair, tmp_path):
    # the last change fails: veth's large-receive-offload is "off [fixed]"
    server, _client = netns_pair
    host_before = host_state()
    before = ns_state(server)
    path = write_profile(tmp_path, 1500)
    profile = json.loads(path.read_text())
    profile["expect"]["offload.large-receive-offload"] = {"op": "eq", "value": True,
                                                          "reason": "test"}
    path.write_text(json.dumps(profile))
    rb = tmp_path / "rb.json"
    res = ns_tune(server, "--profile-file", str(path), "--apply", "--rollback-file", str(rb))
    assert res.returncode == 1
    err = res.stderr.strip()
    assert err.count("\n") == 0, err
    assert "offload.large-receive-offload" in err and "rolled back the 3 change(s)" in err
    assert res.stdout.count("set net.ipv4.") == 3
    assert ns_state(server) == before
    assert len(json.loads(rb.read_text())["body"]["changes"]) == 4  # snapshot written first
    assert host_state() == host_before


@pytest.mark.tools("sysctl")
def test_netns_rollback_after_a_failed_apply_leaves_what_never_changed(netns_pair, tmp_path):
    """Issue 28: the last change is net.core.rmem_max, read-only in a network namespace:
    the apply fails and undoes the three before it; `tune --rollback` of its file then
    exits 0, leaving alone the keys that already have their previous value (writing
    rmem_max back failed again, and the rollback with it)."""
    server, _client = netns_pair
    host_before = host_state()
    before = ns_state(server)
    rmem_max = Path("/proc/sys/net/core/rmem_max").read_text().strip()
    path = write_profile(tmp_path, 1500)
    profile = json.loads(path.read_text())
    profile["expect"]["net.core.rmem_max"] = {"op": "eq", "value": int(rmem_max) + 4096,
                                              "reason": "test"}
    path.write_text(json.dumps(profile))
    rb = tmp_path / "rb.json"
    res = ns_tune(server, "--profile-file", str(path), "--apply", "--rollback-file", str(rb))
    assert res.returncode == 1 and "net.core.rmem_max" in res.stderr, res.stderr
    keys = [c["key"] for c in json.loads(rb.read_text())["body"]["changes"]]
    assert "net.core.rmem_max" in keys and len(keys) == 4
    assert ns_state(server) == before
    # a value changed by hand since is restored; the others are left alone
    server.run(["sysctl", "-w", "net.ipv4.tcp_sack=0"])
    res = server.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert sum(ln.startswith("already ") for ln in lines) == 3, res.stdout
    assert "already net.core.rmem_max" in res.stdout
    assert "restored net.ipv4.tcp_sack" in res.stdout
    assert f"restored 1 value(s) from {rb}" in res.stdout and "3 already had it" in res.stdout
    assert ns_state(server) == before
    assert host_state() == host_before
    assert Path("/proc/sys/net/core/rmem_max").read_text().strip() == rmem_max


def gro(host) -> str:
    out = host.run(["ethtool", "-k", host.ifname]).stdout
    return next(line.split(":")[1].split()[0] for line in out.splitlines()
                if line.startswith("generic-receive-offload:"))


def offload_profile(tmp_path: Path) -> str:
    path = tmp_path / "gro.json"
    path.write_text(json.dumps({"name": "gro", "expect": {
        "offload.generic-receive-offload": {"op": "eq", "value": True, "set": "on",
                                            "reason": "test"},
        "net.ipv4.tcp_sack": {"op": "eq", "value": 0, "reason": "test"}}}))
    return str(path)


def host_offloads() -> str:
    return subprocess.run(["ethtool", "-k", "lo"], capture_output=True, text=True).stdout


@pytest.mark.tools("ethtool")
def test_netns_ethtool_offload_applied_and_rolled_back(netns_pair, tmp_path):
    server, client = netns_pair
    host_before, lo_before = host_state(), host_offloads()
    server.run(["ethtool", "-K", server.ifname, "gro", "off"])
    profile, rb = offload_profile(tmp_path), tmp_path / "rb.json"
    res = ns_tune(server, "--profile-file", profile, "--plan", "--json")
    plan = json.loads(res.stdout)["body"]
    assert [(c["check"], c["key"]) for c in plan["changes"]] == [
        ("sysctl", "net.ipv4.tcp_sack"), ("offloads", "offload.generic-receive-offload")]
    assert plan["changes"][1]["apply"] == {"argv": ["ethtool", "-K", "eth0", "gro", "on"]}
    res = ns_tune(server, "--profile-file", profile, "--apply", "--rollback-file", str(rb))
    assert res.returncode == 0, res.stderr
    assert gro(server) == "on" and gro(client) == "off"
    res = server.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 0, res.stderr
    assert gro(server) == "off" and ns_state(server)["net.ipv4.tcp_sack"] == "1"
    assert host_state() == host_before and host_offloads() == lo_before


def rmem_mtu_profile(tmp_path: Path, rmem: str, mtu: int) -> str:
    path = tmp_path / f"rmem-mtu-{mtu}.json"
    path.write_text(json.dumps({"name": f"rmem-mtu-{mtu}", "expect": {
        "net.ipv4.tcp_rmem": {"op": "eq", "value": [int(v) for v in rmem.split()],
                              "set": rmem, "reason": "test"},
        "mtu": {"op": "eq", "value": mtu, "reason": "test"}}}))
    return str(path)


@pytest.mark.tools("sysctl")
def test_netns_rollback_of_two_applies_restores_the_first_values(netns_pair, tmp_path):
    """Two applies in a row (tcp_rmem and the MTU, twice), their rollback files merged into
    one in the order applied: the rollback must end at the values before the first apply.
    Restored in the order applied it would end at the first apply's targets."""
    server, client = netns_pair
    host_before = host_state()
    server.run(["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 6291456"])
    before = ns_state(server)
    files = []
    for rmem, mtu in ((RMEM_TARGET, 9000), ("4096 65536 1048576", 4000)):
        files.append(tmp_path / f"rb-{mtu}.json")
        res = ns_tune(server, "--profile-file", rmem_mtu_profile(tmp_path, rmem, mtu),
                      "--apply", "--rollback-file", str(files[-1]))
        assert res.returncode == 0, res.stderr
    first, second = (json.loads(f.read_text()) for f in files)
    first["body"]["changes"] += second["body"]["changes"]
    assert [(c["key"], c["previous"]) for c in first["body"]["changes"]] == [
        ("net.ipv4.tcp_rmem", "4096 131072 6291456"), ("mtu", "1500"),
        ("net.ipv4.tcp_rmem", RMEM_TARGET), ("mtu", "9000")]
    merged = tmp_path / "rb.json"
    merged.write_text(json.dumps(first))
    merged.chmod(0o600)
    assert ns_state(server)["net.ipv4.tcp_rmem"] == "4096 65536 1048576"
    assert ns_state(server)["mtu"] == "4000"

    res = server.run(tune_argv("--rollback", str(merged)), check=False)
    assert res.returncode == 0, res.stderr
    assert "restored 4 value(s)" in res.stdout
    assert ns_state(server) == before
    assert ns_state(client)["mtu"] == "1500" and host_state() == host_before


LOCK_HOLDER = ("import sys, time; from beoperf.audit.tune import TuneLock\n"
               "with TuneLock():\n    print('locked', flush=True); time.sleep(60)\n")


def test_netns_second_tune_is_refused_while_one_runs(netns_pair, tmp_path):
    server, client = netns_pair
    before = ns_state(server)
    holder = server.popen([sys.executable, "-c", LOCK_HOLDER], stdout=subprocess.PIPE,
                          text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        profile = str(write_profile(tmp_path, 9000))
        res = ns_tune(server, "--profile-file", profile, "--apply",
                      "--rollback-file", str(tmp_path / "rb.json"))
        assert res.returncode == 1
        assert f"another beoperf tune (pid {holder.pid}, user root, command " in res.stderr
        assert res.stderr.strip().count("\n") == 0
        assert ns_state(server) == before
        # another namespace has its own lock
        res = ns_tune(client, "--profile-file", profile, "--apply",
                      "--rollback-file", str(tmp_path / "rb-client.json"))
        assert res.returncode == 0, res.stderr
        res = client.run(tune_argv("--rollback", str(tmp_path / "rb-client.json")),
                         check=False)
        assert res.returncode == 0, res.stderr
    finally:
        holder.kill()
        holder.wait()
    res = ns_tune(server, "--profile-file", profile, "--apply",
                  "--rollback-file", str(tmp_path / "rb.json"))
    assert res.returncode == 0, res.stderr  # released when its holder died
    assert server.run(tune_argv("--rollback", str(tmp_path / "rb.json")), check=False) \
        .returncode == 0
    assert ns_state(server) == before


def test_netns_rollback_file_of_another_namespace_is_refused(netns_pair, tmp_path):
    server, client = netns_pair
    before_server, before_client = ns_state(server), ns_state(client)
    profile, rb = str(write_profile(tmp_path, 9000)), tmp_path / "rb.json"
    assert ns_tune(server, "--profile-file", profile, "--apply",
                   "--rollback-file", str(rb)).returncode == 0
    res = client.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 1 and "rollback refused" in res.stderr
    assert "network namespace" in res.stderr and "--force" in res.stderr
    assert ns_state(client) == before_client
    assert server.run(tune_argv("--rollback", str(rb)), check=False).returncode == 0
    assert ns_state(server) == before_server


def test_persist_files_for_a_plan(tmp_path, capsys):
    changes = [Change("net.ipv4.tcp_sack", "sysctl", None, "1", "0"),
               Change("coalesce.rx_usecs", "coalesce", "eth9", "8", "0"),
               Change("mtu", "interface", "eth9", "1500", "9000")]
    plan = plan_of(changes)
    files = tune_report.persist_files(plan)
    assert files["90-beoperf.conf"].splitlines()[1:] == ["net.ipv4.tcp_sack = 0"]
    unit = files["beoperf-tune.service"].splitlines()
    assert [line for line in unit if line.startswith("ExecStart=")] == [
        "ExecStart=ethtool -C eth9 rx-usecs 0", "ExecStart=ip link set dev eth9 mtu 9000"]
    assert "After=network-online.target" in unit and "Type=oneshot" in unit
    assert tune_report.persist_files(plan_of([])) == {}
    assert cli_tune.write_persist(str(tmp_path / "p"), plan) == 0
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "90-beoperf.conf", "beoperf-tune.service"]
    with pytest.raises(UsageError, match="exists; not overwritten"):
        cli_tune.write_persist(str(tmp_path / "p"), plan)


# --------------------------------------------------------------------------- documents


@pytest.mark.parametrize("name", ["tune-plan-v2-before-issue9.json",
                                  "tune-plan-v2-after-issue9.json"])
def test_plan_files_of_earlier_versions_load(name):
    raw = json.loads((FIXTURES / "documents" / name).read_text())
    doc = model.load(FIXTURES / "documents" / name)
    validate("tune-plan", doc.to_json())
    assert (doc.kind, doc.schema_version) == ("tune-plan", 3)
    assert doc.body["changes"] == raw["changes"] and doc.body["advice"] == raw["advice"]
    assert doc.meta["host"] == raw["host"]


def test_plan_text_is_what_issue_9_printed():
    """Byte for byte what cli/tune.py printed before issue 10 for the same plan
    (tests/fixtures/rendered/made_by_issue9.py wrote the expected text)."""
    doc = model.load(FIXTURES / "documents" / "tune-plan-v2-after-issue9.json")
    assert report.render(doc) + "\n" == (FIXTURES / "rendered" / "tune-plan.txt").read_text()


def private_copy(tmp_path: Path, name: str, change=None) -> Path:
    """A fixture copied as the user would keep it (owned, 0600), optionally changed."""
    doc = json.loads((FIXTURES / "documents" / name).read_text())
    if change:
        change(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


def test_rollback_file_of_issue_9_loads_and_passes_every_check(tmp_path):
    """The version 2 rollback file issue 9 wrote loads as version 3 and passes the
    allow-list and value checks (loaded only: never applied here)."""
    path = private_copy(tmp_path, "rollback-v2-after-issue9.json")
    doc, changes = tune.load_rollback(str(path))
    validate("rollback", doc.to_json())
    assert (doc.kind, doc.schema_version) == ("rollback", 3)
    assert (doc.body["host"], doc.body["netns"]) == ("vm", 4026531833)
    assert doc.meta["utc_start"] == "2026-11-23T11:00:00+00:00"
    assert changes == [Change("net.ipv4.tcp_timestamps", "sysctl", None, "1", "0"),
                       Change("net.ipv4.tcp_sack", "sysctl", None, "1", "0")]
    assert report.render(doc).splitlines()[1] == \
        "  net.ipv4.tcp_timestamps: restore '1' (write '1' to /proc/sys/net/ipv4/tcp_timestamps)"
    path.chmod(0o666)
    with pytest.raises(TuneError, match="writable by group or others"):
        tune.load_rollback(str(path))


def add_core_pattern(doc: dict) -> None:
    doc["changes"].append({"key": "kernel.core_pattern", "check": "sysctl", "interface": None,
                           "previous": "|/tmp/evil %p", "target": "core",
                           "restore": {"write": "/proc/sys/kernel/core_pattern",
                                       "value": "|/tmp/evil %p"}})


@pytest.mark.parametrize("change, message", [
    (add_core_pattern, "change 3 .'kernel.core_pattern'.: 'kernel.core_pattern' is not a"),
    (lambda d: d["changes"][0].update(previous="7"), "tcp_timestamps = '7' is not an integer"),
    (lambda d: d["changes"][1].update(restore={"write": "/etc/passwd", "value": "1"}),
     "'restore' does not match key and previous"),
    (lambda d: d.update(schema_version=1), "beoperf.rollback schema version 1 is not one"),
    (lambda d: d.update(changes="all"), "at body/changes: 'all' is not of type 'array'"),
])
def test_rollback_files_of_issue_9_get_every_check(tmp_path, change, message):
    path = private_copy(tmp_path, "rollback-v2-after-issue9.json", change)
    with pytest.raises(TuneError, match=message) as info:
        tune.load_rollback(str(path))
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_rollback_text_after_apply_and_restore():
    doc = snapshot([MTU_CHANGE])
    assert report.render(doc, saved_to="/x/rb.json") == \
        "applied 1 change(s); undo with 'beoperf tune --rollback /x/rb.json'"
    assert report.render(doc, restored_from="rb.json") == \
        f"restored 1 value(s) from rb.json (host {doc.body['host']})"
    assert report.render(snapshot([]), saved_to="rb.json") == \
        "nothing to change (no rollback file written)"


def as_issue_9_wrote_it(path: Path) -> None:
    """Rewrite a rollback file in the shape issue 9 wrote ("beoperf.rollback" 2)."""
    doc = json.loads(path.read_text())
    body = doc["body"]
    old = {"format": "beoperf.rollback", "schema_version": 2, "host": body["host"],
           "netns": body["netns"], "created": doc["meta"]["utc_start"],
           "profile": body["profile"], "interface": body["interface"],
           "changes": body["changes"]}
    path.write_text(json.dumps(old, indent=2))


@pytest.mark.tools("sysctl")
def test_netns_rollback_file_of_issue_9_restores(netns_pair, tmp_path):
    server, _client = netns_pair
    host_before = host_state()
    before = ns_state(server)
    profile, rb = str(write_profile(tmp_path, 9000)), tmp_path / "rb.json"
    res = ns_tune(server, "--profile-file", profile, "--apply", "--rollback-file", str(rb))
    assert res.returncode == 0, res.stderr
    assert ns_state(server)["mtu"] == "9000"
    as_issue_9_wrote_it(rb)
    res = server.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 0, res.stderr
    assert "restored 4 value(s)" in res.stdout
    assert ns_state(server) == before and host_state() == host_before


def test_plan_needs_no_working_directory(tmp_path, monkeypatch):
    """Only --apply and --procedure name a default rollback file (in the working
    directory): a plan works where the working directory is gone."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    res = cli("tune", "--interface", "lo", "--json")
    assert res.status == 0, res.stderr
    assert res.json["kind"] == "tune-plan"
