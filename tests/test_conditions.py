"""The conditions around a run (issue 28 item 3): TCP retransmissions, NIC and qdisc drops,
the load and the busiest other processes, and the "not dedicated" warning.

The parsers are tried on crafted kernel texts (every one named crafted: malformed input is
left out, never a traceback); the rest on real processes, real sockets and real qdiscs in
network namespaces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from beoperf.report import conditions
from beoperf.sysinfo import around, counters, load
from helpers import checked, cli

# crafted, in the layout of Linux 6.x's /proc/net/snmp (Tcp) and /proc/net/netstat
SNMP = ("Ip: Forwarding DefaultTTL\nIp: 2 64\n"
        "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens RetransSegs InErrs\n"
        "Tcp: 1 200 120000 -1 350299 21701 0\n")
NETSTAT = ("TcpExt: SyncookiesSent TCPLostRetransmit TCPTimeouts TCPFastRetrans\n"
           "TcpExt: 0 17 5 3\n")
# crafted, as `tc -s -j qdisc show` prints it
TC = json.dumps([
    {"kind": "noqueue", "handle": "0:", "dev": "lo", "root": True, "drops": 0},
    {"kind": "tbf", "handle": "8001:", "dev": "veth0", "root": True, "drops": 12,
     "overlimits": 40},
    {"kind": "pfifo_fast", "handle": "0:", "dev": "eth3", "parent": ":1", "drops": 1},
    {"kind": "pfifo_fast", "handle": "0:", "dev": "eth3", "parent": ":2", "drops": 2},
    {"kind": "netem", "handle": "1:", "dev": "x" * 200, "drops": 3},  # name too long
    {"kind": "fq", "handle": "2:", "dev": "eth1", "drops": True},  # not a count
    {"kind": "fq", "handle": "3:", "dev": "eth2", "drops": -4},
    "not an object",
])
SPIN = ("import ctypes, sys\n"
        "ctypes.CDLL(None).prctl(15, b'spinhog28', 0, 0, 0)\n"  # PR_SET_NAME: its comm
        "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
        "while True:\n    pass\n")
SECRET = "--token=hunter2-SECRET-28"


def test_proc_net_counters_are_read_by_table_and_name():
    found = counters.parse_proc_net(SNMP + NETSTAT)
    assert found[("Tcp", "RetransSegs")] == 21701
    assert found[("TcpExt", "TCPLostRetransmit")] == 17
    assert ("Tcp", "MaxConn") not in found  # -1 is no counter
    assert ("Ip", "Forwarding") in found and ("Tcp", "RtoAlgorithm") in found


@pytest.mark.parametrize("text", [
    "", "Tcp:\n", "Tcp: RetransSegs\nTcp: many\n", "Tcp: A B\nTcp: 1\n",
    "Tcp: A B\nUdp: 1 2\n", "\x00\x01 garbage\n" * 5000, "Tcp: A\nTcp: 1" + "9" * 40 + "\n",
])
def test_malformed_proc_net_text_is_left_out(text):
    """crafted: lines that do not pair up, wrong counts, huge numbers, binary junk."""
    found = counters.parse_proc_net(text)
    assert all(isinstance(v, int) and 0 <= v < 10 ** 20 for v in found.values())
    assert ("Tcp", "RetransSegs") not in found


def test_host_counters_from_a_crafted_proc_root(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "snmp").write_text(SNMP)
    (tmp_path / "net" / "netstat").write_text(NETSTAT)
    assert counters.host_tcp(str(tmp_path)) == {
        "RetransSegs": 21701, "TCPLostRetransmit": 17, "TCPTimeouts": 5, "TCPFastRetrans": 3}
    (tmp_path / "net" / "netstat").write_text("x" * (counters.MAX_PROC_NET + 1))
    assert counters.host_tcp(str(tmp_path)) == {"RetransSegs": 21701}  # too big: left out
    assert counters.host_tcp(str(tmp_path / "absent")) == {}


def test_interface_counters_from_a_crafted_sysfs_root(tmp_path):
    """crafted: one good interface, one with junk and an oversized file, a FIFO."""
    good = tmp_path / "class" / "net" / "eth0" / "statistics"
    bad = tmp_path / "class" / "net" / "eth1" / "statistics"
    good.mkdir(parents=True)
    bad.mkdir(parents=True)
    for i, name in enumerate(counters.NIC_COUNTERS):
        (good / name).write_text(f"{i * 10}\n")
    (bad / "rx_dropped").write_text("lots\n")
    (bad / "tx_dropped").write_text("1" * (counters.MAX_SYSFS + 1))
    os.mkfifo(bad / "rx_errors")  # never opened: a reader would block
    (bad / "tx_errors").write_text("7\n")
    found = counters.interface_counters(str(tmp_path))
    assert found["eth0"] == {"rx_dropped": 0, "tx_dropped": 10, "rx_errors": 20, "tx_errors": 30}
    assert found["eth1"] == {"tx_errors": 7}


def test_qdisc_drops_keep_well_formed_entries_only():
    assert counters.parse_qdiscs(TC) == {"lo noqueue 0:": 0, "veth0 tbf 8001:": 12,
                                         "eth3 pfifo_fast 0: parent :1": 1,
                                         "eth3 pfifo_fast 0: parent :2": 2}
    for junk in ("", "{", "null", '{"kind": "tbf"}', "[" * 100 + "]" * 100, "[1e999]"):
        assert counters.parse_qdiscs(junk) == {}


def test_deltas_ignore_counters_that_went_back_or_appeared():
    before = counters.Snapshot({"RetransSegs": 10}, {"eth0": {"rx_dropped": 5}},
                               {"eth0 tbf 1:": 7, "gone x 2:": 1})
    after = counters.Snapshot({"RetransSegs": 14}, {"eth0": {"rx_dropped": 2},
                                                    "new0": {"rx_dropped": 9}},
                              {"eth0 tbf 1:": 10})
    found = counters.delta(before, after, sockets=2)
    assert found["tcp"] == {"RetransSegs": 4}
    assert found["interfaces"] == {}  # reset eth0, and a new interface: no difference
    assert found["qdisc_drops"] == {"eth0 tbf 1:": 3}
    assert found["watched"] == {"interfaces": ["eth0"], "qdiscs": 1}
    assert counters.nonzero(found) == ["2 TCP retransmission(s) on the data socket",
                                       "qdisc eth0 tbf 1: dropped 3", "host TCP RetransSegs +4"]
    (line,) = counters.notes(found)
    assert line.startswith("the network lost packets during the run: 2 TCP")
    assert line.endswith("(also on the host: host TCP RetransSegs +4)")


def test_drops_on_an_interface_the_run_did_not_use_are_the_hosts():
    """The run used lo: eth0's drops and its qdisc's are another's traffic (a note);
    lo's are the run's (a warning)."""
    grown = {"tcp": {}, "socket_retransmissions": 0, "used_interfaces": ["lo"],
             "interfaces": {"eth0": {"rx_dropped": 5}}, "qdisc_drops": {"eth0 fq 0:": 2}}
    (line,) = counters.notes(grown)
    assert line.startswith("note: counters of the host grew") and "eth0 rx_dropped +5" in line
    grown["interfaces"]["lo"] = {"tx_errors": 1}
    assert counters.notes(grown)[0].startswith("the network lost packets during the run: "
                                               "lo tx_errors +1")
    unknown = dict(grown, used_interfaces=None, interfaces={"eth0": {"rx_dropped": 5}})
    assert counters.notes(unknown)[0].startswith("the network lost packets")


def test_host_counters_alone_are_a_note_not_a_warning():
    """The host's counters count every connection: on their own they are a note."""
    grown = {"tcp": {"RetransSegs": 9}, "socket_retransmissions": 0, "interfaces": {},
             "qdisc_drops": {}}
    assert counters.notes(grown)[0].startswith("note: counters of the host grew")
    assert "other connections" in counters.notes(grown)[0]
    unknown = dict(grown, socket_retransmissions=None)
    assert "cannot be told apart" in counters.notes(unknown)[0]
    assert counters.notes(dict(grown, tcp={"RetransSegs": 0})) == []


@pytest.mark.parametrize("text, expected", [
    ("0.52 0.58 0.59 2/219 12345\n", (0.52, 0.58, 0.59)),
    ("", None), ("1.0 2.0\n", None), ("nan 1 1 1/1 1\n", None), ("inf 1 1\n", None),
    ("-1 0 0\n", None), ("1e9 0 0\n", None), ("a b c\n", None),
])
def test_loadavg_parser(text, expected):
    """crafted /proc/loadavg texts."""
    assert load.parse_loadavg(text) == expected


def test_stat_parser_counts_fields_from_the_last_parenthesis():
    """crafted: a name with spaces and parentheses (any user may name a process so)."""
    fields = " ".join(["R", "42"] + ["0"] * 9 + ["250", "50"] + ["0"] * 5)
    assert load.parse_stat(f"1234 (a) (b c) {fields}\n") == load.Proc("R", 42, 300)
    for junk in ("", "1234 (x", "1234 (x) R 42", "1234 (x) RR 1 " + "0 " * 14,
                 "1234 (x) R -1 " + "0 " * 14, "1234 (x) R 1 " + "z " * 14):
        assert load.parse_stat(junk) is None


def test_process_names_are_made_printable():
    assert load.parse_comm("\x1b[31mred\x07\n") == "?[31mred?"
    assert load.parse_comm("\n") is None


def test_own_tree_is_the_process_and_its_descendants():
    procs = {1: load.Proc("S", 0, 0), 10: load.Proc("S", 1, 0), 11: load.Proc("R", 10, 0),
             12: load.Proc("R", 11, 0), 20: load.Proc("R", 1, 0)}
    assert load.own_tree(procs, 10) == {10, 11, 12}


def test_judge_warns_on_load_beyond_beoperfs_own_and_on_busy_processes():
    quiet = {"load": [1.2, 1, 1], "cpus": 2, "busiest": [{"name": "a", "cpu_percent": 9.0}]}
    assert load.judge([("the start", quiet, 1.0)]) == []  # 0.2 beyond its own 1.0
    loaded = dict(quiet, load=[2.3, 1, 1])
    assert "1.30 at the start" in load.judge([("the start", loaded, 1.0)])[0]
    busy = dict(quiet, busiest=[{"name": "hog", "cpu_percent": 10.5}])
    (line,) = load.judge([("the start", quiet, 1.0), ("the end", busy, 1.0)])
    assert "hog (10%) at the end" in line and "load average" not in line


def _spinner() -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SPIN, SECRET], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def _stop(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_a_busy_child_of_beoperf_is_its_own_load_not_another_process():
    """The same spinning process is beoperf's own when it descends from the process that
    measures, and another process when it does not."""
    hog = _spinner()
    try:
        time.sleep(0.2)
        own = load.moment(0.3)
        other = load.moment(0.3, me=2 ** 22 + 1)  # a PID with no descendants: all others
    finally:
        _stop(hog)
    assert "spinhog28" not in [p["name"] for p in own.record["busiest"]]
    assert "spinhog28" in [p["name"] for p in other.record["busiest"]]


def test_a_busy_process_makes_the_run_not_dedicated_and_its_arguments_never_show(tmp_path):
    """A CPU-spinning process beside a loopback run: the document and stderr name it, and
    nothing of its command line (a secret-looking argument) appears anywhere."""
    hog = _spinner()
    try:
        res = subprocess.run([sys.executable, "-m", "beoperf", "pingpong", "--sizes", "1K",
                              "--time-budget", "1", "--history", "off", "--json"],
                             capture_output=True, text=True, timeout=120)
    finally:
        _stop(hog)
    assert res.returncode == 0, res.stderr
    doc = checked(json.loads(res.stdout))
    block = doc["meta"]["conditions"]
    assert block["dedicated"] is False
    named = [w for w in doc["body"]["warnings"] if "not dedicated" in w]
    assert named and "spinhog28" in named[0]
    assert "beoperf: WARN: the machine was not dedicated" in res.stderr
    assert "spinhog28" in res.stderr
    for text in (res.stdout, res.stderr):
        assert "hunter2" not in text and "SECRET" not in text and "prctl" not in text


def test_the_report_reads_crafted_conditions_without_a_traceback():
    """crafted blocks: wrong types everywhere, escape sequences in names."""
    for block in (None, 3, [], {"start": 1, "end": "x", "network": []},
                  {"start": {"load": ["a"], "busiest": [1, {"name": 3}]},
                   "end": {"load": [1.5], "cpus": 2,
                           "busiest": [{"name": "\x1b]0;pwn\x07", "cpu_percent": 50}]},
                   "network": {"tcp": {"\x1b[2J": 4, "x": True}, "interfaces": {"e": 3},
                               "qdisc_drops": {"q": "9"}, "watched": 7},
                   "warnings": ["w", 3]}):
        lines = conditions.text_lines({"conditions": block})
        assert all("\x1b" not in line and "\x07" not in line for line in lines)
    assert conditions.warnings_of({"conditions": {"warnings": ["w", 3]}}) == ["w"]


def test_the_watch_around_a_real_socket_records_its_retransmissions():
    """A loopback connection: the data socket's count is the kernel's (TCP_INFO) and the
    block holds the load at both ends."""
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    try:
        watch = around.Watch(window=0.05).start()
        client.sendall(b"x" * 100_000)
        got = 0
        while got < 100_000:
            got += len(peer.recv(65536))
        block, _ = watch.stop(counters.socket_retransmissions(client))
    finally:
        for s in (client, peer, server):
            s.close()
    assert isinstance(block["network"]["socket_retransmissions"], int)
    assert counters.socket_retransmissions(None) is None
    assert block["start"]["load"] is not None and block["end"]["cpus"] >= 1
    assert "lo" in block["network"]["watched"]["interfaces"]


def _pingpong(host, *args: str) -> tuple[dict, str]:
    res = host.run([sys.executable, "-m", "beoperf", "pingpong", *args, "--history", "off",
                    "--json"], check=False, timeout=180)
    assert res.returncode == 0, res.stderr
    return checked(json.loads(res.stdout)), res.stderr


def test_a_lossy_qdisc_shows_its_drops_and_the_sockets_retransmissions(netns_pair):
    """A link whose qdisc drops (a tbf shaper with a tiny queue; this kernel has no
    netem): the run's document records the qdisc's drops and its data socket's
    retransmissions, and its summary says so; the NIC itself dropped nothing (a shaper
    drops in its qdisc)."""
    from test_netns import PORT, start_server

    qdisc = ["tbf", "rate", "20mbit", "burst", "4kb", "limit", "6kb"]
    server, client = netns_pair
    start_server(server)
    client.run(["tc", "qdisc", "replace", "dev", client.ifname, "root", *qdisc])
    doc, stderr = _pingpong(client, server.addr4, "--port", str(PORT), "--mode", "stream",
                            "--sizes", "64K", "--time-budget", "3")
    network = doc["meta"]["conditions"]["network"]
    key = next(k for k in network["qdisc_drops"] if k.startswith(f"{client.ifname} {qdisc[0]}"))
    assert network["qdisc_drops"][key] > 0
    assert network["socket_retransmissions"] > 0
    assert network["tcp"]["RetransSegs"] >= network["socket_retransmissions"]
    assert client.ifname not in network["interfaces"]
    assert network["used_interfaces"] == [client.ifname]
    lost = [w for w in doc["body"]["warnings"] if w.startswith("the network lost packets")]
    assert lost and f"qdisc {key} dropped" in lost[0]
    assert "TCP retransmission(s) on the data socket" in stderr
    assert f"network    {network['socket_retransmissions']} TCP retransmission(s)" in stderr


def test_a_loopback_run_in_a_quiet_namespace_counts_its_own_socket(netns_pair):
    """Loopback in a namespace of its own: every connection counted by the namespace's TCP
    counters is the run's, so the data socket's retransmissions are at most the host's,
    nothing dropped, and the summary's network line is there."""
    _, host = netns_pair
    doc, stderr = _pingpong(host, "--sizes", "1K,64K", "--time-budget", "2")
    network = doc["meta"]["conditions"]["network"]
    assert isinstance(network["socket_retransmissions"], int)
    assert network["socket_retransmissions"] <= network["tcp"]["RetransSegs"]
    assert network["qdisc_drops"] == {} and network["interfaces"] == {}
    assert "lo" in network["watched"]["interfaces"] and network["used_interfaces"] == ["lo"]
    assert "\n  network    " in stderr and "\n  machine    load " in stderr


def test_a_node_run_records_the_machine_at_start_and_end():
    """Every kind a run writes keeps the block: here the node suite's (load only)."""
    res = cli("node", "stream", "--array-size", "1M", "--threads", "1", "--repeat", "2",
              "--no-progress", "--json")
    assert res.status == 0, res.stderr
    doc = checked(json.loads(res.stdout))
    block = doc["meta"]["conditions"]
    assert set(block) == {"start", "end", "dedicated", "warnings"}  # no network counters
    assert block["start"]["load"] and block["end"]["cpus"] >= 1
    assert block["dedicated"] == (block["warnings"] == [])


def test_the_answer_of_any_kind_shows_the_conditions_warnings():
    """A kind with no warnings of its own (node) shows the stored conditions warning."""
    from beoperf.model.document import Document
    from beoperf.report.answer import Level, lines_of

    res = cli("node", "stream", "--array-size", "1M", "--threads", "1", "--repeat", "2",
              "--no-progress", "--json")
    doc = json.loads(res.stdout)
    warning = "the machine was not dedicated to the run: crafted"
    doc["meta"]["conditions"]["warnings"] = [warning, 7]
    lines = lines_of(Document(doc["kind"], doc["body"], doc["meta"]))
    assert any(line.level == Level.WARN and line.text == warning for line in lines)


def test_losses_on_the_way_back_are_the_peers_retransmissions(netns_pair):
    """The server's link drops (a tbf with a tiny queue on its side): the server's data
    socket retransmits, which the client cannot see; the server says so in its last
    frame and the document keeps it as the peer's."""
    from test_netns import PORT, start_server

    server, client = netns_pair
    start_server(server)
    server.run(["tc", "qdisc", "replace", "dev", server.ifname, "root", "tbf", "rate",
                "20mbit", "burst", "4kb", "limit", "6kb"])
    doc, stderr = _pingpong(client, server.addr4, "--port", str(PORT), "--sizes", "64K",
                            "--time-budget", "3")
    network = doc["meta"]["conditions"]["network"]
    assert network["peer_socket_retransmissions"] > 0
    assert network["qdisc_drops"] == {}  # the drops were in the server's namespace
    assert "TCP retransmission(s) on the peer's data socket" in stderr
