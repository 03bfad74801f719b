"""``stallscope bundle pack``: safe, reproducible archives that ingest reads like the directory."""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

import pytest

from stallscope.api import ingest
from stallscope.collectors.bundle import pack
from stallscope.errors import UsageError
from tests.collectors.cli_helpers import stallscope
from tests.conftest import TRACES


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    b = tmp_path / "run-42"
    (b / "traces").mkdir(parents=True)
    (b / "nccl").mkdir()
    for r in (0, 1):
        shutil.copy(TRACES / "cpu_gloo" / f"rank{r}.pt.trace.json.gz", b / "traces" / f"rank{r}.pt.trace.json.gz")
    (b / "manifest.json").write_text('{"stallscope_manifest": {"version": 1, "kind": "bundle"}, "ranks": []}\n')
    return b


def test_pack_is_sorted_reproducible_and_rooted(bundle: Path, tmp_path: Path) -> None:
    a = pack(bundle, tmp_path / "a.tar.gz")
    os.utime(bundle / "nccl", (1, 1))  # a directory's time does not change the archive
    b = pack(bundle, tmp_path / "b.tar.gz")
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    assert a.files == 3 and a.skipped == [] and a.bytes_out < a.bytes_in + 10_000
    with tarfile.open(tmp_path / "a.tar.gz") as t:
        names = t.getnames()
        assert names == ["run-42", "run-42/manifest.json", "run-42/nccl", "run-42/traces",
                         "run-42/traces/rank0.pt.trace.json.gz", "run-42/traces/rank1.pt.trace.json.gz"]
        assert {m.uid for m in t.getmembers()} == {0} and {m.uname for m in t.getmembers()} == {""}


def test_links_are_left_out_and_the_output_never_packs_itself(bundle: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").write_text("secret")
    (bundle / "link").symlink_to(tmp_path / "outside")
    (bundle / "dirlink").symlink_to(tmp_path)
    res = pack(bundle, bundle / "self.tar.gz")
    assert sorted(res.skipped) == ["dirlink (symbolic link)", "link (symbolic link)"]
    with tarfile.open(bundle / "self.tar.gz") as t:
        assert not any(n.endswith(("link", "self.tar.gz")) for n in t.getnames())
    with pytest.raises(UsageError, match="already exists"):
        pack(bundle, bundle / "self.tar.gz")
    assert pack(bundle, bundle / "self.tar.gz", overwrite=True).files == 3
    assert [p.name for p in bundle.iterdir() if p.name.startswith(".")] == []


def test_ingest_reads_the_pack_like_the_directory(bundle: Path, tmp_path: Path) -> None:
    r = stallscope("bundle", "pack", str(bundle), "-o", str(tmp_path / "job.tar.gz"))
    assert r.returncode == 0 and "3 files" in r.stdout, r.stderr
    d = ingest([bundle], store=tmp_path / "s1", workers=1)
    p = ingest([tmp_path / "job.tar.gz"], store=tmp_path / "s2", workers=1)
    assert (p.ranks, p.files) == (d.ranks, d.files) == (2, 3)
    assert p.job == d.job  # same contents, same job id


def test_pack_usage_errors(tmp_path: Path) -> None:
    r = stallscope("bundle", "pack", str(tmp_path / "missing"), "-o", str(tmp_path / "x.tar.gz"))
    assert r.returncode == 2 and r.stderr.strip() == f"stallscope: error: {tmp_path / 'missing'}: not a directory"
