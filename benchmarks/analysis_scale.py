"""Cross-rank analysis and post-mortem at scale: stallscope vs HolisticTraceAnalysis (HTA).

Measured side by side, in one run, on the same generated job (``python -m stallscope.samples
large --ranks N``: real-format Kineto traces, full kernel detail up to 64 ranks, lean beyond),
each in a fresh process over its whole process tree (``proctree.py``), on this machine:

* **HTA**: ``TraceAnalysis(trace_dir=...)`` then ``get_temporal_breakdown()`` and
  ``get_comm_comp_overlap()`` — HTA's closest equivalent of stallscope's cross-rank layer
  (HTA does not align clocks across hosts, match collectives or split waiting from transfer).
* **stallscope ingest**: ``stallscope ingest DIR --no-analysis`` (parse + normalize + Parquet).
* **stallscope ingest + analysis**: ``stallscope ingest DIR`` (adds clock alignment,
  collective matching, wait/transfer, the stall breakdown of every rank × step, in DuckDB).
  The analysis cost is the difference of the two rows.
* **stallscope postmortem**: ``stallscope postmortem DIR --format json`` on a fresh store:
  ingest + analysis + clustering + rules + what-if replay, i.e. the whole answer.

The ratio column is HTA's wall time over the row's. Usage::

    python benchmarks/analysis_scale.py --ranks 64 256 [--data /tmp/scale] [--skip-hta] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proctree import Usage, run  # noqa: E402

HTA_SCRIPT = """
import sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
tb = a.get_temporal_breakdown(visualize=False)
ov = a.get_comm_comp_overlap(visualize=False)
print("ranks", len(a.t.traces), "breakdown rows", len(tb), "overlap rows", len(ov))
"""


def _job(data: Path, ranks: int) -> Path:
    out = data / f"large-{ranks}"
    if not (out / "truth.json").exists() and not any(out.glob("**/*.json*")):
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "stallscope.samples", "large", "--ranks", str(ranks), "--out", str(out)],
                       check=True)
    return out


def _traces_only(job: Path, into: Path) -> Path:
    """HTA reads a directory of traces only: link the trace files (not NCCL logs or truth)."""
    into.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(sorted(job.rglob("*.json*"))):
        if f.name not in ("truth.json", "manifest.json"):
            (into / f"{i:05d}-{f.name}").symlink_to(f)
    return into


def _row(name: str, u: Usage, anchor: Usage | None) -> dict[str, object]:
    ratio = anchor.wall_s / u.wall_s if anchor and anchor.returncode == 0 and u.wall_s else None
    return {"tool": name, "wall_s": round(u.wall_s, 2), "cpu_s": round(u.cpu_s, 2),
            "peak_rss_mb": round(u.peak_rss_mb), "peak_pss_mb": round(u.peak_pss_mb),
            "ok": u.returncode == 0, "hta_over_this": round(ratio, 2) if ratio else None}


def measure(ranks: int, data: Path, skip_hta: bool, hta_timeout: int) -> list[dict[str, object]]:
    job = _job(data, ranks)
    size_mb = sum(f.stat().st_size for f in job.rglob("*") if f.is_file()) / 2**20
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        exe = [sys.executable, "-m", "stallscope"]
        hta = None
        if not skip_hta:
            traces = _traces_only(job, t / "hta")
            hta = run(["timeout", str(hta_timeout), sys.executable, "-c", HTA_SCRIPT, str(traces)])
            if hta.returncode != 0:
                print(f"HTA failed or timed out ({hta.returncode}): {hta.output[-400:]}", file=sys.stderr)
        ing = run(exe + ["ingest", str(job), "--store", str(t / "s1"), "--no-analysis", "--quiet"])
        ana = run(exe + ["ingest", str(job), "--store", str(t / "s2"), "--quiet"])
        pm = run(exe + ["postmortem", str(job), "--store", str(t / "s3"), "--format", "json"])
        for u, what in ((ing, "ingest"), (ana, "ingest+analysis"), (pm, "postmortem")):
            if u.returncode not in (0, 1):  # postmortem exits 1 only with --fail-on
                raise SystemExit(f"stallscope {what} failed: {u.output[-600:]}")
        rows = []
        if hta is not None:
            rows.append(_row("HTA load + temporal breakdown + overlap", hta, None))
        rows += [_row("stallscope ingest (no analysis)", ing, hta),
                 _row("stallscope ingest + cross-rank analysis", ana, hta),
                 _row("stallscope postmortem (ingest → findings)", pm, hta)]
        for r in rows:
            r.update(ranks=ranks, bundle_mb=round(size_mb, 1))
        rows.append({"tool": "analysis alone (difference)", "ranks": ranks, "bundle_mb": round(size_mb, 1),
                     "wall_s": round(ana.wall_s - ing.wall_s, 2), "cpu_s": round(ana.cpu_s - ing.cpu_s, 2)})
        return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "stallscope-scale")
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--hta-timeout", type=int, default=1800)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--clean", action="store_true", help="delete the generated jobs afterwards")
    a = ap.parse_args()
    rows: list[dict[str, object]] = []
    for n in a.ranks:
        rows += measure(n, a.data, a.skip_hta, a.hta_timeout)
    cols = ["ranks", "bundle_mb", "tool", "wall_s", "cpu_s", "peak_rss_mb", "hta_over_this"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in cols) + " |")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2))
    if a.clean:
        shutil.rmtree(a.data, ignore_errors=True)


if __name__ == "__main__":
    main()
