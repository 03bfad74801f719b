"""ING004 too-few-steps."""

from __future__ import annotations

import polars as pl

from stallscope.ingest.schemas.kineto import COLLECTIVE_LOOP, OPTIMIZER_STEPS, WHOLE_PROFILE
from stallscope.rules.base import Evidence, Finding, Rule, ranks_text
from stallscope.rules.context import Context

MIN_STEPS = 3


class TooFewSteps(Rule):
    """Too few profiled steps (or none) to tell a pattern from a fluke.

    What it detects:
        Fewer than three profiled steps, or none at all; and traces without ``ProfilerStep#N``
        marks (no ``prof.step()`` calls) whose steps ingest took from torch.optim's
        ``Optimizer.step#…`` annotations instead (``ranks.step_source``), said at info level.
        Traces with neither (a hand-written update loop) take their steps from the loop of their
        collectives (``step_source = 'collectives'``), else are one step each, the whole profile
        (``'profile'``): the stall breakdown and the collectives are measured, but no step pattern
        can be.

    Why it slows the job:
        It does not; but persistence ("late in most steps"), intermittency and jitter need
        several steps, and without steps there is no per-step breakdown at all. Steps taken
        from optimizer steps are numbered in order on each rank, assuming every rank's profile
        starts at the same point of the loop (it does when the profiler wraps the loop).

    Evidence it cites:
        ``steps`` per rank; ``ranks.step_source``.

    How to fix:
        Call ``prof.step()`` every iteration and profile at least 5 active steps
        (``schedule(wait=1, warmup=1, active=5)``).

    Options:
        Minimum 3 steps.
    """

    code = "ING004"
    name = "too-few-steps"
    cause = "input"

    def check(self, ctx: Context) -> list[Finding]:
        n = ctx.n_steps
        if n >= MIN_STEPS:
            return self._inferred(ctx)
        whole = n == 1 and "step_source" in ctx.d.ranks.columns and bool((ctx.d.ranks["step_source"] == WHOLE_PROFILE).all())
        what = ("no ProfilerStep markers (nor optimizer steps)" if n == 0 else
                "no ProfilerStep markers nor optimizer steps: each rank's whole profile is one step" if whole else
                f"only {n} profiled step{'s' if n > 1 else ''}")
        return [Finding(rule=self.code, cause=self.cause, title=f"{what} in the traces" if not whole else what,
                        summary=f"The traces hold {what}: per-step conclusions (persistent vs intermittent stragglers, jitter) "
                                f"are {'not possible' if n == 0 or whole else 'weak'}"
                                + (" (the stall breakdown and the collectives of the whole profile are in the tables)." if whole
                                   else "."),
                        ranks=[], hosts=[], lost_time_fraction=None, confidence=1.0,
                        evidence=[Evidence("profiled steps per rank", f"SELECT rank, count(*) AS steps FROM steps WHERE {ctx.where} "
                                                                     f"GROUP BY rank ORDER BY rank", n)],
                        recommendation="Call prof.step() every iteration and profile ≥ 5 active steps.", severity="info")]

    def _inferred(self, ctx: Context) -> list[Finding]:
        if "step_source" not in ctx.d.ranks.columns:
            return []
        src = ctx.d.ranks.filter(pl.col("step_source").is_in([OPTIMIZER_STEPS, COLLECTIVE_LOOP]))
        ranks = src["rank"].to_list()
        if not ranks:
            return []
        loop = src.filter(pl.col("step_source") == COLLECTIVE_LOOP)["rank"].to_list()
        how = ("each of their steps runs to the end of an Optimizer.step annotation" if not loop else
               "each of their steps ends at the longest pause of the loop their collectives repeat"
               + (" (ranks " + ranks_text(sorted(set(ranks) - set(loop))) + ": at the end of an Optimizer.step annotation)"
                  if len(loop) < len(ranks) else ""))
        return [Finding(rule=self.code, cause=self.cause,
                        title="no ProfilerStep markers: steps taken from " + ("optimizer steps" if not loop else "the collectives' loop"),
                        summary=f"The traces of rank(s) {ranks_text(ranks)} hold no ProfilerStep markers (profiled without "
                                f"prof.step()); {how}, numbered in order on every rank.",
                        ranks=ranks, hosts=[], lost_time_fraction=None, confidence=1.0,
                        evidence=[Evidence("where each rank's steps come from", f"SELECT rank, steps, step_source FROM ranks "
                                                                                  f"WHERE {ctx.where} ORDER BY rank", len(ranks))],
                        recommendation="Call prof.step() every iteration (or use torch.profiler.schedule) so that steps are "
                                       "marked.",
                        severity="info")]
