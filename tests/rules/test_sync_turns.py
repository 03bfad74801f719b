"""Jitter or a second straggler: who is late in the steps the first straggler left free."""

from __future__ import annotations

from stallscope.rules.context import Context, LateSets


def _ctx(per_step: dict[int, list[int]]) -> Context:
    ctx = Context(store=None, job="j", d=None)  # type: ignore[arg-type]
    ranks = sorted({r for rs in per_step.values() for r in rs})
    intermittent = {r: sorted(s for s, rs in per_step.items() if r in rs) for r in ranks}
    ctx.__dict__["late_sets"] = LateSets([], intermittent, per_step, sum(map(len, per_step.values())), len(ranks))
    return ctx


def test_the_same_ranks_late_in_every_free_step_are_a_second_straggler() -> None:
    # rank 4 (with the pipeline ranks it holds up, 12 and 20) in steps 1, 2, 4; rank 41 (with 17, 25) in 0 and 3
    ctx = _ctx({0: [17, 25, 41], 1: [4, 12, 20], 2: [4, 12, 20], 3: [17, 25, 41], 4: [4, 12, 20]})
    # 41's own what-if recovers the most of its group: the others were waiting for it
    single = {4: 0.11, 41: 0.01, 17: 0.0001, 25: 0.0002}
    assert ctx._recurring_elsewhere([4], single) == [41]


def test_ranks_taking_turns_are_not_a_second_straggler() -> None:
    # jitter: a different rank late in each step the first one left free
    ctx = _ctx({0: [3], 1: [4], 2: [7], 3: [9], 4: [4], 5: [11]})
    single = {r: 0.01 for r in (3, 4, 7, 9, 11)}
    assert ctx._recurring_elsewhere([4], single) == []
    # one free step proves nothing
    ctx = _ctx({0: [3], 1: [4], 2: [4]})
    assert ctx._recurring_elsewhere([4], {3: 0.01, 4: 0.02}) == []
