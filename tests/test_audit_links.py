"""The audit's hardware checks (issue 28 item 2): the NIC's PCIe link, bonds, duplex and
speed.  This VM has no PCIe link to read, no bonding driver and no half-duplex port, so
these run against a crafted sysfs/procfs root (the stated exception of issue 28), with the
real /proc/net/bonding files and ethtool outputs of tests/fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from beoperf import model, report
from beoperf.audit import base, links
from beoperf.audit.base import Unavailable
from beoperf.model.document import validate

FIXTURES = Path(__file__).parent / "fixtures"
BONDING = FIXTURES / "bonding"
ETHTOOL = FIXTURES / "ethtool"
LATENCY = base.load_profile("latency")


def by_key(findings) -> dict[str, base.Finding]:
    return {f.key: f for f in findings}


def nic(root: Path, name: str = "eth1", driver: str = "ixgbe", speed: str = "10000",
        duplex: str = "full", link: dict[str, str] | None = None, slot: str = "0000:01:00.0"
        ) -> Path:
    """A crafted /sys for one NIC under ``root``, laid out and linked as the kernel does:
    its PCI device (with ``link``'s files: current_link_speed ...) and driver, the
    interface under the device (``net/NAME``: speed, duplex, a ``device`` link back) and
    class/net/NAME linking to it; returns the device's directory."""
    device = root / "sys/devices/pci0000:00/0000:00:01.0" / slot
    device.mkdir(parents=True, exist_ok=True)
    drivers = root / "sys/bus/pci/drivers" / driver
    drivers.mkdir(parents=True, exist_ok=True)
    if not (device / "driver").is_symlink():
        (device / "driver").symlink_to(drivers)
    for file, text in (link or {}).items():
        (device / file).write_text(text + "\n")
    net = device / "net" / name
    net.mkdir(parents=True)
    (net / "device").symlink_to(device)
    (net / "speed").write_text(speed + "\n")
    (net / "duplex").write_text(duplex + "\n")
    (root / "sys/class/net").mkdir(parents=True, exist_ok=True)
    (root / "sys/class/net" / name).symlink_to(net)
    return device


def pcie_link(speed: str, width: str, max_speed: str, max_width: str) -> dict[str, str]:
    return {"current_link_speed": speed, "current_link_width": width,
            "max_link_speed": max_speed, "max_link_width": max_width}


def run(cls, root: Path, interface: str = "eth1") -> dict[str, base.Finding]:
    check = cls(interface)
    check.root = str(root)
    return by_key(check.judge(check.collect(), LATENCY))


# --------------------------------------------------------------------------- PCIe


@pytest.mark.parametrize("text, gts", [("8.0 GT/s PCIe", 8.0), ("2.5 GT/s PCIe", 2.5),
                                       ("16.0 GT/s PCIe", 16.0), ("5 GT/s", 5.0),
                                       ("2.5 GT/s", 2.5), ("32 GT/s", 32.0),
                                       ("Unknown", None), ("Unknown speed", None),
                                       ("", None), ("8 GT/s; rm -rf /", None)])
def test_pcie_speeds_as_each_kernel_writes_them(text, gts):
    """Linux 5.3 and later write "8.0 GT/s PCIe", earlier kernels "8 GT/s"; a link down
    reads "Unknown" (or "Unknown speed")."""
    assert links.parse_pcie_speed(text) == gts


@pytest.mark.parametrize("text, lanes", [("4", 4), ("x8", 8), ("16", 16), ("0", None),
                                         ("x0", None), ("64", None), ("four", None)])
def test_pcie_widths(text, lanes):
    assert links.parse_pcie_width(text) == lanes


def test_pcie_bandwidth_applies_each_generations_line_code():
    """8b/10b at 2.5 and 5 GT/s, 128b/130b from 8 GT/s: Gen3 doubles Gen2 per lane although
    its transfer rate is only 1.6x; lanes multiply; an unknown line code is no figure."""
    gen2, gen3 = links.pcie_bandwidth_gbps(5.0, 1), links.pcie_bandwidth_gbps(8.0, 1)
    assert gen2 is not None and gen3 is not None
    assert gen3 / gen2 == pytest.approx((8.0 * 128 / 130) / (5.0 * 8 / 10))
    assert links.pcie_bandwidth_gbps(2.5, 1) / links.pcie_bandwidth_gbps(5.0, 1) == \
        pytest.approx(0.5)
    assert links.pcie_bandwidth_gbps(8.0, 4) == pytest.approx(4 * gen3)
    assert links.pcie_bandwidth_gbps(64.0, 16) is None


def test_a_bus_that_cannot_carry_the_line_rate_fails_and_names_the_figures(tmp_path):
    """A 10 Gbit/s NIC in a PCIe 2.0 x1 slot: 5 GT/s x 1 lane x 8/10 = 4 Gbit/s each way."""
    nic(tmp_path, link=pcie_link("5.0 GT/s PCIe", "1", "5.0 GT/s PCIe", "8"))
    got = run(links.PcieLink, tmp_path)
    bandwidth = got["pcie.bandwidth_gbps"]
    assert bandwidth.status == "fail" and bandwidth.value == pytest.approx(4.0)
    for figure in ("5 GT/s x1", "4.00 Gbit/s", "10 Gbit/s"):
        assert figure in bandwidth.reason
    trained = got["pcie.trained"]
    assert trained.status == "warn" and trained.value == "5 GT/s x1 of 5 GT/s x8"
    assert "width" in trained.reason and "speed" not in trained.reason.split("(")[1]


def test_a_bus_that_carries_the_line_rate_passes_and_a_slower_training_warns(tmp_path):
    """A 10 Gbit/s NIC on a Gen3 x4 link that could run x8 (older kernel's format): the bus
    carries it (31.5 Gbit/s), but the link trained below its maximum width."""
    nic(tmp_path, link=pcie_link("8 GT/s", "4", "8 GT/s", "8"))
    got = run(links.PcieLink, tmp_path)
    assert got["pcie.bandwidth_gbps"].status == "pass"
    assert got["pcie.bandwidth_gbps"].value == pytest.approx(8 * 4 * 128 / 130, abs=0.01)
    assert got["pcie.trained"].status == "warn"
    assert "8 GT/s x4, below its maximum 8 GT/s x8 (width)" in got["pcie.trained"].reason


@pytest.mark.parametrize("second, status", [("10000", "warn"), ("-1", "pass")])
def test_the_ports_of_one_nic_share_its_link(tmp_path, second, status):
    """A dual-port 10 Gbit/s NIC on PCIe 2.0 x4 (16 Gbit/s each way): each port alone fits,
    both up at line rate do not (20 Gbit/s): warn; with the second port down: pass.  A
    virtual function (SR-IOV, a physfn link) of the same device is not a port."""
    gen2x4 = pcie_link("5.0 GT/s PCIe", "4", "5.0 GT/s PCIe", "4")
    nic(tmp_path, "eth1", link=gen2x4, slot="0000:01:00.0")
    nic(tmp_path, "eth2", speed=second, link=gen2x4, slot="0000:01:00.1")
    vf = nic(tmp_path, "eth1v0", slot="0000:01:00.2")
    (vf / "physfn").symlink_to(tmp_path / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0")
    nic(tmp_path, "eth9", slot="0000:02:00.0")  # another NIC
    got = run(links.PcieLink, tmp_path)["pcie.bandwidth_gbps"]
    assert got.status == status and got.value == pytest.approx(16.0)
    if status == "warn":
        assert "eth1 10 + eth2 10 = 20 Gbit/s, more than its 16.00" in got.reason
    check = links.PcieLink("eth1")
    check.root = str(tmp_path)
    ports = check.ports(str(tmp_path / "sys/class/net/eth1/device"))
    assert sorted(ports) == ["eth1", "eth2"]


def test_a_link_at_its_maximum_passes(tmp_path):
    nic(tmp_path, speed="25000", link=pcie_link("8.0 GT/s PCIe", "8", "8.0 GT/s PCIe", "8"))
    got = run(links.PcieLink, tmp_path)
    assert [got[k].status for k in links.PcieLink.KEYS] == ["pass", "pass"]
    assert "trained at its maximum, 8 GT/s x8" == got["pcie.trained"].reason


def test_a_link_trained_slower_than_its_maximum_speed_warns(tmp_path):
    nic(tmp_path, speed="1000", link=pcie_link("2.5 GT/s PCIe", "4", "8.0 GT/s PCIe", "4"))
    got = run(links.PcieLink, tmp_path)
    assert got["pcie.bandwidth_gbps"].status == "pass"  # 8 Gbit/s for a gigabit NIC
    assert got["pcie.trained"].status == "warn" and "(speed)" in got["pcie.trained"].reason


@pytest.mark.parametrize("case", ["no device", "virtio", "legacy pci", "link down",
                                  "no line rate", "pcie 6"])
def test_what_cannot_be_judged_is_not_known_never_a_failure(tmp_path, case):
    """A virtual NIC (no device, or a virtual driver over an emulated bus), legacy PCI (no
    link files: its bus width and clock are not in sysfs), a link down, a NIC without a
    line rate, a rate whose line code is not known here: unknown, never a failure."""
    if case == "no device":
        (tmp_path / "sys/class/net/eth1").mkdir(parents=True)
    elif case == "virtio":
        nic(tmp_path, driver="virtio_net", link=pcie_link("2.5 GT/s PCIe", "1",
                                                          "2.5 GT/s PCIe", "1"))
    elif case == "legacy pci":
        nic(tmp_path, driver="e1000", speed="1000")
    elif case == "link down":
        nic(tmp_path, link=pcie_link("Unknown", "0", "8.0 GT/s PCIe", "8"))
    elif case == "no line rate":
        nic(tmp_path, speed="-1", link=pcie_link("8.0 GT/s PCIe", "8", "8.0 GT/s PCIe", "8"))
    else:
        nic(tmp_path, link=pcie_link("64.0 GT/s PCIe", "16", "64.0 GT/s PCIe", "16"))
    got = run(links.PcieLink, tmp_path)
    assert got["pcie.bandwidth_gbps"].status == "unknown", got
    assert all(f.status in ("unknown", "pass") for f in got.values())
    if case == "legacy pci":
        assert "legacy PCI" in got["pcie.bandwidth_gbps"].reason


def test_the_loopback_of_this_machine_has_no_bus():
    """On the real /sys: lo is virtual, so its bus is not known (not a failure)."""
    got = run(links.PcieLink, Path("/"), "lo")
    assert {f.status for f in got.values()} == {"unknown"}
    assert "virtual" in got["pcie.bandwidth_gbps"].reason


def test_a_hostile_link_file_is_read_bounded_and_judged_unknown(tmp_path):
    device = nic(tmp_path, link=pcie_link("8.0 GT/s PCIe", "8", "8.0 GT/s PCIe", "8"))
    (device / "current_link_speed").write_text("8" * (links.SMALL_FILE + 1))
    got = run(links.PcieLink, tmp_path)
    assert got["pcie.bandwidth_gbps"].status == "unknown"
    with pytest.raises(Unavailable, match="current_link_speed"):
        links.read_small(str(device / "current_link_speed"))


# --------------------------------------------------------------------------- bonds


def bond_root(root: Path, text: str, bond: str = "bond0") -> None:
    (root / "proc/net/bonding").mkdir(parents=True, exist_ok=True)
    (root / "proc/net/bonding" / bond).write_text(text)
    (root / "sys/class/net" / bond).mkdir(parents=True, exist_ok=True)


def test_a_real_802_3ad_file_parses_exactly():
    parsed = links.parse_bonding((BONDING / "802.3ad-slave-down.txt").read_text())
    assert parsed["mode"] == links.LACP
    assert parsed["slaves"] == [
        {"interface": "enp1s0f0", "mii_status": "down", "speed_mbps": None,
         "duplex": "unknown", "link_failures": 2},
        {"interface": "enp1s0f1", "mii_status": "up", "speed_mbps": 1000, "duplex": "full",
         "link_failures": 2}]


def test_a_bond_with_a_slave_down_and_link_failures_warns(tmp_path):
    bond_root(tmp_path, (BONDING / "802.3ad-slave-down.txt").read_text())
    got = run(links.Bond, tmp_path, "bond0")
    assert got["bond.mode"].value == links.LACP and got["bond.mode"].status == "pass"
    assert got["bond.slaves_down"].status == "warn"
    assert got["bond.slaves_down"].value == "enp1s0f0"
    assert "1 of 2 slaves of bond0 down" in got["bond.slaves_down"].reason
    assert got["bond.mismatch"].status == "pass"  # only one slave up: nothing to compare
    assert got["bond.link_failures"].status == "warn"
    assert got["bond.link_failures"].value == "enp1s0f0:2 enp1s0f1:2"


def test_the_kernel_documentations_bond_has_no_speeds_to_compare(tmp_path):
    """Driver 2.6.1 (the kernel's own example) prints no Speed/Duplex: not known."""
    bond_root(tmp_path, (BONDING / "round-robin-kernel-doc.txt").read_text())
    got = run(links.Bond, tmp_path, "bond0")
    assert got["bond.mode"].value == links.ROUND_ROBIN
    assert got["bond.slaves_down"].status == "pass"
    assert got["bond.mismatch"].status == "unknown"
    assert got["bond.link_failures"].value == "eth1:1 eth0:1"


def crafted_mismatch(mode: str, speed: str = "100 Mbps", duplex: str = "full") -> str:
    """Crafted from the real 802.3ad file: its down slave brought up at ``speed``/``duplex``
    (and the bond's mode line replaced by ``mode``)."""
    text = (BONDING / "802.3ad-slave-down.txt").read_text()
    text = text.replace("MII Status: down\nSpeed: Unknown\nDuplex: Unknown",
                        f"MII Status: up\nSpeed: {speed}\nDuplex: {duplex}")
    return text.replace(f"Bonding Mode: {links.LACP}", f"Bonding Mode: {mode}")


@pytest.mark.parametrize("mode, status, words", [
    (links.ROUND_ROBIN, "fail", "round-robin gives each slave an equal share"),
    (links.LACP, "warn", "different aggregators"),
    ("fault-tolerance (active-backup)", "warn", "a failover")])
def test_slaves_at_different_speeds_are_judged_by_the_mode(tmp_path, mode, status, words):
    """Crafted: a 100 Mb/s slave beside a gigabit one."""
    bond_root(tmp_path, crafted_mismatch(mode))
    got = run(links.Bond, tmp_path, "bond0")["bond.mismatch"]
    assert got.status == status and words in got.reason
    assert got.value == "enp1s0f0:100Mb/s/full enp1s0f1:1000Mb/s/full"


def test_a_half_duplex_slave_fails(tmp_path):
    bond_root(tmp_path, crafted_mismatch(links.LACP, "1000 Mbps", "half"))
    got = run(links.Bond, tmp_path, "bond0")["bond.mismatch"]
    assert got.status == "fail" and "half duplex on enp1s0f0" in got.reason


def test_a_bond_with_every_slave_down_fails(tmp_path):
    text = (BONDING / "802.3ad-slave-down.txt").read_text().replace(
        "MII Status: up\nSpeed: 1000 Mbps", "MII Status: down\nSpeed: 1000 Mbps")
    bond_root(tmp_path, text)
    got = run(links.Bond, tmp_path, "bond0")["bond.slaves_down"]
    assert got.status == "fail" and got.value == "enp1s0f0 enp1s0f1"


def test_a_slave_is_audited_through_its_bond(tmp_path):
    """The interface audited is a slave: its master's /proc/net/bonding file is read."""
    bond_root(tmp_path, (BONDING / "802.3ad-slave-down.txt").read_text())
    nic(tmp_path, name="enp1s0f1", speed="1000")
    (tmp_path / "sys/class/net/enp1s0f1/master").symlink_to(tmp_path / "sys/class/net/bond0")
    got = run(links.Bond, tmp_path, "enp1s0f1")
    assert got["bond.slaves_down"].value == "enp1s0f0"


def test_an_interface_in_no_bond_passes_with_no_other_finding(tmp_path):
    nic(tmp_path)
    got = run(links.Bond, tmp_path)
    assert list(got) == ["bond.mode"] and got["bond.mode"].status == "pass"
    assert "not in a bond" in got["bond.mode"].reason


@pytest.mark.parametrize("text", ["\x00\x01garbage\n", "Slave Interface: eth0\n",
                                  "Bonding Mode: x\n" * 5000])
def test_a_hostile_bonding_file_is_one_unknown_line(tmp_path, text):
    bond_root(tmp_path, text)
    got = run(links.Bond, tmp_path, "bond0")
    assert got["bond.mode"].status == "unknown" and "\n" not in got["bond.mode"].reason
    assert len(got) == 1


# --------------------------------------------------------------------------- duplex, speed


def fake_ethtool(monkeypatch, fixture: str | None) -> None:
    def tool(argv, timeout=5.0):
        if fixture is None:
            raise Unavailable("ethtool not installed")
        return (ETHTOOL / fixture).read_text()
    monkeypatch.setattr(links, "run_tool", tool)


def test_supported_modes_of_real_and_crafted_ethtool_outputs():
    virtio = (ETHTOOL / "virtio_net-plain.txt").read_text()
    assert links.parse_link_modes(virtio) == []  # "Not reported"
    crafted = (ETHTOOL / "crafted-gigabit-at-100.txt").read_text()
    assert max(links.parse_link_modes(crafted)) == 1000
    assert max(links.parse_link_modes(crafted, "Link partner advertised link modes")) == 100
    assert links.parse_link_modes(crafted, "Advertised link modes") == \
        [10, 10, 100, 100, 1000]


def test_half_duplex_fails_with_the_command(tmp_path, monkeypatch):
    fake_ethtool(monkeypatch, "crafted-gigabit-at-100.txt")
    nic(tmp_path, speed="100", duplex="half")
    got = run(links.LinkMode, tmp_path)["link.duplex"]
    assert got.status == "fail" and got.command == "ethtool -s eth1 autoneg on"


def test_a_speed_below_the_nics_fastest_warns_naming_the_partner(tmp_path, monkeypatch):
    fake_ethtool(monkeypatch, "crafted-gigabit-at-100.txt")
    nic(tmp_path, speed="100")
    got = run(links.LinkMode, tmp_path)
    assert got["link.duplex"].status == "pass"
    speed = got["link.speed"]
    assert speed.status == "warn" and speed.value == 100
    assert "below the 1000 Mb/s it supports" in speed.reason
    assert "link partner advertises at most 100 Mb/s" in speed.reason


def test_the_fastest_speed_passes(tmp_path, monkeypatch):
    fake_ethtool(monkeypatch, "crafted-gigabit-at-100.txt")
    nic(tmp_path, speed="1000")
    assert run(links.LinkMode, tmp_path)["link.speed"].status == "pass"


@pytest.mark.parametrize("case", ["veth", "virtio", "no ethtool", "not reported",
                                  "link down"])
def test_nominal_or_unread_speeds_are_not_known(tmp_path, monkeypatch, case):
    """veth (no device) and virtio_net report nominal speeds; without ethtool, or when it
    reports no modes (this VM's virtio NIC, captured), the fastest speed is not known."""
    fake_ethtool(monkeypatch, None if case == "no ethtool" else
                 "virtio_net-plain.txt" if case == "not reported" else
                 "crafted-gigabit-at-100.txt")
    if case == "veth":
        (tmp_path / "sys/class/net/eth1").mkdir(parents=True)
        (tmp_path / "sys/class/net/eth1/speed").write_text("10000\n")
    else:
        nic(tmp_path, driver="virtio_net" if case == "virtio" else "e1000e",
            speed="-1" if case == "link down" else "100")
    got = run(links.LinkMode, tmp_path)
    assert got["link.speed"].status == "unknown", got
    if case in ("veth", "virtio"):
        assert "nominal" in got["link.speed"].reason
        assert got["link.duplex"].status == "unknown"


# --------------------------------------------------------------------------- the audit


def test_the_audit_lists_hardware_findings_with_a_to_do_line_each(tmp_path, monkeypatch):
    """The whole audit over a crafted root: the document validates, and its answer gives
    each hardware finding its own line with its figures and what to do by hand (beoperf
    tune cannot change hardware), never the tune plan's group line."""
    monkeypatch.setattr(links.HardwareCheck, "root", str(tmp_path))
    fake_ethtool(monkeypatch, "crafted-gigabit-at-100.txt")
    nic(tmp_path, speed="100", link=pcie_link("2.5 GT/s PCIe", "1", "2.5 GT/s PCIe", "4"))
    findings = [f for f in base.run_audit("latency", "eth1") if f.check in ("pcie", "bond",
                                                                            "link")]
    assert [f.key for f in findings] == ["pcie.bandwidth_gbps", "pcie.trained", "bond.mode",
                                         "link.duplex", "link.speed"]
    doc = model.audit.make("latency", "eth1", {}, [f.to_dict() for f in findings], None, {})
    validate("audit", doc.to_json())
    text = report.render(doc, "text")
    head = text.split("\n\n")[0]
    assert "WARN      pcie.trained = 2.5 GT/s x1 of 2.5 GT/s x4: trained at 2.5 GT/s x1" in head
    assert "WARN      link.speed = 100: eth1 runs at 100 Mb/s, below the 1000" in head
    assert head.count("look at the hardware the reason names: beoperf tune does not "
                      "change it") == 2
    assert "plans the changes" not in head
    table = text.split("\n\n")[1]
    assert any(line.split()[:3] == ["ok", "pcie", "pcie.bandwidth_gbps"]
               for line in table.splitlines())


def test_a_crafted_bond_of_many_slaves_with_odd_names_is_bounded():
    text = "Bonding Mode: load balancing (round-robin)\n" + "".join(
        f"\nSlave Interface: e\x1b[31m{i}\nMII Status: up\nSpeed: 1000 Mbps\n"
        for i in range(500))
    parsed = links.parse_bonding(text)
    assert len(parsed["slaves"]) == links.MAX_SLAVES
    assert "\x1b" not in parsed["slaves"][0]["interface"]
