"""`beoperf audit`: judging with fake facts, the CLI on this machine, and inside namespaces."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beoperf import __version__, errors, model, report, sysinfo
from beoperf.audit import base, checks, tune
from beoperf.audit.base import Check, Unavailable, Unknown
from beoperf.audit.buffers import advise
from beoperf.cli import Parser, UsageError
from beoperf.cli import audit as cli_audit
from beoperf.model.document import validate
from beoperf.suites import audit as suite
from helpers import cli

FIXTURES = Path(__file__).parent / "fixtures"
DOCUMENTS = FIXTURES / "documents"
RENDERED = FIXTURES / "rendered"

# Runs `beoperf audit` even while cli/__init__.py's COMMANDS does not list "audit" yet.
RUNNER = ("import sys; from beoperf import cli; "
          "cli.COMMANDS = cli.COMMANDS if 'audit' in cli.COMMANDS "
          "else (*cli.COMMANDS, 'audit'); sys.exit(cli.main(sys.argv[1:]))")


def audit_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", RUNNER, "audit", *args]


def parse(*argv: str) -> argparse.Namespace:
    parser = Parser(prog="beoperf")
    cli_audit.add_parser(parser.add_subparsers(dest="command", parser_class=Parser))
    return parser.parse_args(["audit", *argv])


def by_key(findings) -> dict[str, dict]:
    return {(f["key"] if isinstance(f, dict) else f.key):
            (f if isinstance(f, dict) else f.to_dict()) for f in findings}


# --------------------------------------------------------------------------- profiles


@pytest.mark.parametrize("name", base.PROFILES)
def test_profiles_load_and_have_reasons(name):
    profile = base.load_profile(name)
    assert profile["name"] == name and profile["expect"]
    for key, rule in profile["expect"].items():
        assert rule["reason"], key
        assert rule.get("severity", "warn") in ("warn", "fail"), key
        assert rule.get("note") or rule.get("op", "eq") in ("eq", "in", "ge", "le"), key


def test_unknown_profile_is_key_error():
    with pytest.raises(KeyError):
        base.load_profile("nonsense")


def test_tcp_low_latency_never_fails():
    for name in base.PROFILES:
        rule = base.load_profile(name)["expect"]["net.ipv4.tcp_low_latency"]
        check = checks.Sysctls()
        for value in (0, 1, Unknown("/proc/sys/net/ipv4/tcp_low_latency does not exist")):
            f = check.judge_one("net.ipv4.tcp_low_latency", value, rule)
            assert f.status in ("pass", "unknown")
            assert "4.14" in f.reason


# --------------------------------------------------------------------------- judging


LATENCY = {"expect": base.load_profile("latency")["expect"]}


def judge(cls, facts, profile=None, interface="eth9"):
    return by_key(cls(interface).judge(facts, profile or LATENCY))


def test_each_status_is_reachable():
    got = judge(checks.Sysctls, {"net.core.busy_read": 50, "net.core.busy_poll": 0,
                                 "net.core.rmem_max": Unknown("permission denied")})
    assert got["net.core.busy_read"]["status"] == "pass"
    assert got["net.core.busy_poll"]["status"] == "warn"
    assert got["net.core.rmem_max"]["status"] == "unknown"
    assert got["net.core.rmem_max"]["reason"] == "permission denied"
    got = judge(checks.Coalescing, {"coalesce.rx_usecs": 8, "coalesce.adaptive_rx": True})
    assert got["coalesce.rx_usecs"]["status"] == "fail"
    assert got["coalesce.adaptive_rx"]["status"] == "fail"


def test_fail_carries_command_and_persist():
    got = judge(checks.Coalescing, {"coalesce.rx_usecs": 8, "coalesce.adaptive_rx": True})
    assert got["coalesce.rx_usecs"]["command"] == "ethtool -C eth9 rx-usecs 0"
    assert got["coalesce.adaptive_rx"]["command"] == "ethtool -C eth9 adaptive-rx off"
    assert "systemd" in got["coalesce.rx_usecs"]["persist"]
    got = judge(checks.Sysctls, {"net.core.busy_poll": 0})["net.core.busy_poll"]
    assert got["command"] == "sysctl -w net.core.busy_poll=50"
    assert got["persist"] == "/etc/sysctl.d/90-beoperf.conf: net.core.busy_poll = 50"


def test_passing_finding_has_no_command():
    got = judge(checks.Coalescing, {"coalesce.rx_usecs": 0})["coalesce.rx_usecs"]
    assert got["status"] == "pass" and got["command"] is None and got["persist"] is None


def test_throughput_buffers_judge_the_max_of_triples():
    profile = base.load_profile("throughput")
    got = judge(checks.Sysctls, {"net.ipv4.tcp_rmem": [4096, 131072, 33554432],
                                 "net.ipv4.tcp_wmem": [4096, 16384, 4194304],
                                 "net.core.rmem_max": 4194304}, profile)
    assert got["net.ipv4.tcp_rmem"]["status"] == "pass"
    assert got["net.ipv4.tcp_wmem"]["status"] == "fail"
    want = 'sysctl -w net.ipv4.tcp_wmem="4096 16384 16777216"'
    assert got["net.ipv4.tcp_wmem"]["command"] == want
    assert got["net.core.rmem_max"]["status"] == "fail"


def test_throughput_offloads_and_governor_and_thp():
    profile = base.load_profile("throughput")
    got = judge(checks.Offloads, {"offload.generic-receive-offload": False,
                                  "offload.tcp-segmentation-offload": True}, profile)
    assert got["offload.generic-receive-offload"]["status"] == "fail"
    assert got["offload.generic-receive-offload"]["command"] == "ethtool -K eth9 gro on"
    assert got["offload.tcp-segmentation-offload"]["status"] == "pass"
    assert judge(checks.CpuFreq, {"cpu.governor": "powersave"})["cpu.governor"]["status"] == \
        "fail"
    assert judge(checks.Thp, {"thp.enabled": "never"})["thp.enabled"]["status"] == "pass"
    thp = judge(checks.Thp, {"thp.enabled": "always"})["thp.enabled"]
    assert thp["status"] == "warn" and "transparent_hugepage=madvise" in thp["persist"]


def test_rings_are_judged_against_the_driver_maximum(monkeypatch):
    fixture = (FIXTURES / "ethtool" / "ixgbe-g.txt").read_text()
    monkeypatch.setattr(checks, "run_tool", lambda argv, timeout=5.0: fixture)
    rings = checks.Rings("eth9")
    facts = rings.collect()
    assert facts == {"rings.rx": 512, "rings.tx": 512, "rings.rx_max": 8192,
                     "rings.tx_max": 8192}
    got = by_key(rings.judge(facts, base.load_profile("throughput")))
    assert got["rings.rx"]["status"] == "warn" and got["rings.rx"]["target"] == "8192"
    assert got["rings.rx"]["command"] == "ethtool -G eth9 rx 8192"
    full = by_key(rings.judge({**facts, "rings.rx": 8192}, base.load_profile("throughput")))
    assert full["rings.rx"]["status"] == "pass"
    unknown = by_key(rings.judge({**facts, "rings.rx_max": Unknown("n/a")},
                                 base.load_profile("throughput")))
    assert unknown["rings.rx"]["status"] == "unknown" and "rings.rx_max" in \
        unknown["rings.rx"]["reason"]
    assert rings.read_action("rings.rx") == {"argv": ["ethtool", "-g", "eth9"], "field": "rx"}
    assert rings.parse_read("rings.tx", fixture) == 512


def test_every_check_is_one_unit():
    """Settable keys: exactly the allow-list (VALUES), the advice command is the set action,
    read-back is defined, restore is the same operation; the others say why tune leaves
    them alone."""
    seen = 0
    for cls in base.REGISTRY:
        unit = cls("eth9")
        assert set(cls.VALUES) <= set(cls.KEYS), cls.name  # tune sets only what it reads
        for key in cls.KEYS:
            if not unit.settable(key):
                assert key not in cls.VALUES, key
                continue
            seen += 1
            value = cls.VALUES[key].example()
            rule = {"op": "eq", "value": value, "set": value, "reason": "r"}
            action = unit.set_action(key, value)
            command, _persist = unit.fix(key, rule)
            if "argv" in action:
                assert command == " ".join(action["argv"]), key
            else:
                assert action["write"] == "/proc/sys/" + key.replace(".", "/")
            assert unit.read_action(key)
        if cls.name in ("irqbalance", "cpufreq", "cstates", "thp", "firewall"):
            assert cls.advice_reason and not cls.VALUES, cls.name
    assert seen >= 20
    assert not checks.Interface(None).settable("mtu")  # interface settings need one
    assert not checks.Coalescing("eth9").settable("coalesce.bogus")


def test_the_allow_list_is_explicit_not_a_pattern():
    sysctls = checks.Sysctls(None)
    for key in ("kernel.core_pattern", "kernel.modprobe", "net.ipv4.ip_forward",
                "net.core.rmem_max.x", "net/core/rmem_max"):
        assert not sysctls.settable(key), key
        with pytest.raises(KeyError):
            sysctls.set_action(key, "1")
    assert sysctls.settable("net.core.rmem_max")
    assert base.owner_of("kernel.core_pattern") is None
    assert base.owner_of("iptables.filter.INPUT") is checks.Firewall
    assert base.owner_of("mtu") is checks.Interface


def test_default_route_falls_back_to_ipv6():
    v4 = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n" \
         "eth1\t0012A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n"
    zero = "0" * 32
    v6 = (f"{zero} 00 {zero} 00 {zero} ffffffff 00000001 00000000 00200200 lo\n"
          f"{zero} 00 {zero} 00 fe800000000000000000000000000001 00000400 00000001 "
          f"00000000 00000003 ens5\n")
    assert checks.default_route_interface(v4, v6) == "ens5"
    assert checks.default_route_interface(v4, v6.splitlines()[0]) is None
    with_v4 = v4 + "eth0\t00000000\t0102A8C0\t0003\t0\t0\t0\t00000000\n"
    assert checks.default_route_interface(with_v4, v6) == "eth0"


def test_unjudgeable_value_is_unknown_and_unruled_value_passes():
    got = judge(checks.Sysctls, {"net.core.busy_read": "garbage", "net.core.rmem_default": 1})
    assert got["net.core.busy_read"]["status"] == "unknown"
    assert got["net.core.rmem_default"]["status"] == "pass"


def test_irqbalance_running_warns_for_latency():
    got = judge(checks.Irqbalance, {"irqbalance.active": True})["irqbalance.active"]
    assert got["status"] == "warn" and got["command"] == "systemctl stop irqbalance"


def test_broken_check_becomes_unknown(monkeypatch):
    class Broken(Check):
        name = "broken"

        def collect(self):
            raise RuntimeError("boom")

    class NoTool(Check):
        name = "notool"

        def collect(self):
            raise Unavailable("frobctl not installed")

    monkeypatch.setattr(base, "REGISTRY", [Broken, NoTool])
    got = base.run_audit("latency", None)
    assert [(f.check, f.status) for f in got] == [("broken", "unknown"), ("notool", "unknown")]
    assert "boom" in got[0].reason and got[1].reason == "frobctl not installed"


def test_run_tool_missing_tool():
    with pytest.raises(Unavailable, match="no-such-tool-xyz not installed"):
        base.run_tool(["no-such-tool-xyz", "-i", "eth0"])


def test_interface_checks_without_interface_are_unknown():
    facts = checks.Coalescing(None).collect()
    assert all(isinstance(v, Unknown) for v in facts.values()) and facts


def test_nic_irqs_matches_interface_names_only():
    text = ("           CPU0       CPU1\n"
            "  24:          0          0  PCI-MSI 1-edge      eth0-TxRx-0\n"
            "  25:          0          0  PCI-MSI 2-edge      eth0-TxRx-1\n"
            "  26:          0          0  PCI-MSI 3-edge      eth01\n"
            "  27:          0          0  PCI-MSI 4-edge      eth0\n"
            " NMI:          0          0   Non-maskable interrupts\n")
    assert checks.nic_irqs("eth0", text) == [24, 25, 27]


# --------------------------------------------------------------------------- CLI on this host


def test_cli_json_on_this_machine(capsys):
    args = parse("--json", "--profile", "balanced")
    assert cli_audit.run(args) == 0
    raw = json.loads(capsys.readouterr().out)
    validate("audit", raw)
    doc = model.from_json(raw)
    assert (doc.kind, doc.schema_version) == ("audit", 2)
    assert doc.body["profile"] == "balanced" and "hostname" in doc.body["host"]
    statuses = {f["status"] for f in doc.body["findings"]}
    assert statuses <= set(base.STATUSES)
    for f in doc.body["findings"]:
        assert f["reason"], f  # every finding, unknown ones included, says why


def test_cli_table_on_this_machine(capsys):
    assert cli_audit.run(parse("--interface", "lo")) == 0
    out = capsys.readouterr().out
    top, table = out.split("\n\n", 1)  # what is wrong first, then the table
    assert top.split()[0] in ("FAIL", "WARN", "NOTE", "OK")
    assert table.startswith("profile latency, interface lo:")
    assert "net.core.busy_read" in out


def test_cli_usage_errors():
    with pytest.raises(errors.BadSpec, match="unknown profile"):
        cli_audit.run(parse("--profile", "fastest"))
    with pytest.raises(errors.BadSpec, match="unknown interface"):
        cli_audit.run(parse("--interface", "nosuchif0"))
    with pytest.raises(errors.BadSpec, match="unknown interface"):
        cli_audit.run(parse("--interface", ".."))
    with pytest.raises(errors.BadSpec, match="--link-speed needs --peer"):
        cli_audit.run(parse("--link-speed", "10G"))
    with pytest.raises(UsageError, match="--link-speed: not a rate"):
        cli_audit.run(parse("--link-speed", "fast", "--peer", "localhost"))


def test_cli_exit_status_through_main():
    bad = subprocess.run(audit_argv("--interface", "nosuchif0"), capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "unknown interface" in bad.stderr


def test_cli_json_carries_the_beoperf_version(capsys):
    assert cli_audit.run(parse("--json", "--interface", "lo")) == 0
    assert json.loads(capsys.readouterr().out)["meta"]["beoperf"] == __version__


def test_peer_takes_host_names():
    assert suite.pick_interface(None, "localhost") == "lo"
    assert suite.pick_interface(None, "127.0.0.1") == "lo"
    with pytest.raises(errors.BadSpec, match="--peer: unknown host 'no-such-host.invalid'"):
        suite.pick_interface(None, "no-such-host.invalid")
    with pytest.raises(errors.BadSpec, match="not a host name"):
        suite.pick_interface(None, "two words")


def test_peer_name_resolution_is_bounded_in_time(monkeypatch):
    monkeypatch.setattr(sysinfo.socket, "getaddrinfo", lambda *a, **k: time.sleep(30))
    started = time.monotonic()
    with pytest.raises(ValueError, match="resolving 'slow.example' took more than 0.2 s"):
        sysinfo.resolve_host("slow.example", timeout=0.2)
    assert time.monotonic() - started < 5


def test_cli_peer_host_name_in_audit_and_tune():
    for command in ("audit", "tune"):
        argv = [sys.executable, "-m", "beoperf", command, "--peer", "localhost", "--json"]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["body"]["interface"] == "lo"
        res = subprocess.run(argv[:-2] + ["no-such-host.invalid"], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 2
        assert res.stderr.count("\n") == 1 and "unknown host" in res.stderr


# --------------------------------------------------------------------------- namespaces


def host_sysctls() -> dict[str, str]:
    keys = ("net/core/busy_read", "net/ipv4/tcp_wmem", "net/ipv4/tcp_timestamps")
    out = {}
    for key in keys:
        with open(f"/proc/sys/{key}") as f:
            out[key] = f.read().strip()
    return out


def ns_audit(host, *args: str) -> dict:
    """The audit document's body, the document checked against the schema."""
    res = host.run(audit_argv("--interface", host.ifname, "--json", *args), check=False)
    assert res.returncode == 0, res.stderr
    raw = json.loads(res.stdout)
    validate("audit", raw)
    return raw["body"]


def iptables_rules(n: int) -> str:
    rules = "".join(f"-A INPUT -s 198.18.{1 + i // 250}.{1 + i % 250} -j ACCEPT\n"
                    for i in range(n))
    return f"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" \
           f"{rules}COMMIT\n"


@pytest.mark.tools("sysctl")
def test_netns_audit_sees_mtu_driver_and_sysctl(netns_pair):
    # net.core.busy_read/busy_poll are global (not per namespace: absent inside one), so
    # the per-namespace sysctls changed here are net.ipv4.tcp_*.
    server, _client = netns_pair
    before = host_sysctls()
    server.set_mtu(9000)
    server.run(["sysctl", "-w", "net.ipv4.tcp_timestamps=0"])
    server.run(["sysctl", "-w", "net.ipv4.tcp_wmem=4096 16384 16777216"])
    doc = ns_audit(server)
    got = by_key(doc["findings"])
    assert doc["interface"] == "eth0"
    assert got["mtu"]["value"] == 9000
    assert got["net.ipv4.tcp_timestamps"]["value"] == 0
    assert got["net.ipv4.tcp_timestamps"]["status"] == "warn"
    assert got["net.ipv4.tcp_timestamps"]["command"] == "sysctl -w net.ipv4.tcp_timestamps=1"
    assert got["net.ipv4.tcp_wmem"]["value"] == [4096, 16384, 16777216]
    assert got["driver"]["value"] == "veth"
    if got["net.core.busy_read"]["status"] == "unknown":  # not visible in a namespace
        assert "namespace" in got["net.core.busy_read"]["reason"]
    throughput = by_key(ns_audit(server, "--profile", "throughput")["findings"])
    assert throughput["net.ipv4.tcp_wmem"]["status"] == "pass"
    assert host_sysctls() == before


def serve_in(host, port: int = 5202) -> subprocess.Popen:
    """beoperf serve in ``host``'s namespace (stopped with the namespace)."""
    proc = host.popen([sys.executable, "-m", "beoperf", "serve", "--port", str(port)],
                      stdout=subprocess.PIPE, text=True)
    assert f"port {port}" in proc.stdout.readline()
    return proc


def ns_plan(host, *args: str) -> dict:
    res = host.run([sys.executable, "-m", "beoperf", "tune", "--interface", host.ifname,
                    "--profile", "throughput", "--json", *args], check=False)
    assert res.returncode == 0, res.stderr
    raw = json.loads(res.stdout)
    validate("tune-plan", raw)
    return raw["body"]


def test_netns_audit_peer_finds_an_mtu_mismatch_and_tune_plans_no_jumbo(netns_pair):
    """One end at MTU 9000, the other at 1500 (the issue's namespace): 8000-byte pings
    break.  The 9000 end's audit --peer fails the path with what to do; the 1500 end's
    tune --peer plans no MTU 9000 and its audit says why (without --peer the NIC, veth,
    takes 9000: the advice stands, as before)."""
    big, small = netns_pair
    big.set_mtu(9000)
    serve_in(big)
    serve_in(small)
    # what ping sees, the truth the audit must agree with
    assert not big.ping(small.addr4, size=8000) and big.ping(small.addr4, size=1472)
    body = ns_audit(big, "--profile", "throughput", "--peer", small.addr4)
    path = by_key(body["findings"])["path.mtu"]
    assert (path["status"], path["value"]) == ("fail", 1500), path
    assert path["reason"].startswith(f"MTU mismatch on the path to {small.addr4}: 9000-byte "
                                     "packets (this interface's MTU) do not cross it, "
                                     "1500-byte ones do")
    assert path["command"] == f"ip link set dev {big.ifname} mtu 1500"
    text = big.run(audit_argv("--interface", big.ifname, "--profile", "throughput",
                              "--peer", small.addr4)).stdout
    assert text.startswith("FAIL      path.mtu = 1500: MTU mismatch"), text
    mtu = by_key(ns_audit(small, "--profile", "throughput", "--peer", big.addr4)[
        "findings"])["mtu"]
    assert mtu["status"] == "pass" and mtu["reason"].startswith(
        f"jumbo frames (9000) not advised for the path to {big.addr4}")
    assert "mtu" not in [c["key"] for c in ns_plan(small, "--peer", big.addr4)["changes"]]
    blind = {c["key"]: c for c in ns_plan(small)["changes"]}
    assert blind["mtu"]["target"] == "9000"  # no peer: within the NIC's maximum


def test_netns_audit_peer_passes_a_path_that_carries_its_mtu(netns_pair):
    a, b = netns_pair
    a.set_mtu(9000)
    b.set_mtu(9000)
    serve_in(b)
    assert a.ping(b.addr4, size=8972)
    found = by_key(ns_audit(a, "--profile", "throughput", "--peer", b.addr4)["findings"])
    assert (found["path.mtu"]["status"], found["path.mtu"]["value"]) == ("pass", 9000)
    assert found["mtu"]["status"] == "pass"
    # IPv6 too: its headers are 48 bytes, the probe still the interface's MTU
    v6 = by_key(ns_audit(a, "--profile", "throughput", "--peer", b.addr6)["findings"])
    assert (v6["path.mtu"]["status"], v6["path.mtu"]["value"]) == ("pass", 9000)


def test_netns_audit_peer_without_serve_says_the_path_was_not_probed(netns_pair):
    a, b = netns_pair
    found = by_key(ns_audit(a, "--profile", "throughput", "--peer", b.addr4)["findings"])
    path = found["path.mtu"]
    assert path["status"] == "unknown" and "was not probed" in path["reason"]
    assert "beoperf serve" in path["reason"]
    assert found["mtu"]["status"] == "pass" and "not advised" in found["mtu"]["reason"]


@pytest.mark.parametrize("mtu, max_mtu, path, status, words", [
    (1400, 1400, None, "pass", "jumbo frames (9000) not advised: this NIC takes at most 1400"),
    (1500, 4000, {"peer": "n2"}, "pass", "this NIC takes at most 4000"),
    (1500, Unknown("ip not installed"), None, "unknown",
     "the NIC's maximum MTU is unknown (ip not installed)"),
    (1500, 65535, {"peer": "n2"}, "pass", "not advised for the path to n2: a 9000-byte "
                                          "don't-fragment probe must cross it both ways"),
    (1500, 65535, None, "warn", "the NIC takes up to 65535"),
    (1500, 0, None, "warn", "the NIC takes any size (no maximum set by its driver)"),
    (1400, 65535, None, "pass", "this NIC's MTU 1400 is below Ethernet's 1500"),  # the issue's VM
    (9000, 1500, None, "pass", "jumbo frames (9000) cut per-packet costs"),  # already there
])
def test_jumbo_frames_are_advised_only_within_the_nic_and_a_probed_path(mtu, max_mtu, path,
                                                                          status, words):
    """The decision from the facts: a VM NIC whose maximum is below 9000 (none that a
    namespace can make: veth, bridges and macvlan all take 65535) gets no jumbo advice,
    and says why; tune plans it only when the audit advises it."""
    facts = {"interface": "eth9", "mtu": mtu, "max_mtu": max_mtu}
    found = by_key(checks.Interface("eth9", path).judge(facts, base.load_profile(
        "throughput")))["mtu"]
    assert found["status"] == status and words in found["reason"], found
    planned = tune.make_plan([base.Finding(**found)], base.load_profile("throughput"), "eth9")
    assert [c.key for c in planned.changes] == (["mtu"] if status == "warn" else [])


def test_the_path_verdict_from_the_probes():
    probe = [{"role": "small", "bytes": 576, "ok": True, "outcome": "ok"},
             {"role": "mtu", "bytes": 9000, "ok": False, "outcome": "timeout"},
             {"role": "ethernet", "bytes": 1500, "ok": False, "outcome": "timeout"}]
    got = checks.path_finding({"peer": "n2", "mtu": 9000, "probes": probe, "carried": 576},
                              "eth0")
    assert (got.status, got.value) == ("fail", 576)
    assert "576-byte ones do" in got.reason and got.command == "ip link set dev eth0 mtu 576"
    lost = checks.path_finding({"peer": "n2", "mtu": 9000, "probes": probe[:1] and [
        {**probe[0], "ok": False, "outcome": "refused"}], "carried": None}, "eth0")
    assert lost.status == "unknown" and "(refused)" in lost.reason


@pytest.mark.skipif(shutil.which("iptables-restore") is None, reason="iptables not installed")
def test_netns_audit_counts_firewall_rules(netns_pair):
    server, client = netns_pair
    host_rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    server.run(["iptables-restore"], input=iptables_rules(300))
    got = by_key(ns_audit(server)["findings"])
    assert got["iptables.rules"]["value"] == 300
    assert got["iptables.filter.INPUT"]["value"] == 300
    assert got["iptables.rules"]["status"] == "warn"  # latency: > 100 rules
    if got["iptables.backend"]["value"] == "nf_tables":  # the same rules, counted once
        assert got["nft.iptables_nft_rules"]["value"] == 300
        assert got["nft.rules"]["value"] == 0
    other = by_key(ns_audit(client)["findings"])
    assert other["iptables.rules"]["value"] in (0, None)
    assert subprocess.run(["iptables-save"], capture_output=True, text=True).stdout == host_rules


# --------------------------------------------------------------------------- documents


@pytest.mark.parametrize("name", ["audit-v1-before-issue9.json", "audit-v1-after-issue9.json"])
def test_audit_files_of_earlier_versions_load(name):
    raw = json.loads((DOCUMENTS / name).read_text())
    doc = model.load(DOCUMENTS / name)
    validate("audit", doc.to_json())
    assert (doc.kind, doc.schema_version) == ("audit", 2)
    assert doc.body["findings"] == raw["findings"] and doc.body["profile"] == raw["profile"]
    assert doc.body["host"] == raw["host"] and doc.meta["host"] == raw["host"]["hostname"]
    assert doc.meta.get("beoperf") == raw.get("beoperf")  # absent before issue 9


def test_audit_text_is_what_issue_9_printed():
    """The renderer on a fixed document prints its answer (issue 25), then byte for byte
    what cli/audit.py printed before issue 10 (tests/fixtures/rendered/made_by_issue9.py
    wrote the expected text)."""
    doc = model.load(DOCUMENTS / "audit-v1-after-issue9.json")
    current = {"net.core.rmem_max": "212992", "net.core.wmem_max": "16777216",
               "net.ipv4.tcp_rmem": "4096 131072 6291456", "net.ipv4.tcp_wmem": None}
    doc.body["buffer_advice"] = advise(1e10, 123.4, 500, current).to_dict()
    validate("audit", doc.to_json())
    top, rest = report.render(doc, "text").split("\n\n", 1)
    assert rest + "\n" == (RENDERED / "audit.txt").read_text()
    assert top.splitlines()[0] == ("WARN      3 settings warn against the latency profile: "
                                   "net.core.busy_read, net.core.busy_poll, "
                                   "cpu.deep_cstates_enabled")
    assert top.splitlines()[1].split() == [
        "to", "do:", "beoperf", "tune", "--profile", "latency", "--interface", "eth0", "plans",
        "the", "changes", "(nothing", "changes", "without", "--apply);", "the", "commands",
        "to", "change", "them", "are", "below"]
    assert top.splitlines()[2].startswith("NOTE      10 settings could not be read")


def test_audit_answer_puts_failures_first_and_says_when_all_pass():
    doc = model.load(DOCUMENTS / "audit-v1-after-issue9.json")
    findings = doc.body["findings"]
    for f in findings[:2]:
        f.update(status="fail", command=f"sysctl -w {f['key']}=16777216", target="16777216")
    findings[2].update(status="fail", command=None, target=None, key="operstate",
                       value="down", reason="the interface should be up")
    lines = [line.split()[0] for line in report.render(doc, "text").split("\n\n")[0]
             .splitlines() if not line.startswith(" ")]
    assert lines == ["FAIL", "FAIL", "WARN", "NOTE"]
    text = report.render(doc, "text")
    assert "FAIL      operstate = down: the interface should be up" in text
    assert "FAIL      2 settings fail the latency profile: net.core.rmem_default, " \
           "net.core.rmem_max" in text
    for f in findings:
        f["status"] = "pass"
    assert report.render(doc, "text").startswith(
        f"OK        all {len(findings)} settings read pass the latency profile\n")


def test_a_fact_not_read_shows_as_no_value_not_a_python_object():
    """Regression: a finding whose rule refers to an unknown fact (rings.rx >= @rings.rx_max)
    and whose own fact is unknown carried the Unknown object itself as its value: the
    table printed "Unknown(reason=...)" and the JSON a {"reason": ...} object."""
    rings = checks.Rings("eth9")
    facts = {"rings.rx": Unknown("ethtool -g eth9: not supported"), "rings.tx": 512,
             "rings.rx_max": Unknown("ethtool -g eth9: not supported"), "rings.tx_max": 4096}
    got = by_key(rings.judge(facts, base.load_profile("throughput")))
    assert got["rings.rx"]["value"] is None and got["rings.rx"]["status"] == "unknown"
    assert "rings.rx_max is unknown" in got["rings.rx"]["reason"]
    doc = model.audit.make("throughput", "eth9", {}, list(got.values()), None, {})
    validate("audit", doc.to_json())
    row = next(line for line in report.render(doc).splitlines() if " rings.rx " in line)
    assert row.split()[:4] == ["?", "rings", "rings.rx", "-"]


@pytest.mark.parametrize("text, bps", [("10G", 1e10), ("10Gbit/s", 1e10), ("10gbps", 1e10),
                                       ("10GB/s", 8e10), ("1.25GB/s", 1e10), ("100M", 1e8)])
def test_link_speed_is_read_with_the_one_units_grammar(text, bps):
    """10GB/s is bytes: 8e10 bit/s (issue 10; before it audit read it as 1e10, 8x off)."""
    spec = cli_audit.spec_of(parse("--peer", "localhost", "--link-speed", text))
    assert spec.link_speed == pytest.approx(bps, rel=1e-12)


@pytest.mark.parametrize("text", ["", "fast", "-1G", "10X", "0"])
def test_link_speed_that_is_no_rate_is_a_usage_error(text):
    res = cli("audit", "--peer", "localhost", "--link-speed", text)
    assert res.status == 2 and len(res.error_lines) == 1
    assert "--link-speed: " in res.stderr


def test_rtt_failures_exit_as_in_pingpong():
    """A peer that refuses the RTT measurement is exit 4 (peer error), one that cannot be
    reached exit 3, as in pingpong (before issue 10 audit said 3 for both)."""
    from helpers import running_server

    with running_server(max_memory=16) as srv:  # refuses even 64-byte messages
        res = cli("audit", "--interface", "lo", "--peer", "127.0.0.1", "--port", str(srv.port),
                  "--link-speed", "10G")
    assert res.status == 4 and len(res.error_lines) == 1, res.stderr
    assert res.stderr.startswith("beoperf: peer error: cannot measure the RTT to 127.0.0.1")
    assert "more than this server's" in res.stderr and res.stdout == ""
    with socket_closed() as port:
        res = cli("audit", "--interface", "lo", "--peer", "127.0.0.1", "--port", str(port),
                  "--link-speed", "10G")
    assert res.status == 3 and len(res.error_lines) == 1, res.stderr
    assert "connection error: cannot measure the RTT" in res.stderr


def socket_closed():
    """A port on loopback nothing listens on (bound, not listening, while in use)."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def closed():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            yield sock.getsockname()[1]

    return closed()


def test_audit_buffer_advice_against_a_loopback_server(capsys):
    from helpers import running_server

    with running_server() as srv:
        assert cli_audit.run(parse("--interface", "lo", "--peer", "127.0.0.1", "--port",
                                   str(srv.port), "--link-speed", "10GB/s", "--json")) == 0
    raw = json.loads(capsys.readouterr().out)
    validate("audit", raw)
    advice = raw["body"]["buffer_advice"]
    assert advice["rate_bps"] == 8e10 and advice["rtt_samples"] >= 6
    assert advice["bdp_bytes"] == int(8e10 * advice["rtt_us"] * 1e-6 / 8)
    text = report.render(model.from_json(raw))
    assert "Socket buffers for 80 Gbit/s:" in text
