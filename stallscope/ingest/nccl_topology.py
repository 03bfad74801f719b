"""GRAPH-subsystem topology dumps -> ``nccl_topology``.

NCCL prints the system tree recursively (``ncclTopoPrintRec``): a node, then one ``+ TYPE[bw] -
NODE`` line per link, indented to the column where the node's own text started, with PCI
children printed inline after their link. So the parent of a link line is the last node printed
at the link's indentation column; that is tracked per thread in ``LogState.topo_cols``. Path
dumps (``GPU/2A000 :GPU/AB000 (3/10.0/SYS) ...``) and graph searches (``Pattern ..`` followed by
`` 0 : GPU/0 GPU/1`` channel lines) are rows of the same table.

Every rank of a host prints the same dump (the hosts of a cluster are alike), so each distinct
message is read once (:func:`_parse`, cached) into rows with the per-line values left out; a line
then fills in its prefix, line number and the per-thread state (the link's parent node, the
graph-search counter).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from stallscope.ingest.schemas import nccl as F
from stallscope.store.schema.nccl import NCCL_TOPOLOGY

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState

Host = str | None
Num = int | None

_COLUMNS = NCCL_TOPOLOGY.schema.names
_AT = {c: i for i, c in enumerate(_COLUMNS)}
_NODE, _SEQ, _FILE, _LINE = _AT["node"], _AT["graph_seq"], _AT["file"], _AT["line_no"]
#: distinct messages whose parse is kept (a host's dump is a few hundred lines)
MAX_MESSAGES = 1 << 14

#: one message read: (kind, indentation column, column where the node starts, node, rows); rows are
#: full rows of ``nccl_topology`` in column order with the per-line values still None
Parsed = tuple[str, int, int, "str | None", tuple[tuple[Any, ...], ...]]


def topology(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """One topology-dump message; False when it is none of the known shapes."""
    p = _parse(msg)
    if p is None:
        return False
    kind, ind, start, node, rows = p
    key = (host, pid, tid)
    fill: Any = None  # the state-dependent column: a link's parent node, or the graph search's index
    if kind == "link":
        cols = state.topo_cols.setdefault(key, {})
        cols[start] = node  # type: ignore[assignment]
        fill = cols.get(ind)
    elif kind == "node":
        cols = state.topo_cols.setdefault(key, {})
        if ind == 0:
            cols.clear()
        cols[ind] = node  # type: ignore[assignment]
    elif kind == "graph":
        state.fingerprints.add("graph_pattern")
        fill = state.graph_seq.get(key, 0)
        state.graph_seq[key] = fill + 1
    elif kind == "graph_channel":
        last = state.graph_seq.get(key)
        fill = None if last is None else last - 1
    at = _NODE if kind == "link" else _SEQ
    for r in rows:
        row = list(r)
        row[:4] = host, pid, tid, dev
        row[_FILE], row[_LINE] = state.label, ln
        if fill is not None:
            row[at] = fill
        state.add("nccl_topology", tuple(row))
    return True


@lru_cache(maxsize=MAX_MESSAGES)
def _parse(msg: str) -> Parsed | None:
    """The rows one message gives, without its line's values; None when it is no topology message."""
    m = F.TOPO_LINK_RE.match(msg)
    if m is not None:
        row = _row(kind="link", peer=m.group("node"), node_info=m.group("info"), link_type=m.group("type"),
                   bw_gbs=float(m.group("bw")))
        return "link", len(m.group("ind")), m.start("node"), m.group("node"), (row,)
    m = F.TOPO_NODE_RE.match(msg)
    if m is not None:
        row = _row(kind="node", node=m.group("node"), node_info=m.group("info"))
        return "node", len(m.group("ind")), 0, m.group("node"), (row,)
    m = F.TOPO_PATH_RE.match(msg)
    if m is not None:
        rows = tuple(_row(kind="path", node=m.group("node"), peer=e.group("node"), hops=int(e.group("hops")),
                          bw_gbs=float(e.group("bw")), link_type=e.group("type"))
                     for e in F.TOPO_PATH_ENTRY_RE.finditer(m.group("rest")))
        return "path", 0, 0, None, rows
    m = F.PATTERN_RE.match(msg)
    if m is not None:
        row = _row(kind="graph", pattern=int(m.group("p")), cross_nic=int(m.group("cn")), n_channels=int(m.group("nc")),
                   bw_intra_gbs=float(m.group("bi")), bw_inter_gbs=float(m.group("be")), type_intra=m.group("ti"),
                   type_inter=m.group("te"), same_channels=int(m.group("sc")))
        return "graph", 0, 0, None, (row,)
    m = F.GRAPH_CHANNEL_RE.match(msg)
    if m is not None and msg[:1] == " ":
        return "graph_channel", 0, 0, None, (_row(kind="graph_channel", channel=int(m.group("ch")), detail=m.group("path")),)
    if msg.startswith("=="):
        text = msg.strip("= ")
        return "system", 0, 0, None, (_row(kind="system", detail=text),) if text else ()
    return None


def _row(**fields: object) -> tuple[Any, ...]:
    return tuple(map(fields.get, _COLUMNS))
