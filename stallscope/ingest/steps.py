"""Training steps of a trace without ``ProfilerStep#N`` marks.

``torch.profiler.profile`` used as a plain context manager, with no ``schedule`` and no
``prof.step()`` calls, records no step marks. Ingest then finds the steps, in this order:

1. :func:`steps_from_optimizer`: torch.optim annotates every optimizer step
   (``Optimizer.step#AdamW.step``); each one ends a training step.
2. :func:`steps_from_collectives`: a loop without torch.optim (a hand-written update) still
   issues the same collectives in the same order every iteration; the sequence repeats, and the
   longest pause in each repetition (the optimizer, the data loading and the forward pass before
   the first collective of the next iteration) is where one step ends.
3. Neither: the whole profile is one step (``step_source = 'profile'``, set by the caller).

Every inferred step is numbered from 0 in order on each rank: profiling without a schedule
starts at the same point of the loop on every rank.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: a token sequence repeats with period p when at most this share of its tokens differ from the
#: token p places later (a logging all-reduce every few steps, a checkpoint barrier)
PERIOD_MISMATCH = 0.1
#: repetitions of the period needed to call it the loop
MIN_CYCLES = 2
#: a longer period (a multiple of the tokens' own: identical gradient buckets) is the loop when its
#: longest pause falls at the same place in at least this share of its repetitions
BOUNDARY_SHARE = 0.8
#: ... and its pause there, in as many repetitions, is at least this many times the longest median pause elsewhere
BOUNDARY_RATIO = 1.25


def steps_from_optimizer(spans: list[tuple[str, int, int]], trace_start: int | None,
                         launches: tuple[np.ndarray, np.ndarray] | None = None) -> list[dict[str, int]]:
    """Training steps from torch.optim's ``Optimizer.step#…`` annotations (``(name, ts, dur)``
    on the CPU): step *i* runs from the end of step *i - 1* (the trace's first event for the
    first) to the end of optimizer step *i*. One name counts, the most frequent; of several as
    frequent (two optimizers a step, as Shampoo then an EMA in HTA's sample traces, or a GAN's
    two), the one that first runs latest, i.e. last in the step. A step ends where the last
    optimizer annotation around its span ends (a wrapper optimizer around the one counted).
    Work after the last optimizer step is in no step.

    The annotation is CPU time, and the CPU runs ahead of the GPU: it launches a whole iteration
    in a few milliseconds, the optimizer's kernels included, then blocks at the next
    synchronization (``loss.item()``, a metrics all-reduce) while the GPU works through it. The
    iteration is over when the optimizer's kernels are, so with ``launches`` (each kernel's CPU
    launch time and GPU end, sorted by launch) a step ends when the last kernel launched inside
    its optimizer annotation ends on the GPU. (Not capped at the next launch: that is often
    the same iteration's synchronizing copy, ``loss.item()``, queued behind the optimizer.)"""
    if not spans or trace_start is None:
        return []
    count: dict[str, int] = {}
    first: dict[str, int] = {}
    for n, t0, _ in spans:
        count[n] = count.get(n, 0) + 1
        first[n] = min(first.get(n, t0), t0)
    name = max(count, key=lambda n: (count[n], first[n], n))
    # the latest end of any annotation that starts by each start: at a counted span's start, that
    # is the end of the outermost annotation around it (any that ends later contains it)
    by_start = sorted(spans, key=lambda x: x[1])
    starts = [t for _, t, _ in by_start]
    reach = list(accumulate((t + d for _, t, d in by_start), max))
    rows: list[dict[str, int]] = []
    start = trace_start
    for _, t0, d in sorted((x for x in spans if x[0] == name), key=lambda x: (x[1], -x[2])):
        if t0 < start and rows:  # nested in the previous one
            continue
        end = reach[bisect_right(starts, t0) - 1]
        if launches is not None:
            end = _gpu_end_of(launches, t0, end)
        rows.append({"step": len(rows), "start_ns": start, "end_ns": end, "dur_ns": end - start})
        start = end
    return rows


def _gpu_end_of(launches: tuple[np.ndarray, np.ndarray], t0: int, t1: int) -> int:
    """Where an iteration whose optimizer ran on the CPU over ``[t0, t1]`` ends: the GPU end of
    the kernels launched in that span (``t1`` when none ends later)."""
    launch, gpu_end = launches
    i, j = np.searchsorted(launch, t0, "left"), np.searchsorted(launch, t1, "right")
    return max(int(gpu_end[i:j].max()), t1) if j > i else t1


def loop_period(tokens: list[object], gaps: np.ndarray) -> tuple[int, int] | None:
    """(period, boundary position) of a repeating collective sequence, or None.

    ``tokens`` say what each collective is (op, size, kernel), ``gaps[i]`` how long the rank
    paused between the starts of collectives ``i`` and ``i + 1``. The tokens repeat after a
    shortest period (:data:`PERIOD_MISMATCH`, :data:`MIN_CYCLES` repetitions or more). The loop is
    the multiple of that period whose longest pause falls at the same place in
    :data:`BOUNDARY_SHARE` of its repetitions and stands out most, at least
    :data:`BOUNDARY_RATIO` times the median pause of any other place: identical tokens (a bucket
    per layer, all the same size) repeat after every collective, and the pause before the next
    iteration's first bucket shows the loop; tensor-parallel all-reduces of the forward and the
    backward alternate, the end of the forward stands out a little every half-loop and the end
    of the step a lot every loop. With no such pause, the tokens' own period if it is longer
    than one; identical tokens then give None (one bucket an iteration and one iteration of
    several buckets look alike). The boundary is the place of the longest median pause: a step
    ends after the collective there."""
    n = len(tokens)
    if n < MIN_CYCLES or len(gaps) != n - 1:
        return None
    ids: dict[object, int] = {}
    tok = np.array([ids.setdefault(x, len(ids)) for x in tokens], dtype=np.int64)
    p = next((q for q in range(1, n // MIN_CYCLES + 1)
              if np.count_nonzero(tok[:-q] != tok[q:]) <= PERIOD_MISMATCH * (n - q)), None)
    if p is None:
        return None
    best: tuple[float, int, int] | None = None  # (strength, q, boundary)
    for q in range(2 if p == 1 else p, n // MIN_CYCLES + 1, p):
        cycles = (n - 1) // q
        if cycles < MIN_CYCLES:
            break
        g = gaps[: cycles * q].reshape(cycles, q)
        med = np.median(g, axis=0)
        b = int(np.argmax(med))
        others = max(float(np.delete(med, b).max()), 1.0)
        strength = float(np.quantile(g[:, b], 1 - BOUNDARY_SHARE, method="lower")) / others
        if np.mean(np.argmax(g, axis=1) == b) >= BOUNDARY_SHARE and strength >= BOUNDARY_RATIO:
            if best is None or strength > best[0]:
                best = (strength, q, b)
    if best is not None:
        return best[1], best[2]
    if p > 1:  # the tokens alone mark the loop; it ends at its longest median pause
        cycles = max((n - 1) // p, 1)
        return p, int(np.argmax(np.median(gaps[: cycles * p].reshape(-1, p), axis=0)))
    # every collective alike and no loop in the pauses: one gradient bucket an iteration, or one
    # iteration of several buckets, cannot be told apart; the loop is not seen
    return None


def steps_from_collectives(coll: pa.Table, trace_start: int | None) -> list[dict[str, int]]:
    """Training steps from the repeating sequence of a rank's collectives (:func:`loop_period`)
    on its busiest communicator stream (one stream runs its collectives in program order; across
    streams the order shifts with timing, HSDP's all-reduces between its shard group's
    collectives): each step ends when the collective before the loop's longest pause ends (step
    0 from the trace's first event). Work after the last such collective is in no step."""
    if trace_start is None:
        return []
    coll = coll.filter(pc.and_(pc.is_valid(coll.column("start_ns")), pc.is_valid(coll.column("end_ns"))))
    if coll.num_rows < 2 * MIN_CYCLES:
        return []
    stream = coll.column("stream").to_pylist()
    pg = coll.column("pg_name").to_pylist()
    lane = [("stream", x) if x is not None else ("pg", y) for x, y in zip(stream, pg)]
    counts: dict[tuple[str, object], int] = {}
    for x in lane:
        counts[x] = counts.get(x, 0) + 1
    busiest = max(counts, key=lambda k: (counts[k], str(k)))
    t = coll.filter(pa.array([x == busiest for x in lane])).sort_by([("start_ns", "ascending")])
    start = t.column("start_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    end = t.column("end_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    cols = [t.column(c).to_pylist() for c in ("op", "bytes", "name")]
    tokens: list[object] = list(zip(*cols))
    found = loop_period(tokens, np.diff(start))
    if found is None:
        return []
    q, b = found
    rows: list[dict[str, int]] = []
    s0 = trace_start
    for i in range(b, len(tokens) - 1, q):
        e = int(end[i])
        if e <= s0:
            continue
        rows.append({"step": len(rows), "start_ns": s0, "end_ns": e, "dur_ns": e - s0})
        s0 = e
    return rows
