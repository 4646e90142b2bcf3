"""`beoperf study` end to end on `beoperf lab` hosts (network namespaces joined through a
bridge, tbf-shaped links), where the verdict rests on timing: T1, the MTU preset at 1500
and 9000 on a link the bridge carries jumbo frames over (the goodput effect "better" with
an interval that contains, to the tenth of a point the issue states it in, the ratio the
TCP and Ethernet headers predict, computed from the MSS the runs' sockets report, not
written down).  The study runs as a user starts
it, a `python -m beoperf study` process (not under launch.job, whose guard is a
subreaper that would end the hosts' dead-man agents), reaching each host through ``ip
netns exec %h``.

In the serial phase (tests/conftest.SERIAL_FILES): the verdict rests on an interval a
point or two wide, which another test file's load beside it would widen.  The rest (the
skipped level, the plan, kill -9, SIGTERM, --peer, and T2, a firewall ruleset that
doubles latency: far beyond what load does) is tests/test_study_lab.py, in the parallel
phase."""

from __future__ import annotations

import pytest

from beoperf import model
from beoperf.model.study import Study
from study_helpers import effect, mtu_of, no_agent_left, start_serve, study

RATE = 100e6  # bit/s: the lab's tbf on every host's link


def header_ratio(doc: Study) -> float:
    """The goodput ratio the headers predict, from the MSS the blocks' sockets reported:
    (mss9000 / (9000 + 14)) / (mss1500 / (1500 + 14)) (each full segment's payload over
    its Ethernet frame, which tbf counts)."""
    mss = {}
    for block in doc.blocks:
        found = block.pairs and next(iter(block.pairs.values())).get("mss_bytes")
        if found:
            mss.setdefault(doc.label_of(block.config), found)
    m9000, m1500 = mss["MTU 9000"], mss["Default"]
    return (m9000 / (9000 + 14)) / (m1500 / (1500 + 14))


@pytest.mark.tools("tc", "bridge")
def test_t1_the_path_carries_9000_and_the_header_ratio_is_found(lab, tmp_path):
    hosts = lab(2, rate=RATE, sshd=False, controller=False)
    start_serve(hosts[0])
    out = tmp_path / "doc.json"
    # --precision 0.95%: a noisy machine (a CI run's 6 blocks gave an interval 2.3
    # points wide) gets more rounds until the interval is within ±0.95% of the ratio
    # (1.98 points wide at 1.04), up to 18
    done = study(hosts, "mtu", "--levels", "1500,9000", "--repeats", "6", "--margin", "1%",
                 "--precision", "0.95%", "--seed", "7", "--block-time", "1", "--apply",
                 "-o", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    doc = Study.from_document(model.load(out))
    assert doc.status == "complete"
    mtu = doc.factor("mtu")
    assert [(lv.label, lv.default, lv.status) for lv in mtu.levels] == [
        ("1500", True, "measured"), ("9000", False, "measured")]
    assert mtu.level("9000").path["carried"] == 9000
    c9000 = next(c.id for c in doc.configurations if c.levels == {"mtu": "9000"})
    found = effect(doc, c9000, "goodput_bps@1M")
    expected = header_ratio(doc)
    assert found["verdict"] == "better" and found["low"] > 1, found
    assert (found["high"] - found["low"]) * 100 <= 2, found
    # "contains the +3.8% the headers predict": the prediction is a model stated to a tenth
    # of a point (it leaves out tbf's per-packet time rounding and the partial segment
    # ending each message), so the interval must reach within 0.1 point of it.  A CI run
    # whose 18 blocks gave [1.0380, 1.0396] missed 1.0379 by 0.0001; NPtcp by hand read
    # 1.0396 on this link (bench/RESULTS.md B1).
    assert found["low"] - 0.001 <= expected <= found["high"] + 0.001, (expected, found)
    assert [h.end.state for h in doc.hosts] == ["restored", "restored"]
    assert [mtu_of(h) for h in hosts] == [1500, 1500]
    assert no_agent_left(hosts)
    print(f"T1: ratio {found['ratio']:.4f} [{found['low']:.4f}, {found['high']:.4f}], "
          f"headers predict {expected:.4f}; {done.stderr.count('block ')} blocks, "
          f"{found['runs']} of MTU 9000")
