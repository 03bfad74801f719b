"""NCCL INFO messages about how ranks are connected -> ``nccl_connections``, ``nccl_channels``, ``nccl_colls``.

:func:`dispatch` receives the text after the line prefix plus the prefix fields, picks a handler
by the message's first word (a dict lookup, so unrelated handlers cost nothing) and returns
whether the message was understood. Handlers append rows to the
:class:`~stallscope.ingest.nccl_state.LogState` and note which version fingerprints
(``schemas.nccl.FINGERPRINTS``) the line's format shows. Patterns live in ``schemas/nccl.py``.
Setup facts (communicators, network, env, ...) are handled in ``nccl_setup``, topology dumps in
``nccl_topology``, warnings and error traces in ``nccl_errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from stallscope.ingest import nccl_errors, nccl_memo, nccl_setup, nccl_topology
from stallscope.ingest.nccl_state import arrow_table, opt_int
from stallscope.ingest.schemas import nccl as F

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState

Host = str | None
Num = int | None
Handler = Callable[["LogState", str, Host, Num, Num, Num, int], bool]

#: column order of the two hot tables, built as positional tuples (a test keeps them equal to the specs)
CONN_COLUMNS = ("host", "pid", "tid", "cuda_dev", "comm_id", "comm_ptr", "channel", "conn_index", "src_rank", "src_dev",
                "src_bus_id", "dst_rank", "dst_dev", "dst_bus_id", "dev_is_bus_id", "direction", "transport", "mechanism",
                "transport_detail", "net", "net_dev", "gdr", "gdr_pci", "pxn_proxy_rank", "shared", "read", "ce",
                "indirect_rank", "printer_rank", "inter_node", "file", "line_no")
COLL_COLUMNS = ("host", "pid", "tid", "cuda_dev", "op", "op_count", "sendbuff", "recvbuff", "count", "datatype",
                "datatype_name", "bytes", "redop", "redop_name", "root", "peer", "comm_ptr", "nranks", "stream", "file", "line_no")


# -- connections -----------------------------------------------------------------------------


def _bracket(s: str | None) -> tuple[int | None, str | None, bool | None]:
    """Bracket text -> (value, busId text or None, is busId). BusIds are hex with >= 4 digits; indices are small decimals."""
    if not s:
        return None, None, None
    if len(s) >= 4 or not s.isdigit():
        return int(s, 16), s, True
    return int(s), None, False


def classify_via(via: str, fp: set[str]) -> tuple[str, str | None, str | None, int | None, bool | None, bool | None, int | None,
                                         bool | None, bool | None, bool | None, int | None]:
    """Classify the text after ``via``.

    Returns (transport, mechanism, net, net_dev, gdr, gdr_pci, pxn_proxy_rank, shared, read, ce, indirect_rank).
    """
    if via.startswith(("NET/", "COLLNET/")):
        m = F.NET_VIA_RE.match(via)
        if m is not None:
            rest = m.group("rest")
            proxy = opt_int(m.group("proxy"))
            if proxy is not None:
                fp.add("net_pxn")
            shared = "/Shared" in rest
            if shared:
                fp.add("net_shared")
            pci = "(PCI)" in rest
            if pci:
                fp.add("net_gdr_pci")
            return (m.group("t"), None, m.group("net"), int(m.group("dev")), "/GDRDMA" in rest, pci, proxy, shared,
                    None, None, None)
        return via.split("/", 1)[0], None, None, None, None, None, None, None, None, None, None
    if via.startswith("P2P/"):
        body = via[4:]
        read = "/read" in body
        if read:
            fp.add("p2p_read")
        indirect = None
        if body.startswith("indirect/"):
            mech = "indirect"
            fp.add("p2p_indirect")
            im = F.INDIRECT_RE.match(body)
            indirect = int(im.group("rank")) if im else None
        else:
            mech = body.split("/", 1)[0]
            if mech == "CUMEM":
                fp.add("p2p_cumem")
            elif mech == "MNNVL":
                fp.add("p2p_mnnvl")
        return "P2P", mech, None, None, None, None, None, None, read, "/CE" in body, indirect
    if via == "direct shared memory":
        fp.add("shm_direct_shared_memory")
        return "SHM", via, None, None, None, None, None, None, None, False, None
    if via.startswith("SHM"):
        shm_mode = via[4:] or None
        if shm_mode is not None:
            fp.add("shm_two_modes" if shm_mode.count("/") == 1 else "shm_one_mode")
        return "SHM", shm_mode, None, None, None, None, None, None, None, "CE" in (shm_mode or ""), None
    return via.split("/", 1)[0], (via.split("/", 1)[1] if "/" in via else None), None, None, None, None, None, None, None, None, None


def connection_fingerprints(fp: set[str], kw: str, ci: str | None, is_bus: bool | None, transport: str | None) -> None:
    """Version fingerprints shown by a connection line's shape (Ring/Channel, /connIndex, bracket kind)."""
    if kw == "Ring":
        fp.add("conn_ring")
        if is_bus:
            fp.add("conn_ring_busid")
        if transport == "NET" and is_bus is None:
            fp.add("net_ring_nobracket")
    elif transport in ("NET", "P2P"):
        key = "net" if transport == "NET" else "p2p"
        fp.add(f"{key}_channel_noci" if ci is None else f"{key}_channel_ci_busid" if is_bus else f"{key}_channel_ci_dev")
    elif transport == "SHM" and is_bus is not None:
        fp.add("shm_channel_busid" if is_bus else "shm_channel_dev")


def connection(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.CONN_RE.match(msg)
    if m is None:
        return False
    fp = state.fingerprints
    kw, ci = m.group("kw"), m.group("ci")
    sdev, sbus, sis = _bracket(m.group("sdev"))
    ddev, dbus, dis = _bracket(m.group("ddev"))
    is_bus = None if sis is None and dis is None else bool(sis or dis)
    via = m.group("via")
    (transport, mech, net, net_dev, gdr, gdr_pci, proxy, shared, read, ce, indirect) = classify_via(via, fp)
    direction = m.group("dir")
    src, dst = int(m.group("src")), int(m.group("dst"))
    connection_fingerprints(fp, kw, ci, is_bus, transport)
    comm_id, comm_ptr = state.comm_of(host, pid, tid)
    printer = dst if direction == "receive" else src
    if comm_id is not None and host is not None:
        state.rank_host[(comm_id, printer)] = host
    inter = False if transport in ("P2P", "SHM") else None
    state.add("nccl_connections", (
        host, pid, tid, dev, comm_id, comm_ptr, int(m.group("ch")), opt_int(ci), src, sdev, sbus, dst, ddev, dbus, is_bus,
        direction, transport, mech, via, net, net_dev, gdr, gdr_pci, proxy, shared, read, ce, indirect, printer, inter,
        state.label, ln))
    return True


def collnet(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.COLLNET_RE.match(msg)
    if m is None:
        return False
    kw, ci = m.group("kw"), m.group("ci")
    state.fingerprints.add("collnet_coll" if kw == "Coll" else "collnet_noci" if ci is None else "collnet_ci")
    via = m.group("via")
    (transport, mech, net, net_dev, gdr, gdr_pci, proxy, shared, read, ce, indirect) = classify_via(via, state.fingerprints)
    rank = int(m.group("rank"))
    comm_id, comm_ptr = state.comm_of(host, pid, tid)
    state.add("nccl_connections", (
        host, pid, tid, dev, comm_id, comm_ptr, int(m.group("ch")), opt_int(ci), rank, None, None, None, None, None, None,
        m.group("dir"), transport, mech, via, net, net_dev, gdr, gdr_pci, proxy, shared, read, ce, indirect, rank, True,
        state.label, ln))
    return True


def resolve_inter_node(state: LogState, table: pa.Table) -> pa.Table:
    """Set ``inter_node`` of NET rows whose two ranks' hosts are both known from this file (comm_id, rank -> host)."""
    if not state.rank_host or table.num_rows == 0:
        return table
    todo = pc.and_(pc.and_(pc.is_null(table["inter_node"]), pc.equal(table["transport"], "NET")), pc.is_valid(table["comm_id"]))
    if not pc.any(todo).as_py():
        return table
    hosts = pl.DataFrame([(c, r, h) for (c, r), h in state.rank_host.items()], orient="row",
                         schema={"comm_id": pl.String, "rank": pl.Int32, "_h": pl.String})
    df = pl.DataFrame(table)
    df = (df.join(hosts.rename({"rank": "src_rank", "_h": "_sh"}), on=["comm_id", "src_rank"], how="left", maintain_order="left")
          .join(hosts.rename({"rank": "dst_rank", "_h": "_dh"}), on=["comm_id", "dst_rank"], how="left", maintain_order="left")
          .with_columns(inter_node=pl.when(pl.col("inter_node").is_null() & (pl.col("transport") == "NET"))
                        .then(pl.col("_sh") != pl.col("_dh")).otherwise(pl.col("inter_node"))))
    return arrow_table(df.select(table.column_names), table.schema)


# -- rings, trees, channels ------------------------------------------------------------------


def channel_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    if "->" in msg:
        return connection(state, msg, host, pid, tid, dev, ln)
    m = F.RING_LIST_RE.match(msg)
    if m is None:
        return False
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(kind="ring", comm_id=state.comm_of(host, pid, tid)[0], channel=int(m.group("ch")),
             n_channels=int(m.group("n")), ranks=[int(x) for x in m.group("ranks").split()])
    state.add_dict("nccl_channels", d)
    return True


def ring_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    if " via " in msg:
        return connection(state, msg, host, pid, tid, dev, ln)
    m = F.GRAPH_RING_RE.match(msg)
    if m is None:
        return False
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(kind="graph_ring", comm_id=state.comm_of(host, pid, tid)[0], channel=int(m.group(1)),
             prev_rank=int(m.group(2)), rank=int(m.group(3)), next_rank=int(m.group(4)))
    state.add_dict("nccl_channels", d)
    return True


def graph_tree(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.GRAPH_TREE_RE.match(msg)
    if m is None:
        return False
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(kind="graph_tree", comm_id=state.comm_of(host, pid, tid)[0], channel=int(m.group(1)),
             tree_parent=int(m.group(2)), rank=int(m.group(3)),
             tree_children=[int(x) for x in m.group(4, 5, 6) if int(x) >= 0])
    state.add_dict("nccl_channels", d)
    return True


def trees(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    entries = F.TREE_ENTRY_RE.findall(msg)
    if not entries and msg.strip() != "Trees":
        return False
    comm_id = state.comm_of(host, pid, tid)[0]
    for ch, text in entries:
        if "|" in text:
            state.fingerprints.add("trees_pipe")
        parts = text.split("|", 1)[0].split("->")
        d = state.ctx(host, pid, tid, dev, ln)
        d.update(kind="tree", comm_id=comm_id, channel=int(ch), detail=text)
        if len(parts) == 3:
            try:
                if "/" in parts[0]:  # children/children/children->rank->parent (>= 2.5)
                    kids, rank, parent = parts[0].split("/"), parts[1], parts[2]
                else:  # parent->rank->children (2.4)
                    parent, rank, kids = parts[0], parts[1], parts[2].split("/")
                d.update(rank=int(rank), tree_parent=int(parent), tree_children=[int(k) for k in kids if int(k) >= 0])
            except ValueError:
                pass
        state.add_dict("nccl_channels", d)
    return True


def connected(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.CONNECTED_RE.match(msg)
    if m is None:
        return False
    what = m.group("what")
    if m.group("pxn") is not None:
        state.fingerprints.add("connected_rings_pxn")
    elif what == "all rings":
        state.fingerprints.add("connected_rings_plain")
    elif what == "NVLS tree":
        state.fingerprints.add("nvls_tree")
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(kind="connected", comm_id=state.comm_of(host, pid, tid)[0], detail=what,
             ring_pxn=opt_int(m.group("pxn")), ring_gdr=opt_int(m.group("gdr")))
    state.add_dict("nccl_channels", d)
    return True


def channels_summary(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.CHANNELS_SUMMARY_RE.match(msg)
    if m is None:
        return False
    state.fingerprints.add("channels_summary_v20" if m.group("collnet") is not None
                           else "channels_summary_v17" if m.group("nvls") is not None else "channels_summary_v7")
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(kind="summary", comm_id=state.comm_of(host, pid, tid)[0], coll_channels=int(m.group("coll")),
             collnet_channels=opt_int(m.group("collnet")), nvls_channels=opt_int(m.group("nvls")), p2p_channels=int(m.group("p2p")),
             p2p_channels_per_peer=int(m.group("pp")))
    state.add_dict("nccl_channels", d)
    return True


# -- COLL ------------------------------------------------------------------------------------

_P2P_OPS = frozenset({"Send", "Recv"})


def coll_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """``AllReduce: opCount 139d sendbuff .. count N datatype 7 op 0 root 0 comm 0x.. [nranks=128] stream 0x..``."""
    m = F.COLL_RE.match(msg)
    if m is None:
        return False
    op = m.group("op")
    count, dt, redop, root = int(m.group("cnt")), int(m.group("dt")), int(m.group("redop")), int(m.group("root"))
    dtn = F.DATATYPES.get(dt)
    state.add("nccl_colls", (
        host, pid, tid, dev, op, int(m.group("oc"), 16), m.group("sb"), m.group("rb"), count, dt,
        dtn[0] if dtn else None, count * dtn[1] if dtn else None, redop, F.REDOPS.get(redop), root,
        root if op in _P2P_OPS else None, m.group("comm"), opt_int(m.group("nr")), m.group("stream"), state.label, ln))
    return True


# -- dispatch --------------------------------------------------------------------------------

_HANDLERS: dict[str, Handler] = {
    "Channel": channel_line, "Ring": ring_line, "CollNet": collnet, "Coll": collnet, "Trees": trees, "Tree": graph_tree,
    "Connected": connected, "comm": nccl_setup.comm_line, "[Rank": nccl_setup.comm_line,
    "bootstrapSplit:": nccl_setup.split_line, "Init": nccl_setup.init_timings, "Bootstrap": nccl_setup.bootstrap_line,
    "Bootstrap:": nccl_setup.bootstrap_line, "Using": nccl_setup.using_line, "GPU": nccl_setup.gdr_gpu,
    "Failed": nccl_setup.failed_line, "Setting": nccl_setup.affinity, "NCCL": nccl_setup.version_message,
    "Pattern": nccl_topology.topology,
}
_TOPO_HEADS = ("CPU/", "GPU/", "NIC/", "PCI/", "NVS/", "C2C/", "GIN/", "+ ", "==")


def dispatch(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """Route one INFO message to its handler; True when some handler understood it.

    Handlers of messages that repeat from rank to rank parse each distinct message once
    (:mod:`stallscope.ingest.nccl_memo`); the others run on every line.
    """
    rep = state.memo.get(msg)  # a message seen before, with a pure handler: no routing needed
    if rep is not None:
        return rep.apply(state, host, pid, tid, dev, ln)
    h, per_line = _routed(msg)
    if per_line:
        return h(state, msg, host, pid, tid, dev, ln)
    return nccl_memo.dispatch(state, state.memo, h, msg, host, pid, tid, dev, ln)


def replay_of(state: LogState, msg: str) -> nccl_memo.Replay | None:
    """The memo's replay of one INFO message (recorded on first sight), or None when the message's
    handler runs on every line (``dispatch``'s rule) or is not pure."""
    rep = state.memo.get(msg)
    if rep is not None:
        return rep
    h, per_line = _routed(msg)
    if per_line:
        return None
    return nccl_memo.record(state, state.memo, h, msg)


#: distinct messages whose route is kept
MAX_ROUTES = 1 << 14


@lru_cache(maxsize=MAX_ROUTES)
def _routed(msg: str) -> tuple[Handler, bool]:
    """(handler, whether it runs on every line) of one INFO message, found once per distinct message: the
    per-line handlers (communicators, topology, ...) see the same messages on every rank."""
    h = _route(msg)
    return h, h in _PER_LINE or (h is channel_line and "->" in msg) or (h is ring_line and " via " in msg)


def _route(msg: str) -> Handler:
    """The handler of one INFO message: by its first word (a dict lookup), then by a few substrings."""
    sp = msg.find(" ")
    tok = msg if sp < 0 else msg[:sp]
    h = _HANDLERS.get(tok)
    if h is not None:
        return h
    if tok.endswith(":") and " opCount " in msg:
        return coll_line
    if tok.startswith("NET/"):
        return nccl_topology.topology if F.TOPO_PATH_RE.match(msg) else nccl_setup.net_line
    if " -> " in msg:
        return nccl_errors.trace_line
    if " set by environment to " in msg:
        return nccl_setup.env_line
    if tok.startswith("nccl") and " comm " in msg:
        return nccl_setup.comm_line
    if tok.isdigit():
        return channels_summary
    if msg[:1] == " " or msg.startswith(_TOPO_HEADS):
        return nccl_topology.topology
    return nccl_setup.fact_line


#: handlers that keep per-thread state or see unique messages (connections, COLL): never memoized
_PER_LINE: frozenset[Handler] = frozenset({connection, coll_line, nccl_setup.comm_line, nccl_setup.version_message,
                                           nccl_topology.topology})
