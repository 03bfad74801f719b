"""The real thing: a 2-process torchrun gloo training job on CPU under ``stallscope collect``,
rank 1 delayed 40 ms in its data path every step, profiled with ``stallscope.collectors.profile``.

The bundle must hold one trace and one rank record per rank plus a complete manifest; ingest
must find both ranks, their collectives and hosts matching the manifest; the post-mortem must
name rank 1 as a synchronization straggler. A second run without ``collect`` (the profiler alone,
as after a collect that was killed) must leave rank records that ingest reads the same way.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stallscope.api import ingest, open_store, postmortem
from tests.collectors.cli_helpers import ROOT, cli_env, stallscope

JOB = ROOT / "tests" / "collectors" / "gloo_job.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]

pytestmark = pytest.mark.slow
FIX = Path(__file__).parent / "fixtures"

def _postmortem(path: Path, store: Path) -> dict:
    return postmortem(path, store=store)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    pytest.importorskip("torch")
    b = tmp_path_factory.mktemp("collect") / "bundle"
    r = stallscope("collect", "--out", str(b), "--", *TORCHRUN, str(JOB), "--delay-rank", "1", "--delay-ms", "40",
                   timeout=180)
    return b, r


def test_bundle_is_complete(collected: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    b, r = collected
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ok (exit code 0)" in r.stderr and "2 rank record(s), 2 trace(s)" in r.stderr
    m = json.loads((b / "manifest.json").read_text())
    host = socket.gethostname()
    assert (m["status"], m["exit_code"], m["world_size"], m["launcher"], m["host"]) == ("ok", 0, 2, "torchrun", host)
    ranks = m["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and {r["local_rank"] for r in ranks} == {0, 1}
    assert {r["host"] for r in ranks} == {host} and len({r["pid"] for r in ranks}) == 2
    assert {(r["backend"], r["device"], r["status"], r["steps"], r["launcher"]) for r in ranks} == {("gloo", "cpu", "done", 8, "torchrun")}
    assert all(r["collect_id"] == m["collect_id"] for r in ranks)
    for r in ranks:
        (trace,) = r["traces"]
        assert (b / trace).is_file() and trace.startswith(f"traces/rank{r['rank']}.{host}_{r['pid']}.")
        assert r["versions"]["torch"].startswith("2.") and any(e["name"] == "NCCL_DEBUG" for e in r["env"])
    assert not (b / "ranks").exists()  # merged into manifest.json
    assert m["versions"]["torch"] == ranks[0]["versions"]["torch"]
    probes = m["topology"][host]
    assert probes["nvidia_smi_topo"]["status"] in ("ok", "unavailable", "failed")
    if probes["lscpu"]["status"] == "ok":
        assert probes["lscpu"]["parsed"]["cpus"] == os.cpu_count()
    assert {e["name"]: e["value"] for e in m["env"]}["NCCL_DEBUG_FILE"] == f"{b}/nccl/%h.%p.log"


def test_ingest_and_postmortem_name_the_delayed_rank(collected: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    b, _ = collected
    res = ingest([b], store=tmp_path / "store", workers=1)
    assert res.ranks == 2
    s = open_store(tmp_path / "store", job=res.job)
    coll = s.sql("SELECT rank, op, count(*) AS n FROM collectives GROUP BY ALL ORDER BY ALL").rows()
    assert {r for r, _, _ in coll} == {0, 1} and all(op == "allreduce" and n >= 6 for _, op, n in coll)
    joined = s.sql("SELECT r.rank, r.host = m.host AND r.pid = m.pid AS same, m.local_rank FROM ranks r "
                   "JOIN manifest_ranks m USING (rank) ORDER BY r.rank").rows()
    assert joined == [(0, True, 0), (1, True, 1)]
    assert s.sql("SELECT status, world_size, ranks_recorded FROM manifest").row(0) == ("ok", 2, 2)
    doc = _postmortem(b, tmp_path / "store")
    top = doc["findings"][0]
    assert top["cause"] == "synchronization" and 1 in top["ranks"] and 0 not in top["ranks"], top


def test_pack_of_the_real_bundle_ingests(collected: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    b, _ = collected
    r = stallscope("bundle", "pack", str(b), "-o", str(tmp_path / "job.tar.gz"))
    assert r.returncode == 0, r.stderr
    packed = ingest([tmp_path / "job.tar.gz"], store=tmp_path / "store", workers=1)
    plain = ingest([b], store=tmp_path / "store", workers=1)
    assert packed.ranks == 2 and plain.skipped and plain.job == packed.job  # same files, same job
    doc = _postmortem(tmp_path / "job.tar.gz", tmp_path / "store")
    assert doc["job"]["world_size"] == 2 and doc["findings"][0]["cause"] == "synchronization"


def test_profiler_alone_leaves_rank_records(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    b = tmp_path / "bundle"
    r = subprocess.run([*TORCHRUN, str(JOB), "--steps", "5", "--active", "3", "--exit-code", "0"],
                       env=cli_env(STALLSCOPE_BUNDLE=str(b)), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (b / "manifest.json").exists()
    recs = sorted((b / "ranks").glob("*.json"))
    assert [p.name for p in recs] == ["rank0.json", "rank1.json"]
    rank0 = json.loads(recs[0].read_text())
    assert "topology" in rank0 and "topology" not in json.loads(recs[1].read_text())  # local rank 0 probes its host
    res = ingest([b], store=tmp_path / "store", workers=1)
    s = open_store(tmp_path / "store", job=res.job)
    assert s.sql("SELECT rank, local_rank, collect_id FROM manifest_ranks ORDER BY rank").rows() == [(0, 0, None), (1, 1, None)]
    assert s.sql("SELECT count(DISTINCT probe) FROM manifest_topology").item() == 6
    assert s.sql("SELECT count(*) FROM collectives").item() > 0


def test_recorded_bundle_from_a_loaded_host(tmp_path: Path) -> None:
    """A bundle this job left on the 2-core machine under load (`bundle pack` of a collect run):
    Gloo's CPU-side ends scatter by milliseconds, the straggler must be found all the same."""
    doc = postmortem(FIX / "gloo-loaded-host.tar.gz", store=tmp_path / "store")
    top = doc["findings"][0]
    assert top["cause"] == "synchronization" and top["ranks"] == [1]


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available() and torch.distributed.is_nccl_available()
    except ImportError:
        return False


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU and NCCL (runs wherever one is at hand; see docs/collect.md)")
def test_cuda_nccl_job_for_real(tmp_path: Path) -> None:
    """One GPU is enough: a world-size-1 NCCL communicator still logs its INFO lines, CUDA kernels
    appear in the trace and the DDP allreduce is a collective (its device work for one rank may be
    a copy rather than an ``ncclDevKernel``, so no kind of kernel is required of it)."""
    b = tmp_path / "bundle"
    r = stallscope("collect", "--out", str(b), "--", sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node=1", str(JOB), "--backend", "nccl", "--delay-ms", "0", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((b / "manifest.json").read_text())
    (rank,) = m["ranks"]
    assert rank["device"] == "cuda:0" and rank["device_name"] and rank["versions"]["nccl"] and rank["backend"] == "nccl"
    logs = list((b / "nccl").glob("*.log"))
    assert logs and any(" NCCL INFO " in p.read_text(errors="replace") for p in logs)
    probes = m["topology"][m["host"]]
    assert probes["nvidia_smi_q"]["status"] == "ok" and probes["nvidia_smi_q"]["parsed"]["gpus"]
    assert probes["nvidia_smi_topo"]["status"] == "ok" and probes["nvidia_smi_topo"]["parsed"]["gpus"]
    assert m["versions"]["driver"] and m["versions"]["cuda"]
    res = ingest([b], store=tmp_path / "store", workers=1)
    s = open_store(tmp_path / "store", job=res.job)
    assert s.sql("SELECT count(*) FROM kernels WHERE kind = 'kernel'").item() > 0
    assert s.sql("SELECT count(*) FROM collectives").item() > 0
    assert s.sql("SELECT count(*) FROM nccl_comms").item() > 0
    assert s.sql("SELECT driver_version FROM manifest").item() == m["versions"]["driver"]
