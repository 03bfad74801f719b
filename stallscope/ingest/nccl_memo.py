"""Parse each distinct NCCL INFO message once per file, replay it for every line that repeats it.

Setup lines repeat: every rank of a job prints the same ``NCCL_SOCKET_IFNAME set by environment
to ..``, ``NET/IB : Using ..``, ``Using network IB``, ``cudaDriverVersion ..``, ``Connected all
rings`` ..., and only the prefix (host, pid, tid, device) and the line number differ. Most
message handlers are *pure*: what they add depends on the message alone, plus the prefix fields
and the thread's communicator, which they copy into rows without looking at them.

:func:`dispatch` runs the handler once against a :class:`_Recorder` that stands in for the
:class:`~stallscope.ingest.nccl_state.LogState`: prefix fields and the communicator are
placeholder objects, and rows, deferred rows and fingerprints are recorded. Later lines with
the same message replay the recording with their own values in place of the placeholders, so
the rows are identical to what the handler would have added. A handler that touches any other
part of the state (per-thread communicator tracking, topology indentation, versions, rank ->
host) raises ``AttributeError`` on the recorder (computing with a placeholder raises
``TypeError``): that message is marked impure and always runs for real. The handlers were checked
for branches on a prefix field that do not touch the state (there are none). Connection,
communicator, version, topology and COLL messages are not tried at all (``nccl_messages``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState

#: distinct messages remembered per file before the memo is emptied (bounded memory)
MAX_MESSAGES = 50_000


class _Slot:
    """A placeholder for one per-line value in a recorded row (``index`` into the values of :meth:`Replay.apply`)."""

    __slots__ = ("name", "index")

    def __init__(self, name: str, index: int) -> None:
        self.name, self.index = name, index

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<{self.name}>"

    def _used(self, *_: Any) -> Any:
        """A handler that looks at a per-line value (tests it, compares, formats or hashes it) is
        not pure: raising here makes :func:`dispatch` mark the message impure."""
        raise TypeError(f"handler used the per-line value {self.name}")

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __str__ = __format__ = _used  # type: ignore[assignment]


HOST, PID, TID, DEV, LINE, COMM_ID, COMM_PTR = (_Slot(n, i) for i, n in enumerate(
    ("host", "pid", "tid", "dev", "line", "comm_id", "comm_ptr")))


class _DeferredRecorder:
    """``state.deferred[name]`` while recording: appends are kept as ``("deferred", name, dict)``."""

    def __init__(self, out: list[tuple[str, str, Any]], name: str) -> None:
        self.out, self.name = out, name

    def append(self, d: dict[str, Any]) -> None:
        self.out.append(("deferred", self.name, d))


class _Recorder:
    """The part of LogState a pure handler may use; anything else is missing (AttributeError)."""

    def __init__(self, state: LogState) -> None:
        self.label = state.label
        self.effects: list[tuple[str, str, Any]] = []
        self.fingerprints: set[str] = set()
        self.deferred = {name: _DeferredRecorder(self.effects, name) for name in state.deferred}
        self._columns = {name: buf.columns for name, buf in state.buffers.items()}

    def ctx(self, host: Any, pid: Any, tid: Any, dev: Any, ln: Any) -> dict[str, Any]:
        return {"host": host, "pid": pid, "tid": tid, "cuda_dev": dev, "file": self.label, "line_no": ln}

    def comm_of(self, host: Any, pid: Any, tid: Any) -> tuple[Any, Any]:
        return COMM_ID, COMM_PTR

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        self.effects.append(("row", table, row))

    def add_dict(self, table: str, d: dict[str, Any]) -> None:
        self.add(table, tuple(map(d.get, self._columns[table])))


class Replay:
    """What one message did: the handler's answer, fingerprints, and rows with placeholder positions."""

    __slots__ = ("ok", "fingerprints", "rows", "comm")

    def __init__(self, ok: bool, rec: _Recorder) -> None:
        self.ok = ok
        self.fingerprints = frozenset(rec.fingerprints)
        self.comm = False  # whether some row holds the thread's communicator
        self.rows: list[tuple[str, str, Any, tuple[tuple[Any, int], ...]]] = []
        for kind, table, data in rec.effects:
            items = enumerate(data) if kind == "row" else data.items()
            subs = tuple((k, v.index) for k, v in items if isinstance(v, _Slot))
            self.comm = self.comm or any(v >= COMM_ID.index for _, v in subs)
            self.rows.append((kind, table, list(data) if kind == "row" else data, subs))

    def apply(self, state: LogState, host: Any, pid: Any, tid: Any, dev: Any, ln: int) -> bool:
        """Add this message's rows for one line (the values that replace the placeholders)."""
        if self.fingerprints:
            state.fingerprints |= self.fingerprints
        vals = (host, pid, tid, dev, ln, *(state.comm_of(host, pid, tid) if self.comm else (None, None)))
        for kind, table, data, subs in self.rows:
            out = data.copy()
            for k, slot in subs:
                out[k] = vals[slot]
            if kind == "row":
                state.add(table, tuple(out))
            else:
                state.deferred[table].append(out)
        return self.ok


Handler = Callable[..., bool]
_UNSEEN = object()


def dispatch(state: LogState, memo: dict[str, Replay | None], handler: Handler, msg: str, host: Any, pid: Any, tid: Any,
             dev: Any, ln: int) -> bool:
    """``handler(state, msg, ...)``, parsed once per distinct ``msg`` when the handler proves pure."""
    rep = memo.get(msg, _UNSEEN)
    if isinstance(rep, Replay):
        return rep.apply(state, host, pid, tid, dev, ln)
    if rep is None:  # impure: always for real
        return handler(state, msg, host, pid, tid, dev, ln)
    if len(memo) >= MAX_MESSAGES:
        memo.clear()
    rec = _Recorder(state)
    try:
        ok = handler(rec, msg, HOST, PID, TID, DEV, LINE)
    except (AttributeError, TypeError):  # it used the state, or computed with a placeholder
        memo[msg] = None
        return handler(state, msg, host, pid, tid, dev, ln)
    rep = memo[msg] = Replay(ok, rec)
    return rep.apply(state, host, pid, tid, dev, ln)
