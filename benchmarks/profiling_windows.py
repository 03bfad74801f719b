"""A copy of a generated suite whose traces come in profiling windows, as ``schedule(repeat=2)`` writes them.

    python benchmarks/profiling_windows.py /tmp/suite27 /tmp/win27 --bundles 80
    python benchmarks/attribution_eval.py /tmp/win27 --workers 2 [--without-logs]

``torch.profiler.schedule(wait, warmup, active, repeat)`` records ``active`` steps, skips some,
records again, and ``tensorboard_trace_handler`` writes one file per window and rank: a bundle
then holds several files of each rank, with steps missing between them. This copy splits every
complete trace of each bundle into two windows with :func:`stallscope.samples.windows.split_windows`
(the first ``--first`` steps; ``--skip`` steps recorded nowhere; the rest). NCCL logs are kept;
traces cut by a killed job stay whole.

Walks the suite in order and keeps the first ``--bundles`` bundles with at least one trace of
``--first + --skip + 1`` steps, except those whose truth delays only steps that fall in the gap (an
intermittent straggler seen nowhere else). Bundles are written as folders. ``suite.json`` (each
entry with ``skipped_steps``, step indices from 0) goes beside them, so ``attribution_eval.py``
scores the copy against the original truth. Deterministic.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from stallscope.samples.bundle import read_files, write_altered
from stallscope.samples.windows import split_windows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--bundles", type=int, default=80)
    ap.add_argument("--first", type=int, default=2, help="steps in the first window")
    ap.add_argument("--skip", type=int, default=1, help="steps recorded in no file between the windows")
    a = ap.parse_args()
    index = json.loads((a.suite / "suite.json").read_text())
    gap = set(range(a.first, a.first + a.skip))
    kept = []
    for e in index["bundles"]:
        if len(kept) >= a.bundles:
            break
        truth = json.loads((a.suite / e["truth"]).read_text())
        # a fault that delays some steps only (intermittent straggler, host stall) must show outside the gap
        hit = [{i for d in fd["delay_ns"].values() for i, x in enumerate(d) if x}
               for fd in truth.get("faults", []) if isinstance(fd.get("delay_ns"), dict)]
        if any(h and h <= gap for h in hit):
            continue
        files, split = split_windows(read_files(a.suite / e["bundle"]), a.first, a.skip)
        if not split:
            continue
        kept.append(dict(write_altered(a.suite, e, files, a.out), skipped_steps=sorted(gap)))
    (a.out / "suite.json").write_text(json.dumps(dict(index, bundles=kept, count=len(kept))))
    print(f"{len(kept)} bundles -> {a.out}")


if __name__ == "__main__":
    main()
