"""ONNX export and int8 static post-training quantization (ONNX Runtime, QDQ, per channel).

The int8 runtime is ONNX Runtime: the fp32 model is exported with ``torch.onnx.export``
(the ``torch.export``-based exporter; no deprecated ``torch.ao`` quantization APIs), then
``onnxruntime.quantization.quantize_static`` inserts QuantizeLinear/DequantizeLinear pairs
(QDQ format) with per-output-channel int8 weights and uint8 activations whose ranges come from
calibration batches of training data. At session creation ORT fuses each QDQ pattern into an
integer kernel (QLinearConv, QLinearAdd, ...): the quantized model runs int8 arithmetic.

Export renames every ONNX node ``<module path>/<OpType>`` (e.g. ``stages.0.1.conv2/Conv``) from
the exporter's name-scope metadata, so that ORT profiler events, and therefore the per-layer
latency table, name the PyTorch layer. A conv whose BatchNorm the exporter folded into it is
named after the conv, not the BN.
"""

from __future__ import annotations

import ast
import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from stallscope.compress.failures import as_compress_error, export_summary
from stallscope.errors import CompressError

if TYPE_CHECKING:  # pragma: no cover
    import onnxruntime as ort
    import torch
    from torch import nn

INPUT_NAME = "input"
OUTPUT_NAME = "logits"
CalibrationMethod = Literal["minmax", "entropy", "percentile"]


def export_onnx(model: "nn.Module", example: "torch.Tensor", path: Path, *, opset: int = 18) -> Path:
    """Export ``model`` (fp32, eval mode, dynamic batch) to ``path`` with readable node names."""
    import onnx
    import torch

    from stallscope.compress import cost as cost_mod

    model = model.cpu().eval()
    sample = example[:2].cpu() if len(example) >= 2 else example.repeat(2, *([1] * (example.ndim - 1)))
    bn_to_conv = {bn: conv for conv, bn in cost_mod.measure(model, sample).bn_after.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _quiet_exporter():
            program = torch.onnx.export(
                model,
                (sample,),
                None,
                dynamo=True,
                verbose=False,
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
                dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=65536)},),
                opset_version=opset,
            )
            if program is None:  # pragma: no cover - only when f= is given
                raise RuntimeError("the exporter returned no program")
            program.save(str(path), external_data=False)
    except Exception as exc:
        raise CompressError(f"ONNX export of the model failed: {export_summary(exc)}") from exc
    with as_compress_error(f"reading the exported ONNX model {path.name} failed"):
        graph = onnx.load(str(path))
        _name_nodes(graph, bn_to_conv)
        onnx.save(graph, str(path))
    return path


def int8_products_saturate(cpuinfo: str | None = None) -> bool:
    """Whether this CPU's int8 kernels can saturate: an x86 CPU without VNNI (AVX2 or AVX-512
    only) multiplies uint8 activations by int8 weights with ``vpmaddubsw``, which adds each
    pair of products in int16 and saturates there. ONNX Runtime's fused QLinearConv then
    computes wrong sums for full-range int8 weights (a 16x16-digits ResNet: 86.7 % fp32, 78.3 %
    int8 on an AVX2-only EPYC, 86.4 % with the same QDQ model run unfused), and its documentation
    advises 7-bit weights (``reduce_range``) there. VNNI (``avx512_vnni``, ``avx_vnni``) and
    non-x86 CPUs accumulate in int32. ``cpuinfo``: the text of ``/proc/cpuinfo`` (read when not
    given); an x86 CPU whose flags cannot be read is taken to saturate (7-bit weights cost a
    little precision, saturation costs accuracy)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return True
    flags = {f for line in cpuinfo.splitlines() if line.startswith("flags") for f in line.split(":", 1)[-1].split()}
    if not flags:
        return True
    return not ({"avx512_vnni", "avx_vnni"} & flags)


def quantize_int8(
    fp32_path: Path,
    out_path: Path,
    calibration: np.ndarray,
    *,
    per_channel: bool = True,
    method: CalibrationMethod = "minmax",
    batch_size: int = 32,
    exclude_nodes: list[str] | None = None,
    reduce_range: bool | None = None,
) -> Path:
    """Static int8 PTQ of an fp32 ONNX model: QDQ, int8 weights (per channel), uint8 activations.

    ``reduce_range``: 7-bit weights; by default where this CPU's int8 products saturate
    (:func:`int8_products_saturate`), since the model is evaluated on the device it was made on."""
    if reduce_range is None:
        reduce_range = int8_products_saturate()
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod as OrtMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._batches = iter(
                [{INPUT_NAME: calibration[i : i + batch_size]} for i in range(0, len(calibration), batch_size)]
            )

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._batches, None)

    methods = {"minmax": OrtMethod.MinMax, "entropy": OrtMethod.Entropy, "percentile": OrtMethod.Percentile}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    prepared = out_path.with_name(out_path.stem + ".pre.onnx")
    with _quiet_exporter(), as_compress_error(f"int8 quantization of {fp32_path.name} failed"):
        quant_pre_process(str(fp32_path), str(prepared))
        quantize_static(
            str(prepared),
            str(out_path),
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=per_channel,
            reduce_range=reduce_range,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=methods[method],
            nodes_to_exclude=exclude_nodes or [],
        )
    prepared.unlink(missing_ok=True)
    for leftover in out_path.parent.glob("augmented_model*.onnx"):  # calibration scratch files
        leftover.unlink(missing_ok=True)
    return out_path


def session(
    path: Path, *, threads: int = 1, providers: list[str] | None = None, profile_prefix: Path | None = None
) -> "ort.InferenceSession":
    """An ORT session: all graph optimizations, sequential, ``threads`` intra-op threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_prefix)
    with as_compress_error(f"ONNX Runtime cannot load {path.name}"):
        return ort.InferenceSession(str(path), options, providers=providers or ["CPUExecutionProvider"])


def onnx_accuracy(path: Path, x: np.ndarray, y: np.ndarray, *, batch_size: int = 256, threads: int = 2) -> float:
    """Top-1 accuracy of an ONNX classifier on ``(x, y)`` with ONNX Runtime on CPU."""
    sess = session(path, threads=threads)
    correct = 0
    with as_compress_error(f"running {path.name} failed"):
        for start in range(0, len(x), batch_size):
            (logits,) = sess.run([OUTPUT_NAME], {INPUT_NAME: x[start : start + batch_size]})
            correct += int((np.asarray(logits).argmax(1) == y[start : start + batch_size]).sum())
    return correct / len(x)


#: ops through which a fused node's output name is walked back to the layer that computes it
_PASS_THROUGH = {"Relu", "Clip", "HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "LeakyRelu", "BatchNormalization",
                 "QuantizeLinear", "DequantizeLinear", "Identity"}


def layer_map(path: Path) -> dict[str, str]:
    """Map node names and tensor names of an ONNX model to the PyTorch layer that computes them.

    ORT renames nodes it creates while optimizing: layout-transformed convs are named after the
    tensor their fused chain produces (``relu_3_nchwc`` for conv + ReLU). A tensor maps to its
    producer's layer, walking back through activations to the conv or GEMM that computes it.
    """
    import onnx

    with as_compress_error(f"reading {path.name} failed"):
        graph = onnx.load(str(path), load_external_data=False).graph
    producer = {out: node for node in graph.node for out in node.output}
    initializers = {init.name for init in graph.initializer}

    def layer_of(node: "onnx.NodeProto") -> str:
        return node.name.split("/", 1)[0] if "/" in node.name else node.name

    mapping = {node.name: layer_of(node) for node in graph.node}
    for tensor, node in producer.items():
        current = node
        for _ in range(8):
            if current.op_type not in _PASS_THROUGH:
                break
            inputs = [i for i in current.input if i and i not in initializers and i in producer]
            if len(inputs) != 1:
                break
            current = producer[inputs[0]]
        mapping.setdefault(tensor, layer_of(current))
    return mapping


def nodes_of_layers(path: Path, layers: tuple[str, ...] | list[str]) -> list[str]:
    """Names of the nodes of an exported model that belong to the given PyTorch layers."""
    import onnx

    wanted = set(layers)
    graph = onnx.load(str(path), load_external_data=False).graph
    return [n.name for n in graph.node if n.name.split("/", 1)[0] in wanted]


def _name_nodes(graph: "object", bn_to_conv: dict[str, str]) -> None:
    """Rename nodes ``<module path>/<OpType>`` from the exporter's name-scope metadata."""
    seen: dict[str, int] = {}
    for node in graph.graph.node:  # type: ignore[attr-defined]
        meta = {p.key: p.value for p in node.metadata_props}
        module = ""
        try:
            scopes = ast.literal_eval(meta.get("pkg.torch.onnx.name_scopes", "[]"))
            if isinstance(scopes, list) and len(scopes) >= 2:
                module = str(scopes[-2])
        except (ValueError, SyntaxError):
            module = ""
        if module in bn_to_conv and "FuseBatchNormIntoConv" in meta.get("pkg.onnxscript.rewriter.rule_name", ""):
            module = bn_to_conv[module]
        base = f"{module or 'model'}/{node.op_type}"
        count = seen.get(base, 0)
        seen[base] = count + 1
        node.name = base if count == 0 else f"{base}_{count}"


@contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's and quantizer's warnings and progress logs for one call."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript", "root")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def file_size(path: Path) -> int:
    """Serialized size in bytes (weights are stored inside the ONNX file, no external data)."""
    return os.path.getsize(path)
