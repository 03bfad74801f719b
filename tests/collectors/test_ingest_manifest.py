"""Ingest reads manifests into tables and uses them: hosts for traces that do not name theirs,
rank records of a collect that never finished, every column typed and documented."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from stallscope.api import ingest, open_store
from stallscope.collectors import manifest as mf
from stallscope.ingest.discover import sniff
from tests.conftest import TRACES

FIX = Path(__file__).parent / "fixtures"
GLOO = TRACES / "cpu_gloo"


def _trace_without_host(src: Path, dest: Path) -> None:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc.pop("host_name", None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(gzip.compress(json.dumps(doc).encode()))


def _rank_rec(rank: int, host: str, **extra: object) -> dict[str, object]:
    return {"rank": rank, "world_size": 2, "local_rank": 0, "local_world_size": 1, "node_rank": rank, "host": host,
            "pid": 1000 + rank, "launcher": "torchrun", "backend": "gloo", "device": "cpu", "status": "done",
            "started_at_ns": 1_700_000_000_000_000_000, "ended_at_ns": 1_700_000_001_000_000_000, "steps": 5,
            "traces": [f"traces/rank{rank}.pt.trace.json.gz"], "collect_id": "c-000000000001",
            "versions": {"torch": "2.13.0+cpu", "cuda": None, "python": "3.11.7"},
            "env": [{"name": "NCCL_DEBUG", "value": "INFO", "masked": False, "source": "collect"}], **extra}


def _manifest() -> dict[str, object]:
    topo_text = (FIX / "nvidia_smi_topo_m.txt").read_text()
    from stallscope.collectors.topology import parse_topo_matrix

    return {
        mf.MARKER: mf.header("bundle"), "collect_id": "c-000000000001", "job_id": "4242", "status": "failed",
        "command": ["torchrun", "--nproc_per_node=1", "train.py"], "launcher": "torchrun", "cwd": "/w", "host": "node-a",
        "pid": 7, "started_at_ns": 1_700_000_000_000_000_000, "ended_at_ns": 1_700_000_002_500_000_000, "duration_s": 2.5,
        "exit_code": 3, "signal": None, "error": None, "world_size": 2,
        "nccl": {"debug_file": "/b/nccl/%h.%p.log", "logs_in_bundle": True, "set_by_collect": ["NCCL_DEBUG"]},
        "notes": [], "versions": {"stallscope": "0.3.0", "python": "3.11.7", "torch": "2.13.0+cpu", "nccl": None,
                                  "cuda": None, "driver": "550.90.07", "cuda_driver": "12.4"},
        "env": mf.mask_env({"NCCL_DEBUG": "INFO", "STALLSCOPE_API_TOKENS": "tok1,tok2", "HF_TOKEN": "hf_secretsecretsecretsecret", "NCCL_IB_HCA": "mlx5_0"},
                           set_by_collect=["NCCL_DEBUG"]),
        "ranks": [_rank_rec(0, "node-a"), _rank_rec(1, "node-b")],
        "topology": {"node-a": {"nvidia_smi_topo": {"status": "ok", "command": "nvidia-smi topo -m", "seconds": 0.1,
                                                    "raw": topo_text, "parsed": parse_topo_matrix(topo_text), "error": None},
                                "infiniband": {"status": "unavailable", "command": "read /sys/class/infiniband",
                                               "seconds": 0.0, "raw": None, "parsed": None,
                                               "error": "/sys/class/infiniband not present"}}},
    }


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    b = tmp_path / "bundle"
    for r in (0, 1):
        _trace_without_host(GLOO / f"rank{r}.pt.trace.json.gz", b / "traces" / f"rank{r}.pt.trace.json.gz")
    mf.write_json_atomic(b / "manifest.json", _manifest())
    return b


def test_manifest_is_sniffed_by_content(bundle: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "whatever.txt"
    shutil.copy(bundle / "manifest.json", renamed)
    assert sniff(renamed) == "manifest"


def test_manifest_fills_hosts_and_tables(bundle: Path, store: Path) -> None:
    res = ingest([bundle], store=store, workers=1)
    s = open_store(store, job=res.job)
    ranks = s.sql("SELECT rank, host, host_source FROM ranks ORDER BY rank").rows()
    assert ranks == [(0, "node-a", "manifest"), (1, "node-b", "manifest")]
    m = s.sql("SELECT job_id, status, exit_code, world_size, ranks_recorded, torch_version, driver_version, command, "
              "duration_s, nccl_logs_in_bundle FROM manifest").rows()
    assert m == [("4242", "failed", 3, 2, 2, "2.13.0+cpu", "550.90.07", '["torchrun", "--nproc_per_node=1", "train.py"]', 2.5, True)]
    mr = s.sql("SELECT rank, host, pid, local_rank, node_rank, device, backend, steps, traces, torch_version FROM manifest_ranks ORDER BY rank").rows()
    assert mr[1] == (1, "node-b", 1001, 0, 1, "cpu", "gloo", 5, '["traces/rank1.pt.trace.json.gz"]', "2.13.0+cpu")
    env = dict(s.sql("SELECT name, value FROM manifest_env WHERE rank IS NULL").rows())
    assert env == {"STALLSCOPE_API_TOKENS": mf.MASK, "NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5_0"}
    assert s.sql("SELECT count(*) FROM manifest_env WHERE rank IS NOT NULL AND source = 'collect'").item() == 2
    topo = s.sql("SELECT host, probe, status, error, json_extract_string(parsed, '$.links.GPU0.NIC0') AS path "
                 "FROM manifest_topology ORDER BY probe").rows()
    assert topo == [("node-a", "infiniband", "unavailable", "/sys/class/infiniband not present", None),
                    ("node-a", "nvidia_smi_topo", "ok", None, "PXB")]
    warn = s.sql("SELECT code FROM ingest_warnings WHERE code = 'job_failed'").rows()
    assert warn == [("job_failed",)]


def test_rank_records_of_an_unfinished_collect(bundle: Path, store: Path) -> None:
    # collect was killed: manifest.json still says running and has no ranks; the records stayed in ranks/
    doc = _manifest()
    doc.update(status="running", ranks=[], exit_code=None, ended_at_ns=None, topology={})
    mf.write_json_atomic(bundle / "manifest.json", doc)
    for r, host in ((0, "node-a"), (1, "node-b")):
        rec = {mf.MARKER: mf.header("rank"), **_rank_rec(r, host, status="running", ended_at_ns=None,
                                                         topology={"lscpu": {"status": "ok", "raw": "x", "parsed": {"cpus": 2}}})}
        mf.write_json_atomic(bundle / "ranks" / f"rank{r}.json", rec)
    res = ingest([bundle], store=store, workers=1)
    s = open_store(store, job=res.job)
    assert s.sql("SELECT rank, host FROM ranks ORDER BY rank").rows() == [(0, "node-a"), (1, "node-b")]
    assert s.sql("SELECT count(*) FROM manifest_ranks").item() == 2
    assert s.sql("SELECT status FROM manifest").item() == "running"
    assert sorted(s.sql("SELECT DISTINCT host FROM manifest_topology").to_series().to_list()) == ["node-a", "node-b"]
    codes = s.sql("SELECT code, count(*) FROM ingest_warnings GROUP BY code ORDER BY code").rows()
    assert codes == [("collect_unfinished", 1), ("profiler_unfinished", 2)]


def test_bad_manifest_is_a_warning_not_a_failure(bundle: Path, store: Path) -> None:
    (bundle / "manifest.json").write_text('{"stallscope_manifest": {"version": 1, "kind": "bundle"}, "ranks": [')
    res = ingest([bundle], store=store, workers=1)
    s = open_store(store, job=res.job)
    assert s.sql("SELECT count(*) FROM ranks").item() == 2
    assert s.sql("SELECT code FROM ingest_warnings WHERE file = 'manifest.json'").item() == "bad_manifest"


def test_the_queries_in_docs_collect_md_run(bundle: Path, store: Path) -> None:
    from stallscope.collectors.topology import parse_nvidia_smi_q

    doc = _manifest()
    doc["topology"]["node-a"]["nvidia_smi_q"] = {"status": "ok", "parsed": parse_nvidia_smi_q((FIX / "nvidia_smi_q.txt").read_text())}
    doc["ranks"][1]["env"] = [{"name": "NCCL_DEBUG", "value": "WARN"}]
    mf.write_json_atomic(bundle / "manifest.json", doc)
    res = ingest([bundle], store=store, workers=1, analyze=False)
    s = open_store(store, job=res.job)
    text = (Path(__file__).parents[2] / "docs" / "collect.md").read_text()
    block = text[text.index("```sql") + 6:text.index("```", text.index("```sql") + 6)]
    queries = ["\n".join(ln for ln in q.splitlines() if not ln.startswith("--")) for q in block.split(";") if q.strip()]
    results = [s.sql(q) for q in queries]
    assert [r.height for r in results] == [2, 1, 1]
    assert results[1]["bus_id"].to_list() == ["00000000:2A:00.0"]  # the GPU whose link trained down
    assert results[2]["name"].to_list() == ["NCCL_DEBUG"]
