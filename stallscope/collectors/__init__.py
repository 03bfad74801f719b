"""Collectors: profile a distributed PyTorch job and leave a complete trace bundle.

* :func:`profile` (``profiler.py``) — ``torch.profiler`` with distributed defaults, one trace per
  rank into the bundle, and a rank record (rank, host, pid, device, versions, environment);
* :func:`run_collect` (``launch.py``) — ``stallscope collect -- COMMAND``: runs any launcher with
  NCCL debug logs and ``STALLSCOPE_BUNDLE`` pointed at the bundle, and writes ``manifest.json``;
* ``manifest.py`` (format, secret masking, merging), ``topology.py`` (host probes), ``env.py``
  (rank/world/host from torchrun, SLURM, MPI), ``bundle.py`` (pack a bundle as ``.tar.gz``).

Nothing here imports ``torch`` until a profile starts.
"""

from __future__ import annotations

from stallscope.collectors.env import DistEnv, read_env
from stallscope.collectors.profiler import Profiler, profile

__all__ = ["DistEnv", "Profiler", "profile", "read_env", "run_collect", "pack"]


def __getattr__(name: str) -> object:
    if name == "run_collect":
        from stallscope.collectors.launch import run_collect

        return run_collect
    if name == "pack":
        from stallscope.collectors.bundle import pack

        return pack
    raise AttributeError(name)
