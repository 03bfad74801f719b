"""The bundle manifest: what the job was, where each rank ran, and the host facts around it.

Two kinds of manifest file live in a bundle, both JSON objects whose **first key** is
``stallscope_manifest`` (so ingest recognizes them by content in the first bytes):

``manifest.json`` (``kind: bundle``)
    written by ``stallscope collect`` when the command starts (``status: running``) and
    completed when it ends: job id, command, start/end, exit code, world size, versions,
    the relevant environment (secrets masked), topology per host, and every rank's entry.
``ranks/rank<N>.json`` (``kind: rank``)
    written by each rank's profiler (:mod:`stallscope.collectors.profiler`) when it starts and
    again when it stops: rank, world, local rank, host, pid, device, versions, environment,
    trace files, and (on local rank 0 of a host) that host's topology. ``collect`` merges them
    into ``manifest.json`` at the end and removes them; if ``collect`` was killed first, they stay
    and ingest reads them directly, so a bundle is never left without its rank → host map.

Only variables that shape distributed performance are recorded (:data:`ENV_PREFIXES`,
:data:`ENV_NAMES`), and a value is replaced by :data:`MASK` when its name or its content looks
like a secret (:func:`mask_env`).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

#: manifest format version (bumped only by adding fields)
MANIFEST_VERSION = 1
#: the key every manifest file starts with, and its value's ``kind``
MARKER = "stallscope_manifest"
#: folders of a bundle
TRACES_DIR, NCCL_DIR, RANKS_DIR = "traces", "nccl", "ranks"
MANIFEST_NAME = "manifest.json"
#: what a masked value reads as
MASK = "<masked>"

#: environment variable prefixes recorded in the manifest
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCHELASTIC_", "TORCH_CPP_LOG", "CUDA_", "NVIDIA_",
                "PYTORCH_", "GLOO_", "UCX_", "FI_", "OMPI_MCA_", "SLURM_JOB_", "SLURM_STEP_", "STALLSCOPE_")
#: single environment variables recorded in the manifest
ENV_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS", "SLURM_NNODES",
             "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_GPUS_PER_NODE")

# A name says "secret" when it holds one of these words (``KEY``/``AUTH``/``PASS`` only as a
# whole ``_``-separated word, so ``NCCL_IB_PKEY`` — an InfiniBand partition key — stays visible).
_SECRET_NAME = re.compile(
    r"SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|COOKIE|PRIVATE|SIGNATURE|APIKEY"
    r"|(?:^|_)(?:API_KEY|ACCESS_KEY|KEY|KEYS|AUTH|PASS|PWD|SAS)(?:_|$)",
    re.IGNORECASE,
)
# A value says "secret" when it looks like a known token format or a bearer header.
_SECRET_VALUE = re.compile(
    r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}|xox[abprs]-[\w-]{10,}"
    r"|\bsk-[A-Za-z0-9_-]{20,}|\bhf_[A-Za-z0-9]{20,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*|\bBearer\s+\S+|-----BEGIN [A-Z ]*PRIVATE KEY-----",
)
# user:password@ in a URL: the password part is masked, the rest kept
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][\w+.-]*://)(?P<user>[^/\s:@]+):(?P<password>[^/\s@]+)@")


def now() -> tuple[str, int]:
    """(ISO-8601 UTC with milliseconds, Unix epoch ns) for one instant."""
    ns = time.time_ns()
    iso = datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return iso, ns


def new_id() -> str:
    """A fresh collect id: ``c-`` and 12 hex digits."""
    return "c-" + uuid.uuid4().hex[:12]


# -- environment ---------------------------------------------------------------------------


def is_relevant(name: str) -> bool:
    """Whether ``name`` is one of the variables a manifest records."""
    return name.startswith(ENV_PREFIXES) or name in ENV_NAMES


def mask_value(name: str, value: str) -> tuple[str, bool]:
    """``(value to store, masked?)``: the whole value when the name or content looks secret,
    only the password when the value is a URL with ``user:password@``.

    >>> mask_value("HF_TOKEN", "abc")
    ('<masked>', True)
    >>> mask_value("NCCL_IB_PKEY", "0x8001")
    ('0x8001', False)
    >>> mask_value("NCCL_PROXY_URL", "https://bob:hunter2@proxy:3128")
    ('https://bob:<masked>@proxy:3128', True)
    """
    if _SECRET_NAME.search(name) or _SECRET_VALUE.search(value):
        return MASK, True
    masked, n = _URL_CREDENTIALS.subn(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", value)
    return masked, n > 0


def mask_env(environ: Mapping[str, str], *, set_by_collect: Iterable[str] = (), relevant_only: bool = True) -> list[dict[str, Any]]:
    """The recorded environment: one ``{name, value, masked, source}`` per relevant variable, sorted
    by name; ``source`` is ``collect`` for variables ``stallscope collect`` set, else ``user``."""
    ours = set(set_by_collect)
    out = []
    for name in sorted(environ):
        if relevant_only and not is_relevant(name):
            continue
        value, masked = mask_value(name, environ[name])
        out.append({"name": name, "value": value, "masked": masked, "source": "collect" if name in ours else "user"})
    return out


# -- files ---------------------------------------------------------------------------------


def header(kind: str) -> dict[str, Any]:
    """The first key of every manifest file."""
    from stallscope import __version__

    return {"version": MANIFEST_VERSION, "kind": kind, "writer": f"stallscope {__version__}"}


def write_json_atomic(path: Path, doc: Mapping[str, Any]) -> None:
    """Write ``doc`` as JSON next to ``path`` and rename it into place: readers (and a packer
    running meanwhile) see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, path)


def rank_file(bundle: Path, rank: int | None, host: str, pid: int) -> Path:
    """Where a rank's profiler records itself (``ranks/rank<N>.json``; ``<host>_<pid>`` when the
    rank is not known yet)."""
    name = f"rank{rank}.json" if rank is not None else f"{host}_{pid}.json"
    return bundle / RANKS_DIR / name


def read_manifest(path: Path) -> dict[str, Any] | None:
    """A manifest file's content, or None when it is missing, unreadable or not a manifest."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get(MARKER), dict) else None


def claim_manifest(bundle: Path, doc: dict[str, Any]) -> tuple[Path, str | None]:
    """Create this collect's manifest file: ``manifest.json``, unless another collect (another
    node's, sharing the bundle) is running and holds that name; then ``manifest-<host>-<pid>.json``.

    Returns (path, collect id of an earlier *finished* run whose manifest was replaced, or None).
    """
    bundle.mkdir(parents=True, exist_ok=True)
    main = bundle / MANIFEST_NAME
    try:
        fd = os.open(main, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        other = read_manifest(main)
        if other is not None and other.get("status") == "running" and other.get("collect_id") != doc.get("collect_id"):
            path = bundle / f"manifest-{doc.get('host')}-{doc.get('pid')}.json"
            write_json_atomic(path, doc)
            return path, None
        write_json_atomic(main, doc)  # a leftover of an earlier run into the same directory
        return main, (str(other.get("collect_id")) if other is not None else None)
    os.close(fd)
    write_json_atomic(main, doc)
    return main, None


def merge_ranks(bundle: Path, doc: dict[str, Any], *, collect_id: str | None) -> list[Path]:
    """Fold the rank files of this collect (or with no collect id) into ``doc``: ``ranks`` sorted
    by rank, each host's topology under ``topology``, the job's world size and the versions the
    ranks ran with. Returns the files merged (the caller removes them once ``doc`` is written)."""
    rdir = bundle / RANKS_DIR
    merged: list[Path] = []
    entries: dict[Any, dict[str, Any]] = {(r.get("rank"), r.get("host"), r.get("pid")): r for r in doc.get("ranks", [])}
    topo: dict[str, Any] = doc.setdefault("topology", {})
    for p in sorted(rdir.glob("*.json")) if rdir.is_dir() else []:
        rec = read_manifest(p)
        if rec is None or rec[MARKER].get("kind") != "rank":
            continue
        if rec.get("collect_id") not in (None, collect_id):
            continue  # another node's collect owns it
        rec = {k: v for k, v in rec.items() if k != MARKER}
        host_topo = rec.pop("topology", None)
        if host_topo and rec.get("host") and rec["host"] not in topo:
            topo[rec["host"]] = host_topo
        entries[(rec.get("rank"), rec.get("host"), rec.get("pid"))] = rec
        merged.append(p)
    ranks = sorted(entries.values(), key=lambda r: (r.get("rank") is None, r.get("rank") or 0, str(r.get("host")), r.get("pid") or 0))
    doc["ranks"] = ranks
    worlds = [r["world_size"] for r in ranks if isinstance(r.get("world_size"), int)]
    if worlds:
        doc["world_size"] = max(worlds)
    elif ranks and doc.get("world_size") is None:
        doc["world_size"] = len(ranks)
    versions = doc.setdefault("versions", {})
    first = next((r for r in ranks if r.get("versions")), None)
    if first is not None:
        for k, v in first["versions"].items():
            if v is not None:
                versions[k] = v  # what the job ran with wins over what the collect host has installed
    return merged
