"""The node suite with real parts: I/O on an sshfs mount over a 100 Mbit/s veth link
(network-bound) beside a local directory (not), and a fleet of namespace hosts in which
the one host whose link to the file server is 10 times slower is named the outlier.

Everything runs inside namespaces the tests create: sshd is started by the test on the
namespace address with its own configuration and keys in the test's directory (in a
private /run, so nothing outside is written) and stopped by PID.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

import netns
from beoperf.cli import main
from conftest import require_tools
from helpers import checked

pytestmark = pytest.mark.netns

BEOPERF = f"{sys.executable} -m beoperf"
LINK_MBPS = 100
LINK_MB_S = LINK_MBPS / 8  # 12.5 MB/s: no file system over this link can beat it
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
SSHD_CONFIG = """\
ListenAddress {addr}
Port 22
HostKey {tmp}/hostkey
PidFile none
AuthorizedKeysFile {tmp}/authorized_keys
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
Subsystem sftp internal-sftp
LogLevel ERROR
"""


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, timeout=30)


def wait_port(host, addr: str, port: int, timeout: float = 20) -> None:
    probe = (f"import socket,sys; socket.create_connection(({addr!r}, {port}), 2).close()")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if host.run([sys.executable, "-c", probe], check=False).returncode == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {addr}:{port}")


def start_sshd(server, tmp: Path) -> None:
    """sshd on the server's namespace address; its privilege-separation directory in a
    private /run of its own mount namespace (ip netns exec gives it one)."""
    keygen(tmp / "hostkey")
    keygen(tmp / "userkey")
    shutil.copy(tmp / "userkey.pub", tmp / "authorized_keys")
    config = tmp / "sshd_config"
    config.write_text(SSHD_CONFIG.format(addr=server.addr4, tmp=tmp))
    script = f"mount -t tmpfs tmpfs /run && mkdir -m 0755 /run/sshd && exec {SSHD} -D -e " \
             f"-f {config}"
    server.popen(["sh", "-c", script], stderr=subprocess.DEVNULL)


def test_io_over_sshfs_is_network_bound(netns_hosts, tmp_path):
    require_tools("sshfs", "ssh-keygen", "fusermount3")
    if not os.access(SSHD, os.X_OK):
        pytest.skip("needs sshd (apt-get install openssh-server)")
    server, client = netns_hosts(2)
    for host in (server, client):
        host.set_rate(f"{LINK_MBPS}mbit")
    start_sshd(server, tmp_path)
    wait_port(client, server.addr4, 22)
    export, mnt, local = tmp_path / "export", tmp_path / "mnt", tmp_path / "local"
    for d in (export, mnt, local):
        d.mkdir()
    out = tmp_path / "node.json"
    ssh_options = (f"IdentityFile={tmp_path}/userkey,StrictHostKeyChecking=no,"
                   "UserKnownHostsFile=/dev/null,BatchMode=yes")
    script = (f"set -e; sshfs -o {ssh_options} root@{server.addr4}:{export} {mnt}; "
              f"trap 'fusermount3 -u {mnt}' EXIT; "
              f"{BEOPERF} node io --dir {mnt} --dir {local} --block 64K --file-size 4M "
              f"--repeat 2 --no-progress -o {out} > /dev/null")
    client.run(["sh", "-c", script], timeout=300)
    doc = checked(json.loads(out.read_text()))
    body = doc["body"]
    assert body["status"] == "complete"
    dirs = {e["dir"]: e for e in body["parts"]["io"]["dirs"]}
    assert dirs[str(mnt)]["mount"]["fstype"] == "fuse.sshfs"
    assert set(dirs[str(mnt)]["method"].values()) <= {"O_DIRECT", "fsync + POSIX_FADV_DONTNEED"}
    rates = {(m["params"]["dir"], m["name"]): m["mean"] for m in body["metrics"]}
    for (d, name), mb_s in rates.items():
        if d == str(mnt):  # over the link: at most its goodput (10% for the shaper's bucket)
            assert 0 < mb_s <= LINK_MB_S * 1.1, (name, mb_s)
    for name in ("sequential write", "sequential read"):
        assert rates[(str(local), name)] > 2 * LINK_MB_S, (name, rates[(str(local), name)])
    assert not list(export.iterdir()) and not list(local.iterdir())  # files removed


# ------------------------------------------------------------------ fleet

ON_NODE = """#!/bin/sh
# on-node HOST COMMAND...: in HOST's namespace (and a mount namespace of its own), mount
# the server's export on {mnt} with sshfs, run COMMAND, unmount.
h=$1; shift
exec ip netns exec "$h" sh -c 'sshfs -o {options} root@{server}:{export} {mnt} &&
  trap "fusermount3 -u {mnt}" EXIT && "$@"' on-node "$@"
"""


def shape(ns: str, dev: str, rate: str) -> None:
    tbf = ["tbf", "rate", rate, "burst", str(netns.tbf_burst(rate)), "latency", "50ms"]
    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root",
                    *tbf], check=True, timeout=30)


def test_fleet_names_the_node_with_the_slow_file_system(tmp_path, capsys):
    """Five nodes write and read their --dir over sshfs from one server, each through a
    100 Mbit/s link both ways; one node's link is 10 Mbit/s both ways (its switch port
    and its own interface).  Network-bound figures do not move with the CPU load other
    tests put on the machine, so exactly that node must be named, in every pattern."""
    require_tools("sshfs", "ssh-keygen", "fusermount3")
    if not os.access(SSHD, os.X_OK):
        pytest.skip("needs sshd (apt-get install openssh-server)")
    ok, reason = netns.can_use_netns()
    if not ok:
        pytest.skip(f"needs network namespaces: {reason}")
    with netns.VethPair(6) as topo:
        server, nodes = topo.hosts[0], topo.hosts[1:]
        slow = nodes[2]
        for i, host in enumerate(topo.hosts):
            rate = "10mbit" if host is slow else f"{LINK_MBPS}mbit"
            shape(host.name, host.ifname, rate)
            shape(topo.switch, f"p{i}", rate)
        start_sshd(server, tmp_path)
        export, mnt = tmp_path / "export", tmp_path / "mnt"
        export.mkdir()
        mnt.mkdir()
        wait_port(nodes[0], server.addr4, 22)
        options = (f"IdentityFile={tmp_path}/userkey,StrictHostKeyChecking=no,"
                   "UserKnownHostsFile=/dev/null,BatchMode=yes")
        wrapper = tmp_path / "on-node"
        wrapper.write_text(ON_NODE.format(options=options, server=server.addr4, export=export,
                                          mnt=mnt))
        names = str(NodeSet.fromlist([h.name for h in nodes]))
        status = main(["node", "-w", names, "io", "--dir", str(mnt), "--file-size", "512K",
                       "--block", "64K", "--repeat", "3", "--exec-template",
                       f"sh {wrapper} %h", "--remote-command", BEOPERF, "--fanout", "1",
                       "--timeout", "240", "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    body = checked(json.loads(out))["body"]
    assert NodeSet(body["answered"]) == NodeSet(names)
    assert len(body["metrics"]) == 6  # the six patterns
    for m in body["metrics"]:
        assert m["outliers"] == [slow.name], (m["id"], m["z"])
        assert m["z"][slow.name] < -body["method"]["threshold"]
    assert list(body["outliers"]) == [slow.name]
    assert not list(export.iterdir())  # every node removed its file
