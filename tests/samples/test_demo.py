"""The demo bundles in samples/ are small, regenerate byte for byte, and the big jobs build."""

from __future__ import annotations

from pathlib import Path

import pytest

from stallscope.samples import GroundTruth
from stallscope.samples.demo import DEMOS, large_job, write_demo

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_demo_bundles_are_committed_small_and_reproducible(tmp_path: Path) -> None:
    fresh = {t.name: t for t in write_demo(tmp_path)}
    assert set(fresh) == set(DEMOS)
    for name, t in fresh.items():
        committed = SAMPLES / name
        assert (committed / "bundle.tar.gz").stat().st_size < 300_000
        assert (committed / "bundle.tar.gz").read_bytes() == t.bundle_path.read_bytes(), f"regenerate: python -m stallscope.samples demo --out samples ({name})"
        assert (committed / "truth.json").read_text() == Path(t.path).read_text()
        truth = GroundTruth.read(committed / "truth.json")
        assert truth.cause != "none" and truth.bundle["logs"] == "all"


@pytest.mark.slow
def test_large_job_builds(tmp_path: Path) -> None:
    t = large_job(tmp_path, ranks=64, steps=3)
    assert t.job["world_size"] == 64 and len(t.bundle["traces"]) == 64
    tr = t.traces()[63]
    assert sum(1 for e in tr["traceEvents"] if e.get("ph") == "X") > 1000
