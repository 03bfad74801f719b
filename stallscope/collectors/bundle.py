"""Pack a bundle directory into one ``.tar.gz`` that ``stallscope ingest``/``postmortem`` accept.

The archive holds the bundle under one top folder named like the directory (``tar xzf`` gives the
directory back). It is safe and reproducible:

* only regular files and directories; symbolic links and special files are left out (and
  listed), so packing never follows a link out of the bundle;
* the archive being written is never packed into itself (``-o`` inside the bundle is fine); every
  other regular file is packed, hidden ones too: a ``.tmp-*`` trace left by a rank killed while
  exporting is a truncated trace, which ingest reads up to where it stops;
* members are sorted by path, owners are cleared, directories carry the newest file's time and
  the gzip header no time or name, so the same files give the same bytes;
* it is written to a temporary name next to the output and renamed when complete.
"""

from __future__ import annotations

import gzip
import os
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from stallscope.errors import UsageError

@dataclass
class PackResult:
    out: Path
    files: int
    bytes_in: int  #: total size of the packed files
    bytes_out: int  #: size of the archive
    skipped: list[str] = field(default_factory=list)  #: paths left out, with the reason


def pack(bundle: str | Path, out: str | Path, *, overwrite: bool = False, level: int = 6) -> PackResult:
    """Pack the directory ``bundle`` into the gzip-compressed tar ``out`` (see module doc)."""
    src = Path(bundle)
    if not src.is_dir():
        raise UsageError(f"{bundle}: not a directory")
    src = src.resolve()
    dest = Path(out).expanduser().resolve()
    if dest.exists() and not overwrite:
        raise UsageError(f"{out}: already exists (use --force to replace it)")
    if dest.is_dir():
        raise UsageError(f"{out}: is a directory")
    top = src.name or "bundle"
    entries: list[tuple[str, Path]] = []
    skipped: list[str] = []
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        d = Path(dirpath)
        for name in sorted(dirnames):
            p = d / name
            if p.is_symlink():
                skipped.append(f"{p.relative_to(src).as_posix()} (symbolic link)")
        dirnames[:] = sorted(n for n in dirnames if not (d / n).is_symlink())
        for name in sorted(filenames):
            p = d / name
            rel = p.relative_to(src).as_posix()
            st = p.lstat()
            if p.resolve() == dest or (d == dest.parent and name.startswith(f".{dest.name}.")):
                continue
            if stat.S_ISLNK(st.st_mode):
                skipped.append(f"{rel} (symbolic link)")
            elif not stat.S_ISREG(st.st_mode):
                skipped.append(f"{rel} (not a regular file)")
            else:
                entries.append((rel, p))
        if d != src:
            entries.append((d.relative_to(src).as_posix() + "/", d))
    entries.sort(key=lambda e: e[0])
    # directories carry the newest file time: their own changes whenever a writer renames a file
    newest = max((int(p.stat().st_mtime) for rel, p in entries if not rel.endswith("/")), default=0)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.{os.getpid()}.partial"
    bytes_in = files = 0
    try:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            tar.addfile(_info(f"{top}/", src, mtime=newest))
            for rel, p in entries:
                arc = f"{top}/{rel}"
                if rel.endswith("/"):
                    tar.addfile(_info(arc, p, mtime=newest))
                    continue
                with open(p, "rb") as f:
                    info = _info(arc, p, size=os.fstat(f.fileno()).st_size)
                    tar.addfile(info, f)
                bytes_in += info.size
                files += 1
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return PackResult(out=dest, files=files, bytes_in=bytes_in, bytes_out=dest.stat().st_size, skipped=skipped)


def _info(arcname: str, path: Path, *, size: int = 0, mtime: int | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(arcname.rstrip("/") if arcname.endswith("/") else arcname)
    info.mtime = int(path.stat().st_mtime) if mtime is None else mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if arcname.endswith("/"):
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    else:
        info.type = tarfile.REGTYPE
        info.mode = 0o644
        info.size = size
    return info
