"""Rank, world, local rank, node and host from each launcher's environment variables."""

from __future__ import annotations

import pytest

from stallscope.collectors.env import job_id, read_env


def env(**kw: str) -> dict[str, str]:
    return dict(kw)


def test_torchrun() -> None:
    e = read_env(env(RANK="5", WORLD_SIZE="16", LOCAL_RANK="1", LOCAL_WORLD_SIZE="4", GROUP_RANK="1",
                     TORCHELASTIC_RUN_ID="run-7"), host="node-b", pid=99)
    assert (e.launcher, e.rank, e.world_size, e.local_rank, e.local_world_size, e.node_rank) == ("torchrun", 5, 16, 1, 4, 1)
    assert (e.host, e.pid, e.job_id) == ("node-b", 99, "run-7")


def test_slurm_srun() -> None:
    e = read_env(env(SLURM_PROCID="6", SLURM_NTASKS="8", SLURM_LOCALID="2", SLURM_NODEID="1", SLURM_JOB_ID="4242",
                     SLURM_TASKS_PER_NODE="4(x2)"), host="gpu-17")
    assert (e.launcher, e.rank, e.world_size, e.local_rank, e.local_world_size, e.node_rank, e.job_id) == \
        ("slurm", 6, 8, 2, 4, 1, "4242")


@pytest.mark.parametrize("spec,node,want", [("2(x3),1", 3, 1), ("2(x3),1", 1, 2), ("8", 0, 8), ("bad", 0, None)])
def test_slurm_tasks_per_node(spec: str, node: str, want: int | None) -> None:
    e = read_env(env(SLURM_PROCID="0", SLURM_NPROCS="7", SLURM_NODEID=str(node), SLURM_TASKS_PER_NODE=spec))
    assert e.world_size == 7 and e.local_world_size == want


def test_open_mpi() -> None:
    e = read_env(env(OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_LOCAL_RANK="1",
                     OMPI_COMM_WORLD_LOCAL_SIZE="2", OMPI_COMM_WORLD_NODE_RANK="1"))
    assert (e.launcher, e.rank, e.world_size, e.local_rank, e.local_world_size, e.node_rank) == ("openmpi", 3, 4, 1, 2, 1)


def test_mpich_pmi() -> None:
    e = read_env(env(PMI_RANK="2", PMI_SIZE="4", MPI_LOCALRANKID="0", MPI_LOCALNRANKS="2"))
    assert (e.launcher, e.rank, e.world_size, e.local_rank, e.local_world_size, e.node_rank) == ("pmi", 2, 4, 0, 2, None)


def test_innermost_launcher_wins() -> None:
    # srun starts one torchrun agent per node: the workers' RANK is the global rank, SLURM_PROCID the agent's
    e = read_env(env(SLURM_PROCID="1", SLURM_NTASKS="2", SLURM_NODEID="1", RANK="9", WORLD_SIZE="16", LOCAL_RANK="1"))
    assert (e.launcher, e.rank, e.world_size) == ("torchrun", 9, 16)
    # mpirun inside an allocation inherits the batch step's SLURM_PROCID=0
    e = read_env(env(SLURM_PROCID="0", SLURM_NTASKS="1", OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_SIZE="8"))
    assert (e.launcher, e.rank, e.world_size) == ("openmpi", 3, 8)


def test_no_launcher_is_rank_0_of_1() -> None:
    e = read_env({}, host="laptop", pid=1)
    assert (e.launcher, e.rank, e.world_size, e.local_rank, e.job_id) == ("none", 0, 1, 0, None)


def test_garbage_values_are_unknown_not_errors() -> None:
    e = read_env(env(RANK="3", WORLD_SIZE="sixteen", LOCAL_RANK=""))
    assert (e.rank, e.world_size, e.local_rank) == (3, None, None)


def test_job_id_skips_torchrun_placeholder() -> None:
    assert job_id(env(TORCHELASTIC_RUN_ID="none")) is None
    assert job_id(env(TORCHELASTIC_RUN_ID="none", PBS_JOBID="12.pbs")) == "12.pbs"
    assert job_id(env(SLURM_JOB_ID="1", TORCHELASTIC_RUN_ID="x")) == "1"
