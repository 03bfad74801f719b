"""More work, not a worse place: ranks the MoE router sends more tokens are stragglers."""

from __future__ import annotations

import polars as pl

from stallscope.rules.context import MORE_WORK, Context


def _ctx(recv: dict[int, list[int]]) -> Context:
    ctx = Context(store=None, job="j", d=None)  # type: ignore[arg-type]
    rows = [(r, step, n) for r, ns in recv.items() for step, n in enumerate(ns)]
    ctx.__dict__["received"] = pl.DataFrame(rows, schema={"rank": pl.Int64, "step": pl.Int64, "recv": pl.Int64}, orient="row")
    return ctx


def test_hot_experts_receive_more() -> None:
    # moe_sim mo_x3: ranks 4-7 hold the hot experts; dispatch doubles, combine does not
    recv = {r: [1000 + 10 * s for s in range(6)] for r in range(16)}
    for r in (4, 5, 6, 7):
        recv[r] = [1450 + 10 * s for s in range(6)]
    ratio = _ctx(recv).work_ratio([4, 5, 6, 7])
    assert ratio is not None and ratio >= MORE_WORK


def test_balanced_routing_is_not_more_work() -> None:
    recv = {r: [1000 + (r * 37 + s * 11) % 80 for s in range(6)] for r in range(16)}
    ratio = _ctx(recv).work_ratio([4, 5, 6, 7])
    assert ratio is not None and ratio < MORE_WORK


def test_no_recorded_sizes_says_nothing() -> None:
    assert _ctx({}).work_ratio([1]) is None
