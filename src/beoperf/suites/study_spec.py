"""What a study is made of, before anything runs: its hosts, pairs and data addresses, its
factors and levels (as the user wrote them), its measurements and its design; the presets
for the published experiments (``mtu``, ``buffers``, ``latency-checklist``); and the study
file (TOML) for anything else.

A study file can make root run commands (``--measure-command``) and load firewall
rulesets, so it is read as a rollback file is: bounded (``safeio.LIMITS["study"]``), a
regular file owned by the user and writable by nobody else, parsed with ``tomllib`` and
checked against ``model/schemas/study-file.json`` before any of it is used.  Nothing here
contacts a host or imports a factor: the suite (``suites/study.py``) checks the levels
through each factor's ``parse``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from beoperf import errors, safeio, units
from beoperf.engines.protocol import DEFAULT_PORT
from beoperf.launch import hosts as hostnames
from beoperf.model import document

PRESETS = ("mtu", "buffers", "latency-checklist")
DESIGNS = ("one-at-a-time", "greedy", "factorial")
MEASUREMENT_NAMES = ("pingpong", "ring", "hpl", "hpcc", "node", "command")
CHECKLIST_OPTIONAL = ("irqbalance", "firewall")  # left out where a host cannot change them
MIN_REPEATS = 4  # as tune --procedure: with fewer, t's interval is too wide to decide
MAX_REPEATS = 1000
DEFAULT_REPEATS = 6
# analysis.effect.DEFAULT_MARGIN, written here so that `beoperf study agent ...` (a Python
# start per request through the exec template) does not import numpy; a test holds the two
# equal
DEFAULT_MARGIN = 0.10
PRECISION_ROUNDS = 3  # --precision without --max-repeats: at most 3 x --repeats
DEFAULT_LEASE_S = 60.0
MIN_LEASE_S = 3.0
DEFAULT_SETTLE_S = 1.0
DEFAULT_BLOCK_S = 2.0
LOCAL = "localhost"  # the controller's own name among the hosts (--peer)
STUDY_LIMIT = safeio.LIMITS.get("study", 1024 * 1024)
PAIRS_LIMIT = 1024 * 1024
LATENCY_SIZE = 16  # bytes: the papers' small-message latency
STREAM_SIZE = 1024 * 1024  # bytes: the stream goodput's message size
_FACTOR_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_ADDRESS = re.compile(r"[A-Za-z0-9_.:%-]{1,253}")


@dataclass(frozen=True)
class FactorSpec:
    """A factor as written: its registered name, its levels' texts (each checked by the
    factor's ``parse``) and the hosts it changes (empty: every host of the study).  A
    ``fixed`` factor has one level, set once after the hosts are armed and kept in every
    configuration, Default included (the ``buffers`` preset's raised limits)."""

    name: str
    levels: tuple[str, ...]
    hosts: tuple[str, ...] = ()
    fixed: bool = False


@dataclass(frozen=True)
class MeasureSpec:
    """A measurement by name and its parameters (sizes, mode, command, figure regex ...)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HostsSpec:
    """Who takes part and how they are reached: ``--peer`` (this host and the peer) or a
    node set (``-w``), reached over ssh, through ``exec_template`` (a local command naming
    the host with %h) or ``ssh_command`` (an ssh-like command the host's name follows);
    the pairs measured (client, server), the address each host is measured at, and the
    interface."""

    peer: str | None = None
    nodes: str | None = None
    exec_template: str | None = None
    remote_command: str = "python3 -m beoperf"
    fanout: int = 64
    timeout: float = 60.0
    pairs: tuple[tuple[str, str], ...] = ()
    data_address: tuple[tuple[str, str], ...] = ()
    interface: str | None = None
    port: int = DEFAULT_PORT
    force: bool = False
    ssh_command: str | None = None

    @property
    def agent(self) -> str | None:
        """How the remote-host layer reaches a host (``LaunchSpec.agent``): the exec
        template, the ssh-like command, or None (ClusterShell's ssh)."""
        return self.exec_template or self.ssh_command


@dataclass(frozen=True)
class DesignSpec:
    """How the configurations are measured: the design, blocks per configuration, the
    time budget, a block's measuring time, the seed of the order, the margin within which
    a change counts as none, the figure that decides what helped, the lease of every
    host's dead-man agent, the extra settle time after a change, and --precision: after
    the planned repeats, go on a round at a time while a level's interval on the deciding
    figure is wider than ±precision, up to max_repeats (default 3 x repeats)."""

    name: str = "one-at-a-time"
    repeats: int = DEFAULT_REPEATS
    time_budget: float | None = None
    block_time: float = DEFAULT_BLOCK_S
    seed: int | None = None
    margin: float = DEFAULT_MARGIN
    decide_by: str | None = None
    lease: float = DEFAULT_LEASE_S
    settle: float = DEFAULT_SETTLE_S
    precision: float | None = None
    max_repeats: int | None = None

    def repeat_limit(self) -> int:
        """The most blocks of a configuration: the planned repeats, or with --precision
        --max-repeats (default PRECISION_ROUNDS x repeats, within MAX_REPEATS)."""
        if self.precision is None:
            return self.repeats
        if self.max_repeats is not None:
            return self.max_repeats
        return min(MAX_REPEATS, PRECISION_ROUNDS * self.repeats)


@dataclass(frozen=True)
class StudySpec:
    """A whole study as written (a preset's or a study file's), still unchecked against
    the factors' and measurements' registries."""

    name: str
    hosts: HostsSpec
    factors: tuple[FactorSpec, ...]
    measures: tuple[MeasureSpec, ...]
    design: DesignSpec = DesignSpec()


# --------------------------------------------------------------------------- hosts


def host_names(hosts: HostsSpec) -> list[str]:
    """Every host of the study, the controller's own first with ``--peer``; BadSpec for
    a bad name or node set."""
    if bool(hosts.peer) == bool(hosts.nodes):
        raise errors.BadSpec("name the hosts: --peer HOST or -w NODESET (one of them)")
    try:
        if hosts.peer:
            return [LOCAL, hostnames.check(hosts.peer, "--peer")]
        assert hosts.nodes is not None
        names = hostnames.expand(hosts.nodes, "-w")
    except hostnames.HostError as exc:
        raise errors.BadSpec(str(exc)) from None
    if len(names) < 2:
        raise errors.BadSpec(f"-w {hosts.nodes}: a study measures between hosts: name at "
                             "least 2")
    return names


def pairs_of(hosts: HostsSpec, names: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs measured, (client, server): those given, each of the study's hosts; by
    default this host against the peer, or each host against the first of the node set."""
    if hosts.pairs:
        for client, server in hosts.pairs:
            for name in (client, server):
                if name not in names:
                    raise errors.BadSpec(f"pair {client} {server}: {name} is not one of "
                                         "the study's hosts")
            if client == server:
                raise errors.BadSpec(f"pair {client} {server}: a host with itself")
        return list(hosts.pairs)
    if hosts.peer:
        return [(names[0], names[1])]
    return [(name, names[0]) for name in names[1:]]


def parse_pairs(text: str, source: str) -> tuple[tuple[str, str], ...]:
    """A pairs file: 'CLIENT SERVER' a line ('#' comments); BadSpec otherwise."""
    found: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise errors.BadSpec(f"{source}: line {number}: give 'CLIENT SERVER'")
        try:
            found.append((hostnames.check(words[0], source), hostnames.check(words[1], source)))
        except hostnames.HostError as exc:
            raise errors.BadSpec(str(exc)) from None
    if not found:
        raise errors.BadSpec(f"{source}: no pair in it")
    return tuple(found)


def read_pairs(path: str) -> tuple[tuple[str, str], ...]:
    """--pairs FILE, read bounded."""
    try:
        text = safeio.read_text(path, PAIRS_LIMIT, "a pairs file")
    except safeio.FileInputError as exc:
        raise errors.BadSpec(f"--pairs: {exc}") from None
    return parse_pairs(text, path)


def parse_data_addresses(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """--data-address HOST=ADDR (repeatable): the address a host is measured at, apart
    from the name it is reached by; BadSpec for a malformed one or a host given twice."""
    found: dict[str, str] = {}
    for item in items:
        host, sep, address = item.partition("=")
        if not sep or not host or not _ADDRESS.fullmatch(address):
            raise errors.BadSpec(f"--data-address {item!r}: give HOST=ADDRESS")
        try:
            hostnames.check(host, "--data-address")
        except hostnames.HostError as exc:
            raise errors.BadSpec(str(exc)) from None
        if host in found:
            raise errors.BadSpec(f"--data-address: {host} given twice")
        found[host] = address
    return tuple(found.items())


def data_addresses(hosts: HostsSpec, names: Sequence[str]) -> dict[str, str]:
    """Each host's data address: the one given, else its name (the peer's as given)."""
    given = dict(hosts.data_address)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise errors.BadSpec(f"--data-address {unknown[0]}: not one of the study's hosts")
    return {name: given.get(name, name) for name in names}


# --------------------------------------------------------------------------- factors


def parse_factor_option(text: str) -> FactorSpec:
    """--factor NAME=L1,L2 (a level may hold commas only inside file: paths, so levels
    split on commas); BadSpec otherwise."""
    name, sep, levels = text.partition("=")
    name = name.strip()
    if not sep or not _FACTOR_NAME.fullmatch(name):
        raise errors.BadSpec(f"--factor {text!r}: give NAME=LEVEL1,LEVEL2")
    return FactorSpec(name, split_levels(levels, f"--factor {name}"))


def split_levels(text: str, source: str) -> tuple[str, ...]:
    """'1500,3000,9000' -> ('1500', '3000', '9000'); BadSpec for none or a repeat."""
    levels = tuple(p.strip() for p in text.split(",") if p.strip())
    if not levels:
        raise errors.BadSpec(f"{source}: no level given")
    if len(set(levels)) != len(levels):
        raise errors.BadSpec(f"{source}: a level given twice")
    return levels


# --------------------------------------------------------------------------- presets


def pingpong_measure(curve: bool = False, latency: int | None = LATENCY_SIZE,
                     goodput: int | None = STREAM_SIZE) -> MeasureSpec:
    """The papers' pair of figures: the latency at 16 B and the stream goodput at 1 MiB
    measured with the system's congestion control (not the ping-pong's Reno)."""
    return MeasureSpec("pingpong", {"latency_size": latency, "goodput_size": goodput,
                                    "curve": curve})


def preset(name: str, levels: tuple[str, ...], extra_factors: Sequence[FactorSpec] = (),
           extra_measures: Sequence[MeasureSpec] = (), curve: bool = False,
           checklist: Sequence[FactorSpec] = ()) -> tuple[tuple[FactorSpec, ...],
                                                          tuple[MeasureSpec, ...]]:
    """The factors and measurements of a preset, with the user's --factor and --measure
    added; ``checklist`` is what the latency audit found on the hosts (the suite reads
    it).  BadSpec for an unknown preset or a preset that needs --levels without them."""
    factors: tuple[FactorSpec, ...]
    if name == "mtu":
        factors = (FactorSpec("mtu", _needs(levels, name)),)
        measures: tuple[MeasureSpec, ...] = (pingpong_measure(curve),)
    elif name == "buffers":
        # the socket option varies; the host's limits are raised to the largest level in
        # every configuration (Default included), so that only the option differs
        limit = buffers_limit(_needs(levels, name))
        factors = (FactorSpec("sockbuf", levels),
                   *((FactorSpec("buffers", (limit,), fixed=True),) if limit else ()))
        measures = (pingpong_measure(curve, goodput=4 * STREAM_SIZE),)
    elif name == "latency-checklist":
        if levels:
            raise errors.BadSpec("latency-checklist: its factors come from the latency "
                                 "audit; add others with --factor NAME=LEVELS")
        factors = (*checklist, FactorSpec("irqbalance", ("off",)),
                   FactorSpec("firewall", ("flush",)),
                   FactorSpec("sysctl", ("net.core.busy_poll=50",)))
        measures = (pingpong_measure(curve, goodput=None),)
    else:
        raise errors.BadSpec(f"unknown preset {name!r}: choose {', '.join(PRESETS)}")
    return merged(factors, extra_factors), (*measures, *extra_measures)


def _needs(levels: tuple[str, ...], name: str) -> tuple[str, ...]:
    if not levels:
        raise errors.BadSpec(f"study {name} needs --levels L1,L2,...")
    return levels


def merged(factors: Sequence[FactorSpec], extra: Sequence[FactorSpec]) -> tuple[FactorSpec, ...]:
    """The factors with the extra ones after them; BadSpec for a factor named twice."""
    names = [f.name for f in (*factors, *extra)]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise errors.BadSpec(f"factor {twice} given twice")
    return (*factors, *extra)


def buffers_limit(levels: Sequence[str]) -> str | None:
    """The largest socket-buffer level in bytes, as the ``buffers`` host factor's level
    that covers every configuration ('default' is no size); None when none is a size."""
    sizes = []
    for level in levels:
        try:
            sizes.append(units.parse_size(level))
        except ValueError:
            continue
    return str(max(sizes)) if sizes else None


# --------------------------------------------------------------------------- design


def check_design(design: DesignSpec) -> None:
    """BadSpec for a design this study cannot run."""
    if design.name not in DESIGNS:
        raise errors.BadSpec(f"--design {design.name}: choose {', '.join(DESIGNS)}")
    if not MIN_REPEATS <= design.repeats <= MAX_REPEATS:
        raise errors.BadSpec(f"--repeats {design.repeats}: give {MIN_REPEATS} to "
                             f"{MAX_REPEATS} (with fewer than {MIN_REPEATS} blocks no "
                             "change can be shown to help)")
    if not 0 <= design.margin < 1:
        raise errors.BadSpec(f"--margin {design.margin}: give a fraction below 1 (e.g. 1%)")
    _check_precision(design)
    if design.lease < MIN_LEASE_S:
        raise errors.BadSpec(f"--lease {design.lease:g}: give at least {MIN_LEASE_S:g} s")
    for name, value in (("--block-time", design.block_time), ("--settle", design.settle),
                        ("--time-budget", design.time_budget)):
        if value is not None and not (0 <= value < 1e7):
            raise errors.BadSpec(f"{name} {value:g}: give seconds, at least 0")


def _check_precision(design: DesignSpec) -> None:
    if design.precision is not None and not 0 < design.precision < 1:
        raise errors.BadSpec(f"--precision {design.precision:g}: give a fraction above 0 "
                             "and below 1 (e.g. 1%)")
    if design.max_repeats is not None:
        if design.precision is None:
            raise errors.BadSpec("--max-repeats: give it with --precision (without it "
                                 "every configuration gets --repeats blocks)")
        if not design.repeats <= design.max_repeats <= MAX_REPEATS:
            raise errors.BadSpec(f"--max-repeats {design.max_repeats}: give --repeats "
                                 f"({design.repeats}) to {MAX_REPEATS}")


# --------------------------------------------------------------------------- study file


def read_study_file(path: str) -> dict[str, Any]:
    """A study file's content: bounded, a private regular file (owned by the user,
    writable by nobody else), TOML, valid against the study-file schema.  Every problem
    is BadSpec naming the file and what is wrong; nothing of it is used before."""
    try:
        text = safeio.read_text(path, STUDY_LIMIT, "a study file", private=True)
    except safeio.FileInputError as exc:
        raise errors.BadSpec(str(exc), "a study file may make root run commands: keep it "
                             "yours and writable by you only (chmod 600)") from None
    try:
        content = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise errors.BadSpec(f"{path}: not TOML: {exc}") from None
    check_schema(content, path)
    return content


def check_schema(content: dict[str, Any], source: str) -> None:
    """BadSpec naming the first place where ``content`` breaks the study-file schema."""
    import jsonschema

    schema = document.schema("study-file")
    error = jsonschema.exceptions.best_match(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(content))
    if error is None:
        return
    where = "/".join(str(p) for p in error.absolute_path) or "(top)"
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    raise errors.BadSpec(f"{source}: at {where}: {_printable(message)}")


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def from_file(content: Mapping[str, Any], path: str, hosts: HostsSpec,
              design: DesignSpec) -> StudySpec:
    """The study a (checked) file describes.  Its [hosts] table is used unless the
    command line names the hosts (--peer, -w); the values its [design] table gives
    replace the command line's.  A level is one string of the list, commas and all (an
    MPI environment's KEY=VALUE;KEY=VALUE, whose values may hold commas)."""
    factors = tuple(FactorSpec(f["name"], _levels(f["levels"], f"{path}: factor {f['name']}"),
                               tuple(f.get("hosts", ())))
                    for f in content.get("factor", ()))
    measures = tuple(MeasureSpec(m["name"], dict(m.get("params", {})))
                     for m in content.get("measure", ()))
    return StudySpec(f"file:{os.path.abspath(path)}", _file_hosts(content.get("hosts", {}), hosts),
                     merged(factors, ()), measures, _file_design(content.get("design", {}),
                                                                  design))


def _levels(levels: Sequence[str], source: str) -> tuple[str, ...]:
    found = tuple(level.strip() for level in levels)
    if len(set(found)) != len(found):
        raise errors.BadSpec(f"{source}: a level given twice")
    return found


def _file_hosts(table: Mapping[str, Any], hosts: HostsSpec) -> HostsSpec:
    if hosts.peer or hosts.nodes:  # the command line names the hosts: it wins
        return hosts
    return replace(hosts, peer=table.get("peer"), nodes=table.get("nodes"),
                   exec_template=table.get("exec_template", hosts.exec_template),
                   interface=table.get("interface", hosts.interface),
                   port=table.get("port", hosts.port),
                   pairs=tuple(tuple(p) for p in table.get("pairs", ())) or hosts.pairs,
                   data_address=tuple(table.get("data_address", {}).items())
                   or hosts.data_address)


def _file_design(table: Mapping[str, Any], design: DesignSpec) -> DesignSpec:
    keys = {"name": "name", "repeats": "repeats", "time_budget": "time_budget",
            "margin": "margin", "seed": "seed", "lease": "lease", "block_time": "block_time",
            "settle": "settle", "decide_by": "decide_by", "precision": "precision",
            "max_repeats": "max_repeats"}
    given = {field_: table[key] for key, field_ in keys.items() if key in table}
    for key in ("margin", "precision"):
        if isinstance(given.get(key), str):
            try:
                given[key] = units.parse_fraction(given[key])
            except ValueError as exc:
                raise errors.BadSpec(f"[design] {key}: {exc}") from None
    return replace(design, **given)
