"""GRAPH-subsystem topology dumps -> ``nccl_topology``.

NCCL prints the system tree recursively (``ncclTopoPrintRec``): a node, then one ``+ TYPE[bw] -
NODE`` line per link, indented to the column where the node's own text started, with PCI
children printed inline after their link. So the parent of a link line is the last node printed
at the link's indentation column; that is tracked per thread in ``LogState.topo_cols``. Path
dumps (``GPU/2A000 :GPU/AB000 (3/10.0/SYS) ...``) and graph searches (``Pattern ..`` followed by
`` 0 : GPU/0 GPU/1`` channel lines) are rows of the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stallscope.ingest.schemas import nccl as F

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState

Host = str | None
Num = int | None


def topology(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """One topology-dump message; False when it is none of the known shapes."""
    key = (host, pid, tid)
    m = F.TOPO_LINK_RE.match(msg)
    if m is not None:
        cols = state.topo_cols.setdefault(key, {})
        ind = len(m.group("ind"))
        cols[m.start("node")] = m.group("node")
        _row(state, host, pid, tid, dev, ln, kind="link", node=cols.get(ind), peer=m.group("node"), node_info=m.group("info"),
             link_type=m.group("type"), bw_gbs=float(m.group("bw")))
        return True
    m = F.TOPO_NODE_RE.match(msg)
    if m is not None:
        ind = len(m.group("ind"))
        cols = state.topo_cols.setdefault(key, {})
        if ind == 0:
            cols.clear()
        cols[ind] = m.group("node")
        _row(state, host, pid, tid, dev, ln, kind="node", node=m.group("node"), node_info=m.group("info"))
        return True
    m = F.TOPO_PATH_RE.match(msg)
    if m is not None:
        for e in F.TOPO_PATH_ENTRY_RE.finditer(m.group("rest")):
            _row(state, host, pid, tid, dev, ln, kind="path", node=m.group("node"), peer=e.group("node"),
                 hops=int(e.group("hops")), bw_gbs=float(e.group("bw")), link_type=e.group("type"))
        return True
    m = F.PATTERN_RE.match(msg)
    if m is not None:
        state.fingerprints.add("graph_pattern")
        seq = state.graph_seq.get(key, 0)
        state.graph_seq[key] = seq + 1
        _row(state, host, pid, tid, dev, ln, kind="graph", pattern=int(m.group("p")), cross_nic=int(m.group("cn")),
             n_channels=int(m.group("nc")), bw_intra_gbs=float(m.group("bi")), bw_inter_gbs=float(m.group("be")),
             type_intra=m.group("ti"), type_inter=m.group("te"), same_channels=int(m.group("sc")), graph_seq=seq)
        return True
    m = F.GRAPH_CHANNEL_RE.match(msg)
    if m is not None and msg[:1] == " ":
        last = state.graph_seq.get(key)
        _row(state, host, pid, tid, dev, ln, kind="graph_channel", channel=int(m.group("ch")), detail=m.group("path"),
             graph_seq=None if last is None else last - 1)
        return True
    if msg.startswith("=="):
        text = msg.strip("= ")
        if text:
            _row(state, host, pid, tid, dev, ln, kind="system", detail=text)
        return True
    return False


def _row(state: LogState, host: Host, pid: Num, tid: Num, dev: Num, ln: int, **fields: object) -> None:
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(fields)
    state.add_dict("nccl_topology", d)
