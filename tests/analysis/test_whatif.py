"""The what-if replay on hand-built timelines whose true answer is known."""

from __future__ import annotations

import polars as pl
import pytest

from stallscope.analysis.whatif import build_timeline, everyone_like_median, replay

MS = 1_000_000


def _ddp(*, late_ns: int = 0, slow_ns: int = 0, buckets: int = 6, steps: int = 4,
         overlaps: bool = True) -> tuple[pl.DataFrame, ...]:
    """Three ranks of DDP: backward produces a gradient bucket every 5 ms and all-reduces it on
    the NCCL stream while backward goes on; the optimizer waits for the last bucket. Rank 2 starts
    backward ``late_ns`` late in every step (a slow data loader), and takes ``slow_ns`` more to
    compute each bucket (a slow GPU)."""
    compute, transfer, opt = 5 * MS, 2 * MS, 3 * MS
    ranks = (0, 1, 2)
    members, instances, windows = [], [], []
    t = 0
    iid = 0
    for step in range(steps):
        start = t
        prev_end = 0
        for k in range(buckets):
            arrivals = {r: max(start + (late_ns + (k + 1) * (compute + slow_ns) if r == 2 else (k + 1) * compute), prev_end)
                        for r in ranks}
            end = max(arrivals.values()) + transfer
            for r, a in arrivals.items():
                members.append({"instance_id": iid, "rank": r, "step": step, "arrival_ns": a, "end_ns": end, "ready_ns": a,
                                "gates_compute": k == buckets - 1,
                                # backward runs on under every bucket but the last
                                "compute_overlaps_end": overlaps and k < buckets - 1})
            instances.append({"instance_id": iid, "members": len(ranks), "op": "allreduce", "scope": "inter",
                              "bytes": 1 << 24, "bus_factor": 1.0, "transfer_ns": transfer, "step": step, "channel": "pg:0"})
            prev_end = end
            iid += 1
        t = prev_end + opt
        windows += [{"rank": r, "start_ns": start, "end_ns": t} for r in ranks]
    return (pl.DataFrame(members), pl.DataFrame(instances), pl.DataFrame(windows),
            pl.DataFrame({"rank": list(ranks), "host": ["a", "b", "c"]}))


@pytest.mark.parametrize("overlaps", [True, False])
def test_replay_of_the_recording_is_the_recording(overlaps: bool) -> None:
    tl = build_timeline(*_ddp(late_ns=2 * MS, overlaps=overlaps))
    assert tl is not None
    assert abs(replay(tl) - tl.makespan) <= 1.0


def test_a_late_start_costs_once_per_step_not_once_per_bucket() -> None:
    """Rank 2 starts each step's backward 2 ms late: every rank like the median saves 2 ms per step.
    Anchored on bucket k's shared end, rank 2 looked 2 ms slower at every one of the 6 buckets."""
    late, steps = 2 * MS, 4
    tl = build_timeline(*_ddp(late_ns=late, steps=steps))
    assert tl is not None and (tl.row_prev >= 0).any()
    truth = steps * late / tl.makespan
    assert everyone_like_median(tl) == pytest.approx(truth, rel=0.05)
    # the rows the rank computed through are what makes it right: without them the same recording
    # claims several times the truth
    old = build_timeline(*_ddp(late_ns=late, steps=steps, overlaps=False))
    assert old is not None and not (old.row_prev >= 0).any()
    assert everyone_like_median(old) > 2 * truth


def test_paced_rows_still_follow_a_straggler_s_compute() -> None:
    """A rank whose backward is slower at every bucket (not just late to start) still gains at every
    bucket when paced: its own time between buckets is what shrinks."""
    slow, buckets, steps = MS // 2, 6, 4
    tl = build_timeline(*_ddp(slow_ns=slow, buckets=buckets, steps=steps))
    assert tl is not None and (tl.row_prev >= 0).any()
    assert abs(replay(tl) - tl.makespan) <= 1.0
    assert everyone_like_median(tl) == pytest.approx(buckets * steps * slow / tl.makespan, rel=0.05)
