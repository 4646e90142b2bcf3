"""What `beoperf pingpong --transport mpi` needs beyond a TCP sweep's spec: where the
ranks run, which MPI and launcher, and the MPI variants of the loops."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

RECV_MODES = ("blocking", "nonblocking")
IMPLEMENTATIONS = ("openmpi", "mpich")
LAUNCHERS = ("mpirun", "srun")
BINDINGS = ("none", "core", "socket")
DEFAULT_WINDOW = 64  # as osu_bw


class MpiParams(TypedDict):
    """The MPI options a session's parameters carry (engines.base.SessionParams)."""

    window: int
    sync: bool
    recv: str
    bind: str
    mpi_env: dict[str, str]


@dataclass(frozen=True)
class MpiOptions:
    """hosts: the one or two hosts of the two ranks (none: both here, shared memory);
    implementation: openmpi or mpich (None: Open MPI if installed); launcher: mpirun or srun
    (None: srun inside a Slurm allocation without hosts, else mpirun); window: messages in
    flight per acknowledgement in stream mode; sync: MPI_Ssend; recv: blocking MPI_Recv or a
    receive posted before the send (nonblocking); bind: CPU binding of the ranks; agent:
    how mpirun reaches a host (an rsh/ssh-like command); interface: the network interface
    MPI must use; env: variables every rank gets (OMPI_MCA_*, UCX_*, MPIR_CVAR_* ...);
    launcher_args: passed to the launcher as they are; deadline: seconds the whole job may
    take (None: the time budget plus a margin)."""

    hosts: tuple[str, ...] = ()
    implementation: str | None = None
    launcher: str | None = None
    window: int = DEFAULT_WINDOW
    sync: bool = False
    recv: str = "blocking"
    bind: str = "core"
    agent: str | None = None
    interface: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    launcher_args: tuple[str, ...] = ()
    deadline: float | None = None

    def params(self) -> MpiParams:
        """What the result records of these options (the parameters of its sweep)."""
        return {"window": self.window, "sync": self.sync, "recv": self.recv,
                "bind": self.bind, "mpi_env": dict(self.env)}
