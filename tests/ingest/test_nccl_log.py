"""NCCL log parser: line formats across NCCL 2.4-2.30, launcher wrappers, attribution, bad input.

The connection-line formats are those of the NCCL release tags' format strings (see
``schemas/nccl.py``), one line per distinct shape. Every file is parsed twice: through the bulk
(columnar) path and with it disabled (per-line path only), and the two must agree.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from stallscope.errors import IngestError
from stallscope.ingest import nccl_bulk, nccl_memo, nccl_messages
from stallscope.ingest.nccl_log import parse_nccl_log
from stallscope.ingest.schemas.nccl import FINGERPRINTS, version_range
from stallscope.store.schema.nccl import NCCL_COLLS, NCCL_CONNECTIONS, NCCL_TABLES
from test_nccl_ground_truth import LOGS

P = "node-1:4242:4243 [0] NCCL INFO "


@pytest.fixture(autouse=True)
def _column_replay_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay column by column however few lines a block has (the logs here are small), so that every
    comparison with the per-line path below covers it."""
    monkeypatch.setattr(nccl_memo, "MIN_COLUMN_LINES", 0)


def parse(tmp_path: Path, text: str | bytes, name: str = "x.log", **kw: Any) -> dict[str, Any]:
    """Parse ``text`` through both paths; assert they agree; return tables as polars frames."""
    f = tmp_path / name
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    a = parse_nccl_log(f, **kw)
    orig = nccl_bulk.lines_array
    nccl_bulk.lines_array = lambda *_: None  # type: ignore[assignment]
    try:
        b = parse_nccl_log(f, **kw)
    finally:
        nccl_bulk.lines_array = orig  # type: ignore[assignment]
    for name_ in a["arrow"]:
        da, db = pl.DataFrame(a["arrow"][name_]), pl.DataFrame(b["arrow"][name_])
        if "line_no" in da.columns:
            da, db = da.sort("line_no", maintain_order=True), db.sort("line_no", maintain_order=True)
        assert_frame_equal(da, db)
    assert a["warnings"] == b["warnings"]
    a["df"] = {k: pl.DataFrame(v) for k, v in a["arrow"].items()}
    return a


def conns(info: dict[str, Any]) -> list[dict[str, Any]]:
    return info["df"]["nccl_connections"].sort("line_no").to_dicts()


def test_hot_table_column_order_matches_specs() -> None:
    assert nccl_messages.CONN_COLUMNS == tuple(NCCL_CONNECTIONS.schema.names)
    assert nccl_messages.COLL_COLUMNS == tuple(NCCL_COLLS.schema.names)


def test_row_buffer_builds_the_same_table_by_columns_and_by_rows() -> None:
    """RowBuffer.to_arrow column by column (pyarrow or polars: values of their column's type) gives what it
    gives from row tuples; values of another type (text in a number column, numbers that overflow) take the
    row path, or are made to fit one by one."""
    import pyarrow as pa

    from stallscope.ingest.nccl_state import RowBuffer, coerce

    def reference(buf: RowBuffer) -> pa.Table:
        try:
            return buf.by_rows()
        except (pl.exceptions.PolarsError, pa.ArrowException, OverflowError, TypeError, ValueError):
            cols = list(zip(*buf.rows))
            return pa.Table.from_arrays([pa.array([coerce(v, f.type) for v in c], type=f.type) for f, c in zip(buf.schema, cols)],
                                        schema=buf.schema)

    tables: dict[str, list[tuple[Any, ...]]] = {}
    for f in sorted(LOGS.glob("*.log")):
        for name, t in parse_nccl_log(f)["arrow"].items():
            tables.setdefault(name, []).extend(pl.from_arrow(t).rows())  # type: ignore[union-attr]
    odd = {"nccl_env": [("h", "12", 3, 1, "NAME", 5, "f", 1), ("h", 1 << 70, 3, True, "N", "v", "f", 2.0)],
           "nccl_facts": [("h", 1, 2, 1 << 40, "k", None, "m", "f", "7")]}
    # one odd value at a time in every column: where a column-by-column build takes it, it must agree
    kinds = {"int": [True, 2.0, 2.5, "12", 1 << 70, float("nan")], "float": [3, True, "1.5"], "str": [5, True, 1.5],
             "bool": [1, 0, 2, "x", 1.0], "list": [(1, 2), [1, "2"], [True], [1.0], "ab", [None, 1]]}
    for spec in NCCL_TABLES:
        for c in spec.schema:
            t = c.type
            kind = ("int" if pa.types.is_integer(t) else "float" if pa.types.is_floating(t) else "str" if pa.types.is_string(t)
                    else "bool" if pa.types.is_boolean(t) else "list")
            odd.setdefault(spec.name, []).extend(tuple(v if g.name == c.name else None for g in spec.schema) for v in kinds[kind])
    for spec in NCCL_TABLES:
        for rows in (tables.get(spec.name, []), odd.get(spec.name, []), *([r] for r in odd.get(spec.name, []))):
            if not rows:
                continue
            buf = RowBuffer(spec.name, spec.schema)
            buf.rows = list(rows)
            ref = reference(buf)
            assert buf.to_arrow().equals(ref), spec.name
            for build in (buf.by_arrow_columns, buf.by_polars_columns):
                try:
                    got = build()
                except (pl.exceptions.PolarsError, pa.ArrowException, OverflowError, TypeError, ValueError):
                    continue
                assert got.equals(ref), (spec.name, build.__name__, rows[:1])
    assert sum(map(len, tables.values())) > 500


def test_every_column_documented() -> None:
    for spec in NCCL_TABLES:
        assert spec.doc
        for c in spec.columns:
            assert len(c.doc) > 10, (spec.name, c.name)
        assert {"file", "line_no"} <= set(spec.schema.names), spec.name


# -- connection lines of every NCCL generation ---------------------------------------------------

# (line after the prefix, expected fields)
CONNECTION_FORMATS: list[tuple[str, dict[str, Any]]] = [
    # 2.4: cudaDev brackets, NET without brackets, old SHM spelling
    ("Ring 00 : 0[0] -> 1[1] via P2P/IPC", dict(transport="P2P", mechanism="IPC", dev_is_bus_id=False, src_dev=0)),
    ("Ring 01 : 1 -> 0 [send] via NET/IB/0/GDRDMA", dict(transport="NET", net="IB", net_dev=0, gdr=True, dev_is_bus_id=None,
                                                         direction="send")),
    ("Ring 00 : 0[0] -> 1[1] via direct shared memory", dict(transport="SHM", mechanism="direct shared memory")),
    # 2.5-2.6: busId brackets
    ("Ring 00 : 155[3d000] -> 157[b2000] via P2P/IPC", dict(dev_is_bus_id=True, src_bus_id="3d000", src_dev=0x3D000, dst_dev=0xB2000)),
    # 2.7-2.11: Channel, /read, common device, indirect, /Shared
    ("Channel 02 : 4[31000] -> 7[e3000] via P2P/IPC/read", dict(channel=2, conn_index=None, read=True, mechanism="IPC")),
    ("Channel 00 : 0[1b000] -> 1[1b000] via P2P/common device/read", dict(mechanism="common device", read=True)),
    ("Channel 00 : 0[1b000] -> 3[3e000] via P2P/indirect/2[2e000]/read", dict(mechanism="indirect", indirect_rank=2, read=True)),
    ("Channel 03 : 4[89000] -> 12[8d000] [send] via NET/IB/0/GDRDMA/Shared", dict(shared=True, gdr=True)),
    # 2.12+: /connIndex on NET, PXN proxy rank
    ("Channel 00/1 : 0[1b000] -> 8[1b000] [send] via NET/IB/1(2)/GDRDMA", dict(conn_index=1, net_dev=1, pxn_proxy_rank=2, gdr=True)),
    # 2.13+: SHM/<send>/<recv> with copy engine
    ("Channel 00 : 0[1b000] -> 1[1c000] via SHM/CE/direct", dict(transport="SHM", mechanism="CE/direct", ce=True)),
    # 2.18.3+: nvmlDev brackets; CUMEM, CE, MNNVL
    ("Channel 05/0 : 3[3] -> 4[4] via P2P/CUMEM/read", dict(dev_is_bus_id=False, src_dev=3, mechanism="CUMEM", read=True)),
    ("Channel 05/1 : 3[3] -> 4[4] via P2P/IPC/CE", dict(mechanism="IPC", ce=True, conn_index=1)),
    ("Channel 00/0 : 0[0] -> 9[1] via P2P/MNNVL", dict(mechanism="MNNVL")),
    # 2.26+: GDR through PCI; plugin network names
    ("Channel 09/0 : 33[1] -> 41[1] [send] via NET/IBext_v8/4/GDRDMA(PCI)/Shared", dict(net="IBext_v8", net_dev=4, gdr=True,
                                                                                       gdr_pci=True, shared=True)),
    ("Channel 00/0 : 3[3] -> 4[0] [receive] via NET/Socket/1", dict(net="Socket", gdr=False, direction="receive", printer_rank=4)),
    # 2.30.7: single SHM mode
    ("Channel 00 : 0[0] -> 1[1] via SHM/direct", dict(transport="SHM", mechanism="direct")),
]


def test_connection_formats_of_every_generation(tmp_path: Path) -> None:
    info = parse(tmp_path, "".join(P + line + "\n" for line, _ in CONNECTION_FORMATS))
    rows = conns(info)
    assert len(rows) == len(CONNECTION_FORMATS)
    for row, (line, want) in zip(rows, CONNECTION_FORMATS):
        assert row["transport_detail"] == line.split(" via ", 1)[1]
        assert {k: row[k] for k in want} == want, line
        assert row["inter_node"] is (False if row["transport"] in ("P2P", "SHM") else None)
    assert info["warnings"] == []


def test_collnet_formats(tmp_path: Path) -> None:
    lines = ["Coll 00 : 3 [send] via COLLNET/SHARP/0/GDRDMA", "CollNet 01 : 3 [receive] via COLLNET/SHARP/1",
             "CollNet 02/1 : 3 [send] via COLLNET/IBext/2/GDRDMA(PCI)"]
    rows = conns(parse(tmp_path, "".join(P + ln + "\n" for ln in lines)))
    assert [(r["channel"], r["conn_index"], r["src_rank"], r["dst_rank"], r["transport"], r["net"], r["net_dev"], r["gdr"],
             r["gdr_pci"], r["inter_node"]) for r in rows] == [
        (0, None, 3, None, "COLLNET", "SHARP", 0, True, False, True),
        (1, None, 3, None, "COLLNET", "SHARP", 1, False, False, True),
        (2, 1, 3, None, "COLLNET", "IBext", 2, True, True, True)]


# -- launcher wrappers ---------------------------------------------------------------------------

WRAPPERS = ["", "[1,0]<stdout>:", "[155] ", "(RayTrainWorker pid=615, ip=10.72.7.6) ", "0: ", "> ",
            "[2025-03-01 10:00:00] ", "2025-03-01T10:00:00.123Z ", "[default0]:", "\x1b[36m(pid=3)\x1b[0m "]


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_prefix_found_behind_any_wrapper(tmp_path: Path, wrapper: str) -> None:
    text = (f"{wrapper}gpu-7.cluster:123:456 [5] NCCL INFO Channel 01/0 : 3[5] -> 4[6] via P2P/CUMEM\n"
            f"{wrapper}gpu-7.cluster:123:456 [5] NCCL INFO AllReduce: opCount 1f sendbuff 0x1 recvbuff 0x2 count 10 "
            f"datatype 9 op 4 root 0 comm 0xabc [nranks=8] stream 0x5\n"
            f"{wrapper}gpu-7.cluster:123:457 [5] misc/socket.cc:484 NCCL WARN Net : Connection closed by remote peer\n")
    info = parse(tmp_path, text)
    (c,) = conns(info)
    assert (c["host"], c["pid"], c["tid"], c["cuda_dev"], c["channel"], c["src_rank"]) == ("gpu-7.cluster", 123, 456, 5, 1, 3)
    (coll,) = info["df"]["nccl_colls"].to_dicts()
    assert (coll["host"], coll["op"], coll["op_count"], coll["datatype_name"], coll["bytes"], coll["redop_name"]) == \
        ("gpu-7.cluster", "AllReduce", 0x1F, "bfloat16", 20, "avg")
    (w,) = info["df"]["nccl_warnings"].to_dicts()
    assert (w["host"], w["tid"], w["src_file"], w["src_line"], w["message"]) == \
        ("gpu-7.cluster", 457, "misc/socket.cc", 484, "Net : Connection closed by remote peer")
    assert info["warnings"] == []


def test_prefix_stripped_and_bare_messages(tmp_path: Path) -> None:
    text = ("NCCL version 2.24.3+cuda12.2\nUsing network IB\n"
            "ncclCommInitRankConfig comm 0x1 rank 2 nranks 8 cudaDev 2 nvmlDev 2 busId 1a000 commId 0x9 - Init START\n"
            "Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM\nsome program output\n")
    info = parse(tmp_path, text)
    (comm,) = info["df"]["nccl_comms"].to_dicts()
    assert (comm["host"], comm["rank"], comm["version"], comm["cuda_version"], comm["init_func"]) == \
        (None, 2, "2.24.3", "12.2", "ncclCommInitRankConfig")
    assert conns(info)[0]["transport_detail"] == "P2P/CUMEM"
    assert info["warnings"] == []  # bare lines that are not NCCL's are program output, not "unknown"


# -- communicators, attribution, versions --------------------------------------------------------

def test_comm_lifecycle_formats(tmp_path: Path) -> None:
    lines = [
        "comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 - Init COMPLETE",  # 2.4
        "comm 0x2 rank 1 nranks 4 cudaDev 1 busId 1c000 - Init COMPLETE",  # 2.5-2.15
        "comm 0x3 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 3d000 commId 0xaa - Init START",  # 2.18.3-2.20
        "comm 0x3 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0",  # 2.20+
        "ncclCommSplit comm 0x4 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 1c000 parent 0x3 color 7 key 1 commId 0xbb - Init START",
        "ncclCommSplit comm 0x5 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 parent 0x3 splitCount 1 color 7 key 0- Init START",
        "[Rank 3] ncclCommInitRankConfig comm 0x6 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 3d000 commId 0xcc - Init START",
        "comm 0x3 rank 3 nranks 16 cudaDev 3 busId 3d000 - Destroy COMPLETE",
        "comm 0x3 rank 3 nranks 16 cudaDev 3 busId 3d000 - Abort COMPLETE",
        "bootstrapSplit: comm 0x4 parent 0x3 rank 1 nranks 2 color 7 key 1 prev 0 next 0 - DONE",
    ]
    rows = parse(tmp_path, "".join(P + ln + "\n" for ln in lines))["df"]["nccl_comms"].sort("line_no").to_dicts()
    assert [(r["event"], r["comm_ptr"], r["rank"], r["nranks"], r["comm_id"], r["init_func"]) for r in rows] == [
        ("init_complete", "0x1", 0, 2, None, None), ("init_complete", "0x2", 1, 4, None, None),
        ("init_start", "0x3", 3, 16, "0xaa", None), ("topology", "0x3", 3, 16, None, None),
        ("init_start", "0x4", 1, 2, "0xbb", "ncclCommSplit"), ("init_start", "0x5", 0, 2, None, "ncclCommSplit"),
        ("init_start", "0x6", 3, 16, "0xcc", "ncclCommInitRankConfig"), ("destroy_complete", "0x3", 3, 16, None, None),
        ("abort_complete", "0x3", 3, 16, None, None), ("split", "0x4", 1, 2, None, None)]
    start = rows[2]  # nNodes/localRanks of the later topology line are copied onto the comm's other rows
    assert (start["nnodes"], start["local_ranks"], start["local_rank"], start["nvml_dev"], start["bus_id"]) == (2, 8, 3, 3, "3d000")
    assert (rows[5]["parent_ptr"], rows[5]["split_color"], rows[5]["split_key"]) == ("0x3", 7, 0)


def test_comm_attribution_per_thread_across_blocks(tmp_path: Path) -> None:
    a, b = "h:1:10 [0] NCCL INFO ", "h:1:11 [1] NCCL INFO "
    lines = [a + "comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xc1 - Init START",
             b + "Channel 00/0 : 1[1] -> 0[0] via P2P/IPC",  # other thread: not attributable
             a + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"] + \
            [a + f"Channel {c:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for c in range(1, 40)] + \
            [a + "comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xc1 - Init COMPLETE",
             a + "Channel 00/1 : 0[0] -> 1[1] via P2P/IPC"]  # after COMPLETE: a runtime connection, not attributable
    info = parse(tmp_path, "".join(ln + "\n" for ln in lines), block_size=300)  # ~3 lines per read block
    rows = conns(info)
    assert [r["comm_id"] for r in rows] == [None] + ["0xc1"] * 40 + [None]
    assert rows[-1]["line_no"] == len(lines)


def test_inter_node_known_from_the_file(tmp_path: Path) -> None:
    lines = ["a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 3 cudaDev 0 nvmlDev 0 busId 1000 commId 0xc - Init START",
             "b:2:2 [0] NCCL INFO comm 0x2 rank 1 nranks 3 cudaDev 0 nvmlDev 0 busId 1000 commId 0xc - Init START",
             "a:1:3 [1] NCCL INFO comm 0x3 rank 2 nranks 3 cudaDev 1 nvmlDev 1 busId 2000 commId 0xc - Init START",
             "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
             "a:1:3 [1] NCCL INFO Channel 00/0 : 2[1] -> 0[0] [send] via NET/IB/0",  # same host: NET inside a node
             "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 9[0] [send] via NET/IB/0"]  # rank 9's host unknown
    rows = conns(parse(tmp_path, "\n".join(lines) + "\n"))
    assert [r["inter_node"] for r in rows] == [True, False, None]


def test_version_exact_per_process_and_inferred(tmp_path: Path) -> None:
    two = ("a:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\nb:2:2 [0] NCCL INFO NCCL version 2.18.5+cuda12.1\n"
           "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xc - Init START\n"
           "b:2:2 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xc - Init START\n"
           "c:3:3 [0] NCCL INFO comm 0x3 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1000 commId 0xd - Init START\n")
    rows = parse(tmp_path, two)["df"]["nccl_comms"].sort("line_no").to_dicts()
    assert [(r["host"], r["version"]) for r in rows] == [("a", "2.19.3"), ("b", "2.18.5"), ("c", None)]  # never guessed
    inferred = parse(tmp_path, P + "Channel 02 : 4[31000] -> 7[e3000] via P2P/IPC/read\n" + P + "Using network Socket\n")
    facts = inferred["df"]["nccl_facts"].to_dicts()
    assert [(f["key"], f["value"]) for f in facts] == [("version_range", "2.7.3-2.13.x")]


def test_every_recorded_fingerprint_is_defined(tmp_path: Path) -> None:
    """A fingerprint name the parser records but the table lacks would be silently ignored."""
    import re

    names: set[str] = set()
    for f in ("nccl_messages.py", "nccl_setup.py", "nccl_topology.py", "nccl_errors.py", "nccl_bulk.py"):
        text = (Path(nccl_messages.__file__).parent / f).read_text()
        for call in re.findall(r"(?:fp|fingerprints)\.add\((.*?)\)\n", text, re.S):
            call = re.sub(r'group\("\w+"\)|== "\w+"|"\w+" in ', "", call)  # literals in the conditions
            names |= set(re.findall(r'(?<![f\w])"(\w+)"', call))
    names |= {f"{k}_channel_{v}" for k in ("net", "p2p") for v in ("noci", "ci_busid", "ci_dev")}  # built with f-strings
    assert len(names) > 40 and names <= set(FINGERPRINTS), names - set(FINGERPRINTS)
    seen: set[str] = set()
    for f in sorted(LOGS.glob("*.log")):
        seen |= set(parse_nccl_log(f)["fingerprints"])
    assert seen <= set(FINGERPRINTS) and len(seen) > 30


def test_version_range_arithmetic() -> None:
    assert version_range(set()) is None
    assert version_range({"p2p_channel_ci_dev", "connected_rings_plain"}) == "2.18.3-2.23.x"
    assert version_range({"init_timings_v22", "connected_rings_pxn"}) is None  # mixed versions: no answer
    for name, fp in FINGERPRINTS.items():
        assert fp.hi is None or fp.lo <= fp.hi, name


# -- other message families ----------------------------------------------------------------------

def test_net_env_affinity_and_gdr_lines(tmp_path: Path) -> None:
    lines = ["NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1:2/RoCE [2]mlx5_2:1::3/IB [RO]; OOB ib0:10.0.0.1<0>",
             "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
             "GPU Direct RDMA Disabled for GPU 1b000 / HCA 1 (distance 5 > 4)",
             "Using network IB", "NET/IB : No device found.", "Failed to open libibverbs.so[.1]",
             "NCCL_IB_HCA set by environment to mlx5_0,mlx5_1", "NCCL_IB_TIMEOUT set by environment to 22.",
             "NCCL_TOPO_FILE set by environment to /etc/topo.xml.", "Setting affinity for GPU 0 to ffff,ffff0000"]
    df = parse(tmp_path, "".join(P + ln + "\n" for ln in lines))["df"]
    ib = df["nccl_net"].filter(pl.col("kind") == "ib_device").to_dicts()
    assert [(r["dev_index"], r["dev_name"], r["link"], r["features"], r["gdr"], r["relaxed_ordering"]) for r in ib] == [
        (0, "mlx5_0", "IB", None, True, True), (1, "mlx5_1", "RoCE", ":2", None, True), (2, "mlx5_2", "IB", "::3", None, True)]
    kinds = df["nccl_net"]["kind"].to_list()
    assert {"oob_if", "gdr", "gdr_gpu", "selected", "no_device", "ibverbs_missing"} <= set(kinds)
    env = {r["name"]: r["value"] for r in df["nccl_env"].to_dicts()}
    assert env == {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_IB_TIMEOUT": "22", "NCCL_TOPO_FILE": "/etc/topo.xml."}
    (aff,) = df["nccl_affinity"].to_dicts()
    assert (aff["gpu"], aff["cpu_count"]) == (0, 32)


def test_warn_formats_and_error_traces(tmp_path: Path) -> None:
    text = ("h:1:2 [3] transport/net_ib/p2p.cc:688 (ncclIbCompletionEventProcess) NCCL WARN NET/IB: Got completion from peer "
            "10.0.0.2<4000> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129  localGid ::1 "
            "remoteGids::2 hca mlx5_3\n"
            "h:1:2 [3] NCCL INFO transport/net.cc:1302 -> 6\n"
            "h:1:2 [3] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]\n")
    info = parse(tmp_path, text)
    w = info["df"]["nccl_warnings"].sort("line_no").to_dicts()
    assert (w[0]["func"], w[0]["ib_status"], w[0]["ib_status_name"], w[0]["ib_opcode"], w[0]["ib_vendor_err"], w[0]["ib_hca"],
            w[0]["ib_local_gid"], w[0]["ib_remote_gid"]) == \
        ("ncclIbCompletionEventProcess", 12, "IBV_WC_RETRY_EXC_ERR", 0, 129, "mlx5_3", "::1", "::2")
    assert [(r["return_code"], r["return_name"], r["thread_tag"]) for r in w[1:]] == \
        [(6, "ncclRemoteError", None), (6, "ncclRemoteError", "Progress Thread")]
    facts = info["df"]["nccl_facts"].to_dicts()  # core wording of >= 2.29 and the (func) of 2.30.7
    assert [f["value"] for f in facts if f["key"] == "version_range"] == ["2.30.7+"]


def test_mangled_decimals_are_no_numbers(tmp_path: Path) -> None:
    """A cut or mangled number ("-.", ".") is no time and no bandwidth: the line keeps what parses
    (found by the property test: "topo -.-0" raised from float())."""
    lines = ["Init timings - ncclCommInitRankConfig: rank 0 nranks 8 total 0.50 (kernels 0.20, alloc 0.01, bootstrap "
             "0.10, allgathers 0.01, topo -.-0, graphs 0.01, connections 0.10, rest 0.01)",
             "Bootstrap timings total . (create 0.00, send 0.00, recv 0.00, ring 0.00, delay 0.00)"]
    df = parse(tmp_path, "".join(P + ln + "\n" for ln in lines))["df"]
    (t,) = df["nccl_init_timings"].to_dicts()
    assert (t["total_s"], t["kernels_s"], t["topo_s"]) == (0.5, 0.2, None)


def test_timings_both_layouts_and_channels(tmp_path: Path) -> None:
    lines = ["Init timings: rank 2 nranks 16 total 1.08 (kernels 0.51, bootstrap 0.22, allgathers 0.01, topo 0.28, graphs 0.04, "
             "connections 0.02, rest 0.01)",
             "Init timings - ncclCommInitRank: rank 0 nranks 8 total 55.17 (kernels 52.33, alloc 0.42, bootstrap 0.84, allgathers "
             "0.08, topo 1.10, graphs 0.01, connections 0.39, rest 0.00)",
             "Trees [0] 1->0->-1/-1/-1 [1] 2/3/-1->0->-1",
             "Channel 00/02 :    0   1   2   3", "32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 2 p2p "
             "channels per peer", "Connected all rings, use ring PXN 1 GDR 0", "Connected NVLS tree"]
    df = parse(tmp_path, "".join(P + ln + "\n" for ln in lines))["df"]
    t = df["nccl_init_timings"].sort("line_no").to_dicts()
    assert (t[0]["alloc_s"], t[0]["init_func"], t[1]["alloc_s"], t[1]["init_func"], t[1]["kernels_s"]) == \
        (None, None, 0.42, "ncclCommInitRank", 52.33)
    ch = df["nccl_channels"].sort("line_no").to_dicts()
    trees = [r for r in ch if r["kind"] == "tree"]
    assert [(r["tree_parent"], r["tree_children"]) for r in trees] == [(1, []), (-1, [2, 3])]  # 2.4 and >= 2.5 shapes
    (ring,) = [r for r in ch if r["kind"] == "ring"]
    assert (ring["n_channels"], ring["ranks"]) == (2, [0, 1, 2, 3])
    (summ,) = [r for r in ch if r["kind"] == "summary"]
    assert (summ["coll_channels"], summ["collnet_channels"], summ["nvls_channels"], summ["p2p_channels_per_peer"]) == (32, 32, 16, 2)
    assert [(r["detail"], r["ring_pxn"]) for r in ch if r["kind"] == "connected"] == [("all rings", 1), ("NVLS tree", None)]


# -- bad input -----------------------------------------------------------------------------------

def test_unknown_lines_are_one_warning_per_file(tmp_path: Path) -> None:
    text = (P + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n" + P + "Frobnicating the quantum flux capacitor\n"
            + "ordinary program output mentioning nothing\n" + P + "Frobnicating again\n" + P + "\n")
    info = parse(tmp_path, text)
    (w,) = info["warnings"]
    assert (w["code"], w["count"], w["file"]) == ("unknown_lines", 3, "x.log")
    assert "x.log" in w["message"] and "Frobnicating the quantum" in w["message"]
    assert w["byte_offset"] == len((P + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n").encode())
    assert len(conns(info)) == 1


def test_binary_junk_is_skipped_with_one_warning(tmp_path: Path) -> None:
    good = (P + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n").encode()
    junk = bytes(range(256)) * 4 + b"\n" + b"\x00\x00\xff\xfe garbage\n" + b"\x89PNG\r\n\x1a\n\x00\x00"
    info = parse(tmp_path, good + junk + b"\n" + good)
    assert len(conns(info)) == 2
    assert [w["code"] for w in info["warnings"]] == ["binary_junk"]
    assert info["warnings"][0]["byte_offset"] == len(good)


def test_runaway_line_is_bounded(tmp_path: Path) -> None:
    good = (P + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n").encode()
    info = parse(tmp_path, good + b"x" * (3 << 20) + b"\n" + good, block_size=1 << 20)
    assert len(conns(info)) == 2 and [w["code"] for w in info["warnings"]] == ["binary_junk"]


def test_lines_cut_in_the_middle(tmp_path: Path) -> None:
    full = P + "Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA"
    for cut in range(len(P) - 5, len(full)):
        info = parse(tmp_path, full[:cut])  # the last line of a killed job's log
        for df in info["df"].values():
            assert df.columns  # tables keep their schema whatever was kept
        assert len(info["warnings"]) <= 1


def test_interleaved_ranks_in_one_file(tmp_path: Path) -> None:
    lines = []
    for i in range(50):
        for rank in range(4):
            lines.append(f"host-{rank // 2}:{100 + rank}:{200 + rank} [{rank % 2}] NCCL INFO Channel {i:02d}/0 : {rank}[{rank % 2}] "
                         f"-> {(rank + 1) % 4}[{(rank + 1) % 2}] via P2P/IPC")
    rows = conns(parse(tmp_path, "\n".join(lines) + "\n", block_size=4096))
    assert len(rows) == 200
    assert all(r["pid"] == 100 + r["src_rank"] and r["host"] == f"host-{r['src_rank'] // 2}" for r in rows)


def test_gzip_and_truncated_gzip(tmp_path: Path) -> None:
    text = (LOGS / "roce_gdr_2node_16gpu_1proc_per_node_v2.10.3.log").read_bytes()
    plain = parse(tmp_path, text)
    gz = parse(tmp_path, gzip.compress(text), name="x.log.gz")
    for k in plain["df"]:
        assert plain["df"][k].drop("file").equals(gz["df"][k].drop("file"))
    cut = parse(tmp_path, gzip.compress(text)[:-40], name="cut.log.gz")
    codes = [w["code"] for w in cut["warnings"]]  # the cut last line may also be an unknown (partial) line
    assert cut["partial"] and "truncated_gzip" in codes and set(codes) <= {"truncated_gzip", "unknown_lines"}
    assert 0 < cut["df"]["nccl_connections"].height <= plain["df"]["nccl_connections"].height


def test_empty_and_unreadable(tmp_path: Path) -> None:
    info = parse(tmp_path, b"")
    assert info["lines"] == 0 and info["warnings"] == [] and all(df.height == 0 for df in info["df"].values())
    with pytest.raises(IngestError, match="cannot be read"):
        parse_nccl_log(tmp_path)  # a directory


def test_cycle_collector_restored_after_a_parse(tmp_path: Path) -> None:
    """The parse pauses Python's cycle collector; it is on again afterwards, after an error too, and stays off
    for a caller that had turned it off."""
    import gc

    f = tmp_path / "x.log"
    f.write_text(P + "Channel 00 : 0[0] -> 1[1] via P2P/IPC\n")
    assert gc.isenabled()
    parse_nccl_log(f)
    with pytest.raises(IngestError):
        parse_nccl_log(tmp_path)
    assert gc.isenabled()
    gc.disable()
    try:
        parse_nccl_log(f)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nccl_tests_output(tmp_path: Path) -> None:
    text = ("#  Rank  0 Group  0 Pid   1234 on    node-1 device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
            "        1024           256     float     sum      -1    10.50    0.10    0.18    N/A    10.40    0.10    0.18      0\n"
            + P + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
            "        2048           512     float     sum      -1    11.00    0.19    0.35      0    11.10    0.18    0.35      0\n"
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.2656\n     7 not a result row\n")
    df = parse(tmp_path, text)["df"]
    rows = df["nccl_tests_results"].sort("line_no").to_dicts()
    assert [(r["size_bytes"], r["oop_wrong"], r["ip_wrong"]) for r in rows] == [(1024, None, 0), (2048, 0, 0)]
    (rank,) = df["nccl_tests_ranks"].to_dicts()
    assert (rank["rank"], rank["host"], rank["pid"], rank["bus"], rank["gpu_name"]) == (0, "node-1", 1234, "0x1b", "NVIDIA H100 80GB HBM3")


def test_all_real_logs_agree_between_paths_and_over_small_blocks(tmp_path: Path) -> None:
    for f in sorted(LOGS.glob("*.log")):
        text = f.read_bytes()
        whole = parse(tmp_path, text)
        small = parse(tmp_path, text, block_size=97)  # lines cut across many blocks
        for k in whole["df"]:
            a, b = whole["df"][k], small["df"][k]
            if "line_no" in a.columns:
                a, b = a.sort("line_no", maintain_order=True), b.sort("line_no", maintain_order=True)
            assert_frame_equal(a, b)


# -- the bulk path's edges, and the per-message memo ---------------------------------------------

#: lines at the edge of what the bulk path takes: each must give the per-line path's rows, whether
#: bulk parses it or hands it back (``parse`` compares the two paths)
BULK_EDGES = [
    " [3] NCCL INFO Ring 00 : 15[41000] -> 0[1b000] [receive] via NET/IB/0",  # no host:pid:tid (NCCL 2.5)
    "\t[3] NCCL INFO Channel 01 : 0[1b000] -> 1[1c000] via P2P/IPC",
    "[3] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3 stream 0x4",
    " [3] NCCL INFO NCCL_IB_DISABLE set by environment to 0.",
    P + "Channel 02/1 : 0[1b000] -> 1[1c000] via P2P/IPC/read   \r",  # trailing blanks and CR
    P + "Channel 02 : 0[123456789] -> 1[1] via P2P/IPC",  # bracket too long for the bulk shape
    P + "Channel 02 : 0[0] -> 1[1] via P2P/IPC\x1f",  # a blank only Python strips
    P + "Channel 02 : 0[0] -> 1[1] via\tP2P/IPC",
    P + "Channel 1234567890 : 0[0] -> 1[1] via P2P/IPC",
    P + "Channel 03 : 0[0] -> 1[1] [send] via NET/IB/1/GDRDMA",
    P + "Channel 06 : 0[abc] -> 1[1000] via P2P/IPC",  # bus ids: a hex letter, or 4+ digits
    P + "Channel 07 : 0[] -> 1[012] via P2P/IPC",  # empty bracket, a 3-digit device
    P + "Channel 08 : 0[0] -> 1 via P2P/IPC",
    P + "AllReduce: opCount 2 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3 [nranks=8] stream 0x4 extra",
    P + "AllReduce: opCount 3 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3 [nranks=8]",
    P + "AllReduce: opCount 4 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3 [nranks=12345678901] stream 0x4",
    P + "AllReduce: opCount 5 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3\t[nranks=8] stream 0x4",
    P + "AllReduce: opCount 6 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3 [nranks=8] stream  0x4",
    P + "AllReduce: opCount 7 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3 [nranks=8] stream 0x4\r",
    P + "Bootstrap: opCount 8 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3 stream 0x4",
    P + "AllReduce: opCount 0123456789abcdef sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x3 stream 0x4",
    "h\u00e9:1:2 [0] NCCL INFO Channel 04 : 0[0] -> 1[1] via P2P/IPC",  # not ASCII: per-line
    "\u00e9 node-2:7:8 [1] NCCL INFO Channel 04 : 0[0] -> 1[1] via P2P/IPC",
    "[1,0]<stdout>:node-3:9:9 [2] NCCL INFO Channel 05 : 0[0] -> 1[1] via SHM/direct/direct",
    "node-4:1:2 [x] NCCL INFO Channel 05 : 0[0] -> 1[1] via SHM/direct/direct",
]


def test_bulk_edges_agree_with_the_per_line_path(tmp_path: Path) -> None:
    text = "".join(ln + "\n" for ln in BULK_EDGES)
    info = parse(tmp_path, text)
    assert info["df"]["nccl_connections"].height >= 10 and info["df"]["nccl_colls"].height >= 8
    (nohost,) = conns(info)[:1]
    assert (nohost["host"], nohost["pid"], nohost["cuda_dev"], nohost["channel"]) == (None, None, 3, 0)
    parse(tmp_path, text, block_size=61)


#: WARN lines at the edge of what the bulk path cuts (``_WARN_SHAPE``): each must give the per-line path's row
WARN_EDGES = [
    "node-1:4242:4243 [0] misc/nvmlwrap.cc:181 NCCL WARN nvmlDeviceGetHandleByPciBusId() failed: Not Found",
    "node-1:4242:4243 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.1<53249> with error 4,"
    " opcode 32, len 0, vendor err 81 (Recv) localGid ::ffff:10.0.0.2 remoteGids::ffff:10.0.0.1 hca mlx5_0",
    "node-1:4242:4243 [2] init.cc:1234 (ncclCommInitRankFunc) NCCL WARN Cuda failure 'out of memory'   \r",
    "node-1:4242:4243 [2] init.cc:1234 (my func) NCCL WARN a blank in the function",
    "node-1:4242:4243 [-1] a.cc:1 NCCL WARN",  # no message, negative device
    "node-1:4242:4243 [0] a.cc:1 NCCL WARN\r",
    "node-1:4242:4243 [0] a.cc:1 NCCL WARNING not the level word",
    "node-1:4242:4243 [0] a.cc:1 NCCL WARN quoting a line: x:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC",
    "node-1:4242:4243 [0] a\x1f.cc:1 NCCL WARN a blank only Python sees in the source file",
    "node\t1:4242:4243 [0] a.cc:1 NCCL WARN a tab in the host",
    "n" * 190 + ":4242:4243 [0] a.cc:1 NCCL WARN past the per-line path's 200-character window",
    "[0] a.cc:1 NCCL WARN no host",
    "[1,0]<stdout>:node-3:9:9 [2] a.cc:1 NCCL WARN behind a wrapper",
    "node-4:1:2 [x] a.cc:1 NCCL WARN not a device",
    "node-4:1:2 [0] a.cc:x NCCL WARN not a line number",
    "n\u00e9:1:2 [0] a.cc:1 NCCL WARN not ASCII",
    "node-5:1:2 [0] NCCL WARN no source file",
]


def test_warn_lines_cut_in_bulk_agree_with_the_per_line_path(tmp_path: Path) -> None:
    """Each WARN edge, and ranks repeating real WARN lines: bulk cut, replayed by column or by line, or parsed
    line by line without the memo, always the per-line path's rows."""
    info = parse(tmp_path, "".join(ln + "\n" for ln in WARN_EDGES))
    # "WARNING" is no level word; the line quoting an INFO line is read as that line (a connection)
    assert info["df"]["nccl_warnings"].height == len(WARN_EDGES) - 2 and info["df"]["nccl_connections"].height == 1
    warns = [ln.split("] ", 1)[1] for f in sorted(LOGS.glob("*.log")) for ln in f.read_text(errors="replace").splitlines()
             if " NCCL WARN" in ln and "] " in ln]
    f = tmp_path / "warn.log"
    f.write_text("".join(f"node-{r % 3}:{100 + r}:{200 + r} [{r % 8}] {w}\n" for r in range(4) for w in warns))
    a = parse(tmp_path, f.read_text(), name="warn.log")
    assert a["tables"]["nccl_warnings"] == 4 * len(warns) and "warn_func" not in a["fingerprints"]
    _assert_same(a, _without_memo(f))
    _assert_same(a, _replayed_by_lines(f))


def test_bare_version_lines_read_once_per_text_agree_with_the_per_line_path(tmp_path: Path) -> None:
    """Bare ``NCCL version`` lines (no prefix) are read once per distinct text in bulk and add their facts in the
    per-line pass, among the facts of other lines: the per-line path's rows, over one block or many."""
    lines = ["NCCL version 2.21.5+cuda12.4", "(WorkerDict pid=1008813) NCCL version 2.21.5+cuda12.4",
             "NCCL version 2.19.3a+cuda12.3\r", "NCCL version 2.10.3 (no cuda)", "NCCL version 2.10.3",
             P + "cudaDriverVersion 12040", P + "NCCL version 2.21.5+cuda12.4", "torch: NCCL_DEBUG=INFO"]
    text = "".join(lines[(7 * i) % len(lines)] + "\n" for i in range(40))
    info = parse(tmp_path, text)
    facts = info["df"]["nccl_facts"].filter(pl.col("key").is_in(["nccl_version", "cuda_version"]))
    bare = facts.filter(pl.col("host").is_null())
    assert bare.height == 2 * 15 + 10 and set(bare["value"].to_list()) == {"2.21.5", "12.4", "2.19.3a", "12.3", "2.10.3"}
    parse(tmp_path, text, block_size=97)


def _without_memo(f: Path) -> dict[str, Any]:
    """Every message through its handler, line by line (no replay, per line or column by column)."""
    orig = nccl_memo.record
    nccl_memo.record = lambda *a: None  # type: ignore[assignment]
    try:
        return parse_nccl_log(f)
    finally:
        nccl_memo.record = orig  # type: ignore[assignment]


def _replayed_by_lines(f: Path) -> dict[str, Any]:
    """The memo's replays one line at a time (blocks below the column-by-column threshold)."""
    orig = nccl_memo.MIN_COLUMN_LINES
    nccl_memo.MIN_COLUMN_LINES = 1 << 60
    try:
        return parse_nccl_log(f)
    finally:
        nccl_memo.MIN_COLUMN_LINES = orig


def _assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for name in a["arrow"]:
        da, db = pl.DataFrame(a["arrow"][name]), pl.DataFrame(b["arrow"][name])
        if "line_no" in da.columns:
            da, db = da.sort("line_no", maintain_order=True), db.sort("line_no", maintain_order=True)
        assert_frame_equal(da, db)
    assert (a["warnings"], a["fingerprints"]) == (b["warnings"], b["fingerprints"])


def test_memo_replays_what_the_handlers_add(tmp_path: Path) -> None:
    """Every real log, and a job whose ranks repeat each setup line: same rows with the memo as without."""
    for f in sorted(LOGS.glob("*.log")):
        _assert_same(parse_nccl_log(f), _without_memo(f))
    # (connection and communicator lines are never memoized; repeated here they would put one rank of a
    # communicator on several hosts)
    setup = [m for f in sorted(LOGS.glob("*.log")) for ln in f.read_text(errors="replace").splitlines()
             if "NCCL INFO " in ln for m in [ln.split("NCCL INFO ", 1)[1]] if " via " not in m and "comm " not in m]
    text = "".join(f"node-{r % 3}:{100 + r}:{200 + r} [{r % 8}] NCCL INFO {m}\n" for r in range(4) for m in setup)
    text += "".join(f" [{r}] NCCL INFO {m}\n" for r in range(2) for m in setup[:50])
    f = tmp_path / "ranks.log"
    f.write_text(text)
    a = parse_nccl_log(f)
    _assert_same(a, _without_memo(f))
    _assert_same(a, _replayed_by_lines(f))
    assert a["tables"]["nccl_env"] > 0 and a["tables"]["nccl_net"] > 0


def _without_memo_blocks(f: Path, block_size: int) -> dict[str, Any]:
    orig = nccl_memo.record
    nccl_memo.record = lambda *a: None  # type: ignore[assignment]
    try:
        return parse_nccl_log(f, block_size=block_size)
    finally:
        nccl_memo.record = orig  # type: ignore[assignment]


def test_column_replay_finds_each_lines_communicator(tmp_path: Path) -> None:
    """Replayed lines that carry the thread's communicator (channels, trees, timings), column by column:
    threads inside and outside Init START/COMPLETE, communicators opened in an earlier block, lines
    without host:pid:tid (replayed per line) and repeats of an unknown message, against the per-line path."""
    setup = [m for f in sorted(LOGS.glob("*.log")) for ln in f.read_text(errors="replace").splitlines()
             if "NCCL INFO " in ln for m in [ln.split("NCCL INFO ", 1)[1]] if " via " not in m and "comm " not in m][:120]
    setup.append("Some message no handler knows")
    lines = []
    for r in range(6):
        p = f"node-{r % 2}:{100 + r % 3}:{200 + r} [{r % 4}] NCCL INFO "
        start = f"comm 0x55{r}0 rank {r} nranks 6 cudaDev {r % 4} nvmlDev {r % 4} busId 1b000 commId 0xd8289d3e6e21{r % 2}"
        lines.append(p + "ncclCommInitRank " + start + " - Init START")
        lines += [p + m for m in setup[r::3]]
        if r % 2:
            lines.append(p + "ncclCommInitRank " + start + " - Init COMPLETE")
        lines += [p + m for m in setup[:40]]
        lines += [f" [{r}] NCCL INFO {m}" for m in setup[:20]]
    f = tmp_path / "comm.log"
    f.write_text("".join(ln + "\n" for ln in lines))
    for bs in (None, 997, 1 << 20):
        a = parse_nccl_log(f, block_size=bs)
        _assert_same(a, _without_memo_blocks(f, bs))  # type: ignore[arg-type]
        assert a["df" if "df" in a else "arrow"]["nccl_channels"].num_rows > 0
        assert pl.DataFrame(a["arrow"]["nccl_channels"])["comm_id"].drop_nulls().len() > 0
    parse(tmp_path, f.read_text(), name="comm2.log", block_size=997)


def test_net_rows_replayed_as_frames_complete_like_dicts(tmp_path: Path) -> None:
    """IB device rows take the last selected network and GDR state of their process, whether the rows
    and the lines that say so are replayed column by column (frames) or parsed per line (dicts: lines
    with non-ASCII text, a HCA index too big for its column), with and without host:pid:tid."""
    text = ""
    for p in ("node-1:11:12 [0] NCCL INFO ", "node-2:21:22 [1] NCCL INFO ", " [2] NCCL INFO "):
        text += "".join(p + m + "\n" for m in [
            "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
            "Using network IB",
            "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
            "NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'",
            "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
            "Using network IBext_v8",
            "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
            "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0\u00e9'",
            "NET/IB : Using [99999999999]mlx5_9:1/IB ; OOB eth0:10.0.0.1<0>",
            "NET/IB : GPU Direct RDMA Enabled for HCA 99999999999 'mlx5_9'",
            "Using network Socket\u00e9",
            "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
        ])
    f = tmp_path / "net.log"
    f.write_text(text)
    for bs in (None, 211):
        a = parse_nccl_log(f, block_size=bs)
        _assert_same(a, _without_memo_blocks(f, bs))  # type: ignore[arg-type]
    net = pl.DataFrame(parse_nccl_log(f)["arrow"]["nccl_net"]).filter(kind="ib_device")
    assert net.height == 21 and net["plugin"].drop_nulls().len() > 0 and net["gdr"].drop_nulls().len() > 0
    parse(tmp_path, text, name="net2.log", block_size=211)


def test_topology_dumps_read_once_per_message_keep_per_thread_state(tmp_path: Path) -> None:
    """Two threads print the same dump interleaved (each distinct message is parsed once and shared):
    each thread's rows are those of its dump parsed alone (parents of links, graph-search counters)."""
    lines = (LOGS / "topo_sys_cross_numa_2gpu_no_nvlink_graph_dump.log").read_text().splitlines()
    lines = [ln for ln in lines if "NCCL INFO" in ln]
    alone = parse(tmp_path, "\n".join(lines) + "\n")["df"]["nccl_topology"]
    other = [ln.replace(":84:98 ", ":84:99 ", 1) for ln in lines]
    mixed = [ln for pair in zip(lines, other) for ln in pair]
    both = parse(tmp_path, "\n".join(mixed) + "\n")["df"]["nccl_topology"]
    for tid, shift in ((98, 1), (99, 0)):
        got = both.filter(pl.col("tid") == tid).with_columns(line_no=(pl.col("line_no") + shift) // 2, tid=pl.lit(98, pl.Int64))
        assert_frame_equal(got, alone)
    assert alone.filter(pl.col("kind") == "link")["node"].null_count() < alone.filter(pl.col("kind") == "link").height


def test_repeating_integers_dictionary_encoded_and_read_back_unchanged(tmp_path: Path) -> None:
    """NCCL tables' integer columns (but line numbers and opCounts) are written with a dictionary; the
    Parquet file reads back as the registered schema, with the same rows."""
    import pyarrow.parquet as pq

    from stallscope.ingest.writer import PartWriter

    f = tmp_path / "x.log"
    f.write_text("".join(f"{P}Channel {c:02d} : 0[0] -> 1[1] via P2P/IPC\n" for c in range(40)))
    out = PartWriter(tmp_path / "staging", "p")
    parse_nccl_log(f, out=out)
    out.close()
    assert "op_count" not in NCCL_COLLS.dictionary and "line_no" not in NCCL_CONNECTIONS.dictionary
    part = tmp_path / "staging" / "table=nccl_connections" / "part-p.parquet"
    meta = pq.ParquetFile(part).metadata.row_group(0)
    enc = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" in enc["pid"] and "RLE_DICTIONARY" in enc["channel"]
    assert "RLE_DICTIONARY" not in enc["line_no"]
    back = pq.read_table(part)
    assert back.schema.equals(NCCL_CONNECTIONS.schema)
    assert back.equals(parse_nccl_log(f)["arrow"]["nccl_connections"])


def test_docs_cover_tables_views_and_fingerprints() -> None:
    from stallscope.store.sqldoc import parse_sql_file

    root = Path(nccl_messages.__file__).resolve().parents[2]
    doc = (root / "docs" / "nccl.md").read_text()
    views = [v.name for v in parse_sql_file(root / "stallscope" / "store" / "sql" / "20_nccl.sql") if not v.helper]
    for name in [s.name for s in NCCL_TABLES] + views + [f"`{k}`" for k in FINGERPRINTS]:
        assert name in doc, name
    assert "## NCCL log parsing" in (root / "docs" / "benchmarks.md").read_text()

