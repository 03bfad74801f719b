"""Shared by the synchronization rules: which persistent late ranks are stragglers, and why."""

from __future__ import annotations

import polars as pl

from stallscope.rules.context import Context

#: a straggler group larger than this share of the ranks is not "a few stragglers"
MAX_STRAGGLER_SHARE = 0.25
#: findings that cost less than this share of the job are not reported
MIN_LOST = 0.01


def minimal_culprits(ctx: Context, ranks: list[int]) -> list[int]:
    """The smallest subset of late ranks that explains (≥ 80 % of) their what-if gain.

    Lateness propagates: a pipeline partner of a straggler, or a replica waiting on it through
    a point-to-point dependency, is late too without being the cause. Ranks are added by their
    own what-if gain until the subset's gain reaches 80 % of the whole set's.
    """
    if len(ranks) <= 1:
        return list(ranks)
    whole = ctx.lost_if_like_peers(ranks) or 0.0
    if whole <= 0:
        return list(ranks)
    solo = sorted(ranks, key=lambda r: -(ctx.lost_if_like_peers([r]) or 0.0))
    chosen: list[int] = []
    for r in solo:
        chosen.append(r)
        if (ctx.lost_if_like_peers(chosen) or 0.0) >= 0.8 * whole:
            break
    return sorted(chosen)


def persistent_stragglers(ctx: Context) -> list[int]:
    """Persistent late ranks, reduced to the ones causing the lateness, that are not a whole
    host (those are locality candidates)."""
    p = ctx.late_sets.persistent
    if not p:
        return []
    p = minimal_culprits(ctx, p)
    if ctx.whole_host_of(p) is not None:
        return []
    if len(p) > max(2, MAX_STRAGGLER_SHARE * ctx.d.ranks.height):
        return []
    return p


def mechanism(ctx: Context, ranks: list[int]) -> dict[str, float | str]:
    """Compare the ranks' per-step compute and host stall with the median of the other ranks.

    Returns ``kind`` (compute | host_stall | unknown) and the excess of each, in ms per step.
    """
    b = ctx.d.breakdown
    peers = b.filter(~pl.col("rank").is_in(ranks))
    mine = b.filter(pl.col("rank").is_in(ranks))
    if peers.height == 0 or mine.height == 0:
        return {"kind": "unknown", "compute_excess_ms": 0.0, "host_stall_excess_ms": 0.0}
    ref = peers.group_by("step").agg(pl.col("compute_ns").median().alias("c0"), pl.col("host_stall_ns").median().alias("h0"))
    j = mine.join(ref, on="step")
    dc = float((j["compute_ns"] - j["c0"]).median() or 0.0) / 1e6
    dh = float((j["host_stall_ns"] - j["h0"]).median() or 0.0) / 1e6
    kind = "unknown"
    if max(dc, dh) > 0.005 * ctx.step_ms:
        kind = "host_stall" if dh > dc else "compute"
    return {"kind": kind, "compute_excess_ms": round(dc, 3), "host_stall_excess_ms": round(dh, 3)}


def late_steps(ctx: Context, ranks: list[int]) -> list[int]:
    return sorted(s for s, rs in ctx.late_sets.per_step.items() if set(rs) & set(ranks))
