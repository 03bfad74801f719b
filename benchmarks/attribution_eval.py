"""Attribution accuracy on generated bundles with ground truth.

    python -m stallscope.samples suite --count 220 --out /tmp/suite --workers 2
    python benchmarks/attribution_eval.py /tmp/suite [--workers 2] [--json out.json] [--without-logs]

Scoring (stated here so the numbers mean something):

* **predicted cause** = the cause of the first finding that is not about input quality and has a
  measured cost (severity low or higher: ≥ 1 % of the job); ``none`` when there is none. Low
  findings are claims too: a 2 % straggler is a straggler.
* **cause accuracy** = predicted cause == truth cause, over all bundles (healthy ones count:
  their truth is ``none``).
* **culprit accuracy**, over bundles whose cause was predicted right and whose truth names
  culprits: a job-wide truth (all ranks) needs a job-wide finding (≥ 90 % of the ranks); a host
  culprit needs the finding's hosts to equal the truth's hosts (when the bundle names no host and
  the finding's host is inferred, ``host-of-ranks-A-B``, its ranks must equal the truth's ranks);
  a rank culprit needs the finding's ranks to equal the truth's ranks.
* **false-positive rate** = healthy bundles (truth ``none``) with any finding ≥ medium.
* **ambiguous** (reported apart, never dropped from the numbers above): a fabric fault whose only
  evidence here is the traces (no NCCL log that shows it: run without logs, or the truth's
  ``evidence`` names none) and that leaves every host at least the inter-node bandwidth the
  generator gives its slowest healthy hosts of the same GPU
  (:func:`stallscope.samples.model.healthy_host_busbw_floor`): a healthy job of the suite moves
  bytes as slowly, so the traces alone cannot tell the fault from a thin fabric. The cause
  accuracy over the other bundles is printed beside.

``--without-logs`` re-runs every bundle with its NCCL logs removed (traces only), the other
half of the target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

SEVERE = ("critical", "high", "medium")
CLAIMS = ("critical", "high", "medium", "low")


def strip_logs(bundle: Path, dest: Path) -> Path:
    """A copy of the bundle with every NCCL log removed (traces only)."""
    from stallscope.ingest.discover import discover

    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        found, _ = discover([bundle], tmp)
        for f in found:
            if f.kind == "nccl_log":
                continue
            out = dest / f.label.replace("!", "/").lstrip("/")
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f.path, out)
    return dest


def evaluate_one(args: tuple[str, dict[str, Any], bool]) -> dict[str, Any]:
    root, entry, without_logs = args
    from stallscope.api import postmortem

    bundle = Path(root) / entry["bundle"]
    truth = json.loads((Path(root) / entry["truth"]).read_text())
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src = strip_logs(bundle, Path(tmp) / "b") if without_logs else bundle
        try:
            doc = postmortem(src, store=Path(tmp) / "store", workers=1)
        except Exception as exc:  # noqa: BLE001 - a crash is a wrong answer, reported as such
            return {"name": entry["name"], "scenario": entry["scenario"], "error": f"{type(exc).__name__}: {exc}"}
    secs = time.perf_counter() - t0
    main = next((f for f in doc["findings"] if f["severity"] in CLAIMS and f["cause"] != "input"), None)
    severe = [f for f in doc["findings"] if f["severity"] in SEVERE and f["cause"] != "input"]
    pred = main["cause"] if main else "none"
    tc = truth["cause"]
    world = doc["job"]["world_size"]
    culprit_ok = None
    if tc != "none" and pred == tc and main is not None:
        tr, th = sorted(truth.get("culprit_ranks") or []), sorted(truth.get("culprit_hosts") or [])
        jobwide = len(tr) >= world and world > 0
        if jobwide:
            culprit_ok = len(main["ranks"]) >= 0.9 * world or sorted(main["hosts"]) == sorted(doc["job"]["hosts"])
        elif tc in ("locality", "fabric") and th:
            culprit_ok = sorted(main["hosts"]) == th
            if not culprit_ok and main["hosts"] and all(h.startswith("host-of-ranks-") for h in main["hosts"]):
                # the bundle names no host (inferred from GPUs or clocks): the host's ranks must be the truth's
                culprit_ok = sorted(main["ranks"]) == tr
        else:
            culprit_ok = sorted(main["ranks"]) == tr
    return {"name": entry["name"], "scenario": entry["scenario"], "truth": tc, "pred": pred, "ok": pred == tc,
            "ambiguous": fabric_ambiguous(truth, without_logs),
            "culprit_ok": culprit_ok, "pred_ranks": main["ranks"] if main else [], "pred_hosts": main["hosts"] if main else [],
            "truth_ranks": truth.get("culprit_ranks"), "truth_hosts": truth.get("culprit_hosts"),
            "lost_pred": main["lost_time_fraction"] if main else 0.0, "lost_truth": truth.get("lost_time_fraction"),
            "rule": main["rule"] if main else None, "fp": tc == "none" and bool(severe), "seconds": round(secs, 2),
            "logs": entry.get("logs"), "parallelism": entry.get("parallelism"), "severity": entry.get("severity")}


def fabric_ambiguous(truth: dict[str, Any], without_logs: bool) -> bool:
    """A fabric fault that only the traces could show, leaving every host as fast as the
    slowest healthy hosts the generator draws for that GPU (see the module's scoring notes)."""
    from stallscope.samples.model import healthy_host_busbw_floor

    if truth.get("cause") != "fabric":
        return False
    if not without_logs and "nccl_log" in ((truth.get("evidence") or {}).get("cause") or []):
        return False
    job = truth.get("job") or {}
    per_host = ((truth.get("physics") or {}).get("links_gbs") or {}).get("inter_per_host") or {}
    if not per_host or not job.get("gpu") or not job.get("gpus_per_node"):
        return False
    return min(per_host.values()) >= healthy_host_busbw_floor(job["gpu"], int(job["gpus_per_node"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--without-logs", action="store_true")
    ap.add_argument("--only", help="comma-separated scenarios or bundle names")
    a = ap.parse_args()
    index = json.loads((a.suite / "suite.json").read_text())
    entries = index["bundles"]
    if a.only:
        keep = set(a.only.split(","))
        entries = [e for e in entries if e["scenario"] in keep or e["name"] in keep]
    jobs = [(str(a.suite), e, a.without_logs) for e in entries]
    import stallscope

    print(f"measuring the stallscope at {Path(stallscope.__file__).parent}", flush=True)
    t0 = time.perf_counter()
    if a.workers > 1:
        with ProcessPoolExecutor(a.workers) as pool:
            results = list(pool.map(evaluate_one, jobs))
    else:
        results = [evaluate_one(j) for j in jobs]
    wall = time.perf_counter() - t0
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by[r["scenario"]].append(r)
    print(f"{'scenario':<28} {'n':>4} {'cause':>7} {'culprit':>8}  wrong answers")
    for sc, rs in sorted(by.items()):
        n = len(rs)
        ok = sum(1 for r in rs if r.get("ok"))
        cul = [r["culprit_ok"] for r in rs if r.get("culprit_ok") is not None]
        wrong = [f"{r['name']}→{r.get('pred', 'ERR')}" + ("" if r.get("culprit_ok") in (None, True) else "(culprit)") for r in rs
                 if not r.get("ok") or r.get("culprit_ok") is False]
        print(f"{sc:<28} {n:>4} {ok / n:>7.0%} {(sum(cul) / len(cul)) if cul else float('nan'):>8.0%}  {', '.join(wrong[:6])}")
    n = len(results)
    cause_acc = sum(1 for r in results if r.get("ok")) / n
    cul = [r["culprit_ok"] for r in results if r.get("culprit_ok") is not None]
    healthy = [r for r in results if r.get("truth") == "none"]
    fp = sum(1 for r in healthy if r.get("fp")) / max(1, len(healthy))
    errors = [r for r in results if "error" in r]
    print(f"\n{n} bundles ({'traces only' if a.without_logs else 'as generated'}) in {wall:.0f} s: cause accuracy {cause_acc:.1%}, "
          f"culprit accuracy {sum(cul) / max(1, len(cul)):.1%} (of {len(cul)}), false positives on healthy {fp:.1%} "
          f"(of {len(healthy)}), errors {len(errors)}")
    amb = [r for r in results if r.get("ambiguous")]
    if amb:
        rest = [r for r in results if not r.get("ambiguous")]
        print(f"ambiguous: fabric faults only the traces show, every host as fast as a healthy one: {len(amb)}, "
              f"{sum(1 for r in amb if r.get('ok'))} right; cause accuracy on the other {len(rest)}: "
              f"{sum(1 for r in rest if r.get('ok')) / max(1, len(rest)):.1%}")
    for e in errors[:5]:
        print("  error:", e["name"], e["error"])
    if a.json:
        a.json.write_text(json.dumps({"cause_accuracy": cause_acc, "culprit_accuracy": sum(cul) / max(1, len(cul)),
                                      "false_positive_rate": fp, "n": n, "results": results}, indent=1))


if __name__ == "__main__":
    # the checkout this script belongs to, after whatever PYTHONPATH names (a worktree of the
    # commit to measure: ``PYTHONPATH=<tree> python benchmarks/attribution_eval.py`` measures <tree>)
    pythonpath = [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]
    sys.path.insert(1 + len(pythonpath), str(Path(__file__).resolve().parents[1]))
    main()
