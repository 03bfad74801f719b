"""Candidate decisions: budget, Pareto front, recommendation, and notes where HQP does not win."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from stallscope.compress import tables
from stallscope.compress.evaluate import (
    Candidate,
    EvaluateConfig,
    EvaluateResult,
    candidates_frame,
    decide,
    int8_slower_layers,
)
from stallscope.compress.latency import Latency
from stallscope.compress.report import to_dict, to_markdown


def _cand(name, kind, *, val, test, size, b1, b32, budget=None, profiled=None):
    return Candidate(
        name=name, kind=kind, precision="int8" if kind in ("quant", "hqp") else "fp32",
        onnx_path=Path("/run/models") / f"{name}.onnx", params=1000, macs=10_000, size_bytes=size,
        val_accuracy=val, test_accuracy=test, budget=budget, latency_ms={1: b1, 32: b32},
        profiled_latency_ms={1: profiled or b1 * 1.3, 32: b32 * 1.1},
    )


def _layers(rows):
    base = {"run_id": "r", "runtime": "onnxruntime", "device": "cpu", "provider": "CPU", "batch": 1, "node": "n",
            "op_type": "Conv", "ts_ns": 0, "trace_file": "t", "source": "ort_node"}
    return tables.conform(pl.DataFrame([{**base, **r} for r in rows]), tables.LAYER_LATENCY)


def _result(candidates, layers=None):
    layers = layers if layers is not None else tables.empty(tables.LAYER_LATENCY)
    return EvaluateResult(
        run_id="r", run_dir=Path("/run"), model_name="m", dataset="d", device="cpu",
        config=EvaluateConfig(max_accuracy_drop=0.015), baseline=candidates[0], candidates=candidates,
        latency=Latency(runs=tables.empty(tables.RUN_LATENCY), layers=layers), steps=tables.empty(tables.PRUNING_STEPS),
    )


def test_recommends_the_fastest_candidate_within_budget():
    dense = _cand("dense-fp32", "dense", val=0.99, test=0.99, size=1000, b1=2.0, b32=40)
    quant = _cand("quant-int8", "quant", val=0.985, test=0.99, size=300, b1=0.9, b32=15)
    prune = _cand("prune-fp32@1.5pp", "prune", val=0.98, test=0.98, size=200, b1=0.6, b32=12, budget=0.015)
    hqp = _cand("hqp-int8@1.5pp", "hqp", val=0.978, test=0.98, size=80, b1=0.4, b32=8, budget=0.015)
    too_lossy = _cand("hqp-int8@x", "hqp", val=0.96, test=0.97, size=50, b1=0.2, b32=5, budget=0.015)
    result = _result([dense, quant, prune, hqp, too_lossy])
    decide(result)
    assert [c.within_budget for c in result.candidates] == [True, True, True, True, False]
    assert result.recommended is hqp
    assert sum(c.recommended for c in result.candidates) == 1
    # too_lossy is fastest and smallest, so it is on the Pareto front, but never recommended
    assert too_lossy.pareto and not too_lossy.recommended
    assert not prune.pareto  # hqp is as accurate, faster and smaller
    doc = to_dict(result)
    assert doc["recommended"] == "hqp-int8@1.5pp"
    assert doc["candidates"][3]["speedup"] == {"b1": 5.0, "b32": 5.0}
    assert doc["candidates"][3]["size_reduction"] == pytest.approx(0.92)
    assert doc["candidates"][3]["accuracy_drop_pp"] == pytest.approx(1.0)
    assert any("profiler added" in n for n in doc["notes"])


def test_dense_is_recommended_when_nothing_else_fits_the_budget():
    dense = _cand("dense-fp32", "dense", val=0.99, test=0.99, size=1000, b1=2.0, b32=40)
    quant = _cand("quant-int8", "quant", val=0.95, test=0.95, size=300, b1=0.9, b32=15)
    result = _result([dense, quant])
    decide(result)
    assert result.recommended is dense


def test_notes_say_where_hqp_is_not_faster_and_where_int8_loses():
    dense = _cand("dense-fp32", "dense", val=0.99, test=0.99, size=1000, b1=2.0, b32=40)
    quant = _cand("quant-int8", "quant", val=0.99, test=0.99, size=300, b1=0.5, b32=15)
    prune = _cand("prune-fp32@1.5pp", "prune", val=0.985, test=0.985, size=200, b1=0.6, b32=12, budget=0.015)
    hqp = _cand("hqp-int8@1.5pp", "hqp", val=0.985, test=0.985, size=80, b1=0.7, b32=8, budget=0.015)
    rows = []
    for run in range(3):
        rows += [
            {"candidate": "dense-fp32", "layer": "stem", "run_index": run, "dur_ns": 20_000},
            {"candidate": "quant-int8", "layer": "stem", "run_index": run, "dur_ns": 50_000},
            {"candidate": "dense-fp32", "layer": "conv", "run_index": run, "dur_ns": 90_000},
            {"candidate": "quant-int8", "layer": "conv", "run_index": run, "dur_ns": 30_000},
            {"candidate": "quant-int8", "layer": "Transpose", "run_index": run, "dur_ns": 5_000},
        ]
    result = _result([dense, quant, prune, hqp], _layers(rows))
    decide(result)
    notes = "\n".join(result.notes)
    assert "hqp-int8@1.5pp is not faster than prune-fp32@1.5pp at batch 1: 0.700 ms vs 0.600 ms" in notes
    assert "hqp-int8@1.5pp is not faster than quant-int8 at batch 1" in notes
    assert "at batch 32" not in notes  # HQP wins at batch 32 against both
    assert "int8 is slower than fp32 on 1 layer(s)" in notes and "stem (50 vs 20 µs)" in notes
    md = to_markdown(result)
    assert "| ★ quant-int8 |" in md and "## Notes" in md


def test_int8_slower_layers_compares_only_shared_layers():
    rows = [
        {"candidate": "a", "layer": "x", "run_index": 0, "dur_ns": 10},
        {"candidate": "a", "layer": "x", "run_index": 0, "dur_ns": 10},  # two nodes of one layer
        {"candidate": "b", "layer": "x", "run_index": 0, "dur_ns": 30},
        {"candidate": "b", "layer": "only_b", "run_index": 0, "dur_ns": 99},
    ]
    slower = int8_slower_layers(_layers(rows), fp32="a", int8="b")
    assert slower.rows() == [("x", 0.02, 0.03, pytest.approx(1.5))]


def test_candidates_frame_has_the_table_schema():
    dense = _cand("dense-fp32", "dense", val=0.99, test=0.99, size=1000, b1=2.0, b32=40)
    result = _result([dense])
    decide(result)
    frame = candidates_frame(result)
    assert frame.columns == list(tables.CANDIDATES)
    assert frame.row(0, named=True)["onnx_file"] == "models/dense-fp32.onnx"
