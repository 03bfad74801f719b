"""Ingest speed and memory: stallscope vs HolisticTraceAnalysis (HTA) vs the physical floor.

Measured side by side, in one run, on the same files, on this machine:

* **HTA**: ``TraceAnalysis(trace_dir=...)`` (the load step; HTA 0.5.0, pandas<3), in a fresh
  process, measured over its whole process tree (HTA parses ranks in a multiprocessing pool).
* **stallscope**: ``stallscope ingest DIR --store TMP --quiet`` in a fresh process (default
  workers; ``--no-analysis`` so the same work is compared: parse + normalize + Parquet write),
  measured the same way. ``--with-analysis`` adds a row with the analysis stage included.
* **floor**: the cost of just decompressing and parsing the same bytes with the fastest parsers
  available (ISA-L inflate, msgspec with a typed event struct and raw ``args``), in-process.

Sets are built by replicating ``../shared/traces/hta/trace_diff/control/control.json.gz``
(see ``replicate.py``). Usage::

    python benchmarks/ingest_vs_hta.py --ranks 8 32 [--skip-hta] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proctree import run  # noqa: E402
from replicate import replicate  # noqa: E402

HTA_SCRIPT = """
import sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
print("ranks", len(a.t.traces))
"""


import msgspec  # noqa: E402


class _FloorEvent(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str = ""
    pid: int | str = ""
    tid: int | str = ""
    ts: float = 0.0
    dur: float = 0.0
    args: msgspec.Raw = msgspec.Raw(b"")


class _FloorTop(msgspec.Struct):
    traceEvents: list[_FloorEvent]


def floor_cpu(paths: list[Path]) -> tuple[float, int]:
    """CPU seconds to inflate + msgspec-decode every file (typed events, raw args)."""

    try:
        from isal import isal_zlib as z
    except ImportError:  # pragma: no cover
        import zlib as z

    # the allocator settings of ingest's parsing processes (the same environment for both), and
    # more: inflating a whole file grows one output buffer past 64 MiB, which glibc would mmap
    # and page-fault afresh per file; a 256 MiB threshold serves it from the heap (-20% CPU here)
    import ctypes

    from stallscope.ingest.allocators import tune_for_parsing

    tune_for_parsing()
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 256 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass
    dec = msgspec.json.Decoder(_FloorTop)
    total = 0
    t0 = time.process_time()
    for p in paths:
        data = z.decompress(p.read_bytes(), 31)
        total += len(data)
        dec.decode(data)
        del data
    return time.process_time() - t0, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "stallscope-bench")
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--with-analysis", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    results = []
    for n in a.ranks:
        d = a.data / f"r{n}"
        paths = replicate(n, d)
        json_mb = 0
        row: dict[str, object] = {"ranks": n}
        fcpu, json_bytes = floor_cpu(paths)
        row.update(json_mb=round(json_bytes / 1e6, 1), floor_cpu_s=round(fcpu, 2))
        store = Path(tempfile.mkdtemp(prefix="ss-bench-"))
        try:
            u = run([sys.executable, "-m", "stallscope", "ingest", str(d), "--store", str(store), "--quiet", "--no-analysis"])
            if u.returncode:
                raise SystemExit(u.output)
            row.update(ss_cpu_s=round(u.cpu_s, 2), ss_wall_s=round(u.wall_s, 2), ss_peak_rss_mb=round(u.peak_rss_mb),
                       ss_peak_pss_mb=round(u.peak_pss_mb))
            if a.with_analysis:
                shutil.rmtree(store)
                store.mkdir()
                u2 = run([sys.executable, "-m", "stallscope", "ingest", str(d), "--store", str(store), "--quiet"])
                row.update(ss_full_cpu_s=round(u2.cpu_s, 2), ss_full_peak_rss_mb=round(u2.peak_rss_mb))
        finally:
            shutil.rmtree(store, ignore_errors=True)
        if not a.skip_hta:
            with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
                f.write(HTA_SCRIPT)
            env = dict(os.environ)
            h = run([sys.executable, f.name, str(d)], env=env)
            os.unlink(f.name)
            if h.returncode:
                raise SystemExit(h.output[-2000:])
            row.update(hta_cpu_s=round(h.cpu_s, 2), hta_wall_s=round(h.wall_s, 2), hta_peak_rss_mb=round(h.peak_rss_mb),
                       hta_peak_pss_mb=round(h.peak_pss_mb))
            row["cpu_ratio_hta_over_ss"] = round(h.cpu_s / u.cpu_s, 1)
            row["mem_ratio_ss_over_hta_rss"] = round(u.peak_rss_mb / h.peak_rss_mb, 2)
            row["mem_ratio_ss_over_hta_pss"] = round(u.peak_pss_mb / h.peak_pss_mb, 2)
        row["ss_over_floor"] = round(u.cpu_s / fcpu, 2)
        results.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    print()
    print("| ranks | JSON MB | floor CPU-s | stallscope CPU-s | HTA CPU-s | HTA/stallscope CPU | stallscope/floor | stallscope peak RSS (PSS) MB | HTA peak RSS (PSS) MB | stallscope/HTA peak |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['ranks']} | {r['json_mb']} | {r['floor_cpu_s']} | {r['ss_cpu_s']} | {r.get('hta_cpu_s', '-')} | "
              f"{r.get('cpu_ratio_hta_over_ss', '-')}x | {r['ss_over_floor']}x | {r['ss_peak_rss_mb']} ({r['ss_peak_pss_mb']}) | "
              f"{r.get('hta_peak_rss_mb', '-')} ({r.get('hta_peak_pss_mb', '-')}) | {r.get('mem_ratio_ss_over_hta_rss', '-')} ({r.get('mem_ratio_ss_over_hta_pss', '-')}) |")


if __name__ == "__main__":
    main()
