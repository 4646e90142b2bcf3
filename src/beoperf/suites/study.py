"""`beoperf study`: hosts x factors x measurements in a design, measured in interleaved
blocks beside Default, concluded, and every host put back.

* :func:`check` reads nothing from a host: the factors' levels through each factor's
  ``parse``, the measurements, the design, the hosts, pairs and data addresses.  Anything
  wrong is BadSpec and nothing was contacted.
* :func:`plan` (no ``--apply``): each host's current values through its agent's ``read``
  (no arm, no lock), the configurations and the schedule; a document with
  ``applied=false``, status ``planned``.  Nothing is changed.
* :func:`run` (``--apply``): the Slurm check, a warm-up block at Default (the servers
  answer before anything changes), every host's dead-man agent armed and its lease
  renewed, then the blocks: the host levels that differ from the current state set on
  every host at once, an MTU level's path probed before its first block (a level the
  path does not carry is skipped and put back at once: nothing is measured across it),
  the measurements made with the run levels; then the combination of what helped, and
  ``finish``: every host restored (or the levels that helped kept, ``--keep best``).
  The document is handed to ``keep_document`` whatever happened (Ctrl-C and SIGTERM
  included) before the exception goes on.

The hosts are driven through ``suites.study_hosts`` (each change is made by the agent
that holds the host's tune lock), the measurements through ``suites.study_measure``, the
schedule, effects and verdicts through ``analysis.study``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from beoperf import errors, interrupts, safeio
from beoperf.model.document import Document, JsonObject, make_meta, utc_now
from beoperf.suites import study_spec
from beoperf.suites.study_spec import FactorSpec, MeasureSpec, StudySpec

Progress = Callable[[str], None]
KeepDocument = Callable[[Document], None]

DEFAULT_ID = "c0"
DEFAULT_LABEL = "Default"
DEFAULT_LEVEL = "default"  # the level that is each host's own value
LOCAL_TEMPLATE = "exec env BEOPERF_STUDY_HOST=%h"  # this host, as study_hosts reaches it
FIXED_WHY = "applied in every configuration, Default included"
WARMUP = 2  # Default blocks before the first counted one (dropped)


@dataclass
class Measured:
    """What one block measured: its figures (over the pairs, their geometric mean), each
    pair's ("client>server" -> figure -> value), the curves (model.study.Curve), the
    seconds spent measuring and the first error (a failed block)."""

    figures: dict[str, float] = field(default_factory=dict)
    pairs: dict[str, dict[str, float]] = field(default_factory=dict)
    curves: list[Any] = field(default_factory=list)
    duration_s: float = 0.0
    error: str | None = None


MeasureBlock = Callable[[Any, Mapping[str, Any]], Measured]


class HostLost(errors.PartialAnswer):
    """A host stopped answering mid-study: the study stops as partial (exit 6); the host
    restores itself when its lease lapses."""

    category = "host lost"


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class Spec:
    """A study to run: what it is (``study``), whether it changes anything (``apply``),
    what is left applied at the end (``keep``: best | none) and where the persist files
    of what is kept go (``persist``)."""

    study: StudySpec
    apply: bool = False
    keep: str = "none"
    persist: str | None = None
    command_line: tuple[str, ...] = ()


@dataclass
class PlannedFactor:
    """A factor of the study, checked: its registered object, its levels and the hosts it
    changes."""

    name: str
    factor: Any  # beoperf.factors.base.Factor
    levels: list[Any]  # beoperf.factors.base.Level
    hosts: list[str]
    fixed: bool = False

    @property
    def scope(self) -> str:
        return str(self.factor.scope)

    def level(self, label: str) -> Any:
        return next(lv for lv in self.levels if lv.label == label)


@dataclass
class Checked:
    """A study checked before any host is contacted."""

    spec: Spec
    names: list[str]
    pairs: list[tuple[str, str]]
    addresses: dict[str, str]
    factors: list[PlannedFactor]
    measures: list[Any]  # study_measure.Measurement objects

    @property
    def design(self) -> study_spec.DesignSpec:
        return self.spec.study.design

    def factor(self, name: str) -> PlannedFactor:
        return next(f for f in self.factors if f.name == name)


class Control(Protocol):
    """What the study needs of its hosts (``suites.study_hosts.HostSet`` provides it; the
    tests give fakes): each call reaches every host at once and says what each did."""

    def read(self, factors: Sequence[str]) -> dict[str, dict[str, Any]]: ...
    def check_slurm(self, force: bool) -> JsonObject: ...
    def arm(self, hosts: Sequence[str]) -> dict[str, JsonObject]: ...
    def set_level(self, factor: str, level: str, value: str | None,
                  hosts: Sequence[str]) -> dict[str, JsonObject]: ...
    def probe(self, client: str, address: str, port: int) -> JsonObject: ...
    def lapsed(self) -> list[str]: ...
    def finish(self, keep: Sequence[tuple[str, str]]) -> dict[str, JsonObject]: ...


# --------------------------------------------------------------------------- checking


def check(spec: Spec) -> Checked:
    """Everything that can be checked without a host: BadSpec at the first problem."""
    s = spec.study
    study_spec.check_design(s.design)
    if spec.keep not in ("best", "none"):
        raise errors.BadSpec(f"--keep {spec.keep}: choose best or none")
    if spec.persist and spec.keep != "best":
        raise errors.BadSpec("--persist DIR goes with --keep best")
    names = study_spec.host_names(s.hosts)
    pairs = study_spec.pairs_of(s.hosts, names)
    addresses = study_spec.data_addresses(s.hosts, names)
    if not s.factors:
        raise errors.BadSpec("a study needs at least one factor (--factor NAME=LEVELS)")
    factors = [_planned(f, names) for f in s.factors]
    if not s.measures:
        raise errors.BadSpec("a study needs at least one measurement (--measure NAME)")
    measures = [_measurement(m) for m in s.measures]
    out = Checked(spec, names, pairs, addresses, factors, measures)
    _check_decide_by(out)
    from beoperf.analysis import study as analysis

    analysis.configurations(_factor_entries(out, {}), s.design.name)  # BadSpec: too many
    out.addresses = local_address(addresses, s.hosts)  # last: the only look at this host
    return out


def local_address(addresses: dict[str, str], hosts: study_spec.HostsSpec) -> dict[str, str]:
    """With --peer, this host's data address (unless given): the source address of its
    route to the peer.  Its name ("localhost") would send the peer's agent to change the
    loopback, and the probes along it."""
    local = study_spec.LOCAL
    if local not in addresses or dict(hosts.data_address).get(local) or hosts.peer is None:
        return addresses
    from beoperf import sysinfo

    peer = addresses[hosts.peer]
    route = sysinfo.route_interface(peer) or {}
    source = route.get("prefsrc")
    if not source or str(route.get("dev")) == "lo":
        raise errors.BadSpec(f"--peer {hosts.peer}: cannot tell this host's address toward "
                             f"{peer} (no route, or only the loopback's)",
                             f"give --data-address {local}=ADDRESS")
    return {**addresses, local: str(source)}


def _planned(f: FactorSpec, names: Sequence[str]) -> PlannedFactor:
    from beoperf import factors as registry

    if f.name not in registry.names():
        raise errors.BadSpec(f"unknown factor {f.name!r}: choose "
                             f"{', '.join(sorted(registry.names()))}")
    factor = registry.get(f.name)
    factor = factor() if isinstance(factor, type) else factor
    levels = factor.parse(list(f.levels))
    hosts = list(f.hosts) or list(names)
    for host in hosts:
        if host not in names:
            raise errors.BadSpec(f"factor {f.name}: {host} is not one of the study's hosts")
    if f.fixed and len(levels) != 1:
        raise errors.BadSpec(f"factor {f.name}: a fixed factor has one level")
    return PlannedFactor(f.name, factor, list(levels), hosts, f.fixed)


def _measurement(m: MeasureSpec) -> Any:
    """The measurement by name with its parameters (BadSpec naming a bad one)."""
    from beoperf.suites import study_measure

    return study_measure.get(m.name, dict(m.params))


def _check_decide_by(c: Checked) -> None:
    wanted = c.design.decide_by
    keys = [f.key for m in c.measures for f in m.figures()]
    if wanted is not None and wanted not in keys:
        raise errors.BadSpec(f"--decide-by {wanted}: the figures are {', '.join(keys)}")


def label_of(factor: str, level: str) -> str:
    """'MTU 9000', 'sockbuf 64K' (as analysis.study names a level)."""
    from beoperf.analysis import study as analysis

    return f"{analysis.shown_factor(factor)} {level}"


# --------------------------------------------------------------------------- the document


def _factor_entries(c: Checked, current: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """The factors as the document lists them, each with one Default level: 'default'
    when given, else a level equal to every host's current value (measured as Default,
    not as a level of its own), else a Default level added (the hosts' own values)."""
    from beoperf.model.study import FactorLevel, FactorLevels

    out = []
    for f in c.factors:
        if f.fixed:
            out.append(FactorLevels(f.name, f.scope, list(f.hosts), [FactorLevel(
                lv.label, lv.value, default=True, why=FIXED_WHY) for lv in f.levels]))
            continue
        levels = []
        for lv in f.levels:
            same = lv.value is None or (f.scope == "host" and bool(current) and all(
                str(current.get(h, {}).get(f.name)) == str(lv.value) for h in f.hosts))
            levels.append(FactorLevel(lv.label, lv.value, default=same))
        if not any(lv.default for lv in levels):
            levels.insert(0, FactorLevel(DEFAULT_LEVEL, None, default=True))
        elif sum(lv.default for lv in levels) > 1:
            own = ", ".join(lv.label for lv in levels if lv.default)
            raise errors.BadSpec(f"factor {f.name}: the levels {own} are each the hosts' "
                                 "own value: give one of them")
        out.append(FactorLevels(f.name, f.scope, list(f.hosts), levels))
    return out


def _hosts_entries(c: Checked, reach: str, current: Mapping[str, Mapping[str, Any]]
                   ) -> list[Any]:
    from beoperf.model.study import Host

    peer = c.spec.study.hosts.peer
    out = []
    for i, name in enumerate(c.names):
        role = "controller" if peer and i == 0 else ("peer" if peer else "member")
        out.append(Host(name, role, "local" if name == study_spec.LOCAL else reach,
                        c.addresses.get(name), c.spec.study.hosts.interface,
                        snapshot={k: v for k, v in current.get(name, {}).items()}))
    return out


def reach_of(c: Checked) -> str:
    return "template" if c.spec.study.hosts.exec_template else "ssh"


def _measurement_entries(c: Checked) -> list[Any]:
    from beoperf.model.study import Figure, MeasurementSpec

    return [MeasurementSpec(m.name, dict(m.params()),
                            [Figure(f.key, f.unit, f.higher_is_better) for f in m.figures()])
            for m in c.measures]


def new_study(c: Checked, current: Mapping[str, Mapping[str, Any]], seed: int) -> Any:
    """The study's document body as far as it is known before the first block: the
    factors (a level equal to the hosts' values is Default), the configurations and the
    order of blocks (analysis.study)."""
    from beoperf.analysis import study as analysis
    from beoperf.model.study import Method, Schedule, Study

    d = c.design
    entries = _factor_entries(c, current)
    configs = analysis.configurations(entries, d.name)
    order = analysis.schedule([cf.id for cf in configs], d.repeats, seed, design=d.name)
    return Study(
        name=c.spec.study.name, design=d.name, applied=c.spec.apply,
        status="planned", schedule=Schedule(seed, WARMUP, d.repeats, d.time_budget,
                                            d.lease, d.margin, order, d.precision,
                                            d.repeat_limit() if d.precision else None),
        method=Method(method_statement(d), margin=d.margin, warmup=WARMUP),
        hosts=_hosts_entries(c, reach_of(c), current), pairs=list(c.pairs),
        factors=entries, measurements=_measurement_entries(c), configurations=configs)


def method_statement(d: study_spec.DesignSpec) -> str:
    return (f"{d.name}: each configuration in {d.repeats} blocks of {d.block_time:g} s, "
            "each block between two Default blocks in a randomised order; the log ratio "
            "of a block to the mean of its neighbours, Student's t 95% interval "
            f"(Bonferroni over the figures and configurations judged); within "
            f"±{d.margin:.0%} counts as no difference"
            + ("" if d.precision is None else
               f"; then a round more at a time while a level's interval on the deciding "
               f"figure is wider than ±{_pct(d.precision)}, up to {d.repeat_limit()} "
               "blocks"))


def seed_of(c: Checked) -> int:
    seed = c.design.seed
    return int(seed) if seed is not None else int(time.time_ns() % 2**32)


def meta_of(spec: Spec, started: str) -> JsonObject:
    return make_meta(list(spec.command_line), utc_start=started, utc_end=utc_now())


def finish_document(study: Any, spec: Spec, started: str) -> Document:
    """The analysis (effects, combined, impact, drift, verdicts) and the document."""
    from beoperf.analysis import study as analysis

    if study.applied:
        analysis.analyse(study)
    return study.to_document(meta_of(spec, started))


# --------------------------------------------------------------------------- plan


def with_checklist(spec: Spec) -> tuple[Spec, list[str]]:
    """The latency checklist with what the latency audit finds on the hosts added (each
    host's tune plan: nothing changed), once the rest of the spec is checked; other
    studies as they are.  Also the lines of hosts that gave no plan."""
    if spec.study.name != "latency-checklist":
        return spec, []
    from dataclasses import replace

    from beoperf.suites import study_checklist

    c = check(spec)
    found, notes = study_checklist.found_factors(
        study_checklist.tune_plans(spec.study.hosts, c.names))
    factors = study_checklist.merged(spec.study.factors, found)
    return replace(spec, study=replace(spec.study, factors=factors)), notes


def plan(spec: Spec, control: Control | None = None,
         progress: Progress | None = None) -> Document:
    """The plan (nothing changed, no agent armed, no lock taken): each host's current
    values, the configurations and the schedule."""
    started = utc_now()
    spec, notes = with_checklist(spec)
    c = check(spec)
    control, current, left_out = read_hosts(c, control)
    seed = seed_of(c)
    study = new_study(c, current, seed)
    study.status_reason = "plan only: nothing was changed (--apply runs it)"
    study.warnings.extend(notes + left_out + unreachable_warnings(current))
    return finish_document(study, spec, started)


def read_hosts(c: Checked, control: Control | None
               ) -> tuple[Control, dict[str, dict[str, Any]], list[str]]:
    """Each host's current values (no agent, no lock), and the factors a host cannot
    read: a latency-checklist's own optional ones (irqbalance without systemd, the
    firewall without nft) are left out with a line saying why; any other refuses the
    study before anything is armed (a plan only lists it)."""
    built = control is None
    control = control or host_control(c)
    current = control.read([f.name for f in c.factors if f.scope == "host"])
    unusable: dict[str, str] = {}
    for f in c.factors:
        for h in f.hosts if f.scope == "host" else ():
            value = current.get(h, {}).get(f.name)
            if isinstance(value, dict) and set(value) == {"error"}:
                unusable.setdefault(f.name, f"{h}: {value['error']}")
    optional = set(study_spec.CHECKLIST_OPTIONAL) if c.spec.study.name == \
        "latency-checklist" else set()
    refused = [name for name in unusable if name not in optional]
    if refused and c.spec.apply:
        raise errors.Failed(f"factor {refused[0]} cannot be studied on "
                            f"{unusable[refused[0]]}", "nothing was changed; leave it out")
    dropped = [name for name in unusable if name in optional]
    if dropped:
        c.factors = [f for f in c.factors if f.name not in dropped]
        if not c.factors:
            raise errors.Failed("no factor of the latency checklist can be studied on "
                                "these hosts", "; ".join(unusable.values()))
        control = host_control(c) if built else control
    lines = [f"{name}: {'left out' if name in dropped else 'cannot be studied'}: {why}"
             for name, why in unusable.items()]
    return control, current, lines


def unreachable_warnings(current: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [f"{h}: {v['error']}" for h, v in current.items()
            if isinstance(v, Mapping) and v.get("error")]


def host_control(c: Checked) -> Control:
    """The hosts of a checked study, reached through their dead-man agents
    (suites/study_control.py on suites/study_hosts.py)."""
    from beoperf.suites import study_control

    h = c.spec.study.hosts
    texts = {f.name: f.levels for f in c.spec.study.factors}
    levels = {host: {f.name: list(texts[f.name]) for f in c.factors
                     if f.scope == "host" and host in f.hosts} for host in c.names}
    blocks = (2 * c.design.repeat_limit() * (1 + sum(len(f.levels) for f in c.factors))
              + WARMUP)
    return study_control.HostsControl(
        c.names, study_name=c.spec.study.name, agent=h.agent,
        remote_command=h.remote_command, fanout=h.fanout, timeout=h.timeout,
        lease_s=c.design.lease, interface=h.interface,
        routes=study_control.partners(c.names, c.pairs, c.addresses), levels=levels,
        estimate_s=estimate_s(c, blocks), settle_s=c.design.settle)


# --------------------------------------------------------------------------- run


@dataclass
class Loop:
    """The state of a running study: the levels each host factor is at now, the blocks,
    which MTU levels were probed and which configurations were dropped."""

    c: Checked
    control: Control
    study: Any
    progress: Progress
    measure_block: MeasureBlock
    now: dict[str, str | None] = field(default_factory=dict)  # factor -> label (None: own)
    probed: set[str] = field(default_factory=set)
    dropped: set[str] = field(default_factory=set)
    baseline: dict[str, str] = field(default_factory=dict)  # greedy: the levels kept
    changed: set[str] = field(default_factory=set)  # hosts a level was set on
    persist_error: errors.OutputError | None = None
    deadline: float | None = None  # monotonic: --time-budget's end
    out_of_time: bool = False
    index: int = 0

    def config(self, cid: str) -> Any:
        """The configuration of id ``cid``; in greedy, Default stands for the baseline of
        the moment (Default plus the levels kept), recorded as a configuration of its own."""
        from beoperf.analysis import study as analysis

        if cid == DEFAULT_ID and self.baseline and self.c.design.name == "greedy":
            found = analysis.baseline_configuration(self.study, self.baseline)
            if found not in self.study.configurations:
                self.study.configurations.append(found)
            return found
        return next(cf for cf in self.study.configurations if cf.id == cid)

    # ---------------------------------------------------------- levels

    def move_to(self, config: Any) -> float:
        """Set every host factor to the configuration's level (its own value where the
        configuration names none), only those that differ; the seconds it took."""
        start = time.monotonic()
        for f in sorted(self.c.factors, key=lambda f: f.factor.order):
            if f.scope != "host" or f.fixed:
                continue
            want = self.levels_of(config).get(f.name)
            if self.now.get(f.name) == want:
                continue
            self.set(f, want)
        return time.monotonic() - start

    def levels_of(self, config: Any) -> dict[str, str]:
        """The levels a block of ``config`` runs at: in greedy, on top of those kept."""
        if self.c.design.name == "greedy" and config.role != "combined":
            return {**self.baseline, **config.levels}
        return dict(config.levels)

    def set(self, f: PlannedFactor, label: str | None) -> None:
        """``f`` to ``label`` (None: Default) on its hosts.  HostLost when a host gave no
        answer, or when its lease may have lapsed by the time the answer came (a level
        that cut the host off is answered once its agent has restored it: the level is
        then not in place, and nothing is measured on it)."""
        value = None if label is None else f.level(label).value
        replies = self.control.set_level(f.name, label or "default", value, f.hosts)
        self.now[f.name] = label
        self.changed |= {h for h, r in replies.items() if r.get("ok") and value is not None}
        what = label_of(f.name, label) if label else f"{label_of(f.name, '')}back to Default"
        lost = [h for h, r in replies.items() if r.get("lost")]
        if lost:
            raise HostLost(f"{', '.join(lost)}: no answer while setting {f.name}",
                           "it restores itself when its lease lapses")
        lapsed = self.control.lapsed()
        if lapsed:
            raise HostLost(f"{', '.join(lapsed)}: no renewal of its lease acknowledged "
                           f"within the lease while setting {what} (did the change cut "
                           "it off?)", "its agent restores it by itself when the lease "
                           "lapses")
        failed = {h: r for h, r in replies.items() if not r.get("ok")}
        if failed:
            host, reply = next(iter(failed.items()))
            raise LevelFailed(f.name, label, f"{host}: {reply.get('error')}")
        self._granted(f, label, replies)
        self.progress(f"applied {what} on {', '.join(f.hosts)}")

    def _granted(self, f: PlannedFactor, label: str | None, replies: Mapping[str, Any]) -> None:
        entry = self.factor_level(f.name, label)
        if entry is not None:
            entry.granted = {h: {k: v for k, v in r.items() if k != "ok"}
                             for h, r in replies.items()}

    def factor_level(self, factor: str, label: str | None) -> Any:
        if label is None:
            return None
        found = next((e for e in self.study.factors if e.name == factor), None)
        return None if found is None else next(
            (lv for lv in found.levels if lv.label == label), None)

    # ---------------------------------------------------------- the MTU path check

    def path_carries(self, config: Any) -> bool:
        """Once per MTU level, before its first block: a don't-fragment probe of the
        level's size must cross every pair's path both ways; if not, the level is
        skipped with the facts, and put back at once."""
        label = config.levels.get("mtu")
        if label is None or label in self.probed:
            return True
        self.probed.add(label)
        size = int(self.c.factor("mtu").level(label).value)
        entry = self.factor_level("mtu", label)
        for client, server in self.c.pairs:
            facts = self.control.probe(client, self.c.addresses[server],
                                       self.c.spec.study.hosts.port)
            if entry is not None:
                entry.path = facts
            carried = facts.get("carried")
            if not isinstance(carried, int) or carried < size:
                why = (f"the path does not carry {size}-byte frames (largest that "
                       f"crossed: {carried if carried else 'none'}"
                       f"{'; ' + str(facts['error']) if facts.get('error') else ''})")
                self.skip(config, "skipped", why)
                self.set(self.c.factor("mtu"), None)
                return False
        return True

    def skip(self, config: Any, status: str, why: str) -> None:
        """A configuration taken out of the schedule, its levels marked with why."""
        self.dropped.add(config.id)
        for factor, label in config.levels.items():
            entry = self.factor_level(factor, label)
            if entry is not None:
                entry.status, entry.why = status, why
        self.progress(f"{config.label}: {status}: {why}")

    # ---------------------------------------------------------- blocks

    def block(self, cid: str, warmup: bool) -> None:
        """One block: levels set, the path checked, the measurements made, recorded."""
        from beoperf.model.study import Block

        interrupts.check()  # a SIGTERM whose exception a fork or a library swallowed
        config = self.config(cid)
        last = self.study.blocks[-1] if self.study.blocks else None
        if cid in self.dropped or (cid == DEFAULT_ID and not warmup and last is not None
                                   and last.config == config.id and not last.warmup):
            return  # a dropped configuration, or a second baseline block in a row
        if self.over_budget(warmup) and not (cid == DEFAULT_ID and last is not None
                                             and last.config != config.id):
            return  # the budget is spent: only the baseline block that closes a triple
        started = utc_now()
        try:
            apply_s = self.move_to(config)
        except LevelFailed as exc:
            self.skip(config, "failed", str(exc))
            self.set(self.c.factor(exc.factor), None)
            return
        if not self.path_carries(config):
            return
        got = self.measure_block(config, self.run_levels(config))
        lapsed = self.control.lapsed()
        if lapsed:  # its agent may have restored mid-block: the block's levels are unknown
            raise HostLost(f"{', '.join(lapsed)}: no renewal of its lease acknowledged "
                           "within the lease during a block (the block is left out)",
                           "its agent restores it by itself when the lease lapses")
        self.study.blocks.append(Block(
            self.index, config.id, warmup, started, got.duration_s, apply_s, got.figures,
            got.pairs, "failed" if got.error else "ok", got.error))
        self.index += 1
        if not warmup:
            self.study.curves.extend(got.curves)
        self.progress(f"block {self.index}: {config.label}"
                      + (f": failed: {got.error}" if got.error else ""))

    def over_budget(self, warmup: bool) -> bool:
        """Whether --time-budget is spent (said once, as a warning)."""
        if self.out_of_time or warmup or self.deadline is None:
            return self.out_of_time
        if time.monotonic() > self.deadline:
            self.out_of_time = True
            left = len(self.study.blocks)
            self.study.warnings.append(f"the time budget was spent after {left} blocks: "
                                       "the blocks not measured are left out (a longer "
                                       "--time-budget, or fewer --repeats)")
            self.progress(self.study.warnings[-1])
        return self.out_of_time

    def run_levels(self, config: Any) -> dict[str, Any]:
        """The run-scope factors' settings for this configuration (configure())."""
        from beoperf.factors.base import Level

        levels: dict[str, Any] = {}
        for f in self.c.factors:
            if f.scope == "run":
                label = self.levels_of(config).get(f.name)
                level = f.level(label) if label else Level(DEFAULT_LEVEL, None)
                levels = dict(f.factor.configure(levels, level))
        return levels


class LevelFailed(errors.Failed):
    """A level that could not be set on a host (the reply says why)."""

    category = "level failed"

    def __init__(self, factor: str, label: str | None, why: str) -> None:
        self.factor = factor
        super().__init__(f"{label_of(factor, label or DEFAULT_LABEL)}: {why}")


def run(spec: Spec, progress: Progress | None = None, keep_document: KeepDocument | None = None,
        control: Control | None = None,
        measure_block: MeasureBlock | None = None
        ) -> Document:
    """The study with ``--apply`` (see the module docstring).  ``keep_document`` receives
    the document before an interruption or a lost host goes on as an exception."""
    if not spec.apply:
        return plan(spec, control, progress)
    started = utc_now()
    spec, notes = with_checklist(spec)
    c = check(spec)
    say = progress or (lambda _line: None)
    control, current, left_out = read_hosts(c, control)
    slurm = control.check_slurm(c.spec.study.hosts.force)
    seed = seed_of(c)
    study = new_study(c, current, seed)
    study.warnings.extend(notes + left_out)
    for host in study.hosts:
        host.slurm = slurm.get(host.name) if isinstance(slurm.get(host.name), dict) else None
    loop = Loop(c, control, study, say, measure_block or measurer(c))
    if c.design.time_budget:
        loop.deadline = time.monotonic() + c.design.time_budget
    failure: BaseException | None = None
    try:
        _run_blocks(loop)
        study.status = "complete"
    except (KeyboardInterrupt, errors.BeoperfError) as exc:
        failure = exc
        study.status, study.status_reason = _stopped(exc)
    finally:
        _finish(loop, spec.keep if study.status == "complete" else "none")
    doc = finish_document(study, spec, started)
    if keep_document is not None:
        keep_document(doc)
    if failure is not None and not isinstance(failure, HostLost):
        raise failure
    if loop.persist_error is not None:
        raise loop.persist_error
    return doc


def _stopped(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", interrupts.reason(exc)
    if isinstance(exc, HostLost):
        return "partial", str(exc)
    return "failed", str(exc)


def _run_blocks(loop: Loop) -> None:
    """Warm-up at Default before anything changes, every host armed, the blocks, then
    the combination of what helped (one-at-a-time)."""
    order = loop.study.schedule.order
    warm = order[:WARMUP]
    loop.block(warm[0], True)  # the servers answer before any change
    arm(loop)
    for cid in warm[1:]:
        loop.block(cid, True)
    if loop.c.design.name == "greedy":
        greedy(loop, order[WARMUP:])
        return
    for cid in order[WARMUP:]:
        loop.block(cid, False)
    extend(loop)
    if loop.c.design.name == "one-at-a-time":
        combined(loop)


def extend(loop: Loop) -> None:
    """--precision: after the planned rounds, one more round at a time of the levels whose
    interval on the deciding figure is wider than ±precision, until none is, each has
    --max-repeats blocks, or the time budget is spent; a level still too wide is said in
    a warning (its verdict stands, on the blocks it has)."""
    from beoperf.analysis import study as analysis

    d = loop.c.design
    figure = analysis.decide_figure(loop.study, d.decide_by)
    if d.precision is None or figure is None:
        return
    order = loop.study.schedule.order
    for number in range(d.repeats, d.repeat_limit()):
        wide = analysis.too_wide(loop.study, figure, d.precision, sorted(loop.dropped))
        if not wide or loop.out_of_time:
            break
        last = next((c for c in reversed(order) if c != DEFAULT_ID), None)
        more = analysis.extra_round(sorted(wide), last, loop.study.schedule.seed, number)
        order.extend(more)
        loop.progress(f"round {number + 1}: " + ", ".join(
            f"{loop.config(c).label} ±{_pct(w)}" for c, w in wide.items())
            + f" on {figure.key}, wider than ±{_pct(d.precision)} (--precision)")
        for cid in more:
            loop.block(cid, False)
    for cid, width in analysis.too_wide(loop.study, figure, d.precision,
                                        sorted(loop.dropped)).items():
        loop.study.warnings.append(
            f"{loop.config(cid).label}: the interval on {figure.key} is "
            f"{'not known' if width is None else '±' + _pct(width)} after "
            f"{len(analysis.triples(loop.study, cid, figure.key)[0])} blocks, wider than "
            f"--precision ±{_pct(d.precision)} (--max-repeats {d.repeat_limit()}"
            f"{' or the time budget' if loop.out_of_time else ''} reached)")


def _wider(width: float | None, precision: float) -> bool:
    return width is None or width > precision


def _pct(fraction: float | None) -> str:
    return "?" if fraction is None else f"{100 * fraction:.2g}%"


def greedy(loop: Loop, order: Sequence[str]) -> None:
    """Greedy (``tune --procedure``'s design, through the same loop and rule:
    ``analysis.greedy``): each candidate in A C A ... C A against the baseline of the
    moment (Default plus the levels kept so far), kept when it comes out better on the
    deciding figure, beyond the margin, in the family of every candidate judged x the
    headline figures (that of the final effects); its factor then stays at that level."""
    from beoperf.analysis import greedy as design
    from beoperf.analysis import study as analysis

    d = loop.c.design
    figure = analysis.decide_figure(loop.study, d.decide_by)
    candidates = list(dict.fromkeys(cid for cid in order if cid != DEFAULT_ID))

    def measure(cand: str, _kept: Sequence[str]) -> design.Trial | None:
        for cid in [DEFAULT_ID] + [cand, DEFAULT_ID] * d.repeats:
            loop.block(cid, False)  # analysis.schedule's greedy order: A C A ... C A
        if figure is None or cand in loop.dropped:
            return None
        if d.precision is not None:
            _greedy_precision(loop, cand, figure)
        return design.Trial(analysis.triples(loop.study, cand, figure.key)[0])

    def rule() -> design.Rule:
        return design.Rule(higher_is_better=figure is not None and figure.higher_is_better,
                           family=analysis.family_size(loop.study),
                           margin=loop.study.schedule.margin)

    def decided(cand: str, decision: design.Decision, _kept: Sequence[str]) -> None:
        if decision.keep:
            loop.baseline.update(loop.config(cand).levels)
            loop.progress(f"kept {loop.config(cand).label}: {figure.key if figure else ''} "
                          f"{decision.effect.verdict}")

    design.run(candidates, measure, rule, decided)


def _greedy_precision(loop: Loop, cand: str, figure: Any) -> None:
    """--precision in greedy: one C A more at a time while the candidate's interval on
    the deciding figure (in the family of the final effects) is wider than ±precision,
    up to --max-repeats blocks of it or the time budget."""
    from beoperf.analysis import study as analysis

    d = loop.c.design
    assert d.precision is not None
    for _ in range(d.repeats, d.repeat_limit()):
        found = analysis.effect_of(loop.study, cand, figure,
                                   family=analysis.family_size(loop.study))
        if loop.out_of_time or not _wider(analysis.half_width(found), d.precision):
            return
        _greedy_more(loop, cand)


def _greedy_more(loop: Loop, cand: str) -> None:
    """One more C A of a greedy candidate (--precision), recorded in the order after the
    candidate's last block."""
    order = loop.study.schedule.order
    at = len(order) - order[::-1].index(cand) + 1 if cand in order else len(order)
    order[at:at] = [cand, DEFAULT_ID]
    for cid in (cand, DEFAULT_ID):
        loop.block(cid, False)


def arm(loop: Loop) -> None:
    """Every host's dead-man agent armed with its plan; a host that did not arm is never
    changed, and the study does not go on."""
    armed = loop.control.arm(loop.c.names)
    for host in loop.study.hosts:
        reply = armed.get(host.name, {})
        host.agent = {k: reply[k] for k in ("pid", "dir", "rollback_file", "lease_s")
                      if k in reply}
        host.interface = _text(reply, "interface") or host.interface
    bad = {h: r for h, r in armed.items() if not r.get("ok")}
    if bad:
        host, reply = next(iter(bad.items()))
        raise errors.Failed(f"{host} did not arm: {reply.get('error')}",
                            "nothing was changed on any host")
    loop.progress(f"armed {len(armed)} host(s), lease {loop.c.design.lease:g} s")
    for f in loop.c.factors:
        if f.fixed:
            loop.set(f, f.levels[0].label)


def combined(loop: Loop) -> None:
    """The levels that helped, together, as one more configuration against Default, in
    ``repeats`` blocks each between two Default blocks (only when more than one helped)."""
    from beoperf.analysis import study as analysis

    study = analysis.analyse(loop.study)
    config = analysis.combined_configuration(
        study, analysis.helped(study, study.effects, loop.c.design.decide_by))
    if config is None:
        return
    study.configurations.append(config)
    study.combined = analysis.new_combined(config)
    order = analysis.schedule_combined(config.id, loop.c.design.repeats)
    study.schedule.order.extend(order)
    loop.progress(f"{config.label}: measured against Default")
    for cid in order:
        loop.block(cid, False)


def _finish(loop: Loop, keep: str) -> None:
    """Every host restored (or what helped kept): each host's end in the document."""
    from beoperf.analysis import study as analysis
    from beoperf.model.study import HostEnd, Kept

    kept: list[tuple[str, str]] = []
    if keep == "best" and loop.study.status == "complete":
        study = analysis.analyse(loop.study)
        kept = list(analysis.helped(study, study.effects, loop.c.design.decide_by).items())
    with interrupts.deferred():
        ends = loop.control.finish(kept)
    for host in loop.study.hosts:
        end = ends.get(host.name)
        if end is not None:
            host.end = HostEnd(str(end.get("state", "unreachable")), _text(end, "detail"),
                               _text(end, "restore_command"), _object(end, "result"))
            if host.end.state == "not-changed" and host.name in loop.changed:
                # its levels were put back to Default before the end: restored all the same
                host.end.state, host.end.detail = "restored", "back to its snapshot"
            loop.progress(f"{host.name}: {host.end.state}"
                          + (f" ({host.end.detail})" if host.end.detail else ""))
    loop.study.kept = [Kept(f, lv) for f, lv in kept]
    if kept and loop.c.spec.persist:
        try:
            loop.study.persist_files = write_persist(loop.c, kept, loop.c.spec.persist)
        except errors.OutputError as exc:  # after the document is kept (run)
            loop.study.warnings.append(str(exc))
            loop.persist_error = exc
            return
        loop.progress(f"wrote {', '.join(loop.study.persist_files)} (review, then install "
                      "by hand: nothing was installed)")


def write_persist(c: Checked, kept: Sequence[tuple[str, str]], directory: str) -> list[str]:
    """Each kept level's persist file (``Factor.persist``) in ``directory``: new files
    only, never through a link; the paths written.  One file a factor (the lines of
    several levels of a file name would be one file, but a factor keeps one level)."""
    files: dict[str, str] = {}
    for name, label in kept:
        f = c.factor(name)
        found = f.factor.persist(f.level(label))
        if found is not None:
            files[found[0]] = files.get(found[0], "") + found[1]
    paths = []
    try:
        os.makedirs(directory, exist_ok=True)
        for base, text in files.items():
            path = os.path.join(directory, base)
            safeio.write_atomic(path, text, overwrite=False)
            paths.append(path)
    except FileExistsError as exc:
        raise errors.OutputError(f"--persist: {exc.filename} exists; not overwritten") from None
    except OSError as exc:
        raise errors.OutputError(f"--persist {directory}: {exc.strerror or exc}") from None
    return paths


def _text(o: Mapping[str, Any], key: str) -> str | None:
    value = o.get(key)
    return None if value is None else str(value)


def _object(o: Mapping[str, Any], key: str) -> JsonObject | None:
    value = o.get(key)
    return value if isinstance(value, dict) else None


# --------------------------------------------------------------------------- measuring


def where_of(c: Checked) -> Any:
    """Where the blocks run (study_measure.Where): the pairs (client, server's data
    address), how each host is reached, whether the controller is the client (--peer:
    then every pair runs in this process), the servers' port, every host."""
    from beoperf.suites import study_measure

    h = c.spec.study.hosts
    reach = {name: study_measure.Reach(LOCAL_TEMPLATE if name == study_spec.LOCAL
                                       else h.agent, h.remote_command)
             for name in c.names}
    return study_measure.Where(tuple((client, c.addresses[server]) for client, server
                                     in c.pairs), reach, bool(h.peer), h.port,
                               tuple(c.names))


def pair_figures(c: Checked, sample: Any) -> dict[str, dict[str, float]]:
    """Each pair's figures ("client>server" -> key -> value), with what its client's
    socket reported: the MSS (``mss_bytes``: what the headers leave of a frame) and the
    buffer sizes the kernel granted (``granted_sndbuf_bytes``, ``granted_rcvbuf_bytes``)."""
    names = {address: name for name, address in c.addresses.items()}
    pairs = sample.detail.get("pairs") if isinstance(sample.detail, dict) else None
    out: dict[str, dict[str, float]] = {}
    for label, found in (pairs or {}).items():
        if not isinstance(found, dict):
            continue
        client, _, server = str(label).partition(">")
        figures = {k: float(v) for k, v in (found.get("figures") or {}).items()
                   if isinstance(v, (int, float))}
        if isinstance(found.get("mss"), int):
            figures["mss_bytes"] = float(found["mss"])
        granted = found.get("granted")
        for key, value in (granted.items() if isinstance(granted, dict) else ()):
            if isinstance(value, int):
                figures[f"granted_{key}_bytes"] = float(value)
        out[f"{client}>{names.get(server, server)}"] = figures
    return out


def measurer(c: Checked) -> MeasureBlock:
    """Measure one block: every measurement in turn with the run levels; the figures,
    each pair's, the curves and the first error (a failed block)."""
    from beoperf.model.study import Curve

    where = where_of(c)
    budget = c.design.block_time

    def measure(config: Any, run_levels: Mapping[str, Any]) -> Measured:
        out = Measured()
        for m in c.measures:
            sample = m.measure(where, dict(run_levels), budget)
            out.duration_s += float(sample.duration_s)
            if sample.error:
                out.error = out.error or f"{m.name}: {sample.error}"
                continue
            out.figures.update(sample.figures)
            for pair, found in pair_figures(c, sample).items():
                out.pairs.setdefault(pair, {}).update(found)
            if sample.curve:
                out.curves.append(Curve(config.id, m.name, "bit/s",
                                        [(float(x), float(y)) for x, y in sample.curve]))
        return out

    return measure


# --------------------------------------------------------------------------- helpers


def estimate_s(c: Checked, blocks: int) -> float:
    """A rough wall time of ``blocks`` blocks: each measurement's block time."""
    return blocks * c.design.block_time * max(1, len(c.measures))
