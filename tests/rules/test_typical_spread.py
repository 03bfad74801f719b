"""``typical_spread``: how much the typical rank varies from step to step (the SYN003 gate)."""

from __future__ import annotations

import polars as pl

from stallscope.rules.context import TYPICAL_HOST_JITTER, Context, typical_spread


def _steps(host_stall: list[list[int]], static: list[int] | None = None) -> pl.DataFrame:
    rows = []
    for step, per_rank in enumerate(host_stall, start=1):
        for rank, h in enumerate(per_rank):
            rows.append({"rank": rank, "step": step, "step_ns": 1000, "host_stall_ns": h + (static[rank] if static else 0)})
    return pl.DataFrame(rows)


def test_rare_pauses_do_not_move_the_typical_rank() -> None:
    # one long pause on some rank in some steps (a garbage collection): the job pays it, but
    # the typical rank is unchanged
    b = _steps([[0, 300, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 0, 250, 0, 0], [0, 0, 0, 0, 0, 0]])
    assert typical_spread(b, "host_stall_ns") == 0.0


def test_a_steady_level_is_not_jitter() -> None:
    # rank 2 always stalls 80 more (a host-stall straggler), the others never vary
    b = _steps([[0] * 6] * 4, static=[0, 0, 80, 0, 0, 0])
    assert typical_spread(b, "host_stall_ns") == 0.0


def test_every_rank_varying_every_step_is_jitter() -> None:
    b = _steps([[10, 40, 5, 25, 60, 15], [35, 5, 50, 10, 20, 45], [20, 55, 15, 40, 5, 30], [50, 10, 30, 5, 45, 20]])
    assert typical_spread(b, "host_stall_ns") >= TYPICAL_HOST_JITTER


def test_too_few_steps() -> None:
    assert typical_spread(_steps([[0, 50, 10]]), "host_stall_ns") == 0.0


def _ctx(host: float, compute: float, step_ms: float, floor: float = 0.04) -> Context:
    """A Context with only what typical_varies and jitter_bar read."""
    ctx = Context.__new__(Context)
    ctx.__dict__.update(typical_spreads=(host, compute), step_ms=step_ms, jitter_floor=floor)
    return ctx


def test_typical_varies_by_share_of_the_step() -> None:
    # 0.55 % of a 320 ms step: jitter; 0.3 %: not
    assert _ctx(0.0055, 0.001, 320.0).typical_varies
    assert not _ctx(0.003, 0.001, 320.0).typical_varies
    # a MoE job's shifting hot experts: 0.70 % of 26 ms steps (0.19 ms) still varies
    assert _ctx(0.0070, 0.018, 26.0).typical_varies
    # compute varying by its own bar
    assert _ctx(0.0, 0.03, 20.0).typical_varies


def test_jitter_bar_shrinks_with_variation_beyond_healthy() -> None:
    # typical host-side time at 2x the bar and 2.3 ms: half the floor is healthy noise
    assert abs(_ctx(0.008, 0.001, 286.0).jitter_bar - 0.02) < 1e-9
    # 2.2 % of a 23 ms step is 0.5 ms: no more than healthy, the whole floor
    assert _ctx(0.022, 0.002, 23.0).jitter_bar == 0.04
    # steady typical rank: the whole floor
    assert _ctx(0.001, 0.001, 200.0).jitter_bar == 0.04
