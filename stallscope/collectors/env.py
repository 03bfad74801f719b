"""Who am I in the job: rank, world size, local rank, node and host, read from the launcher's
environment variables.

Launchers tell each process its place through environment variables, each with its own names.
They nest (``srun torchrun ...``, ``mpirun`` inside a SLURM allocation), so the innermost
launcher — the one that started *this* process — is read first:

========== ============================ ================== ==================== ==============
launcher   rank                         world size         local rank           node
========== ============================ ================== ==================== ==============
torchrun   ``RANK``                     ``WORLD_SIZE``     ``LOCAL_RANK``       ``GROUP_RANK``
Open MPI   ``OMPI_COMM_WORLD_RANK``     ``..._SIZE``       ``..._LOCAL_RANK``   ``OMPI_COMM_WORLD_NODE_RANK``
MVAPICH2   ``MV2_COMM_WORLD_RANK``      ``..._SIZE``       ``..._LOCAL_RANK``   —
MPICH/PMI  ``PMI_RANK``                 ``PMI_SIZE``       ``MPI_LOCALRANKID``  —
SLURM      ``SLURM_PROCID``             ``SLURM_NTASKS``   ``SLURM_LOCALID``    ``SLURM_NODEID``
========== ============================ ================== ==================== ==============

torchrun comes first because under ``srun torchrun`` the SLURM variables describe the torchrun
agent (one per node), not the training processes; MPI before SLURM because ``mpirun`` inside an
allocation inherits the batch step's ``SLURM_PROCID=0``. A process started by none of them is
rank 0 of a world of 1 (``launcher = "none"``).

>>> e = read_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
...               "GROUP_RANK": "1"}, host="node-b", pid=42)
>>> (e.launcher, e.rank, e.world_size, e.local_rank, e.node_rank, e.host)
('torchrun', 3, 8, 1, 1, 'node-b')
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: (launcher, rank, world size, local rank, local world size, node rank) variable names, innermost first
_LAUNCHERS: tuple[tuple[str, str, str, str | None, str | None, str | None], ...] = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK"),
    ("mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
     "MV2_COMM_WORLD_LOCAL_SIZE", None),
    ("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", None),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None, "SLURM_NODEID"),
)

#: variables naming the job, first match wins (torchrun's ``--standalone`` run id is a fresh uuid
#: shared by the workers of one run; ``none`` is its placeholder when no id was given)
_JOB_ID_VARS = ("STALLSCOPE_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID")


@dataclass(frozen=True)
class DistEnv:
    """This process's place in the job, as its launcher described it."""

    #: torchrun | openmpi | mvapich | pmi | slurm | none
    launcher: str
    rank: int | None
    world_size: int | None
    local_rank: int | None
    local_world_size: int | None
    #: index of this node in the job (torchrun ``GROUP_RANK``, ``SLURM_NODEID``, ...)
    node_rank: int | None
    host: str
    pid: int
    #: the scheduler's or launcher's job id when one is set (SLURM, torchrun run id, PBS, LSF)
    job_id: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _int(environ: Mapping[str, str], name: str | None) -> int | None:
    if name is None:
        return None
    raw = environ.get(name)
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None


def hostname() -> str:
    """The host name as Kineto (``host_name``) and NCCL (``%h``) see it: ``gethostname()``."""
    return socket.gethostname()


def job_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The job id the scheduler or launcher set, if any (see ``_JOB_ID_VARS``)."""
    env = os.environ if environ is None else environ
    for name in _JOB_ID_VARS:
        v = env.get(name, "").strip()
        if v and v.lower() != "none":
            return v
    return None


def read_env(environ: Mapping[str, str] | None = None, *, host: str | None = None, pid: int | None = None) -> DistEnv:
    """Read this process's rank, world, local rank and node from its launcher (see module doc)."""
    env = os.environ if environ is None else environ
    host = host if host is not None else hostname()
    pid = pid if pid is not None else os.getpid()
    for launcher, rank_v, size_v, local_v, local_size_v, node_v in _LAUNCHERS:
        rank = _int(env, rank_v)
        if rank is None:
            continue
        world = _int(env, size_v)
        if launcher == "slurm" and world is None:
            world = _int(env, "SLURM_NPROCS")
        local = _int(env, local_v)
        local_size = _int(env, local_size_v)
        if launcher == "slurm" and local_size is None:
            local_size = _slurm_tasks_on_node(env)
        return DistEnv(launcher, rank, world, local, local_size, _int(env, node_v), host, pid, job_id(env))
    return DistEnv("none", 0, 1, 0, 1, 0, host, pid, job_id(env))


def _slurm_tasks_on_node(env: Mapping[str, str]) -> int | None:
    """``SLURM_TASKS_PER_NODE`` is ``2(x3),1``: the count for this node (``SLURM_NODEID``)."""
    spec = env.get("SLURM_TASKS_PER_NODE")
    node = _int(env, "SLURM_NODEID")
    if not spec or node is None:
        return None
    counts: list[int] = []
    for part in spec.split(","):
        try:
            if "(x" in part:
                n, rep = part.rstrip(")").split("(x")
                counts += [int(n)] * int(rep)
            else:
                counts.append(int(part))
        except ValueError:
            return None
    return counts[node] if node < len(counts) else None
