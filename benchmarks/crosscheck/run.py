"""Attribution accuracy on bundles from five independent simulators (see README.md).

    python benchmarks/crosscheck/run.py [--only NAME,...] [--json OUT] [--keep DIR]

Writes every bundle of ``specs.SPECS`` (186: 52 from ``ddp_sim``, 44 from ``pipeline_sim``, 30 from
``fabric_sim`` (all with NCCL debug logs), 30 from ``moe_sim`` and 30 from ``noisy_sim`` (15 with NCCL
debug logs)) into a temporary directory, one at a time, runs ``stallscope.api.postmortem(bundle, store=<fresh dir>,
workers=1)`` on it and scores the answer the way ``benchmarks/attribution_eval.py`` does:

* **predicted cause** = the cause of the first finding that is not about input quality and has
  severity low or higher; ``none`` when there is none.
* **cause accuracy** = predicted cause == truth cause, over all bundles (healthy ones count).
* **culprit accuracy**, over bundles whose cause was predicted right and whose truth names
  culprits: a locality or fabric truth with hosts needs the finding's hosts to equal the truth's
  hosts (for a bundle that names no host, ``host-of-ranks-A-B``, the finding's ranks must equal
  the truth's ranks); any other truth needs the finding's ranks to equal the truth's ranks.
  Fabric and job-wide jitter truths name no culprit and are not scored here.
* **false positive** = a healthy bundle (truth ``none``) with any non-input finding >= medium.

One line per bundle: ``OK``/``BAD``, the truth, the answer, the deciding finding's rule, severity
and lost fraction against the true lost fraction (pipeline_sim and fabric_sim; ``-`` where unknown).  A line
is ``BAD`` when the cause is wrong, the culprit is wrong, or it is a false positive.  Exits 0
whatever the score: this is a measurement, not a test.  ``--keep DIR`` leaves the bundles (and a
``<name>.truth.json`` each) in DIR.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import SPECS, Spec  # noqa: E402

SEVERE = ("critical", "high", "medium")
CLAIMS = ("critical", "high", "medium", "low")


def fmt_ranks(ranks: list[int], limit: int = 4) -> str:
    """``[16, 17, ..., 23]`` -> ``16-23``; long scattered lists are cut."""
    rs = sorted(ranks)
    if not rs:
        return ""
    runs: list[str] = []
    start = prev = rs[0]
    for r in rs[1:] + [None]:  # type: ignore[list-item]
        if r is not None and r == prev + 1:
            prev = r
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    text = ",".join(runs[:limit]) + (",..." if len(runs) > limit else "")
    return f"r{text}"


def describe(cause: str, ranks: list[int], hosts: list[str]) -> str:
    if cause == "none":
        return "none"
    if cause in ("locality", "fabric") and hosts:
        return f"{cause} {','.join(hosts[:2])}{',...' if len(hosts) > 2 else ''}"
    who = fmt_ranks(ranks)
    return f"{cause} {who}" if who else cause


def score(spec: Spec, doc: dict[str, Any]) -> dict[str, Any]:
    findings = doc["findings"]
    main = next((f for f in findings if f["severity"] in CLAIMS and f["cause"] != "input"), None)
    severe = [f for f in findings if f["severity"] in SEVERE and f["cause"] != "input"]
    pred = main["cause"] if main else "none"
    tc = spec.cause
    tr, th = sorted(spec.ranks), sorted(spec.host_names())
    culprit_ok = None
    if tc != "none" and pred == tc and main is not None:
        if tc in ("locality", "fabric") and th:
            culprit_ok = sorted(main["hosts"]) == th
            if not culprit_ok and main["hosts"] and all(h.startswith("host-of-ranks-") for h in main["hosts"]):
                culprit_ok = sorted(main["ranks"]) == tr
        elif tr:
            culprit_ok = sorted(main["ranks"]) == tr
    fp = tc == "none" and bool(severe)
    return {"pred": pred, "ok": pred == tc, "culprit_ok": culprit_ok, "fp": fp,
            "rule": main["rule"] if main else None, "severity": main["severity"] if main else None,
            "lost_pred": main["lost_time_fraction"] if main else None,
            "pred_ranks": main["ranks"] if main else [], "pred_hosts": main["hosts"] if main else [],
            "findings": [(f["rule"], f["cause"], f["severity"]) for f in findings],
            "world_size": doc.get("job", {}).get("world_size")}


def run_one(spec: Spec, work: Path, keep: Path | None) -> dict[str, Any]:
    bundle = (keep or work) / spec.name
    res: dict[str, Any] = {"name": spec.name, "generator": spec.generator, "truth": spec.cause,
                           "truth_ranks": spec.ranks, "truth_hosts": spec.host_names(), "lost_truth": spec.lost}
    t0 = time.perf_counter()
    info = spec.write(bundle)
    res["gen_seconds"] = round(time.perf_counter() - t0, 2)
    if info.get("lost_frac") is not None:
        res["lost_truth"] = info["lost_frac"]
        if spec.lost is not None and abs(info["lost_frac"] - spec.lost) > 5e-4:
            res["drift"] = f"lost {info['lost_frac']:.4f}, spec says {spec.lost:.4f}"
    if keep is not None:
        (keep / f"{spec.name}.truth.json").write_text(json.dumps(
            {"cause": spec.cause, "ranks": spec.ranks, "hosts": spec.hosts, "host_names": spec.host_names(),
             "lost_frac": res["lost_truth"], "generator": spec.generator, "kwargs": spec.kwargs, "note": spec.note}))
    from stallscope.api import postmortem

    t0 = time.perf_counter()
    store = Path(tempfile.mkdtemp(prefix="store-", dir=work))
    try:
        doc = postmortem(bundle, store=store, workers=1)
        res.update(score(spec, doc))
    except Exception as exc:  # noqa: BLE001 - a crash is a wrong answer, reported as such
        res.update({"error": f"{type(exc).__name__}: {exc}", "pred": "ERROR", "ok": False, "culprit_ok": None,
                    "fp": False})
    finally:
        shutil.rmtree(store, ignore_errors=True)
        if keep is None:
            shutil.rmtree(bundle, ignore_errors=True)
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def line(r: dict[str, Any]) -> str:
    good = r["ok"] and r["culprit_ok"] is not False and not r["fp"]
    truth = describe(r["truth"], r["truth_ranks"], r["truth_hosts"])
    if "error" in r:
        answer, detail = "ERROR", r["error"][:80]
    else:
        answer = describe(r["pred"], r["pred_ranks"], r["pred_hosts"])
        if r["culprit_ok"] is False:
            answer += " (culprit)"
        if r["fp"]:
            answer += " (false positive)"
        lt = "-" if r["lost_truth"] is None else f"{r['lost_truth']:.3f}"
        if r["rule"]:
            lp = "-" if r["lost_pred"] is None else f"{r['lost_pred']:.3f}"
            detail = f"{r['rule']}/{r['severity']} lost {lp} vs {lt}"
        else:
            detail = f"no claim, true lost {lt}"
        inputs = sorted({rule for rule, cause, _ in r["findings"] if cause == "input"})
        if inputs:
            detail += f"  [input: {','.join(inputs)}]"
    drift = f"  DRIFT: {r['drift']}" if r.get("drift") else ""
    return f"{'OK ' if good else 'BAD'} {r['name']:<8} truth {truth:<28} answer {answer:<34} {detail}{drift}"


def summary(results: list[dict[str, Any]], label: str) -> str:
    n = len(results)
    cause = sum(1 for r in results if r["ok"])
    cul = [r["culprit_ok"] for r in results if r.get("culprit_ok") is not None]
    healthy = [r for r in results if r["truth"] == "none"]
    fps = sum(1 for r in healthy if r["fp"])
    errors = sum(1 for r in results if "error" in r)
    cul_pct = f" ({sum(cul) / len(cul):.0%})" if cul else ""
    return (f"{label}: {n} bundles, cause accuracy {cause}/{n} ({cause / max(1, n):.0%}), culprit accuracy "
            f"{sum(cul)}/{len(cul)}{cul_pct}, false positives {fps}/{len(healthy)} healthy, "
            f"errors {errors}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated bundle names (see specs.py)")
    ap.add_argument("--json", type=Path, help="write every result and the summary here")
    ap.add_argument("--keep", type=Path, help="write the bundles here and keep them")
    a = ap.parse_args()
    specs = SPECS
    if a.only:
        want = [n.strip() for n in a.only.split(",") if n.strip()]
        known = {s.name for s in SPECS}
        unknown = [n for n in want if n not in known]
        if unknown:
            raise SystemExit(f"unknown bundle(s): {', '.join(unknown)}")
        specs = [s for s in SPECS if s.name in want]
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="stallscope-crosscheck-") as tmp:
        for spec in specs:
            r = run_one(spec, Path(tmp), a.keep)
            results.append(r)
            print(line(r), flush=True)
    wall = time.perf_counter() - t0
    print()
    for gen in ("ddp", "pipeline", "fabric", "moe", "noisy"):
        part = [r for r in results if r["generator"] == gen]
        if part and len(part) < len(results):
            print(summary(part, f"{gen + '_sim':<13}"))
    print(summary(results, f"{'all':<13}") + f", {wall:.0f} s")
    drift = [r["name"] for r in results if r.get("drift")]
    if drift:
        print(f"lost fraction drifted from specs.py on: {', '.join(drift)}")
    if a.json:
        a.json.write_text(json.dumps({"summary": summary(results, "all"), "seconds": round(wall, 1),
                                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
