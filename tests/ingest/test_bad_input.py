"""Bad input: one clear line naming the file, never a traceback, never losing the good files."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import stallscope
from stallscope.api import ingest
from stallscope.errors import IngestError
from stallscope.ingest.kineto import parse_kineto
from stallscope.ingest.writer import PartWriter
from tests.conftest import TRACES

GOOD = TRACES / "cpu_gloo" / "rank0.pt.trace.json.gz"
GOOD_RAW = gzip.decompress(GOOD.read_bytes())


def _warnings(store: Path) -> dict[str, tuple[str, str]]:
    """file -> (code, message) of its first warning other than duplicate_rank."""
    df = stallscope.open(store).sql("SELECT file, code, message FROM ingest_warnings WHERE code <> 'duplicate_rank'")
    out: dict[str, tuple[str, str]] = {}
    for r in df.iter_rows(named=True):
        out.setdefault(r["file"], (r["code"], r["message"]))
    return out


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    d = tmp_path / "bundle"
    d.mkdir()
    (d / "good.json.gz").write_bytes(GOOD.read_bytes())
    return d


@pytest.mark.parametrize(
    "name,content,code",
    [
        ("empty.json", b"", "empty"),
        ("corrupt.json.gz", b"\x1f\x8b\x08\x00garbage-not-deflate" * 10, "corrupt_gzip"),
        ("notjson.pt.trace.json", b"{ this is not json at all, \"traceEvents\": [ nope", "not_json"),
        ("other.json", json.dumps({"hello": "world"}).encode(), None),
        ("binary.bin", bytes(range(256)) * 100, None),
    ],
)
def test_bad_file_beside_good_one(bundle: Path, store: Path, name: str, content: bytes, code: str | None) -> None:
    (bundle / name).write_bytes(content)
    res = ingest([bundle], store=store, analyze=False)
    assert res.ranks == 1  # the good trace is always kept
    s = stallscope.open(store)
    assert s.sql("SELECT count(*) n FROM events")["n"][0] == 1404
    files = {r["file"]: r for r in s.sql("SELECT * FROM files").iter_rows(named=True)}
    assert files["good.json.gz"]["status"] == "ok"
    if code is None:
        assert files[name]["status"] == "skipped"  # not a trace: listed, not an error
    else:
        w = _warnings(store)
        assert w[name][0] == code
        assert name in w[name][1] and "\n" not in w[name][1]


def test_truncated_trace_keeps_complete_events(bundle: Path, store: Path) -> None:
    cut = int(len(GOOD_RAW) * 0.6)
    (bundle / "killed.json").write_bytes(GOOD_RAW[:cut])
    ingest([bundle], store=store, analyze=False)
    s = stallscope.open(store)
    r = s.sql("SELECT events, truncated FROM ranks WHERE file = 'killed.json'").row(0, named=True)
    assert r["truncated"] is True
    # every event that was complete before the cut is kept
    head = GOOD_RAW[: GOOD_RAW.index(b'"traceEvents"')]
    complete = GOOD_RAW[:cut].count(b'"ph": "X"') - (0 if GOOD_RAW[:cut].rstrip().endswith(b"},") else 1)
    assert abs(r["events"] - complete) <= 1 and r["events"] > 500
    code, msg = _warnings(store)["killed.json"]
    assert code == "truncated" and "byte" in msg and head  # names the offset


def test_truncated_gzip(bundle: Path, store: Path) -> None:
    data = GOOD.read_bytes()
    (bundle / "cut.json.gz").write_bytes(data[: len(data) // 2])
    ingest([bundle], store=store, analyze=False)
    r = stallscope.open(store).sql("SELECT events, truncated FROM ranks WHERE file = 'cut.json.gz'").row(0, named=True)
    assert r["truncated"] and 0 < r["events"] < 1404
    assert "gzip" in _warnings(store)["cut.json.gz"][1]


def test_streaming_equals_one_shot(tmp_path: Path) -> None:
    """Tiny chunks (many cuts, many element-inside-args retries) give exactly the same rows."""
    import pyarrow.parquet as pq

    from stallscope.ingest import json_array

    outs = []
    for chunk in (1 << 30, 4096):
        old = json_array.ArrayStreamer.__init__.__kwdefaults__["chunk"]
        json_array.ArrayStreamer.__init__.__kwdefaults__["chunk"] = chunk
        try:
            d = tmp_path / f"c{chunk}"
            pw = PartWriter(d, "0")
            parse_kineto(TRACES / "hta/nccl_parser_config/nccl_data.json.gz", label="x", part="0", out=pw)
            pw.close()
            outs.append({t: pq.read_table(d / f"table={t}" / "part-0.parquet") for t in ("events", "kernels", "collectives", "steps")})
        finally:
            json_array.ArrayStreamer.__init__.__kwdefaults__["chunk"] = old
    for t in outs[0]:
        assert outs[0][t].equals(outs[1][t]), t


def test_not_a_trace_alone_is_a_clear_error(tmp_path: Path, store: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    with pytest.raises(IngestError, match="no Kineto trace"):
        ingest([p], store=store)


def test_missing_path(store: Path) -> None:
    with pytest.raises(IngestError, match="no such file"):
        ingest(["/nonexistent/bundle"], store=store)


def test_cli_one_line_error(tmp_path: Path) -> None:
    p = tmp_path / "empty.json"
    p.write_bytes(b"")
    r = subprocess.run([sys.executable, "-m", "stallscope", "ingest", str(p), "--store", str(tmp_path / "s"), "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "empty.json" in r.stderr and "Traceback" not in r.stderr


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frac=st.floats(min_value=0.0, max_value=1.0), gz=st.booleans(), which=st.sampled_from(["cpu_gloo/rank1.pt.trace.json.gz", "hta/trace_compare/base/base.json.gz", "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"]))
@example(frac=0.9999999999999999, gz=False, which="cpu_gloo/rank1.pt.trace.json.gz")  # only the closing brace cut
def test_any_truncation_is_partial_or_clear_error(tmp_path: Path, frac: float, gz: bool, which: str) -> None:
    """Property: a real trace cut anywhere is either parsed partially with a warning or rejected
    with one clear line naming the file; it never raises anything else."""
    src = TRACES / which
    raw = gzip.decompress(src.read_bytes())
    data = gzip.compress(raw, 1) if gz else raw
    cut = int(len(data) * frac)
    d = tmp_path / f"t{cut}-{gz}"
    d.mkdir(exist_ok=True)
    f = d / "trace.json"
    f.write_bytes(data[:cut])
    pw = PartWriter(d / "out", "0")
    try:
        s = parse_kineto(f, label="trace.json", part="0", out=pw)
    except IngestError as exc:
        msg = str(exc)
        assert msg.startswith("trace.json:") and "\n" not in msg
        return
    finally:
        pw.close()
    full = cut >= len(data)
    if not full:
        assert s.truncated and any(w["code"] == "truncated" for w in s.warnings)
    assert s.events >= 0


def test_archives_and_unsafe_members(tmp_path: Path, store: Path) -> None:
    tgz = tmp_path / "bundle.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(GOOD, arcname="traces/rank0.pt.trace.json.gz")
        info = tarfile.TarInfo("../../evil.txt")
        payload = b"pwned"
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
        link = tarfile.TarInfo("traces/link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)
    z = tmp_path / "more.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.write(TRACES / "cpu_gloo" / "rank1.pt.trace.json.gz", "rank1.pt.trace.json.gz")
    res = ingest([tgz, z], store=store, analyze=False)
    assert res.ranks == 2
    assert not (tmp_path.parent / "evil.txt").exists()
    files = stallscope.open(store).sql("SELECT file FROM files ORDER BY file")["file"].to_list()
    assert files == ["bundle.tar.gz!traces/rank0.pt.trace.json.gz", "more.zip!rank1.pt.trace.json.gz"]
    codes = {r[0] for r in stallscope.open(store).sql("SELECT code FROM ingest_warnings").rows()}
    assert "unsafe_member" in codes
