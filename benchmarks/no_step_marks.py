"""A copy of a generated suite whose traces carry no ``ProfilerStep#N`` marks (profiled without ``prof.step()``).

    python benchmarks/no_step_marks.py /tmp/suite29 /tmp/nomarks29 --bundles 80
    python benchmarks/attribution_eval.py /tmp/nomarks29 --workers 2 [--without-logs]

A profile taken by wrapping a few iterations in ``torch.profiler.profile`` without a schedule or
``step()`` calls has no step marks; ingest then takes each step from the end of one
``Optimizer.step#…`` annotation to the end of the next (``ranks.step_source``). This copy removes
every mark from the first ``--bundles`` bundles of a suite with
:func:`stallscope.samples.markers.strip_step_marks`; NCCL logs are kept, traces cut by a killed job
stay as they are. Bundles are written as folders; ``suite.json`` goes beside them, so
``attribution_eval.py`` scores the copy against the original truth. Deterministic.
With ``--no-optimizer`` torch.optim's annotations go too (a loop that updates the weights by
hand): ingest then finds the steps in the loop of each rank's collectives
(:func:`stallscope.ingest.steps.steps_from_collectives`), or takes the whole profile as one step.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from stallscope.samples.bundle import read_files, write_altered
from stallscope.samples.markers import strip_step_marks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--bundles", type=int, default=80)
    ap.add_argument("--no-optimizer", action="store_true",
                    help="remove torch.optim's annotations too (a hand-written update loop): steps from the collectives' loop")
    a = ap.parse_args()
    index = json.loads((a.suite / "suite.json").read_text())
    kept = []
    for e in index["bundles"][: a.bundles]:
        files, changed = strip_step_marks(read_files(a.suite / e["bundle"]), optimizer=a.no_optimizer)
        if not changed:
            continue
        kept.append(write_altered(a.suite, e, files, a.out))
    (a.out / "suite.json").write_text(json.dumps(dict(index, bundles=kept, count=len(kept))))
    print(f"{len(kept)} bundles -> {a.out}")


if __name__ == "__main__":
    main()
