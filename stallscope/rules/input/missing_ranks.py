"""ING001 missing-ranks."""

from __future__ import annotations

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
        ``ranks`` (world size vs ranks present).

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
        return [Finding(rule=self.code, cause=self.cause, title=f"{len(missing)} of {world} ranks are missing from the bundle",
                        summary=f"The traces declare a world size of {world} but only {len(present)} rank traces were found; "
                                f"missing: {ranks_text(missing, 12)}. Conclusions about waiting and stragglers only cover the ranks present.",
                        ranks=[], hosts=[], lost_time_fraction=None, confidence=1.0,
                        evidence=[Evidence("world size declared vs ranks present",
                                           f"SELECT max(world_size) AS world_size, count(*) AS ranks_present FROM ranks WHERE {ctx.where}",
                                           len(missing))],
                        recommendation="Collect every rank's trace (stallscope collect), or note which ranks were sampled.",
                        severity="info", details={"missing_ranks": missing[:1000]})]
