"""Benchmark: what ``stallscope.collectors.profile`` costs a training loop.

A small CPU training loop (an MLP, SGD, fixed data) runs the same number of steps without a
profiler (``off``) and inside ``stallscope.collectors.profile`` with its defaults (``profile``:
schedule wait=1, warmup=1, active=5, record_shapes, CPU activity, gzip trace written into a
bundle); optionally also with ``with_stack=True`` (``stack``). Each trial is a fresh process;
trials of the variants are interleaved so that the load of a shared machine hits them alike.

Per trial, every step is timed around the step body and ``prof.step()`` on two clocks: **CPU
time** of the process (``process_time``: the work the profiler adds, insensitive to other jobs
taking the cores of a shared machine) and **wall time** (``perf_counter``: what a dedicated node
would see, noisy on a shared one). Reported, as ratios of medians over trials against ``off`` at
the same step positions:

* ``loop``     — the whole loop of ``--steps`` steps (what a job that profiles once pays in total
  over that many steps; a long job pays the same fixed cost over more steps);
* ``recorded`` — median step time over the 5 recorded steps (the slowdown while the profiler
  records: the per-step price when profiling stays on);
* ``idle``     — median step time over the steps after the window (the profiler is done);
* ``export``   — the one step that ends the window and writes the trace (ms above ``off``);
* ``start``/``stop`` — entering the profiler (rank record, Kineto set-up) and leaving it (ms).

Usage::

    PYTHONPATH=. python benchmarks/collector_overhead.py [--trials 7] [--steps 40] [--stack]

Prints a Markdown table and one JSON line. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAIT, WARMUP, ACTIVE = 1, 1, 5


def trial(variant: str, steps: int, width: int, bundle: str) -> dict[str, object]:
    """One fresh-process trial: per-step seconds of ``steps`` steps."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                                torch.nn.ReLU(), torch.nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, width), torch.randint(0, 10, (64,))

    def body() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(3):  # allocator and kernels warm, as in a job that has been running
        body()
    times: list[float] = []
    cpu: list[float] = []
    enter_s = exit_s = 0.0
    t_run, c_run = time.perf_counter(), time.process_time()
    if variant == "off":
        for _ in range(steps):
            t0, c0 = time.perf_counter(), time.process_time()
            body()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    else:
        from stallscope.collectors import profile

        t0 = time.perf_counter()
        prof = profile(bundle, wait=WAIT, warmup=WARMUP, active=ACTIVE, with_stack=variant == "stack", topology=False).start()
        enter_s = time.perf_counter() - t0
        for _ in range(steps):
            t0, c0 = time.perf_counter(), time.process_time()
            body()
            prof.step()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        t0 = time.perf_counter()
        prof.stop()
        exit_s = time.perf_counter() - t0
    return {"variant": variant, "times": times, "cpu": cpu, "run_s": time.perf_counter() - t_run,
            "run_cpu_s": time.process_time() - c_run, "enter_s": enter_s, "exit_s": exit_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--stack", action="store_true", help="also measure with_stack=True")
    ap.add_argument("--trial", choices=("off", "profile", "stack"), help=argparse.SUPPRESS)
    ap.add_argument("--bundle", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.trial:
        print(json.dumps(trial(a.trial, a.steps, a.width, a.bundle)))
        return 0
    variants = ["off", "profile"] + (["stack"] if a.stack else [])
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        for t in range(a.trials):
            order = variants if t % 2 == 0 else variants[::-1]
            for v in order:
                out = subprocess.run([sys.executable, __file__, "--trial", v, "--steps", str(a.steps), "--width", str(a.width),
                                      "--bundle", f"{tmp}/b{t}{v}"], env=env, capture_output=True, text=True, check=True)
                runs[v].append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, last = WAIT + WARMUP, WAIT + WARMUP + ACTIVE  # recorded steps [first, last); last-1 exports

    def med(v: str, key: str, sl: slice) -> float:
        return statistics.median(statistics.median(r[key][sl]) for r in runs[v])

    def at(v: str, key: str, i: int) -> float:
        return statistics.median(r[key][i] for r in runs[v])

    def total(v: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[v])

    rows = []
    for v in variants:
        row: dict[str, object] = {"variant": v}
        for key, clock in (("cpu", "cpu"), ("times", "wall")):
            rec, after = med(v, key, slice(first, last - 1)), med(v, key, slice(last, None))
            row[f"{clock}_recorded_ms"] = 1e3 * rec
            row[f"{clock}_recorded_ratio"] = rec / med("off", key, slice(first, last - 1))
            row[f"{clock}_after_ms"] = 1e3 * after
            row[f"{clock}_after_ratio"] = after / med("off", key, slice(last, None))
            row[f"{clock}_export_extra_ms"] = 1e3 * (at(v, key, last - 1) - at("off", key, last - 1))
        row["cpu_loop_ratio"] = total(v, "run_cpu_s") / total("off", "run_cpu_s")
        row["wall_loop_ratio"] = total(v, "run_s") / total("off", "run_s")
        row["start_ms"] = 1e3 * total(v, "enter_s")
        row["stop_ms"] = 1e3 * total(v, "exit_s")
        rows.append(row)
    print(f"{a.trials} trials x {a.steps} steps, MLP width {a.width}, batch 64, torch threads 1; "
          f"window wait={WAIT} warmup={WARMUP} active={ACTIVE}; medians over trials\n")
    print("| variant | clock | recorded step (ms) | recorded ratio | step after window (ms) | after ratio "
          "| export step (+ms) | loop of all steps, ratio | start / stop (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        for clock in ("cpu", "wall"):
            print(f"| {r['variant']} | {clock} | {r[f'{clock}_recorded_ms']:.2f} | {r[f'{clock}_recorded_ratio']:.3f} | "
                  f"{r[f'{clock}_after_ms']:.2f} | {r[f'{clock}_after_ratio']:.3f} | {r[f'{clock}_export_extra_ms']:.1f} | "
                  f"{r[f'{clock}_loop_ratio']:.3f} | {r['start_ms']:.1f} / {r['stop_ms']:.1f} |")
    print(json.dumps({"trials": a.trials, "steps": a.steps, "width": a.width, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
