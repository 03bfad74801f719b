"""NCCL log parsing speed: MB/s of log text per core, on large logs built from the real excerpts.

The logs are synthetic in size only: every line is a real line from ``../shared/logs/nccl/``
(33 excerpts of NCCL 2.5-2.24 logs, watchdog logs and nccl-tests output), with host names, pids,
tids, channels and opCounts varied so that rows differ. The mixes model the logs that get big:

* ``coll``   - ``NCCL_DEBUG_SUBSYS=COLL``: one line per operation (99 %), with some init lines
* ``init``   - ``NCCL_DEBUG=INFO`` init of a large job: per rank, 30 setup lines (net, env, comm,
               trees, rings, affinity, timings, ...) and 150 connection lines (a rank prints one
               connection line per channel and peer: 16-32 channels x ring/tree/p2p peers); the
               lines of one rank share one host and pid shift (real lines of 33 files still bring
               their own pids and tids), as they do in a real log
* ``stdout`` - a training job's captured stdout: 95 % program output, 5 % NCCL init lines
* ``corpus`` - worst case: lines drawn uniformly from all real lines, so that rare kinds (topology
               dumps, warnings, watchdog, plugin and env lines) are as common as connection lines

Speed is bytes of log text / CPU seconds of the parsing process (``time.process_time``), i.e.
per core, including writing the Parquet parts. The process first parses the real excerpts once,
so that imports done on first use (paid once by each parser process) are not counted. Run:

    PYTHONPATH=. python benchmarks/nccl_log_speed.py [--mb 64] [--mix coll,init,stdout,corpus]
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import time
from pathlib import Path

from stallscope.ingest.nccl_log import parse_nccl_log
from stallscope.ingest.pipeline import block_pandas
from stallscope.ingest.writer import PartWriter



def shared_logs() -> Path:
    """``../shared/logs/nccl`` next to the repository (or next to a parent, for git worktrees)."""
    for parent in Path(__file__).resolve().parents[1:]:
        cand = parent / "shared" / "logs" / "nccl"
        if cand.is_dir():
            return cand
    raise SystemExit("cannot find ../shared/logs/nccl next to the repository")


GAP = "# --- excerpt gap"
_PREFIX = re.compile(r"([A-Za-z][\w.-]*):(\d+):(\d+) \[(\d+)\]")
_OPCOUNT = re.compile(r"opCount [0-9a-f]+")
_CHANNEL = re.compile(r"(Channel|Ring) (\d+)")
PROGRAM_OUTPUT = [
    "Epoch 3 | step 1200/5000 | loss 2.3141 | lr 3.0e-04 | 412.3 ms/step",
    "[2025-01-01 12:00:00,123] [INFO] [engine.py:1234:step] global_step=1200, skipped=0, lr=[0.0003]",
    "wandb: Syncing run dulcet-sky-42",
    "  warnings.warn(  # torch/utils/data/dataloader.py:554: UserWarning: This DataLoader will create 16 worker processes",
    "Saving checkpoint to /checkpoints/step_1200.pt",
]


def real_lines() -> list[str]:
    lines = []
    for f in sorted(shared_logs().glob("*.log")):
        for ln in f.read_text(errors="replace").splitlines():
            if ln.strip() and not ln.startswith(GAP):
                lines.append(ln)
    return lines


def vary(line: str, rng: random.Random, ident: tuple[int, int] | None = None) -> str:
    """A real line with its identity varied (host, pid, tid, channel, opCount).

    ``ident`` (node, thread) fixes the printing process: the lines of one rank's init share it.
    """
    node, thread = ident if ident is not None else (rng.randrange(64), rng.randrange(8))
    line = _PREFIX.sub(lambda m: f"{m.group(1)}-{node}:{int(m.group(2)) + node}:{int(m.group(3)) + thread} [{m.group(4)}]",
                       line, count=1)
    line = _OPCOUNT.sub(lambda m: f"opCount {rng.randrange(1 << 20):x}", line)
    return _CHANNEL.sub(lambda m: f"{m.group(1)} {rng.randrange(32):02d}", line, count=1)


def _kinds(lines: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(connection lines, COLL lines, other NCCL INFO/WARN lines) of the corpus."""
    conn = [ln for ln in lines if "NCCL INFO" in ln and " via " in ln and (" Channel " in ln or " Ring " in ln)]
    coll = [ln for ln in lines if " opCount " in ln]
    setup = [ln for ln in lines if ("NCCL INFO" in ln or "NCCL WARN" in ln) and ln not in conn and ln not in coll]
    return conn, coll, setup


def _rank_init(rng: random.Random, conn: list[str], setup: list[str]) -> list[str]:
    """One rank's init: its lines come from one process (a real line keeps its own pid and tid, shifted alike)."""
    ident = (rng.randrange(64), rng.randrange(8))
    return [vary(rng.choice(setup), rng, ident) for _ in range(30)] + [vary(rng.choice(conn), rng, ident) for _ in range(150)]


def build(path: Path, mix: str, mb: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    lines = real_lines()
    conn, coll, setup = _kinds(lines)
    target = mb << 20
    size = 0
    with open(path, "w") as f:
        while size < target:
            if mix == "coll":
                chunk = [vary(rng.choice(coll), rng) if rng.random() < 0.99 else vary(rng.choice(setup), rng)
                         for _ in range(10_000)]
            elif mix == "init":
                chunk = _rank_init(rng, conn, setup)
            elif mix == "stdout":
                init = _rank_init(rng, conn, setup)
                chunk = init + [rng.choice(PROGRAM_OUTPUT) for _ in range(len(init) * 19)]
                rng.shuffle(chunk)
            else:
                chunk = [vary(rng.choice(lines), rng) for _ in range(10_000)]
            text = "\n".join(chunk) + "\n"
            f.write(text)
            size += len(text.encode())
    return path.stat().st_size


def measure(path: Path) -> tuple[float, float, int, int]:
    """(cpu seconds, wall seconds, lines, rows) to parse ``path`` into Parquet parts."""
    with tempfile.TemporaryDirectory() as staging:
        out = PartWriter(staging, "bench")
        c0, w0 = time.process_time(), time.perf_counter()
        info = parse_nccl_log(path, label=path.name, out=out)
        out.close()
        return time.process_time() - c0, time.perf_counter() - w0, info["lines"], sum(info["tables"].values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=64, help="size of each generated log (MiB)")
    ap.add_argument("--mix", default="coll,init,stdout,corpus")
    args = ap.parse_args()
    block_pandas()  # as in ingest's parser processes
    with tempfile.TemporaryDirectory() as d:  # warm-up: lazy imports are paid once per process, not per MB
        warm = Path(d) / "warm.log"
        warm.write_text("\n".join(real_lines()) + "\n")
        measure(warm)
    print(f"{'mix':8} {'MiB':>6} {'lines':>10} {'rows':>10} {'cpu s':>7} {'wall s':>7} {'MB/s/core':>10}")
    with tempfile.TemporaryDirectory() as d:
        for mix in args.mix.split(","):
            path = Path(d) / f"{mix}.log"
            size = build(path, mix, args.mb)
            cpu, wall, lines, rows = measure(path)
            print(f"{mix:8} {size / 2**20:6.1f} {lines:10d} {rows:10d} {cpu:7.2f} {wall:7.2f} {size / 1e6 / cpu:10.1f}")
            path.unlink()


if __name__ == "__main__":
    main()
