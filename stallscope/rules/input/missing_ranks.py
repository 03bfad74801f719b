"""ING001 missing-ranks."""

from __future__ import annotations

import polars as pl

from stallscope.analysis.collectives import declared_ranks
from stallscope.rules.base import Evidence, Finding, Rule, ranks_text
from stallscope.rules.context import Context


class MissingRanks(Rule):
    """The bundle holds fewer rank traces than the job had.

    What it detects:
        ``distributedInfo.world_size`` larger than the number of rank traces ingested, and the
        ranks that are missing.

    Why it slows the job:
        It does not slow the job; it weakens every other conclusion: a missing rank may be the
        straggler everyone waited for, and collectives cannot be matched across it.

    Evidence it cites:
        ``ranks`` (world size vs ranks present); the collectives whose groups waited for a missing
        rank (``collective_instances.absent`` where the channel's ``Process Group Ranks`` name it:
        the present members' transfer ran longer than complete groups'). There an estimated
        arrival stands in for it in the what-ifs and the collective is left out of bandwidth.

    How to fix:
        Collect every rank's trace (``stallscope collect`` writes them all into one bundle), or
        say which ranks were sampled on purpose.

    Options:
        None. Lowers the confidence of every finding in proportion to the share missing.
    """

    code = "ING001"
    name = "missing-ranks"
    cause = "input"

    def check(self, ctx: Context) -> list[Finding]:
        present = set(ctx.d.ranks["rank"].to_list())
        world = ctx.d.world_size
        if world <= len(present):
            return []
        missing = sorted(set(range(world)) - present)
        waited = _waited_for(ctx, missing)
        held = (f" In {waited} collectives their groups waited for a missing rank (the others' transfer ran longer than "
                f"complete groups'): an estimated arrival stands in for it there, and those collectives are left out of "
                f"bandwidth." if waited else "")
        return [Finding(rule=self.code, cause=self.cause, title=f"{len(missing)} of {world} ranks are missing from the bundle",
                        summary=f"The traces declare a world size of {world} but only {len(present)} rank traces were found; "
                                f"missing: {ranks_text(missing, 12)}. Conclusions about waiting and stragglers only cover the ranks "
                                f"present.{held}",
                        ranks=[], hosts=[], lost_time_fraction=None, confidence=1.0,
                        evidence=[Evidence("world size declared vs ranks present",
                                           f"SELECT max(world_size) AS world_size, count(*) AS ranks_present FROM ranks WHERE {ctx.where}",
                                           len(missing))]
                        + ([Evidence("collectives held back by a member without a row (per group)",
                                     f"SELECT channel, op, count(*) AS instances, round(median(transfer_ns) / 1e6, 2) AS transfer_ms "
                                     f"FROM collective_instances WHERE {ctx.where} AND absent AND members < group_size "
                                     f"GROUP BY ALL ORDER BY instances DESC", waited)] if waited else []),
                        recommendation="Collect every rank's trace (stallscope collect), or note which ranks were sampled.",
                        severity="info", details={"missing_ranks": missing[:1000], "waited_instances": waited})]


def _waited_for(ctx: Context, missing: list[int]) -> int:
    """Collective instances held back by a missing rank: ``absent`` ones whose channel names it."""
    inst = ctx.d.instances
    if inst.height == 0 or "absent" not in inst.columns or not missing:
        return 0
    named = inst.filter(pl.col("absent").fill_null(False)).select("instance_id", declared_ranks().alias("_named"))
    return int(named.explode("_named").filter(pl.col("_named").is_in(missing))["instance_id"].n_unique())
