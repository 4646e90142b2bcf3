"""T3b, end to end through `beoperf study`: a level that cuts the link while the
controller reaches the hosts over ssh across the lab's network (from the lab's
controller namespace, with the ssh agent line `beoperf lab up` prints as
``--ssh-command``).  The cut host's agent puts its ruleset back by itself when its lease
lapses, without the controller; the set's answer, held by the cut, arrives after that:
the study stops there as partial (a host lost, exit 6) without measuring the level,
writes its document naming how each host ended, and leaves no agent behind.

Nothing here rests on the CPU's speed: the bounds come from the lease (the agent
restores at most T after the last renewal it took, and that renewal came before the
cut), as in test_study_lab.py's kill -9 test."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from beoperf import model
from beoperf.analysis import study as analysis
from beoperf.launch import remote
from beoperf.model.study import Study
from beoperf.suites import study_hosts
from helpers import child_env
from study_helpers import (
    CUT,
    PORT,
    SACK,
    SITE_RULES,
    agents_in,
    nft_ruleset,
    no_agent_left,
    sack,
    start_serve,
)

LEASE = 10.0  # renewed every T/3 over ssh, each a Python start there: 2 s was tight
REPEATS = 4  # study_spec.MIN_REPEATS: the study stops at the cut, long before the last

def seed_changing_the_other_host_first() -> int:
    """A seed whose order measures the other host's level (c2) before the cut (c1), and
    the cut soon: the other host is then changed, and put back, before the cut."""
    def cut_at(seed: int) -> int:
        order = analysis.schedule(["c0", "c1", "c2"], REPEATS, seed)
        return order.index("c1") if order.index("c2") < order.index("c1") else len(order)

    return min(range(1, 200), key=cut_at)


class CutWatch(threading.Thread):
    """When the cut table appeared in ``host`` and when it was gone again (monotonic),
    polled every ``step`` seconds while the study runs."""

    def __init__(self, host, step: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.host, self.step = host, step
        self.cut_at: float | None = None
        self.back_at: float | None = None
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set() and self.back_at is None:
            tables = self.host.run(["nft", "list", "tables"], check=False).stdout
            now = time.monotonic()
            if "beoperf_cut" in tables and self.cut_at is None:
                self.cut_at = now
            elif "beoperf_cut" not in tables and self.cut_at is not None:
                self.back_at = now
            time.sleep(self.step)


@pytest.mark.tools("tc", "bridge", "ssh", "ssh-keygen", "sshd", "nft")
def test_t3b_a_level_that_cuts_the_link_is_undone_by_the_agent_and_the_study_says_so(
        lab, tmp_path):
    hosts = lab(2)  # an sshd in each host, the controller namespace -ctl
    cut, other = hosts.hosts  # cut: the server of the pair, its firewall the level
    start_serve(cut)
    cut.run(["nft", "-f", "-"], input=SITE_RULES)
    before = {h.name: nft_ruleset(h) for h in hosts}
    sack_before = sack(other)
    rules = tmp_path / "cut.nft"
    rules.write_text(CUT)
    rules.chmod(0o600)
    seed = seed_changing_the_other_host_first()
    path = tmp_path / "cut.toml"
    path.write_text(f"""
[[factor]]
name = "firewall"
levels = ["file:{rules}"]
hosts = ["{cut.addr4}"]

[[factor]]
name = "sysctl"
levels = ["{SACK}=0"]
hosts = ["{other.addr4}"]

[[measure]]
name = "pingpong"

[design]
repeats = {REPEATS}
seed = {seed}
""")
    path.chmod(0o600)
    out = tmp_path / "doc.json"
    src = Path(study_hosts.__file__).resolve().parents[2]  # this tree, on every host
    argv = [sys.executable, "-m", "beoperf", "study", "run", str(path),
            "-w", f"{cut.addr4},{other.addr4}", "--ssh-command", hosts.lab.ssh_agent,
            "--remote-command", f"env PYTHONPATH={src} {sys.executable} -m beoperf",
            "--port", str(PORT), "--mode", "pingpong", "--block-time", "0.5",
            "--lease", f"{LEASE:g}", "--apply", "-o", str(out)]
    watch = CutWatch(cut)
    watch.start()
    try:
        done = subprocess.run(hosts.ctl.argv(argv), capture_output=True, text=True,
                              timeout=120, env=child_env(), check=False)
        ended = time.monotonic()
    finally:
        watch.done.set()
        watch.join()
    assert done.returncode == 6, done.stderr[-3000:]  # a host lost: partial
    # the agent restored the cut host by itself: not before its lease could lapse (the
    # last renewal it took came at most a period and a renewal's timeout, 2T/3, before
    # the cut), at most T after the cut, plus the restore and the polling
    assert watch.cut_at is not None and watch.back_at is not None, done.stderr[-3000:]
    took = watch.back_at - watch.cut_at
    assert LEASE / 3 < took <= LEASE + 3, took
    # the study's end: the set's answer, held by the cut, is resent by TCP within as long
    # again as the cut lasted (its back-off doubles): 2T; then the renewer's last round
    # and the cut host's status, T/3 each at most, and the other host's finish
    assert ended - watch.cut_at <= 3 * LEASE, ended - watch.cut_at
    doc = Study.from_document(model.load(out))
    assert doc.status == "partial", doc.status
    assert doc.status_reason.startswith(f"{cut.addr4}: no renewal") and \
        "while setting firewall" in doc.status_reason, doc.status_reason
    ends = {h.name: h.end for h in doc.hosts}
    assert ends[cut.addr4].state == "restored-by-agent", ends[cut.addr4]
    assert "lease lapsed" in ends[cut.addr4].detail, ends[cut.addr4]
    assert ends[other.addr4].state == "restored", ends[other.addr4]
    assert {h.name: nft_ruleset(h) for h in hosts} == before
    assert sack(other) == sack_before
    assert hosts.ssh(cut, "true", check=False).returncode == 0  # ssh works again
    assert not any(b.config == "c1" for b in doc.blocks)  # nothing measured across the cut
    assert no_agent_left(hosts), [agents_in(h) for h in hosts]


def test_a_lost_host_that_answers_again_is_asked_at_once_not_after_its_lease():
    """A host whose renewals failed (a level cut it off) and whose agent has since
    restored it answers as soon as the link is back: finish asks it at once (it used to
    wait a lease and a grace past its last answer: 65 s with the default lease, after
    the late answer of the set that cut it) and names it restored-by-agent."""
    hs = study_hosts.HostSet("s1", ["a", "b"], agent="exec env H=%h", lease_s=LEASE,
                             grace_s=5)
    for host in hs.hosts:
        hs.armed[host] = study_hosts.Armed(host, True, 100, f"/run/{host}", f"/run/{host}/r")
        hs.last_ack[host] = time.monotonic()
    hs.lost.add("a")
    result = {"why": "lease lapsed", "utc": "2026-11-27T17:00:00Z",
              "restored": [{"factor": "firewall", "status": "restored"}]}
    asked = []

    def ctl(request, hosts=None, timeout=None):
        asked.append((request["op"], list(hosts or ()), timeout))
        data = ({"ok": True, "armed": False, "result": result} if request["op"] == "status"
                else {"ok": True, "restored": [{"factor": "sysctl", "status": "restored"}]})
        done = remote.HostResult(hosts[0], remote.OK, 0, b"", b"")
        return {h: study_hosts.Reply(h, True, data, "", done) for h in hosts}

    hs.ctl = ctl
    started = time.monotonic()
    ends = hs.finish()
    took = time.monotonic() - started
    assert ends["a"].state == "restored-by-agent" and "lease lapsed" in ends["a"].detail
    assert ends["b"].state == "restored"
    assert asked == [("finish", ["b"], None), ("status", ["a"], LEASE / 3)]
    assert took < LEASE / 2, took  # no sleep: the old wait was LEASE + grace
