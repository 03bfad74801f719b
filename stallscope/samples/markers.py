"""Traces profiled without ``prof.step()``: no ``ProfilerStep#N`` marks.

``torch.profiler.profile`` used as a plain context manager around a few iterations, with no
``schedule`` and no ``step()`` calls, records no ``ProfilerStep#N`` spans: a common way to
profile by hand. The generator's ``step_marks=false`` knob (5 % of a suite's bundles) leaves
them out as it writes each trace (:func:`is_step_mark`), a killed rank's cut trace included.
:func:`strip_step_marks` turns a bundle written with the marks into that layout (every
``ProfilerStep#N`` event removed, on the CPU and its GPU mirror; everything else kept), for the
robustness benchmark (``benchmarks/no_step_marks.py``, which strips a whole suite) that checks
the analysis still finds the steps (from torch.optim's ``Optimizer.step#…`` annotations) and
reads the job the same. Traces that do not parse (cut by a killed job) stay as they are there.
"""

from __future__ import annotations

from stallscope.samples.bundle import TRACE_EXT, dump_trace, load_trace

_MARK = "ProfilerStep#"
#: torch.optim's annotations (``Optimizer.step#…``, ``Optimizer.zero_grad#…``): gone too in a loop
#: that updates the weights by hand
_OPTIMIZER = "Optimizer."


def is_step_mark(event: str) -> bool:
    """Whether one event of :class:`stallscope.samples.kineto_writer.TraceWriter`'s (its JSON
    text) is a ``ProfilerStep#N`` mark, on the CPU or its GPU mirror."""
    return f'"name": "{_MARK}' in event


def strip_trace(data: bytes, *, optimizer: bool = False) -> bytes | None:
    """One trace file's bytes without its step marks (and, with ``optimizer``, without
    torch.optim's annotations either), or None when it stays as it is."""
    d = load_trace(data)
    if d is None:
        return None
    drop = (_MARK, _OPTIMIZER) if optimizer else (_MARK,)
    kept = [e for e in d["traceEvents"] if not str(e.get("name", "")).startswith(drop)]
    if len(kept) == len(d["traceEvents"]):
        return None
    return dump_trace(dict(d, traceEvents=kept), data[:2] == b"\x1f\x8b")


def strip_step_marks(files: dict[str, bytes], *, optimizer: bool = False) -> tuple[dict[str, bytes], int]:
    """A bundle's files (relative path -> bytes, see :func:`stallscope.samples.bundle.read_files`)
    with every trace's step marks (and torch.optim's annotations, with ``optimizer``) removed;
    and how many traces changed."""
    out: dict[str, bytes] = {}
    changed = 0
    for path, data in files.items():
        new = strip_trace(data, optimizer=optimizer) if path.endswith(TRACE_EXT) else None
        out[path] = data if new is None else new
        changed += new is not None
    return out, changed
