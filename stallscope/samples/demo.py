"""Fixed recipes: the demo bundles shipped in the repository and the large performance jobs.

The demo bundles live in the repository's ``samples/`` folder (``samples/<name>/bundle.tar.gz``
and ``samples/<name>/truth.json``); ``python -m stallscope.samples demo --out samples`` rewrites
them byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from stallscope.samples.generator import generate
from stallscope.samples.truth import GroundTruth

#: name -> (scenario, seed, knobs). Small on purpose: each archive stays well under 300 KB.
DEMOS: dict[str, tuple[str, int, dict[str, object]]] = {
    "demo-compute-straggler": ("compute_straggler", 7, dict(
        nodes=2, gpus=4, steps=5, parallelism="ddp", severity="moderate", noise="low", logs="all",
        log_style="debug_file", torch_variant="kineto_2025", nccl_version="2.21.5", naming="tensorboard", gzip=False,
        archive="tar.gz", detail="sparse", clock_offset_ms=30.0, drift=False, red_herrings=True, truncate=0, drop=0, windows=0, step_marks=True, culprit_rank=5,
        culprit_host=1, gpu="H100", network="IB")),
    "demo-degraded-nic": ("degraded_nic", 11, dict(
        nodes=2, gpus=4, steps=5, parallelism="ddp", severity="severe", noise="low", logs="all",
        log_style="debug_file", torch_variant="kineto_2024", nccl_version="2.18.6", naming="rank", gzip=False,
        archive="tar.gz", detail="sparse", clock_offset_ms=50.0, drift=False, red_herrings=True, truncate=0, drop=0, windows=0, step_marks=True, culprit_host=0,
        gpu="A100-80", network="RoCE")),
}


def write_demo(out: Path) -> list[GroundTruth]:
    """(Re)generate every demo bundle under ``out``."""
    return [generate(sc, out=out, seed=seed, name=name, **knobs) for name, (sc, seed, knobs) in DEMOS.items()]


def large_job(out: Path, *, ranks: int = 64, scenario: str = "compute_straggler", seed: int = 0, steps: int = 8,
              **knobs: object) -> GroundTruth:
    """A big job for performance tests: full kernel detail up to 64 ranks (about 1,000 events
    per rank and step), lean beyond (about 400)."""
    if ranks % 8:
        raise ValueError("ranks must be a multiple of 8")
    kw: dict[str, object] = dict(nodes=ranks // 8, gpus=8, steps=steps, parallelism="ddp",
                                 detail="full" if ranks <= 64 else "lean", logs="none",
                                 archive="dir", gzip=True, naming="tensorboard", torch_variant="kineto_2025",
                                 severity="moderate", truncate=0, drop=0, windows=0, step_marks=True)
    kw.update(knobs)
    return generate(scenario, out=out, seed=seed, name=f"large-{ranks}-{scenario}-s{seed}", **kw)
