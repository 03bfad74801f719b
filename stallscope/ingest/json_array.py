"""Stream the elements of one large array inside a JSON object, in bounded memory.

A Kineto trace is ``{ <header keys>, "traceEvents": [ e0, e1, ... ], <trailer keys> }`` and can be
hundreds of MB. :class:`ArrayStreamer` reads decompressed blocks, parses the header keys once,
then hands out the array in chunks of complete elements (as bytes ``[e_i, ..., e_j]`` that
msgspec decodes at C speed), then parses the trailer keys.

Chunks are cut after an element's closing ``}`` that is followed by a comma; msgspec validates
each chunk, and a cut that landed inside an element (a ``},`` inside nested ``args``) is simply
moved back to the previous candidate. When the input ends early (a killed job) the last chunk is
shortened to its last complete element and :attr:`truncated_at` records the decompressed byte
offset where valid data stops.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

_TRAILING_RE = re.compile(rb"\(byte (\d+)\)")
_WS = b" \t\r\n"


class NotAnArrayObject(Exception):
    """The input is not a JSON object holding the expected array key."""


class ArrayStreamer:
    """Split ``{..., key: [...], ...}`` into header, decoded element chunks and trailer.

    ``decode(bytes) -> list`` decodes a JSON array strictly (msgspec; raises
    ``msgspec.ValidationError`` on unexpected types, ``msgspec.DecodeError`` on bad syntax);
    ``fallback`` decodes with any types. Iterate to get ``(elements, strict)`` per chunk.
    Afterwards: ``header``, ``trailer`` (dicts), ``truncated_at`` (decompressed offset or None).
    """

    def __init__(self, blocks: Iterable[bytes], *, decode: Callable[[bytes], list], fallback: Callable[[bytes], list],
                 key: bytes = b'"traceEvents"', chunk: int = 16 << 20, max_header: int = 256 << 20) -> None:
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
        #: decompressed offset of the first byte of the buffer
        self._base = 0
        self._buf = bytearray()
        self._eof = False

    # -- block reading -------------------------------------------------------------------
    def _fill(self, want: int) -> bool:
        """Read blocks until the buffer holds ``want`` bytes or input ends. False at EOF."""
        while len(self._buf) < want and not self._eof:
            try:
                self._buf += next(self._blocks)
            except StopIteration:
                self._eof = True
        return len(self._buf) >= want

    def _try(self, piece: bytes) -> list | None:
        """Decode a candidate chunk; None when its syntax is broken (cut in the wrong place)."""
        try:
            return self._decode(piece)
        except msgspec.ValidationError:
            try:
                out = self._fallback(piece)
            except msgspec.DecodeError:
                return None
            self.lenient_chunks += 1
            return out
        except msgspec.DecodeError:
            return None

    # -- phases --------------------------------------------------------------------------
    def __iter__(self) -> Iterator[list]:
        start = self._find_array()
        del self._buf[:start]  # buffer now starts at the '[' of the array
        self._base += start
        yield from self._chunks()

    def _find_array(self) -> int:
        """Locate ``"key": [`` and parse the header. Returns the offset of ``[``."""
        size = 1 << 20
        while True:
            self._fill(size)
            i = self._buf.find(b"{")
            if i < 0 or self._buf[:i].strip(_WS + b"\xef\xbb\xbf"):
                raise NotAnArrayObject("not a JSON object")
            pos = self._buf.find(self.key)
            if pos >= 0:
                break
            if self._eof or size >= self.max_header:
                raise NotAnArrayObject(f"no {self.key.decode()} array")
            size *= 4
        j = pos + len(self.key)
        self._fill(j + 4096)
        m = re.compile(rb"\s*:\s*\[").match(self._buf, j)
        if not m:
            raise NotAnArrayObject(f"{self.key.decode()} is not an array")
        head = bytes(self._buf[:pos]).rstrip(_WS)
        if head.endswith(b","):
            head = head[:-1]
        try:
            obj = msgspec.json.decode(head + b"}")
        except msgspec.DecodeError:
            obj = {}
        self.header = obj if isinstance(obj, dict) else {}
        return m.end() - 1

    def _chunks(self) -> Iterator[list]:
        while True:
            full = self._fill(self.chunk)
            if not (full and not self._eof):
                yield from self._final()
                return
            cut = self._last_cut(len(self._buf))
            out = None
            while cut > 0:
                out = self._try(bytes(self._buf[:cut]) + b"]")
                if out is not None:
                    break
                cut = self._last_cut(cut - 1)
            if out is None:
                # one element larger than the chunk (or no cut found): read more and retry
                if self._eof:
                    yield from self._final()
                    return
                self.chunk *= 2
                continue
            rest = cut
            while rest < len(self._buf) and self._buf[rest] in _WS:
                rest += 1
            # self._buf[rest] is the comma: keep it as the new '[' of the next chunk
            self._base += rest
            del self._buf[:rest]
            self._buf[0:1] = b"["
            yield out

    def _final(self) -> Iterator[list]:
        """Input ended: the buffer is ``[ ... ] , trailer }`` or a truncated array."""
        data = bytes(self._buf)
        arr_end = self._array_end(data)
        if arr_end > 0:
            out = self._try(data[:arr_end])
            if out is not None:
                yield out
                self._parse_trailer(data[arr_end:])
                return
        # truncated (or malformed near the end): keep the longest valid prefix of elements
        cut = self._last_cut(len(data), allow_end=True)
        tries = 0
        while cut > 0 and tries < 64:
            out = self._try(data[:cut] + b"]")
            if out is not None:
                self.truncated_at = self._base + cut
                yield out
                return
            cut = self._last_cut(cut - 1, allow_end=True)
            tries += 1
        if cut > 0:  # give up on this chunk's tail after many tries: salvage element by element
            out = self._salvage_elements(data)
            self.truncated_at = self._base + (self._salvaged_end or 1)
            if out:
                yield out
            return
        self.truncated_at = self._base

    _salvaged_end = 0

    def _array_end(self, data: bytes) -> int:
        """Offset after the ``]`` closing the array: the last ``]`` whose tail is a valid trailer."""
        end = len(data)
        for _ in range(64):
            p = data.rfind(b"]", 0, end)
            if p < 0:
                return -1
            tail = data[p + 1 :].strip(_WS)
            if tail == b"" or tail == b"}":
                return p + 1
            if tail.startswith(b","):
                try:
                    if isinstance(msgspec.json.decode(b"{" + tail[1:]), dict):
                        return p + 1
                except msgspec.DecodeError:
                    pass
            end = p
        return -1

    def _salvage_elements(self, data: bytes) -> list:
        """Slow path: decode elements one at a time from the start of ``data``."""
        out: list = []
        pos = 1
        dec = msgspec.json.Decoder()
        while True:
            while pos < len(data) and data[pos] in _WS + b",":
                pos += 1
            if pos >= len(data) or data[pos] != 0x7B:
                break
            end = data.find(b"}", pos)
            got = None
            while end > 0:
                try:
                    dec.decode(data[pos : end + 1])
                    got = end + 1
                    break
                except msgspec.DecodeError:
                    end = data.find(b"}", end + 1)
            if got is None:
                break
            piece = self._try(b"[" + data[pos:got] + b"]")
            if piece:
                out.extend(piece)
            pos = got
            self._salvaged_end = got
        return out

    def _parse_trailer(self, rest: bytes) -> None:
        rest = rest.strip(_WS)
        if rest.startswith(b","):
            rest = rest[1:].strip(_WS)
        if not rest or rest == b"}":
            return
        try:
            obj = msgspec.json.decode(b"{" + rest)
            if isinstance(obj, dict):
                self.trailer = obj
        except msgspec.DecodeError:
            # the file was cut inside the trailer: every event is intact; keep the keys that parse
            self.trailer = _salvage_keys(rest)

    def _last_cut(self, end: int, *, allow_end: bool = False) -> int:
        """Offset just after the last ``}`` before ``end`` followed by ``,`` (or by ``]``/EOF)."""
        buf = self._buf
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


def _salvage_keys(rest: bytes) -> dict[str, Any]:
    """Parse ``"k": v, "k2": v2, ...`` pairs one by one, stopping at the first broken one."""
    out: dict[str, Any] = {}
    for m in re.finditer(rb'"([A-Za-z_]+)"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?)', rest):
        try:
            out[m.group(1).decode()] = msgspec.json.decode(m.group(2))
        except msgspec.DecodeError:
            break
    return out
