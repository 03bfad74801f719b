"""Latency of candidate models, measured on the device and read back from trace files.

Every model is timed in two passes, each interleaved over all variants (round-robin, the
starting variant rotated every round, so drift hits every variant alike), single-threaded by
default (``intra_op_num_threads=1``, ``torch.set_num_threads(1)``), with warm-up runs that are
executed and dropped, and summarized by medians:

1. **timing pass, no profiler**: each inference is timed with ``time.perf_counter_ns`` around
   ``session.run`` / the forward call (plus ``torch.cuda.synchronize`` on CUDA). The spans are
   written as a gzipped Chrome-trace file (``timing_<runtime>.trace.json.gz``, ``cat: stallscope_run``)
   and read back from it (source ``wall``).
2. **profiled pass**: ORT sessions with ``SessionOptions.enable_profiling``: the ``model_run``
   event of the ORT profile gives the profiled latency of an inference and the node
   ``*_kernel_time`` events the per-layer latency. PyTorch eager models run under
   ``torch.profiler`` with a ``stallscope::run::...`` annotation per inference and a
   ``stallscope::layer::...`` annotation per leaf module; on CUDA the GPU-side spans of the same
   annotations (Kineto's ``gpu_user_annotation``, which cover the CUDA kernels) are used.

Why two passes: profiling is not free. On this project's 2-core CPU, ORT 1.32's profiler adds
a few microseconds per node (it records shapes and memory-arena statistics for every node),
which inflated the batch-1 latency of the int8 ResNet example by ~65% and of its fp32 twin by
~30%: int8 graphs have more nodes (Quantize/Transpose/QLinearAdd), so profiled totals
understate int8 speedups. The unprofiled pass is the headline number by default; the profiled
totals are kept beside it (``profiled_latency_ms``) and the per-layer table comes from the
profiler. ``latency_source="profiler"`` makes the profiled totals the headline instead.

The results are polars DataFrames with the columns of :data:`.tables.RUN_LATENCY` and
:data:`.tables.LAYER_LATENCY`.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl

from stallscope.compress import tables
from stallscope.compress.failures import as_compress_error, first_line
from stallscope.errors import CompressError

if TYPE_CHECKING:  # pragma: no cover
    import onnxruntime as ort
    from torch import nn

Device = Literal["cpu", "cuda"]
RUN_TAG = "stallscope::run"
LAYER_TAG = "stallscope::layer"
_TOKEN = re.compile(r"_token_\d+$")


@dataclass
class Latency:
    """Per-inference and per-layer latency rows, and the raw trace files they were read from."""

    runs: pl.DataFrame
    layers: pl.DataFrame
    traces: list[Path] = field(default_factory=list)

    def medians(self, *, source: str | None = None, runtime: str | None = None) -> dict[tuple[str, int], float]:
        """``{(candidate, batch): median latency in ms}`` over the measured runs of one source."""
        runs = self.runs if source is None else self.runs.filter(pl.col("source") == source)
        if runtime is not None:
            runs = runs.filter(pl.col("runtime") == runtime)
        if runs.is_empty():
            return {}
        agg = runs.group_by("candidate", "batch").agg(pl.col("dur_ns").median().alias("median_ns"))
        return {(r["candidate"], int(r["batch"])): r["median_ns"] / 1e6 for r in agg.iter_rows(named=True)}


def measure_onnxruntime(
    models: Mapping[str, Path],
    inputs: Mapping[int, np.ndarray],
    *,
    runs: Mapping[int, int],
    trace_dir: Path,
    warmup: int = 10,
    threads: int = 1,
    device: Device = "cpu",
    run_id: str = "",
    root: Path | None = None,
) -> Latency:
    """Time ONNX models in ORT: ``runs[batch]`` inferences per model and batch, in both passes.

    ``inputs[batch]`` is the input array for that batch size. Trace files land in
    ``trace_dir``: ``timing_onnxruntime.trace.json`` (unprofiled pass) and
    ``ort_<candidate>.json`` (ORT profiles); ``trace_file`` columns are relative to ``root``.
    """
    from stallscope.compress.quantize import INPUT_NAME, layer_map, session

    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    trace_dir.mkdir(parents=True, exist_ok=True)
    names = list(models)
    feeds = {b: {INPUT_NAME: np.ascontiguousarray(x, dtype=np.float32)} for b, x in inputs.items()}
    def caller(sessions: Mapping[str, "ort.InferenceSession"], name: str) -> Callable[[int], object]:
        sess = sessions[name]
        return lambda batch: sess.run(None, feeds[batch])

    unprofiled = {name: session(models[name], threads=threads, providers=providers) for name in names}
    with as_compress_error("ONNX Runtime inference failed during latency measurement"):
        spans = _interleave({name: caller(unprofiled, name) for name in names}, runs, warmup=warmup)
    del unprofiled
    timing = _write_timing_trace(spans, trace_dir / "timing_onnxruntime.trace.json.gz", runtime="onnxruntime")
    wall = _timing_frame(timing, root=root, run_id=run_id, device=device)
    # The same loop again, profiled: the i-th model_run event of a session is its i-th call.
    sessions = {
        name: session(models[name], threads=threads, providers=providers, profile_prefix=trace_dir / f"ort_{_safe(name)}")
        for name in names
    }
    with as_compress_error("ONNX Runtime inference failed during latency measurement"):
        calls = _interleave({name: caller(sessions, name) for name in names}, runs, warmup=warmup)
    schedule = {name: [(b, i) for n, b, i, _, _ in calls if n == name] for name in names}
    run_frames, layer_frames, traces = [wall], [], [timing]
    for name in names:
        raw = Path(sessions[name].end_profiling())
        trace = _gzip(raw, trace_dir / f"ort_{_safe(name)}.json.gz")
        traces.append(trace)
        run_df, node_df = read_ort_profile(trace, layers=layer_map(models[name]))
        rel = str(trace.relative_to(root)) if root else trace.name
        run_df, node_df = _attach_schedule(run_df, node_df, schedule[name], trace)
        meta = {"run_id": run_id, "candidate": name, "runtime": "onnxruntime", "device": device, "trace_file": rel}
        run_frames.append(run_df.with_columns(**{k: pl.lit(v) for k, v in meta.items()}, source=pl.lit("ort_model_run")))
        layer_frames.append(node_df.with_columns(**{k: pl.lit(v) for k, v in meta.items()}, source=pl.lit("ort_node")))
    return Latency(
        runs=tables.conform(pl.concat([tables.conform(f, tables.RUN_LATENCY) for f in run_frames]), tables.RUN_LATENCY),
        layers=tables.conform(pl.concat(layer_frames, how="diagonal_relaxed"), tables.LAYER_LATENCY),
        traces=traces,
    )


def read_ort_profile(path: Path, *, layers: Mapping[str, str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Parse an ORT profile: ``model_run`` events and node ``*_kernel_time`` events.

    Returns ``(runs, nodes)``. ``runs`` has ``seq`` (0-based order of the inference in the
    session), ``ts_ns``, ``dur_ns``; ``nodes`` has ``node``, ``layer``, ``op_type``,
    ``provider``, ``ts_ns``, ``dur_ns`` and ``seq`` of the inference that contains the node.
    Timestamps and durations in an ORT profile are whole microseconds. ``layers`` maps node and
    tensor names of the model to PyTorch layers (:func:`.quantize.layer_map`); without it a node
    ``<layer>/<Op>`` is attributed by its name prefix.
    """
    layers = layers or {}
    try:
        events = _load_json(path)
    except (OSError, ValueError, EOFError) as exc:
        raise CompressError(f"cannot read ORT profile {path}: {first_line(exc)}") from None
    if isinstance(events, dict):  # newer ORT versions may wrap the list
        events = events.get("traceEvents", [])
    if not isinstance(events, list):
        raise CompressError(f"{path} is not an ONNX Runtime profile (expected a JSON list of events)")
    run_rows: list[tuple[int, int]] = []
    node_rows: list[tuple[str, str, str, str, int, int]] = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        name = str(ev.get("name", ""))
        ts, dur = int(ev.get("ts", 0)) * 1000, int(ev.get("dur", 0)) * 1000
        if ev.get("cat") == "Session" and name == "model_run":
            run_rows.append((ts, dur))
        elif ev.get("cat") == "Node" and name.endswith("_kernel_time"):
            args = ev.get("args") or {}
            node = name[: -len("_kernel_time")]
            layer = _layer_of(node, layers)
            node_rows.append((node, layer, str(args.get("op_name", "")), str(args.get("provider", "")), ts, dur))
    run_rows.sort()
    runs = pl.DataFrame(
        {"seq": list(range(len(run_rows))), "ts_ns": [r[0] for r in run_rows], "dur_ns": [r[1] for r in run_rows]},
        schema={"seq": pl.Int32, "ts_ns": pl.Int64, "dur_ns": pl.Int64},
    )
    nodes = pl.DataFrame(
        node_rows,
        schema={"node": pl.Utf8, "layer": pl.Utf8, "op_type": pl.Utf8, "provider": pl.Utf8, "ts_ns": pl.Int64, "dur_ns": pl.Int64},
        orient="row",
    )
    return runs, _assign_to_runs(nodes, runs)


def measure_torch(
    models: Mapping[str, "nn.Module"],
    inputs: Mapping[int, np.ndarray],
    *,
    runs: Mapping[int, int],
    trace_dir: Path,
    warmup: int = 10,
    threads: int = 1,
    device: Device = "cpu",
    run_id: str = "",
    root: Path | None = None,
    trace_name: str = "torch_fp32.pt.trace.json",  # written gzipped, as <trace_name>.gz
) -> Latency:
    """Time PyTorch eager models: an unprofiled pass, then one ``torch.profiler`` pass (one Kineto trace)."""
    import torch
    from torch.autograd.profiler import record_function

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    names = list(models)
    tensors = {b: torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device) for b, x in inputs.items()}
    handles = []
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def call(name: str) -> Callable[[int], None]:
        def run(batch: int) -> None:
            models[name](tensors[batch])
            sync()

        return run

    try:
        for name in names:
            models[name].to(device).eval()
        with torch.inference_mode(), as_compress_error("PyTorch inference failed during latency measurement"):
            spans = _interleave({name: call(name) for name in names}, runs, warmup=warmup)
            for name in names:
                handles += _annotate_layers(models[name])
            activities = [torch.profiler.ProfilerActivity.CPU]
            if device == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            prof = torch.profiler.profile(activities=activities)
            with _native_stderr_silenced():  # Kineto prints "USDT: profiler_start/stop" lines
                prof.start()
            try:  # already warm: measured rounds only, each call annotated with its run index
                counter = {(name, b): 0 for name in names for b in runs}

                def annotated(name: str) -> Callable[[int], None]:
                    def run(batch: int) -> None:
                        index = counter[(name, batch)]
                        counter[(name, batch)] += 1
                        with record_function(f"{RUN_TAG}::{name}::b{batch}::{index}"):
                            call(name)(batch)

                    return run

                _interleave({name: annotated(name) for name in names}, runs, warmup=0)
            finally:
                with _native_stderr_silenced():
                    prof.stop()
    finally:
        for h in handles:
            h.remove()
        torch.set_num_threads(previous_threads)
    trace_dir.mkdir(parents=True, exist_ok=True)
    timing = _write_timing_trace(spans, trace_dir / "timing_torch.trace.json.gz", runtime="torch")
    wall = _timing_frame(timing, root=root, run_id=run_id, device=device)
    raw = trace_dir / trace_name
    prof.export_chrome_trace(str(raw))
    trace = _gzip(raw, trace_dir / f"{trace_name}.gz")
    run_df, layer_df = read_torch_trace(trace)
    rel = str(trace.relative_to(root)) if root else trace.name
    meta = {"run_id": run_id, "runtime": "torch", "device": device, "trace_file": rel}
    run_df = run_df.with_columns(**{k: pl.lit(v) for k, v in meta.items()})
    layer_df = layer_df.with_columns(**{k: pl.lit(v) for k, v in meta.items()})
    return Latency(
        runs=tables.conform(pl.concat([wall, tables.conform(run_df, tables.RUN_LATENCY)]), tables.RUN_LATENCY),
        layers=tables.conform(layer_df, tables.LAYER_LATENCY),
        traces=[timing, trace],
    )


def read_torch_trace(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Parse a Kineto trace written by :func:`measure_torch`.

    Runs come from ``stallscope::run::<candidate>::b<batch>::<i>`` annotations (CPU
    ``user_annotation``; on CUDA also the ``gpu_user_annotation`` span of the same name, which
    covers the run's kernels). Layers come from ``stallscope::layer::<module>::<class>``
    annotations inside a run.
    """
    try:
        doc = _load_json(path)
    except (OSError, ValueError, EOFError) as exc:
        raise CompressError(f"cannot read PyTorch trace {path}: {first_line(exc)}") from None
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    run_rows: list[dict[str, object]] = []
    layer_rows: list[dict[str, object]] = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat, name = ev.get("cat"), str(ev.get("name", ""))
        if cat not in ("user_annotation", "gpu_user_annotation"):
            continue
        where = "gpu" if cat == "gpu_user_annotation" else "cpu"
        ts, dur = int(round(float(ev.get("ts", 0)) * 1000)), int(round(float(ev.get("dur", 0)) * 1000))
        if name.startswith(RUN_TAG + "::"):
            candidate, batch, index = name[len(RUN_TAG) + 2 :].rsplit("::", 2)
            run_rows.append(
                {"candidate": candidate, "batch": int(batch.lstrip("b")), "run_index": int(index), "ts_ns": ts, "dur_ns": dur,
                 "source": f"torch_run_{where}", "lane": f"{where}:{ev.get('pid')}:{ev.get('tid')}"}
            )
        elif name.startswith(LAYER_TAG + "::"):
            layer, op_type = name[len(LAYER_TAG) + 2 :].rsplit("::", 1)
            layer_rows.append(
                {"layer": layer, "node": name, "op_type": op_type, "ts_ns": ts, "dur_ns": dur,
                 "source": f"torch_layer_{where}", "provider": f"torch-{where}", "lane": f"{where}:{ev.get('pid')}:{ev.get('tid')}"}
            )
    run_schema = {"candidate": pl.Utf8, "batch": pl.Int32, "run_index": pl.Int32, "ts_ns": pl.Int64, "dur_ns": pl.Int64,
                  "source": pl.Utf8, "lane": pl.Utf8}
    layer_schema = {"layer": pl.Utf8, "node": pl.Utf8, "op_type": pl.Utf8, "ts_ns": pl.Int64, "dur_ns": pl.Int64,
                    "source": pl.Utf8, "provider": pl.Utf8, "lane": pl.Utf8}
    runs = pl.DataFrame(run_rows, schema=run_schema)
    layers = pl.DataFrame(layer_rows, schema=layer_schema)
    # A layer belongs to the run on the same lane (thread, or GPU timeline) whose span contains it.
    keyed = runs.with_columns(pl.int_range(pl.len()).alias("seq").cast(pl.Int32)).with_columns(
        kind=pl.col("source").str.extract(r"_(cpu|gpu)$")
    )
    layers = layers.with_columns(kind=pl.col("source").str.extract(r"_(cpu|gpu)$"))
    parts = []
    for kind in ("cpu", "gpu"):
        k_runs = keyed.filter(pl.col("kind") == kind)
        k_layers = layers.filter(pl.col("kind") == kind)
        if k_layers.is_empty() or k_runs.is_empty():
            continue
        assigned = _assign_to_runs(k_layers.drop("kind"), k_runs.select("seq", "ts_ns", "dur_ns"))
        parts.append(
            assigned.drop_nulls("seq").join(k_runs.select("seq", "candidate", "batch", "run_index"), on="seq", how="left")
        )
    layer_out = pl.concat(parts, how="diagonal_relaxed") if parts else layers.drop("kind")
    return runs.drop("lane"), layer_out.drop([c for c in ("lane", "seq", "kind") if c in layer_out.columns])


def _interleave(
    calls: Mapping[str, Callable[[int], object]], runs: Mapping[int, int], *, warmup: int
) -> list[tuple[str, int, int, int, int]]:
    """Run every variant round-robin and time each call: ``(name, batch, run_index, start_ns, dur_ns)``.

    For each batch size, ``warmup`` rounds (``run_index`` -1) precede ``runs[batch]`` measured
    rounds; the variant that starts a round rotates every round. Every call is listed, in the
    order it was made.
    """
    names = list(calls)
    spans: list[tuple[str, int, int, int, int]] = []
    clock = time.perf_counter_ns
    for batch in sorted(runs):
        for round_no, run_index in enumerate([-1] * warmup + list(range(runs[batch]))):
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                start = clock()
                calls[name](batch)
                spans.append((name, batch, run_index, start, clock() - start))
    return spans


def _write_timing_trace(spans: list[tuple[str, int, int, int, int]], path: Path, *, runtime: str) -> Path:
    """Write the measured (not warm-up) inference spans as a gzipped Chrome-trace JSON file (µs)."""
    events = [
        {"ph": "X", "cat": "stallscope_run", "name": f"{RUN_TAG}::{name}::b{batch}::{index}",
         "ts": start / 1e3, "dur": dur / 1e3, "pid": os.getpid(), "tid": threading.get_native_id(),
         "args": {"candidate": name, "runtime": runtime, "batch": batch, "run_index": index}}
        for name, batch, index, start, dur in spans if index >= 0
    ]
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"producer": "stallscope.compress", "clock": "time.perf_counter_ns", "profiler": "none"}}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def read_timing_trace(path: Path) -> pl.DataFrame:
    """Read a timing trace written by the unprofiled pass: one row per inference (ns)."""
    try:
        doc = _load_json(path)
    except (OSError, ValueError, EOFError) as exc:
        raise CompressError(f"cannot read timing trace {path}: {first_line(exc)}") from None
    if not isinstance(doc, dict):
        raise CompressError(f"{path} is not a timing trace (expected a JSON object with traceEvents)")
    rows = [
        {**{k: ev["args"][k] for k in ("candidate", "runtime", "batch", "run_index")},
         "ts_ns": int(round(float(ev["ts"]) * 1e3)), "dur_ns": int(round(float(ev["dur"]) * 1e3))}
        for ev in doc.get("traceEvents", []) if ev.get("cat") == "stallscope_run"
    ]
    schema = {"candidate": pl.Utf8, "runtime": pl.Utf8, "batch": pl.Int32, "run_index": pl.Int32,
              "ts_ns": pl.Int64, "dur_ns": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def _timing_frame(path: Path, *, root: Path | None, run_id: str, device: str) -> pl.DataFrame:
    rel = str(path.relative_to(root)) if root else path.name
    df = read_timing_trace(path).with_columns(
        run_id=pl.lit(run_id), device=pl.lit(device), trace_file=pl.lit(rel), source=pl.lit("wall"))
    return tables.conform(df, tables.RUN_LATENCY)


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null for a moment (native libraries print there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _annotate_layers(model: "nn.Module") -> list:
    """Wrap every leaf module's forward in a ``stallscope::layer::<path>::<class>`` annotation."""
    from torch.autograd.profiler import record_function

    handles = []
    stack: list[record_function] = []
    for path, module in model.named_modules():
        if any(True for _ in module.children()) or not path:
            continue
        label = f"{LAYER_TAG}::{path}::{type(module).__name__}"

        def pre(_m: object, _inp: object, label: str = label) -> None:
            rf = record_function(label)
            rf.__enter__()
            stack.append(rf)

        def post(_m: object, _inp: object, _out: object) -> None:
            if stack:
                stack.pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    return handles


def _assign_to_runs(items: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Add ``seq``: the run whose ``[ts, ts + dur]`` contains each item's start (null if none)."""
    if items.is_empty() or runs.is_empty():
        return items.with_columns(seq=pl.lit(None, dtype=pl.Int32))
    spans = runs.select("seq", pl.col("ts_ns").alias("run_ts"), (pl.col("ts_ns") + pl.col("dur_ns")).alias("run_end")).sort("run_ts")
    joined = items.sort("ts_ns").join_asof(spans, left_on="ts_ns", right_on="run_ts", strategy="backward")
    return joined.with_columns(
        seq=pl.when(pl.col("ts_ns") <= pl.col("run_end")).then(pl.col("seq")).otherwise(None)
    ).drop("run_ts", "run_end")


def _attach_schedule(
    runs: pl.DataFrame, nodes: pl.DataFrame, schedule: list[tuple[int, int]], trace: Path
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Label the session's i-th ``model_run`` with the i-th (batch, run index) it was called with."""
    if len(runs) != len(schedule):
        raise CompressError(
            f"{trace.name}: the ORT profile holds {len(runs)} model_run events but {len(schedule)} runs were made"
        )
    plan = pl.DataFrame(
        {"seq": list(range(len(schedule))), "batch": [b for b, _ in schedule], "run_index": [i for _, i in schedule]},
        schema={"seq": pl.Int32, "batch": pl.Int32, "run_index": pl.Int32},
    )
    runs = runs.join(plan, on="seq").filter(pl.col("run_index") >= 0)
    nodes = nodes.join(plan, on="seq").filter(pl.col("run_index") >= 0)
    return runs.drop("seq"), nodes.drop("seq")


def _layer_of(node: str, layers: Mapping[str, str]) -> str:
    """The PyTorch layer of an ORT profile node name (see :func:`.quantize.layer_map`)."""
    base = _TOKEN.sub("", node)
    for key in (node, base, base.removesuffix("_nchwc")):
        if key in layers:
            return layers[key]
    return base.split("/", 1)[0] if "/" in base else base


def _gzip(src: Path, dest: Path) -> Path:
    """Compress a raw trace file (Kineto traces shrink ~13x) and remove the original."""
    with open(src, "rb") as fin, gzip.open(dest, "wb", compresslevel=6) as fout:
        shutil.copyfileobj(fin, fout)
    src.unlink()
    return dest


def _load_json(path: Path) -> Any:
    """Load a JSON trace, gzipped or not."""
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as fh:
            return json.load(fh)
    return json.loads(path.read_text())


def _safe(name: str) -> str:
    """A file-name-safe version of a candidate name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)
