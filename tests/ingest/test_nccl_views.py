"""The NCCL views (store/sql/20_nccl.sql) on small jobs written in real NCCL line formats, and on the real corpus.

The synthetic jobs use exactly the line shapes of NCCL 2.19 (``Init START`` with commId,
``Channel NN/C : r[nvmlDev] -> r[nvmlDev] via ...``) and 2.7-2.11 (Socket, no /connIndex), one file
per host as ``NCCL_DEBUG_FILE=%h`` writes them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import stallscope
from stallscope.api import ingest
from stallscope.store.sqldoc import parse_sql_file
from test_nccl_ground_truth import LOGS

COMM = "0x5ae77eb5ea4ec1ee"
HOSTS = ("node-a", "node-b", "node-c")  # node-c: P2P disabled (SHM inside the node) and GDR disabled


def _gdr_job(d: Path) -> list[Path]:
    """3 hosts x 8 GPUs, one ring over 24 ranks on 2 channels; node-c is set up differently."""
    files = []
    for h, host in enumerate(HOSTS):
        lines = []
        for local in range(8):
            rank, pid, tid = h * 8 + local, 1000 + local, 2000 + local
            p = f"{host}:{pid}:{tid} [{local}] NCCL INFO "
            lines.append(f"{host}:{pid}:{pid} [{local}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.{h}<0>")
            lines.append(f"{host}:{pid}:{pid} [{local}] NCCL INFO Using network IB")
            if host == "node-c":
                lines.append(p + "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'")
            lines.append(p + f"comm 0x7f00{local} rank {rank} nranks 24 cudaDev {local} nvmlDev {local} busId {local + 1}b000 "
                             f"commId {COMM} - Init START")
            for ch in (0, 1):
                nxt, prev = (rank + 1) % 24, (rank - 1) % 24
                if local < 7:  # intra-node ring step
                    via = "SHM/direct/direct" if host == "node-c" else "P2P/CUMEM/read"
                    ci = "" if host == "node-c" else "/0"
                    lines.append(p + f"Channel {ch:02d}{ci} : {rank}[{local}] -> {nxt}[{local + 1}] via {via}")
                gdr = "" if host == "node-c" else "/GDRDMA"
                if local == 7:  # leaves the node
                    lines.append(p + f"Channel {ch:02d}/0 : {rank}[7] -> {nxt}[0] [send] via NET/IB/0{gdr}")
                if local == 0:  # enters the node
                    lines.append(p + f"Channel {ch:02d}/0 : {prev}[7] -> {rank}[0] [receive] via NET/IB/0{gdr}")
            lines.append(p + f"comm 0x7f00{local} rank {rank} nranks 24 cudaDev {local} nvmlDev {local} busId {local + 1}b000 "
                             f"commId {COMM} - Init COMPLETE")
        f = d / f"nccl.{host}.log"
        f.write_text("\n".join(lines) + "\n")
        files.append(f)
    return files


def _socket_job(d: Path) -> list[Path]:
    """2 hosts x 4 GPUs with IB disabled by environment (NCCL 2.7-2.11 formats: no /connIndex, busId brackets)."""
    files = []
    for h, host in enumerate(("gpu-1", "gpu-2")):
        lines = []
        for local in range(4):
            rank, pid = h * 4 + local, 500 + local
            p = f"{host}:{pid}:{pid} [{local}] NCCL INFO "
            if host == "gpu-1":
                lines.append(p + "NCCL_IB_DISABLE set by environment to 1.")
            lines.append(p + f"NET/Socket : Using [0]eth0:10.1.0.{h}<0>")
            lines.append(p + "Using network Socket")
            if local == 3:
                lines.append(p + f"Channel 00 : {rank}[{local + 1}b000] -> {(rank + 1) % 8}[1b000] [send] via NET/Socket/0")
            if local == 0:
                lines.append(p + f"Channel 00 : {(rank - 1) % 8}[4b000] -> {rank}[1b000] [receive] via NET/Socket/0")
            if local < 3:
                lines.append(p + f"Channel 00 : {rank}[{local + 1}b000] -> {rank + 1}[{local + 2}b000] via P2P/IPC/read")
        f = d / f"{host}.log"
        f.write_text("\n".join(lines) + "\n")
        files.append(f)
    return files


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nccl-views")
    (root / "gdr").mkdir()
    (root / "sock").mkdir()
    ingest(_gdr_job(root / "gdr"), store=root / "store", job="gdr-job", workers=1)
    ingest(_socket_job(root / "sock"), store=root / "store", job="socket-job", workers=1)
    ingest(sorted(LOGS.glob("*.log")), store=root / "store", job="corpus", workers=1)
    return root / "store"


def q(store: Path, sql: str, job: str) -> list[dict]:
    return stallscope.open(store, job=job).sql(sql).to_dicts()


def test_transports_place_both_ends(store: Path) -> None:
    rows = q(store, "SELECT * FROM nccl_transports", "gdr-job")
    assert len(rows) == 2 * (3 * 7 + 3 * 2)  # per channel: 7 intra-node steps per host, a send and a receive per host boundary
    for r in rows:
        assert r["comm_id"] == COMM and r["src_host"] == HOSTS[r["src_rank"] // 8] and r["dst_host"] == HOSTS[r["dst_rank"] // 8]
        if r["transport"] == "NET":  # hosts come from other files' Init lines: decided in the view
            assert (r["inter_node"], r["inter_node_basis"], r["net_dev_name"]) == (True, "hosts", "mlx5_0")
        else:
            assert (r["inter_node"], r["inter_node_basis"]) == (False, "line")


def test_transport_pairs(store: Path) -> None:
    rows = q(store, "SELECT * FROM nccl_transport_pairs WHERE src_rank = 7 ORDER BY host", "gdr-job")
    assert [(r["host"], r["dst_rank"], r["transport_detail"], r["channels"], r["lines"], r["gdr"], r["inter_node"])
            for r in rows] == [("node-a", 8, "NET/IB/0/GDRDMA", 2, 2, True, True), ("node-b", 8, "NET/IB/0/GDRDMA", 2, 2, True, True)]
    shm = q(store, "SELECT DISTINCT host, transport FROM nccl_transport_pairs WHERE NOT inter_node ORDER BY host", "gdr-job")
    assert shm == [{"host": "node-a", "transport": "P2P"}, {"host": "node-b", "transport": "P2P"}, {"host": "node-c", "transport": "SHM"}]


def test_gdr_per_hca(store: Path) -> None:
    rows = q(store, "SELECT host, net, dev_index, dev_name, net_connections, gdr_connections, hca_gdr_enabled, gdr_off "
                    "FROM nccl_gdr ORDER BY host", "gdr-job")
    assert rows == [
        {"host": "node-a", "net": "IB", "dev_index": 0, "dev_name": "mlx5_0", "net_connections": 4, "gdr_connections": 4,
         "hca_gdr_enabled": None, "gdr_off": False},
        {"host": "node-b", "net": "IB", "dev_index": 0, "dev_name": "mlx5_0", "net_connections": 4, "gdr_connections": 4,
         "hca_gdr_enabled": None, "gdr_off": False},
        {"host": "node-c", "net": "IB", "dev_index": 0, "dev_name": "mlx5_0", "net_connections": 4, "gdr_connections": 0,
         "hca_gdr_enabled": False, "gdr_off": True},
    ]


def test_host_outliers(store: Path) -> None:
    rows = q(store, "SELECT aspect, host, host_value, peer_value, hosts_with_peer_value, hosts_total FROM nccl_host_outliers "
                    "ORDER BY aspect", "gdr-job")
    assert rows == [
        {"aspect": "inter_node_gdr", "host": "node-c", "host_value": "no GDR", "peer_value": "GDR",
         "hosts_with_peer_value": 2, "hosts_total": 3},
        {"aspect": "intra_node_transport", "host": "node-c", "host_value": "SHM", "peer_value": "P2P",
         "hosts_with_peer_value": 2, "hosts_total": 3},
    ]
    assert q(store, "SELECT * FROM nccl_host_outliers", "socket-job") == []  # two hosts alike: no outlier


def test_socket_fallback_synthetic(store: Path) -> None:
    rows = q(store, "SELECT host, src_rank, dst_rank, direction, net_dev_name, reason FROM nccl_socket_fallback "
                    "ORDER BY host, direction", "socket-job")
    assert rows == [
        {"host": "gpu-1", "src_rank": 7, "dst_rank": 0, "direction": "receive", "net_dev_name": "eth0", "reason": "NCCL_IB_DISABLE=1"},
        {"host": "gpu-1", "src_rank": 3, "dst_rank": 4, "direction": "send", "net_dev_name": "eth0", "reason": "NCCL_IB_DISABLE=1"},
        {"host": "gpu-2", "src_rank": 3, "dst_rank": 4, "direction": "receive", "net_dev_name": "eth0",
         "reason": "NCCL_IB_DISABLE=1 (elsewhere in the job)"},
        {"host": "gpu-2", "src_rank": 7, "dst_rank": 0, "direction": "send", "net_dev_name": "eth0",
         "reason": "NCCL_IB_DISABLE=1 (elsewhere in the job)"},
    ]
    assert q(store, "SELECT * FROM nccl_socket_fallback", "gdr-job") == []


def test_socket_fallback_real_logs(store: Path) -> None:
    """'Which inter-node connections used Socket?' on the 33 real excerpts ingested as one bundle."""
    rows = q(store, "SELECT file, host, src_rank, dst_rank, transport_detail, net_dev_name FROM nccl_socket_fallback "
                    "ORDER BY file, line_no", "corpus")
    assert [(r["file"].split("_")[0], r["host"], r["src_rank"], r["dst_rank"], r["transport_detail"], r["net_dev_name"])
            for r in rows] == [
        ("socket", "gcn4", 5, 8, "NET/Socket/0", "ib-bond0"),
        ("socket", "sh-01", 3, 4, "NET/Socket/0", "enP1p1s0f0"),
        ("socket", "sh-03", 7, 0, "NET/Socket/0", "enP1p1s0f0"),
        ("socket", "sh-03", 0, 6, "NET/Socket/0", "enP1p1s0f0"),
        ("socket", "sh-03", 3, 4, "NET/Socket/0", "enP1p1s0f0"),
    ]
    # every NET connection that is not Socket used IB or an IB-based plugin
    nets = q(store, "SELECT DISTINCT net FROM nccl_transports WHERE transport = 'NET' ORDER BY net", "corpus")
    assert [r["net"] for r in nets] == ["IB", "IBext_v8", "Socket"]


def test_cli_answers_socket_question(store: Path) -> None:
    from stallscope.cli.main import cli

    res = CliRunner().invoke(cli, ["sql", "SELECT count(*) AS n FROM nccl_socket_fallback", "--store", str(store),
                                    "--job", "corpus", "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert res.output.split() == ["n", "5"]


def test_ingest_warnings_and_files(store: Path) -> None:
    files = q(store, "SELECT kind, status, count(*) AS n FROM files GROUP BY ALL", "corpus")
    assert files == [{"kind": "nccl_log", "status": "ok", "n": 33}]
    assert q(store, "SELECT * FROM ingest_warnings", "corpus") == []


def test_views_are_documented(store: Path) -> None:
    s = stallscope.open(store, job="gdr-job")
    views = parse_sql_file(Path(stallscope.__file__).parent / "store" / "sql" / "20_nccl.sql")
    assert {v.name for v in views if not v.helper} == {"nccl_transports", "nccl_transport_pairs", "nccl_socket_fallback",
                                                       "nccl_gdr", "nccl_host_outliers"}
    for v in views:
        cols = set(s.sql(f"SELECT * FROM {v.name} LIMIT 0").columns)
        assert v.doc and set(v.columns) == cols, v.name
