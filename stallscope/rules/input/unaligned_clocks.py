"""ING003 unaligned-clocks."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule
from stallscope.rules.context import Context

#: residual spread beyond which an offset is too uncertain for arrival comparisons
MAX_SPREAD_NS = 200_000


class UnalignedClocks(Rule):
    """Some hosts' clocks could not be aligned from the data (or only roughly).

    What it detects:
        Hosts whose clock offset could not be estimated from collective end times (they share no
        synchronous collective with the others: method ``none``, or only the coarse
        ``baseTimeNanoseconds`` fallback), or whose estimate is noisy (spread > 200 µs).

    Why it slows the job:
        It does not; but arrival order across hosts — who was late, who waited — is only as good
        as the alignment, so cross-host conclusions get lower confidence.

    Evidence it cites:
        ``clock_offsets`` (method, spread, instances used).

    How to fix:
        Include traces of collectives that span the hosts (profile the same steps on every rank);
        synchronize host clocks (PTP/chrony) so the fallback is accurate.

    Options:
        Spread threshold 200 µs.
    """

    code = "ING003"
    name = "unaligned-clocks"
    cause = "input"

    def check(self, ctx: Context) -> list[Finding]:
        c = ctx.d.clock
        if c.height < 2:
            return []
        bad = c.filter(pl.col("method").is_in(["none", "base_time"]) | (pl.col("spread_ns").fill_null(0) > MAX_SPREAD_NS))
        if bad.height == 0:
            return []
        hosts = sorted(bad["host"].to_list())
        how = ", ".join(f"{r['host']} ({r['method']}{', spread %.0f µs' % (r['spread_ns'] / 1e3) if r['spread_ns'] else ''})"
                        for r in bad.iter_rows(named=True))
        return [Finding(rule=self.code, cause=self.cause, title=f"clocks of {len(hosts)} host(s) could not be aligned precisely",
                        summary=f"Clock offsets for {how} could not be pinned from matched collectives; cross-host arrival "
                                f"comparisons involving them are uncertain.",
                        ranks=[], hosts=hosts, lost_time_fraction=None, confidence=1.0,
                        evidence=[Evidence("clock offsets per host", f"SELECT host, offset_ns, spread_ns, instances, method FROM clock_offsets "
                                                                    f"WHERE {ctx.where} ORDER BY host", len(hosts))],
                        recommendation="Profile the same steps on every rank so collectives span all hosts; keep host clocks "
                                       "synchronized (PTP/chrony).", severity="info")]
