"""The verdict of a findings document in words, shared by every report format.

The verdict is the first finding of ``medium`` severity or above (findings come ordered by time
lost): its cause, its culprits and the share of the job time it cost. A job with no such finding
is healthy.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

#: severities that make a verdict (DESIGN.md: a healthy job has none of these)
SIGNIFICANT = ("critical", "high", "medium")


@dataclass(frozen=True)
class Verdict:
    """One line for people: ``headline``; the parts for tables and badges."""

    healthy: bool
    cause: str | None
    title: str
    severity: str | None
    culprits: str
    lost: str
    confidence: str
    headline: str


def verdict(doc: dict[str, Any]) -> Verdict:
    """The verdict of the findings document ``doc`` (DESIGN.md contract)."""
    main = [f for f in doc["findings"] if f["severity"] in SIGNIFICANT]
    if not main:
        return Verdict(True, None, "no significant slowdown found", None, "none", "n/a", "n/a",
                       "No significant slowdown found: no finding of medium severity or above.")
    f = main[0]
    cul, lost, conf = culprits(f), percent(f["lost_time_fraction"]), f"{f['confidence']:.2f}"
    head = (f"{f['cause']}: {f['title']}. Culprits: {cul}. Time lost: ~{lost} of the job time "
            f"({f['severity']}, confidence {conf}).")
    return Verdict(False, f["cause"], f["title"], f["severity"], cul, lost, conf, head)


def culprits(f: dict[str, Any], *, max_hosts: int = 6) -> str:
    """'rank 5 on node-01', 'ranks 8-15 on node-b', 'all 16 ranks', 'host node-b'."""
    ranks, hosts = list(f.get("ranks") or []), list(f.get("hosts") or [])
    hs = ", ".join(hosts[:max_hosts]) + (f" and {len(hosts) - max_hosts} more" if len(hosts) > max_hosts else "")
    if ranks:
        what = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {rank_ranges(ranks)}"
        return f"{what} on {hs}" if hosts else what
    if hosts:
        return f"host {hs}" if len(hosts) == 1 else f"hosts {hs}"
    return "job-wide"


def percent(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage ('15.2%'), 'n/a' for None."""
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def rank_ranges(ranks: list[int]) -> str:
    """Compact rank list.

    >>> rank_ranges([0, 1, 2, 3, 5, 9, 10])
    '0-3, 5, 9-10'
    """
    out: list[str] = []
    rs = sorted(set(int(r) for r in ranks))
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)


def sql_command(sql: str, *, store: str | None = None) -> str:
    """The shell command that reruns an evidence query.

    >>> print(sql_command("SELECT 1 FROM ranks WHERE job = 'j'", store="st"))
    stallscope sql "SELECT 1 FROM ranks WHERE job = 'j'" --store st
    """
    one = " ".join(sql.split())
    quoted = f'"{one}"' if not any(c in one for c in '"$`\\!') else shlex.quote(one)
    tail = f" --store {shlex.quote(str(store))}" if store else ""
    return f"stallscope sql {quoted}{tail}"
