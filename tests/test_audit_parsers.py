"""Tests of beoperf.audit.parsers on captured and documented command outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beoperf.audit.parsers import (
    parse_conntrack_count,
    parse_ethtool_coalesce,
    parse_ethtool_driver,
    parse_ethtool_features,
    parse_ethtool_pause,
    parse_ethtool_rings,
    parse_iptables_save,
    parse_nft_ruleset,
)

FIX = Path(__file__).resolve().parent / "fixtures"
ETH = FIX / "ethtool"
FW = FIX / "firewall"
DRIVERS = ("e1000e", "igb", "ixgbe", "mlx5_core", "virtio_net")
ALL_PARSERS = (
    parse_ethtool_driver,
    parse_ethtool_coalesce,
    parse_ethtool_rings,
    parse_ethtool_features,
    parse_ethtool_pause,
    parse_iptables_save,
    parse_nft_ruleset,
    parse_conntrack_count,
)


def eth(name: str) -> str:
    return (ETH / f"{name}.txt").read_text()


# ------------------------------------------------------------------ ethtool -i

DRIVER_EXPECTED = {
    "e1000e": ("e1000e", "3.2.6-k", "0.13-3", "0000:00:19.0", (True, True, True, True, False)),
    "igb": ("igb", "6.1.0-18-amd64", "1.63, 0x800009fa", "0000:03:00.0", (True,) * 5),
    "ixgbe": ("ixgbe", "5.1.0-k", "0x800003df, 1.2074.0", "0000:81:00.0", (True,) * 5),
    "mlx5_core": (
        "mlx5_core",
        "6.8.0-45-generic",
        "16.35.2000 (MT_0000000012)",
        "0000:3b:00.0",
        (True, True, False, False, True),
    ),
    "virtio_net": ("virtio_net", "1.0.0", None, "0000:00:03.0", (True, False, False, False, False)),
    "veth": ("veth", "1.0", None, None, (True, False, False, False, False)),
}


@pytest.mark.parametrize("drv", sorted(DRIVER_EXPECTED))
def test_driver_fixtures(drv):
    driver, version, firmware, bus, supports = DRIVER_EXPECTED[drv]
    assert parse_ethtool_driver(eth(f"{drv}-i")) == {
        "driver": driver,
        "version": version,
        "firmware_version": firmware,
        "expansion_rom_version": None,
        "bus_info": bus,
        "supports_statistics": supports[0],
        "supports_test": supports[1],
        "supports_eeprom_access": supports[2],
        "supports_register_dump": supports[3],
        "supports_priv_flags": supports[4],
    }


def test_driver_unsupported_and_odd():
    lo = parse_ethtool_driver(eth("lo-i"))  # "Cannot get driver information: ..."
    assert set(lo.values()) == {None}
    assert "driver" in lo and "bus_info" in lo
    odd = parse_ethtool_driver(
        "driver: mlx4_en (MT_0DD0120009_CX3)\nversion: 2.1.6 (Aug 2013)\n"
        "firmware-version: N/A\nbus-info:\nsupports-statistics: maybe\nNew-Field: 42\n"
        "a line without colon\n"
    )
    assert odd["driver"] == "mlx4_en (MT_0DD0120009_CX3)"
    assert odd["version"] == "2.1.6 (Aug 2013)"
    assert odd["firmware_version"] is None
    assert odd["bus_info"] is None
    assert odd["supports_statistics"] is None
    assert odd["supports_test"] is None  # missing line
    assert odd["new_field"] == "42"


def test_driver_rejects_other_output():
    with pytest.raises(ValueError):
        parse_ethtool_driver(eth("lo-k"))
    with pytest.raises(ValueError):
        parse_ethtool_driver("hello world\nthis is not ethtool\n")


# ------------------------------------------------------------------ ethtool -c

LEGACY_ZEROS = {
    k: 0
    for k in (
        "stats_block_usecs",
        "sample_interval",
        "pkt_rate_low",
        "pkt_rate_high",
        "rx_usecs_low",
        "rx_frame_low",
        "tx_usecs_low",
        "tx_frame_low",
        "rx_usecs_high",
        "rx_frame_high",
        "tx_usecs_high",
        "tx_frame_high",
    )
}
NETLINK_NA = dict.fromkeys(LEGACY_ZEROS)


def coalesce(adaptive, rx, tx, irq, extra):
    """Expected ``ethtool -c`` dict: (adaptive rx, tx), (rx usecs, frames), ..."""
    return {
        "adaptive_rx": adaptive[0],
        "adaptive_tx": adaptive[1],
        "rx_usecs": rx[0],
        "rx_frames": rx[1],
        "rx_usecs_irq": irq[0],
        "rx_frames_irq": irq[1],
        "tx_usecs": tx[0],
        "tx_frames": tx[1],
        "tx_usecs_irq": irq[2],
        "tx_frames_irq": irq[3],
        **extra,
    }


CQE_NA = {"cqe_mode_rx": None, "cqe_mode_tx": None}
COALESCE_EXPECTED = {
    "e1000e": coalesce((False, False), (3, 0), (0, 0), (0, 0, 0, 0), LEGACY_ZEROS),
    "ixgbe": coalesce((False, False), (1, 0), (0, 0), (0, 0, 0, 256), LEGACY_ZEROS),
    "igb": coalesce(
        (None, None),
        (3, None),
        (3, None),
        (None, None, None, 128),
        {
            **NETLINK_NA,
            **CQE_NA,
            "tx_aggr_max_bytes": None,
            "tx_aggr_max_frames": None,
            "tx_aggr_time_usecs": None,  # ethtool prints this one without a colon
        },
    ),
    "mlx5_core": coalesce(
        (True, True),
        (8, 128),
        (8, 128),
        (None,) * 4,
        {**NETLINK_NA, "cqe_mode_rx": True, "cqe_mode_tx": False},
    ),
    "virtio_net": coalesce((None, None), (0, 1), (0, 1), (None,) * 4, {**NETLINK_NA, **CQE_NA}),
}


@pytest.mark.parametrize("drv", sorted(COALESCE_EXPECTED))
def test_coalesce_fixtures(drv):
    assert parse_ethtool_coalesce(eth(f"{drv}-c")) == COALESCE_EXPECTED[drv]


@pytest.mark.parametrize("name", ["veth-c", "veth-c-legacy"])
def test_coalesce_unsupported(name):
    out = parse_ethtool_coalesce(eth(name))
    assert out == dict.fromkeys(
        [
            "adaptive_rx",
            "adaptive_tx",
            "rx_usecs",
            "rx_frames",
            "rx_usecs_irq",
            "rx_frames_irq",
            "tx_usecs",
            "tx_frames",
            "tx_usecs_irq",
            "tx_frames_irq",
        ]
    )


def test_coalesce_odd_lines():
    out = parse_ethtool_coalesce(
        "Coalesce parameters for eth9:\n"
        "Adaptive RX: on TX: weird\n"  # single space, unknown word
        "rx-usecs: lots\n"
        "tx-usecs:\t\t-\n"
        "tx-aggr-time-usecs\t250\n"
        "new-knob-usecs: 7\n"
    )
    assert out["adaptive_rx"] is True
    assert out["adaptive_tx"] is None
    assert out["rx_usecs"] is None
    assert out["tx_usecs"] is None
    assert out["tx_aggr_time_usecs"] == 250
    assert out["new_knob_usecs"] == 7
    assert out["rx_frames"] is None  # missing


def test_coalesce_rejects_other_output():
    for text in (eth("e1000e-g"), eth("veth-i"), eth("lo-k"), "garbage\nmore garbage"):
        with pytest.raises(ValueError):
            parse_ethtool_coalesce(text)


# ------------------------------------------------------------------ ethtool -g

NEW_CURRENT = {"rx_buf_len": None, "cqe_size": None, "tx_push": "off", "tcp_data_split": None}


def rings(mx, cur, mini, extra_max=None, extra_cur=None):
    return {
        "max": {"rx": mx[0], "rx_mini": mini, "rx_jumbo": mini, "tx": mx[1], **(extra_max or {})},
        "current": {
            "rx": cur[0],
            "rx_mini": mini,
            "rx_jumbo": mini,
            "tx": cur[1],
            **(extra_cur or {}),
        },
    }


RINGS_EXPECTED = {
    "e1000e": rings((4096, 4096), (256, 256), 0),
    "ixgbe": rings((8192, 8192), (512, 512), None),
    "igb": rings(
        (4096, 4096),
        (256, 256),
        None,
        {"tx_push_buff_len": None},
        {**NEW_CURRENT, "rx_push": "off", "tx_push_buff_len": None},
    ),
    "mlx5_core": rings((8192, 8192), (1024, 1024), None, None, NEW_CURRENT),
    "virtio_net": rings((256, 256), (256, 256), None, None, NEW_CURRENT),
}


@pytest.mark.parametrize("drv", sorted(RINGS_EXPECTED))
def test_rings_fixtures(drv):
    assert parse_ethtool_rings(eth(f"{drv}-g")) == RINGS_EXPECTED[drv]


@pytest.mark.parametrize("name", ["veth-g", "veth-g-legacy"])
def test_rings_unsupported(name):
    assert parse_ethtool_rings(eth(name)) == rings((None, None), (None, None), None)


def test_rings_odd_values():
    out = parse_ethtool_rings(
        "Ring parameters for eth0:\nPre-set maximums:\nRX:\t\t\t4096\nTX:\n"
        "Current hardware settings:\nRX:\t\t\t1024\nTCP data split:\t\tunknown(7)\n"
        "TX Push:\t\ton\n"
    )
    assert out["max"] == {"rx": 4096, "rx_mini": None, "rx_jumbo": None, "tx": None}
    assert out["current"]["rx"] == 1024
    assert out["current"]["tx"] is None
    assert out["current"]["tcp_data_split"] == "unknown(7)"
    assert out["current"]["tx_push"] == "on"


def test_rings_rejects_other_output():
    for text in (eth("e1000e-c"), eth("veth-i"), "no sections here: at all"):
        with pytest.raises(ValueError):
            parse_ethtool_rings(text)


# ------------------------------------------------------------------ ethtool -k


def feat(on, fixed=False, requested=None, parent=None):
    return {"on": on, "fixed": fixed, "requested": requested, "parent": parent}


def test_features_lo_captured():
    out = parse_ethtool_features(eth("lo-k"))
    assert len(out) == 63
    assert out["rx-checksumming"] == feat(True, fixed=True)
    assert out["tx-checksumming"] == feat(True)
    assert out["tx-checksum-ipv4"] == feat(False, fixed=True, parent="tx-checksumming")
    assert out["tx-tcp6-segmentation"] == feat(True, parent="tcp-segmentation-offload")
    assert out["loopback"] == feat(True, fixed=True)
    assert out["large-receive-offload"] == feat(False, fixed=True)
    assert out["hsr-dup-offload"] == feat(False, fixed=True)


def test_features_veth_captured():
    out = parse_ethtool_features(eth("veth-k"))
    assert len(out) == 63
    assert out["generic-receive-offload"] == feat(False)
    assert out["rx-vlan-offload"] == feat(True)
    assert out["tx-udp_tnl-segmentation"] == feat(True)
    assert out["tx-scatter-gather-fraglist"] == feat(True, parent="scatter-gather")


@pytest.mark.parametrize(
    ("drv", "count", "name", "expected"),
    [
        ("e1000e", 33, "rx-vlan-filter", feat(True, fixed=True)),
        ("e1000e", 33, "tx-checksum-ip-generic", feat(True, parent="tx-checksumming")),
        ("ixgbe", 35, "large-receive-offload", feat(False, requested=True)),
        ("ixgbe", 35, "tx-checksum-fcoe-crc", feat(True, True, parent="tx-checksumming")),
        ("mlx5_core", 34, "rx-gro-hw", feat(False, fixed=True)),
        ("mlx5_core", 34, "ntuple-filters", feat(False)),
        ("virtio_net", 30, "rx-checksumming", feat(True, fixed=True)),
        (
            "virtio_net",
            30,
            "tx-tcp-ecn-segmentation",
            feat(True, parent="tcp-segmentation-offload"),
        ),
    ],
)
def test_features_fixtures(drv, count, name, expected):
    out = parse_ethtool_features(eth(f"{drv}-k"))
    assert len(out) == count
    assert out[name] == expected


def test_features_odd_lines():
    out = parse_ethtool_features(
        "Offload parameters for eth0:\n"  # old ethtool header
        "rx-checksumming: on\n"
        "tx-checksumming: off [requested on]\n"
        "\tsub-thing: on [requested off]\n"
        "weird-feature: maybe [whatever]\n"
        "scatter-gather: on [fixed]\n"
        "random text\n"
    )
    assert out == {
        "rx-checksumming": feat(True),
        "tx-checksumming": feat(False, requested=True),
        "sub-thing": feat(True, requested=False, parent="tx-checksumming"),
        "weird-feature": feat(None),
        "scatter-gather": feat(True, fixed=True),
    }


def test_features_unsupported_and_rejects():
    assert parse_ethtool_features("Cannot get device feature names: No such device\n") == {}
    assert parse_ethtool_features("") == {}
    for text in (eth("veth-i"), eth("e1000e-c"), "lorem ipsum"):
        with pytest.raises(ValueError):
            parse_ethtool_features(text)


# ------------------------------------------------------------------ ethtool -a

PAUSE_NONE = {"autonegotiate": None, "rx": None, "tx": None}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("e1000e-a", {"autonegotiate": True, "rx": True, "tx": True}),
        (
            "igb-a",
            {
                "autonegotiate": True,
                "rx": True,
                "tx": False,
                "rx_negotiated": True,
                "tx_negotiated": False,
            },
        ),
        ("ixgbe-a", {"autonegotiate": False, "rx": True, "tx": True}),
        ("mlx5_core-a", {"autonegotiate": False, "rx": True, "tx": True}),
        ("virtio_net-a", PAUSE_NONE),
        ("veth-a", PAUSE_NONE),
        ("veth-a-legacy", PAUSE_NONE),
    ],
)
def test_pause_fixtures(name, expected):
    assert parse_ethtool_pause(eth(name)) == expected


def test_pause_odd_and_garbage():
    assert parse_ethtool_pause("Cannot get device pause settings: Operation not supported") == (
        PAUSE_NONE
    )
    assert parse_ethtool_pause("") == PAUSE_NONE
    assert parse_ethtool_pause("Pause parameters for x:\nRX: yes-ish\nTX: on\n") == {
        "autonegotiate": None,
        "rx": None,
        "tx": True,
    }
    for text in (eth("lo-k"), eth("e1000e-c"), eth("veth-i"), "hello"):
        with pytest.raises(ValueError):
            parse_ethtool_pause(text)


# ------------------------------------------------------------------ iptables-save


def test_iptables_save_captured():
    assert parse_iptables_save((FW / "iptables-save.txt").read_text()) == {
        "raw": {"PREROUTING": 1, "OUTPUT": 0},
        "filter": {"INPUT": 5, "FORWARD": 0, "OUTPUT": 0, "LOGDROP": 2},
        "nat": {"PREROUTING": 0, "INPUT": 0, "OUTPUT": 0, "POSTROUTING": 1},
    }
    assert parse_iptables_save((FW / "ip6tables-save.txt").read_text()) == {
        "filter": {"INPUT": 1, "FORWARD": 0, "OUTPUT": 0}
    }


def big_iptables_save(n_chains: int = 20, per_chain: int = 15) -> str:
    """An iptables-save with n_chains user chains of per_chain rules, and jumps from INPUT."""
    lines = ["# Generated by iptables-save v1.8.9 (nf_tables)", "*filter"]
    lines += [":INPUT DROP [120:8000]", ":FORWARD DROP [0:0]", ":OUTPUT ACCEPT [99:1234]"]
    lines += [f":HOST-{i:02d} - [0:0]" for i in range(n_chains)]
    lines += [f"-A INPUT -s 10.1.{i}.0/24 -j HOST-{i:02d}" for i in range(n_chains)]
    for i in range(n_chains):
        for j in range(per_chain):
            lines.append(
                f'-A HOST-{i:02d} -p tcp -m tcp --dport {5000 + j} -m comment --comment "r {j}"'
                " -j ACCEPT"
            )
    lines += ["COMMIT", "# Completed", "*mangle", ":PREROUTING ACCEPT [0:0]", "COMMIT"]
    return "\n".join(lines) + "\n"


def test_iptables_save_hundreds_of_rules():
    out = parse_iptables_save(big_iptables_save())
    assert out["mangle"] == {"PREROUTING": 0}
    assert out["filter"]["INPUT"] == 20
    assert out["filter"]["FORWARD"] == 0
    assert all(out["filter"][f"HOST-{i:02d}"] == 15 for i in range(20))
    assert sum(out["filter"].values()) == 320
    assert len(out["filter"]) == 23


def test_iptables_odd_inputs():
    assert parse_iptables_save("") == {}
    # `iptables -S` style (no *table): -P/-N declare chains, rules go to "filter"
    assert parse_iptables_save("-P INPUT ACCEPT\n-N X\n-A X -j DROP\n-A X -j DROP\n") == {
        "filter": {"INPUT": 0, "X": 2}
    }
    # a rule for an undeclared chain and a stray line are tolerated
    text = "*filter\n:INPUT ACCEPT [0:0]\n-A GHOST -j ACCEPT\nsomething odd\nCOMMIT\n"
    assert parse_iptables_save(text) == {"filter": {"INPUT": 0, "GHOST": 1}}
    # a legacy warning-only output
    assert parse_iptables_save("# Warning: iptables-legacy tables present\n") == {}
    with pytest.raises(ValueError):
        parse_iptables_save("this is not\niptables output\n")


# ------------------------------------------------------------------ nft

NFT_EXPECTED = {
    "inet filter input": 5,
    "inet filter forward": 0,
    "inet filter output": 0,
    "ip nat postrouting": 1,
    "netdev ingress_guard guard": 1,
}


def test_nft_json_captured():
    text = (FW / "nft-ruleset.json").read_text()
    assert parse_nft_ruleset(text) == NFT_EXPECTED
    compact = json.dumps(json.loads(text))  # nft's own one-line form
    assert parse_nft_ruleset(compact) == NFT_EXPECTED


def test_nft_text_captured():
    assert parse_nft_ruleset((FW / "nft-ruleset.txt").read_text()) == NFT_EXPECTED


def test_nft_text_multiline_rule_and_odd_blocks():
    text = """table ip6 t {
\tflowtable ft {
\t\thook ingress priority filter
\t\tdevices = { lo }
\t}
\tchain "in put" {
\t\ttype filter hook input priority 0; policy accept;
\t\tcomment "chain comment"
\t\tip6 saddr { ::1,
\t\t\t     fe80::1 } drop
\t\tcounter packets 3 bytes 180
\t}
\tmap m {
\t\ttype ipv6_addr : verdict
\t}
}
table bare {
\tchain c {
\t\taccept
\t}
}
"""
    assert parse_nft_ruleset(text) == {"ip6 t in put": 2, "ip bare c": 1}


def test_nft_json_odd():
    doc = {
        "nftables": [
            {"metainfo": {"json_schema_version": 1}},
            {"chain": {"family": "ip", "table": "t", "name": "c", "handle": 1}},
            {"rule": {"family": "ip", "table": "t", "chain": "c", "expr": []}},
            {"rule": {"family": "ip", "table": "t", "chain": "d"}},  # chain not declared
            {"rule": {"family": "ip", "table": "t"}},  # no chain: skipped
            {"chain": "not a dict"},
            "junk",
        ]
    }
    assert parse_nft_ruleset(json.dumps(doc)) == {"ip t c": 1, "ip t d": 1}
    assert parse_nft_ruleset('{"nftables": [{"metainfo": {}}]}') == {}
    assert parse_nft_ruleset("") == {}
    for text in ('{"foo": 1}', "[1, 2]", "{not json", "hello world\n"):
        with pytest.raises(ValueError):
            parse_nft_ruleset(text)


def test_nft_error_message_is_empty():
    assert parse_nft_ruleset("Error: Could not process rule: Operation not permitted\n") == {}


# ------------------------------------------------------------------ conntrack


def test_conntrack_count():
    assert parse_conntrack_count((FW / "conntrack_count.txt").read_text()) == 0
    assert parse_conntrack_count("12345\n") == 12345
    assert parse_conntrack_count("  7 ") == 7
    assert parse_conntrack_count("") is None
    assert parse_conntrack_count("-1") is None
    assert (
        parse_conntrack_count(
            "cat: /proc/sys/net/netfilter/nf_conntrack_count: No such file or directory"
        )
        is None
    )
    with pytest.raises(ValueError):
        parse_conntrack_count("driver: e1000e")


# ------------------------------------------------------------------ robustness


@pytest.mark.parametrize("parser", ALL_PARSERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "   ", None, b"", 42, "\x00\xff\n", "Cannot get x: Operation not supported"],
    ids=["empty", "newlines", "spaces", "none", "bytes", "int", "binary", "enotsup"],
)
def test_parsers_never_raise_on_empty_or_unsupported(parser, text):
    try:
        parser(text)
    except ValueError:
        # only binary junk may be judged "clearly not that output"
        assert text == "\x00\xff\n"


def test_ip_link_gives_the_drivers_mtu_limits_and_nothing_it_cannot_trust():
    from beoperf.audit.parsers import parse_ip_link

    text = ('[{"ifindex":2,"ifname":"eth0","mtu":1400,"min_mtu":68,"max_mtu":65535,'
            '"linkinfo":{"info_kind":"veth"}}]')
    assert parse_ip_link(text) == {"mtu": 1400, "min_mtu": 68, "max_mtu": 65535}
    assert parse_ip_link('[{"mtu":1500,"min_mtu":0,"max_mtu":0}]')["max_mtu"] == 0  # none set
    assert parse_ip_link('[{"mtu":1500}]') == {"mtu": 1500}  # an old iproute2
    assert parse_ip_link('[{"mtu":true,"max_mtu":"9000","min_mtu":-1}]') == {}
    assert parse_ip_link('[{"max_mtu":99999999999}]') == {}
    assert parse_ip_link("Device \"eth9\" does not exist.") == {}
    assert parse_ip_link("{}") == {} and parse_ip_link("[]") == {}
