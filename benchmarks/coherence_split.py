"""Cost of splitting one anonymous NCCL stream (traces without process-group metadata) into
groups by end-time coherence (``stallscope.analysis.collectives._coherent_groups``).

The split compares every pair of the stream's ranks, so it grows with the square of the ranks;
this measures it on a synthetic stream: ``--ranks`` ranks on hosts of 8, ``--steps`` steps of
``--per-step`` collectives, every rank one group (each host's clock offset by 80 ms, 2 µs of end
noise), which is the case that tests every pair to the end. Run it with ``PYTHONPATH=<tree>`` to
time another commit's code (this script imports whatever ``stallscope`` comes first). Usage::

    python benchmarks/coherence_split.py --ranks 64 128 [--steps 10] [--per-step 60] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl


def stream(ranks: int, steps: int, per_step: int, seed: int = 0) -> pl.DataFrame:
    """One stream's collective rows: one group, every host's clock offset, µs of end noise."""
    rng = np.random.default_rng(seed)
    n = steps * per_step
    ends = np.cumsum(rng.uniform(1e6, 2e6, n))
    return pl.concat([
        pl.DataFrame({"instance_id": np.arange(n), "rank": r, "host": f"h{r // 8}", "step": np.repeat(np.arange(steps), per_step),
                      "end_ns": (ends + (r // 8) * 80e6 + rng.normal(0, 2e3, n)).astype(np.int64)})
        for r in range(ranks)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--per-step", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import stallscope
    from stallscope.analysis.collectives import COHERENT_END_NS, SAME_HOST_END_NS, _coherent_groups

    print(f"stallscope at {stallscope.__file__.rsplit('/', 2)[0]}")
    for r in a.ranks:
        grp = stream(r, a.steps, a.per_step)
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            groups = _coherent_groups(grp, COHERENT_END_NS, SAME_HOST_END_NS)
            times.append(time.perf_counter() - t0)
        print(f"{r:>5} ranks, {a.steps * a.per_step} positions: {min(times):.2f} s (best of {a.repeat}), {len(groups)} group(s)")


if __name__ == "__main__":
    main()
