"""Cross-check with HTA as the oracle: per-rank temporal breakdown and comm/comp overlap agree
within 2 percentage points on the real traces."""

from __future__ import annotations

import logging
import shutil
import warnings
from pathlib import Path

import pytest

import stallscope
from stallscope.api import ingest
from tests.conftest import TRACES

CASES = ["trace_diff/control", "nccl_parser_config", "trace_filter", "amd_trace"]


@pytest.fixture(scope="module")
def hta_mod():
    pytest.importorskip("hta", reason="HTA is in the [hta] extra (CI installs it)")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_temporal_breakdown_and_overlap_match_hta(case: str, tmp_path: Path, hta_mod) -> None:
    src = TRACES / "hta" / case
    d = tmp_path / "traces"
    d.mkdir()
    for p in src.glob("*.json.gz"):
        shutil.copy(p, d / p.name)
    a = hta_mod(trace_dir=str(d))
    hta_tb = a.get_temporal_breakdown(visualize=False).set_index("rank")
    ingest([d], store=tmp_path / "s")
    s = stallscope.open(tmp_path / "s")
    ours = {r["rank"]: r for r in s.sql("SELECT * FROM rank_temporal_breakdown").iter_rows(named=True)}
    assert set(ours) == set(hta_tb.index)
    for rank, row in hta_tb.iterrows():
        o = ours[rank]
        assert abs(o["idle_pct"] - row["idle_time_pctg"]) <= 2.0
        assert abs(o["compute_pct"] - row["compute_time_pctg"]) <= 2.0
        assert abs(o["non_compute_pct"] - row["non_compute_time_pctg"]) <= 2.0
    ov = a.get_comm_comp_overlap(visualize=False).set_index("rank")
    ours_ov = {r["rank"]: r["overlap_pct"] for r in s.sql("SELECT rank, overlap_pct FROM comm_comp_overlap").iter_rows(named=True)}
    for rank, row in ov.iterrows():
        if row["comp_comm_overlap_pctg"] != row["comp_comm_overlap_pctg"]:  # NaN: no communication kernels
            assert rank not in ours_ov
            continue
        assert abs(ours_ov[rank] - row["comp_comm_overlap_pctg"]) <= 2.0
