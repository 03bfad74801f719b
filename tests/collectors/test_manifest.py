"""Manifest files: secret masking, which environment is recorded, claiming and merging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stallscope.collectors import manifest as mf


@pytest.mark.parametrize("name,value", [
    ("HF_TOKEN", "hf_abc"), ("WANDB_API_KEY", "0123"), ("AWS_SECRET_ACCESS_KEY", "x"), ("DB_PASSWORD", "p"),
    ("STALLSCOPE_API_TOKENS", "a,b"), ("SSH_KEY", "k"), ("MY_AUTH", "a"), ("GITHUB_PAT_CREDENTIALS", "c"),
    ("NCCL_SOMETHING", "ghp_" + "a" * 36), ("CUDA_X", "Bearer abc.def"), ("NCCL_Y", "AKIA" + "A" * 16),
    ("TORCH_NCCL_Z", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig"), ("NCCL_HF", "hf_" + "x" * 30),
])
def test_secrets_are_masked(name: str, value: str) -> None:
    assert mf.mask_value(name, value) == (mf.MASK, True)


@pytest.mark.parametrize("name,value", [
    ("NCCL_IB_PKEY", "0x8001"), ("NCCL_IB_HCA", "mlx5_0,mlx5_1"), ("NCCL_SOCKET_IFNAME", "eth0"),
    ("CUDA_VISIBLE_DEVICES", "GPU-5f0c8a9e-1a2b-3c4d-5e6f-0123456789ab"), ("NCCL_DEBUG_FILE", "/b/nccl/%h.%p.log"),
    ("NCCL_MONKEY_PATCH", "1"), ("MASTER_ADDR", "10.0.0.1"), ("NCCL_IB_GID_INDEX", "3"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"), ("NCCL_TOPO_FILE", "/etc/nccl/topo.xml"),
])
def test_ordinary_settings_stay_visible(name: str, value: str) -> None:
    assert mf.mask_value(name, value) == (value, False)


def test_url_passwords_are_masked_but_the_rest_kept() -> None:
    assert mf.mask_value("NCCL_PROXY", "socks5://alice:s3cr3t@10.1.1.1:1080/x") == (f"socks5://alice:{mf.MASK}@10.1.1.1:1080/x", True)
    assert mf.mask_value("NCCL_PROXY", "http://10.1.1.1:3128") == ("http://10.1.1.1:3128", False)


def test_mask_env_records_relevant_variables_only() -> None:
    env = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "TORCH_NCCL_BLOCKING_WAIT": "1", "CUDA_VISIBLE_DEVICES": "0,1",
           "MASTER_ADDR": "n1", "HOME": "/root", "PATH": "/bin", "HF_TOKEN": "hf_secret", "STALLSCOPE_API_TOKENS": "t1",
           "UCX_TLS": "rc"}
    rows = mf.mask_env(env, set_by_collect=["NCCL_DEBUG"])
    names = [r["name"] for r in rows]
    assert names == sorted(["NCCL_DEBUG", "NCCL_IB_HCA", "TORCH_NCCL_BLOCKING_WAIT", "CUDA_VISIBLE_DEVICES", "MASTER_ADDR",
                            "STALLSCOPE_API_TOKENS", "UCX_TLS"])
    by = {r["name"]: r for r in rows}
    assert by["NCCL_DEBUG"]["source"] == "collect" and by["NCCL_IB_HCA"]["source"] == "user"
    assert by["STALLSCOPE_API_TOKENS"] == {"name": "STALLSCOPE_API_TOKENS", "value": mf.MASK, "masked": True, "source": "user"}
    assert "t1" not in json.dumps(rows)


def test_manifest_key_comes_first(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    mf.write_json_atomic(p, {mf.MARKER: mf.header("bundle"), "x": 1})
    assert p.read_text().lstrip("{ \n").startswith(f'"{mf.MARKER}"')
    assert [q.name for q in tmp_path.iterdir()] == ["m.json"]  # no temporary left behind


def _rank(bundle: Path, rank: int, host: str, collect_id: str | None, **extra: object) -> None:
    rec = {mf.MARKER: mf.header("rank"), "rank": rank, "world_size": 4, "host": host, "pid": 100 + rank,
           "collect_id": collect_id, "versions": {"torch": "2.13.0", "cuda": None}, **extra}
    mf.write_json_atomic(mf.rank_file(bundle, rank, host, 100 + rank), rec)


def test_merge_takes_this_collects_ranks_and_host_topology(tmp_path: Path) -> None:
    _rank(tmp_path, 1, "a", "c-1", topology={"lscpu": {"status": "ok"}})
    _rank(tmp_path, 0, "a", "c-1")
    _rank(tmp_path, 2, "b", None, topology={"lscpu": {"status": "ok", "raw": "b"}})
    _rank(tmp_path, 3, "c", "c-other")
    doc = {"topology": {"a": {"lscpu": {"status": "ok", "raw": "collect's"}}}, "versions": {"torch": "2.12"}}
    merged = mf.merge_ranks(tmp_path, doc, collect_id="c-1")
    assert sorted(p.name for p in merged) == ["rank0.json", "rank1.json", "rank2.json"]
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2]
    assert "topology" not in doc["ranks"][1] and mf.MARKER not in doc["ranks"][0]
    assert doc["topology"]["a"]["lscpu"]["raw"] == "collect's" and doc["topology"]["b"]["lscpu"]["raw"] == "b"
    assert doc["world_size"] == 4 and doc["versions"]["torch"] == "2.13.0"


def test_second_collect_on_a_shared_bundle_gets_its_own_manifest(tmp_path: Path) -> None:
    first, _ = mf.claim_manifest(tmp_path, {mf.MARKER: mf.header("bundle"), "collect_id": "c-1", "status": "running", "host": "a", "pid": 1})
    second, _ = mf.claim_manifest(tmp_path, {mf.MARKER: mf.header("bundle"), "collect_id": "c-2", "status": "running", "host": "b", "pid": 2})
    assert first.name == "manifest.json" and second.name == "manifest-b-2.json"
    mf.write_json_atomic(first, {mf.MARKER: mf.header("bundle"), "collect_id": "c-1", "status": "ok"})
    third, earlier = mf.claim_manifest(tmp_path, {mf.MARKER: mf.header("bundle"), "collect_id": "c-3", "status": "running", "host": "a", "pid": 3})
    assert third.name == "manifest.json" and earlier == "c-1"  # a finished earlier collect's manifest is replaced
