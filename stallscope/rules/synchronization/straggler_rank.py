"""SYN001 straggler-rank."""

from __future__ import annotations

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct, ranks_text
from stallscope.rules.context import Context
from stallscope.rules.synchronization._shared import MIN_LOST, hidden_text, mechanism


class StragglerRank(Rule):
    """A rank (or two) arrives late at most synchronous collectives and everyone else waits.

    What it detects:
        Ranks that are late — relative to the early members of each all-reduce, all-gather,
        reduce-scatter, broadcast or barrier — in at least half of the profiled steps, that are
        not the ranks of one host (a slow host is LOC001), and whose lateness comes from doing
        more work than their peers (more compute time per step), or whose cause the trace cannot
        tell (host stalls are SYN004).

    Why it slows the job:
        A synchronous collective completes only when its last member arrives; every other rank
        idles in the collective until then. One slow rank therefore sets the pace of the whole
        job: its extra time is paid by every rank, every step.

    Evidence it cites:
        The rank's share of last arrivals and median lateness (``rank_collective_stats``), its
        compute time per step against the other ranks (``rank_breakdown``), and the waiting it
        causes on the other ranks. Time lost is the what-if replay with the straggler behaving
        like its median peer at every synchronization.

    How to fix:
        Look at that rank's GPU (clocks, throttling, ECC errors, a different SKU), its share of
        the work (uneven batch or sequence lengths, data-dependent shapes), and its host (a
        noisy neighbour). Replace the device or rebalance the work.

    Options:
        A rank is late in a step when its summed lateness exceeds the lower-half baseline by five
        robust deviations and 1 % of the step; persistent when late in ≥ 50 % of the steps.
        Findings costing < 1 % of the job are not reported.
    """

    code = "SYN001"
    name = "straggler-rank"
    cause = "synchronization"

    def check(self, ctx: Context) -> list[Finding]:
        v = ctx.sync_verdict
        if v.kind != "straggler" or not v.persistent:
            return []
        ranks = v.culprits
        mech = mechanism(ctx, ranks)
        if mech["kind"] == "host_stall":
            return []  # SYN004
        lost = v.lost
        if lost < MIN_LOST:
            return []
        host_of = ctx.d.host_of()
        hosts = sorted({host_of[r] for r in ranks})
        steps = v.late_steps
        rs = ranks_text(ranks)
        in_ = ", ".join(map(str, ranks))
        one = len(ranks) == 1
        why = (f"{'its' if one else 'their'} compute takes {mech['compute_excess_ms']:.1f} ms more per step than "
               f"{'its' if one else 'their'} peers'" if mech["kind"] == "compute" else
               f"the trace does not show extra compute or host stalls on {'it' if one else 'them'}; "
               f"{'its GPU starts' if one else 'their GPUs start'} collectives late")
        summary = (f"Rank{'s' if len(ranks) > 1 else ''} {rs} on {', '.join(hosts)} arrived late at synchronous collectives in "
                   f"{len(steps)} of {ctx.n_steps} steps; the other ranks waited for {'them' if len(ranks) > 1 else 'it'}. "
                   f"{why.capitalize()}. Replaying the job with {'these ranks' if len(ranks) > 1 else 'it'} behaving like the "
                   f"median peer saves {fmt_pct(lost)} of the job time.{hidden_text(ctx, ranks)}")
        ev = [
            Evidence("share of synchronous collectives where the rank arrived last, and its median lateness",
                     f"SELECT rank, host, instances, last_share, lateness_ms_median, wait_ms_total FROM rank_collective_stats "
                     f"WHERE {ctx.where} ORDER BY lateness_ms_median DESC LIMIT 10",
                     _feature(ctx, ranks, "last_share")),
            Evidence("compute, host stall and waiting per step: the straggler computes longer, the others wait",
                     f"SELECT rank, host, steps, round(compute_ms / steps, 2) AS compute_ms_per_step, "
                     f"round(host_stall_ms / steps, 2) AS host_stall_ms_per_step, round(sync_wait_ms / steps, 2) AS sync_wait_ms_per_step "
                     f"FROM rank_breakdown WHERE {ctx.where} ORDER BY sync_wait_ms_per_step",
                     mech["compute_excess_ms"]),
            Evidence("time the other ranks spent waiting at collectives (ms, whole job)",
                     f"SELECT round(sum(sync_wait_ms), 1) AS others_wait_ms FROM rank_breakdown WHERE {ctx.where} AND rank NOT IN ({in_})",
                     None),
        ]
        conf = ctx.quality * (0.6 + 0.4 * min(1.0, len(steps) / max(1, ctx.n_steps)))
        return [Finding(rule=self.code, cause=self.cause, title=f"rank{'s' if len(ranks) > 1 else ''} {rs} {'are stragglers' if len(ranks) > 1 else 'is a straggler'}",
                        summary=summary, ranks=ranks, hosts=hosts, lost_time_fraction=lost, confidence=conf, evidence=ev,
                        recommendation="Check the straggler's GPU health and clocks (nvidia-smi -q: throttle reasons, ECC), its "
                                       "share of the work (uneven batches or sequence lengths), and replace or rebalance it.",
                        details={"mechanism": mech, "late_steps": steps})]


def _feature(ctx: Context, ranks: list[int], col: str) -> float | None:
    import polars as pl

    v = ctx.features.filter(pl.col("rank").is_in(ranks))[col]
    return round(float(v.mean()), 4) if len(v) else None
