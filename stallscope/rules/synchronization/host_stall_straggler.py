"""SYN004 host-stall-straggler."""

from __future__ import annotations

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct, ranks_text
from stallscope.rules.context import Context
from stallscope.rules.synchronization._shared import MIN_LOST, hidden_text, mechanism


class HostStallStraggler(Rule):
    """A rank is late at collectives because its host falls behind: its GPU idles with nothing launched.

    What it detects:
        Persistent late ranks (as in SYN001) whose extra time per step is *host stall* — the
        device idle with no work queued because the CPU side had not launched it yet: data
        loading, Python overhead, garbage collection, synchronizing calls (``.item()``,
        ``.cpu()``), a slow or contended CPU. On CPU-only traces: time the main thread spends
        outside any operator.

    Why it slows the job:
        The late rank's collectives start late, and every other rank waits for it inside the
        collective: one rank's host problem becomes everybody's idle time.

    Evidence it cites:
        The rank's host-stall time per step against its peers (``rank_breakdown``,
        ``step_breakdown``), its share of last arrivals (``rank_collective_stats``), the waiting
        it causes; time lost from the what-if replay with the rank behaving like its median peer.

    How to fix:
        Profile that rank's input pipeline (more DataLoader workers, pinned memory, prefetch),
        remove synchronizing calls from the step, check for CPU contention or a different CPU
        binding on that rank, tune garbage collection (``gc.freeze()``, manual ``gc.collect``).

    Options:
        Same lateness thresholds as SYN001; the mechanism is host stall when the rank's median
        excess host stall per step exceeds its excess compute and 0.5 % of the step.
    """

    code = "SYN004"
    name = "host-stall-straggler"
    cause = "synchronization"

    def check(self, ctx: Context) -> list[Finding]:
        v = ctx.sync_verdict
        if v.kind != "straggler" or not v.persistent:
            return []
        ranks = v.culprits
        mech = mechanism(ctx, ranks)
        if mech["kind"] != "host_stall":
            return []
        lost = v.lost
        if lost < MIN_LOST:
            return []
        host_of = ctx.d.host_of()
        hosts = sorted({host_of[r] for r in ranks})
        steps = v.late_steps
        rs = ranks_text(ranks)
        in_ = ", ".join(map(str, ranks))
        summary = (f"Rank{'s' if len(ranks) > 1 else ''} {rs} on {', '.join(hosts)} stalled on the host for "
                   f"{mech['host_stall_excess_ms']:.1f} ms more per step than the other ranks (device idle, nothing launched), "
                   f"arrived late at synchronous collectives in {len(steps)} of {ctx.n_steps} steps, and the others waited. "
                   f"Without the stall the job would be {fmt_pct(lost)} shorter.{hidden_text(ctx, ranks)}")
        ev = [
            Evidence("host stall per step of every rank: the straggler's device sits idle with nothing launched",
                     f"SELECT rank, host, round(host_stall_ms / steps, 2) AS host_stall_ms_per_step, "
                     f"round(sync_wait_ms / steps, 2) AS sync_wait_ms_per_step FROM rank_breakdown WHERE {ctx.where} "
                     f"ORDER BY host_stall_ms_per_step DESC",
                     mech["host_stall_excess_ms"]),
            Evidence("share of synchronous collectives where the rank arrived last",
                     f"SELECT rank, host, last_share, lateness_ms_median FROM rank_collective_stats WHERE {ctx.where} "
                     f"ORDER BY last_share DESC LIMIT 10", None),
            Evidence("per-step host stall of the straggler (the stall repeats every step)",
                     f"SELECT step, rank, round(host_stall_ns / 1e6, 2) AS host_stall_ms, round(step_ns / 1e6, 2) AS step_ms "
                     f"FROM step_breakdown WHERE {ctx.where} AND rank IN ({in_}) ORDER BY step", None),
        ]
        conf = ctx.quality * (0.65 + 0.35 * min(1.0, len(steps) / max(1, ctx.n_steps)))
        return [Finding(rule=self.code, cause=self.cause,
                        title=f"rank{'s' if len(ranks) > 1 else ''} {rs} {'are' if len(ranks) > 1 else 'is a'} host-stall straggler{'s' if len(ranks) > 1 else ''}",
                        summary=summary, ranks=ranks, hosts=hosts, lost_time_fraction=lost, confidence=conf, evidence=ev,
                        recommendation="Profile the input pipeline and host-side code of that rank (DataLoader workers, pinned "
                                       "memory, synchronizing calls such as .item(), GC pauses, CPU binding).",
                        details={"mechanism": mech, "late_steps": steps})]
