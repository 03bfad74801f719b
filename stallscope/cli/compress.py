"""``stallscope compress``: evaluate HQP model-compression candidates from profiler traces.

Thin commands over :mod:`stallscope.compress`. Nothing heavy is imported until a command runs:
torch, onnx and onnxruntime load inside the command bodies.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from stallscope.errors import CompressError, UsageError

EXAMPLES = ("resnet-digits", "mobilenet-digits")
FORMATS = ("table", "json", "md")


@click.group()
def compress() -> None:
    """Evaluate model-compression candidates (HQP: Fisher-guided pruning + int8) from profiler traces.

    Example: stallscope compress evaluate --example resnet-digits --preset ci
    """


@compress.command()
@click.option("--model", "model_spec", metavar="MODULE:FACTORY",
              help="Importable function returning a (trained) torch.nn.Module classifier.")
@click.option("--data", "data_spec", metavar="FILE.npz|MODULE:FUNC",
              help="Dataset: .npz with X, y (or X_train, y_train, X_val, y_val, X_test, y_test), or a function "
                   "returning (X, y) or such a mapping. X is shaped like the model input, batch first.")
@click.option("--example", type=click.Choice(EXAMPLES), help="Built-in offline example (digits, no download).")
@click.option("--preset", type=click.Choice(("ci", "full")), default="full", show_default=True,
              help="Size of a built-in example: ci (16x16, narrow, < 3 min) or full (32x32, the benchmark).")
@click.option("--max-accuracy-drop", type=click.FloatRange(0, 1), default=0.015, show_default=True,
              help="Δmax: largest allowed validation-accuracy drop, as a fraction (0.015 = 1.5 pp).")
@click.option("--budget-fractions", metavar="F[,F...]",
              help="Run HQP/prune trajectories at these multiples of Δmax [default: 0.5,1; ci preset: 1].")
@click.option("--target-macs", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="Stop pruning at this fraction of the dense MACs [default: 0.1].")
@click.option("--round-to", type=click.IntRange(1), default=None, help="Keep channel counts multiples of this [default: 8].")
@click.option("--finetune-epochs", type=click.FloatRange(0), default=None,
              help="Fine-tuning after each pruning step, in epochs (fractions allowed) [default: 1; examples: 3, "
                   "ci preset: 2].")
@click.option("--train-epochs", type=click.FloatRange(0), default=None,
              help="Train the --model factory's model first for this many epochs [default: 0, it is trained].")
@click.option("--runs", "runs_b1", type=click.IntRange(1), default=None,
              help="Measured runs per candidate at batch 1 [default: 200; ci: 100].")
@click.option("--runs-b32", type=click.IntRange(1), default=None,
              help="Measured runs per candidate at batch 32 [default: 30; ci: 20].")
@click.option("--threads", type=click.IntRange(1), default=1, show_default=True,
              help="Intra-op threads while measuring latency.")
@click.option("--latency-source", type=click.Choice(("wall", "profiler")), default="wall", show_default=True,
              help="Headline latency: the unprofiled pass, or ORT profiler model_run events (which include "
                   "the profiler's per-node cost).")
@click.option("--device", type=click.Choice(("auto", "cpu", "cuda")), default="auto", show_default=True,
              help="auto: CUDA when both PyTorch and onnxruntime see a GPU, else CPU.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), envvar="STALLSCOPE_STORE",
              help="Store directory; the run goes to <store>/compress/<run id>/ [default: $STALLSCOPE_STORE or "
                   "the per-user data dir].")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the report here instead of stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
def evaluate(
    model_spec: str | None,
    data_spec: str | None,
    example: str | None,
    preset: str,
    max_accuracy_drop: float,
    budget_fractions: str | None,
    target_macs: float | None,
    round_to: int | None,
    finetune_epochs: float | None,
    train_epochs: float | None,
    runs_b1: int | None,
    runs_b32: int | None,
    threads: int,
    latency_source: str,
    device: str,
    seed: int,
    store: Path | None,
    fmt: str,
    out: Path | None,
    quiet: bool,
) -> None:
    """Profile dense, quant-only, prune-only and HQP candidates on this device and compare them.

    Every candidate is exported to ONNX and timed in ONNX Runtime at batch 1 and 32, variants
    interleaved, medians: once unprofiled (the headline latency, written as a timing trace) and
    once under ONNX Runtime's profiler (per-layer latency); fp32 candidates are also timed in
    PyTorch, with torch.profiler for the per-layer pass. The per-layer latency lands in
    <store>/compress/<run id>/layer_latency.parquet beside the raw traces. The recommended
    candidate is the fastest at batch 1 whose validation accuracy drop is within
    --max-accuracy-drop.

    Example: stallscope compress evaluate --example resnet-digits --preset ci --format md

    Example: stallscope compress evaluate --model mypkg.nets:trained_net --data digits.npz --format json
    """
    if (model_spec is None) == (example is None):
        raise UsageError("give either --model MODULE:FACTORY (with --data) or --example NAME")
    if model_spec is not None and data_spec is None:
        raise UsageError("--model needs --data (a .npz file or MODULE:FUNC)")
    if example is not None and data_spec is not None:
        raise UsageError("--example brings its own data; drop --data")

    from dataclasses import replace

    from stallscope.compress import data as data_mod
    from stallscope.compress.evaluate import EvaluateConfig, evaluate as run_evaluate
    from stallscope.compress.examples import load_example

    overrides: dict[str, Any] = {"max_accuracy_drop": max_accuracy_drop, "threads": threads, "device": device,
                                 "seed": seed, "latency_source": latency_source}
    if example is not None:
        ex = load_example(example, preset=preset, seed=seed)
        build, splits, name = ex.build, ex.splits, f"{example}-{preset}"
        settings: dict[str, Any] = {"train_epochs": ex.train_epochs, **ex.config}
    else:
        splits = data_mod.load(str(data_spec), seed=seed)
        spec = str(model_spec)
        build, name, settings = _factory(spec), spec.rsplit(":", 1)[-1], {}
    for key, value in {
        "budget_fractions": _fractions(budget_fractions), "target_macs_ratio": target_macs, "round_to": round_to,
        "finetune_epochs": finetune_epochs, "train_epochs": train_epochs, "runs_b1": runs_b1, "runs_b32": runs_b32,
    }.items():
        if value is not None:
            overrides[key] = value
    config = replace(EvaluateConfig(), **{**settings, **overrides})
    say = (lambda _msg: None) if quiet else (lambda msg: click.echo(msg, err=True))
    say(splits.describe())
    model = _build_model(build, model_spec or example or "", seed=seed)
    result = run_evaluate(model, splits, store=store or _default_store(), config=config, name=name, progress=say)
    _emit(result, fmt=fmt, out=out)
    say(f"run folder: {result.run_dir}")


@compress.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--candidate", help="Only this candidate.")
@click.option("--runtime", type=click.Choice(("onnxruntime", "torch")), default="onnxruntime", show_default=True)
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--top", type=click.IntRange(1), default=15, show_default=True, help="Slowest layers per candidate.")
@click.option("--format", "fmt", type=click.Choice(("table", "json", "csv")), default="table", show_default=True)
def layers(run_dir: Path, candidate: str | None, runtime: str, batch: int, top: int, fmt: str) -> None:
    """Per-layer median latency of a compress run, read with SQL from layer_latency.parquet.

    Example: stallscope compress layers ~/.local/share/stallscope/compress/resnet-digits-full-... --top 10
    """
    from stallscope.compress.queries import layer_medians

    df = layer_medians(run_dir, candidate=candidate, runtime=runtime, batch=batch, top=top)
    if fmt == "json":
        click.echo(json.dumps(df.to_dicts(), indent=2))
    elif fmt == "csv":
        click.echo(df.write_csv(), nl=False)
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"per-layer median latency ({runtime}, batch {batch})")
        for col in df.columns:
            table.add_column(col, justify="right" if df[col].dtype.is_numeric() else "left", overflow="fold")
        for row in df.iter_rows():
            table.add_row(*(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row))
        Console(width=None if sys.stdout.isatty() else 200).print(table)


def _factory(spec: str) -> Any:
    from stallscope.compress.data import resolve_callable

    return resolve_callable(spec, what="--model")


def _build_model(build: Any, spec: str, *, seed: int) -> Any:
    """Call the model factory (seeded, so initial weights repeat); failures are one CompressError line."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    from stallscope.compress.failures import first_line

    try:
        model = build()
    except Exception as exc:
        raise CompressError(f"--model {spec}: the factory raised {first_line(exc)}") from None
    if not isinstance(model, nn.Module):
        raise CompressError(f"--model {spec}: the factory returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _fractions(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--budget-fractions {text!r}: expected numbers separated by commas, e.g. 0.5,1") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise UsageError(f"--budget-fractions {text!r}: every fraction must be in (0, 1]")
    return values


def _default_store() -> Path:
    """The same store as every other command (``--store``, ``$STALLSCOPE_STORE``, config file, user dir)."""
    from stallscope.cli.options import resolved_store
    from stallscope.store.layout import StoreLayout

    return StoreLayout.at(resolved_store(None)).root

def _emit(result: Any, *, fmt: str, out: Path | None) -> None:
    from stallscope.compress.report import to_dict, to_markdown, to_table

    if fmt == "json":
        text = json.dumps(to_dict(result), indent=2) + "\n"
    elif fmt == "md":
        text = to_markdown(result)
    else:
        from rich.console import Console

        if out is None:
            # piped output is not squeezed into 80 columns
            Console(width=None if sys.stdout.isatty() else 200).print(to_table(result))
            for note in result.notes:
                click.echo(f"note: {note}")
            return
        console = Console(record=True, width=200, file=io.StringIO())
        console.print(to_table(result))
        text = console.export_text() + "".join(f"note: {n}\n" for n in result.notes)
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
