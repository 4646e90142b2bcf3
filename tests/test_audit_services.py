"""irqbalance and the firewall services judged by enabled-at-boot as well as running now
(issue 28 item 2).  There is no systemd in this VM's namespaces: the checks run against a
stand-in ``systemctl`` on PATH (the stated exception of issue 28), which answers each
``systemctl VERB UNIT`` as systemd does (a word on stdout, the exit status systemd gives)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from beoperf import model, report
from beoperf.audit import base, checks
from beoperf.audit.base import Unknown
from beoperf.model.document import validate

LATENCY = base.load_profile("latency")

STANDIN = """#!/bin/sh
# stand-in systemctl (issue 28): $STANDIN_UNITS/UNIT.VERB holds "WORD STATUS"
f="$STANDIN_UNITS/$2.$1"
if [ -f "$f" ]; then read word code < "$f"; echo "$word"; exit "$code"; fi
case "$1" in
  is-active) echo inactive; exit 3 ;;
  *) echo "Failed to get unit file state for $2.service: No such file or directory" >&2
     exit 1 ;;
esac
"""

# what systemd answers: is-active "active" 0 / "inactive" 3; is-enabled "enabled" 0 /
# "disabled" 1; a unit not installed: is-active "inactive" 3, is-enabled nothing, 1
ANSWERS = {"active": "active 0", "inactive": "inactive 3", "failed": "failed 3",
           "enabled": "enabled 0", "disabled": "disabled 1", "masked": "masked 1",
           "static": "static 0"}


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """A stand-in systemd: /run/systemd/system and systemctl; returns set(unit, verb, word)."""
    run = tmp_path / "run-systemd-system"
    run.mkdir()
    monkeypatch.setattr(checks, "SYSTEMD_RUN", str(run))
    bindir, units = tmp_path / "bin", tmp_path / "units"
    bindir.mkdir()
    units.mkdir()
    tool = bindir / "systemctl"
    tool.write_text(STANDIN)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setenv("STANDIN_UNITS", str(units))

    def answer(unit: str, verb: str, word: str) -> None:
        (units / f"{unit}.{verb}").write_text(ANSWERS[word] + "\n")
    return answer


def judged(cls) -> dict[str, base.Finding]:
    check = cls(None)
    return {f.key: f for f in check.judge(check.collect(), LATENCY)}


def test_the_stand_in_answers_as_systemd_does(systemd):
    systemd("irqbalance", "is-active", "inactive")
    assert checks.unit_state("irqbalance", "is-active") == "inactive"
    assert checks.unit_state("firewalld", "is-enabled") == "not-found"


@pytest.mark.parametrize("active, enabled, want", [
    ("active", "enabled", ("warn", "warn")),
    ("inactive", "enabled", ("pass", "warn")),  # stopped now, back after a reboot
    ("active", "disabled", ("warn", "pass")),
    ("inactive", "disabled", ("pass", "pass")),
    ("failed", "masked", ("pass", "pass"))])
def test_irqbalance_is_judged_running_now_and_at_boot(systemd, active, enabled, want):
    systemd("irqbalance", "is-active", active)
    systemd("irqbalance", "is-enabled", enabled)
    got = judged(checks.Irqbalance)
    assert (got["irqbalance.active"].status, got["irqbalance.enabled"].status) == want
    if want[1] == "warn":
        assert got["irqbalance.enabled"].command == "systemctl disable irqbalance"
        assert "after a reboot" in got["irqbalance.enabled"].reason


def test_firewall_services_name_the_units_running_and_enabled(systemd):
    systemd("firewalld", "is-active", "inactive")
    systemd("firewalld", "is-enabled", "enabled")
    systemd("nftables", "is-active", "active")
    systemd("nftables", "is-enabled", "enabled")
    systemd("ufw", "is-enabled", "disabled")
    got = judged(checks.FirewallServices)
    active, enabled = got["firewall.services_active"], got["firewall.services_enabled"]
    assert (active.value, active.status) == ("nftables", "warn")
    assert active.command == "systemctl stop nftables"
    assert active.persist == "systemctl disable nftables"
    assert (enabled.value, enabled.status) == ("firewalld nftables", "warn")
    assert enabled.command == "systemctl disable firewalld nftables"


def test_no_firewall_service_passes(systemd):
    got = judged(checks.FirewallServices)
    assert {(f.value, f.status) for f in got.values()} == {("none", "pass")}


def test_without_systemd_the_boot_state_is_not_known(tmp_path, monkeypatch):
    monkeypatch.setattr(checks, "SYSTEMD_RUN", str(tmp_path / "absent"))
    facts = checks.FirewallServices(None).collect()
    assert all(isinstance(v, Unknown) and "no systemd" in v.reason for v in facts.values())
    facts = checks.Irqbalance(None).collect()
    assert isinstance(facts["irqbalance.active"], bool)  # from /proc: running or not
    assert isinstance(facts["irqbalance.enabled"], Unknown)


def test_a_systemctl_that_cannot_answer_is_not_known(systemd, tmp_path, monkeypatch):
    broken = tmp_path / "broken"
    broken.mkdir()
    tool = broken / "systemctl"
    tool.write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{broken}:/usr/bin:/bin")
    got = judged(checks.FirewallServices)
    assert got["firewall.services_active"].status == "pass"  # is-active 1: not active
    missing = tmp_path / "empty"
    missing.mkdir()
    monkeypatch.setenv("PATH", str(missing))
    got = judged(checks.FirewallServices)
    assert {f.status for f in got.values()} == {"unknown"}
    assert "systemctl not installed" in got["firewall.services_enabled"].reason


def test_the_audit_shows_a_service_enabled_at_boot(systemd):
    """The whole audit: a stopped but enabled irqbalance and firewalld warn, with the
    commands in the document's fixes; the document validates."""
    systemd("irqbalance", "is-active", "inactive")
    systemd("irqbalance", "is-enabled", "enabled")
    systemd("firewalld", "is-enabled", "enabled")
    findings = [f for f in base.run_audit("latency", None)
                if f.check in ("irqbalance", "firewall-services")]
    doc = model.audit.make("latency", None, {}, [f.to_dict() for f in findings], None, {})
    validate("audit", doc.to_json())
    text = report.render(doc, "text")
    assert "irqbalance.enabled, firewall.services_enabled" in text.split("\n\n")[0]
    assert "  systemctl disable irqbalance\n" in text
    assert "  systemctl disable firewalld\n" in text
    assert Path(checks.SYSTEMD_RUN).is_dir()
