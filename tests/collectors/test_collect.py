"""``stallscope collect``: environment, exit codes, the manifest in every outcome, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stallscope.collectors import manifest as mf
from stallscope.collectors.launch import child_env, guess_launcher
from tests.collectors.cli_helpers import cli_env, stallscope

DUMP_ENV = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w')); sys.exit(int(sys.argv[2]))"


def _manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def test_environment_and_exit_code(tmp_path: Path) -> None:
    b, seen = tmp_path / "b", tmp_path / "env.json"
    r = stallscope("collect", "--out", str(b), "--no-topology", "--", sys.executable, "-c", DUMP_ENV, str(seen), "3")
    assert r.returncode == 3, r.stderr
    env = json.loads(seen.read_text())
    assert env["STALLSCOPE_BUNDLE"] == str(b.resolve())
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,NET,GRAPH,ENV")
    assert env["NCCL_DEBUG_FILE"] == f"{b.resolve()}/nccl/%h.%p.log"
    m = _manifest(b)
    assert list(m)[0] == mf.MARKER and m[mf.MARKER]["kind"] == "bundle"
    assert (m["status"], m["exit_code"], m["launcher"]) == ("failed", 3, "python")
    assert m["command"][-2:] == [str(seen), "3"] and m["ended_at_ns"] > m["started_at_ns"]
    assert m["nccl"]["logs_in_bundle"] is True and m["topology"] == {}
    assert {e["name"] for e in m["env"] if e["source"] == "collect"} >= {"NCCL_DEBUG", "NCCL_DEBUG_FILE", "STALLSCOPE_BUNDLE"}
    assert (b / "traces").is_dir() and (b / "nccl").is_dir()
    assert "failed (exit code 3)" in r.stderr


def test_user_nccl_settings_are_kept_and_noted(tmp_path: Path) -> None:
    b, seen = tmp_path / "b", tmp_path / "env.json"
    env = cli_env(NCCL_DEBUG="WARN", NCCL_DEBUG_FILE=str(tmp_path / "mine.%p"), NCCL_DEBUG_SUBSYS="COLL",
                  WANDB_API_KEY="k-123", NCCL_IB_PKEY="0x8001", NCCL_SECRET_SAUCE="s3")
    r = stallscope("collect", "--out", str(b), "--no-topology", "--", sys.executable, "-c", DUMP_ENV, str(seen), "0", env=env)
    assert r.returncode == 0, r.stderr
    child = json.loads(seen.read_text())
    assert (child["NCCL_DEBUG"], child["NCCL_DEBUG_SUBSYS"], child["NCCL_DEBUG_FILE"]) == ("WARN", "COLL", str(tmp_path / "mine.%p"))
    m = _manifest(b)
    assert m["status"] == "ok" and m["nccl"]["logs_in_bundle"] is False and m["nccl"]["set_by_collect"] == []
    assert len(m["notes"]) == 3 and any("NCCL_DEBUG_FILE" in n for n in m["notes"])
    assert "note: NCCL_DEBUG=WARN was set by the user and kept" in r.stderr
    recorded = {e["name"]: e for e in m["env"]}
    assert recorded["NCCL_SECRET_SAUCE"]["value"] == mf.MASK and recorded["NCCL_IB_PKEY"]["value"] == "0x8001"
    assert "WANDB_API_KEY" not in recorded and "s3" not in (b / "manifest.json").read_text()


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    r = stallscope("collect", "--out", str(tmp_path / "b"))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "no command given" in r.stderr
    (tmp_path / "file").write_text("x")
    r = stallscope("collect", "--out", str(tmp_path / "file"), "--", "true")
    assert r.returncode == 2 and "not a directory" in r.stderr


def test_command_not_found_exits_127_and_still_writes_the_manifest(tmp_path: Path) -> None:
    b = tmp_path / "b"
    r = stallscope("collect", "--out", str(b), "--no-topology", "--", "no-such-command-stallscope")
    assert r.returncode == 127 and r.stderr.strip() == "stallscope: error: no-such-command-stallscope: command not found"
    m = _manifest(b)
    assert (m["status"], m["exit_code"]) == ("not_started", 127)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signals_are_forwarded_and_the_manifest_completed(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    b, started = tmp_path / "b", tmp_path / "started"
    script = f"import pathlib, time; pathlib.Path({str(started)!r}).write_text('1'); time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-m", "stallscope", "collect", "--out", str(b), "--no-topology", "--",
                          sys.executable, "-c", script], env=cli_env(), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not started.exists() and time.monotonic() - t0 < 30:
        time.sleep(0.05)
    assert started.exists()
    os.kill(p.pid, sig)  # to collect only, as a scheduler or `kill` would
    _, err = p.communicate(timeout=30)
    assert p.returncode == code, err
    m = _manifest(b)
    assert (m["status"], m["exit_code"], m["signal"]) == ("interrupted", code, sig.name)
    assert m["ended_at_ns"] is not None


def test_child_env_respects_user_values() -> None:
    env, ours, notes = child_env(Path("/b"), {"NCCL_DEBUG": "TRACE", "PATH": "/bin"}, collect_id="c-1", host="h")
    assert env["NCCL_DEBUG"] == "TRACE" and "NCCL_DEBUG" not in ours and notes == []
    assert env["NCCL_DEBUG_FILE"] == "/b/nccl/%h.%p.log" and env["PATH"] == "/bin"
    assert env["STALLSCOPE_COLLECT_SET"].split(",") == ours
    env, ours, _ = child_env(Path("/b"), {}, collect_id="c-1", host="h", nccl_debug=False)
    assert not any(n.startswith("NCCL_") for n in env)


@pytest.mark.parametrize("cmd,want", [
    (["torchrun", "x.py"], "torchrun"), (["/usr/bin/python3", "-m", "torch.distributed.run", "x.py"], "torchrun"),
    (["python3.11", "train.py"], "python"), (["mpiexec", "-n", "2", "a"], "mpirun"), (["srun", "-N2", "a"], "srun"),
])
def test_guess_launcher(cmd: list[str], want: str) -> None:
    assert guess_launcher(cmd) == want


def test_ctrl_c_in_a_terminal(tmp_path: Path) -> None:
    """Ctrl-C sends SIGINT to the terminal's foreground process group, the command included: the
    command handles it and exits, collect waits for it and completes the manifest. (Whether a
    second SIGINT would reach the command cannot be observed reliably: pending signals merge.)"""
    import pty
    import select

    b, started, count = tmp_path / "b", tmp_path / "started", tmp_path / "count"
    script = (f"import pathlib, signal, time\nn = []\nsignal.signal(signal.SIGINT, lambda *a: n.append(1))\n"
              f"pathlib.Path({str(started)!r}).write_text('1')\nt = time.time()\nwhile not n and time.time() - t < 30: time.sleep(0.01)\n"
              f"time.sleep(1.0)\npathlib.Path({str(count)!r}).write_text(str(len(n)))\n")
    pid, fd = pty.fork()
    if pid == 0:  # session leader on a new terminal, in its foreground process group
        os.execvpe(sys.executable, [sys.executable, "-m", "stallscope", "collect", "--out", str(b), "--no-topology", "-q", "--",
                                    sys.executable, "-c", script], cli_env())
    try:
        t0 = time.monotonic()
        while not started.exists() and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        os.killpg(pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    os.read(fd, 1 << 16)  # keep the terminal drained
                except OSError:
                    pass
    finally:
        os.close(fd)
    assert int(count.read_text()) >= 1
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    m = _manifest(b)
    assert (m["status"], m["signal"], m["exit_code"]) == ("interrupted", "SIGINT", 0)
