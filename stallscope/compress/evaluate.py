"""Build, measure and compare compression candidates; pick the recommended one.

Candidates (all exported to ONNX and timed in the same runtime, ONNX Runtime):

``dense-fp32`` (kind ``dense``)
    the model as given: the baseline every drop, speedup and size reduction refers to.
``quant-int8`` (``quant``)
    the dense model with int8 static PTQ only.
``prune-fp32@<Δ>`` (``prune``)
    Fisher-guided iterative pruning under budget Δ (validation drop), fp32.
``hqp-int8@<Δ>`` (``hqp``)
    HQP: the same pruning trajectory, then int8 PTQ, with the budget applied to the **final
    quantized** model: starting from the last pruning checkpoint, the quantized model's
    validation drop is checked and the pruner's checkpoints are walked back until it holds.
``hqp-mixed@<Δ>`` (``hqp``)
    the same HQP model with the layers kept in fp32 where a short profiled probe measured int8
    slower than fp32 (e.g. a stem conv with one input channel); built only when there are such
    layers, and subject to the same gate. Measure, don't assume: both are timed.

``prune`` and ``hqp`` at the same Δ share one trajectory, so they are compared at an equal
accuracy budget. Every decision (pruning rollbacks, the HQP gate, ``within_budget``, the
recommendation) uses the validation split; the test split is only reported.

The recommended candidate is the fastest at batch 1 among those within the run's Δmax
(ties: smaller file). The Pareto flag marks candidates that no other candidate beats on test
accuracy, batch-1 latency and size at once.
"""

from __future__ import annotations

import copy
import datetime as _dt
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl

from stallscope.compress import cost as cost_mod
from stallscope.compress import tables
from stallscope.compress.data import Splits
from stallscope.compress.failures import as_compress_error, first_line
from stallscope.compress.latency import Device, Latency
from stallscope.errors import CompressError

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

DeviceOption = Literal["auto", "cpu", "cuda"]
Kind = Literal["dense", "prune", "quant", "hqp"]
BATCHES = (1, 32)


@dataclass(frozen=True)
class EvaluateConfig:
    """Settings of one evaluation. Accuracy budgets are fractions (0.015 = 1.5 pp)."""

    max_accuracy_drop: float = 0.015
    #: HQP / prune-only trajectories run at these multiples of ``max_accuracy_drop``
    budget_fractions: tuple[float, ...] = (0.5, 1.0)
    target_macs_ratio: float = 0.1
    step_fraction: float = 0.3
    min_step_fraction: float = 0.04
    round_to: int = 8
    max_steps: int = 12
    finetune_epochs: float = 1.0
    finetune_lr: float = 1e-3
    calibration_batches: int = 8
    calibration_batch_size: int = 64
    quant_calibration_samples: int = 256
    per_channel: bool = True
    calibration_method: Literal["minmax", "entropy", "percentile"] = "minmax"
    runs_b1: int = 200
    runs_b32: int = 30
    warmup: int = 10
    #: intra-op threads while measuring latency
    threads: int = 1
    #: torch threads while training and fine-tuning (default: all cores)
    train_threads: int | None = None
    #: train the given model first (the built-in examples set this)
    train_epochs: float = 0.0
    train_lr: float = 3e-3
    #: also time fp32 candidates in eager PyTorch (unprofiled, and under torch.profiler)
    torch_latency: bool = True
    #: headline latency: the unprofiled timing pass, or the profiler's model_run events
    latency_source: Literal["wall", "profiler"] = "wall"
    #: also build ``hqp-mixed`` candidates that keep in fp32 the layers where int8 was measured
    #: slower (a short profiled probe of dense fp32 vs quant-only int8, at batch 1)
    mixed_precision: bool = True
    probe_runs: int = 60
    device: DeviceOption = "auto"
    seed: int = 0

    @property
    def budgets(self) -> list[float]:
        """Distinct accuracy budgets of the pruning trajectories, ascending."""
        return sorted({round(self.max_accuracy_drop * f, 6) for f in self.budget_fractions})


@dataclass
class Candidate:
    """One compressed (or not) model and its measurements."""

    name: str
    kind: Kind
    precision: Literal["fp32", "int8", "mixed"]
    onnx_path: Path
    params: int
    macs: int
    size_bytes: int
    val_accuracy: float
    test_accuracy: float
    budget: float | None = None
    pruning_steps: int = 0
    #: layers left in fp32 in an otherwise int8 model (``hqp-mixed``)
    fp32_layers: list[str] = field(default_factory=list)
    latency_ms: dict[int, float] = field(default_factory=dict)
    profiled_latency_ms: dict[int, float] = field(default_factory=dict)
    torch_latency_ms: dict[int, float] = field(default_factory=dict)
    within_budget: bool = False
    pareto: bool = False
    recommended: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class EvaluateResult:
    """Everything one evaluation produced; ``run_dir`` holds the tables and raw traces."""

    run_id: str
    run_dir: Path
    model_name: str
    dataset: str
    device: str
    config: EvaluateConfig
    baseline: Candidate
    candidates: list[Candidate]
    latency: Latency
    steps: pl.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def recommended(self) -> Candidate:
        return next(c for c in self.candidates if c.recommended)


def evaluate(
    model: "nn.Module",
    splits: Splits,
    *,
    store: Path,
    config: EvaluateConfig = EvaluateConfig(),
    name: str = "model",
    progress: Callable[[str], None] | None = None,
) -> EvaluateResult:
    """Evaluate dense, quant-only, prune-only and HQP candidates of ``model`` on ``splits``.

    Writes ``<store>/compress/<run id>/`` (tables, report.json, traces, ONNX models) and
    returns the result. Raises :class:`CompressError` with one line for bad input.
    """
    import torch

    from stallscope.compress import training

    say = progress or (lambda _msg: None)
    device = resolve_device(config.device)
    run_id = _run_id(name)
    run_dir = Path(store) / "compress" / run_id
    (run_dir / "models").mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(config.train_threads or max(1, os.cpu_count() or 1))
    inputs = {1: splits.x_test[:1], 32: _batch_of(splits.x_test, 32)}
    try:
        model = copy.deepcopy(model).to(device).eval()
        check_fits(model, splits, device=device)
        if config.train_epochs > 0:
            say(f"training {name} for {config.train_epochs:g} epochs on {len(splits.y_train)} samples")
            with as_compress_error("training the model failed"):
                training.fit(model, splits.x_train, splits.y_train, epochs=config.train_epochs, lr=config.train_lr,
                             seed=config.seed, device=device)
        builder = _Builder(run_dir, splits, config)
        say("exporting the dense fp32 model to ONNX")
        dense = builder.build("dense-fp32", "dense", model, int8=False)
        say(f"  dense: val acc {dense.val_accuracy:.4f}, test acc {dense.test_accuracy:.4f}, "
            f"{dense.macs / 1e6:.1f} MMACs, {dense.size_bytes / 1e3:.0f} kB")
        say("quantizing the dense model (int8 static PTQ, QDQ per channel)")
        quant = builder.build("quant-int8", "quant", model, int8=True, fp32_path=dense.onnx_path)
        say(f"  quant-int8: val acc {quant.val_accuracy:.4f} (drop {_pp(dense.val_accuracy - quant.val_accuracy):.2f}pp)")
        keep_fp32 = _int8_losers(dense, quant, inputs[1], run_dir, run_id, config, device, say)
        candidates = [dense, quant]
        step_frames = []
        reference = training.accuracy(model, splits.x_val, splits.y_val, device=device)
        shared_steps: dict = {}  # budgets share pruning steps until their verdicts differ
        for budget in config.budgets:
            built, history = _budget_candidates(
                model, budget, dense=dense, builder=builder, reference=reference, keep_fp32=keep_fp32,
                shared_steps=shared_steps, device=device, say=say)
            candidates += built
            step_frames.append(_steps_frame(history, budget, run_id))
    finally:
        torch.set_num_threads(previous_threads)
    latency = _measure(candidates, builder.torch_models, inputs, run_dir, run_id, config, device, say)
    steps = pl.concat(step_frames) if step_frames else tables.empty(tables.PRUNING_STEPS)
    result = EvaluateResult(
        run_id=run_id, run_dir=run_dir, model_name=name, dataset=splits.name, device=device, config=config,
        baseline=dense, candidates=candidates, latency=latency, steps=steps,
    )
    decide(result)
    write(result)
    return result


class _Builder:
    """Exports, quantizes and scores candidates into one run folder."""

    def __init__(self, run_dir: Path, splits: Splits, config: EvaluateConfig) -> None:
        import torch

        self.models_dir = run_dir / "models"
        self.splits = splits
        self.config = config
        self.example = torch.from_numpy(splits.x_train[:2])
        self.calibration = splits.x_train[: config.quant_calibration_samples]
        #: fp32 candidates by name: also timed in eager PyTorch
        self.torch_models: dict[str, nn.Module] = {}

    def fp32_path(self, name: str, *, int8: bool) -> Path:
        """Where a candidate's fp32 ONNX file goes (int8 candidates keep it as ``.fp32.onnx``)."""
        return self.models_dir / (f"{_file(name)}.fp32.onnx" if int8 else f"{_file(name)}.onnx")

    def build(self, name: str, kind: Kind, net: "nn.Module", *, int8: bool, budget: float | None = None,
              steps: int = 0, fp32_path: Path | None = None, keep_fp32: tuple[str, ...] = ()) -> Candidate:
        """Export ``net`` (unless ``fp32_path`` exists already), quantize it if ``int8``, score it."""
        from stallscope.compress import quantize

        cpu_net = copy.deepcopy(net).cpu().eval()
        if fp32_path is None:
            fp32_path = quantize.export_onnx(cpu_net, self.example, self.fp32_path(name, int8=int8))
        path = fp32_path
        if int8:
            exclude = quantize.nodes_of_layers(fp32_path, keep_fp32) if keep_fp32 else None
            path = quantize.quantize_int8(fp32_path, self.models_dir / f"{_file(name)}.onnx", self.calibration,
                                          per_channel=self.config.per_channel, method=self.config.calibration_method,
                                          exclude_nodes=exclude)
        else:
            self.torch_models[name] = net
        c = cost_mod.measure(cpu_net, self.example)
        s = self.splits
        return Candidate(
            name=name, kind=kind, precision=("mixed" if keep_fp32 else "int8") if int8 else "fp32",
            onnx_path=path, params=c.params, macs=c.macs, size_bytes=quantize.file_size(path),
            val_accuracy=quantize.onnx_accuracy(path, s.x_val, s.y_val),
            test_accuracy=quantize.onnx_accuracy(path, s.x_test, s.y_test),
            budget=budget, pruning_steps=steps, fp32_layers=list(keep_fp32),
        )


def _int8_losers(dense: Candidate, quant: Candidate, x1: np.ndarray, run_dir: Path, run_id: str,
                 config: EvaluateConfig, device: Device, say: Callable[[str], None]) -> tuple[str, ...]:
    """Layers where a short profiled probe measures int8 >= 20% and >= 2 µs slower than fp32 (batch 1)."""
    from stallscope.compress.latency import measure_onnxruntime

    if not config.mixed_precision:
        return ()
    say(f"probing int8 vs fp32 per layer (ORT profiler, batch 1, {config.probe_runs} runs)")
    probe = measure_onnxruntime(
        {dense.name: dense.onnx_path, quant.name: quant.onnx_path}, {1: x1}, runs={1: config.probe_runs},
        trace_dir=run_dir / "traces" / "probe", warmup=5, threads=config.threads, device=device,
        run_id=run_id, root=run_dir)
    slower = int8_slower_layers(probe.layers, fp32=dense.name, int8=quant.name)
    losers = slower.filter((pl.col("ratio") >= 1.2) & (pl.col("int8_us") - pl.col("fp32_us") >= 2.0))
    if not losers.is_empty():
        say("  int8 is slower on " + ", ".join(
            f"{r['layer']} ({r['int8_us']:.0f} vs {r['fp32_us']:.0f} µs)" for r in losers.iter_rows(named=True))
            + ": hqp-mixed candidates keep these layers in fp32")
    return tuple(losers["layer"].to_list())


def _budget_candidates(
    model: "nn.Module", budget: float, *, dense: Candidate, builder: _Builder, reference: float,
    keep_fp32: tuple[str, ...], shared_steps: dict, device: str, say: Callable[[str], None],
) -> tuple[list[Candidate], list[Any]]:
    """prune-fp32, hqp-int8 (and hqp-mixed) at one budget, from one pruning trajectory."""
    from stallscope.compress import prune, training

    config, s = builder.config, builder.splits
    say(f"pruning under Δmax = {_pp(budget):.2f}pp (Fisher-guided, round to {config.round_to})")
    trajectory = prune.iterative_prune(
        model,
        example=builder.example.to(device),
        calibration=lambda step: list(training.batches(
            s.x_train, s.y_train, batch_size=config.calibration_batch_size, count=config.calibration_batches,
            seed=config.seed + 1000 * step)),
        evaluate=lambda net: training.accuracy(net, s.x_val, s.y_val, device=device),
        finetune=lambda net, step: training.fit(
            net, s.x_train, s.y_train, epochs=config.finetune_epochs, lr=config.finetune_lr, seed=config.seed + step,
            device=device),
        config=prune.PruneConfig(
            max_accuracy_drop=budget, target_macs_ratio=config.target_macs_ratio, step_fraction=config.step_fraction,
            min_step_fraction=config.min_step_fraction, round_to=config.round_to, max_steps=config.max_steps),
        reference_accuracy=reference,
        device=device,
        progress=say,
        cache=shared_steps,
    )
    tag = f"{_pp(budget):g}pp"
    last = trajectory.checkpoints[-1]
    pruned = builder.build(f"prune-fp32@{tag}", "prune", last.model, int8=False, budget=budget, steps=last.step)
    built = [pruned]

    def within(c: Candidate) -> bool:
        return dense.val_accuracy - c.val_accuracy <= budget + 1e-9

    hqp = None
    for ckpt in reversed(trajectory.checkpoints):  # the HQP gate: Δmax on the final quantized model
        trial = builder.build(f"hqp-int8@{tag}", "hqp", ckpt.model, int8=True, budget=budget, steps=ckpt.step,
                              fp32_path=pruned.onnx_path if ckpt is last else None)
        say(f"  hqp@{tag} from pruning step {ckpt.step}: int8 val acc {trial.val_accuracy:.4f} "
            f"(drop {_pp(dense.val_accuracy - trial.val_accuracy):.2f}pp) "
            f"{'accepted' if within(trial) else 'over budget, stepping back'}")
        if within(trial):
            hqp = trial
            break
    if hqp is None:
        say(f"  no HQP candidate meets {tag}: even the unpruned int8 model is over budget")
        return built, trajectory.history
    if hqp.pruning_steps != last.step:
        hqp.notes.append(f"walked back from pruning step {last.step} to {hqp.pruning_steps}: the quantized later "
                         f"checkpoints exceeded {tag}")
    built.append(hqp)
    if keep_fp32:
        ckpt = next(c for c in trajectory.checkpoints if c.step == hqp.pruning_steps)
        fp32 = pruned.onnx_path if ckpt is last else builder.fp32_path(hqp.name, int8=True)
        mixed = builder.build(f"hqp-mixed@{tag}", "hqp", ckpt.model, int8=True, budget=budget, steps=ckpt.step,
                              fp32_path=fp32, keep_fp32=keep_fp32)
        if within(mixed):
            mixed.notes.append(f"layers kept in fp32 because int8 measured slower: {', '.join(keep_fp32)}")
            built.append(mixed)
        else:
            say(f"  hqp-mixed@{tag}: val drop {_pp(dense.val_accuracy - mixed.val_accuracy):.2f}pp is over budget")
    return built, trajectory.history


def _measure(candidates: list[Candidate], torch_models: dict[str, "nn.Module"], inputs: dict[int, np.ndarray],
             run_dir: Path, run_id: str, config: EvaluateConfig, device: Device,
             say: Callable[[str], None]) -> Latency:
    """Time every candidate in ORT (and fp32 ones in PyTorch); fill their latency fields."""
    from stallscope.compress.latency import measure_onnxruntime, measure_torch

    say(f"measuring latency in ONNX Runtime ({config.threads} thread(s), b1 x{config.runs_b1}, "
        f"b32 x{config.runs_b32}, interleaved; unprofiled, then profiled)")
    runs = {1: config.runs_b1, 32: config.runs_b32}
    traces = run_dir / "traces"
    latency = measure_onnxruntime(
        {c.name: c.onnx_path for c in candidates}, inputs, runs=runs, trace_dir=traces, warmup=config.warmup,
        threads=config.threads, device=device, run_id=run_id, root=run_dir)
    wall = latency.medians(source="wall")
    profiled = latency.medians(source="ort_model_run")
    headline = wall if config.latency_source == "wall" else profiled
    for c in candidates:
        c.latency_ms = {b: headline[(c.name, b)] for b in BATCHES}
        c.profiled_latency_ms = {b: profiled[(c.name, b)] for b in BATCHES}
    if not config.torch_latency:
        return latency
    fp32 = {c.name: c for c in candidates if c.precision == "fp32"}
    say(f"measuring latency in PyTorch eager ({', '.join(fp32)}): unprofiled, then under torch.profiler")
    torch_lat = measure_torch(
        {n: torch_models[n] for n in fp32}, inputs, runs=runs, trace_dir=traces, warmup=config.warmup,
        threads=config.threads, device=device, run_id=run_id, root=run_dir)
    source = "wall" if config.latency_source == "wall" else ("torch_run_gpu" if device == "cuda" else "torch_run_cpu")
    medians = torch_lat.medians(source=source)
    for c in fp32.values():
        c.torch_latency_ms = {b: medians[(c.name, b)] for b in BATCHES if (c.name, b) in medians}
    return Latency(
        runs=pl.concat([latency.runs, torch_lat.runs]),
        layers=pl.concat([latency.layers, torch_lat.layers]),
        traces=latency.traces + torch_lat.traces,
    )


def resolve_device(option: DeviceOption) -> Device:
    """``auto``: CUDA when PyTorch sees a GPU *and* ONNX Runtime has its CUDA provider; else CPU."""
    import torch

    if option == "cpu":
        return "cpu"
    has_torch_cuda = torch.cuda.is_available()
    try:
        import onnxruntime as ort

        has_ort_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    except ImportError:  # pragma: no cover - onnxruntime is a dependency of the compress extra
        has_ort_cuda = False
    if option == "cuda":
        if not has_torch_cuda:
            raise CompressError("--device cuda: PyTorch sees no CUDA device")
        if not has_ort_cuda:
            raise CompressError("--device cuda: onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)")
        return "cuda"
    return "cuda" if has_torch_cuda and has_ort_cuda else "cpu"


def check_fits(model: "nn.Module", splits: Splits, *, device: str = "cpu") -> None:
    """Fail with one line unless the model takes the dataset's samples and emits enough logits."""
    import torch

    sample = torch.from_numpy(splits.x_val[:2]).to(device)
    try:
        with torch.no_grad():
            out = model.eval()(sample)
    except Exception as exc:
        raise CompressError(
            f"the dataset ({splits.name}, samples of shape {splits.input_shape}) does not fit the model: "
            f"{first_line(exc)}") from None
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != len(sample):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise CompressError(f"the model must return logits of shape (batch, classes); got {shape}")
    if out.shape[1] < splits.num_classes:
        raise CompressError(
            f"the model emits {out.shape[1]} logits but the dataset has labels up to {splits.num_classes - 1}")


def decide(result: EvaluateResult) -> None:
    """Fill ``within_budget``, ``pareto`` and ``recommended``, and write the notes."""
    base = result.baseline
    budget = result.config.max_accuracy_drop
    for c in result.candidates:
        c.within_budget = base.val_accuracy - c.val_accuracy <= budget + 1e-9
        if base.test_accuracy - c.test_accuracy > budget + 1e-9 and c.within_budget:
            c.notes.append(
                f"test drop {_pp(base.test_accuracy - c.test_accuracy):.2f}pp exceeds Δmax although the validation "
                f"drop ({_pp(base.val_accuracy - c.val_accuracy):.2f}pp) is within it")
    for c in result.candidates:
        c.pareto = not any(_dominates(o, c) for o in result.candidates if o is not c)
    eligible = [c for c in result.candidates if c.within_budget] or [base]
    best = min(eligible, key=lambda c: (c.latency_ms[1], c.size_bytes))
    best.recommended = True
    result.notes.extend(_comparison_notes(result))
    overhead = [c.profiled_latency_ms[1] / c.latency_ms[1] - 1 for c in result.candidates
                if c.latency_ms.get(1) and c.profiled_latency_ms.get(1)]
    if overhead and result.config.latency_source == "wall":
        result.notes.append(
            f"the ORT profiler added {100 * min(overhead):.0f}% to {100 * max(overhead):.0f}% to batch-1 latency "
            "(profiled vs unprofiled medians); headline latencies are from the unprofiled pass, per-layer "
            "times from the profiled one")


def _dominates(a: Candidate, b: Candidate) -> bool:
    """``a`` is at least as good as ``b`` on test accuracy, b1 latency and size, better on one."""
    ge = a.test_accuracy >= b.test_accuracy and a.latency_ms[1] <= b.latency_ms[1] and a.size_bytes <= b.size_bytes
    gt = a.test_accuracy > b.test_accuracy or a.latency_ms[1] < b.latency_ms[1] or a.size_bytes < b.size_bytes
    return ge and gt


def _comparison_notes(result: EvaluateResult) -> list[str]:
    """Where HQP does not beat the single-objective baselines, and where int8 loses to fp32."""
    notes: list[str] = []
    by_name = {c.name: c for c in result.candidates}
    quant = by_name.get("quant-int8")
    for hqp in (c for c in result.candidates if c.kind == "hqp"):
        tag = hqp.name.split("@", 1)[1]
        rivals = [by_name.get(f"prune-fp32@{tag}")]
        if quant is not None and result.baseline.val_accuracy - quant.val_accuracy <= (hqp.budget or 0) + 1e-9:
            rivals.append(quant)
        elif quant is not None:
            notes.append(f"{quant.name} exceeds the {tag} budget on validation, so it is no rival to {hqp.name}")
        for rival in (r for r in rivals if r is not None):
            for b in BATCHES:
                if hqp.latency_ms[b] >= rival.latency_ms[b]:
                    notes.append(
                        f"{hqp.name} is not faster than {rival.name} at batch {b}: "
                        f"{hqp.latency_ms[b]:.3f} ms vs {rival.latency_ms[b]:.3f} ms")
    if quant is not None:
        slower = int8_slower_layers(result.latency.layers, fp32="dense-fp32", int8="quant-int8")
        if not slower.is_empty():
            worst = ", ".join(
                f"{r['layer']} ({r['int8_us']:.0f} vs {r['fp32_us']:.0f} µs)" for r in slower.head(5).iter_rows(named=True))
            notes.append(
                f"int8 is slower than fp32 on {len(slower)} layer(s) at batch 1 (ORT, median per inference): {worst}")
    return notes


def int8_slower_layers(layers: pl.DataFrame, *, fp32: str, int8: str, batch: int = 1) -> pl.DataFrame:
    """Layers whose median ORT time per inference is higher in the int8 model than in the fp32 one.

    Only layers present in both models are compared (int8's Quantize/Dequantize/Transpose nodes
    have no fp32 counterpart). Columns: ``layer, fp32_us, int8_us, ratio``, worst first.
    """
    ort = layers.filter((pl.col("runtime") == "onnxruntime") & (pl.col("batch") == batch))
    per_run = ort.group_by("candidate", "layer", "run_index").agg(pl.col("dur_ns").sum())
    med = per_run.group_by("candidate", "layer").agg((pl.col("dur_ns").median() / 1e3).alias("us"))
    a = med.filter(pl.col("candidate") == fp32).select("layer", pl.col("us").alias("fp32_us"))
    b = med.filter(pl.col("candidate") == int8).select("layer", pl.col("us").alias("int8_us"))
    return (
        a.join(b, on="layer")
        .filter(pl.col("int8_us") > pl.col("fp32_us"))
        .with_columns(ratio=pl.col("int8_us") / pl.col("fp32_us"))
        .sort("ratio", descending=True)
    )


def write(result: EvaluateResult) -> None:
    """Write the run folder's tables and ``report.json``."""
    import json

    from stallscope.compress.report import to_dict

    run_dir = result.run_dir
    tables.write_layer_latency(result.latency.layers, run_dir)
    tables.write_run_latency(result.latency.runs, run_dir)
    tables.write_candidates(candidates_frame(result), run_dir)
    tables.write_pruning_steps(result.steps, run_dir)
    (run_dir / "report.json").write_text(json.dumps(to_dict(result), indent=2) + "\n")


def candidates_frame(result: EvaluateResult) -> pl.DataFrame:
    """One row per candidate with the columns of :data:`.tables.CANDIDATES`."""
    base = result.baseline
    rows = []
    for c in result.candidates:
        rows.append({
            "run_id": result.run_id, "name": c.name, "kind": c.kind, "precision": c.precision,
            "budget_pp": None if c.budget is None else _pp(c.budget),
            "val_accuracy": c.val_accuracy, "test_accuracy": c.test_accuracy,
            "val_accuracy_drop_pp": _pp(base.val_accuracy - c.val_accuracy),
            "accuracy_drop_pp": _pp(base.test_accuracy - c.test_accuracy),
            "size_bytes": c.size_bytes, "params": c.params, "macs": c.macs,
            "latency_b1_ms": c.latency_ms.get(1), "latency_b32_ms": c.latency_ms.get(32),
            "profiled_latency_b1_ms": c.profiled_latency_ms.get(1),
            "profiled_latency_b32_ms": c.profiled_latency_ms.get(32),
            "latency_source": result.config.latency_source,
            "torch_latency_b1_ms": c.torch_latency_ms.get(1), "torch_latency_b32_ms": c.torch_latency_ms.get(32),
            "within_budget": c.within_budget, "pareto": c.pareto, "recommended": c.recommended,
            "onnx_file": str(c.onnx_path.relative_to(result.run_dir)),
        })
    return tables.conform(pl.DataFrame(rows, infer_schema_length=None), tables.CANDIDATES)


def _steps_frame(history: list[Any], budget: float, run_id: str) -> pl.DataFrame:
    rows = [{"run_id": run_id, "budget_pp": _pp(budget), **{k: getattr(h, k) for k in (
        "step", "fraction", "macs_before", "macs_after", "params_after", "channels_removed", "val_accuracy",
        "accuracy_drop_pp", "accepted")}} for h in history]
    return tables.conform(pl.DataFrame(rows), tables.PRUNING_STEPS) if rows else tables.empty(tables.PRUNING_STEPS)


def _batch_of(x: np.ndarray, n: int) -> np.ndarray:
    """``n`` samples of ``x`` (repeated if the split is smaller)."""
    reps = -(-n // len(x))
    return np.concatenate([x] * reps)[:n] if reps > 1 else x[:n]


def _pp(fraction: float) -> float:
    """A fraction as percentage points, rounded to 4 decimals."""
    return round(100 * fraction, 4)


def _file(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _run_id(name: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{_file(name)}-{stamp}-{secrets.token_hex(2)}"
