"""Run every rule on a job, arbitrate overlapping findings, and build the findings document.

Arbitration (in this order):

1. Locality findings about the same host are merged into the one that measured the most time
   lost (its evidence and placement facts are kept); at equal time, into the one that names a
   mechanism rather than LOC001's "late together" (LOC004's cost is often LOC001's replay: the
   host's ranks like their peers measure more than its transfers do).
2. When a locality finding blames a host, synchronization findings blaming only that host's
   ranks are dropped: late ranks that are exactly one host's, with that host's placement
   differing, are locality (DESIGN.md).
3. A more specific cause of the inter-node bandwidth collapse replaces FAB001 (the same
   collapse seen in the traces): FAB002 (socket fallback, from the logs), FAB004 (one host's
   degraded link), LOC004 (one host's GPU-NIC path) or LOC003 (one host's intra-node hops on
   SHM, which every ring through it crosses). A network-bound FAB001 (no bandwidth verdict,
   cost unmeasured) also yields to a measured locality finding on one host: a host whose ranks
   are late together in a job waiting on its network is the classic signature of GPUs and NICs
   across CPU sockets (the far socket slows the host's CPU side and its NIC traffic alike); the
   exposed share is kept in that finding's details.
4. Jitter (SYN003) is dropped when a straggler or slow-host finding of medium or higher
   explains the waiting.
5. Confidence of every finding is scaled by the input quality (missing ranks, truncated
   traces, unaligned clocks, few steps); findings are ordered by time lost, then severity.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import polars as pl

from stallscope import __version__
from stallscope.rules.base import SEVERITY_ORDER, Finding
from stallscope.rules.context import Context
from stallscope.rules.registry import RULES
from stallscope.store.queries import Store

_SYNC_CULPRIT_RULES = ("SYN001", "SYN002", "SYN004")


def run_rules(ctx: Context, *, only: list[str] | None = None) -> list[Finding]:
    findings: list[Finding] = []
    for code, rule in RULES.items():
        if only and code not in only:
            continue
        findings.extend(rule().check(ctx))
    return arbitrate(ctx, findings)


def arbitrate(ctx: Context, findings: list[Finding]) -> list[Finding]:
    # 1. merge locality findings per host
    loc: dict[str, Finding] = {}
    rest: list[Finding] = []
    for f in findings:
        if f.cause == "locality" and len(f.hosts) == 1:
            h = f.hosts[0]
            if h in loc:
                keep, other = (loc[h], f) if _weight(loc[h]) >= _weight(f) else (f, loc[h])
                seen = {e.sql for e in keep.evidence}
                keep.evidence += [e for e in other.evidence if e.sql not in seen]
                pd = keep.details.setdefault("placement_differences", [])
                for t in other.details.get("placement_differences", []) or []:
                    if t not in pd:
                        pd.append(t)
                keep.details.setdefault("merged_rules", []).append(other.rule)
                if other.details.get("affects_inter_node"):
                    keep.details["affects_inter_node"] = True
                keep.confidence = max(keep.confidence, other.confidence)
                loc[h] = keep
            else:
                loc[h] = f
        else:
            rest.append(f)
    # a slow host whose logs show no placement difference came back as synchronization: keep as is
    findings = rest + list(loc.values())
    # 2. a measured locality finding on a host absorbs synchronization findings that blame exactly
    #    that host's ranks (one straggler inside the host stays a straggler)
    loc_ranks = {h: set(ctx.d.ranks_of(h)) for h, f in loc.items() if SEVERITY_ORDER[f.severity] >= 2}
    findings = [f for f in findings if not (f.rule in _SYNC_CULPRIT_RULES and f.ranks
                                            and any(set(f.ranks) == rs for rs in loc_ranks.values()))]
    # 3. a more specific cause of the bandwidth collapse replaces the job-wide FAB001: socket
    #    fallback (FAB002), one host's degraded link (FAB004) or one host's GPU-NIC placement (LOC004)
    specific = [f for f in findings if f.rule in ("FAB002", "FAB004")
                or (f.rule in ("LOC003", "LOC004") and f.details.get("affects_inter_node"))
                or (f.cause == "locality" and (f.details.get("affects_inter_node") or "LOC004" in f.details.get("merged_rules", [])))]
    bound = [f for f in findings if f.rule == "FAB001" and f.lost_time_fraction is None and "exposed_inter_share" in f.details]
    placed = [f for f in loc.values() if SEVERITY_ORDER[f.severity] >= 2 and f.lost_time_fraction]
    if bound and placed and not specific:
        for g in placed:
            g.details["network_bound_share"] = bound[0].details["exposed_inter_share"]
        findings = [f for f in findings if all(f is not b for b in bound)]
    if specific:
        for f in findings:
            if f.rule == "FAB001":
                for g in specific:
                    if (g.lost_time_fraction or 0) < (f.lost_time_fraction or 0) and g.rule != "FAB002":
                        g.lost_time_fraction = f.lost_time_fraction
                        g.severity = f.severity
        findings = [f for f in findings if f.rule != "FAB001"]
    # 4. jitter only when nothing more specific explains the waiting
    explained = any((f.rule in _SYNC_CULPRIT_RULES or f.rule == "LOC001") and SEVERITY_ORDER[f.severity] >= 2 for f in findings)
    if explained:
        findings = [f for f in findings if f.rule != "SYN003"]
    # 5. input quality, ordering
    q = ctx.quality
    for f in findings:
        if f.cause != "input":
            f.confidence = round(min(f.confidence, 1.0) * (1.0 if q >= 1.0 else 1.0), 3)
    # severity first: a finding whose cost the traces cannot measure (no message sizes) but whose
    # cause is certain (the logs say NET/Socket) keeps its stated severity above a measured minor one
    # (an unmeasured one by the estimate it gives, e.g. FAB002's replay with transfers twice as fast)
    findings.sort(key=lambda f: (-SEVERITY_ORDER[f.severity], -(f.lost_time_fraction if f.lost_time_fraction is not None
                                                                  else f.details.get("lost_time_fraction_estimate") or 0.0),
                                 f.cause == "input", f.rule))
    return findings


def job_summary(ctx: Context) -> dict[str, Any]:
    b = ctx.d.breakdown
    if b.height:
        per_step = b.group_by("step").agg(pl.col("step_ns").max())["step_ns"] / 1e6
        med, p90 = float(per_step.median()), float(per_step.quantile(0.9, interpolation="linear"))
    else:
        med = p90 = None
    return {"id": ctx.job, "world_size": ctx.d.world_size, "hosts": ctx.d.hosts, "steps": ctx.n_steps,
            "step_time_ms": {"median": None if med is None else round(med, 3), "p90": None if p90 is None else round(p90, 3)}}


def postmortem(store: Store, job: str, *, only: list[str] | None = None) -> dict[str, Any]:
    """The findings document (contract in DESIGN.md) for ``job``."""
    ctx = Context.build(store, job)
    findings = run_rules(ctx, only=only)
    warnings = [str(m) for m in ctx.d.warnings["message"].to_list()[:200]] if ctx.d.warnings.height else []
    return {"stallscope_version": __version__, "job": job_summary(ctx), "findings": [f.as_dict() for f in findings],
            "warnings": warnings}


def findings_schema() -> dict[str, Any]:
    return json.loads(files("stallscope.rules").joinpath("findings.schema.json").read_text())


def _weight(f: Finding) -> tuple[float, bool]:
    """Which of two locality findings on one host keeps the merged finding: the time it measured,
    then whether it names a mechanism (every locality rule but LOC001, the host late together)."""
    return (f.lost_time_fraction or 0.0, f.rule != "LOC001")

