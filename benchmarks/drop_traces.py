"""A copy of a generated suite with some ranks' traces gone altogether (files lost, never written).

    python benchmarks/drop_traces.py /tmp/suite26000 /tmp/miss26000 --bundles 80             # one rank each
    python benchmarks/drop_traces.py /tmp/suite26000 /tmp/quarter26000 --bundles 80 --share 0.25
    python benchmarks/attribution_eval.py /tmp/miss26000 --workers 2 [--without-logs]

Walks the suite in order and takes the first ``--bundles`` bundles that have at least 4 rank
traces and a rank that is no culprit; from each it deletes the traces of randomly chosen
non-culprit ranks (one, or ``--share`` of the traces found, rounded), keeps the NCCL logs (the
ranks ran), and writes ``suite.json`` (each entry with ``removed_ranks``) beside them, so
``attribution_eval.py`` scores the copy against the original truth. Job-wide faults (every rank a
culprit) are skipped. A trace's rank is read from the ``"rank"`` key in its first 4,000
characters (``distributedInfo``); traces that put it later are not candidates, and a bundle with
fewer than 4 readable ranks is skipped. Deterministic: ``random.Random(7)``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

RANK = re.compile(r'"rank"\s*:\s*(\d+)')


def _extract(bundle: Path, dest: Path) -> None:
    if bundle.suffix == ".zip":
        zipfile.ZipFile(bundle).extractall(dest)
    elif bundle.is_dir():
        shutil.copytree(bundle, dest, dirs_exist_ok=True)
    else:
        with tarfile.open(bundle) as tf:
            tf.extractall(dest)  # noqa: S202 - our own generated bundles


def _ranks(bundle: Path) -> dict[int, Path]:
    """rank -> trace file, for the traces whose head names their rank."""
    out: dict[int, Path] = {}
    for f in bundle.rglob("*"):
        if not f.is_file() or "trace" not in f.name or not f.name.endswith((".json", ".json.gz")):
            continue
        try:
            with (gzip.open(f, "rt") if f.name.endswith(".gz") else open(f)) as fh:
                m = RANK.search(fh.read(4000))
        except (OSError, UnicodeDecodeError):
            continue
        if m:
            out[int(m.group(1))] = f
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--bundles", type=int, default=80)
    ap.add_argument("--share", type=float, help="share of the traces to delete (default: one trace)")
    a = ap.parse_args()
    index = json.loads((a.suite / "suite.json").read_text())
    rng = random.Random(7)
    kept = []
    for e in index["bundles"]:
        if len(kept) >= a.bundles:
            break
        truth = json.loads((a.suite / e["truth"]).read_text())
        dest = a.out / e["name"] / "bundle"
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        _extract(a.suite / e["bundle"], dest)
        ranks = _ranks(dest)
        culprits = set(truth.get("culprit_ranks") or [])
        pool = sorted(r for r in ranks if r not in culprits)
        if len(ranks) < 4 or not pool:
            shutil.rmtree(dest.parent)
            continue
        if a.share is None:
            gone = [rng.choice(pool)]
        else:
            gone = sorted(rng.sample(pool, min(len(pool), max(1, int(round(a.share * len(ranks)))))))
        for r in gone:
            ranks[r].unlink()
        shutil.copy(a.suite / e["truth"], dest.parent / "truth.json")
        kept.append(dict(e, bundle=f"{e['name']}/bundle", truth=f"{e['name']}/truth.json", removed_ranks=gone))
    (a.out / "suite.json").write_text(json.dumps(dict(index, bundles=kept, count=len(kept))))
    print(f"{len(kept)} bundles -> {a.out}")


if __name__ == "__main__":
    main()
