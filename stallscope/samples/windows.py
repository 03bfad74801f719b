"""Traces in profiling windows, as ``torch.profiler.schedule(..., repeat=N)`` writes them.

A schedule records ``active`` steps, skips ``wait + warmup`` steps, records again, and
``tensorboard_trace_handler`` writes one file per window and rank
(``{host}_{pid}.{time}.pt.trace.json``): the bundle holds several files of each rank, with
steps missing between them. :func:`split_windows` turns a bundle written with one window per
rank into that layout, for the tests and the robustness benchmark
(``benchmarks/profiling_windows.py``) that check the analysis reads it as the same job.

Each complete trace is cut by its ``ProfilerStep#N`` spans: the first ``first`` steps, then, after
``skip`` steps no file records, the rest. The first window runs from its first step's start to
the start of the first skipped step (so its last step's GPU work stays in it), the second from
its first step's start to the end of the trace; metadata events (``ph: M``) go to both, as each
real file carries its own. The second file is named as the first with its time moved on (or
``.w1`` before the extension when the name has no time); gzip stays gzip. Traces that do not
parse (cut by a killed job) and traces with too few steps stay whole.
"""

from __future__ import annotations

import re
from typing import Any

from stallscope.samples.bundle import TRACE_EXT, dump_trace, load_trace

_STEP = re.compile(r"ProfilerStep#(\d+)")
_STAMP = re.compile(r"\.(\d{10,})\.pt\.trace\.json")


def second_name(name: str) -> str:
    """The file name of a trace's second window.

    >>> second_name("node-0_41.1733805079917433573.pt.trace.json.gz")
    'node-0_41.1733805079917440573.pt.trace.json.gz'
    >>> second_name("rank3.pt.trace.json")
    'rank3.w1.pt.trace.json'
    """
    m = _STAMP.search(name)
    if m:
        return name[:m.start(1)] + str(int(m.group(1)) + 7_000) + name[m.end(1):]
    ext = next((e for e in TRACE_EXT if name.endswith(e)), "")
    return name[: len(name) - len(ext)] + ".w1" + ext


def split_trace(data: bytes, first: int, skip: int) -> tuple[bytes, bytes] | None:
    """The two windows of one trace file's bytes, or None when it stays whole."""
    d = load_trace(data)
    if d is None:
        return None
    starts: dict[int, float] = {}
    for e in d["traceEvents"]:
        m = _STEP.fullmatch(str(e.get("name", "")))
        if m and e.get("ph") == "X" and "ts" in e:
            starts[int(m.group(1))] = float(e["ts"])
    order = sorted(starts)
    if len(order) < first + skip + 1 or first < 1:
        return None
    a0, gap0, b0 = starts[order[0]], starts[order[first]], starts[order[first + skip]]

    def window(lo: float, hi: float) -> dict[str, Any]:
        return dict(d, traceEvents=[e for e in d["traceEvents"]
                                    if e.get("ph") == "M" or ("ts" in e and lo <= float(e["ts"]) < hi)])

    gz = data[:2] == b"\x1f\x8b"
    return dump_trace(window(a0, gap0), gz), dump_trace(window(b0, float("inf")), gz)


def split_windows(files: dict[str, bytes], first: int = 2, skip: int = 1) -> tuple[dict[str, bytes], int]:
    """A bundle's files (relative path -> bytes, see :func:`stallscope.samples.bundle.read_files`)
    with every splittable trace in two windows; and how many traces were split."""
    out: dict[str, bytes] = {}
    split = 0
    for path, data in files.items():
        cut = split_trace(data, first, skip) if path.endswith(TRACE_EXT) else None
        if cut is None:
            out[path] = data
            continue
        head, _, name = path.rpartition("/")
        out[path], out[(head + "/" if head else "") + second_name(name)] = cut
        split += 1
    return out, split
