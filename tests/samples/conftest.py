"""Fixtures for the scenario-generator tests: small bundles generated once per session, and the
real data in ``../shared`` to compare formats with."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from stallscope.samples import GroundTruth, generate

ROOT = Path(__file__).resolve().parents[2]


def _shared() -> Path | None:
    for cand in (ROOT / ".." / "shared", Path(os.environ.get("STALLSCOPE_SHARED", "/nonexistent"))):
        if (cand / "traces").exists():
            return cand.resolve()
    return None


SHARED = _shared()

#: every scenario on a small job, with knobs chosen to cover the variants once
SMALL: dict[str, dict[str, Any]] = {
    "healthy": dict(torch_variant="kineto_2024", nccl_version="2.18.6", archive="dir", gzip=True, naming="tensorboard", logs="all"),
    "healthy_imbalanced": dict(torch_variant="kineto_2025", parallelism="pipeline", archive="zip", naming="rank", logs="some", nodes=3),
    "socket_fallback": dict(torch_variant="kineto_2022", nccl_version="2.10.3", archive="tar.gz", naming="arbitrary", logs="all"),
    "degraded_nic": dict(torch_variant="kineto_2025", nccl_version="2.24.3", logs="all", severity="moderate"),
    "compute_straggler": dict(torch_variant="kineto_2024", nccl_version="2.19.3", logs="none", severity="moderate"),
    "host_stall_straggler": dict(torch_variant="kineto_2025", logs="all", severity="moderate", log_style="torchrun"),
    "intermittent_straggler": dict(torch_variant="kineto_2025", logs="none", steps=5),
    "jitter_amplification": dict(torch_variant="kineto_2024", logs="none"),
    "p2p_disabled_one_host": dict(torch_variant="kineto_2025", nccl_version="2.21.5", logs="all", parallelism="tp_dp"),
    "cross_socket_nic_one_host": dict(torch_variant="kineto_2024", nccl_version="2.17.1", logs="all", graph_subsys=True),
    "two_faults": dict(torch_variant="kineto_2025", logs="some"),
}


@pytest.fixture(scope="session")
def shared() -> Path:
    # the real data is part of the test suite (tests/conftest.py refuses to start without it)
    if SHARED is None:
        pytest.fail("real data in ../shared not found (set STALLSCOPE_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, GroundTruth]:
    """One small bundle per scenario (2 hosts x 4 GPUs unless the knobs say otherwise)."""
    out = tmp_path_factory.mktemp("samples")
    res = {}
    for i, (sc, kw) in enumerate(SMALL.items()):
        knobs = dict(nodes=2, gpus=4, steps=4, detail="lean", noise="low", clock_offset_ms=40.0, truncate=0, drop=0, windows=0, step_marks=True) | kw
        res[sc] = generate(sc, out=out, seed=100 + i, **knobs)
    return res
