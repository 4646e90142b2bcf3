"""`beoperf lab`: namespace hosts to try every command in (the mechanics are
:mod:`beoperf.launch.lab`); what to type next, as lines."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from beoperf import errors, units
from beoperf.launch import lab as mechanics

DEFAULT_NAME = "lab"


@dataclass(frozen=True)
class Spec:
    """A lab to build: as :class:`beoperf.launch.lab.Lab` takes it (``rate`` in bit/s,
    ``burst`` in bytes, ``host_mtu`` host index -> MTU)."""

    name: str = DEFAULT_NAME
    hosts: int = 4
    rate: float | None = None
    burst: int | None = None
    mtu: int = 1500
    host_mtu: Mapping[int, int] = field(default_factory=dict)
    switch_mtu: int | None = None
    sshd: bool = True
    controller: bool = True


def lab_of(spec: Spec) -> mechanics.Lab:
    """The lab ``spec`` describes (BadSpec for values it cannot take)."""
    return mechanics.Lab(spec.name, hosts=spec.hosts, rate=spec.rate, burst=spec.burst,
                         mtu=spec.mtu, switch_mtu=spec.switch_mtu, sshd=spec.sshd,
                         controller=spec.controller, host_mtu=dict(spec.host_mtu))


def up(spec: Spec) -> mechanics.LabState:
    """Build the lab; its state (what ``lab status`` shows)."""
    return lab_of(spec).up()


def down(name: str) -> list[str]:
    """Remove lab ``name`` (nothing to do is not an error); the namespaces removed, and
    the study directories its hosts' agents left under /run (which the lab shares with
    this host), by their namespace's inode."""
    from beoperf.factors import agent

    inodes = mechanics.namespace_inodes(name)
    removed = mechanics.down(name)
    agent.forget_namespaces(inodes)
    return removed


def status(name: str) -> mechanics.LabState:
    """The lab's state and what runs now; Failed when there is no such lab."""
    state = mechanics.status(name)
    if state is None:
        raise errors.Failed(f"no lab named {name}", "'beoperf lab up --name NAME' builds one")
    return state


def names() -> list[str]:
    return mechanics.labs()


def up_lines(state: mechanics.LabState) -> list[str]:
    """What ``lab up`` prints: the lab, then how to reach its hosts and what to try."""
    hosts = state["hosts"]
    ctl, nodeset, name = state["controller"], state["nodeset"], state["name"]
    mtus = sorted({h["mtu"] for h in hosts})
    shaping = "unshaped" if state["rate_bps"] is None else \
        f"{units.format_rate(state['rate_bps'])} each way (tbf, burst " \
        f"{units.format_size(state['burst'])})"
    ports = state["switch_mtu"] or mechanics.PORT_MTU
    lines = [f"lab {name} up: {len(hosts)} hosts {nodeset} at "
             f"{hosts[0]['addr4']}-{hosts[-1]['addr4'].rsplit('.', 1)[1]}, MTU "
             f"{'/'.join(map(str, mtus))}, {shaping}; switch ports MTU {ports}",
             f"  exec template:  --exec-template {shlex.quote(state['exec_template'])} "
             f"-w {shlex.quote(nodeset)}"]
    if state["ssh_agent"]:
        lines.append(f"  ssh agent (from {ctl}):  {state['ssh_agent']}")
        lines.append(f"  a study over ssh (from {ctl}):  --ssh-command "
                     f"{shlex.quote(state['ssh_agent'])} -w "
                     + shlex.quote(",".join(h["addr4"] for h in hosts)))
    pairs = " ".join(f"--data-address {h['name']}={h['addr4']}" for h in hosts)
    lines.append(f"  data addresses:  {pairs}")
    if ctl and len(hosts) >= 2:
        a, b = hosts[0]["name"], hosts[1]["name"]
        lines += [f"  controller:  ip netns exec {ctl} COMMAND   (unshaped, "
                  f"{state['controller_addr4']})",
                  f"  try:  ip netns exec {b} beoperf serve &",
                  f"        ip netns exec {ctl} beoperf study mtu -w {a},{b} --exec-template "
                  f"{shlex.quote(state['exec_template'])} --data-address {b}="
                  f"{hosts[1]['addr4']} --levels 1500,9000 --margin 1%"]
    lines.append(f"  remove:  beoperf lab down --name {name}")
    return lines


def status_lines(state: mechanics.LabState) -> list[str]:
    """What ``lab status`` prints."""
    lines = [f"lab {state['name']}: {state['status']}, {len(state['hosts'])} hosts "
             f"{state['nodeset']}"]
    if state["missing"]:
        lines.append(f"  missing namespaces: {', '.join(state['missing'])} "
                     f"('beoperf lab down --name {state['name']}' cleans up)")
    stopped = [ns for ns, up in state["sshd_running"].items() if not up]
    if state["sshd"]:
        lines.append("  sshd: " + (f"not running in {', '.join(stopped)}" if stopped
                                   else f"running in {len(state['sshd_running'])} hosts"))
    return lines
