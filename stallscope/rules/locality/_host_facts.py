"""Shared by LOC003/LOC004: time lost by a host that the logs single out."""

from __future__ import annotations

from stallscope.rules.context import Context
from stallscope.rules.locality._intra import intra_transfer_fix


def host_lost(ctx: Context, host: str, *, intra: bool) -> float | None:
    """The larger of: the host's ranks behaving like their peers (when they are late), and (for
    intra-node problems) its intra-node transfers at its peers' speed."""
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
    return best
