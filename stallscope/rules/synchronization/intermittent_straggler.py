"""SYN002 intermittent-straggler."""

from __future__ import annotations

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct, ranks_text
from stallscope.rules.context import Context
from stallscope.rules.synchronization._shared import MIN_LOST, hidden_text, mechanism


class IntermittentStraggler(Rule):
    """One rank (or two) holds everybody up in some steps only.

    What it detects:
        Ranks late at synchronous collectives in some steps but fewer than half of them, that
        account for most of the late events of the job (when many different ranks take turns
        being late, the cause is jitter: SYN003).

    Why it slows the job:
        Each late step costs every rank the straggler's delay; occasional pauses (garbage
        collection, checkpoint writes, data-loader hiccups, thermal events, preemption by other
        processes) add up even though the median step looks healthy.

    Evidence it cites:
        The steps in which the rank was late and by how much (``step_breakdown``: its host stall
        and compute in those steps against its other steps), its lateness per step; time lost
        from the what-if replay with the rank behaving like its median peer.

    How to fix:
        Correlate the late steps with periodic activity on that rank (checkpointing, logging,
        evaluation, GC); make them asynchronous or spread them; check the node's system logs
        for throttling or other tenants at those times.

    Options:
        The culprits are chosen as for SYN001 (the few ranks whose what-if recovers most of the
        waiting); they are intermittent when late in fewer than 70 % of the steps.
    """

    code = "SYN002"
    name = "intermittent-straggler"
    cause = "synchronization"

    def check(self, ctx: Context) -> list[Finding]:
        v = ctx.sync_verdict
        if v.kind != "straggler" or v.persistent or ctx.n_steps < 2:
            return []
        chosen, lost = v.culprits, v.lost
        if lost < MIN_LOST:
            return []
        host_of = ctx.d.host_of()
        hosts = sorted({host_of[r] for r in chosen})
        steps = v.late_steps
        mech = mechanism(ctx, chosen)
        rs = ranks_text(chosen)
        in_ = ", ".join(map(str, chosen))
        many = len(chosen) > 1
        per_step = ctx.late_sets.per_step
        own = ""
        for r in chosen if many else []:
            mine = [st for st in sorted(per_step) if r in per_step[st]]
            own += f"; rank {r} in {', '.join(map(str, mine[:10]))}{', …' if len(mine) > 10 else ''}"
        summary = (f"Rank{'s' if many else ''} {rs} on {', '.join(hosts)} held the other ranks up in "
                   f"{len(steps)} of {ctx.n_steps} steps (steps {', '.join(map(str, steps[:10]))}{own}) and behaved normally in "
                   f"the others. Replaying those steps with {'these ranks' if many else 'the rank'} behaving like "
                   f"{'their' if many else 'its'} median peer saves {fmt_pct(lost)} of the job."
                   f"{hidden_text(ctx, chosen)}")
        ev = [
            Evidence("per-step breakdown of the rank: the late steps stand out",
                     f"SELECT step, rank, round(step_ns / 1e6, 2) AS step_ms, round(compute_ns / 1e6, 2) AS compute_ms, "
                     f"round(host_stall_ns / 1e6, 2) AS host_stall_ms, round(sync_wait_ns / 1e6, 2) AS sync_wait_ms "
                     f"FROM step_breakdown WHERE {ctx.where} AND rank IN ({in_}) ORDER BY step", len(steps)),
            Evidence("how long the other ranks waited at collectives in each step",
                     f"SELECT step, round(median(sync_wait_ns) / 1e6, 2) AS others_wait_ms_median FROM step_breakdown "
                     f"WHERE {ctx.where} AND rank NOT IN ({in_}) GROUP BY step ORDER BY step", None),
        ]
        conf = ctx.quality * (0.55 + 0.35 * min(1.0, lost / max(v.jitter_lost, 1e-9)))
        return [Finding(rule=self.code, cause=self.cause, title=f"rank{'s' if len(chosen) > 1 else ''} {rs} intermittently stall{'' if len(chosen) > 1 else 's'} the job",
                        summary=summary, ranks=chosen, hosts=hosts, lost_time_fraction=lost, confidence=conf, evidence=ev,
                        recommendation="Correlate the late steps with periodic work on that rank (checkpoints, logging, "
                                       "evaluation, GC) and make it asynchronous; check the node for throttling or other tenants.",
                        details={"late_steps": steps, "mechanism": mech})]
