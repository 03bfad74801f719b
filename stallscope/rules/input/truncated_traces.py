"""ING002 truncated-traces."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule, ranks_text
from stallscope.rules.context import Context


class TruncatedTraces(Rule):
    """Some rank traces end before their JSON does (the job was killed while writing them).

    What it detects:
        Traces ingest marked ``truncated``: every complete event before the cut was kept, the
        rest is lost.

    Why it slows the job:
        It does not; but the cut rank's last steps are missing, so its own work in those steps is
        invisible, and a rank killed first may be the one that hung. Its collectives after the
        cut are not lost to the analysis: the other members recorded them, and the what-if
        replay gives the cut rank a row in each, its arrival estimated from how long they waited
        (``whatif.absent_members``); bandwidth is measured on complete instances only.

    Evidence it cites:
        ``ranks.truncated`` and the byte offsets in ``ingest_warnings``.

    How to fix:
        Let the profiler finish (``prof.stop()`` / context exit) before the job is torn down,
        or use a schedule whose active window ends well before the job does.

    Options:
        None.
    """

    code = "ING002"
    name = "truncated-traces"
    cause = "input"

    def check(self, ctx: Context) -> list[Finding]:
        t = ctx.d.ranks.filter(pl.col("truncated"))
        if t.height == 0:
            return []
        ranks = t["rank"].to_list()
        return [Finding(rule=self.code, cause=self.cause, title=f"{len(ranks)} rank trace(s) are truncated",
                        summary=f"The traces of rank(s) {ranks_text(ranks)} end before their JSON does (a killed job); every "
                                f"complete event was kept, later steps of those ranks are missing (where the traces declare group sizes, "
                                f"their collectives after the cut are estimated from how long the other members waited).",
                        ranks=ranks, hosts=sorted(set(t["host"].to_list())), lost_time_fraction=None, confidence=1.0,
                        evidence=[Evidence("truncated traces and where they were cut",
                                           f"SELECT file, rank, message, byte_offset FROM ingest_warnings WHERE {ctx.where} "
                                           f"AND code = 'truncated' ORDER BY rank", len(ranks))],
                        recommendation="Stop the profiler before tearing the job down, or end its active window earlier.",
                        severity="info")]
