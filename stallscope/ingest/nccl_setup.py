"""NCCL INFO messages about setup -> ``nccl_comms``, ``nccl_net``, ``nccl_env``, ``nccl_affinity``,
``nccl_init_timings``, ``nccl_facts``; and the end-of-file resolution of those tables.

Communicator and network rows are kept as dicts until :func:`finish`, which fills what only the
whole file tells: the exact version (per process, or the file's only version), the version range
from format fingerprints, ``nNodes``/``localRanks`` printed after Init START, the selected
network's plugin name and GDR per HCA on device rows.
"""

from __future__ import annotations

import re
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from stallscope.ingest.nccl_state import opt_int
from stallscope.ingest.schemas import nccl as F
from stallscope.store.schema.nccl import NCCL_COMMS, NCCL_FACTS

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState

Host = str | None
Num = int | None

# -- communicators ---------------------------------------------------------------------------

_CORE_APIS = ("ncclCommInitRank", "ncclCommSplit")
_EVENTS = {"Init START": "init_start", "Init COMPLETE": "init_complete", "Destroy COMPLETE": "destroy_complete",
           "Abort COMPLETE": "abort_complete"}


def comm_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """``[[Rank r] ][api ]comm 0x.. rank r nranks n cudaDev d [nvmlDev m] [busId b] [commId c] - Init START`` and kin.

    The message is read once per distinct text (:func:`_comm_row`); each line then adds its row (a copy of the
    message's, with the line's own values) and moves its thread's communicator (Init START/COMPLETE), which is
    why the handler runs per line.
    """
    fps, row, cdev, ev, cid, ptr, rank = _comm_row(msg)
    if fps:
        state.fingerprints |= fps
    if row is None:
        return False
    out = list(row)
    out[:4] = host, pid, tid, cdev if cdev is not None else dev
    out[_C_FILE], out[_C_LINE] = state.label, ln
    state.deferred["nccl_comms"].append(out)  # type: ignore[arg-type]
    if ev == "init_start":
        state.thread_comm[(host, pid, tid)] = (cid, ptr)
        state.comm_events.append(((host, pid, tid), ln, cid, ptr))
    elif ev == "init_complete":
        state.thread_comm.pop((host, pid, tid), None)
        state.comm_events.append(((host, pid, tid), ln, None, None))
    if ev != "topology" and cid is not None and host is not None and rank is not None:
        state.rank_host[(cid, rank)] = host
    return True


#: ``nccl_comms`` rows: the columns' positions (a row starts with host, pid, tid, cuda_dev, as every table's)
_C_COLUMNS = NCCL_COMMS.schema.names
_C_AT = {c: i for i, c in enumerate(_C_COLUMNS)}
_C_FILE, _C_LINE, _C_HOST, _C_PID, _C_PTR, _C_EVENT, _C_RANK = (
    _C_AT[c] for c in ("file", "line_no", "host", "pid", "comm_ptr", "event", "rank"))
_C_VERSION, _C_CUDA, _C_RANGE, _C_NNODES, _C_LRANKS, _C_LRANK = (
    _C_AT[c] for c in ("version", "cuda_version", "version_range", "nnodes", "local_ranks", "local_rank"))

#: one communicator message read: (fingerprints, its row of ``nccl_comms`` with the per-line values still None
#: or None when it is no communicator line, the ``cuda_dev`` it names, event, comm_id, comm_ptr, rank)
CommRow = tuple[frozenset[str], tuple[Any, ...] | None, int | None, str | None, str | None, str | None, int | None]


#: distinct communicator messages whose reading is kept
MAX_COMM_MESSAGES = 1 << 14


@lru_cache(maxsize=MAX_COMM_MESSAGES)
def _comm_row(msg: str) -> CommRow:
    """One communicator message read once (:data:`CommRow`): a big job's ranks print the same messages."""
    fps, fields = _comm_message(msg)
    if fields is None:
        return fps, None, None, None, None, None, None
    row: list[Any] = [None] * len(_C_COLUMNS)
    for k, v in fields.items():
        if k != "cuda_dev":
            row[_C_AT[k]] = v
    return fps, tuple(row), fields.get("cuda_dev"), fields["event"], fields.get("comm_id"), fields["comm_ptr"], fields["rank"]


def _comm_message(msg: str) -> tuple[frozenset[str], dict[str, Any] | None]:
    """(fingerprints, fields of the row) of one communicator message; fields None when it is not one
    (its fingerprints still count: a malformed number is found after the shape was read).
    ``cuda_dev`` is among the fields only when the message names it."""
    m = F.COMM_EVENT_RE.match(msg)
    fp: set[str] = set()
    if m is None:
        t = F.COMM_TOPO_RE.match(msg)
        if t is None:
            return frozenset(), None
        return frozenset({"comm_nnodes"}), {
            "event": "topology", "comm_ptr": t.group("ptr"), "rank": int(t.group("rank")), "nranks": int(t.group("n")),
            "nnodes": int(t.group("nn")), "local_ranks": int(t.group("lr")), "local_rank": int(t.group("l"))}
    toks = m.group("pairs").split()
    kv = dict(zip(toks[0::2], toks[1::2]))
    ev, func = m.group("ev"), m.group("func")
    if func is not None and func not in _CORE_APIS:
        fp.add("init_func_other")
    if ev == "Init START":
        fp.add("init_start_rank_tag" if m.group("rk") is not None else "init_start_func" if func else "init_start_nofunc")
    elif ev == "Init COMPLETE":
        if func is not None:
            fp.add("init_complete_func")
        elif "commId" in kv:
            fp.add("init_complete_nofunc" if "nvmlDev" in kv else "init_complete_commid_nonvml")
        elif "busId" in kv:
            fp.add("init_complete_busid")
        elif "nvmlDev" in kv:
            fp.add("init_complete_nvml_nobusid")
    try:
        fields = {"event": _EVENTS[ev], "init_func": func, "comm_ptr": m.group("ptr"), "comm_id": kv.get("commId"),
                  "rank": opt_int(kv.get("rank")), "nranks": opt_int(kv.get("nranks")), "nvml_dev": opt_int(kv.get("nvmlDev")),
                  "bus_id": kv.get("busId"), "parent_ptr": kv.get("parent"), "split_color": opt_int(kv.get("color")),
                  "split_key": opt_int(kv.get("key"))}
        cdev = opt_int(kv.get("cudaDev"))
    except ValueError:
        return frozenset(fp), None
    if cdev is not None:
        fields["cuda_dev"] = cdev
    return frozenset(fp), fields


def split_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """``bootstrapSplit: [comm 0x.. parent 0x.. ]rank r nranks n color c key k prev p next q - DONE``."""
    m = F.SPLIT_RE.match(msg)
    if m is None:
        return False
    if m.group("ptr") is not None:
        state.fingerprints.add("bootstrap_split_comm")
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(event="split", comm_ptr=m.group("ptr"), parent_ptr=m.group("parent"), rank=int(m.group("rank")),
             nranks=int(m.group("n")), split_color=int(m.group("color")), split_key=int(m.group("key")))
    state.deferred["nccl_comms"].append(d)
    return True


def _phases(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in F.PHASE_RE.findall(text)}


def init_timings(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.INIT_TIMINGS_RE.match(msg)
    if m is None:
        return False
    state.fingerprints.add("init_timings_func" if m.group("func") else "init_timings_v22")
    d = state.ctx(host, pid, tid, dev, ln)
    ph = _phases(m.group("ph"))
    d.update(kind="init", comm_id=state.comm_of(host, pid, tid)[0], init_func=m.group("func"), rank=int(m.group("rank")),
             nranks=int(m.group("n")), total_s=float(m.group("total")), phases=m.group("ph"),
             **{f"{p}_s": ph.get(p) for p in F.INIT_PHASES})
    state.add_dict("nccl_init_timings", d)
    return True


def bootstrap_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.BOOTSTRAP_TIMINGS_RE.match(msg)
    if m is not None:
        state.fingerprints.add("bootstrap_timings")
        d = state.ctx(host, pid, tid, dev, ln)
        ph = _phases(m.group("ph"))
        d.update(kind="bootstrap", comm_id=state.comm_of(host, pid, tid)[0], total_s=float(m.group("total")),
                 phases=m.group("ph"), **{f"{p}_s": ph.get(p) for p in F.BOOTSTRAP_PHASES})
        state.add_dict("nccl_init_timings", d)
        return True
    if msg.startswith(("Bootstrap : Using", "Bootstrap: Using")):
        _interfaces(state, msg.split("Using", 1)[1], "bootstrap_if", host, pid, tid, dev, ln)
        return True
    return False


# -- network ---------------------------------------------------------------------------------


def _interfaces(state: LogState, text: str, kind: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> None:
    for m in F.IF_RE.finditer(text):
        d = state.ctx(host, pid, tid, dev, ln)
        d.update(kind=kind, net="Socket", dev_index=opt_int(m.group("i")), dev_name=m.group("name"), address=m.group("addr"),
                 port=int(m.group("port")))
        state.deferred["nccl_net"].append(d)


def _net_row(state: LogState, host: Host, pid: Num, tid: Num, dev: Num, ln: int, **fields: object) -> None:
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(fields)
    state.deferred["nccl_net"].append(d)


def net_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """``NET/IB : Using [0]mlx5_0:1/IB ... [RO]; OOB ..``, ``NET/Socket : Using ..``, GDR per HCA, plugins."""
    m = F.IB_USING_RE.match(msg)
    if m is not None:
        ro = m.group("ro") is not None
        if ro:
            state.fingerprints.add("ib_relaxed_ordering")
        for dm in F.IB_DEV_RE.finditer(m.group("devs")):
            feat = (dm.group("extra") + dm.group("feat")).lstrip("/") or None
            _net_row(state, host, pid, tid, dev, ln, kind="ib_device", net=m.group("net"), dev_index=int(dm.group("i")),
                     dev_name=dm.group("name"), port=int(dm.group("port")), link=dm.group("link"), features=feat,
                     relaxed_ordering=ro)
        _interfaces(state, m.group("oob"), "oob_if", host, pid, tid, dev, ln)
        return True
    if msg.startswith("NET/Socket") and "Using" in msg:
        _interfaces(state, msg.split("Using", 1)[1], "socket_device", host, pid, tid, dev, ln)
        return True
    g = F.GDR_HCA_RE.match(msg)
    if g is not None:
        _net_row(state, host, pid, tid, dev, ln, kind="gdr", net=g.group("net"), dev_index=int(g.group("i")),
                 dev_name=g.group("name"), gdr=g.group("st") == "Enabled", message=msg)
        return True
    p = F.PLUGIN_LOADED_RE.match(msg)
    if p is not None:
        _net_row(state, host, pid, tid, dev, ln, kind="plugin" if p.group("kind") == "net" else "collnet_plugin",
                 plugin=p.group("name"), message=msg)
        return True
    if "No plugin found" in msg:
        _net_row(state, host, pid, tid, dev, ln, kind="plugin", message=msg)
        return True
    if "No device found" in msg:
        _net_row(state, host, pid, tid, dev, ln, kind="no_device", net=msg[4:].split(" ", 1)[0].rstrip(":"), message=msg)
        return True
    return msg.startswith(("NET/Plugin", "NET/IB", "NET/Socket"))


def using_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.USING_NETWORK_RE.match(msg)
    if m is not None:
        state.fingerprints.add("using_network")
        _net_row(state, host, pid, tid, dev, ln, kind="selected", net=m.group("net"))
        return True
    if msg.startswith("Using non-device net plugin"):
        state.fingerprints.add("non_device_net_plugin")
        return True
    if msg.startswith("Using internal network plugin"):
        state.fingerprints.add("internal_network_plugin")
        return True
    return msg.startswith(F.IGNORED_PREFIXES)


def gdr_gpu(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """``GPU Direct RDMA Enabled for GPU 1b000 / HCA 0 (distance 4 <= 5), read 1``."""
    m = F.GDR_GPU_RE.match(msg)
    if m is None:
        return False
    _net_row(state, host, pid, tid, dev, ln, kind="gdr_gpu", dev_index=int(m.group("i")), gpu_bus_id=m.group("bus"),
             gdr=m.group("st") == "Enabled", message=msg)
    return True


def failed_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    if msg.startswith("Failed to open libibverbs"):
        _net_row(state, host, pid, tid, dev, ln, kind="ibverbs_missing", net="IB", message=msg)
        return True
    return msg.startswith(F.IGNORED_PREFIXES)


# -- env, affinity, facts, version -----------------------------------------------------------

_INT_RE = re.compile(r"-?\d+")


def env_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """``NCCL_IB_GID_INDEX set by environment to 3.`` (integer parameters end with a period)."""
    m = F.ENV_RE.match(msg)
    if m is None:
        return False
    val = m.group("val")
    if val.endswith(".") and _INT_RE.fullmatch(val[:-1]):
        val = val[:-1]
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(name=m.group("name"), value=val)
    state.add_dict("nccl_env", d)
    return True


def affinity(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.AFFINITY_RE.match(msg)
    if m is None:
        return False
    state.fingerprints.add("affinity")
    mask = m.group("mask")
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(gpu=int(m.group("gpu")), mask=mask, cpu_count=sum(bin(int(w, 16)).count("1") for w in mask.split(",") if w))
    state.add_dict("nccl_affinity", d)
    return True


def _fact(state: LogState, key: str, value: str | None, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int | None) -> None:
    state.add_dict("nccl_facts", _fact_dict(state, key, value, msg, host, pid, tid, dev, ln))


def _fact_dict(state: LogState, key: str, value: str | None, msg: str, host: Host, pid: Num, tid: Num, dev: Num,
               ln: int | None) -> dict[str, Any]:
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(key=key, value=value, message=msg)
    return d


#: position of ``line_no`` in an ``nccl_facts`` row
_FACTS_LINE_NO = NCCL_FACTS.schema.names.index("line_no")


_FACT_FINGERPRINTS = {"cuda_driver_version": "cuda_driver_version", "threads_per_block": "threads_per_block",
                      "p2p_chunksize": "p2p_chunksize", "nvls_multicast_support": "nvls_multicast",
                      "mnnvl": "mnnvl_busid", "ras_socket": "ras_client"}


def fact_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """Scalar facts (``cudaDriverVersion N``, ``threadThresholds ..``, ...); also recognizes ignored chatter."""
    for key, rx in F.FACT_RES:
        m = rx.match(msg)
        if m is not None:
            fpn = _FACT_FINGERPRINTS.get(key)
            if fpn:
                state.fingerprints.add(fpn)
            value = m.group("v")
            if key == "nvls_multicast_support":
                value = "false" if value else "true"
            _fact(state, key, value, msg, host, pid, tid, dev, ln)
            return True
    c = F.COMM_CONFIG_RE.match(msg)
    if c is not None:
        state.fingerprints.add("comm_config")
        _fact(state, f"comm_config.{c.group('field')}", c.group("v"), msg, host, pid, tid, dev, ln)
        return True
    if msg.startswith("PROFILER/Plugin: Could not find"):
        state.fingerprints.add("profiler_plugin_not_found")
        return True
    if msg.startswith("TUNER/Plugin"):
        state.fingerprints.add("tuner_plugin")
        return True
    return msg.startswith(F.IGNORED_PREFIXES)


def version_message(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    m = F.VERSION_RE.match(msg)
    if m is None:
        return msg.startswith(F.IGNORED_PREFIXES)
    version_line(state, m, host, pid, tid, dev, msg, ln)
    return True


def version_line(state: LogState, m: re.Match[str], host: Host, pid: Num, tid: Num, dev: Num, msg: str, ln: int) -> None:
    """Record an exact ``NCCL version X.Y.Z[suffix]+cudaA.B`` (prefixed or bare)."""
    v = _version(m)
    state.file_versions.add(v)
    if host is not None or pid is not None:
        state.proc_versions.setdefault((host, pid), v)
    _fact(state, "nccl_version", v[0], msg, host, pid, tid, dev, ln)
    if v[1] is not None:
        _fact(state, "cuda_version", v[1], msg, host, pid, tid, dev, ln)


def _version(m: re.Match[str]) -> tuple[str, str | None]:
    return m.group("v") + m.group("suffix"), m.group("cuda")


#: what a bare ``NCCL version`` line (no prefix) adds, whatever its line: (version, fact rows with line_no None)
BareVersion = tuple[tuple[str, str | None], list[tuple[Any, ...]]]


def bare_version(state: LogState, m: re.Match[str], msg: str) -> BareVersion:
    """The effects :func:`version_line` has for a bare version line (``msg``, matched by ``m``), found once per
    distinct text; :func:`add_bare_version` adds them for one line."""
    v = _version(m)
    cols = state.buffers["nccl_facts"].columns
    facts = [("nccl_version", v[0])] + ([("cuda_version", v[1])] if v[1] is not None else [])
    return v, [tuple(map(_fact_dict(state, key, value, msg, None, None, None, None, None).get, cols)) for key, value in facts]


def add_bare_version(state: LogState, got: BareVersion, ln: int) -> None:
    """What :func:`version_line` adds for the bare version line ``ln`` whose text gave ``got``."""
    v, rows = got
    state.file_versions.add(v)
    j = _FACTS_LINE_NO
    for row in rows:
        state.add("nccl_facts", (*row[:j], ln, *row[j + 1:]))


# -- end of file -----------------------------------------------------------------------------


def finish(state: LogState, vrange: str | None) -> None:
    """Complete the deferred communicator and network rows and move them to their buffers."""
    only = next(iter(state.file_versions)) if len(state.file_versions) == 1 else None
    if vrange is not None:  # file-level fact: what the line formats alone say (no line of its own)
        _fact(state, "version_range", vrange, "inferred from line formats: " + ", ".join(sorted(state.fingerprints)),
              None, None, None, None, None)
    # rows of communicator lines are lists in column order, those of split lines (and their replays) dicts
    cols = state.buffers["nccl_comms"].columns
    comms = [r if type(r) is list else list(map(r.get, cols)) for r in state.deferred["nccl_comms"]]
    topo = {(r[_C_HOST], r[_C_PID], r[_C_PTR]): r for r in comms if r[_C_EVENT] == "topology"}
    versions, add = state.proc_versions, state.add
    for r in comms:
        key = (r[_C_HOST], r[_C_PID])
        v = versions.get(key, only)
        r[_C_VERSION], r[_C_CUDA], r[_C_RANGE] = (v[0], v[1], v[0]) if v else (None, None, vrange)
        t = topo.get((*key, r[_C_PTR]))
        if t is not None and r is not t:
            r[_C_NNODES], r[_C_LRANKS] = t[_C_NNODES], t[_C_LRANKS]
            if r[_C_RANK] == t[_C_RANK]:
                r[_C_LRANK] = t[_C_LRANK]
        add("nccl_comms", tuple(r))
    _finish_net(state)


def _finish_net(state: LogState) -> None:
    """IB device rows get the process's selected network plugin and their HCA's GDR state (the last
    line that says so wins), for rows kept as dicts and rows replayed as frames alike."""
    net = state.deferred["nccl_net"]
    # one frame per block, completed one at a time (a concatenation of them all doubled the memory touched)
    frames = state.deferred_frames.pop("nccl_net", [])
    # the facts in line order (a frame's rows and the dicts never share a line)
    said: list[tuple[Any, ...]] = [(d["line_no"] if d["line_no"] is not None else -1, i, d["kind"], d["host"], d["pid"],
                                    d.get("dev_index"), d.get("net"), d.get("gdr"))
                                   for i, d in enumerate(net) if d["kind"] in ("selected", "gdr")]
    if frames:
        said += _last_facts(frames)
        said.sort(key=lambda e: (e[0], e[1]))
    selected = {(h, p): n for _, _, kind, h, p, _i, n, _g in said if kind == "selected"}
    gdr = {(h, p, i): g for _, _, kind, h, p, i, _n, g in said if kind == "gdr"}
    for d in net:
        if d["kind"] == "ib_device":
            sel = selected.get((d["host"], d["pid"]))
            if sel is not None and sel not in ("IB", "Socket"):
                d["plugin"] = sel
            d["gdr"] = gdr.get((d["host"], d["pid"], d["dev_index"]))
        state.add_dict("nccl_net", d)
    if not frames:
        return
    # frame rows hold values that fit their columns (nccl_memo._columnar), so a fact whose key does not
    # fit matches none of them; the joins match null keys as the dicts match None
    fits = partial(_fits, state.buffers["nccl_net"].pl_schema)
    sel = pl.DataFrame([(h, p, v) for (h, p), v in selected.items() if fits(host=h, pid=p, net=v)], orient="row",
                       schema={"host": pl.String, "pid": pl.Int64, "_sel": pl.String})
    g = pl.DataFrame([(h, p, i, v) for (h, p, i), v in gdr.items() if fits(host=h, pid=p, dev_index=i, gdr=v)],
                     orient="row", schema={"host": pl.String, "pid": pl.Int64, "dev_index": pl.Int32, "_gdr": pl.Boolean})
    for frame in frames:
        ib = np.flatnonzero((frame["kind"] == "ib_device").fill_null(False).to_numpy())
        if len(ib):  # only IB device rows are completed: joined on their own, put back in place
            got = (frame[ib].select("host", "pid", "dev_index", "plugin")
                   .join(sel, on=["host", "pid"], how="left", nulls_equal=True, maintain_order="left")
                   .join(g, on=["host", "pid", "dev_index"], how="left", nulls_equal=True, maintain_order="left")
                   .select(plugin=pl.when(pl.col("_sel").is_not_null() & ~pl.col("_sel").is_in(["IB", "Socket"]))
                           .then("_sel").otherwise("plugin"), gdr="_gdr"))
            frame = frame.with_columns(frame["plugin"].scatter(ib, got["plugin"]), frame["gdr"].scatter(ib, got["gdr"]))
        state.add_frame("nccl_net", frame)


def _last_facts(frames: list[pl.DataFrame]) -> list[tuple[Any, ...]]:
    """The last selected-network fact of each (host, pid) and GDR fact of each (host, pid, dev_index) among the
    rows of ``frames``, as ``(_ln, _seq, kind, host, pid, dev_index, net, gdr)``. Only a key's last fact in the
    frames can decide its value: the facts of the dicts, merged after by line, are on other lines."""
    facts = pl.concat([f.filter(pl.col("kind").is_in(["selected", "gdr"])).select(
        "_ln", "_seq", "kind", "host", "pid", "dev_index", "net", "gdr") for f in frames]).sort("_ln", "_seq")
    kind = pl.col("kind")
    return pl.concat([facts.filter(kind == "selected").unique(["host", "pid"], keep="last", maintain_order=True),
                      facts.filter(kind == "gdr").unique(["host", "pid", "dev_index"], keep="last", maintain_order=True)]).rows()


def _fits(schema: dict[str, pl.DataType], **values: Any) -> bool:
    """Whether each value is of its column's kind and in its range (a key a frame row can hold)."""
    for name, v in values.items():
        if v is None:
            continue
        t = schema[name]
        if t == pl.String:
            if not isinstance(v, str):
                return False
        elif t == pl.Boolean:
            if not isinstance(v, bool):
                return False
        elif t.is_integer():
            bits = 63 if t == pl.Int64 else 31 if t == pl.Int32 else None
            if bits is None or type(v) is not int or not -(1 << bits) <= v < (1 << bits):
                return False
        else:
            return False
    return True
