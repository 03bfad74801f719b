"""Shared by the synchronization rules: why a straggler is late (compute or host stall).

Which ranks are stragglers is decided once per job by ``Context.sync_verdict``: every candidate
(ranks late in some step, ranks holding others up the most) is replayed as behaving like its
median peer; the smallest set recovering most of the waiting wins over "many ranks taking
turns" (jitter) when it recovers at least half of what removing all jitter would, and the
ranks of one host win when their joint what-if clearly beats any small set (a slow host).
"""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import ranks_text
from stallscope.rules.context import Context

#: findings that cost less than this share of the job are not reported
MIN_LOST = 0.01


def mechanism(ctx: Context, ranks: list[int]) -> dict[str, float | str]:
    """Compare the ranks' per-step compute and host stall with the median of the other ranks (in
    a pipeline, of the other ranks of their role: the stages do different work by design, and a
    host stall in a light stage read as extra compute against a heavier stage's ranks).

    Returns ``kind`` (compute | host_stall | unknown) and the excess of each, in ms per step.
    """
    b = ctx.d.breakdown
    peers = b.filter(~pl.col("rank").is_in(ranks))
    mine = b.filter(pl.col("rank").is_in(ranks))
    if peers.height == 0 or mine.height == 0:
        return {"kind": "unknown", "compute_excess_ms": 0.0, "host_stall_excess_ms": 0.0}
    by = ["step"]
    if ctx.timeline is not None and ctx.timeline.pipelined:
        role = ctx.roles().rename({"role": "_role"})
        peers, mine = peers.join(role, on="rank"), mine.join(role, on="rank")
        if mine["_role"].is_in(peers["_role"].implode()).all():
            by = ["_role", "step"]
    ref = peers.group_by(by).agg(pl.col("compute_ns").median().alias("c0"), pl.col("host_stall_ns").median().alias("h0"))
    j = mine.join(ref, on=by)
    dc = float((j["compute_ns"] - j["c0"]).median() or 0.0) / 1e6
    dh = float((j["host_stall_ns"] - j["h0"]).median() or 0.0) / 1e6
    kind = "unknown"
    if max(dc, dh) > 0.005 * ctx.step_ms:
        kind = "host_stall" if dh > dc else "compute"
    return {"kind": kind, "compute_excess_ms": round(dc, 3), "host_stall_excess_ms": round(dh, 3)}


def hidden_text(ctx: Context, chosen: list[int]) -> str:
    """Sentences naming the chosen ranks that joined the first ones because their stalls fell in
    the same steps (see ``Context._hidden_behind``): those whose stall hid behind another's (alone
    their replay recovers little, yet a fix of the others alone would expose them), and those
    late both in the others' steps and in their own (replayed together they recover more than
    either alone). Empty when there are none."""
    alt = ctx.sync_verdict.alternatives
    hidden = [r for r in alt.get("hidden_behind", []) if r in chosen]
    joined = [r for r in alt.get("joined", []) if r in chosen]
    rest = [r for r in chosen if r not in hidden and r not in joined]
    if not rest:
        return ""
    others = len(rest) > 1
    text = ""
    if hidden:
        many = len(hidden) > 1
        text += (f" Rank{'s' if many else ''} {ranks_text(hidden)} stalled in the same step{'s' if many else ''} as "
                 f"rank{'s' if others else ''} {ranks_text(rest)}, behind {'their' if others else 'its'} longer stall: replayed "
                 f"alone {'they recover' if many else 'it recovers'} little, yet fixing only rank{'s' if others else ''} "
                 f"{ranks_text(rest)} would expose {'their stalls' if many else 'its stall'}.")
    if joined:
        many = len(joined) > 1
        text += (f" Rank{'s' if many else ''} {ranks_text(joined)} stalled both in steps of rank{'s' if others else ''} "
                 f"{ranks_text(rest)} and in {'steps of their own' if many else 'steps of its own'}: fixing either alone "
                 f"leaves the other's stalls holding the job up, so together they cost more than each alone.")
    return text
