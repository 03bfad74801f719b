"""Splitting anonymous channels (no process-group metadata) into groups."""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope.analysis.collectives import _equal_sized, _step_jumps


def test_lockstep_groups_of_healthy_hosts_are_split_to_the_size_of_the_odd_one() -> None:
    host = {r: f"h{r // 4}" for r in range(12)}
    # end-time coherence merged the tensor-parallel groups of hosts h0 and h1 (lockstep), but not h2's (slower)
    groups = {0: list(range(8)), 8: [8, 9, 10, 11]}
    assert _equal_sized(groups, host) == {0: [0, 1, 2, 3], 4: [4, 5, 6, 7], 8: [8, 9, 10, 11]}


def test_unequal_groups_that_are_not_whole_hosts_stay() -> None:
    host = {r: f"h{r // 4}" for r in range(12)}
    groups = {0: [0, 1, 2, 3, 4, 5], 6: [6, 7], 8: [8, 9, 10, 11]}
    assert _equal_sized(groups, host) == groups
    assert _equal_sized({0: [0, 1, 2, 3]}, host) == {0: [0, 1, 2, 3]}


def test_a_rank_coherence_could_not_place_joins_the_group_short_of_its_host() -> None:
    # data-parallel groups across 4 hosts of 4 GPUs: group k holds local rank k of every host;
    # rank 6 (host h1) was truncated, so coherence left it alone. It is no group of one: it must
    # not make every other group split into single ranks, and it joins group 2 (short of h1).
    host = {r: f"h{r // 4}" for r in range(16)}
    groups = {0: [0, 4, 8, 12], 1: [1, 5, 9, 13], 2: [2, 10, 14], 3: [3, 7, 11, 15], 6: [6]}
    assert _equal_sized(groups, host) == {0: [0, 4, 8, 12], 1: [1, 5, 9, 13], 2: [2, 6, 10, 14], 3: [3, 7, 11, 15]}


def test_an_unplaceable_rank_stays_alone_and_the_others_keep_their_groups() -> None:
    host = {r: f"h{r // 4}" for r in range(16)}
    # two groups lack a rank of h1: where rank 6 belongs is ambiguous
    groups = {0: [0, 4, 8, 12], 1: [1, 9, 13], 2: [2, 10, 14], 3: [3, 7, 11, 15], 6: [6]}
    assert _equal_sized(groups, host) == {**groups}


def test_lone_ranks_are_placed_the_same_in_any_order() -> None:
    """Data-parallel pairs {r, r+8} on two hosts of 8; ranks 6, 9, 11, 13 left no trace, so 1, 3,
    5 and 14 are alone. The answer is the same whatever order the groups come in (in rank order,
    14 finds three lone ranks of the other host and joins none; when 14 came first, 1 joined it
    in one run and 5 in another)."""
    host = {r: f"h{r // 8}" for r in range(16)}
    pairs = {0: [0, 8], 2: [2, 10], 4: [4, 12], 7: [7, 15]}
    want = pairs | {1: [1], 3: [3], 5: [5], 14: [14]}
    for singles in ([14, 1, 3, 5], [1, 3, 5, 14], [5, 14, 3, 1]):
        groups = {s: [s] for s in singles} | pairs
        assert _equal_sized(groups, host) == want


def test_an_offset_that_jumps_between_steps_is_two_groups_a_drifting_one_is_not() -> None:
    steps = np.repeat([1, 2, 3, 4], 5)
    t = steps * 200e6 + np.tile(np.arange(5) * 30e6, 4)  # 200 ms steps
    drift = 80e6 + 20_000 * steps + np.tile([0.0, 3e3, -2e3, 1e3, 0.0], 4)  # clock offset, 20 µs drift per step
    assert not _step_jumps(drift, t, steps, 1e6)
    behind = drift + np.where(steps == 2, 14e6, 0.0)  # one of the groups fell 14 ms behind in step 2
    assert _step_jumps(behind, t, steps, 1e6)
    cut = behind.copy()
    cut[5] = np.nan  # step 2 cut on one rank: its positions may not pair, so it says nothing
    assert not _step_jumps(cut, t, steps, 1e6)
    assert not _step_jumps(behind[steps == 2], t[steps == 2], steps[steps == 2], 1e6)  # one step: nothing to compare
    # one column per second rank, answered all at once, each with its own steps left out
    assert _step_jumps(np.column_stack([drift, behind, cut]), t, steps, 1e6).tolist() == [False, True, False]
    # 30 s steps: clocks 50 ppm apart drift 1.5 ms a step, one group still; a 14 ms lag is not drift
    slow_t = steps * 30e9
    slow_drift = 80e6 + 1.5e6 * steps
    assert not _step_jumps(slow_drift, slow_t, steps, 1e6)
    assert _step_jumps(slow_drift + np.where(steps == 2, 14e6, 0.0), slow_t, steps, 1e6)


def test_a_group_short_of_a_rank_without_a_trace_does_not_set_the_size() -> None:
    """Stage groups of four, one per host; rank 9 left no trace. Hosts h0 and h3 ran in lockstep
    and coherence made them one group of 8, beside h1's 4 and h2's 3. The size is 4, not 3: h2's
    group is short by the missing rank. With no rank missing, the same groups stay as found."""
    host = {r: f"h{r // 4}" for r in range(16) if r != 9}
    groups = {0: [0, 1, 2, 3, 12, 13, 14, 15], 4: [4, 5, 6, 7], 8: [8, 10, 11]}
    assert _equal_sized(groups, host, missing=1) == {0: [0, 1, 2, 3], 12: [12, 13, 14, 15], 4: [4, 5, 6, 7], 8: [8, 10, 11]}
    assert _equal_sized(groups, host) == groups


def _stream(groups: list[list[int]], host_of: dict[int, str], *, offset: dict[str, float], late: dict[str, float],
            noise_ns: float, member_ns: float, positions: int = 24, steps: int = 4, seed: int = 0) -> pl.DataFrame:
    """One anonymous stream's collective rows: each group's k-th collective ends at its own time
    (position spacing 2 ms, ``noise_ns`` per group and position: lockstep groups move apart by
    their compute noise; each group's ranks compute at their own pace, up to 150 µs from the
    others), its members within ``member_ns`` of it; a host's clock is ``offset`` off and its
    groups ``late`` behind in every step."""
    rng = np.random.default_rng(seed)
    pace = {g[0]: rng.uniform(-150e3, 150e3) for g in groups}
    rows = []
    for s in range(steps):
        for p in range(positions):
            base = s * 100e6 + p * 2e6
            for g in groups:
                t = base + pace[g[0]] + rng.normal(0, noise_ns)
                for r in g:
                    h = host_of[r]
                    end = t + late.get(h, 0.0) + offset.get(h, 0.0) + rng.normal(0, member_ns)
                    rows.append({"instance_id": s * positions + p, "rank": r, "host": h, "step": s, "end_ns": int(end)})
    return pl.DataFrame(rows)


def test_lockstep_groups_of_one_host_are_not_joined_across_hosts() -> None:
    """Tensor-parallel pairs, two per host on four hosts, in lockstep (their data-parallel
    all-reduces on another stream keep them in step); host h2 is 15 ms late in every step.
    Coherence alone made one group of the pairs that kept pace (the late host's constant lag
    reads as a clock offset); two pairs of one host end 70-150 µs apart on one clock, so they
    are different groups, and the links between hosts that joined them are no tighter than the
    lockstep: each pair is its own group."""
    from stallscope.analysis.collectives import SAME_HOST_END_NS, COHERENT_END_NS, _coherent_groups

    host_of = {r: f"h{r // 4}" for r in range(16)}
    pairs = [[r, r + 1] for r in range(0, 16, 2)]
    grp = _stream(pairs, host_of, offset={"h1": 5.4e6, "h2": -2.1e6, "h3": 8.2e6}, late={"h2": 15e6},
                  noise_ns=12_000, member_ns=500)
    assert _coherent_groups(grp, COHERENT_END_NS, SAME_HOST_END_NS) == {p[0]: p for p in pairs}


def test_groups_across_hosts_stay_joined_beside_lockstep_neighbours() -> None:
    """Data-parallel groups across four hosts (even local ranks, odd local ranks), in lockstep:
    members end within a µs of each other, the two groups 12 µs apart position to position. The
    tight links build each group; the loose ones that would join them (two ranks of one host
    ending apart) are left out."""
    from stallscope.analysis.collectives import SAME_HOST_END_NS, COHERENT_END_NS, _coherent_groups

    host_of = {r: f"h{r // 2}" for r in range(8)}
    groups = [[0, 2, 4, 6], [1, 3, 5, 7]]
    grp = _stream(groups, host_of, offset={"h1": 5.4e6, "h2": -2.1e6, "h3": 8.2e6}, late={},
                  noise_ns=40_000, member_ns=500)
    assert _coherent_groups(grp, COHERENT_END_NS, SAME_HOST_END_NS) == {0: [0, 2, 4, 6], 1: [1, 3, 5, 7]}
