"""``stallscope.collectors.profile``: the PyTorch profiler with defaults for distributed jobs.

::

    from stallscope.collectors import profile

    with profile() as prof:              # bundle: $STALLSCOPE_BUNDLE (set by `stallscope collect`)
        for batch in loader:
            train_step(batch)
            prof.step()

What it does around ``torch.profiler.profile``:

* **schedule** ``wait=1, warmup=1, active=5`` (once): the first step (allocations, NCCL
  communicator setup, autotuning) is skipped, the next warms the profiler up, five are recorded.
  One window per rank keeps the bundle at one trace per rank, as ingest expects.
* **activities**: CPU, plus CUDA when ``torch.cuda.is_available()``; ``record_shapes=True``
  (message sizes of collectives); ``with_stack`` and ``profile_memory`` off unless asked (both
  cost; see ``docs/benchmarks.md``).
* **rank-aware output**: the trace goes to ``<bundle>/traces/rank<R>.<host>_<pid>.<ms>.pt.trace.json.gz``
  (gzip; written to a hidden temporary name and renamed, so a complete name is a complete file);
  the rank, world size, local rank, host and pid come from the launcher's environment
  (:mod:`stallscope.collectors.env`), else from ``torch.distributed`` once initialized.
* **rank record**: ``<bundle>/ranks/rank<R>.json`` is written when profiling starts and again when
  it stops (device, versions, environment, trace files, steps) — ``stallscope collect`` merges
  these into ``manifest.json``. The first process of each host (local rank 0) also records the
  host's topology, in a background thread, unless ``collect`` already probes this host.

The bundle directory is, in order: the ``bundle`` argument, ``$STALLSCOPE_BUNDLE``, else
``./stallscope-bundle/<job id>`` (SLURM job id or torchrun run id) or ``./stallscope-bundle``.
``torch`` is imported only when profiling starts.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from stallscope.collectors import manifest as mf
from stallscope.collectors.env import DistEnv, read_env
from stallscope.errors import CollectError

#: environment variables ``stallscope collect`` sets for the processes it starts
BUNDLE_ENV = "STALLSCOPE_BUNDLE"
COLLECT_ID_ENV = "STALLSCOPE_COLLECT_ID"
COLLECT_HOST_ENV = "STALLSCOPE_COLLECT_HOST"
#: comma-separated names of the variables ``collect`` set (so rank records can tell them from the user's)
COLLECT_SET_ENV = "STALLSCOPE_COLLECT_SET"


def resolve_bundle(bundle: str | Path | None, env: DistEnv) -> Path:
    """The bundle directory (see module doc), absolute."""
    if bundle is not None:
        return Path(bundle).expanduser().resolve()
    if os.environ.get(BUNDLE_ENV):
        return Path(os.environ[BUNDLE_ENV]).expanduser().resolve()
    base = Path("stallscope-bundle")
    return (base / env.job_id if env.job_id else base).resolve()


class Profiler:
    """A running profile; use :func:`profile` to make one. ``step()`` once per training step."""

    def __init__(self, bundle: str | Path | None = None, *, wait: int = 1, warmup: int = 1, active: int = 5,
                 skip_first: int = 0, record_shapes: bool = True, with_stack: bool = False,
                 profile_memory: bool = False, with_flops: bool = False, activities: Sequence[Any] | None = None,
                 topology: bool = True, enabled: bool = True) -> None:
        if min(wait, warmup, skip_first) < 0 or active < 1:
            raise CollectError(f"profile schedule needs wait, warmup, skip_first >= 0 and active >= 1 (got wait={wait}, "
                               f"warmup={warmup}, active={active}, skip_first={skip_first})")
        self._bundle_arg = bundle
        self.options: dict[str, Any] = {"wait": wait, "warmup": warmup, "active": active, "skip_first": skip_first,
                                        "record_shapes": record_shapes, "with_stack": with_stack,
                                        "profile_memory": profile_memory, "with_flops": with_flops}
        self._activities = activities
        self._topology = topology
        self.enabled = enabled
        self.env: DistEnv = read_env()
        self.bundle: Path = resolve_bundle(bundle, self.env)
        self.steps = 0
        self.traces: list[str] = []
        self._prof: Any = None
        self._record: dict[str, Any] = {}
        self._record_path: Path | None = None
        self._topo_thread: threading.Thread | None = None
        self._topo_result: dict[str, Any] | None = None
        self._dist_id: tuple[int, int, str] | None = None
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Profiler:
        if not self.enabled:
            return self
        try:
            import torch
            from torch.profiler import ProfilerActivity, schedule
        except ImportError as exc:
            raise CollectError(f"stallscope.collectors.profile needs PyTorch ({exc})") from None

        try:
            (self.bundle / mf.TRACES_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CollectError(f"{self.bundle}: cannot create the bundle directory ({exc.strerror})") from None
        activities = self._activities
        if activities is None:
            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
        o = self.options
        self._prof = torch.profiler.profile(
            activities=list(activities),
            schedule=schedule(skip_first=o["skip_first"], wait=o["wait"], warmup=o["warmup"], active=o["active"], repeat=1),
            on_trace_ready=self._export, record_shapes=o["record_shapes"], with_stack=o["with_stack"],
            profile_memory=o["profile_memory"], with_flops=o["with_flops"])
        iso, ns = mf.now()
        self._record = {"started_at": iso, "started_at_ns": ns, "status": "running",
                        "activities": [str(a).rsplit(".", 1)[-1] for a in activities]}
        self._write_record()
        if self._topology and self.env.local_rank in (0, None) and os.environ.get(COLLECT_HOST_ENV) != self.env.host:
            self._topo_thread = threading.Thread(target=self._probe_topology, name="stallscope-topology", daemon=True)
            self._topo_thread.start()
        self._prof.start()
        return self

    def step(self) -> None:
        """Mark the end of a training step (advances the profiler schedule)."""
        if self._prof is None:
            return
        self._prof.step()
        self.steps += 1
        if self.steps == 1:
            self._write_record()  # by now the process group and the CUDA device are usually set up

    def stop(self) -> None:
        if self._prof is None:
            return
        prof, self._prof = self._prof, None
        try:
            prof.stop()  # exports a window that was still recording
        finally:
            if self._topo_thread is not None:
                self._topo_thread.join(timeout=30)
            self._stopped = True
            iso, ns = mf.now()
            self._record.update({"ended_at": iso, "ended_at_ns": ns, "status": "done"})
            self._write_record()

    def __enter__(self) -> Profiler:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- output ------------------------------------------------------------------------------

    def _identity(self) -> tuple[int | None, int | None, str | None]:
        """(rank, world size, backend): torch.distributed's once it has been seen initialized, else
        the launcher's; a process no launcher started (``mp.spawn``) has no rank until then."""
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                self._dist_id = (dist.get_rank(), dist.get_world_size(), str(dist.get_backend()))
        except Exception:  # noqa: BLE001 - identity is best effort
            pass
        if self._dist_id is not None:
            return self._dist_id
        if self.env.launcher != "none" or self._stopped:
            return self.env.rank, self.env.world_size, None  # a lone process is rank 0 of 1
        return None, None, None

    def _export(self, prof: Any) -> None:
        rank, _, _ = self._identity()
        who = f"{self.env.host}_{self.env.pid}"
        name = f"rank{rank}.{who}" if rank is not None else who
        import time

        final = self.bundle / mf.TRACES_DIR / f"{name}.{time.time_ns() // 1_000_000}.pt.trace.json.gz"
        tmp = final.parent / f".tmp-{final.name}"
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(tmp))
            os.replace(tmp, final)
        except Exception as exc:  # noqa: BLE001 - a lost trace must not stop the training job
            tmp.unlink(missing_ok=True)
            self._record["export_error"] = f"{type(exc).__name__}: {exc}"
        else:
            self.traces.append(final.relative_to(self.bundle).as_posix())
        self._write_record()

    def _probe_topology(self) -> None:
        from stallscope.collectors.topology import probe_all

        self._topo_result = probe_all()

    def _device(self) -> dict[str, Any]:
        torch = sys.modules.get("torch")
        out: dict[str, Any] = {"device": "cpu", "device_name": None, "device_uuid": None}
        try:
            if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
                i = torch.cuda.current_device()
                props = torch.cuda.get_device_properties(i)
                out = {"device": f"cuda:{i}", "device_name": props.name, "device_uuid": str(getattr(props, "uuid", "")) or None}
            elif torch is not None and torch.cuda.is_available():
                out["device"] = "cuda"
        except Exception:  # noqa: BLE001
            pass
        return out

    def _versions(self) -> dict[str, Any]:
        import platform

        torch = sys.modules.get("torch")
        v: dict[str, Any] = {"python": platform.python_version()}
        if torch is None:
            return v
        v["torch"] = torch.__version__
        v["cuda"] = torch.version.cuda
        v["hip"] = getattr(torch.version, "hip", None)
        try:
            if torch.cuda.is_available():
                n = torch.cuda.nccl.version()
                v["nccl"] = ".".join(map(str, n)) if isinstance(n, tuple) else str(n)
        except Exception:  # noqa: BLE001 - CPU builds have no NCCL
            pass
        return v

    def _write_record(self) -> None:
        rank, world, backend = self._identity()
        e = self.env
        rec: dict[str, Any] = {
            mf.MARKER: mf.header("rank"),
            "rank": rank, "world_size": world, "local_rank": e.local_rank, "local_world_size": e.local_world_size,
            "node_rank": e.node_rank, "host": e.host, "pid": e.pid, "launcher": e.launcher, "job_id": e.job_id,
            "collect_id": os.environ.get(COLLECT_ID_ENV) or None, "backend": backend,
            **self._device(), **self._record,
            "steps": self.steps, "traces": list(self.traces), "profiler": dict(self.options),
            "versions": self._versions(),
            "env": mf.mask_env(os.environ, set_by_collect=os.environ.get(COLLECT_SET_ENV, "").split(",")),
        }
        if self._topo_result is not None:
            rec["topology"] = self._topo_result
        path = mf.rank_file(self.bundle, rank, e.host, e.pid)
        try:
            mf.write_json_atomic(path, rec)
        except OSError:
            return  # the bundle became unwritable: the traces matter more than the record
        if self._record_path is not None and self._record_path != path:
            self._record_path.unlink(missing_ok=True)  # the rank became known since the last write
        self._record_path = path


def profile(bundle: str | Path | None = None, *, wait: int = 1, warmup: int = 1, active: int = 5, skip_first: int = 0,
            record_shapes: bool = True, with_stack: bool = False, profile_memory: bool = False,
            with_flops: bool = False, activities: Sequence[Any] | None = None, topology: bool = True,
            enabled: bool = True) -> Profiler:
    """Profile a distributed training loop into a bundle (see module doc); use as a context
    manager and call ``step()`` once per step. ``enabled=False`` gives a no-op with the same API
    (``profile(enabled=rank in (0, 7))`` profiles a subset of ranks)."""
    return Profiler(bundle, wait=wait, warmup=warmup, active=active, skip_first=skip_first, record_shapes=record_shapes,
                    with_stack=with_stack, profile_memory=profile_memory, with_flops=with_flops, activities=activities,
                    topology=topology, enabled=enabled)
