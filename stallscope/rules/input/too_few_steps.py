"""ING004 too-few-steps."""

from __future__ import annotations

from stallscope.rules.base import Evidence, Finding, Rule
from stallscope.rules.context import Context

MIN_STEPS = 3


class TooFewSteps(Rule):
    """Too few profiled steps (or none) to tell a pattern from a fluke.

    What it detects:
        Fewer than three ``ProfilerStep#N`` spans in the traces, or none at all (no
        ``profiler.step()`` calls).

    Why it slows the job:
        It does not; but persistence ("late in most steps"), intermittency and jitter need
        several steps, and without step markers there is no per-step breakdown at all.

    Evidence it cites:
        ``steps`` per rank.

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
            return []
        what = "no ProfilerStep markers" if n == 0 else f"only {n} profiled step{'s' if n > 1 else ''}"
        return [Finding(rule=self.code, cause=self.cause, title=f"{what} in the traces",
                        summary=f"The traces hold {what}: per-step conclusions (persistent vs intermittent stragglers, jitter) "
                                f"are {'not possible' if n == 0 else 'weak'}.",
                        ranks=[], hosts=[], lost_time_fraction=None, confidence=1.0,
                        evidence=[Evidence("profiled steps per rank", f"SELECT rank, count(*) AS steps FROM steps WHERE {ctx.where} "
                                                                     f"GROUP BY rank ORDER BY rank", n)],
                        recommendation="Call prof.step() every iteration and profile ≥ 5 active steps.", severity="info")]
