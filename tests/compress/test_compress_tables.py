"""Parquet tables of a run: schema, metadata, atomic writes, and the per-layer SQL query."""

from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq
import pytest

from stallscope.compress import tables
from stallscope.compress.queries import layer_medians
from stallscope.errors import CompressError


def _layers():
    rows = []
    for cand, scale in (("dense-fp32", 2), ("quant-int8", 1)):
        for run in range(5):
            rows.append({"run_id": "r", "candidate": cand, "runtime": "onnxruntime", "device": "cpu",
                         "provider": "CPUExecutionProvider", "batch": 1, "run_index": run, "layer": "conv1",
                         "node": "conv1/Conv", "op_type": "Conv", "ts_ns": run * 1000, "dur_ns": scale * (100 + run),
                         "trace_file": "traces/x.json", "source": "ort_node"})
            # a layer that ORT runs as two nodes: both count toward the layer's time per inference
            for part in (1, 2):
                rows.append({**rows[-1], "layer": "fc", "node": f"fc/Gemm_{part}", "op_type": "Gemm", "dur_ns": 10 * part})
    return pl.DataFrame(rows)


def test_write_layer_latency_conforms_and_tags_the_file(tmp_path):
    path = tables.write_layer_latency(_layers().drop("provider"), tmp_path)
    assert path == tmp_path / "layer_latency.parquet"
    table = pq.read_table(path)
    assert table.column_names == list(tables.LAYER_LATENCY)
    assert table.schema.metadata[b"stallscope.table"] == b"compress_layer_latency"
    assert table.column("provider").null_count == table.num_rows  # missing columns become null
    assert not list(tmp_path.glob(".*tmp*"))


def test_layer_medians_sums_nodes_per_inference_then_takes_the_median(tmp_path):
    tables.write_layer_latency(_layers(), tmp_path)
    df = layer_medians(tmp_path, top=5)
    got = {(r["candidate"], r["layer"]): r["median_us"] for r in df.iter_rows(named=True)}
    assert got[("dense-fp32", "conv1")] == pytest.approx(2 * 102 / 1e3)
    assert got[("dense-fp32", "fc")] == pytest.approx(30 / 1e3)
    assert df.filter(pl.col("candidate") == "quant-int8")["rank"].to_list() == [1, 2]
    only = layer_medians(tmp_path, candidate="quant-int8", top=1)
    assert only.select("candidate", "layer").rows() == [("quant-int8", "conv1")]


def test_layer_medians_needs_a_run_folder(tmp_path):
    with pytest.raises(CompressError, match="not a compress run folder"):
        layer_medians(tmp_path)


def test_empty_frames_keep_the_schema(tmp_path):
    path = tables.write_pruning_steps(pl.DataFrame(), tmp_path)
    assert pq.read_table(path).column_names == list(tables.PRUNING_STEPS)
