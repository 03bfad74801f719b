"""Measure a command over its whole process tree: CPU seconds and peak memory.

CPU time is read from ``wait4``: the child's own time plus that of every descendant reaped in
the tree (worker pools of both stallscope and HTA are joined by their parent, so nothing is
lost). Peak memory is the largest sum, over one sample, of every live process's RSS (and,
separately, PSS, which splits shared library pages fairly), sampled every 20 ms.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import psutil


@dataclass
class Usage:
    cpu_s: float
    wall_s: float
    peak_rss_mb: float
    peak_pss_mb: float
    returncode: int
    output: str


def _pss(p: psutil.Process) -> int:
    try:
        with open(f"/proc/{p.pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run(cmd: list[str], *, env: dict[str, str] | None = None, interval: float = 0.02) -> Usage:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    root = psutil.Process(proc.pid)
    peak_rss = peak_pss = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_rss, peak_pss
        while not stop.is_set():
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                procs = []
            rss = pss = 0
            for p in procs:
                try:
                    rss += p.memory_info().rss
                    pss += _pss(p)
                except psutil.Error:
                    pass
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            stop.wait(interval)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out_chunks = []
    assert proc.stdout is not None
    for line in proc.stdout:
        out_chunks.append(line.decode(errors="replace"))
    _, status, ru = os.wait4(proc.pid, 0)
    stop.set()
    th.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    cpu = ru.ru_utime + ru.ru_stime
    return Usage(cpu_s=cpu, wall_s=wall, peak_rss_mb=peak_rss / 2**20, peak_pss_mb=peak_pss / 2**20,
                 returncode=proc.returncode, output="".join(out_chunks))


if __name__ == "__main__":
    u = run(sys.argv[1:])
    print(u)
