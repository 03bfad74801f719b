"""Stall breakdown on real traces: parts sum to the step time; the recorded straggler shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stallscope
from stallscope.api import ingest
from stallscope.report.perfetto import export_perfetto
from tests.conftest import ROOT, TRACES

PARTS = "compute_ns + comm_intra_ns + comm_inter_ns + sync_wait_ns + host_stall_ns + other_idle_ns"


@pytest.fixture(scope="module")
def gloo_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("gloo")
    ingest([ROOT / "samples" / "gloo-straggler.tar.gz"], store=store)
    return store


@pytest.mark.parametrize("src", ["samples/gloo-straggler.tar.gz", "TRACES/hta/trace_diff/control", "TRACES/hta/nccl_parser_config", "TRACES/cpu_gloo"])
def test_parts_sum_to_step_time(src: str, tmp_path: Path) -> None:
    path = TRACES / src[7:] if src.startswith("TRACES/") else ROOT / src
    ingest([path], store=tmp_path)
    df = stallscope.open(tmp_path).sql(f"SELECT step_ns, {PARTS} AS parts FROM step_breakdown")
    assert df.height > 0
    for step_ns, parts in df.rows():
        assert step_ns > 0
        assert abs(parts - step_ns) <= max(1, step_ns * 0.001)


def test_recorded_straggler_is_visible(gloo_sample: Path) -> None:
    """Rank 1 slept 40 ms in its data path each step: it stalls on the host, rank 0 waits."""
    s = stallscope.open(gloo_sample)
    rb = {r["rank"]: r for r in s.sql("SELECT * FROM rank_breakdown").iter_rows(named=True)}
    steps = rb[0]["steps"]
    assert rb[1]["host_stall_ms"] / steps > 35 and rb[0]["sync_wait_ms"] / steps > 35
    assert rb[0]["host_stall_ms"] / steps < 10 and rb[1]["sync_wait_ms"] / steps < 10
    stats = {r["rank"]: r for r in s.sql("SELECT * FROM rank_collective_stats").iter_rows(named=True)}
    assert stats[1]["last_share"] > 0.6 and stats[0]["last_share"] < 0.4


def test_perfetto_export_is_valid_chrome_trace(gloo_sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    counts = export_perfetto(stallscope.open(gloo_sample), out)
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    assert counts["ranks"] == 2 and len(ev) >= counts["events"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"rank 0 · vm", "rank 1 · vm"}
    xs = [e for e in ev if e["ph"] == "X"]
    assert all(isinstance(e["ts"], float) and e["dur"] >= 0 and 0 <= e["tid"] < 2**31 for e in xs)
    waits = [e for e in xs if e["cat"] == "collective" and e["name"].startswith("wait")]
    assert {e["pid"] for e in waits} >= {0}
    assert min(e["ts"] for e in xs) >= 0
