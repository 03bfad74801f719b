"""Every real log excerpt in ``../shared/logs/nccl/`` against its SOURCES.md facts (see nccl_facts.py).

One parametrized test per file. Each fact key has a checker below; a key without a checker
fails the test, so the fixture cannot hold facts that are silently not checked.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from nccl_facts import FACTS
from stallscope.ingest.nccl_log import parse_nccl_log


def shared_logs() -> Path:
    """``../shared/logs/nccl`` next to the repository, or next to a parent directory (git worktrees)."""
    for parent in Path(__file__).resolve().parents[2:]:
        cand = parent / "shared" / "logs" / "nccl"
        if cand.is_dir():
            return cand
    raise FileNotFoundError("../shared/logs/nccl not found next to the repository (read-only test data)")


LOGS = shared_logs()


@lru_cache(maxsize=None)
def parsed(name: str) -> dict[str, Any]:
    info = parse_nccl_log(LOGS / name)
    info["df"] = {k: pl.DataFrame(v) for k, v in info["arrow"].items()}
    return info


class T:
    """The parsed tables of one file, with helpers the checkers share."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.info = parsed(name)
        self.df: dict[str, pl.DataFrame] = self.info["df"]

    def __getitem__(self, table: str) -> pl.DataFrame:
        return self.df[table]

    def rows(self, table: str, **eq: Any) -> list[dict[str, Any]]:
        df = self.df[table]
        for k, v in eq.items():
            df = df.filter(pl.col(k).is_null()) if v is None else df.filter(pl.col(k) == v)
        return df.to_dicts()

    def fact(self, key: str) -> list[str]:
        return self.df["nccl_facts"].filter(pl.col("key") == key)["value"].to_list()

    def hosts(self) -> set[str]:
        return {h for df in self.df.values() if "host" in df.columns for h in df["host"].drop_nulls().to_list()}

    def values(self, column: str) -> set[Any]:
        return {v for df in self.df.values() if column in df.columns for v in df[column].drop_nulls().to_list()}

    def conns(self) -> pl.DataFrame:
        return self.df["nccl_connections"]


# -- connection strings as printed --------------------------------------------------------------

_CONN = re.compile(r"(?:Ring|Channel) (?P<ch>\d+)(?:/(?P<ci>\d+))? : (?P<src>-?\d+)(?:\[(?P<sdev>\w+)\])? -> (?P<dst>-?\d+)"
                   r"(?:\[(?P<ddev>\w+)\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>.+)$")


def conn_key(line: str) -> tuple[Any, ...]:
    m = _CONN.match(line)
    assert m is not None, f"bad connection string in fixture: {line}"
    return (int(m["ch"]), int(m["ci"]) if m["ci"] else None, int(m["src"]), m["sdev"], int(m["dst"]), m["ddev"], m["dir"], m["via"])


def row_key(r: dict[str, Any]) -> tuple[Any, ...]:
    def br(bus: str | None, dev: int | None) -> str | None:
        return bus if bus is not None else (None if dev is None else str(dev))
    return (r["channel"], r["conn_index"], r["src_rank"], br(r["src_bus_id"], r["src_dev"]), r["dst_rank"],
            br(r["dst_bus_id"], r["dst_dev"]), r["direction"], r["transport_detail"])


def expected_transport(via: str) -> tuple[str, bool | None]:
    t = "SHM" if via == "direct shared memory" else via.split("/")[0]
    return t, ("/GDRDMA" in via) if t in ("NET", "COLLNET") else None


def check_connection_rows(t: T, lines: list[str], *, exact: bool) -> None:
    rows = t.conns().to_dicts()
    got = Counter(row_key(r) for r in rows)
    want = Counter(conn_key(ln) for ln in lines)
    if exact:
        assert got == want, f"connections differ: missing {want - got}, extra {got - want}"
    else:
        assert not (want - got), f"connections missing: {want - got}"
    for r in rows:
        if row_key(r) in want:
            transport, gdr = expected_transport(r["transport_detail"])
            assert (r["transport"], r["gdr"]) == (transport, gdr), r


# -- checkers -----------------------------------------------------------------------------------

Check = Callable[[T, Any, dict[str, Any]], None]
CHECKS: dict[str, Check] = {}


def check(*keys: str) -> Callable[[Check], Check]:
    def deco(f: Check) -> Check:
        for k in keys:
            CHECKS[k] = f
        return f
    return deco


@check("host")
def _host(t: T, v: str, f: dict[str, Any]) -> None:
    assert t.hosts() == {v}


@check("hosts")
def _hosts(t: T, v: list[str], f: dict[str, Any]) -> None:
    assert t.hosts() == set(v)


@check("pid")
def _pid(t: T, v: int, f: dict[str, Any]) -> None:
    assert t.values("pid") == {v}


@check("pids")
def _pids(t: T, v: list[int], f: dict[str, Any]) -> None:
    assert t.values("pid") == set(v)


@check("tid")
def _tid(t: T, v: int, f: dict[str, Any]) -> None:
    assert t.values("tid") == {v}


@check("cudaDev")
def _cuda_dev(t: T, v: int, f: dict[str, Any]) -> None:
    assert t.values("cuda_dev") == {v}


@check("line_prefix_wrapper")
def _wrapper(t: T, v: str, f: dict[str, Any]) -> None:
    text = (LOGS / t.name).read_text()
    assert any(ln.startswith(v.split("<")[0]) for ln in text.splitlines())
    # the wrapper does not hide the prefix: every NCCL row has its host (watchdog rows: the Ray pid)
    for name, df in t.df.items():
        if df.height and "host" in df.columns and name.startswith("nccl_") and not name.startswith("nccl_tests"):
            assert df.filter(pl.col("line_no").is_not_null())["host"].null_count() == 0, name
    if "watchdog" in t.name:
        assert t["watchdog_timeouts"]["pid"].null_count() == 0


@check("line_prefix")
def _stripped(t: T, v: str, f: dict[str, Any]) -> None:
    assert t.hosts() == set() and t.values("pid") == set() and t.values("tid") == set()
    prefix_devs = {d for name, df in t.df.items() if name != "nccl_comms" and "cuda_dev" in df.columns
                   for d in df["cuda_dev"].drop_nulls().to_list()}  # nccl_comms' cudaDev is a message field
    assert prefix_devs == ({0} if v == " [dev] NCCL INFO" else set())
    assert sum(df.height for df in t.df.values()) > 10


@check("version")
def _version(t: T, v: str | None, f: dict[str, Any]) -> None:
    comms = t["nccl_comms"]
    if v is None:
        assert t.fact("nccl_version") == []
        assert comms["version"].null_count() == comms.height
    else:
        assert set(t.fact("nccl_version")) == {v}
        assert comms["version"].to_list() == [v] * comms.height


@check("nccl_version")
def _nccl_version(t: T, v: str, f: dict[str, Any]) -> None:
    assert set(t.fact("nccl_version")) == {v}


@check("version_range")
def _version_range(t: T, v: str | None, f: dict[str, Any]) -> None:
    assert t.fact("version_range") == ([] if v is None else [v])
    comms = t["nccl_comms"]
    exact = f.get("version")
    assert comms["version_range"].to_list() == [exact or v] * comms.height


@check("cuda")
def _cuda(t: T, v: str, f: dict[str, Any]) -> None:
    assert set(t.fact("cuda_version")) == {v}
    assert set(t["nccl_comms"]["cuda_version"].to_list()) <= {v}


def _net_rows(t: T, kind: str) -> list[dict[str, Any]]:
    return t.rows("nccl_net", kind=kind)


@check("net")
def _net(t: T, v: str | None, f: dict[str, Any]) -> None:
    selected = {r["net"] for r in _net_rows(t, "selected")}
    if v is None:
        assert t["nccl_net"].height == 0 and t.conns().filter(pl.col("transport") == "NET").height == 0
    elif selected:
        assert selected == {v}
    elif v == "IB":  # before 2.6 there is no "Using network" line: the IB device list says it
        assert {r["net"] for r in _net_rows(t, "ib_device")} == {"IB"}
    else:
        assert v == "Socket" and _net_rows(t, "socket_device") and not _net_rows(t, "ib_device")
    for r in t.conns().filter(pl.col("transport") == "NET").to_dicts():
        assert r["net"] == (v if v != "IBext" or not selected else r["net"])


def _ib_strings(t: T) -> list[str]:
    seen: dict[int, str] = {}
    for r in _net_rows(t, "ib_device"):
        s = f"[{r['dev_index']}]{r['dev_name']}:{r['port']}/{r['link']}" + (f"/{r['features']}" if r["features"] else "")
        assert seen.setdefault(r["dev_index"], s) == s, "a host prints different device lists"
    return [seen[k] for k in sorted(seen)]


@check("ib_devices")
def _ib_devices(t: T, v: list[str], f: dict[str, Any]) -> None:
    assert _ib_strings(t) == v


@check("relaxed_ordering")
def _ro(t: T, v: bool, f: dict[str, Any]) -> None:
    assert {r["relaxed_ordering"] for r in _net_rows(t, "ib_device")} == {v}


def _if_string(r: dict[str, Any], index: bool = True) -> str:
    i = f"[{r['dev_index']}]" if index and r["dev_index"] is not None else ""
    return f"{i}{r['dev_name']}:{r['address']}<{r['port']}>"


@check("oob_if")
def _oob(t: T, v: str, f: dict[str, Any]) -> None:
    assert {_if_string(r) for r in _net_rows(t, "oob_if")} == {v}


@check("bootstrap_if")
def _bootstrap(t: T, v: str, f: dict[str, Any]) -> None:
    assert {_if_string(r) for r in _net_rows(t, "bootstrap_if")} == {v}


@check("socket_ifs")
def _socket_ifs(t: T, v: dict[str, list[str]], f: dict[str, Any]) -> None:
    got: dict[str, set[str]] = {}
    for r in _net_rows(t, "socket_device"):
        got.setdefault(r["host"], set()).add(_if_string(r))
    assert {h: sorted(s) for h, s in got.items()} == {h: sorted(s) for h, s in v.items()}


@check("net_socket_if")
def _net_socket_if(t: T, v: str, f: dict[str, Any]) -> None:
    assert {_if_string(r) for r in _net_rows(t, "socket_device")} == {v}


@check("ibverbs_missing")
def _ibverbs(t: T, v: bool, f: dict[str, Any]) -> None:
    assert bool(_net_rows(t, "ibverbs_missing")) is v


@check("net_plugin")
def _net_plugin(t: T, v: str, f: dict[str, Any]) -> None:
    assert {r["plugin"] for r in _net_rows(t, "plugin")} == {v}


@check("collnet_plugin")
def _collnet_plugin(t: T, v: str, f: dict[str, Any]) -> None:
    assert {r["plugin"] for r in _net_rows(t, "collnet_plugin")} == {v}


@check("gdr_hca")
def _gdr_hca(t: T, v: dict[str, bool], f: dict[str, Any]) -> None:
    assert {r["dev_name"]: r["gdr"] for r in _net_rows(t, "gdr")} == v
    assert {r["dev_name"]: r["gdr"] for r in _net_rows(t, "ib_device")} == v  # copied onto the device rows


@check("affinity")
def _affinity(t: T, v: dict[Any, Any], f: dict[str, Any]) -> None:
    rows = t["nccl_affinity"].to_dicts()
    if "gpu" in v:
        assert [(r["gpu"], r["mask"]) for r in rows] == [(v["gpu"], v["mask"])]
        assert rows[0]["cpu_count"] == sum(bin(int(w, 16)).count("1") for w in v["mask"].split(","))
    else:  # {pid: mask}
        assert {r["pid"]: r["mask"] for r in rows} == v


@check("threads_per_block", "thread_thresholds", "p2p_chunksize")
def _simple_fact(t: T, v: Any, f: dict[str, Any]) -> None:
    key = next(k for k in ("threads_per_block", "thread_thresholds", "p2p_chunksize") if f.get(k) == v)
    assert set(t.fact(key)) == {str(v)}


@check("cudaDriverVersion")
def _driver(t: T, v: int, f: dict[str, Any]) -> None:
    assert set(t.fact("cuda_driver_version")) == {str(v)}


@check("env_lines")
def _env(t: T, v: dict[str, str], f: dict[str, Any]) -> None:
    got: dict[str, set[str]] = {}
    for r in t["nccl_env"].to_dicts():
        got.setdefault(r["name"], set()).add(r["value"])
    assert got == {k: {x} for k, x in v.items()}


@check("env_lines_count")
def _env_count(t: T, v: int, f: dict[str, Any]) -> None:
    assert t["nccl_env"].height == v


def _printed_nranks(t: T) -> set[int]:
    out = set()
    for table in ("nccl_comms", "nccl_colls", "nccl_init_timings"):
        out |= set(t[table]["nranks"].drop_nulls().to_list())
    out |= {len(r) for r in t.rows("nccl_channels", kind="ring") for r in [r["ranks"]]}
    return out


@check("nranks")
def _nranks(t: T, v: int, f: dict[str, Any]) -> None:
    printed = _printed_nranks(t)
    if printed:
        assert printed == {v}
    else:  # "derivable": the highest rank that appears
        ranks = t.conns()["src_rank"].to_list() + t.conns()["dst_rank"].to_list()
        assert max(ranks) + 1 == v


@check("nnodes")
def _nnodes(t: T, v: int, f: dict[str, Any]) -> None:
    assert len(t.hosts()) == v


@check("rank_host")
def _rank_host(t: T, v: dict[int, str], f: dict[str, Any]) -> None:
    hosts = {r["rank"]: r["host"] for r in t["nccl_tests_ranks"].to_dicts()}
    # rank 0's device line was before the excerpt; its host is the other host of the 2-host job
    assert {r: h for r, h in hosts.items() if r in v} == {r: h for r, h in v.items() if r in hosts}
    assert set(v.values()) == t.hosts()


@check("nchannels")
def _nchannels(t: T, v: int, f: dict[str, Any]) -> None:
    got = set(t["nccl_channels"]["n_channels"].drop_nulls().to_list()) | set(t["nccl_channels"]["coll_channels"].drop_nulls().to_list())
    assert got == {v}


@check("rings")
def _rings(t: T, v: dict[str, list[int]], f: dict[str, Any]) -> None:
    assert {f"{r['channel']:02d}": r["ranks"] for r in t.rows("nccl_channels", kind="ring")} == v


@check("ring_00")
def _ring00(t: T, v: list[int], f: dict[str, Any]) -> None:
    assert [r["ranks"] for r in t.rows("nccl_channels", kind="ring", channel=0)] == [v]


def _trees_text(rows: list[dict[str, Any]]) -> str:
    return " ".join(f"[{r['channel']}] {r['detail']}" for r in rows)


@check("trees")
def _trees(t: T, v: str, f: dict[str, Any]) -> None:
    assert _trees_text(t.rows("nccl_channels", kind="tree")) == v


@check("trees_rank1")
def _trees_rank1(t: T, v: str, f: dict[str, Any]) -> None:
    assert _trees_text(t.rows("nccl_channels", kind="tree", rank=1)) == v
    for r in t.rows("nccl_channels", kind="tree", rank=1):  # parent/children decoded from d/d/d->rank->parent
        kids, _, parent = r["detail"].split("->")
        assert r["tree_parent"] == int(parent) and r["tree_children"] == [int(k) for k in kids.split("/") if k != "-1"]


@check("graph_ring_lines")
def _graph_rings(t: T, v: list[str], f: dict[str, Any]) -> None:
    got = [f"Ring {r['channel']:02d} : {r['prev_rank']} -> {r['rank']} -> {r['next_rank']}"
           for r in t.rows("nccl_channels", kind="graph_ring")]
    assert got == v


@check("graph_channel_line")
def _graph_channel_line(t: T, v: str, f: dict[str, Any]) -> None:
    ch, path = v.strip().split(" : ")
    assert [(r["channel"], r["detail"]) for r in t.rows("nccl_topology", kind="graph_channel")] == [(int(ch), path)]


@check("connections")
def _connections(t: T, v: list[str], f: dict[str, Any]) -> None:
    check_connection_rows(t, v, exact=True)


@check("net_connection")
def _net_connection(t: T, v: str, f: dict[str, Any]) -> None:
    check_connection_rows(t, [v], exact=False)
    assert t.conns().filter(pl.col("transport") == "NET").height == 1


@check("connections_count")
def _connections_count(t: T, v: dict[str, int], f: dict[str, Any]) -> None:
    rows = t.conns().to_dicts()
    keys = []
    for r in rows:
        pair = f"{r['src_rank']}->{r['dst_rank']}"
        keys += [r["transport_detail"], pair, f"{pair} {r['transport_detail']}"]
    got = Counter(keys)
    assert {k: got[k] for k in v} == v


@check("transports")
def _transports(t: T, v: dict[str, int], f: dict[str, Any]) -> None:
    assert dict(Counter(t.conns()["transport"].to_list())) == v


@check("gdr", "gdr_on_shown_net_connections", "gdr_on_shown_net_connection")
def _gdr(t: T, v: bool, f: dict[str, Any]) -> None:
    net = t.conns().filter(pl.col("transport") == "NET")
    if net.height:
        assert set(net["gdr"].to_list()) == {v}
    else:  # no NET connection in the excerpt: the HCA-level GDR decision is what says it
        assert {r["gdr"] for r in _net_rows(t, "gdr")} == {v}


@check("net_devs_used")
def _net_devs(t: T, v: list[int], f: dict[str, Any]) -> None:
    assert sorted(set(t.conns().filter(pl.col("transport") == "NET")["net_dev"].to_list())) == v


@check("channels_seen")
def _channels_seen(t: T, v: list[int], f: dict[str, Any]) -> None:
    assert sorted(set(t.conns()["channel"].to_list())) == v


def _intra(t: T) -> pl.DataFrame:
    return t.conns().filter(pl.col("transport").is_in(["P2P", "SHM"]))


@check("transport", "transport_intra_node", "intra_node_transport")
def _transport(t: T, v: str, f: dict[str, Any]) -> None:
    intra = _intra(t)
    assert set(intra["transport_detail"].to_list()) == {v}
    assert set(intra["inter_node"].to_list()) == {False}
    if v == "P2P/CUMEM":
        assert set(intra["mechanism"].to_list()) == {"CUMEM"}


@check("transport_lines", "transport_intra_node_lines")
def _transport_lines(t: T, v: int, f: dict[str, Any]) -> None:
    assert _intra(t).height == v


@check("connected_all_rings_lines")
def _connected_rings(t: T, v: int, f: dict[str, Any]) -> None:
    assert len(t.rows("nccl_channels", kind="connected", detail="all rings")) == v


@check("ring_pxn", "ring_gdr")
def _ring_pxn(t: T, v: int, f: dict[str, Any]) -> None:
    rows = t.rows("nccl_channels", kind="connected")
    assert [(r["ring_pxn"], r["ring_gdr"]) for r in rows] == [(f["ring_pxn"], f["ring_gdr"])]


@check("nvls_tree_connected")
def _nvls_tree(t: T, v: bool, f: dict[str, Any]) -> None:
    assert bool(t.rows("nccl_channels", kind="connected", detail="NVLS tree")) is v


@check("channels_summary")
def _summary(t: T, v: dict[str, int], f: dict[str, Any]) -> None:
    got = {(r["coll_channels"], r["collnet_channels"], r["nvls_channels"], r["p2p_channels"], r["p2p_channels_per_peer"])
           for r in t.rows("nccl_channels", kind="summary")}
    assert got == {(v["coll"], v["collnet"], v["nvls"], v["p2p"], v["p2p_per_peer"])}


def _comm_match(r: dict[str, Any], want: dict[str, Any]) -> bool:
    cols = {"rank": "rank", "nranks": "nranks", "cudaDev": "cuda_dev", "nvmlDev": "nvml_dev", "busId": "bus_id",
            "commId": "comm_id", "func": "init_func"}
    return all(r[cols[k]] == x for k, x in want.items())


@check("init_start", "init_complete")
def _init_events(t: T, v: Any, f: dict[str, Any]) -> None:
    event = "init_start" if f.get("init_start") is v else "init_complete"
    rows = t.rows("nccl_comms", event=event)
    for want in v if isinstance(v, list) else [v]:
        assert any(_comm_match(r, want) for r in rows), (event, want)


@check("init_complete_lines")
def _init_complete_lines(t: T, v: int, f: dict[str, Any]) -> None:
    assert len(t.rows("nccl_comms", event="init_complete")) == v


@check("commId")
def _comm_id(t: T, v: str, f: dict[str, Any]) -> None:
    assert set(t["nccl_comms"]["comm_id"].to_list()) == {v}


@check("init_func")
def _init_func(t: T, v: str, f: dict[str, Any]) -> None:
    assert set(t["nccl_comms"]["init_func"].to_list()) == {v}
    assert set(t["nccl_init_timings"]["init_func"].to_list()) == {v}


@check("split")
def _split(t: T, v: dict[str, int], f: dict[str, Any]) -> None:
    rows = t.rows("nccl_comms", event="split")
    assert {r["split_color"] for r in rows} == {v["color"]}
    assert len({r["parent_ptr"] for r in rows}) == v["parent_comm_ptrs"]


@check("rank_to_nvmlDev")
def _rank_nvml(t: T, v: dict[int, int], f: dict[str, Any]) -> None:
    rows = t.conns().to_dicts()
    got = {r["src_rank"]: r["src_dev"] for r in rows} | {r["dst_rank"]: r["dst_dev"] for r in rows}
    assert got == v and not any(r["dev_is_bus_id"] for r in rows)


@check("destroy_complete")
def _destroy(t: T, v: dict[int, str], f: dict[str, Any]) -> None:
    rows = t.rows("nccl_comms", event="destroy_complete")
    assert {r["rank"]: r["bus_id"] for r in rows} == v and {r["nranks"] for r in rows} == {8}


@check("nccltests_avg_busbw_gbs")
def _avg_busbw(t: T, v: float, f: dict[str, Any]) -> None:
    assert [float(x) for x in t.fact("nccltests.avg_busbw_gbs")] == [v]


@check("nccltests_out_of_bounds")
def _oob_values(t: T, v: str, f: dict[str, Any]) -> None:
    assert t.fact("nccltests.out_of_bounds") == [v]


_PHASES = ("total", "kernels", "alloc", "bootstrap", "allgathers", "topo", "graphs", "connections", "rest")


@check("init_timings_s")
def _timings(t: T, v: dict[int, dict[str, float]], f: dict[str, Any]) -> None:
    rows = {r["rank"]: r for r in t.rows("nccl_init_timings", kind="init")}
    assert set(rows) == set(v)
    for rank, phases in v.items():
        for p in _PHASES:  # a phase the layout does not print is null (2.22 has no alloc)
            assert rows[rank][f"{p}_s"] == phases.get(p), (rank, p)


@check("dominant_init_phase")
def _dominant(t: T, v: str, f: dict[str, Any]) -> None:
    for r in t.rows("nccl_init_timings", kind="init"):
        assert max(_PHASES[1:], key=lambda p: r[f"{p}_s"] or 0.0) == v


@check("bootstrap_timings_s")
def _bootstrap_timings(t: T, v: dict[str, float], f: dict[str, Any]) -> None:
    (r,) = t.rows("nccl_init_timings", kind="bootstrap")
    assert {k: r[f"{k}_s"] for k in v} == v


@check("nvls_multicast_available")
def _nvls_mc(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    rows = t["nccl_facts"].filter(pl.col("key") == "nvls_multicast_support").to_dicts()
    assert [r["value"] for r in rows] == [str(v["available"]).lower()] and f"dev {v['dev']}" in rows[0]["message"]


# topology -----------------------------------------------------------------------------------------


@check("gpus")
def _gpus(t: T, v: dict[str, dict[str, Any]], f: dict[str, Any]) -> None:
    topo = t["nccl_topology"]
    for gpu, want in v.items():
        local = topo.filter((pl.col("kind") == "path") & (pl.col("node") == gpu) & (pl.col("link_type") == "PHB"))
        assert local["peer"].to_list() == [want["cpu"]]
        if "rank" in want:  # a GPU printed as a link target carries its rank: GPU/AB000 (1)
            assert topo.filter((pl.col("kind") == "link") & (pl.col("peer") == gpu))["node_info"].to_list() == [str(want["rank"])]


@check("cpu_nodes")
def _cpus(t: T, v: list[str], f: dict[str, Any]) -> None:
    topo = t["nccl_topology"]
    nodes = set(topo["node"].drop_nulls().to_list()) | set(topo["peer"].drop_nulls().to_list())
    assert {n for n in nodes if n.startswith("CPU/")} == set(v)


@check("gpu_gpu_path")
def _gpu_gpu(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    rows = t["nccl_topology"].filter((pl.col("kind") == "path") & pl.col("node").str.starts_with("GPU/")
                                     & pl.col("peer").str.starts_with("GPU/") & (pl.col("node") != pl.col("peer")))
    assert {(r["link_type"], r["hops"], r["bw_gbs"]) for r in rows.to_dicts()} == {(v["type"], v["hops"], v["bw"])}


@check("gpu_cpu_local_path")
def _gpu_cpu(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    rows = t["nccl_topology"].filter((pl.col("kind") == "path") & (pl.col("link_type") == "PHB"))
    assert {(r["link_type"], r["bw_gbs"]) for r in rows.to_dicts()} == {(v["type"], v["bw"])} and rows.height == 2


@check("nic")
def _nic(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    rows = t.rows("nccl_topology", kind="link", peer=v["id"])
    assert [(r["link_type"], r["bw_gbs"]) for r in rows] == [("PCI", v["pci_bw"])]


@check("graph")
def _graph(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    (r,) = t.rows("nccl_topology", kind="graph")
    assert (r["pattern"], r["cross_nic"], r["n_channels"], r["bw_intra_gbs"], r["bw_inter_gbs"], r["type_intra"],
            r["type_inter"], r["same_channels"]) == (v["pattern"], v["crossNic"], v["nChannels"], v["bwIntra"], v["bwInter"],
                                                     v["typeIntra"], v["typeInter"], v["sameChannels"])


@check("graph_channel_0")
def _graph_channel0(t: T, v: str, f: dict[str, Any]) -> None:
    assert [(r["channel"], r["detail"], r["graph_seq"]) for r in t.rows("nccl_topology", kind="graph_channel")] == [(0, v, 0)]


# collnet --------------------------------------------------------------------------------------------


@check("nccl_lines")
def _nccl_lines(t: T, v: int, f: dict[str, Any]) -> None:
    lines = set()
    for df in t.df.values():
        if "line_no" in df.columns:
            lines |= set(df["line_no"].drop_nulls().to_list())
    assert len(lines) == v


@check("sharp_init")
def _sharp(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    rows = t["nccl_facts"].filter(pl.col("key") == "sharp_rank").to_dicts()
    assert [r["value"] for r in rows] == [f"{v['rank']}/{v['size']}"] and rows[0]["message"].endswith(v["hca"])


@check("warn")
def _warn(t: T, v: list[dict[str, str]], f: dict[str, Any]) -> None:
    got = {(f"{r['src_file']}:{r['src_line']}", r["message"]) for r in t.rows("nccl_warnings", level="WARN")}
    assert got == {(w["src"], w["msg"]) for w in v}


@check("warn_count")
def _warn_count(t: T, v: int, f: dict[str, Any]) -> None:
    assert len(t.rows("nccl_warnings", level="WARN")) == v


@check("error_trace_result_code")
def _trace_rc(t: T, v: int, f: dict[str, Any]) -> None:
    rows = t.rows("nccl_warnings", is_error_trace=True)
    assert rows and {r["return_code"] for r in rows} == {v}
    assert {r["return_name"] for r in rows} == {{2: "ncclSystemError", 6: "ncclRemoteError"}[v]}


@check("error_trace_lines")
def _trace_lines(t: T, v: int, f: dict[str, Any]) -> None:
    assert len(t.rows("nccl_warnings", is_error_trace=True)) == v


@check("error_trace")
def _trace(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    rows = t.rows("nccl_warnings", is_error_trace=True)
    assert [(f"{r['src_file']}:{r['src_line']}", r["return_code"]) for r in rows] == [(v["src"], v["result"])]


@check("collnet_connection")
def _collnet(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    (r,) = t.conns().to_dicts()
    assert (r["channel"], r["conn_index"], r["src_rank"], r["direction"], r["transport"], r["net"], r["net_dev"], r["gdr"]) \
        == (v["channel"], v["connIndex"], v["rank"], v["dir"], "COLLNET", v["net"], v["dev"], v["gdr"])


@check("warns")
def _warns(t: T, v: list[dict[str, Any]], f: dict[str, Any]) -> None:
    rows = t.rows("nccl_warnings", level="WARN")
    assert len(rows) == len(v)
    for r, w in zip(rows, v):
        got = {"src": f"{r['src_file']}:{r['src_line']}", "peer": r["ib_peer"], "status": r["ib_status"],
               "opcode": r["ib_opcode"], "len": r["ib_len"], "vendor_err": r["ib_vendor_err"], "req": r["ib_request"],
               "host": r["host"], "cudaDev": r["cuda_dev"], "localGid": r["ib_local_gid"], "remoteGid": r["ib_remote_gid"]}
        assert {k: got[k] for k in w} == w


@check("status_name")
def _status_name(t: T, v: str, f: dict[str, Any]) -> None:
    assert {r["ib_status_name"] for r in t.rows("nccl_warnings", level="WARN")} == {v}


@check("thread_tag")
def _thread_tag(t: T, v: str, f: dict[str, Any]) -> None:
    tags = {r["thread_tag"] for r in t.rows("nccl_warnings", is_error_trace=True)} - {None}
    assert tags == {v.strip("[]")}


# COLL ----------------------------------------------------------------------------------------------


def _coll_match(r: dict[str, Any], want: dict[str, Any]) -> bool:
    got = {"op": r["op"], "opCount": r["op_count"], "count": r["count"], "datatype": r["datatype"], "redop": r["redop"],
           "root": r["root"], "nranks": r["nranks"], "cudaDev": r["cuda_dev"], "pid": r["pid"], "comm": r["comm_ptr"],
           "peer": r["peer"], "recvbuff": r["recvbuff"], "sendbuff": r["sendbuff"],
           "host_suffix": (r["host"] or "").rsplit("-", 1)[-1]}
    return all(got[k] == x for k, x in want.items())


@check("ops")
def _ops(t: T, v: list[dict[str, Any]], f: dict[str, Any]) -> None:
    rows = t["nccl_colls"].sort("line_no").to_dicts()
    assert len(rows) == len(v) and all(_coll_match(r, w) for r, w in zip(rows, v)), rows


@check("ops_in_order")
def _ops_in_order(t: T, v: list[dict[str, Any]], f: dict[str, Any]) -> None:
    _ops(t, v, f)


@check("bytes")
def _bytes(t: T, v: dict[int, int], f: dict[str, Any]) -> None:
    got = {r["op_count"]: r["bytes"] for r in t["nccl_colls"].to_dicts()}
    assert got == v and set(t["nccl_colls"]["datatype_name"].to_list()) == {"float32"}


@check("comms")
def _comms(t: T, v: dict[str, dict[str, int]], f: dict[str, Any]) -> None:
    got = {r["comm_ptr"]: {"pid": r["pid"], "cudaDev": r["cuda_dev"]} for r in t["nccl_colls"].to_dicts()}
    assert got == v


@check("send_lines", "recv_lines")
def _send_recv(t: T, v: int, f: dict[str, Any]) -> None:
    ops = Counter(t["nccl_colls"]["op"].to_list())
    assert (ops["Send"], ops["Recv"]) == (f["send_lines"], f["recv_lines"])


@check("peer_field")
def _peer_field(t: T, v: str, f: dict[str, Any]) -> None:
    for r in t["nccl_colls"].to_dicts():
        assert r["peer"] == r[v]


# watchdog ----------------------------------------------------------------------------------------


def _timeouts(t: T) -> list[dict[str, Any]]:
    return t.rows("watchdog_timeouts", record="timeout")


def _event_match(r: dict[str, Any], want: dict[str, Any]) -> bool:
    got = {"rank": r["rank"], "seq": r["seq"], "op": r["op_type"], "numel_in": r["numel_in"], "numel_out": r["numel_out"],
           "timeout_ms": r["timeout_ms"], "ran_ms": r["elapsed_ms"], "tensor_shape": r["tensor_shape"]}
    return all(got[k] == x for k, x in want.items())


@check("format_code")
def _format_code(t: T, v: str, f: dict[str, Any]) -> None:
    assert {r["format"] for r in _timeouts(t)} == {v}


@check("events")
def _events(t: T, v: list[dict[str, Any]], f: dict[str, Any]) -> None:
    rows = _timeouts(t)
    assert len(rows) == len(v) and all(_event_match(r, w) for r, w in zip(rows, v)), rows


@check("event")
def _event(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    (r,) = _timeouts(t)
    assert _event_match(r, v) and r["rank"] == f["rank"]


@check("ranks_missing_from_excerpt")
def _missing(t: T, v: list[int], f: dict[str, Any]) -> None:
    assert not {r["rank"] for r in _timeouts(t)} & set(v)


@check("rank")
def _rank(t: T, v: int, f: dict[str, Any]) -> None:
    assert set(t["watchdog_timeouts"]["rank"].drop_nulls().to_list()) == {v}


@check("pg")
def _pg(t: T, v: str, f: dict[str, Any]) -> None:
    assert {r["pg_id"] for r in _timeouts(t)} == {v}
    assert {r["pg_id"] for r in t.rows("watchdog_timeouts", record="status")} == {v}


@check("pg_tag")
def _pg_tag(t: T, v: dict[str, str], f: dict[str, Any]) -> None:
    for r in t.rows("watchdog_timeouts", record="status") + [_timeouts(t)[0]]:
        assert {k: r[k] for k in v} == v


def _status_of(t: T, fmt: str) -> dict[str, Any]:
    (r,) = t.rows("watchdog_timeouts", record="status", format=fmt)
    return r


@check("timeout_at_work", "last_enqueued", "last_completed")
def _timeout_at(t: T, v: int, f: dict[str, Any]) -> None:
    r = _status_of(t, "timeout_at_work")
    assert (r["seq"], r["last_enqueued"], r["last_completed"]) == (f["timeout_at_work"], f["last_enqueued"], f["last_completed"])
    (timeout,) = _timeouts(t)  # the timed-out work row is completed from the status line
    assert (timeout["last_enqueued"], timeout["last_completed"]) == (f["last_enqueued"], f["last_completed"])


@check("rank4_status")
def _rank4_status(t: T, v: dict[str, int], f: dict[str, Any]) -> None:
    for fmt in ("timeout_at_work", "exception_at_work"):
        r = _status_of(t, fmt)
        assert (r["rank"], r["seq"], r["last_enqueued"], r["last_completed"]) == (4, v["timeout_at_work"], v["last_enqueued"],
                                                                                 v["last_completed"])
    r4 = [r for r in _timeouts(t) if r["rank"] == 4][0]
    assert (r4["last_enqueued"], r4["last_completed"]) == (v["last_enqueued"], v["last_completed"])


@check("status")
def _status(t: T, v: dict[str, int], f: dict[str, Any]) -> None:
    fmt, seq = ("exception_at_work", v["detected_at_work"]) if "detected_at_work" in v else ("failure_at_seq", v["failure_at_seq"])
    r = _status_of(t, fmt)
    assert (r["seq"], r["last_enqueued"], r["last_completed"]) == (seq, v["last_enqueued"], v["last_completed"])
    (timeout,) = _timeouts(t)
    assert (timeout["last_enqueued"], timeout["last_completed"]) == (v["last_enqueued"], v["last_completed"])


@check("teardown_lines")
def _teardown(t: T, v: int, f: dict[str, Any]) -> None:
    assert len(t.rows("watchdog_timeouts", record="teardown")) == v


@check("flight_recorder")
def _flight(t: T, v: str, f: dict[str, Any]) -> None:
    (r,) = t.rows("watchdog_timeouts", record="flight_recorder")
    assert "FlightRecorder is disabled" in r["message"]


@check("exception_site")
def _exception_site(t: T, v: str, f: dict[str, Any]) -> None:
    (r,) = t.rows("watchdog_timeouts", record="exception_site")
    assert r["message"].endswith(v) and r["src"] == v.split(" at ")[1]


# nccl-tests -----------------------------------------------------------------------------------------


@check("rows")
def _nt_rows(t: T, v: int, f: dict[str, Any]) -> None:
    assert t["nccl_tests_results"].height == v


def _nt(r: dict[str, Any], want: dict[str, Any]) -> None:
    top = {"size": r["size_bytes"], "count": r["count"], "type": r["type"], "redop": r["redop"], "root": r["root"]}
    assert {k: top[k] for k in want if k in top} == {k: x for k, x in want.items() if k in top}
    for side in ("oop", "ip"):
        got = {"time_us": r[f"{side}_time_us"], "algbw": r[f"{side}_algbw_gbs"], "busbw": r[f"{side}_busbw_gbs"],
               "wrong": r[f"{side}_wrong"]}
        assert {k: got[k] for k in want[side]} == want[side]


@check("first_row")
def _first_row(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    _nt(t["nccl_tests_results"].sort("line_no").row(0, named=True), v)


@check("last_row")
def _last_row(t: T, v: dict[str, Any], f: dict[str, Any]) -> None:
    _nt(t["nccl_tests_results"].sort("line_no").row(-1, named=True), v)


@check("check_algbw")
def _algbw(t: T, v: bool, f: dict[str, Any]) -> None:
    for r in t["nccl_tests_results"].to_dicts():
        for side in ("oop", "ip"):
            assert abs(r["size_bytes"] / r[f"{side}_time_us"] / 1e3 - r[f"{side}_algbw_gbs"]) < 0.01


@check("inferred_nranks")
def _inferred_nranks(t: T, v: int, f: dict[str, Any]) -> None:
    ratios = [r["oop_busbw_gbs"] / r["oop_algbw_gbs"] for r in t["nccl_tests_results"].to_dicts()]
    ratio = sum(ratios) / len(ratios)  # busbw/algbw = 2(n-1)/n for AllReduce
    assert round(2 / (2 - ratio)) == v


# -- the tests ------------------------------------------------------------------------------------


def test_fixture_covers_every_file_and_sources_entry() -> None:
    files = {p.name for p in LOGS.glob("*.log")}
    sources = set(re.findall(r"^### (\S+\.log)\s*$", (LOGS / "SOURCES.md").read_text(), re.M))
    assert set(FACTS) == files == sources
    assert len(files) == 33


@pytest.mark.parametrize("name", sorted(FACTS))
def test_ground_truth(name: str) -> None:
    facts = FACTS[name]
    unknown = set(facts) - set(CHECKS)
    assert not unknown, f"fact keys without a checker: {unknown}"
    t = T(name)
    for key, value in facts.items():
        try:
            CHECKS[key](t, value, facts)
        except AssertionError as exc:
            raise AssertionError(f"{name}: fact {key!r} = {value!r}: {exc}") from None
    # every line of every real excerpt is understood: no unknown-format warning
    assert [w for w in t.info["warnings"] if w["code"] == "unknown_lines"] == []
