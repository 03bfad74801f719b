"""Stream the elements of one large array inside a JSON object, in bounded memory.

A Kineto trace is ``{ <header keys>, "traceEvents": [ e0, e1, ... ], <trailer keys> }`` and can be
hundreds of MB. :class:`ArrayStreamer` reads decompressed blocks, parses the header keys once,
then decodes the array in chunks of complete elements, then parses the trailer keys.

A chunk is cut after an element's closing ``}`` that is followed by a comma; the byte after the
``}`` is overwritten with ``]`` in place so msgspec decodes the chunk straight from the buffer
(no copy). A cut that landed inside an element (a ``},`` inside nested ``args``) fails to decode
and is moved back to the previous candidate. When the input ends early (a killed job) the last
chunk is shortened to its last complete element and :attr:`truncated_at` records the
decompressed byte offset where valid data stops.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

_TRAILING_RE = re.compile(r"\(byte (\d+)\)")
_WS = b" \t\r\n"
_KEY_COLON_RE = re.compile(rb"\s*:\s*\[")
#: skims an array without building its elements (finds where it ends)
_SKIM = msgspec.json.Decoder(list[msgspec.Raw])


class NotAnArrayObject(Exception):
    """The input is not a JSON object holding the expected array key."""


class ArrayStreamer:
    """Split ``{..., key: [...], ...}`` into header, decoded element chunks and trailer.

    ``decode(buffer) -> list`` decodes a JSON array strictly (msgspec; raises
    ``msgspec.ValidationError`` on unexpected types, ``msgspec.DecodeError`` on bad syntax);
    ``fallback`` decodes with any types. Iterating yields one list of elements per chunk.
    Afterwards: ``header``, ``trailer`` (dicts), ``truncated_at`` (decompressed offset or None),
    ``lenient_chunks`` (chunks that needed the fallback).
    """

    def __init__(self, blocks: Iterable[bytes], *, decode: Callable[[Any], list], fallback: Callable[[Any], list],
                 key: bytes = b'"traceEvents"', chunk: int = 4 << 20, max_header: int = 256 << 20) -> None:
        self._blocks = iter(blocks)
        self._decode = decode
        self._fallback = fallback
        self.key = key
        self.chunk = chunk
        self.max_header = max_header
        self.header: dict[str, Any] = {}
        self.trailer: dict[str, Any] = {}
        self.truncated_at: int | None = None
        self.lenient_chunks = 0
        self._eof = False
        #: decompressed offset of the first byte of ``_pending[0]``
        self._base = 0
        self._pending: list[bytes] = []
        self._pending_len = 0

    # -- reading -------------------------------------------------------------------------
    def _read_until(self, want: int) -> None:
        while self._pending_len < want and not self._eof:
            try:
                b = next(self._blocks)
            except StopIteration:
                self._eof = True
                break
            if b:
                self._pending.append(b)
                self._pending_len += len(b)

    def _take(self) -> bytearray:
        """All pending bytes as one fresh buffer (one copy)."""
        buf = bytearray().join(self._pending)
        self._pending = []
        self._pending_len = 0
        return buf

    def _try(self, view: Any) -> list | None:
        """Decode a candidate chunk; None when its syntax is broken (cut in the wrong place)."""
        try:
            return self._decode(view)
        except msgspec.ValidationError:
            try:
                out = self._fallback(view)
            except msgspec.DecodeError:
                return None
            self.lenient_chunks += 1
            return out
        except msgspec.DecodeError:
            return None

    # -- phases --------------------------------------------------------------------------
    def __iter__(self) -> Iterator[list]:
        buf = self._find_array()
        yield from self._chunks(buf)

    def _find_array(self) -> bytearray:
        """Locate ``"key": [`` and parse the header. Returns the buffer starting at ``[``."""
        size = 1 << 20
        while True:
            self._read_until(size)
            buf = self._take()
            i = buf.find(b"{")
            if i < 0 or buf[:i].strip(_WS + b"\xef\xbb\xbf"):
                raise NotAnArrayObject("not a JSON object")
            pos = buf.find(self.key)
            if pos >= 0:
                break
            if self._eof or size >= self.max_header:
                raise NotAnArrayObject(f"no {self.key.decode()} array")
            self._pending, self._pending_len = [bytes(buf)], len(buf)
            size *= 4
        j = pos + len(self.key)
        if len(buf) < j + 4096 and not self._eof:
            self._pending, self._pending_len = [bytes(buf)], len(buf)
            self._read_until(j + 4096)
            buf = self._take()
        m = _KEY_COLON_RE.match(buf, j)
        if not m:
            raise NotAnArrayObject(f"{self.key.decode()} is not an array")
        head = bytes(buf[:pos]).rstrip(_WS)
        if head.endswith(b","):
            head = head[:-1]
        try:
            obj = msgspec.json.decode(head + b"}")
        except msgspec.DecodeError:
            obj = {}
        self.header = obj if isinstance(obj, dict) else {}
        start = m.end() - 1
        self._base = start
        return buf[start:]

    def _chunks(self, buf: bytearray) -> Iterator[list]:
        """``buf`` always starts with ``[`` followed by the next element."""
        while True:
            self._pending, self._pending_len = [bytes(buf)] if buf else [], len(buf)
            self._read_until(self.chunk)
            buf = self._take()
            if self._eof:
                yield from self._final(buf)
                return
            cut = _last_cut(buf, len(buf))
            out = None
            while cut > 0:
                out = self._decode_prefix(buf, cut)
                if out is not None:
                    break
                cut = _last_cut(buf, cut - 1)
            if out is None:  # one element larger than the chunk: read more and retry
                self.chunk *= 2
                continue
            rest = cut
            while buf[rest] in _WS:
                rest += 1
            # buf[rest] is the comma after the element: the next chunk starts there, as '['
            tail = bytearray(b"[") + buf[rest + 1 :]
            self._base += rest
            yield out
            buf = tail

    def _decode_prefix(self, buf: bytearray, cut: int) -> list | None:
        """Decode ``buf[:cut]`` + ``]`` in place (the byte at ``cut`` is restored afterwards)."""
        if cut >= len(buf):
            return self._decode_copy(buf, cut)
        saved = buf[cut]
        buf[cut] = 0x5D  # ']'
        try:
            return self._try(memoryview(buf)[: cut + 1])
        finally:
            buf[cut] = saved

    def _final(self, buf: bytearray) -> Iterator[list]:
        """Input ended: ``buf`` is ``[ ... ] , trailer }`` or a truncated array."""
        arr_end = _array_end(buf)
        if arr_end > 0:
            out = self._try(memoryview(buf)[:arr_end])
            if out is not None:
                yield out
                if not self._parse_trailer(bytes(buf[arr_end:])):
                    # cut after the events, inside the trailer: every event is intact, the file is not
                    self.truncated_at = self._base + len(buf)
                return
        # truncated (or malformed near the end): keep the longest valid prefix of elements
        cut = _last_cut(buf, len(buf), allow_end=True)
        tries = 0
        while cut > 0 and tries < 64:
            out = self._decode_prefix(buf, cut)
            if out is not None:
                self.truncated_at = self._base + cut
                yield out
                return
            cut = _last_cut(buf, cut - 1, allow_end=True)
            tries += 1
        if cut > 0:  # many broken candidates: salvage element by element
            out, end = _salvage_elements(bytes(buf), self._try)
            self.truncated_at = self._base + max(end, 1)
            if out:
                yield out
            return
        self.truncated_at = self._base

    def _decode_copy(self, buf: bytearray, cut: int) -> list | None:
        return self._try(bytes(buf[:cut]) + b"]")

    def _parse_trailer(self, rest: bytes) -> bool:
        """Read the keys after the array; False when the object never closes (file cut there)."""
        rest = rest.strip(_WS)
        if rest.startswith(b","):
            rest = rest[1:].strip(_WS)
        if rest == b"}":
            return True
        if not rest:
            return False  # cut right after the array: the closing brace is missing
        try:
            obj = msgspec.json.decode(b"{" + rest)
            if isinstance(obj, dict):
                self.trailer = obj
            return True
        except msgspec.DecodeError:
            # the file was cut inside the trailer: every event is intact; keep the keys that parse
            self.trailer = _salvage_keys(rest)
            return False


def _array_end(buf: bytearray) -> int:
    """Offset after the ``]`` closing the array (the array is skimmed, not decoded)."""
    try:
        _SKIM.decode(buf)
        return len(buf)
    except msgspec.ValidationError:
        return -1
    except msgspec.DecodeError as exc:
        msg = str(exc)
        m = _TRAILING_RE.search(msg)
        if not (m and "trailing" in msg):
            return -1
        # msgspec reports the 1-based position of the first trailing character
        return buf.rfind(b"]", 0, int(m.group(1))) + 1 or -1


def _last_cut(buf: bytearray, end: int, *, allow_end: bool = False) -> int:
    """Offset just after the last ``}`` before ``end`` followed by ``,`` (or by ``]``/EOF)."""
    n = len(buf)
    while True:
        i = buf.rfind(b"}", 0, end)
        if i < 0:
            return -1
        k = i + 1
        while k < n and buf[k] in _WS:
            k += 1
        if k < n and buf[k] == 0x2C:  # ','
            return i + 1
        if allow_end and (k >= n or buf[k] == 0x5D):  # ']' or end of data
            return i + 1
        end = i


def _salvage_elements(data: bytes, decode: Callable[[Any], list | None]) -> tuple[list, int]:
    """Slow path: decode elements one at a time from the start of ``data`` (``[`` first)."""
    out: list = []
    pos = 1
    end_ok = 0
    skim = msgspec.json.Decoder()
    while True:
        while pos < len(data) and data[pos] in _WS + b",":
            pos += 1
        if pos >= len(data) or data[pos] != 0x7B:
            break
        end = data.find(b"}", pos)
        got = None
        while end > 0:
            try:
                skim.decode(data[pos : end + 1])
                got = end + 1
                break
            except msgspec.DecodeError:
                end = data.find(b"}", end + 1)
        if got is None:
            break
        piece = decode(b"[" + data[pos:got] + b"]")
        if piece:
            out.extend(piece)
        pos = end_ok = got
    return out, end_ok


def _salvage_keys(rest: bytes) -> dict[str, Any]:
    """Parse ``"k": v, "k2": v2, ...`` pairs one by one, stopping at the first broken one."""
    out: dict[str, Any] = {}
    for m in re.finditer(rb'"([A-Za-z_]+)"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?)', rest):
        try:
            out[m.group(1).decode()] = msgspec.json.decode(m.group(2))
        except msgspec.DecodeError:
            break
    return out
