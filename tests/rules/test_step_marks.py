"""A job profiled without ``prof.step()`` reads as the same job with its step marks.

Ingest takes each step from the end of one ``Optimizer.step#…`` annotation to the end of the
next (``ranks.step_source``); the analysis then sees the same steps, the same culprits and (the
step boundaries moved from the start of the data loading to the end of the optimizer step) the
same cost within a few points.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.rules.conftest import NO_MARKS


@pytest.mark.parametrize("name", sorted(NO_MARKS))
def test_same_steps_culprits_and_cost_as_with_marks(jobs: Any, name: str) -> None:
    bare, marked = jobs[name], jobs[name + "+marks"]
    assert set(bare.store.sql("SELECT DISTINCT step_source FROM ranks")["step_source"]) == {"Optimizer.step"}
    assert bare.doc["job"]["steps"] == marked.doc["job"]["steps"]
    got = [f for f in bare.doc["findings"] if f["cause"] != "input"]
    want = [f for f in marked.doc["findings"] if f["cause"] != "input"]
    assert [(f["rule"], f["ranks"]) for f in got] == [(f["rule"], f["ranks"]) for f in want]
    for g, w in zip(got, want):
        assert abs(g["lost_time_fraction"] - w["lost_time_fraction"]) <= 0.02, (g["lost_time_fraction"], w["lost_time_fraction"])


def test_the_report_says_where_the_steps_came_from(jobs: Any) -> None:
    f = next(f for f in jobs["compute_no_marks"].doc["findings"] if f["rule"] == "ING004")
    assert f["severity"] == "info" and "optimizer" in f["title"]
    assert len(f["ranks"]) == jobs["compute_no_marks"].doc["job"]["world_size"]
    assert "ING004" not in {x["rule"] for x in jobs["compute_no_marks+marks"].doc["findings"]}
