"""The study's block loop (suites/study.py) against a fake control plane and a fake
measurement, no root: which levels are set when, the MTU path check that skips a level
the path does not carry, the combined phase, the document handed over when interrupted,
and every host's end.  The real thing, on namespace hosts, is tests/test_study_netns.py."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from beoperf import errors
from beoperf.model.study import Study
from beoperf.suites import study as suite
from beoperf.suites import study_spec as specs

RATE = 100e6  # the fake link's bit rate


@dataclass
class FakeFigure:
    key: str
    unit: str
    higher_is_better: bool


class FakeMeasurement:
    name = "pingpong"

    def params(self):
        return {"latency_size": 16, "goodput_size": 1 << 20}

    def figures(self):
        return [FakeFigure("goodput_bps@1M", "bit/s", True),
                FakeFigure("latency_us@16", "us", False)]


@dataclass
class FakeHosts:
    """Hosts whose only state is the MTU, and a path that carries ``path_mtu``."""

    names: list[str]
    path_mtu: int = 9000
    mtu: dict[str, str] = field(default_factory=dict)
    calls: list[tuple] = field(default_factory=list)
    armed: bool = False
    lapsed_hosts: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.mtu = {h: "1500" for h in self.names}

    def read(self, factors):
        return {h: {"mtu": self.mtu[h]} for h in self.names}

    def check_slurm(self, force):
        return {}

    def arm(self, hosts):
        self.calls.append(("arm", list(hosts)))
        self.armed = True
        return {h: {"ok": True, "pid": 100 + i, "interface": "eth0"}
                for i, h in enumerate(hosts)}

    def set_level(self, factor, label, value, hosts):
        assert self.armed, "a level set before the hosts were armed"
        self.calls.append(("set", factor, label))
        if factor != "mtu":
            return {h: {"ok": True, "read_back": value} for h in hosts}
        for h in hosts:
            self.mtu[h] = value or "1500"
        return {h: {"ok": True, "read_back": self.mtu[h]} for h in hosts}

    def lapsed(self):
        return list(self.lapsed_hosts)

    def probe(self, client, address, port):
        size = int(self.mtu[client])
        carried = size if size <= self.path_mtu else 1500
        return {"peer": address, "port": port, "mtu": size, "carried": carried, "error": None}

    def finish(self, keep):
        """As the agents answer: "not-changed" for a host already at its snapshot (the
        study put it back before the end), which the study reports as restored."""
        self.calls.append(("finish", tuple(keep)))
        ends = {}
        for h in self.names:
            kept = any(f == "mtu" for f, _ in keep)
            state = "kept" if kept else "not-changed" if self.mtu[h] == "1500" else "restored"
            if not kept:
                self.mtu[h] = "1500"
            ends[h] = {"state": state}
        return ends


def goodput(mtu: int) -> float:
    """TCP payload over Ethernet frames: (MTU - 52) / (MTU + 14) of the rate."""
    return RATE * (mtu - 52) / (mtu + 14)


def measurer(hosts: FakeHosts, noise: float = 0.002, seed: int = 1, stop_after=None):
    rng = random.Random(seed)
    count = [0]

    def measure(config, run_levels):
        count[0] += 1
        if stop_after is not None and count[0] > stop_after:
            raise KeyboardInterrupt
        mtu = int(hosts.mtu[hosts.names[1]])
        figures = {"goodput_bps@1M": goodput(mtu) * (1 + rng.gauss(0, noise)),
                   "latency_us@16": 25.0 * (1 + rng.gauss(0, noise))}
        return suite.Measured(figures, {"h1>h0": dict(figures)}, [], 1.0, None)

    return measure


def mtu_spec(levels=("1500", "9000"), margin=0.01, keep="none", repeats=6) -> suite.Spec:
    study = specs.StudySpec("mtu", specs.HostsSpec(nodes="h0,h1"),
                            (specs.FactorSpec("mtu", levels),),
                            (specs.MeasureSpec("pingpong", {}),),
                            specs.DesignSpec(repeats=repeats, margin=margin, seed=7))
    return suite.Spec(study, apply=True, keep=keep)


@pytest.fixture(autouse=True)
def fake_measurement(monkeypatch):
    monkeypatch.setattr(suite, "_measurement", lambda m: FakeMeasurement())


def run(spec, hosts, **kw):
    kept = []
    doc = suite.run(spec, None, kept.append, hosts, measurer(hosts, **kw))
    assert kept == [doc]
    return Study.from_document(doc)


def test_the_path_carries_9000_both_levels_measured_and_the_ratio_found():
    hosts = FakeHosts(["h0", "h1"])
    study = run(mtu_spec(), hosts)
    assert study.status == "complete"
    # 1500 is both hosts' own value: it is the Default, not a level of its own
    mtu = study.factor("mtu")
    assert [(lv.label, lv.default, lv.status) for lv in mtu.levels] == [
        ("1500", True, "measured"), ("9000", False, "measured")]
    c9000 = next(c.id for c in study.configurations if c.levels == {"mtu": "9000"})
    assert sum(1 for b in study.blocks if b.config == c9000) == 6
    found = next(e for e in study.effects if e.config == c9000
                 and e.figure == "goodput_bps@1M" and e.pair is None).effect
    expected = goodput(9000) / goodput(1500)
    assert found["verdict"] == "better"
    assert found["low"] < expected < found["high"]
    assert any(line.startswith("MTU 9000: goodput@1M better") for line in study.verdicts)
    assert all(h.end is not None and h.end.state == "restored" for h in study.hosts)
    assert hosts.mtu == {"h0": "1500", "h1": "1500"}
    # the first block (warm-up) was measured before the hosts were armed
    assert hosts.calls[0] == ("arm", ["h0", "h1"])
    assert study.blocks[0].warmup and study.blocks[0].config == "c0"


def test_a_level_the_path_does_not_carry_is_skipped_before_any_block_of_it():
    hosts = FakeHosts(["h0", "h1"], path_mtu=1500)
    study = run(mtu_spec(), hosts)
    level = study.factor("mtu").level("9000")
    assert level.status == "skipped" and "does not carry 9000-byte frames" in level.why
    assert level.path["carried"] == 1500
    c9000 = next(c.id for c in study.configurations if c.levels == {"mtu": "9000"})
    assert not [b for b in study.blocks if b.config == c9000]
    # and no Default block follows another once nothing else is left to measure
    assert [b.config for b in study.blocks if not b.warmup] == ["c0"]
    assert any("MTU 9000: not measured" in line for line in study.verdicts)
    # put back at once, and only probed once
    sets = [c for c in hosts.calls if c[0] == "set"]
    assert sets == [("set", "mtu", "9000"), ("set", "mtu", "default")]
    assert hosts.mtu == {"h0": "1500", "h1": "1500"}


def test_keep_best_leaves_what_helped_and_says_so():
    hosts = FakeHosts(["h0", "h1"])
    study = run(mtu_spec(keep="best"), hosts)
    assert [(k.factor, k.level) for k in study.kept] == [("mtu", "9000")]
    assert hosts.calls[-1] == ("finish", (("mtu", "9000"),))
    assert all(h.end.state == "kept" for h in study.hosts)


def test_two_levels_that_help_are_measured_together():
    hosts = FakeHosts(["h0", "h1"])
    study = run(mtu_spec(levels=("1500", "4000", "9000"), repeats=4), hosts)
    # at most one level per factor helps, so a single factor has no combination
    assert study.combined is None
    assert {c.role for c in study.configurations} == {"default", "level"}


def test_an_interrupted_study_restores_every_host_and_hands_over_its_document():
    hosts = FakeHosts(["h0", "h1"])
    kept = []
    with pytest.raises(KeyboardInterrupt):
        suite.run(mtu_spec(), None, kept.append, hosts, measurer(hosts, stop_after=6))
    study = Study.from_document(kept[0])
    assert study.status == "interrupted" and len(study.blocks) == 6
    assert hosts.calls[-1] == ("finish", ())
    assert hosts.mtu == {"h0": "1500", "h1": "1500"}
    assert all(h.end.state == "restored" for h in study.hosts)


def test_a_block_during_which_a_lease_may_have_lapsed_is_left_out_and_the_study_stops():
    """A host whose agent acknowledged no renewal within the lease while a block ran may
    have restored its snapshot mid-block: the block's levels are not known, so it is not
    recorded, and the study stops as partial (the blocks before it stay)."""
    hosts = FakeHosts(["h0", "h1"])
    inner = measurer(hosts)
    count = [0]

    def measure(config, run_levels):
        count[0] += 1
        if count[0] == 5:
            hosts.lapsed_hosts = ["h1"]  # renewals failed while this block ran
        return inner(config, run_levels)

    kept = []
    suite.run(mtu_spec(), None, kept.append, hosts, measure)
    study = Study.from_document(kept[0])
    assert study.status == "partial" and "h1: no renewal" in study.status_reason
    assert len(study.blocks) == 4
    assert hosts.calls[-1] == ("finish", ())


def test_a_level_answered_after_the_lease_could_lapse_stops_the_study_before_a_block():
    """A level that cuts a host off (a firewall level dropping everything over ssh) is
    answered only once its agent has restored the host, after the lease: the answer is
    ok but the level is not in place.  The study stops as partial at once, naming the
    level, and measures no block of it (T3b, tests/test_study_cut.py, end to end)."""
    hosts = FakeHosts(["h0", "h1"])
    set_level = hosts.set_level

    def cut_off(factor, label, value, names):
        if label == "9000":
            hosts.lapsed_hosts = ["h1"]  # renewals failed while the set waited
        return set_level(factor, label, value, names)

    hosts.set_level = cut_off
    measured = []
    inner = measurer(hosts)

    def measure(config, run_levels):
        measured.append(config.label)
        return inner(config, run_levels)

    kept = []
    suite.run(mtu_spec(), None, kept.append, hosts, measure)
    study = Study.from_document(kept[0])
    assert study.status == "partial"
    assert "h1: no renewal" in study.status_reason and "MTU 9000" in study.status_reason
    assert "MTU 9000" not in measured and measured[-1] != "MTU 9000"
    assert hosts.calls[-1] == ("finish", ())


def test_a_host_that_does_not_arm_is_never_changed():
    hosts = FakeHosts(["h0", "h1"])
    hosts.arm = lambda names: {"h0": {"ok": True}, "h1": {"ok": False, "error": "busy"}}
    kept = []
    with pytest.raises(errors.Failed, match="h1 did not arm: busy"):
        suite.run(mtu_spec(), None, kept.append, hosts, measurer(hosts))
    assert not [c for c in hosts.calls if c[0] == "set"]
    assert Study.from_document(kept[0]).status == "failed"


def test_the_plan_changes_nothing_and_lists_the_schedule():
    hosts = FakeHosts(["h0", "h1"])
    spec = mtu_spec()
    plan = suite.plan(suite.Spec(spec.study, apply=False), hosts)
    study = Study.from_document(plan)
    assert study.status == "planned" and not study.applied and not study.blocks
    assert hosts.calls == []
    order = study.schedule.order
    assert order[:2] == ["c0", "c0"] and order.count("c1") == 6
    assert [h.snapshot for h in study.hosts] == [{"mtu": "1500"}, {"mtu": "1500"}]


def test_greedy_judges_each_candidate_on_top_of_what_it_kept():
    hosts = FakeHosts(["h0", "h1"])
    seen = []
    measure = measurer(hosts)

    def recording(config, run_levels):
        seen.append((config.label, hosts.mtu["h1"]))
        return measure(config, run_levels)

    spec = mtu_spec(levels=("1500", "4000", "9000"), repeats=4)
    spec = suite.Spec(specs.StudySpec(spec.study.name, spec.study.hosts, spec.study.factors,
                                      spec.study.measures,
                                      specs.DesignSpec(name="greedy", repeats=4,
                                                       margin=0.01, seed=7)), apply=True)
    study = Study.from_document(suite.run(spec, None, None, hosts, recording))
    assert study.design == "greedy" and study.status == "complete"
    # warm-up 2, then A (C A) x 4 for 4000; 4000 helped against 1500, so every baseline
    # block of the 9000 candidate after it ran at 4000
    assert [mtu for label, mtu in seen[2:3 + 2 * 4] if label == "Default"] == ["1500"] * 5
    around_9000 = [(label, mtu) for label, mtu in seen[3 + 2 * 4:] if label != "MTU 9000"]
    assert around_9000 and set(around_9000) == {("Default + MTU 4000", "4000")}
    # the 9000 candidate is judged against that baseline, by its blocks' neighbours
    c9000 = next(c.id for c in study.configurations if c.levels == {"mtu": "9000"})
    assert {e.against for e in study.effects if e.config == c9000} == {"Default + MTU 4000"}
    assert hosts.mtu == {"h0": "1500", "h1": "1500"}


def test_keep_best_with_persist_writes_the_kept_levels_file_and_never_overwrites(tmp_path):
    hosts = FakeHosts(["h0", "h1"])
    spec = mtu_spec(keep="best")
    spec = suite.Spec(spec.study, apply=True, keep="best", persist=str(tmp_path / "p"))
    study = run(spec, hosts)
    assert [(k.factor, k.level) for k in study.kept] == [("mtu", "9000")]
    (path,) = study.persist_files
    assert "mtu 9000" in open(path).read()
    hosts, kept = FakeHosts(["h0", "h1"]), []
    with pytest.raises(errors.OutputError, match="exists; not overwritten"):
        suite.run(spec, None, kept.append, hosts, measurer(hosts))
    again = Study.from_document(kept[0])  # the document is kept all the same
    assert again.status == "complete" and "not overwritten" in again.warnings[-1]


def test_the_latency_checklist_takes_each_hosts_audit_findings_as_levels():
    from beoperf.suites import study_checklist as checklist

    def change(check, key, target):
        return {"check": check, "key": key, "target": target}

    plans = {"h0": {"changes": [change("sysctl", "net.core.busy_read", "50"),
                                change("sysctl", "net.core.busy_poll", "50"),
                                change("interface", "mtu", "9000")]},
             "h1": {"changes": [change("sysctl", "net.core.busy_read", "50"),
                                change("sysctl", "net.ipv4.no_such_key", "1")]},
             "h2": "unreachable: ssh: connect to host h2 port 22: No route to host"}
    found, notes = checklist.found_factors(plans)
    assert found == [specs.FactorSpec("sysctl", ("net.core.busy_read=50",
                                                 "net.core.busy_poll=50"))]
    assert [n.split(":")[0] for n in notes] == ["h1", "h2"]
    factors, _ = specs.preset("latency-checklist", ())
    both = checklist.merged(factors, found)
    assert [(f.name, f.levels) for f in both] == [
        ("sysctl", ("net.core.busy_read=50", "net.core.busy_poll=50")),
        ("irqbalance", ("off",)), ("firewall", ("flush",))]


def test_the_buffers_preset_varies_the_socket_option_over_limits_raised_once():
    hosts = FakeHosts(["h0", "h1"])
    asked = []
    measure = measurer(hosts)

    def recording(config, run_levels):
        asked.append((config.label, run_levels.get("sndbuf"), run_levels.get("rcvbuf")))
        return measure(config, run_levels)

    factors, measures = specs.preset("buffers", ("default", "64K", "4M"))
    study = specs.StudySpec("buffers", specs.HostsSpec(nodes="h0,h1"), factors, measures,
                            specs.DesignSpec(repeats=4, seed=3))
    doc = Study.from_document(suite.run(suite.Spec(study, apply=True), None, None, hosts,
                                        recording))
    # the limits: set once, right after arming, never changed between blocks
    assert [c for c in hosts.calls if c[0] != "finish"] == [
        ("arm", ["h0", "h1"]), ("set", "buffers", "4194304")]
    assert doc.factor("buffers").levels[0].why == suite.FIXED_WHY
    assert {c.label for c in doc.configurations} == {"Default", "sockbuf 64K", "sockbuf 4M"}
    seen = set(asked)
    assert seen == {("Default", None, None), ("sockbuf 64K", 65536, 65536),
                    ("sockbuf 4M", 4194304, 4194304)}


def test_a_spent_time_budget_stops_the_blocks_after_closing_the_last_triple(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(suite.time, "monotonic", lambda: clock[0])
    hosts = FakeHosts(["h0", "h1"])
    measure = measurer(hosts)

    def slow(config, run_levels):
        clock[0] += 10.0  # every block takes 10 s
        return measure(config, run_levels)

    spec = mtu_spec()
    budget = specs.DesignSpec(repeats=6, margin=0.01, seed=7, time_budget=75.0)
    spec = suite.Spec(specs.StudySpec("mtu", spec.study.hosts, spec.study.factors,
                                      spec.study.measures, budget), apply=True)
    study = Study.from_document(suite.run(spec, None, None, hosts, slow))
    configs = [b.config for b in study.blocks if not b.warmup]
    assert len(study.blocks) < 15 and configs[-1] == "c0"  # a C is never left unclosed
    assert "time budget was spent" in study.warnings[0]
    assert hosts.mtu == {"h0": "1500", "h1": "1500"}


def test_a_sigterm_whose_exception_was_swallowed_still_stops_the_study():
    """Python ignores an exception raised in an at-fork handler, where a SIGTERM that
    arrives while a child is forked is handled: the study stops at its next block."""
    import signal

    from beoperf import interrupts

    hosts = FakeHosts(["h0", "h1"])
    measure = measurer(hosts)
    count = [0]

    def swallowing(config, run_levels):
        count[0] += 1
        if count[0] == 5:
            try:
                signal.raise_signal(signal.SIGTERM)
            except interrupts.Terminated:
                pass  # lost, as in an at-fork handler
        return measure(config, run_levels)

    kept = []
    with interrupts.handling(), pytest.raises(interrupts.Terminated):
        suite.run(mtu_spec(), None, kept.append, hosts, swallowing)
    study = Study.from_document(kept[0])
    assert study.status == "interrupted" and len(study.blocks) == 5
    assert hosts.mtu == {"h0": "1500", "h1": "1500"}


def test_a_factor_a_host_cannot_read_refuses_the_study_before_anything_is_armed():
    hosts = FakeHosts(["h0", "h1"])
    hosts.read = lambda factors: {"h0": {"mtu": "1500"},
                                  "h1": {"mtu": {"error": "no interface to change"}}}
    with pytest.raises(errors.Failed, match="factor mtu cannot be studied on h1: no interface"):
        suite.run(mtu_spec(), None, None, hosts, measurer(hosts))
    assert hosts.calls == []
    plan = Study.from_document(suite.plan(suite.Spec(mtu_spec().study), hosts))
    assert plan.warnings == ["mtu: cannot be studied: h1: no interface to change"]


def test_each_pair_keeps_its_mss_and_the_buffers_the_kernel_granted():
    c = suite.check(mtu_spec())
    c.addresses = {"h0": "10.0.0.1", "h1": "10.0.0.2"}

    @dataclass
    class Sample:
        detail: dict

    sample = Sample({"pairs": {"h1>10.0.0.1": {
        "figures": {"latency_us@16": 20.0}, "mss": 1448,
        "granted": {"sndbuf": 131072, "rcvbuf": None}}}})
    assert suite.pair_figures(c, sample) == {"h1>h0": {
        "latency_us@16": 20.0, "mss_bytes": 1448.0, "granted_sndbuf_bytes": 131072.0}}


def precision_spec(precision, max_repeats=None, name="one-at-a-time", levels=("1500", "9000")):
    spec = mtu_spec(levels=levels)
    design = specs.DesignSpec(name=name, repeats=6, margin=0.01, seed=7, precision=precision,
                              max_repeats=max_repeats)
    return suite.Spec(specs.StudySpec(spec.study.name, spec.study.hosts, spec.study.factors,
                                      spec.study.measures, design), apply=True)


def analysis_half_width(entry):
    """Half the interval over the ratio, from the stored figures."""
    e = entry.effect
    return (e["high"] - e["low"]) / (2 * e["ratio"])


def goodput_effect(study, config):
    return next(e for e in study.effects if e.config == config
                and e.figure == "goodput_bps@1M" and e.pair is None)


def test_precision_adds_rounds_until_the_interval_is_within_it():
    """Blocks 0.8% noisy: 6 rounds leave the interval wider than ±1%; --precision 1% goes
    on a round at a time until it is within, each round recorded in the order."""
    plain = run(mtu_spec(), FakeHosts(["h0", "h1"]), noise=0.008)
    c9000 = next(c.id for c in plain.configurations if c.levels == {"mtu": "9000"})
    wide = goodput_effect(plain, c9000).effect
    assert analysis_half_width(goodput_effect(plain, c9000)) > 0.01, wide  # the option's case
    study = run(precision_spec(0.01), FakeHosts(["h0", "h1"]), noise=0.008)
    assert study.status == "complete"
    blocks = sum(1 for b in study.blocks if b.config == c9000 and not b.warmup)
    assert 6 < blocks <= 18
    found = goodput_effect(study, c9000)
    assert found.blocks == blocks
    assert analysis_half_width(found) <= 0.01, found.effect
    assert found.effect["low"] < goodput(9000) / goodput(1500) < found.effect["high"]
    # the order written down is the order measured, the added rounds included
    assert study.schedule.order == [b.config for b in study.blocks]
    assert (study.schedule.precision, study.schedule.max_repeats) == (0.01, 18)
    assert "wider than ±1%, up to 18 blocks" in study.method.statement
    assert not any("--precision" in w for w in study.warnings)


def test_precision_already_met_adds_nothing_and_an_unmet_one_is_said():
    quiet = run(precision_spec(0.01), FakeHosts(["h0", "h1"]), noise=0.001)
    c9000 = next(c.id for c in quiet.configurations if c.levels == {"mtu": "9000"})
    assert sum(1 for b in quiet.blocks if b.config == c9000) == 6
    noisy = run(precision_spec(0.001, max_repeats=8), FakeHosts(["h0", "h1"]), noise=0.02)
    assert sum(1 for b in noisy.blocks if b.config == c9000) == 8
    said = [w for w in noisy.warnings if "--precision" in w]
    assert len(said) == 1 and said[0].startswith("MTU 9000: the interval on goodput_bps@1M")
    assert "after 8 blocks" in said[0] and "--max-repeats 8" in said[0]


def test_greedy_with_precision_measures_a_candidate_until_it_can_decide():
    hosts = FakeHosts(["h0", "h1"])
    study = run(precision_spec(0.01, name="greedy", levels=("1500", "4000", "9000")), hosts,
                noise=0.008)
    assert study.status == "complete"
    for label in ("4000", "9000"):
        cid = next(c.id for c in study.configurations if c.levels == {"mtu": label})
        found = goodput_effect(study, cid)
        assert found.blocks > 6
        assert analysis_half_width(found) <= 0.01
    assert study.schedule.order == [b.config if b.config in ("c1", "c2") else "c0"
                                    for b in study.blocks]


@pytest.mark.parametrize("design, says", [
    (specs.DesignSpec(max_repeats=10), "--max-repeats: give it with --precision"),
    (specs.DesignSpec(precision=0.0), "--precision 0: give a fraction above 0"),
    (specs.DesignSpec(precision=0.01, max_repeats=5), "--max-repeats 5: give --repeats (6)"),
])
def test_bad_precision_options_are_one_line(design, says):
    with pytest.raises(errors.BadSpec, match=says.replace("(", r"\(").replace(")", r"\)")):
        specs.check_design(design)
