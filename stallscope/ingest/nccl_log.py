"""NCCL debug logs (``NCCL_DEBUG=INFO``) and PyTorch watchdog logs -> the ``nccl_*`` tables.

The file is read as a stream of blocks (plain or gzip, :class:`~stallscope.ingest.source.ByteStream`)
and cut into lines here, so memory does not grow with the file. Each line is routed cheaply:

* connection and COLL lines are parsed a block at a time (:mod:`stallscope.ingest.nccl_bulk`),
  which also cuts the prefix of the other INFO lines;
* lines containing ``NCCL`` carry either the standard prefix ``host:pid:tid [dev] NCCL INFO|WARN``
  (found anywhere in the line, after any launcher wrapper) and go to the message handlers of
  :mod:`stallscope.ingest.nccl_messages` (each distinct message parsed once per file where the
  handler allows, :mod:`stallscope.ingest.nccl_memo`), or are PyTorch ProcessGroupNCCL watchdog lines
  (:mod:`stallscope.ingest.watchdog`; a block's watchdog lines are taken together, each distinct text
  read once) or a bare ``NCCL version`` line;
* nccl-tests output (``#`` headers, the result table) goes to :mod:`stallscope.ingest.nccl_tests` (a
  block's lines walked together, each distinct text read once);
* when the first block has no NCCL prefix at all (the poster stripped it), every line is tried
  as a bare message ("bare mode");
* everything else is program output and is ignored.

A line with the prefix that no handler understands is *unknown*: unknown lines are counted and
reported as one ``unknown_lines`` warning per file, never fatal. Binary junk (NUL bytes, invalid
UTF-8) is skipped with one ``binary_junk`` warning. Facts that need the whole file (the exact
version, the version range from format fingerprints, ``nNodes``, GDR per HCA, whether a NET
connection crosses hosts) are resolved at the end for the small tables kept in memory.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from stallscope.errors import IngestError
from stallscope.ingest import nccl_bulk, nccl_errors, nccl_memo, nccl_messages, nccl_setup, nccl_tests, watchdog
from stallscope.ingest.nccl_state import LogState
from stallscope.ingest.schemas.nccl import LEVEL_RE, PREFIX_RE, VERSION_RE, WRAPPER_RE, version_range
from stallscope.ingest.source import ByteStream
from stallscope.ingest.writer import PartWriter

#: a "line" longer than this without a newline is junk (bounded memory on binary input)
MAX_LINE_BYTES = 1 << 20
#: decompressed bytes parsed at a time: the columnar work has a per-block cost, so blocks are larger
#: than the stream's default (memory stays a small multiple of this). 12 MiB: ~6 % less CPU than 8 MiB
#: on a log of all kinds of lines, peak memory +1 %; 16 MiB: about the same CPU, peak +13 % (benchmarks.md, round 9)
BLOCK_BYTES = 12 << 20


def parse_nccl_log(path: str | Path, *, label: str | None = None, out: PartWriter | None = None,
                   block_size: int | None = None) -> dict[str, Any]:
    """Parse one NCCL / watchdog log into the ``nccl_*`` tables of ``out``.

    Returns ``{"warnings": [...], "lines": n, "partial": bool, "fingerprints": [...], "tables": {name: rows}}``.
    With ``out=None`` the tables themselves come back under ``"arrow"`` (tests, benchmark).
    ``block_size`` overrides the read block (bytes; tests use small blocks to cut lines across
    blocks). Raises :class:`IngestError` only when the file cannot be read at all.
    """
    path = Path(path)
    label = label or path.name
    collected: dict[str, list[pa.Table]] = {}
    sink = out if out is not None else _Collector(collected)
    state = LogState(label=label, sink=sink, on_flush=_before_flush)
    stream = ByteStream(path, block=block_size or BLOCK_BYTES, digest=False)  # ingest hashes each file once itself
    with _collector_paused():
        try:
            _parse_stream(state, stream)
        except OSError as exc:
            raise IngestError(f"{label}: cannot be read ({exc.strerror or exc})") from None
        partial = False
        if stream.error is not None:
            code, msg = stream.error
            state.warn(code, f"{label}: {msg}; kept the lines before it", byte_offset=stream.out_bytes)
            partial = True
        finish(state)
        for name in state.buffers:
            state.flush(name)
    info: dict[str, Any] = {"warnings": state.warnings, "lines": state.lines, "partial": partial,
                            "fingerprints": sorted(state.fingerprints)}
    if out is None:
        info["arrow"] = {spec: pa.concat_tables(ts) if ts else state.buffers[spec].to_arrow()
                         for spec, ts in ((n, collected.get(n, [])) for n in state.buffers)}
        info["tables"] = {n: t.num_rows for n, t in info["arrow"].items()}
    else:
        info["tables"] = dict(out.rows)
    return info


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while one file is parsed (and on again after, if it was on).

    A parse allocates millions of short-lived tuples, dicts and strings that hold no reference
    cycles (reference counting frees them), and every burst of allocations would otherwise start
    a collection that walks all live objects: 2 % of an init log's parse, 5 % of one rich in rare
    lines (the per-line handlers' rows).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Collector:
    """Stands in for a PartWriter when the caller wants the Arrow tables back."""

    def __init__(self, into: dict[str, list[pa.Table]]) -> None:
        self.into = into

    def append(self, name: str, data: pa.Table) -> None:
        self.into.setdefault(name, []).append(data)


def _before_flush(state: LogState, table: str, data: pa.Table) -> pa.Table:
    if table == "nccl_connections":
        return nccl_messages.resolve_inter_node(state, data)
    return data


def _parse_stream(state: LogState, stream: ByteStream) -> None:
    """Cut the decompressed blocks at line boundaries (a line may span blocks) and parse each piece."""
    pending = b""
    offset = 0  # decompressed offset of the first byte of `pending`
    line_no = 0
    bare: bool | None = None
    for block in stream:
        if bare is None:  # no NCCL prefix anywhere in the first block: the poster stripped it
            data = pending + block if pending else block
            bare = b"NCCL INFO" not in data and b"NCCL WARN" not in data
        first = block.find(b"\n")
        if first < 0:
            pending += block
        else:
            origin = offset + len(pending)  # decompressed offset of block[0]
            start = 0
            if pending:  # the line begun in earlier blocks, on its own: the block is not copied to prepend it
                line = pending + block[:first]
                line_no += 1
                _line(state, line, line_no, partial(_at, offset), bare, b"\x00" in line)
                start = first + 1
            cut = block.rfind(b"\n")
            if cut >= start:
                line_no += _parse_block(state, block, start, cut + 1, line_no, origin, bare)
            offset = origin + cut + 1
            pending = block[cut + 1:]
        if len(pending) > MAX_LINE_BYTES:
            state.long_lines += 1
            if state.junk_offset is None:
                state.junk_offset = offset
            offset += len(pending)
            line_no += 1
            pending = b""
    if pending:
        if bare is None:
            bare = b"NCCL INFO" not in pending and b"NCCL WARN" not in pending
        line_no += _parse_block(state, pending + b"\n", 0, len(pending) + 1, line_no, offset, bare)
    state.lines = line_no


def _parse_block(state: LogState, data: bytes, start: int, end: int, base: int, origin: int, bare: bool) -> int:
    """Parse the whole lines ``data[start:end]`` (``data[end - 1]`` is a newline; not sliced: the block is
    large); returns how many. ``base``: lines before them; ``origin``: decompressed offset of ``data[0]``."""
    state.comm_events.clear()
    la = None if bare else nccl_bulk.lines_array(data, start, end)
    has_nul = data.find(b"\x00", start, end) >= 0
    if la is None:  # bare mode or invalid UTF-8: every line through the per-line path
        lines = data[start:end - 1].split(b"\n")
        for i, raw in enumerate(lines):
            _line(state, raw, base + i + 1, partial(_offset_in_list, lines, i, origin + start), bare, has_nul)
        state.end_block()
        return len(lines)
    arr, offs, ascii_ok = la
    n = len(arr)
    block = nccl_bulk.prepare(arr, offs, ascii_ok, feed=not has_nul)
    nccl = np.zeros(n, dtype=bool)
    nccl[block.nccl] = True
    rest = nccl.copy()
    rest[block.taken] = False
    # program output: only '#' lines (nccl-tests) matter, and every line while a result table is open
    hashed = np.flatnonzero(np.frombuffer(data, dtype=np.uint8)[offs[:-1]] == ord("#"))  # by each line's first byte
    starts_hash = np.zeros(n, dtype=bool)
    starts_hash[hashed] = True
    starts_hash &= ~nccl
    if state.tests_table or (starts_hash.any() and pc.any(pc.match_substring_regex(arr.take(hashed), r"^#\s+size\s+count\s+type")).as_py()):
        rest |= ~nccl
    else:
        rest |= starts_hash
    if has_nul:
        nul = pc.match_substring(arr, "\x00").to_numpy(zero_copy_only=False) & ~nccl
        if nul.any():
            state.junk += int(nul.sum())
            rest &= ~nul
            if state.junk_offset is None:
                state.junk_offset = origin + int(offs[np.flatnonzero(nul)[0]])
    # lines whose prefix the bulk path cut (INFO, then WARN): replayed column by column where the memo
    # allows, the others go straight to the message handlers (fed[i] = their row; WARN rows from n_info)
    fed = np.full(n, -1, dtype=np.int64)
    cut = [(f, replay, codes) for f, replay, codes in ((block.fed, nccl_messages.replay_of, block.fed_msgs),
                                                        (block.warn, nccl_errors.warn_replay, None)) if f is not None and f.height]
    replays: list[tuple[pl.DataFrame, list[nccl_memo.Replay]]] = []
    left: list[pl.DataFrame] = []
    for frame, replay_of, codes in cut:
        replayed, reps, rows = nccl_memo.split_block(state, frame, replay_of, codes)
        if replayed.height:
            rest[replayed["i"].to_numpy()] = False
            replays.append((replayed, reps))
        fed[rows["i"].to_numpy()] = np.arange(rows.height) + sum(f.height for f in left)
        left.append(rows)
    n_info = left[0].height if cut and cut[0][0] is block.fed else 0
    msgs, hosts, pids, tids, devs = ([v for f in left for v in f[c].to_list()] for c in ("msg", "host", "pid", "tid", "cuda_dev"))
    dispatch, warn = nccl_messages.dispatch, partial(nccl_memo.dispatch, state, state.warn_memo, nccl_errors.warn_message)
    comms = nccl_bulk.BlockComms(state, dict(state.thread_comm))
    tests_open = None  # whether a result table is open after the block's nccl-tests lines (read in bulk)
    versions: dict[int, nccl_setup.BareVersion] = {}  # bare version lines (by line of the block): read once per text
    if not has_nul:
        versions = _unprefixed_lines(state, arr, rest, nccl & (fed < 0), base)
        tests = np.flatnonzero(rest & ~nccl)
        if len(tests):
            left, tests_open = nccl_tests.parse_lines(state, arr.take(tests), tests + (base + 1))
            rest[tests[~left]] = False
    idx = np.flatnonzero(rest)
    # line bounds as Python ints (indexing a numpy array per line costs more than the slice)
    starts, ends = offs[idx].tolist(), (offs[idx + 1] - 1).tolist()
    for i, k, s, e in zip(idx.tolist(), fed[idx].tolist(), starts, ends):
        if k >= n_info:
            warn(msgs[k], hosts[k], pids[k], tids[k], devs[k], base + i + 1)
            continue
        if k >= 0:
            if not dispatch(state, msgs[k], hosts[k], pids[k], tids[k], devs[k], base + i + 1):
                _unknown(state, data[s:e].decode("utf-8", "replace").rstrip("\r"), partial(_at, origin + s))
            continue
        v = versions.get(i)
        if v is not None:
            nccl_setup.add_bare_version(state, v, base + i + 1)
            continue
        _line(state, data[s:e], base + i + 1, partial(_at, origin + s), False, has_nul)
    if tests_open is not None:
        state.tests_table = tests_open
    for replayed, reps in replays:
        nccl_memo.add_rows(state, replayed, reps, base, partial(nccl_bulk.comm_attribution, comms=comms))
    nccl_bulk.finish(state, block, base, comms)
    state.end_block()
    return n


def _unprefixed_lines(state: LogState, arr: pa.LargeStringArray, rest: np.ndarray, cand: np.ndarray, base: int
                      ) -> dict[int, nccl_setup.BareVersion]:
    """Take the watchdog lines, and the lines no handler reads, among the block's lines ``rest & cand`` (NCCL
    lines left to the per-line path) off ``rest``, and add the watchdog records; each distinct text is
    read once. Returns what each bare ``NCCL version`` line among them adds (by its line in the block): they
    stay with the per-line pass, which adds their facts among other lines' facts.

    A watchdog log repeats its lines (every rank prints the same teardown notice, status and timeout
    lines differ in a few numbers), and so does text that mentions NCCL without a prefix (an
    environment echo, a launcher's notice): one line at a time, the routing cost more than the cached
    answer. What a text is is decided as :func:`_line` decides it (outside bare mode); the watchdog
    rows are put back in line order at the end of the file (:func:`watchdog.finish`).
    """
    idx = np.flatnonzero(rest & cand)
    if len(idx) == 0:
        return {}
    enc = pc.dictionary_encode(arr.take(idx))
    kinds = [_unprefixed(v) for v in enc.dictionary.to_pylist()]
    codes = enc.indices.to_numpy()
    taken = np.array([k[0] for k in kinds], dtype=bool)[codes]
    rest[idx[taken]] = False
    wd = np.array([k[1] is not None for k in kinds], dtype=bool)[codes]
    if wd.any():
        watchdog.add_records(state, [kinds[c][1] for c in codes[wd].tolist()], (idx[wd] + (base + 1)).tolist())
    got = {c: nccl_setup.bare_version(state, *k[2]) for c, k in enumerate(kinds) if k[2] is not None}
    if not got:
        return {}
    ver = np.array([k[2] is not None for k in kinds], dtype=bool)[codes]
    return {i: got[c] for i, c in zip(idx[ver].tolist(), codes[ver].tolist())}


def _unprefixed(value: str) -> tuple[bool, dict[str, Any] | None, tuple[re.Match[str], str] | None]:
    """(whether the per-line path can skip the line, its watchdog record, the version match and message of a
    bare ``NCCL version`` line) for one line (its text with the newline): a line with no NCCL prefix of either
    shape is a watchdog line, a bare version line (left to the per-line pass, which adds its facts among other
    lines' facts, as :func:`_slow_line` would) or nothing."""
    text = value[:-1] if value[-1:] == "\n" else value
    if text[-1:] == "\r":
        text = text[:-1]
    if _fast_prefix(text) is not None:
        return False, None, None
    m, v = _slow_shape(text)
    if m is not None:
        return False, None, None
    rec = watchdog.record_of(text)
    if rec is not None or v is None:
        return True, rec, None
    return False, None, (v, text[v.start():])


def _line(state: LogState, raw: bytes, ln: int, where: Callable[[], int], bare: bool, has_nul: bool) -> None:
    """One line through the per-line handlers (see module doc); ``where()`` gives its byte offset."""
    if b"NCCL" in raw:
        text = raw.decode("utf-8", "replace")
        if has_nul and "\x00" in text:
            text = text.replace("\x00", "")
        if text[-1:] == "\r":
            text = text[:-1]
        p = _fast_prefix(text)
        if p is not None:
            if not nccl_messages.dispatch(state, p[4], p[0], p[1], p[2], p[3], ln):
                _unknown(state, text, where)
        else:
            _slow_line(state, text, ln, where, bare)
    elif has_nul and b"\x00" in raw:
        _junk(state, where)
    elif raw[:1] == b"#" or state.tests_table:
        nccl_tests.parse_line(state, raw.decode("utf-8", "replace").rstrip("\r"), ln)
    elif bare and raw.strip():
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if "\ufffd" in text:
            _junk(state, where)
            return
        msg = _strip_wrapper(text)
        if msg and not nccl_messages.dispatch(state, msg, None, None, None, None, ln):
            watchdog.parse_line(state, text, ln)


_INFO = "] NCCL INFO "
_HOST_STOP = ":<>()[]"


def _fast_prefix(text: str) -> tuple[str, int, int, int, str] | None:
    """``... host:pid:tid [dev] NCCL INFO msg`` -> (host, pid, tid, dev, msg) by slicing; None for any other shape.

    String slicing instead of a regex search: a pattern that must find the host anywhere in the
    line is retried at every position, which costs more than the rest of the line's parse.
    """
    i = text.find(_INFO)
    if i < 0:
        return None
    j = text.rfind(" [", 0, i)
    if j < 0:
        return None
    dev = text[j + 2:i]
    k = text.rfind(" ", 0, j) + 1
    parts = text[k:j].rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit() or not dev.lstrip("-").isdigit():
        return None
    host = parts[0]
    for c in _HOST_STOP:  # a wrapper glued to the host: "[1,0]<stdout>:host"
        if c in host:
            host = host[host.rfind(c) + 1:]
    if not host:
        return None
    return host, int(parts[1]), int(parts[2]), int(dev), text[i + len(_INFO):]


def _slow_line(state: LogState, text: str, ln: int, where: Callable[[], int], bare: bool) -> None:
    """A line with ``NCCL`` but not the common ``host:pid:tid [dev] NCCL INFO`` shape."""
    m, v = _slow_shape(text)
    if m is not None:
        level = m.group("level")
        if level in ("TRACE", "CALL"):
            return
        g = m.group
        host = g("host")
        pid = int(g("pid")) if g("pid") else None
        tid = int(g("tid")) if g("tid") else None
        dev = int(g("dev")) if g("dev") else None
        msg = text[m.end():]
        if level == "WARN":
            nccl_errors.warn_line(state, msg, host, pid, tid, dev, g("src"), g("sline"), g("func"), ln)
            return
        if g("src") is not None:  # INFO has no file:line; what looked like one belongs to the message
            msg = f"{g('src')}:{g('sline')} {msg}"
        if not nccl_messages.dispatch(state, msg, host, pid, tid, dev, ln):
            _unknown(state, text, where)
        return
    if watchdog.parse_line(state, text, ln):
        return
    if v is not None:
        nccl_setup.version_line(state, v, None, None, None, None, text[v.start():], ln)
        return
    if bare:
        msg = _strip_wrapper(text)
        nccl_messages.dispatch(state, msg, None, None, None, None, ln)


#: distinct texts whose shape (:func:`_slow_shape`) is kept
MAX_SLOW_TEXTS = 1 << 14


@lru_cache(maxsize=MAX_SLOW_TEXTS)
def _slow_shape(text: str) -> tuple[re.Match[str] | None, re.Match[str] | None]:
    """(the NCCL prefix, else a bare ``NCCL version``) in a line of no common shape, found once per distinct
    text: bare ``NCCL version`` lines and many watchdog lines (teardown notices, ...) repeat whole."""
    lv = LEVEL_RE.search(text)
    # the prefix is at most ~200 characters before the level word; search only there
    m = PREFIX_RE.search(text, max(0, lv.start() - 200)) if lv is not None else None
    return m, None if m is not None else VERSION_RE.search(text)


def _strip_wrapper(text: str) -> str:
    """The text after any launcher wrapper (WRAPPER_RE can match the empty string, so it always matches)."""
    m = WRAPPER_RE.match(text)
    return text[m.end():] if m else text


def _offset_in_list(lines: list[bytes], i: int, offset: int) -> int:
    return offset + sum(len(x) + 1 for x in lines[:i])


def _at(offset: int) -> int:
    """A line's byte offset, known already (``where()`` of a line whose offset costs nothing to find)."""
    return offset


def _unknown(state: LogState, text: str, where: Callable[[], int]) -> None:
    state.unknown += 1
    if state.unknown_example is None:
        state.unknown_example = text.strip()[:160]
        state.unknown_offset = where()


def _junk(state: LogState, where: Callable[[], int]) -> None:
    state.junk += 1
    if state.junk_offset is None:
        state.junk_offset = where()


def finish(state: LogState) -> None:
    """End-of-file resolution (versions, nNodes, GDR per HCA, inter-node flags) and the file's warnings."""
    nccl_setup.finish(state, version_range(state.fingerprints))
    watchdog.finish(state)
    label = state.label
    if state.unknown:
        state.warn("unknown_lines", f"{label}: {state.unknown} NCCL line(s) in no known format, e.g. {state.unknown_example!r}",
                   byte_offset=state.unknown_offset, count=state.unknown)
    if state.junk or state.long_lines:
        what = []
        if state.junk:
            what.append(f"{state.junk} line(s) of binary data")
        if state.long_lines:
            what.append(f"{state.long_lines} run(s) of over {MAX_LINE_BYTES >> 20} MiB without a newline")
        state.warn("binary_junk", f"{label}: skipped {' and '.join(what)}", byte_offset=state.junk_offset,
                   count=state.junk + state.long_lines)
