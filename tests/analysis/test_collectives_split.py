"""Splitting anonymous channels (no process-group metadata) into groups."""

from __future__ import annotations

from stallscope.analysis.collectives import _equal_sized


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
