"""The greedy design shared by `beoperf tune --procedure` and `beoperf study --design
greedy` (analysis/greedy.py): the same simulated machine measured by both, with faked
settings (the procedure) and a fake control plane (the study), no root.  Both must hand
the same blocks to the same rule (family and margin included) and keep the same changes;
a change whose effect lies inside the margin is kept by neither, however tight its
interval (the "tune --procedure kept a no-effect change" bug)."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field

import pytest

from beoperf.analysis import effect, greedy
from beoperf.audit import procedure, tune
from beoperf.audit.tune import Change
from beoperf.model.study import Study
from beoperf.suites import study as suite
from beoperf.suites import study_spec as specs

EFFECT = {"a": 0.70, "b": 0.97, "c": 1.15}  # latency factor of each change when applied
NOISE = 0.005  # each block's own scatter, +-0.5%
FACTORS = {"sysctl": ("a", "net.core.busy_poll=50"), "irqbalance": ("b", "off"),
           "firewall": ("c", "flush")}  # the study's factor for each of the changes
REPEATS = 6


@dataclass
class Machine:
    """The changes applied now, and how often each state was entered: a block's latency
    is its state's (the product of the changes' factors) with a scatter fixed by the state
    and that count, so the blocks of one stay in a state read alike and both tools see
    the same figures whatever extra block one of them measures without changing state."""

    on: set[str] = field(default_factory=set)
    entered: Counter = field(default_factory=lambda: Counter({frozenset(): 1}))

    def switch(self, key: str, applied: bool) -> None:
        before = frozenset(self.on)
        (self.on.add if applied else self.on.discard)(key)
        if frozenset(self.on) != before:
            self.entered[frozenset(self.on)] += 1

    def latency(self) -> float:
        state = frozenset(self.on)
        rng = random.Random(f"{sorted(state)}/{self.entered[state]}")
        return 50.0 * math.prod(EFFECT[k] for k in state) * (1 + rng.uniform(-NOISE, NOISE))


@pytest.fixture
def decisions(monkeypatch):
    """Every decision the shared rule makes: the triples, family, margin, direction, and
    whether it kept the candidate."""
    found: list[tuple] = []
    decide = greedy.Rule.decide

    def recorded(rule: greedy.Rule, trial: greedy.Trial) -> greedy.Decision:
        out = decide(rule, trial)
        found.append((trial.triples, rule.family, rule.margin, rule.higher_is_better,
                      out.keep, out.effect.verdict))
        return out

    monkeypatch.setattr(greedy.Rule, "decide", recorded)
    return found


# --------------------------------------------------------------------------- tune --procedure


def run_procedure(monkeypatch, margin: float) -> procedure.Outcome:
    machine = Machine()
    monkeypatch.setattr(tune, "set_value",
                        lambda c, value: machine.switch(c.key[-1], value == "0"))
    monkeypatch.setattr(tune, "read_value",
                        lambda c: "0" if c.key[-1] in machine.on else "1")
    changes = [Change(f"net.x.{k}", "sysctl", None, "1", "0") for k in "abc"]
    procedure.warm_up(machine.latency)
    return procedure.run_changes(changes, machine.latency, REPEATS, margin=margin)


# --------------------------------------------------------------------------- the study


@dataclass
class FakeFigure:
    key: str
    unit: str
    higher_is_better: bool


class Latency:
    name = "pingpong"

    def params(self):
        return {"latency_size": 16}

    def figures(self):
        return [FakeFigure("latency_us@16", "us", False)]


@dataclass
class Hosts:
    """Two hosts changed as one machine through a fake control plane."""

    machine: Machine
    names: tuple[str, ...] = ("h0", "h1")

    def read(self, factors):
        return {h: {f: "own" for f in factors} for h in self.names}

    def check_slurm(self, force):
        return {}

    def arm(self, hosts):
        return {h: {"ok": True} for h in hosts}

    def set_level(self, factor, label, value, hosts, timeout=None):
        self.machine.switch(FACTORS[factor][0], value is not None)
        return {h: {"ok": True} for h in hosts}

    def probe(self, client, address, port):
        raise AssertionError("no MTU level here")

    def lapsed(self):
        return []

    def finish(self, keep):
        self.machine.on.clear()
        return {h: {"state": "restored"} for h in self.names}


def run_study(monkeypatch, margin: float) -> Study:
    monkeypatch.setattr(suite, "_measurement", lambda m: Latency())
    machine = Machine()

    def measure(config, run_levels):
        figure = machine.latency()
        return suite.Measured({"latency_us@16": figure}, {"h1>h0": {"latency_us@16": figure}},
                              [], 0.1, None)

    factors = tuple(specs.FactorSpec(name, (level,)) for name, (_k, level) in FACTORS.items())
    study = specs.StudySpec("greedy", specs.HostsSpec(nodes="h0,h1"), factors,
                            (specs.MeasureSpec("pingpong", {}),),
                            specs.DesignSpec(name="greedy", repeats=REPEATS, margin=margin,
                                             seed=1))
    doc = suite.run(suite.Spec(study, apply=True), None, None, Hosts(machine), measure)
    return Study.from_document(doc)


# --------------------------------------------------------------------------- both


@pytest.mark.parametrize(("margin", "kept"), [(effect.DEFAULT_MARGIN, ["a"]),
                                              (0.01, ["a", "b"])])
def test_procedure_and_greedy_study_decide_alike_on_the_same_blocks(monkeypatch, decisions,
                                                                    margin, kept):
    out = run_procedure(monkeypatch, margin)
    by_procedure = list(decisions)
    decisions.clear()
    study = run_study(monkeypatch, margin)
    by_study = list(decisions)

    # one rule, one family (3 changes x 1 figure), one margin, the same triples
    assert len(by_procedure) == len(by_study) == 3
    for mine, theirs in zip(by_procedure, by_study, strict=True):
        assert mine[1:] == theirs[1:] and mine[1] == 3 and mine[2] == margin
        assert list(mine[0]) == list(theirs[0])  # the same blocks, to the bit
    assert [c.key[-1] for c in out.kept] == kept
    assert [d[4] for d in by_study] == [k in kept for k in "abc"]
    # b is 3% faster, measured tightly: its interval excludes no change, yet at the
    # default margin of 10% it is "no difference shown" and neither tool keeps it
    b_row = out.rows[2]
    assert b_row.effect["high"] < 1.0
    assert b_row.effect["verdict"] == ("no difference shown" if margin > 0.03 else "better")
    assert (b_row.verdict == "kept") == ("b" in kept)
    assert out.rows[3].effect["verdict"] == "worse" and out.rows[3].verdict == "reverted"
    # the study's final effects are the decisions' own (same family, same margin)
    labels = {c.id: c.label for c in study.configurations}
    final = {labels[e.config]: e.effect for e in study.effects}
    for row, (name, (_k, level)) in zip(out.rows[1:4], FACTORS.items(), strict=True):
        theirs = final[f"{name} {level}"]
        assert theirs["verdict"] == row.effect["verdict"]
        assert theirs["family"] == row.effect["family"] == 3
        for bound in ("ratio", "low", "high"):
            assert theirs[bound] == pytest.approx(row.effect[bound], rel=1e-9)
    # the study's baseline moved with what it kept, as the procedure's did
    baselines = [c.label for c in study.configurations if c.role == "combined"]
    first = "Default + sysctl net.core.busy_poll=50"
    assert baselines == [first] + ([f"{first}, irqbalance off"] if "b" in kept else [])
    assert [r.against for r in out.rows[1:4]] == [
        "Default", "Default + net.x.a", "Default + net.x.a" + (", net.x.b" if "b" in kept
                                                              else "")]


def test_a_trial_of_blocks_is_the_sandwich_of_effect_blocks():
    """The procedure's A C A C ... A read as triples gives effect.blocks' effect, byte for
    byte (the "procedure" documents keep their effect fields)."""
    around, changed = [50.0, 51.0, 50.5, 49.8], [40.0, 41.0, 40.2]
    rule = greedy.Rule(family=2)
    assert rule.judge(greedy.Trial.of_blocks(changed, around)).to_dict() == \
        effect.blocks(changed, around, higher_is_better=False, family=2).to_dict()
    short = rule.judge(greedy.Trial.of_blocks(changed, around[:3]))
    assert short.verdict == "cannot tell" and short.reason == effect.SANDWICH_NEEDS


def test_the_loop_leaves_out_an_unjudged_candidate_and_keeps_on_top():
    seen = []

    def measure(cand, kept):
        seen.append((cand, tuple(kept)))
        if cand == "skipped":
            return None
        ratio = 0.5 if cand == "good" else 1.0
        return greedy.Trial([(10.0, 10.0 * ratio * f, 10.0) for f in (0.99, 1.0, 1.01)])

    kept = greedy.run(["good", "skipped", "none"], measure, greedy.Rule)
    assert kept == ["good"]
    assert seen == [("good", ()), ("skipped", ("good",)), ("none", ("good",))]
