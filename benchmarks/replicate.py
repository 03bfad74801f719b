"""Build N-rank trace sets by replicating one real rank trace (rewriting ``distributedInfo.rank``).

Used by the ingest benchmarks: ``python benchmarks/replicate.py --ranks 32 --out /tmp/bench/r32``.
The source is ``../shared/traces/hta/trace_diff/control/control.json.gz`` (rank 3 of an 8-rank
A100 job, 109k events, 34.8 MB of JSON); each copy is gzip-compressed like a real bundle.
"""

from __future__ import annotations

import argparse
import gzip
import re
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SOURCE = SHARED / "traces" / "hta" / "trace_diff" / "control" / "control.json.gz"


def replicate(ranks: int, out: Path, *, source: Path = SOURCE, compresslevel: int = 6) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    text = gzip.decompress(source.read_bytes())
    m = re.search(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d+)', text)
    if not m:
        raise SystemExit(f"{source}: no distributedInfo.rank")
    paths = []
    for r in range(ranks):
        p = out / f"rank{r}.pt.trace.json.gz"
        if not p.exists():
            data = text[: m.start(1)] + str(r).encode() + text[m.end(1) :]
            p.write_bytes(gzip.compress(data, compresslevel=compresslevel))
        paths.append(p)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    paths = replicate(a.ranks, a.out)
    print(f"{len(paths)} files in {a.out}")


if __name__ == "__main__":
    main()
