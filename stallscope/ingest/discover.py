"""Find the files of a bundle and say what each one is, by content, never by name.

A bundle is any mix of files, directories, ``.tar``/``.tar.gz``/``.tgz`` and ``.zip`` archives
(nested archives too). Archives are expanded into a private temporary directory with the usual
defences: no absolute paths or ``..``, no links or device files, and caps on member count,
total size and compression ratio.

Sniffing reads the first 64 KiB (decompressed when gzip):

* a JSON object with ``traceEvents`` (or Kineto's ``schemaVersion``/``deviceProperties``/
  ``distributedInfo`` keys) -> ``kineto``;
* a JSON object with ``schema`` + ``nodes`` -> ``execution_trace`` (PyTorch ET; recorded, not parsed);
* a JSON object with ``stallscope_manifest`` -> ``manifest``;
* text with ``NCCL INFO`` / ``NCCL WARN`` lines, PyTorch ProcessGroupNCCL watchdog messages,
  NCCL lines whose prefix was stripped (``NCCL version``, ``NET/IB : Using``) or nccl-tests
  output anywhere in the file -> ``nccl_log``;
* an empty file -> ``empty``; anything else -> ``unknown`` (listed in ``files``, not an error).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from stallscope.errors import IngestError
from stallscope.ingest.source import GZIP_MAGIC, head

#: archive limits (defence against hostile uploads)
MAX_MEMBERS = 200_000
MAX_TOTAL_BYTES = 256 << 30
MAX_RATIO = 200  # uncompressed / compressed for a single zip member
MAX_NESTING = 3

_LOG_MARKERS = (b" NCCL INFO", b" NCCL WARN", b"NCCL INFO ", b"NCCL WARN ")
_WATCHDOG_RE = re.compile(
    rb"Watchdog caught collective operation timeout|WorkNCCL\(SeqNum=|ProcessGroupNCCL[^\n]{0,200}(?:timed? ?out|watchdog)"
    rb"|\[PG [^\]]*\] Watchdog|NCCL watchdog thread terminated"
    # oldest watchdog format: "RuntimeError: [Rank 0] Caught collective operation timeout: WorkNCCL(OpType=..."
    rb"|Caught collective operation timeout: WorkNCCL\("
    # NCCL logs whose "host:pid:tid [dev] NCCL INFO" prefix was stripped (nccl#1584) or only the version line kept
    rb"|NCCL version \d+\.\d+\.\d+|NET/(?:IB|Socket) ?: Using \[|Using network (?:IB|Socket)\b"
    # nccl-tests output: the result-table header and the device table
    rb"|#\s+size\s+count\s+type\s+redop|#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s"
)
_TEXT_SCAN_LIMIT = 1 << 30


@dataclass
class Found:
    """One file of the bundle."""

    path: Path  #: where to read it (inside the temp dir for archive members)
    label: str  #: how users see it: path relative to the given root, ``archive!member``
    kind: str
    size: int


def is_archive(path: Path) -> str | None:
    """'tar' or 'zip' when the file is an archive (by content), else None."""
    try:
        with open(path, "rb") as f:
            magic = f.read(262)
    except OSError:
        return None
    if magic[:4] == b"PK\x03\x04" or magic[:4] == b"PK\x05\x06":
        return "zip"
    if len(magic) >= 262 and magic[257:262] == b"ustar":
        return "tar"
    if magic[:2] == GZIP_MAGIC:
        inner = head(path, 512)
        if len(inner) >= 262 and inner[257:262] == b"ustar":
            return "tar"
    if magic[:3] == b"BZh" or magic[:6] == b"\xfd7zXZ\x00":
        try:
            return "tar" if tarfile.is_tarfile(path) else None
        except (OSError, tarfile.TarError):
            return None
    return None


def sniff(path: Path) -> str:
    """Classify a file by its content (see module doc)."""
    try:
        size = path.stat().st_size
    except OSError:
        return "unreadable"
    if size == 0:
        return "empty"
    try:
        data = head(path, 1 << 16)
    except OSError:
        return "unreadable"
    if not data:
        with open(path, "rb") as f:
            return "corrupt_gzip" if f.read(2) == GZIP_MAGIC else "empty"
    stripped = data.lstrip(b" \t\r\n\xef\xbb\xbf")
    if stripped[:1] == b"{":
        # the manifest names itself first; its recorded command line may mention anything
        if re.match(rb'\{\s*"stallscope_manifest"', stripped):
            return "manifest"
        if b'"traceEvents"' in data:
            return "kineto"
        if b'"stallscope_manifest"' in data:
            return "manifest"
        if b'"nodes"' in data and b'"schema"' in data:
            return "execution_trace"
        if b'"schemaVersion"' in data and (b'"deviceProperties"' in data or b'"distributedInfo"' in data):
            return "kineto"
        return "json"
    if b"\x00" in data[:4096]:
        return "unknown"
    if any(m in data for m in _LOG_MARKERS) or _WATCHDOG_RE.search(data):
        return "nccl_log"
    if _looks_like_text(data) and _scan_for_log_markers(path):
        return "nccl_log"
    return "unknown"


def _looks_like_text(data: bytes) -> bool:
    sample = data[:8192]
    if not sample:
        return False
    bad = sum(1 for b in sample if b < 9 or (13 < b < 32))
    return bad / len(sample) < 0.01


def _scan_for_log_markers(path: Path) -> bool:
    """NCCL lines can start deep inside a captured stdout: scan the rest in blocks."""
    from stallscope.ingest.source import ByteStream

    tail = b""
    seen = 0
    for block in ByteStream(path, block=4 << 20):
        buf = tail + block
        if any(m in buf for m in _LOG_MARKERS) or _WATCHDOG_RE.search(buf):
            return True
        tail = buf[-64:]
        seen += len(block)
        if seen > _TEXT_SCAN_LIMIT:
            break
    return False


def discover(paths: Iterable[str | Path], workdir: str | Path) -> tuple[list[Found], list[dict[str, object]]]:
    """Expand ``paths`` into classified files. Archives are unpacked under ``workdir``.

    Returns (files, warnings). A path that does not exist raises :class:`IngestError`.
    """
    workdir = Path(workdir)
    found: list[Found] = []
    warnings: list[dict[str, object]] = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise IngestError(f"{p}: no such file or directory")
        if path.is_dir():
            _walk_dir(path, path, "", found, warnings, workdir, 0)
        else:
            _add_file(path, path.name, found, warnings, workdir, 0)
    found.sort(key=lambda f: f.label)
    return found, warnings


def _walk_dir(root: Path, d: Path, prefix: str, found: list[Found], warnings: list[dict[str, object]], workdir: Path, depth: int) -> None:
    for dirpath, dirnames, filenames in os.walk(d, followlinks=False):
        dirnames[:] = sorted(n for n in dirnames if not n.startswith((".staging", "__MACOSX")))
        for name in sorted(filenames):
            fp = Path(dirpath) / name
            rel = fp.relative_to(root).as_posix()
            if not fp.is_file():  # follows file symlinks; directory symlinks are not walked
                continue
            _add_file(fp, prefix + rel, found, warnings, workdir, depth)


def _add_file(path: Path, label: str, found: list[Found], warnings: list[dict[str, object]], workdir: Path, depth: int) -> None:
    kind = is_archive(path)
    if kind and depth < MAX_NESTING:
        workdir.mkdir(parents=True, exist_ok=True)
        dest = Path(tempfile.mkdtemp(prefix="archive-", dir=workdir))
        try:
            (_extract_tar if kind == "tar" else _extract_zip)(path, dest, label, warnings)
        except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
            warnings.append({"file": label, "code": "bad_archive", "message": f"{label}: cannot read archive ({exc}); kept the members read before the error"})
        _walk_dir(dest, dest, label + "!", found, warnings, workdir, depth + 1)
        return
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    found.append(Found(path=path, label=label, kind=sniff(path), size=size))


def _safe_member(name: str) -> PurePosixPath | None:
    p = PurePosixPath(name.replace("\\", "/"))
    parts = [x for x in p.parts if x not in ("", ".")]
    if not parts or p.is_absolute() or ".." in parts or parts[0].endswith(":"):
        return None
    return PurePosixPath(*parts)


def _extract_tar(path: Path, dest: Path, label: str, warnings: list[dict[str, object]]) -> None:
    total = 0
    count = 0
    with tarfile.open(path, mode="r:*") as tf:
        for m in tf:
            count += 1
            if count > MAX_MEMBERS:
                warnings.append({"file": label, "code": "archive_limit", "message": f"{label}: more than {MAX_MEMBERS} members; the rest was skipped"})
                break
            if not m.isfile():
                if m.issym() or m.islnk() or m.isdev():
                    warnings.append({"file": f"{label}!{m.name}", "code": "unsafe_member", "message": f"{label}!{m.name}: links and devices are not extracted"})
                continue
            rel = _safe_member(m.name)
            if rel is None:
                warnings.append({"file": f"{label}!{m.name}", "code": "unsafe_member", "message": f"{label}!{m.name}: unsafe path, skipped"})
                continue
            total += m.size
            if total > MAX_TOTAL_BYTES:
                warnings.append({"file": label, "code": "archive_limit", "message": f"{label}: archive larger than {MAX_TOTAL_BYTES >> 30} GiB; the rest was skipped"})
                break
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(m)
            if src is None:
                continue
            try:
                with src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 4 << 20)
            except (tarfile.TarError, EOFError, OSError) as exc:
                warnings.append({"file": f"{label}!{m.name}", "code": "bad_archive", "message": f"{label}!{m.name}: archive member cut short ({exc}); kept what was read"})
                break
            os.chmod(target, stat.S_IRUSR | stat.S_IWUSR)


def _extract_zip(path: Path, dest: Path, label: str, warnings: list[dict[str, object]]) -> None:
    total = 0
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            warnings.append({"file": label, "code": "archive_limit", "message": f"{label}: more than {MAX_MEMBERS} members; the rest was skipped"})
            infos = infos[:MAX_MEMBERS]
        for info in infos:
            if info.is_dir():
                continue
            mode = (info.external_attr >> 16) & 0o170000
            if mode and not stat.S_ISREG(mode):
                warnings.append({"file": f"{label}!{info.filename}", "code": "unsafe_member", "message": f"{label}!{info.filename}: links and devices are not extracted"})
                continue
            rel = _safe_member(info.filename)
            if rel is None:
                warnings.append({"file": f"{label}!{info.filename}", "code": "unsafe_member", "message": f"{label}!{info.filename}: unsafe path, skipped"})
                continue
            if info.compress_size and info.file_size / max(info.compress_size, 1) > MAX_RATIO and info.file_size > (1 << 30):
                warnings.append({"file": f"{label}!{info.filename}", "code": "archive_limit", "message": f"{label}!{info.filename}: compression ratio too high (zip bomb?), skipped"})
                continue
            total += info.file_size
            if total > MAX_TOTAL_BYTES:
                warnings.append({"file": label, "code": "archive_limit", "message": f"{label}: archive larger than {MAX_TOTAL_BYTES >> 30} GiB; the rest was skipped"})
                break
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 4 << 20)
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                warnings.append({"file": f"{label}!{info.filename}", "code": "bad_archive", "message": f"{label}!{info.filename}: cannot extract ({exc})"})
