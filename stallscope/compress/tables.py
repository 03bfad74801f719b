"""The Parquet tables one ``compress evaluate`` run writes, with their columns and units.

A run folder ``<store>/compress/<run id>/`` holds:

``layer_latency.parquet`` (:data:`LAYER_LATENCY`)
    one row per profiled layer/node execution: every ORT node event (``kernel_time``) and every
    PyTorch layer annotation (``stallscope::layer::...``) of every measured run.
``run_latency.parquet`` (:data:`RUN_LATENCY`)
    one row per measured inference and pass: ``wall`` (unprofiled, from the timing trace),
    ``ort_model_run`` (ORT profile), ``torch_run_cpu`` / ``torch_run_gpu`` (Kineto annotation
    spans; on CUDA the GPU-side span).
``candidates.parquet`` (:data:`CANDIDATES`)
    one row per candidate with its metrics (the same numbers as ``report.json``).
``pruning_steps.parquet`` (:data:`PRUNING_STEPS`)
    every attempted pruning step, accepted or rolled back.

Beside them: ``report.json`` (the Compress output contract), ``traces/`` (the raw ORT profiler
JSON per session and the PyTorch Kineto trace) and ``models/`` (the ONNX files that were timed).
Latency tables are produced in memory as polars DataFrames with exactly these columns, then
written atomically (temporary file, then rename) with the table name and schema version in the
Parquet key-value metadata.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

SCHEMA_VERSION = "1"

#: column -> (dtype, meaning and unit)
LAYER_LATENCY: dict[str, tuple[pl.DataType, str]] = {
    "run_id": (pl.Utf8(), "compress run folder name"),
    "candidate": (pl.Utf8(), "candidate name -> candidates.name"),
    "runtime": (pl.Utf8(), "onnxruntime | torch"),
    "device": (pl.Utf8(), "cpu | cuda"),
    "provider": (pl.Utf8(), "ORT execution provider of the node (CPUExecutionProvider, ...) or torch-cpu / torch-cuda"),
    "batch": (pl.Int32(), "batch size of the inference"),
    "run_index": (pl.Int32(), "measured inference number for (candidate, runtime, batch), 0-based; warm-up runs excluded"),
    "layer": (pl.Utf8(), "PyTorch module path (e.g. stages.0.1.conv2); runtime-inserted nodes keep their node name"),
    "node": (pl.Utf8(), "node / annotation name as written in the trace"),
    "op_type": (pl.Utf8(), "ORT operator (Conv, QLinearConv, ...) or PyTorch module class"),
    "ts_ns": (pl.Int64(), "start, ns, on the trace's own clock (not comparable across trace files)"),
    "dur_ns": (pl.Int64(), "duration, ns (ORT writes whole microseconds)"),
    "trace_file": (pl.Utf8(), "raw trace file, relative to the run folder"),
    "source": (pl.Utf8(), "ort_node | torch_layer_cpu | torch_layer_gpu"),
}

RUN_LATENCY: dict[str, tuple[pl.DataType, str]] = {
    "run_id": (pl.Utf8(), "compress run folder name"),
    "candidate": (pl.Utf8(), "candidate name -> candidates.name"),
    "runtime": (pl.Utf8(), "onnxruntime | torch"),
    "device": (pl.Utf8(), "cpu | cuda"),
    "batch": (pl.Int32(), "batch size of the inference"),
    "run_index": (pl.Int32(), "measured inference number, 0-based; warm-up runs excluded"),
    "ts_ns": (pl.Int64(), "start, ns, on the trace's own clock"),
    "dur_ns": (pl.Int64(), "latency of the whole inference, ns"),
    "trace_file": (pl.Utf8(), "raw trace file, relative to the run folder"),
    "source": (pl.Utf8(), "wall (unprofiled pass, timing trace) | ort_model_run | torch_run_cpu | torch_run_gpu (profiled)"),
}

CANDIDATES: dict[str, tuple[pl.DataType, str]] = {
    "run_id": (pl.Utf8(), "compress run folder name"),
    "name": (pl.Utf8(), "candidate name"),
    "kind": (pl.Utf8(), "dense | prune | quant | hqp"),
    "precision": (pl.Utf8(), "fp32 | int8 | mixed (int8 with some layers kept fp32)"),
    "budget_pp": (pl.Float64(), "accuracy-drop budget Δmax the candidate was built under, percentage points (null: none)"),
    "val_accuracy": (pl.Float64(), "validation accuracy, fraction"),
    "test_accuracy": (pl.Float64(), "held-out test accuracy, fraction"),
    "val_accuracy_drop_pp": (pl.Float64(), "validation accuracy drop vs the dense baseline, percentage points"),
    "accuracy_drop_pp": (pl.Float64(), "test accuracy drop vs the dense baseline, percentage points"),
    "size_bytes": (pl.Int64(), "serialized ONNX file size, bytes"),
    "params": (pl.Int64(), "parameter count of the (pruned) PyTorch model"),
    "macs": (pl.Int64(), "multiply-accumulates per sample"),
    "latency_b1_ms": (pl.Float64(), "headline median ORT latency at batch 1, ms (see latency_source)"),
    "latency_b32_ms": (pl.Float64(), "headline median ORT latency at batch 32, ms"),
    "profiled_latency_b1_ms": (pl.Float64(), "median ORT model_run latency under the profiler, batch 1, ms"),
    "profiled_latency_b32_ms": (pl.Float64(), "median ORT model_run latency under the profiler, batch 32, ms"),
    "torch_latency_b1_ms": (pl.Float64(), "median PyTorch eager latency at batch 1, ms (fp32 candidates only)"),
    "torch_latency_b32_ms": (pl.Float64(), "median PyTorch eager latency at batch 32, ms"),
    "latency_source": (pl.Utf8(), "wall (unprofiled pass) | profiler (ORT model_run events)"),
    "within_budget": (pl.Boolean(), "validation drop <= the run's Δmax"),
    "pareto": (pl.Boolean(), "on the Pareto front of (test accuracy, batch-1 latency, size)"),
    "recommended": (pl.Boolean(), "the recommended candidate"),
    "onnx_file": (pl.Utf8(), "timed ONNX model, relative to the run folder"),
}

PRUNING_STEPS: dict[str, tuple[pl.DataType, str]] = {
    "run_id": (pl.Utf8(), "compress run folder name"),
    "budget_pp": (pl.Float64(), "Δmax of this pruning trajectory, percentage points"),
    "step": (pl.Int32(), "attempt number, 1-based"),
    "fraction": (pl.Float64(), "fraction of the current MACs the step tried to remove"),
    "macs_before": (pl.Int64(), "MACs per sample before the step"),
    "macs_after": (pl.Int64(), "MACs per sample after the step (before any rollback)"),
    "params_after": (pl.Int64(), "parameters after the step"),
    "channels_removed": (pl.Int32(), "channels removed (group channels)"),
    "val_accuracy": (pl.Float64(), "validation accuracy after pruning and fine-tuning, fraction"),
    "accuracy_drop_pp": (pl.Float64(), "validation drop vs the dense baseline, percentage points"),
    "accepted": (pl.Boolean(), "false: the drop exceeded Δmax and the step was rolled back"),
}


def empty(columns: dict[str, tuple[pl.DataType, str]]) -> pl.DataFrame:
    """An empty frame with the table's schema."""
    return pl.DataFrame(schema={name: dtype for name, (dtype, _) in columns.items()})


def conform(df: pl.DataFrame, columns: dict[str, tuple[pl.DataType, str]]) -> pl.DataFrame:
    """Select the table's columns in order with their dtypes (missing ones become null)."""
    if df.width == 0:
        return empty(columns)
    exprs = []
    for name, (dtype, _) in columns.items():
        expr = pl.col(name) if name in df.columns else pl.lit(None)
        exprs.append(expr.cast(dtype).alias(name))
    return df.select(exprs)


def write_layer_latency(df: pl.DataFrame, out_dir: Path) -> Path:
    """Write the per-layer latency table to ``out_dir/layer_latency.parquet`` (atomically)."""
    return _write(conform(df, LAYER_LATENCY), out_dir / "layer_latency.parquet", "compress_layer_latency")


def write_run_latency(df: pl.DataFrame, out_dir: Path) -> Path:
    """Write the per-inference latency table to ``out_dir/run_latency.parquet``."""
    return _write(conform(df, RUN_LATENCY), out_dir / "run_latency.parquet", "compress_run_latency")


def write_candidates(df: pl.DataFrame, out_dir: Path) -> Path:
    """Write the candidate metrics to ``out_dir/candidates.parquet``."""
    return _write(conform(df, CANDIDATES), out_dir / "candidates.parquet", "compress_candidates")


def write_pruning_steps(df: pl.DataFrame, out_dir: Path) -> Path:
    """Write the pruning history to ``out_dir/pruning_steps.parquet``."""
    return _write(conform(df, PRUNING_STEPS), out_dir / "pruning_steps.parquet", "compress_pruning_steps")


def _write(df: pl.DataFrame, path: Path, table: str) -> Path:
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    arrow = df.to_arrow()
    arrow = arrow.replace_schema_metadata(
        {**(arrow.schema.metadata or {}), b"stallscope.table": table.encode(), b"stallscope.schema_version": SCHEMA_VERSION.encode()}
    )
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(arrow, tmp)
    os.replace(tmp, path)
    return path
