"""``typical_spread``: how much the typical rank varies from step to step (the SYN003 gate)."""

from __future__ import annotations

import polars as pl

from stallscope.rules.context import TYPICAL_HOST_JITTER, typical_spread


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
