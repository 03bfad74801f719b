"""Lay files out as a bundle: names, folders, gzip, and the container (dir, .tar.gz, .zip).

Naming follows what produces the files in real jobs:

* traces, ``tensorboard``: ``torch.profiler.tensorboard_trace_handler`` names files
  ``{worker_name}.{time_ns}.pt.trace.json[.gz]`` with ``worker_name = {host}_{pid}``
  (torch < 2.0 used milliseconds); ``rank``: ``rank{R}.pt.trace.json[.gz]`` (a custom
  ``on_trace_ready``); ``arbitrary``: names that say nothing about the rank or host;
* NCCL logs, ``debug_file``: ``NCCL_DEBUG_FILE=%h.%p`` gives ``{host}.{pid}`` per process;
  ``torchrun``: one captured stdout per host, every line prefixed ``[default{local}]:``.

Archives are written deterministically (sorted members, fixed times), so the same seed gives
byte-identical bundles.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np

FIXED_MTIME = 1_700_000_000  #: archive member times (2023-11-14), for reproducible bytes


def trace_path(naming: str, *, rank: int, host: str, pid: int, wall_ns: int, gz: bool, old: bool,
               rng: np.random.Generator, layout: str) -> str:
    ext = ".gz" if gz else ""
    if naming == "tensorboard":
        stamp = wall_ns // 1_000_000 if old else wall_ns
        name = f"{host}_{pid}.{stamp}.pt.trace.json{ext}"
    elif naming == "rank":
        name = f"rank{rank}.pt.trace.json{ext}"
    else:
        tag = "".join(rng.choice(list("0123456789abcdef"), 12))
        name = f"profile-{tag}.json{ext}"
    if layout == "flat":
        return name
    if layout == "per_host" and naming != "arbitrary":
        return f"{host}/{name}"
    return f"traces/{name}"


def write_gz(data: bytes) -> bytes:
    """gzip with no file name and a zero mtime (reproducible)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=5, mtime=0) as f:
        f.write(data)
    return buf.getvalue()


def pack(files: dict[str, bytes], dest: Path, container: str) -> str:
    """Write ``files`` (relative path -> bytes) as a bundle under ``dest``; returns the bundle's
    path relative to ``dest`` (``bundle``, ``bundle.tar.gz`` or ``bundle.zip``)."""
    dest.mkdir(parents=True, exist_ok=True)
    names = sorted(files)
    if container == "dir":
        root = dest / "bundle"
        for n in names:
            p = root / n
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(files[n])
        return "bundle"
    if container == "tar.gz":
        path = dest / "bundle.tar.gz"
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for n in names:
                info = tarfile.TarInfo("bundle/" + n)
                info.size = len(files[n])
                info.mtime = FIXED_MTIME
                info.mode = 0o644
                info.uname = info.gname = "root"
                tf.addfile(info, io.BytesIO(files[n]))
        with open(path, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=5, mtime=0) as gz:
            gz.write(raw.getvalue())
        return path.name
    if container == "zip":
        path = dest / "bundle.zip"
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=5) as zf:
            for n in names:
                zi = zipfile.ZipInfo("bundle/" + n, date_time=(2023, 11, 14, 22, 13, 20))
                zi.compress_type = zipfile.ZIP_DEFLATED
                zi.external_attr = 0o644 << 16
                zf.writestr(zi, files[n])
        return path.name
    raise ValueError(f"unknown container {container!r}")


def read_files(bundle: str | Path) -> dict[str, bytes]:
    """Every file of a bundle (dir, .tar.gz or .zip) as relative path -> raw bytes, with the
    top-level ``bundle/`` folder of archives stripped. For tests and tools that check the
    written files directly, without going through ingest."""
    bundle = Path(bundle)
    out: dict[str, bytes] = {}
    if bundle.is_dir():
        for p in sorted(bundle.rglob("*")):
            if p.is_file():
                out[p.relative_to(bundle).as_posix()] = p.read_bytes()
    elif bundle.name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(bundle) as tf:
            for m in tf:
                f = tf.extractfile(m) if m.isfile() else None
                if f is not None:
                    out[m.name.removeprefix("bundle/")] = f.read()
    else:
        with zipfile.ZipFile(bundle) as zf:
            for n in zf.namelist():
                if not n.endswith("/"):
                    out[n.removeprefix("bundle/")] = zf.read(n)
    return out


def load_json(data: bytes) -> dict:
    """A trace file's JSON (gunzipped when needed)."""
    import json

    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


#: how trace files' names end (a bundle's other files: NCCL logs, manifests)
TRACE_EXT = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")


def load_trace(data: bytes) -> dict | None:
    """A Kineto trace's JSON from a file's bytes, or None when they are no complete trace (cut
    by a killed job, not JSON, no ``traceEvents``)."""
    try:
        d = load_json(data)
    except (OSError, ValueError, EOFError):
        return None
    return d if isinstance(d, dict) and isinstance(d.get("traceEvents"), list) else None


def dump_trace(d: dict, gz: bool) -> bytes:
    """A trace's bytes again, gzipped (reproducibly) when ``gz``."""
    import json

    raw = json.dumps(d).encode()
    return gzip.compress(raw, mtime=0) if gz else raw


def write_altered(suite: Path, entry: dict, files: dict[str, bytes], out: Path) -> dict:
    """One bundle of a generated suite, altered (``files``: relative path -> bytes), written as
    a folder under ``out`` beside a copy of its truth; returns its entry for ``out``'s
    ``suite.json`` (the robustness benchmarks score such copies against the original truth)."""
    import shutil

    dest = out / entry["name"]
    if dest.exists():
        shutil.rmtree(dest)
    pack(files, dest, "dir")
    shutil.copy(suite / entry["truth"], dest / "truth.json")
    return dict(entry, bundle=f"{entry['name']}/bundle", truth=f"{entry['name']}/truth.json")
