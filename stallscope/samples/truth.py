"""Ground truth written beside each bundle (``<out>/<name>/truth.json``, outside the bundle).

The file says what the analysis should find and gives the physics-side numbers to check
measurements against. Top-level fields (all always present):

``schema``               ``stallscope.samples.truth/1``
``name``, ``scenario``, ``seed``
``cause``                fabric | synchronization | locality | none (the dominant fault's cause)
``culprit_ranks``        global ranks the finding should blame (all ranks for a job-wide cause,
                         the host's ranks for a host-level cause, [] when healthy)
``culprit_hosts``        host names, as they appear in the data
``lost_time_fraction``   1 − makespan(without the dominant fault) / makespan(with everything);
                         the physics what-if, in [0, 1]
``secondary``            for ``two_faults``: the other fault (same fields), else null
``faults``               every injected fault: kind, cause, parameters, its own lost fraction
``knobs``                every knob, resolved
``job``                  world size, hosts, rank → host / pid / local rank, parallelism, process
                         groups, GPU, network, NCCL version, profiler variant, step numbers
``clock``                per-host ``offset_ns`` and ``drift_ppm`` (trace = true + offset + drift
                         × (true − ref_ns) / 1e6), ``ref_ns``, ``base_time_ns``
``plan``                 what was injected per rank and step: ``compute_scale``,
                         ``host_delay_ns``, ``hidden_host_work_ns``, per host
                         ``inter_bw_factor`` / ``p2p`` / ``gdr``, ``net``, the model sizes
``physics``              step times with and without the fault(s), per [rank][step]
                         ``wait_ns`` (time inside group collectives waiting for later members),
                         ``wait_p2p_ns``, ``late_ns`` (arrival after the earliest member),
                         ``transfer_ns``; link bandwidths; collectives per rank per step
``bundle``               the bundle path, format, gzip, naming, which trace is which rank, which
                         hosts have logs and where
``evidence``             where the dominant fault can be seen, for its cause and for its culprits:
                         ``traces`` and/or ``nccl_log`` (each fault in ``faults`` has its own)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "stallscope.samples.truth/1"


@dataclass
class GroundTruth:
    name: str
    scenario: str
    seed: int
    cause: str
    culprit_ranks: list[int]
    culprit_hosts: list[str]
    lost_time_fraction: float
    secondary: dict[str, Any] | None
    faults: list[dict[str, Any]]
    knobs: dict[str, Any]
    job: dict[str, Any]
    clock: dict[str, Any]
    plan: dict[str, Any]
    physics: dict[str, Any]
    bundle: dict[str, Any]
    #: where the dominant fault is visible: {"cause": [...], "culprits": [...]} with "traces" /
    #: "nccl_log" (e.g. a degraded NIC's host is named only by its own log)
    evidence: dict[str, list[str]] = field(default_factory=dict)
    schema: str = SCHEMA
    path: str | None = field(default=None, compare=False)  #: where truth.json was written (not serialized)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("path")
        return {"schema": d.pop("schema"), **d}

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=1, default=_default) + "\n")
        self.path = str(path)

    @property
    def bundle_path(self) -> Path:
        """Absolute path of the bundle (dir or archive) next to the truth file."""
        if self.path is None:
            raise ValueError("truth not written yet")
        return Path(self.path).parent / self.bundle["path"]

    def files(self) -> dict[str, bytes]:
        """Every file of the bundle, relative path -> raw bytes (archives read in memory)."""
        from stallscope.samples.bundle import read_files

        return read_files(self.bundle_path)

    def traces(self) -> dict[int, dict[str, Any]]:
        """rank -> the parsed Kineto JSON of that rank, read straight from the bundle."""
        from stallscope.samples.bundle import load_json

        files = self.files()
        return {int(r): load_json(files[p]) for r, p in self.bundle["traces"].items()}

    def logs(self) -> dict[str, str]:
        """NCCL log path -> text, for the hosts that have logs."""
        files = self.files()
        return {p: files[p].decode() for paths in self.bundle["nccl_logs"].values() for p in paths}

    @classmethod
    def read(cls, path: str | Path) -> "GroundTruth":
        d = json.loads(Path(path).read_text())
        t = cls(**{k: d[k] for k in d if k in cls.__dataclass_fields__})
        t.path = str(path)
        return t


def _default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.bool_):
            return bool(o)
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serializable: {type(o).__name__}")
