"""What an MPI run's curve says about the library: the eager/rendezvous switch, the
setting that moves it, and the MPI overhead per size against a TCP run.

An MPI library sends a small message at once (eager: copied into the receiver's buffers)
and a large one only after a handshake (rendezvous).  The switch shows as one of the
piecewise fit's protocol thresholds (beoperf.analysis.curve); which setting moves it
depends on the path the library took:

==========================================  =====================================  =========
path                                        setting                                default
==========================================  =====================================  =========
Open MPI ob1, shared memory (btl vader)     ``OMPI_MCA_btl_vader_eager_limit``     4096 B
Open MPI ob1, shared memory (btl sm, 5.x)   ``OMPI_MCA_btl_sm_eager_limit``        4096 B
Open MPI ob1, TCP (btl tcp)                 ``OMPI_MCA_btl_tcp_eager_limit``       65536 B
Open MPI pml ucx, MPICH ch4:ucx             ``UCX_RNDV_THRESH``                    auto
==========================================  =====================================  =========

The threshold taken as the switch is the one nearest (in log size) to the setting's value
(the environment's, else the default), within a factor of two; where the value is UCX's
"auto", every threshold is a candidate and none is named.  (Open MPI counts its own
header in the limit, so the switch shows at the limit or one size below it.)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from beoperf import units
from beoperf.analysis.curve import analyze_run
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject
from beoperf.model.pingpong import RunResult

OPEN_MPI_BTL = {"vader": 4096, "sm": 4096, "tcp": 65536}  # btl_<name>_eager_limit defaults
MATCH_FACTOR = 2.0


@dataclass
class ProtocolSwitch:
    """The eager/rendezvous switch of one MPI run: the path, the setting that moves the
    switch and its value (where it came from), and the threshold found near it."""

    path: str
    setting: str
    value_bytes: int | None  # None: the library decides (UCX's auto)
    value_source: str  # "environment" or "default"
    threshold: int | None  # the piecewise fit's threshold taken as the switch
    thresholds: list[int]

    def to_dict(self) -> JsonObject:
        return asdict(self)

    def text(self) -> str:
        """One line for the summary."""
        value = (f"{self.value_bytes} B, {self.value_source}" if self.value_bytes is not None
                 else f"{self.value_source}: the library decides")
        how = f"set {self.setting}, e.g. --sweep mpi-env:{self.setting}=V1,V2"
        if self.threshold is not None:
            return (f"eager/rendezvous switch at {self.threshold} B ({self.path}); "
                    f"{self.setting} ({value}) moves it: {how}")
        found = ", ".join(str(t) for t in self.thresholds) + " B" if self.thresholds else "none"
        return (f"eager/rendezvous switch: no threshold near {self.setting} ({value}; "
                f"thresholds found: {found}) ({self.path}); {how}")


def _same_host(local: JsonObject, remote: JsonObject) -> bool:
    keys = ("host", "net_namespace")
    return all(local.get(k) == remote.get(k) for k in keys)


def path_and_setting(run: RunResult) -> tuple[str, str, int | None] | None:
    """(path, setting, default bytes or None) of an MPI run; None if it is not one or
    the path cannot be told."""
    if run.parameters.get("transport") != "mpi":
        return None
    local, remote = run.local, run.remote
    mpi = jsonvalue.section(local, "mpi")
    chosen = jsonvalue.section(local, "transport")
    pml = jsonvalue.texts(chosen, "pml")
    if mpi.get("implementation") == "openmpi" and "ucx" not in pml:
        btls = jsonvalue.texts(chosen, "btl")
        shm = next((b for b in ("vader", "sm") if b in btls), None)
        btl = shm if _same_host(local, remote) and shm else ("tcp" if "tcp" in btls else None)
        if btl is None:
            return None
        where = "shared memory" if btl in ("vader", "sm") else "TCP"
        return (f"Open MPI ob1, btl {btl} ({where})", f"OMPI_MCA_btl_{btl}_eager_limit",
                OPEN_MPI_BTL[btl])
    if "ucx" in pml or "ucx" in str(mpi.get("device") or ""):
        name = "Open MPI pml ucx" if mpi.get("implementation") == "openmpi" else \
            f"MPICH {mpi.get('device')}"
        return name, "UCX_RNDV_THRESH", None
    return None


def _value(run: RunResult, setting: str) -> tuple[int | None, str] | None:
    """The setting's value in the run's environment (its ranks' or the one beoperf gave
    them), if set and a size."""
    envs = [jsonvalue.section(run.local, "environment"),
            jsonvalue.section(run.parameters, "mpi_env")]
    for env in envs:
        text = env.get(setting)
        if text is None:
            continue
        try:
            return units.parse_size(str(text).strip().upper().removesuffix("B")), "environment"
        except ValueError:
            return None, f"environment ({text})"
    return None


def protocol_switch(run: RunResult) -> ProtocolSwitch | None:
    """The eager/rendezvous switch of an MPI run (see the module docstring)."""
    found = path_and_setting(run)
    analysis = analyze_run(run)
    if found is None or analysis is None:
        return None
    path, setting, default = found
    value, source = _value(run, setting) or (default, "default" if default else "auto")
    thresholds = list(analysis.thresholds)
    threshold = None
    if value is not None and thresholds:
        near = min(thresholds, key=lambda t: abs(math.log(t / value)))
        if abs(math.log(near / value)) <= math.log(MATCH_FACTOR):
            threshold = near
    return ProtocolSwitch(path, setting, value, source, threshold, thresholds)


@dataclass
class Overhead:
    """One size in both runs: one-way times (us) and what the second adds."""

    size: int
    base_us: float
    other_us: float

    @property
    def added_us(self) -> float:
        return self.other_us - self.base_us

    @property
    def ratio(self) -> float:
        return self.other_us / self.base_us


def overhead(base: RunResult, other: RunResult) -> list[Overhead]:
    """Per size measured in both runs (in size order): the base's and the other's
    central one-way time (e.g. TCP and MPI on the same pair of hosts)."""
    times = {s.size: s.central_time_us() for s in base.sizes}
    return [Overhead(s.size, times[s.size], s.central_time_us())
            for s in other.sizes if s.size in times]
