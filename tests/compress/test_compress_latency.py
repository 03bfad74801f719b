"""Latency from real profiler traces: ORT profile JSON and the PyTorch Kineto trace."""

from __future__ import annotations

import gzip
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
import polars as pl  # noqa: E402

from stallscope.compress import tables  # noqa: E402
from stallscope.compress.latency import measure_onnxruntime, measure_torch, read_ort_profile  # noqa: E402
from stallscope.compress.quantize import export_onnx, quantize_int8  # noqa: E402
from stallscope.errors import CompressError  # noqa: E402


def _json(path):
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def models(tmp_path_factory, _trained_resnet, digits16):
    out = tmp_path_factory.mktemp("lat")
    fp32 = export_onnx(_trained_resnet, torch.from_numpy(digits16.x_train[:2]), out / "dense.onnx")
    int8 = quantize_int8(fp32, out / "int8.onnx", digits16.x_train[:64])
    return {"dense": fp32, "int8": int8}


@pytest.fixture(scope="module")
def ort_latency(models, digits16, tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    inputs = {1: digits16.x_test[:1], 32: digits16.x_test[:32]}
    lat = measure_onnxruntime(models, inputs, runs={1: 25, 32: 5}, warmup=3, trace_dir=root / "traces", run_id="t", root=root)
    return lat, root


def test_ort_runs_come_from_the_profile_files(ort_latency):
    lat, root = ort_latency
    assert sorted(p.name for p in lat.traces) == [
        "ort_dense.json.gz", "ort_int8.json.gz", "timing_onnxruntime.trace.json.gz"]
    for source in ("ort_model_run", "wall"):
        counts = lat.runs.filter(pl.col("source") == source).group_by("candidate", "batch").len().sort("candidate", "batch")
        assert counts.rows() == [("dense", 1, 25), ("dense", 32, 5), ("int8", 1, 25), ("int8", 32, 5)]
    assert lat.runs.columns == list(tables.RUN_LATENCY)
    assert (lat.runs["dur_ns"] > 0).all()
    # the same numbers are in the raw file: every measured model_run event is a row
    events = _json(root / "traces" / "ort_dense.json.gz")
    model_runs = sorted(e["dur"] * 1000 for e in events if e.get("name") == "model_run")
    warmups = 2 * 3  # 3 warm-up runs per batch size
    assert len(model_runs) == 30 + warmups
    profiled = lat.runs.filter((pl.col("candidate") == "dense") & (pl.col("source") == "ort_model_run"))
    assert set(profiled["dur_ns"].to_list()) <= set(model_runs)
    for source in ("ort_model_run", "wall"):
        medians = lat.medians(source=source)
        assert medians[("dense", 32)] > medians[("dense", 1)] > 0


def test_unprofiled_pass_is_a_trace_too(ort_latency):
    lat, root = ort_latency
    doc = _json(root / "traces" / "timing_onnxruntime.trace.json.gz")
    events = [e for e in doc["traceEvents"] if e["cat"] == "stallscope_run"]
    assert len(events) == 2 * (25 + 5)
    wall = lat.runs.filter(pl.col("source") == "wall")
    assert sorted(wall["dur_ns"].to_list()) == sorted(round(e["dur"] * 1e3) for e in events)
    # the profiler costs time: the profiled median is not below the unprofiled one
    assert lat.medians(source="ort_model_run")[("int8", 1)] >= 0.9 * lat.medians(source="wall")[("int8", 1)]


def test_ort_layers_name_pytorch_modules_and_fit_inside_their_run(ort_latency):
    lat, _ = ort_latency
    layers = lat.layers
    assert layers.columns == list(tables.LAYER_LATENCY)
    dense = layers.filter((pl.col("candidate") == "dense") & (pl.col("batch") == 1))
    assert {"stem.0", "stages.0.0.conv1", "stages.1.0.shortcut.0", "fc"} <= set(dense["layer"])
    int8 = layers.filter((pl.col("candidate") == "int8") & (pl.col("batch") == 1))
    assert "QLinearConv" in set(int8["op_type"])
    assert set(int8.filter(pl.col("op_type") == "QLinearConv")["layer"]) >= {"stem.0", "stages.1.0.conv2"}
    # per inference, node time never exceeds the inference time
    per_run = layers.group_by("candidate", "batch", "run_index").agg(pl.col("dur_ns").sum().alias("nodes"))
    profiled = lat.runs.filter(pl.col("source") == "ort_model_run")
    joined = per_run.join(profiled, on=["candidate", "batch", "run_index"])
    assert len(joined) == len(profiled)
    assert (joined["nodes"] <= joined["dur_ns"]).all()


def test_read_ort_profile_rejects_a_file_that_is_not_a_profile(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"foo": 1')
    with pytest.raises(CompressError, match="cannot read ORT profile"):
        read_ort_profile(bad)


def test_read_ort_profile_assigns_nodes_to_runs(tmp_path):
    events = [
        {"cat": "Session", "name": "model_run", "ph": "X", "ts": 100, "dur": 50},
        {"cat": "Node", "name": "a.b/Conv_kernel_time", "ph": "X", "ts": 110, "dur": 20,
         "args": {"op_name": "Conv", "provider": "CPUExecutionProvider"}},
        {"cat": "Session", "name": "model_run", "ph": "X", "ts": 200, "dur": 40},
        {"cat": "Node", "name": "relu_3_nchwc_kernel_time", "ph": "X", "ts": 205, "dur": 30, "args": {"op_name": "Conv"}},
    ]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(events))
    runs, nodes = read_ort_profile(path, layers={"relu_3": "layer2.conv"})
    assert runs.rows() == [(0, 100_000, 50_000), (1, 200_000, 40_000)]
    assert nodes.select("layer", "op_type", "dur_ns", "seq").rows() == [("a.b", "Conv", 20_000, 0), ("layer2.conv", "Conv", 30_000, 1)]


def test_torch_latency_from_the_kineto_trace(_trained_resnet, digits16, tmp_path):
    inputs = {1: digits16.x_test[:1], 32: digits16.x_test[:32]}
    lat = measure_torch({"dense": _trained_resnet}, inputs, runs={1: 6, 32: 2}, warmup=1, trace_dir=tmp_path, root=tmp_path)
    assert [p.name for p in lat.traces] == ["timing_torch.trace.json.gz", "torch_fp32.pt.trace.json.gz"]
    doc = _json(lat.traces[1])
    assert "traceEvents" in doc
    assert lat.runs.group_by("source", "batch").len().sort("source", "batch").rows() == [
        ("torch_run_cpu", 1, 6), ("torch_run_cpu", 32, 2), ("wall", 1, 6), ("wall", 32, 2)]
    layers = lat.layers.filter(pl.col("batch") == 1)
    assert {"stem.0", "stages.0.0.conv1", "fc"} <= set(layers["layer"])
    assert set(layers.filter(pl.col("layer") == "stem.0")["op_type"]) == {"Conv2d"}
    assert layers["run_index"].null_count() == 0
    assert len(layers.filter(pl.col("layer") == "fc")) == 6
