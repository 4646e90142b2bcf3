"""The node suite with real parts: I/O on an sshfs mount over a 100 Mbit/s veth link
(network-bound) beside a local directory (not), and a fleet of namespace hosts in which
the one host whose processes share one CPU with a busy loop (at nice 5: about a quarter
of that CPU) is named the outlier.

Everything runs inside namespaces the tests create: sshd is started by the test on the
namespace address with its own configuration and keys in the test's directory (in a
private /run, so nothing outside is written) and stopped by PID; the busy loop is started
by the test's wrapper and stopped by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

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


SLOW_WRAPPER = """#!/bin/sh
# on-node HOST COMMAND...: run COMMAND in HOST's namespace; HOST {slow} shares CPU 0 with
# a busy loop this script starts (its PID in {pidfile}) and stops when COMMAND ends.
h=$1; shift
if [ "$h" = {slow} ]; then
  taskset -c 0 sh -c 'while :; do :; done' &
  hog=$!
  echo $hog > {pidfile}
  trap 'kill $hog' EXIT
  taskset -c 0 nice -n 5 ip netns exec "$h" "$@"
  exit $?
fi
exec ip netns exec "$h" "$@"
"""


def kill_pid_in(pidfile: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pidfile.read_text()), 9)


def test_fleet_names_the_slowed_node(netns_hosts, tmp_path, capsys):
    hosts = netns_hosts(5)
    slow = hosts[3].name
    nodes = str(NodeSet.fromlist([h.name for h in hosts]))
    require_tools("taskset", "nice")
    wrapper, pidfile = tmp_path / "on-node", tmp_path / "hog.pid"
    wrapper.write_text(SLOW_WRAPPER.format(slow=slow, pidfile=pidfile))
    try:
        status = main(["node", "-w", nodes, "kernels", "--lengths", "1K,16K", "--repeat", "3",
                       "--kernel-budget", "0.1", "--exec-template", f"sh {wrapper} %h",
                       "--remote-command", BEOPERF, "--fanout", "1", "--timeout", "240",
                       "--json"])
    finally:
        kill_pid_in(pidfile)  # the wrapper stops it; this is for a wrapper killed early
    assert status == 0, capsys.readouterr().err
    doc = checked(json.loads(capsys.readouterr().out))
    body = doc["body"]
    assert NodeSet(body["answered"]) == NodeSet(nodes)
    assert len(body["metrics"]) == 8  # 4 kernels x 2 lengths
    threshold = body["method"]["threshold"]
    for m in body["metrics"]:
        low = [n for n, z in m["z"].items() if z < -threshold]
        assert low == [slow], (m["id"], m["z"])
    assert slow in body["outliers"]
    text = main(["node", "-w", nodes, "--exec-template", "x %h", "--fanout", "0"])
    assert text == 2  # a bad fan-out is refused before anything runs
