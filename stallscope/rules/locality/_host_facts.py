"""Shared by LOC003/LOC004: time lost by a host that the logs single out."""

from __future__ import annotations

from stallscope.rules.context import Context
from stallscope.rules.locality._intra import intra_transfer_fix


def host_lost(ctx: Context, host: str, *, intra: bool, inter: bool = False) -> float | None:
    """The largest of: the host's ranks behaving like their peers (when they are late); for
    intra-node problems, its intra-node transfers at its peers' speed; for GPU-NIC problems,
    inter-node transfers at the bandwidth the fabric should give without this host's handicap
    (when they run below it: a ring is as slow as its slowest host)."""
    best = None
    late = set(ctx.late_sets.persistent)
    ranks = ctx.d.ranks_of(host)
    if ranks and late & set(ranks):
        best = ctx.lost_if_like_peers(ranks)
    if intra:
        fix = intra_transfer_fix(ctx, host)
        if fix:
            v = ctx.lost_if_transfers(f"intra:{host}", fix)
            if v is not None and (best is None or v > best):
                best = v
    if inter:
        from stallscope.rules.fabric._bandwidth import host_bandwidth_handicap, inter_expectations, transfers_at_bandwidth, transfers_scaled

        handicap = host_bandwidth_handicap(ctx, host)
        if handicap and handicap > 1.05:
            v = ctx.lost_if_transfers(f"nic-graph:{host}", transfers_scaled(ctx, handicap))
        else:
            e = inter_expectations(ctx, without=host)
            below = e.height and float((e["busbw_gbps"] / e["expected_gbps"]).median()) < 0.8
            v = ctx.lost_if_transfers(f"fab:without:{host}", transfers_at_bandwidth(ctx, without=host)) if below else None
        if v is not None and (best is None or v > best):
            best = v
    return best
