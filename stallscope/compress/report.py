"""Rendering an evaluation: the JSON contract, Markdown, and a rich table.

:func:`to_dict` produces the **Compress output contract** of ``DESIGN.md``::

    {"baseline": {...same fields as a candidate...},
     "candidates": [{"name", "kind": "dense|prune|quant|hqp", "accuracy", "accuracy_drop_pp",
                     "size_bytes", "size_reduction", "latency_ms": {"b1", "b32"},
                     "speedup": {"b1", "b32"}, "within_budget", "recommended"}, ...],
     "runtime": "onnxruntime", "device": "cpu"}

``accuracy`` is the held-out **test** accuracy (fraction) and ``accuracy_drop_pp`` its drop
from the dense baseline in percentage points. ``within_budget`` is decided on the
**validation** split (``val_accuracy_drop_pp <= max_accuracy_drop_pp``): no decision ever looks
at the test split. ``latency_ms`` is the median ONNX Runtime latency in ms from the pass named
by ``latency_source`` (``wall``: the unprofiled timing pass, read from its timing trace;
``profiler``: ORT profiler ``model_run`` events); ``profiled_latency_ms`` always holds the
profiler's medians. ``speedup`` is baseline latency / candidate latency in the same runtime.
Added fields (never renamed): ``precision``, ``budget_pp``, ``val_accuracy``,
``val_accuracy_drop_pp``, ``test_accuracy``, ``params``, ``macs``, ``macs_reduction``,
``pareto``, ``profiled_latency_ms``, ``torch_latency_ms``, ``onnx_file``, ``pruning_steps``,
``fp32_layers``, ``notes``; top level: ``stallscope_version``, ``model``, ``dataset``, ``max_accuracy_drop_pp``,
``threads``, ``runs``, ``latency_source``, ``recommended``, ``notes``, ``run_id``, ``run_dir``,
``tables``, ``traces``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from stallscope.compress.evaluate import Candidate, EvaluateResult

#: the contract's candidate fields, in order
CONTRACT_FIELDS = (
    "name", "kind", "accuracy", "accuracy_drop_pp", "size_bytes", "size_reduction", "latency_ms", "speedup",
    "within_budget", "recommended",
)


def to_dict(result: "EvaluateResult") -> dict[str, Any]:
    """The JSON document of ``compress evaluate --format json`` (and ``report.json``)."""
    from stallscope import __version__

    run_dir = result.run_dir
    return {
        "baseline": candidate_dict(result.baseline, result),
        "candidates": [candidate_dict(c, result) for c in result.candidates],
        "runtime": "onnxruntime",
        "device": result.device,
        "stallscope_version": __version__,
        "model": result.model_name,
        "dataset": result.dataset,
        "max_accuracy_drop_pp": round(100 * result.config.max_accuracy_drop, 4),
        "threads": result.config.threads,
        "runs": {"b1": result.config.runs_b1, "b32": result.config.runs_b32},
        "latency_source": result.config.latency_source,
        "recommended": result.recommended.name,
        "notes": list(result.notes),
        "run_id": result.run_id,
        "run_dir": str(run_dir),
        "tables": {
            name: f"{name}.parquet" for name in ("layer_latency", "run_latency", "candidates", "pruning_steps")
        },
        "traces": [str(p.relative_to(run_dir)) for p in result.latency.traces],
    }


def candidate_dict(c: "Candidate", result: "EvaluateResult") -> dict[str, Any]:
    """One candidate: the contract fields first, then the added ones."""
    base = result.baseline
    return {
        "name": c.name,
        "kind": c.kind,
        "accuracy": round(c.test_accuracy, 6),
        "accuracy_drop_pp": round(100 * (base.test_accuracy - c.test_accuracy), 4),
        "size_bytes": c.size_bytes,
        "size_reduction": round(1 - c.size_bytes / base.size_bytes, 4),
        "latency_ms": {f"b{b}": round(v, 6) for b, v in sorted(c.latency_ms.items())},
        "speedup": {f"b{b}": round(base.latency_ms[b] / v, 3) for b, v in sorted(c.latency_ms.items())},
        "within_budget": c.within_budget,
        "recommended": c.recommended,
        "precision": c.precision,
        "budget_pp": None if c.budget is None else round(100 * c.budget, 4),
        "val_accuracy": round(c.val_accuracy, 6),
        "val_accuracy_drop_pp": round(100 * (base.val_accuracy - c.val_accuracy), 4),
        "test_accuracy": round(c.test_accuracy, 6),
        "params": c.params,
        "macs": c.macs,
        "macs_reduction": round(1 - c.macs / base.macs, 4) if base.macs else 0.0,
        "pareto": c.pareto,
        "profiled_latency_ms": {f"b{b}": round(v, 6) for b, v in sorted(c.profiled_latency_ms.items())} or None,
        "torch_latency_ms": {f"b{b}": round(v, 6) for b, v in sorted(c.torch_latency_ms.items())} or None,
        "onnx_file": str(c.onnx_path.relative_to(result.run_dir)),
        "pruning_steps": c.pruning_steps,
        "fp32_layers": list(c.fp32_layers),
        "notes": list(c.notes),
    }


def _rows(result: "EvaluateResult") -> list[list[str]]:
    doc = to_dict(result)
    rows = []
    for c in doc["candidates"]:
        mark = "★ " if c["recommended"] else ""
        rows.append([
            mark + c["name"],
            c["kind"],
            f"{100 * c['val_accuracy']:.2f} ({-c['val_accuracy_drop_pp']:+.2f})",
            f"{100 * c['accuracy']:.2f} ({-c['accuracy_drop_pp']:+.2f})",
            f"{c['size_bytes'] / 1e3:,.0f} kB (-{100 * c['size_reduction']:.0f}%)",
            f"{c['params']:,}",
            f"{c['macs'] / 1e6:.1f}M",
            f"{c['latency_ms']['b1']:.3f} ({c['speedup']['b1']:.2f}x)",
            f"{c['latency_ms']['b32']:.2f} ({c['speedup']['b32']:.2f}x)",
            "yes" if c["within_budget"] else "no",
            "yes" if c["pareto"] else "",
        ])
    return rows


HEADERS = [
    "candidate", "kind", "val acc % (Δpp)", "test acc % (Δpp)", "size", "params", "MACs",
    "b1 ms (speedup)", "b32 ms (speedup)", "in budget", "pareto",
]


def _caption(result: "EvaluateResult") -> str:
    cfg = result.config
    return (
        f"{result.model_name} on {result.dataset}: ONNX Runtime, {result.device}, {cfg.threads} thread(s); "
        f"median of {cfg.runs_b1} (b1) / {cfg.runs_b32} (b32) runs ({'unprofiled pass' if cfg.latency_source == 'wall' else 'ORT profiler'}), variants interleaved; "
        f"Δmax {100 * cfg.max_accuracy_drop:.2f}pp on validation; ★ recommended"
    )


def to_markdown(result: "EvaluateResult") -> str:
    """A Markdown report: the table, the recommendation, notes, and where the data lives."""
    lines = [f"# Compression candidates: {result.model_name}", "", _caption(result), ""]
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "|".join("---" for _ in HEADERS) + "|")
    for row in _rows(result):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    rec = result.recommended
    lines += ["", f"**Recommended:** `{rec.name}`."]
    notes = list(result.notes) + [f"{c.name}: {n}" for c in result.candidates for n in c.notes]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    lines += [
        "",
        f"Run folder: `{result.run_dir}` (per-layer latency: `layer_latency.parquet`; raw traces: `traces/`).",
        "",
    ]
    return "\n".join(lines)


def to_table(result: "EvaluateResult") -> "Table":
    """A rich table for the terminal."""
    from rich.table import Table

    table = Table(title=f"Compression candidates: {result.model_name}", caption=_caption(result))
    for h in HEADERS:
        table.add_column(h, justify="left" if h in ("candidate", "kind") else "right")
    for row, c in zip(_rows(result), result.candidates):
        table.add_row(*row, style="bold green" if c.recommended else None)
    return table
