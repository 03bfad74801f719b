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
