"""ING005 unreadable-files."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule
from stallscope.rules.context import Context


class UnreadableFiles(Rule):
    """Files of the bundle that could not be read, or only partly.

    What it detects:
        Files ingest marked ``failed`` (empty, corrupt gzip, not JSON, a worker crash) or
        ``partial`` (log lines or trace chunks skipped), and log lines that looked like NCCL
        output but matched no known format.

    Why it slows the job:
        It does not; what is in those files is missing from the analysis.

    Evidence it cites:
        ``files`` (status) and ``ingest_warnings`` (one line per problem, naming the file).

    How to fix:
        Re-collect the files; for unknown log lines, report the NCCL version so the parser can
        learn the format.

    Options:
        None.
    """

    code = "ING005"
    name = "unreadable-files"
    cause = "input"

    def check(self, ctx: Context) -> list[Finding]:
        f = ctx.d.files.filter(pl.col("status").is_in(["failed", "partial"]))
        f = f.filter(~((pl.col("status") == "partial") & pl.col("file").is_in(
            ctx.d.ranks.filter(pl.col("truncated"))["file"].to_list())))  # truncated traces are ING002
        if f.height == 0:
            return []
        names = f["file"].to_list()
        return [Finding(rule=self.code, cause=self.cause, title=f"{len(names)} file(s) could not be read completely",
                        summary=f"Ingest could not read {len(names)} file(s) completely: {', '.join(names[:5])}"
                                f"{' …' if len(names) > 5 else ''}. What they hold is missing from the analysis.",
                        ranks=[], hosts=[], lost_time_fraction=None, confidence=1.0,
                        evidence=[Evidence("files that failed or were read partly, with the reason",
                                           f"SELECT f.file, f.kind, f.status, w.code, w.message FROM files f LEFT JOIN ingest_warnings w "
                                           f"ON w.job = f.job AND w.file = f.file WHERE f.{ctx.where} AND f.status IN ('failed', 'partial')",
                                           len(names))],
                        recommendation="Re-collect those files; report unknown NCCL log formats with their NCCL version.",
                        severity="info")]
