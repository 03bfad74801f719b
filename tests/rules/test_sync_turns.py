"""Jitter or a second straggler: who is late in the steps the first straggler left free."""

from __future__ import annotations

import polars as pl

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


def _ctx_breakdown(rows: list[tuple[int, int, int, int]], per_step: dict[int, list[int]], persistent: list[int] = ()) -> Context:
    """rows: (rank, step, compute_ns, host_stall_ns); a 100 ms step."""
    from types import SimpleNamespace

    import polars as pl

    b = pl.DataFrame(rows, orient="row", schema={"rank": pl.Int32, "step": pl.Int64, "compute_ns": pl.Int64, "host_stall_ns": pl.Int64}
                     ).with_columns(other_idle_ns=pl.lit(0, pl.Int64))
    ctx = Context(store=None, job="j", d=SimpleNamespace(breakdown=b))  # type: ignore[arg-type]
    late = sorted({r for rs in per_step.values() for r in rs})
    intermittent = {r: sorted(s for s, rs in per_step.items() if r in rs) for r in late if r not in persistent}
    ctx.__dict__["late_sets"] = LateSets(sorted(persistent), intermittent, per_step, sum(map(len, per_step.values())), len(late))
    ctx.__dict__["step_ms"] = 100.0
    return ctx


def test_a_pipeline_stage_held_up_by_a_stalling_one_is_not_an_origin() -> None:
    # a pipeline chain 2 -> 6 -> 10: rank 6 stalls on the host in steps 1 and 3; 2 and 10 wait for
    # it (their own work is as usual) and are as late as it at the sends and receives
    rows = []
    for step in range(5):
        for r in (2, 6, 10):
            stall = 30_000_000 if (r == 6 and step in (1, 3)) else 1_000_000
            rows.append((r, step, 60_000_000, stall))
    ctx = _ctx_breakdown(rows, {1: [2, 6, 10], 3: [2, 6, 10]})
    assert ctx.origins == {6}


def test_a_persistent_straggler_is_an_origin_its_waiting_peer_is_not() -> None:
    # rank 5 computes 20 ms more than the others in every step; rank 7 is late with it (held up)
    rows = [(r, step, 80_000_000 if r == 5 else 60_000_000, 1_000_000) for step in range(6) for r in range(8)]
    late = {step: [5, 7] for step in range(6)}
    ctx = _ctx_breakdown(rows, late, persistent=[5, 7])
    assert ctx.origins == {5}


def _ctx_origins(origins: set[int], jitter: float, jitter_across: float, floor: float = 0.0377,
                 last_share: dict[int, float] | None = None) -> Context:
    ctx = Context(store=None, job="j", d=None)  # type: ignore[arg-type]
    shares = last_share or {}
    ranks = sorted(set(range(16)) | set(shares))
    ctx.__dict__.update(origins=origins, timeline=object(), jitter_floor=floor,
                        features=pl.DataFrame({"rank": ranks, "last_share": [shares.get(r, 1 / 16) for r in ranks]}),
                        _lost_cache={("jitter", False): jitter, ("jitter", True): jitter_across})
    return ctx


def test_lateness_spread_over_many_origins_is_jitter_not_the_latest_two() -> None:
    # seed 14000 #0078: 3 steps, 5 origins; ranks 3 and 9, the latest of their steps, recover
    # 11.5 % of the 22.7 % that removing every rank's variation does
    ctx = _ctx_origins({0, 2, 3, 9, 11}, jitter=0.211, jitter_across=0.227)
    assert ctx._origins_spread([3, 9], 0.1155)
    # ... but a straggler that recovers most of it stays one, however many ranks are noisy
    assert not ctx._origins_spread([3, 9], 0.20)


def test_the_noise_floor_is_not_the_chosen_ranks_to_explain() -> None:
    # moe_sim mo_t2: a host-stall straggler in a MoE job recovers 6.4 % of a 10.3 % jitter
    # what-if, 4.2 % of which routing noise costs any healthy job of that size
    ctx = _ctx_origins({0, 1, 24, 25, 26, 27, 28, 31}, jitter=0.0985, jitter_across=0.1027, floor=0.0421)
    assert not ctx._origins_spread([25], 0.0641)
    # with no noise to discount, the same recovery is too little
    assert _ctx_origins({0, 1, 24, 25, 26, 27, 28, 31}, 0.0985, 0.1027, floor=0.0)._origins_spread([25], 0.0641)


def test_a_rank_last_at_most_collectives_is_a_culprit_however_many_are_noisy() -> None:
    # moe_sim mo_s3: 64 ranks, routing noise makes 11 other ranks origins; rank 42 is the last
    # arriver at 85 % of its collectives
    origins = {2, 5, 9, 11, 15, 17, 22, 33, 39, 42, 48, 56}
    assert not _ctx_origins(origins, 0.1881, 0.1881, floor=0.0461, last_share={42: 0.85})._origins_spread([42], 0.10)
    assert _ctx_origins(origins, 0.1881, 0.1881, floor=0.0461, last_share={42: 0.2})._origins_spread([42], 0.10)


def test_a_straggler_with_few_other_origins_is_not_jitter() -> None:
    ctx = _ctx_origins({7, 12, 30}, jitter=0.06, jitter_across=0.06)
    assert not ctx._origins_spread([7], 0.024)  # two other origins: not spread
    assert not _ctx_origins(set(), 0.06, 0.06)._origins_spread([7], 0.01)  # the breakdown cannot tell


def test_an_origin_goes_first_when_a_held_up_rank_replays_about_as_well() -> None:
    from stallscope.rules.context import origin_first

    # seed 22000 #0086: rank 36 waits behind its slow upstream partner 28 (whose own work grew)
    single = {36: 0.1278, 28: 0.1261, 20: 0.0017}
    ranked = sorted(single, key=lambda r: -single[r])
    assert origin_first(ranked, single, {4, 28}, limit=4) == [28, 36, 20]
    # an origin whose what-if is far below the first rank's does not jump ahead
    assert origin_first(ranked, {36: 0.13, 28: 0.05, 20: 0.0017}, {28}, limit=4) == ranked
    # the first rank is an origin itself, or no origins are known: the order stands
    assert origin_first(ranked, single, {36, 28}, limit=4) == ranked
    assert origin_first(ranked, single, set(), limit=4) == ranked
