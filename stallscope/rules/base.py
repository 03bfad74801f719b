"""What a rule is, what it returns, and the context it reads.

A rule is a class in its own file under ``rules/<family>/`` with a stable ``code`` (``FAB…``,
``SYN…``, ``LOC…``, ``ING…``), a symptom ``name`` and a docstring with the fixed sections
*What it detects / Why it slows the job / Evidence it cites / How to fix / Options* — printed by
``stallscope rules show CODE`` and in ``docs/rules.md``. ``check(ctx)`` returns findings (maybe
none); it never prints and never raises for lack of data (it returns nothing instead).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import inspect
import re
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.rules.context import Context

Cause = Literal["fabric", "synchronization", "locality", "input"]
Severity = Literal["critical", "high", "medium", "low", "info"]
SEVERITY_ORDER: dict[str, int] = {"critical": 4, "high": 3, "medium": 2, "low": 1, "info": 0}
DOC_SECTIONS = ("What it detects", "Why it slows the job", "Evidence it cites", "How to fix", "Options")


def severity_for(lost: float | None) -> Severity:
    """Severity follows the what-if time lost: critical ≥ 30 %, high ≥ 10 %, medium ≥ 3 %, else low.

    >>> [severity_for(x) for x in (0.35, 0.12, 0.05, 0.01, None)]
    ['critical', 'high', 'medium', 'low', 'info']
    """
    if lost is None:
        return "info"
    if lost >= 0.30:
        return "critical"
    if lost >= 0.10:
        return "high"
    if lost >= 0.03:
        return "medium"
    return "low"


@dataclass
class Evidence:
    description: str
    sql: str
    value: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {"description": self.description, "sql": self.sql, "value": self.value}


@dataclass
class Finding:
    rule: str
    cause: Cause
    title: str
    summary: str
    ranks: list[int]
    hosts: list[str]
    lost_time_fraction: float | None
    confidence: float
    evidence: list[Evidence]
    recommendation: str
    severity: Severity = "info"
    #: extra machine-readable facts (mechanism, steps, bandwidths); emitted under "details"
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.lost_time_fraction is not None:
            self.lost_time_fraction = round(float(min(1.0, max(0.0, self.lost_time_fraction))), 4)
        if self.severity == "info" and self.lost_time_fraction is not None:
            self.severity = severity_for(self.lost_time_fraction)
        self.confidence = round(float(min(1.0, max(0.0, self.confidence))), 3)
        self.ranks = sorted(int(r) for r in self.ranks)
        self.hosts = sorted(str(h) for h in self.hosts)

    def as_dict(self) -> dict[str, Any]:
        d = {"rule": self.rule, "cause": self.cause, "severity": self.severity, "title": self.title, "summary": self.summary,
             "ranks": self.ranks, "hosts": self.hosts, "lost_time_fraction": self.lost_time_fraction,
             "confidence": self.confidence, "evidence": [e.as_dict() for e in self.evidence],
             "recommendation": self.recommendation}
        if self.details:
            d["details"] = self.details
        return d


class Rule(ABC):
    """Base class: subclasses set ``code``, ``name``, ``cause`` and implement ``check``."""

    code: ClassVar[str]
    name: ClassVar[str]
    cause: ClassVar[Cause]

    @abstractmethod
    def check(self, ctx: "Context") -> list[Finding]:
        """The rule's findings for the job of ``ctx`` (empty when it does not fire)."""

    @classmethod
    def doc(cls) -> str:
        return textwrap.dedent(inspect.getdoc(cls) or "").strip()

    @classmethod
    def sections(cls) -> dict[str, str]:
        """The docstring split into its fixed sections (a test checks every rule has them all)."""
        text = cls.doc()
        out: dict[str, str] = {}
        current = "summary"
        buf: list[str] = []
        for line in text.splitlines():
            m = re.match(r"^(%s):?\s*$" % "|".join(map(re.escape, DOC_SECTIONS)), line.strip())
            if m:
                out[current] = "\n".join(buf).strip()
                current, buf = m.group(1), []
            else:
                buf.append(line)
        out[current] = "\n".join(buf).strip()
        return out


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def fmt_ms(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:.1f} ms"


def ranks_text(ranks: list[int], limit: int = 8) -> str:
    rs = sorted(ranks)
    if len(rs) <= limit:
        return ", ".join(map(str, rs))
    return ", ".join(map(str, rs[:limit])) + f", … ({len(rs)} ranks)"
