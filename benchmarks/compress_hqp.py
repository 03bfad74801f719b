"""Benchmark: HQP on the built-in ResNet-like digits example, checked against the issue's targets.

Runs exactly what ``stallscope compress evaluate --example resnet-digits --preset full`` runs,
prints the candidate table (Markdown), then checks the targets of issue 8 and prints one line
per target with the measured numbers:

* the recommended candidate has >= 3.5x lower batch-1 latency than dense fp32 in the same
  runtime (ONNX Runtime, single thread, unprofiled pass);
* its serialized size is >= 80% smaller;
* its test-accuracy drop is <= 1.5 percentage points;
* at each budget, HQP beats prune-only fp32 and quant-only int8 on latency (b1 and b32), or the
  report says where it does not;
* the CI-sized example (``--preset ci``) finishes in under 3 minutes (``--with-ci``).

Usage::

    PYTHONPATH=. python benchmarks/compress_hqp.py [--example resnet-digits] [--with-ci] [--store DIR]

Exit status 0 when every target is met, 1 otherwise. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path


def run(example: str, preset: str, store: Path, *, quiet: bool) -> tuple[object, float]:
    import torch

    from stallscope.compress.evaluate import EvaluateConfig, evaluate
    from stallscope.compress.examples import load_example

    start = time.perf_counter()
    ex = load_example(example, preset=preset)
    config = dataclasses.replace(EvaluateConfig(train_epochs=ex.train_epochs), **ex.config)
    torch.manual_seed(config.seed)
    say = (lambda _m: None) if quiet else (lambda m: print(f"[{time.perf_counter() - start:6.1f}s] {m}", file=sys.stderr))
    result = evaluate(ex.build(), ex.splits, store=store, config=config, name=f"{example}-{preset}", progress=say)
    return result, time.perf_counter() - start


def check(result: object, elapsed: float) -> list[tuple[bool, str]]:
    from stallscope.compress.report import to_dict

    doc = to_dict(result)  # type: ignore[arg-type]
    base = doc["baseline"]
    rec = next(c for c in doc["candidates"] if c["recommended"])
    checks = [
        (rec["speedup"]["b1"] >= 3.5,
         f"b1 latency {rec['name']}: {rec['latency_ms']['b1']:.3f} ms vs dense fp32 {base['latency_ms']['b1']:.3f} ms "
         f"= {rec['speedup']['b1']:.2f}x (target >= 3.5x)"),
        (rec["size_reduction"] >= 0.80,
         f"size {rec['name']}: {rec['size_bytes']:,} B vs {base['size_bytes']:,} B = "
         f"{100 * rec['size_reduction']:.1f}% smaller (target >= 80%)"),
        (rec["accuracy_drop_pp"] <= 1.5,
         f"test accuracy {rec['name']}: {100 * rec['accuracy']:.2f}% vs {100 * base['accuracy']:.2f}% = "
         f"{rec['accuracy_drop_pp']:+.2f}pp drop (target <= 1.5pp)"),
    ]
    by_name = {c["name"]: c for c in doc["candidates"]}
    for hqp in (c for c in doc["candidates"] if c["kind"] == "hqp"):
        tag = hqp["name"].split("@", 1)[1]
        for rival_name in (f"prune-fp32@{tag}", "quant-int8"):
            rival = by_name.get(rival_name)
            if rival is None:
                continue
            for b in ("b1", "b32"):
                wins = hqp["latency_ms"][b] < rival["latency_ms"][b]
                said = any(rival_name in n and f"batch {b[1:]}" in n for n in doc["notes"])
                checks.append((wins or said,
                               f"{hqp['name']} vs {rival_name} at {b}: {hqp['latency_ms'][b]:.3f} vs "
                               f"{rival['latency_ms'][b]:.3f} ms ({'faster' if wins else 'NOT faster, noted in report' if said else 'NOT faster, not noted'})"))
    checks.append((True, f"wall time of this evaluation: {elapsed:.0f} s"))
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="resnet-digits", choices=("resnet-digits", "mobilenet-digits"))
    parser.add_argument("--preset", default="full", choices=("ci", "full"))
    parser.add_argument("--with-ci", action="store_true", help="also time the CI-sized example (target < 180 s)")
    parser.add_argument("--store", type=Path, default=None, help="store dir (default: a temporary directory)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()

    from stallscope.compress.report import to_markdown

    with tempfile.TemporaryDirectory(prefix="stallscope-bench-") as tmp:
        store = args.store or Path(tmp)
        result, elapsed = run(args.example, args.preset, store, quiet=args.quiet)
        print(to_markdown(result))  # type: ignore[arg-type]
        checks = check(result, elapsed)
        if args.with_ci:
            _, ci_elapsed = run(args.example, "ci", store, quiet=True)
            checks.append((ci_elapsed < 180, f"CI-sized example ({args.example}, --preset ci): {ci_elapsed:.0f} s (target < 180 s)"))
    print("## Targets\n")
    for ok, line in checks:
        print(f"- {'PASS' if ok else 'FAIL'}: {line}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
