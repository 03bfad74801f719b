"""A straggler's cost is bounded by the extra work it did: the replay can overestimate it when
its peers computed while they waited for it (seen on fabric_sim's FSDP straggler ``l_c2``: a
12 % slower rank read as 29.8 % lost, 9.2 % true)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl

from stallscope.rules.context import Context

MS = 1_000_000


def _ctx(extra_ms: dict[int, float], steps: int = 4, makespan_ms: float = 400.0) -> Context:
    """Four ranks of one role, 100 ms steps: 80 ms compute, 2 ms host stall, plus ``extra_ms``."""
    rows = [(r, s, int((80 + extra_ms.get(r, 0.0)) * MS), 2 * MS, 0) for r in range(4) for s in range(steps)]
    b = pl.DataFrame(rows, orient="row", schema={"rank": pl.Int32, "step": pl.Int64, "compute_ns": pl.Int64,
                                                 "host_stall_ns": pl.Int64, "other_idle_ns": pl.Int64})
    tl = SimpleNamespace(ranks=np.arange(4), tail_role=np.zeros(4, dtype=np.int64), makespan=makespan_ms * MS)
    ctx = Context(store=None, job="j", d=SimpleNamespace(breakdown=b))  # type: ignore[arg-type]
    ctx.__dict__["timeline"] = tl
    return ctx


def test_the_bound_is_the_extra_work_over_the_peers() -> None:
    ctx = _ctx({2: 10.0})  # 10 ms more per step, 4 steps, 400 ms profiled: at most 10 %
    assert abs((ctx.own_excess_share([2]) or 0) - 0.10) < 1e-9
    assert ctx._bounded([2], 0.298) == ctx.own_excess_share([2])
    assert ctx._bounded([2], 0.05) == 0.05  # a gain under the bound stands


def test_a_rank_that_did_no_extra_work_can_save_nothing_by_its_own_work() -> None:
    assert (_ctx({}).own_excess_share([1]) or 0) == 0.0
