"""SYN003 jitter-amplification."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct
from stallscope.rules.context import Context, noise_floor, variation_sources  # noqa: F401 - noise_floor: re-exported
from stallscope.rules.synchronization._shared import MIN_LOST


class JitterAmplification(Rule):
    """Small random delays on many ranks, amplified by every synchronous step; no single culprit.

    What it detects:
        Waiting at synchronous collectives that is spread over many ranks: the last arriver
        changes from collective to collective and from step to step, no rank or host dominates,
        and the step time follows the slowest rank of each step rather than the typical one.

    Why it slows the job:
        With N ranks synchronizing every step, the step lasts as long as the *maximum* of N
        noisy per-rank times; the expected maximum grows with N and with the noise, so variance
        that is harmless on one GPU costs a large job a fixed share of every step.

    Evidence it cites:
        Per-step spread between the slowest and the median rank (``step_times``), the spread of
        last arrivals across ranks (``rank_collective_stats``), waiting per rank; time lost from
        the what-if replay with every rank behaving like the median member at each synchronization.

    How to fix:
        Reduce per-rank variance: pin CPU threads and NUMA, isolate the data pipeline
        (prefetch, more workers), disable frequency scaling and background daemons, avoid
        dynamic shapes; synchronize less often (gradient accumulation, larger buckets, async
        checkpointing).

    Options:
        Reported when the what-if gain exceeds the noise floor — what synchronizing n ranks with
        1.6 % per-rank step-time noise costs anyway, 1.6 % × sqrt(2 ln n) (3.8 % at 16 ranks, 6 %
        at 1024) — and no small set of stragglers explains half of it (ranks late in many steps
        by chance do not make a straggler when a dozen others take turns too; in a profile of
        three to five steps where every rank varies, ranks above their peers in one step at most
        are the jitter's largest draws, not stragglers: ``Context._jitter_tail``). When the ranks
        differ mostly in compute time, not in host-side gaps (host-stall spread under 75 % of the
        compute spread), the waiting is the GPUs' own kernel-time noise, which synchronous
        training always pays at every synchronization: then the gain must exceed twice the floor
        (``COMPUTE_NOISE_FLOORS``; a healthy 16-rank DDP job with 5 % kernel-time noise loses
        6-8 %, and the typical-rank test below silences it: per-kernel noise averages out over a
        step).

        And the typical rank must vary from step to step (``TYPICAL_HOST_JITTER``: its host-side
        time by 0.4 % of a step, robust spread across ranks of each rank's change from one step to
        the next, which reads the same noise alike over 2 or 50 steps; or its compute time by
        2.4 %). The what-if gain alone does not say it: a healthy job that synchronizes 35 times
        a step pays its kernel-time noise at each, and rare pauses (a garbage collection on some
        rank in some steps) cost it a few percent more, so the replay recovers 9-25 % from a job
        nothing is wrong with. Jitter that amplifies is paid by every rank, every step: it moves
        the typical rank, which pauses on a few and per-collective noise do not.

        A typical rank that varies k times the bar (and, for its host-side time, k times a
        millisecond: host noise comes in absolute time, a larger share of short steps) has at
        most 1/k of its noise of the healthy kind, so the noise floor above is divided by k
        (``Context.jitter_bar``): small jitter on a big job (64 ranks, typical host-side time 2.2
        times the bar and 1.5 ms, replay 3.8 % against a floor of 4.6 %) is still jitter.
    """

    code = "SYN003"
    name = "jitter-amplification"
    cause = "synchronization"

    def check(self, ctx: Context) -> list[Finding]:
        ls = ctx.late_sets
        n = ctx.d.ranks.height
        v = ctx.sync_verdict
        if v.kind != "jitter" or n < 3 or ctx.n_steps < 2:
            return []
        lost = v.lost
        if lost < max(MIN_LOST, ctx.jitter_bar):
            return []
        if not ctx.typical_varies:
            return []
        typ_h, typ_c = ctx.typical_spreads
        c_var, h_var = variation_sources(ctx.d.breakdown)
        f = ctx.features
        last_top = float(f["last_share"].max() or 0.0)
        wait_med = float(f["sync_wait_frac"].median() or 0.0)
        summary = (f"Ranks waited for each other at synchronous collectives ({fmt_pct(wait_med)} of the median rank's step time) "
                   f"without a dominant culprit: the last arriver changes (no rank is last more than {fmt_pct(last_top)} of the time; "
                   f"{ls.distinct} different ranks were late in some step). Every synchronous step pays the maximum of the "
                   f"ranks' noise; replaying with every rank at the median member's pace saves {fmt_pct(lost)} of the job.")
        ev = [
            Evidence("per-step slowest vs median rank: step time tracks the maximum",
                     f"SELECT step, ranks, round(step_ms_max, 2) AS step_ms_max, round(step_ms_median, 2) AS step_ms_median, "
                     f"round(sync_wait_ms_median, 2) AS sync_wait_ms_median FROM step_times WHERE {ctx.where} ORDER BY step", wait_med),
            Evidence("last arrivals are spread over many ranks",
                     f"SELECT rank, host, last_share, lateness_ms_median, wait_ms_total FROM rank_collective_stats "
                     f"WHERE {ctx.where} ORDER BY last_share DESC", last_top),
        ]
        conf = ctx.quality * (0.5 + 0.3 * min(1.0, ls.distinct / max(1, n)) + 0.2 * (1 - last_top))
        return [Finding(rule=self.code, cause=self.cause, title="jitter spread over many ranks is amplified by synchronization",
                        summary=summary, ranks=ctx.d.ranks["rank"].to_list(), hosts=ctx.d.hosts, lost_time_fraction=lost,
                        confidence=conf, evidence=ev,
                        recommendation="Reduce per-rank variance (CPU/NUMA pinning, input prefetch, no frequency scaling or "
                                       "background daemons, static shapes) or synchronize less often (accumulation, larger buckets).",
                        details={"distinct_late_ranks": ls.distinct, "max_last_share": round(last_top, 3),
                                 "median_sync_wait_frac": round(wait_med, 4), "compute_spread": round(c_var, 4),
                                 "host_stall_spread": round(h_var, 4), "typical_host_stall_spread": round(typ_h, 4),
                                 "typical_compute_spread": round(typ_c, 4),
                                 "noise_floor": round(ctx.jitter_floor, 4), "noise_bar": round(ctx.jitter_bar, 4)})]
