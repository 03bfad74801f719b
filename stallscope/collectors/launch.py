"""``stallscope collect -- COMMAND``: run a job so that it leaves a complete bundle.

The command (``torchrun``, ``srun``, ``mpirun``, ``python``, a shell script) runs with this
process's stdin/stdout/stderr and an environment that points everything at the bundle:

* ``STALLSCOPE_BUNDLE=<bundle>`` — :func:`stallscope.collectors.profile` writes its per-rank
  traces and rank records there (as does any profiler that reads the variable);
* ``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV``,
  ``NCCL_DEBUG_FILE=<bundle>/nccl/%h.%p.log`` (one log per process, named by host and pid) —
  each only when the user has not set it: a user's NCCL variable is kept, and the manifest
  notes what that means (``NCCL_DEBUG_FILE`` elsewhere: the logs are not in the bundle);
* ``STALLSCOPE_COLLECT_ID``/``STALLSCOPE_COLLECT_HOST``/``STALLSCOPE_COLLECT_SET`` — so rank
  records are merged by the right collect and local rank 0 of this host skips the topology
  probes that ``collect`` already runs.

``manifest.json`` is written before the command starts (``status: running``) and completed when
it ends — also when it fails or is interrupted — with the exit code, the ranks' records merged in,
and this host's topology (probed in a background thread while the job runs).

Signals: SIGTERM, SIGHUP and SIGQUIT sent to ``collect`` are forwarded to the command and
``collect`` keeps waiting for it. SIGINT is forwarded too, except when it came from the terminal
(Ctrl-C): the terminal already delivered it to the command, which shares the foreground process
group, and a second SIGINT would cut a launcher's own shutdown (torchrun stops its workers on the
first one) short.

Exit code: the command's; ``128 + N`` when it was killed by signal N (as shells report it);
127 when the command does not exist and 126 when it cannot be executed (as ``env``/``timeout`` do).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stallscope.collectors import manifest as mf
from stallscope.collectors.env import hostname, job_id
from stallscope.collectors.profiler import BUNDLE_ENV, COLLECT_HOST_ENV, COLLECT_ID_ENV, COLLECT_SET_ENV
from stallscope.errors import CollectError, UsageError

#: NCCL variables collect sets when the user has not; NCCL_DEBUG_FILE is added per bundle
NCCL_DEFAULTS: dict[str, str] = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH,ENV"}
#: NCCL_DEBUG_FILE pattern inside the bundle (NCCL expands %h to the host, %p to the pid)
NCCL_FILE_PATTERN = "%h.%p.log"
#: seconds collect waits for unfinished topology probes once the command has ended
PROBE_GRACE_S = 30.0
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@dataclass
class CollectResult:
    """What a collect run left behind."""

    bundle: Path
    manifest: Path
    exit_code: int
    status: str  #: ok | failed | interrupted
    ranks: int = 0
    traces: int = 0
    nccl_logs: int = 0
    notes: list[str] = field(default_factory=list)


def default_bundle_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$STALLSCOPE_BUNDLE`` when set, else ``./stallscope-bundle-<UTC yyyymmdd-hhmmss>``."""
    env = os.environ if environ is None else environ
    if env.get(BUNDLE_ENV):
        return Path(env[BUNDLE_ENV])
    return Path(time.strftime("stallscope-bundle-%Y%m%d-%H%M%S", time.gmtime()))


def child_env(bundle: Path, base: Mapping[str, str], *, collect_id: str, host: str,
              nccl_debug: bool = True) -> tuple[dict[str, str], list[str], list[str]]:
    """The command's environment: ``base`` plus what collect sets (see module doc).

    Returns (environment, names collect set, notes about user settings it kept).
    """
    env = dict(base)
    ours: dict[str, str] = {BUNDLE_ENV: str(bundle), COLLECT_ID_ENV: collect_id, COLLECT_HOST_ENV: host}
    notes: list[str] = []
    if nccl_debug:
        wanted = {**NCCL_DEFAULTS, "NCCL_DEBUG_FILE": str(bundle / mf.NCCL_DIR / NCCL_FILE_PATTERN)}
        for name, value in wanted.items():
            if name in env:
                continue
            ours[name] = value
        if "NCCL_DEBUG_FILE" in env:
            notes.append(f"NCCL_DEBUG_FILE={env['NCCL_DEBUG_FILE']} was set by the user and kept: NCCL logs go there, "
                         "not into the bundle (add them to it before ingest)")
        if env.get("NCCL_DEBUG", "INFO").upper() not in ("INFO", "TRACE"):
            notes.append(f"NCCL_DEBUG={env['NCCL_DEBUG']} was set by the user and kept: the logs will lack the INFO lines "
                         "(transports, topology) stallscope reads")
        subsys = env.get("NCCL_DEBUG_SUBSYS")
        if subsys is not None and not {"INIT", "NET"} <= {s.strip().upper() for s in subsys.split(",")} and "ALL" not in subsys.upper():
            notes.append(f"NCCL_DEBUG_SUBSYS={subsys} was set by the user and kept: INIT and NET lines may be missing")
    ours[COLLECT_SET_ENV] = ",".join(sorted([*ours, COLLECT_SET_ENV]))
    env.update(ours)
    return env, sorted(ours), notes


def guess_launcher(command: Sequence[str]) -> str:
    """torchrun | srun | mpirun | python | ... from the command's first word."""
    name = Path(command[0]).name
    if name.startswith("python"):
        if any(m in command[1:3] for m in ("torch.distributed.run", "torch.distributed.launch")):
            return "torchrun"
        return "python"
    if name in ("mpirun", "mpiexec", "orterun", "prterun", "mpiexec.hydra"):
        return "mpirun"
    return name


def _collect_versions() -> dict[str, Any]:
    """Versions installed on the collect host, without importing torch (the ranks report what
    they actually loaded; those win in the merged manifest)."""
    import platform
    from importlib import metadata

    from stallscope import __version__

    def dist_version(*names: str) -> str | None:
        for n in names:
            try:
                return metadata.version(n)
            except metadata.PackageNotFoundError:
                continue
        return None

    return {"stallscope": __version__, "python": platform.python_version(), "torch": dist_version("torch"),
            "nccl": dist_version("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"),
            "cuda": None, "driver": None, "cuda_driver": None}


class _Probes:
    """This host's topology probes, run in a daemon thread while the command runs."""

    def __init__(self) -> None:
        from stallscope.collectors.topology import PROBES

        self.names = list(PROBES)
        self.results: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, name="stallscope-topology", daemon=True)

    def _run(self) -> None:
        from stallscope.collectors.topology import probe_all

        for name in self.names:
            self.results.update(probe_all(only=(name,)))

    def finish(self, grace: float) -> dict[str, Any]:
        why = f"still running {grace:g} s after the command ended; skipped"
        try:
            self.thread.join(timeout=grace)
        except KeyboardInterrupt:  # Ctrl-C while waiting: finish the manifest without them
            why = "interrupted while waiting for it; skipped"
        out = dict(self.results)
        for name in self.names:
            out.setdefault(name, {"status": "failed", "command": name, "seconds": None, "raw": None, "parsed": None,
                                  "error": why})
        return out


def _terminal_sent(signum: int) -> bool:
    """True when SIGINT most likely came from the terminal to our whole (foreground) process group."""
    if signum != signal.SIGINT:
        return False
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def run_collect(command: Sequence[str], *, out: str | Path | None = None, topology: bool = True, nccl_debug: bool = True,
                environ: Mapping[str, str] | None = None, probe_grace_s: float = PROBE_GRACE_S,
                on_start: Callable[[Path], None] | None = None) -> CollectResult:
    """Run ``command`` under collection (see module doc) and return what it left.

    Raises :class:`UsageError` for an empty command or an unusable ``out``, and
    :class:`CollectError` (exit code 127/126) when the command cannot be started; the manifest
    is written in every case where the bundle directory exists.
    """
    command = list(command)
    if not command:
        raise UsageError("collect: no command given (usage: stallscope collect [--out DIR] -- COMMAND...)")
    base = dict(os.environ if environ is None else environ)
    bundle = Path(out) if out is not None else default_bundle_dir(base)
    bundle = bundle.expanduser().resolve()
    if bundle.exists() and not bundle.is_dir():
        raise UsageError(f"{bundle}: exists and is not a directory")
    try:
        for sub in (mf.TRACES_DIR, mf.NCCL_DIR, mf.RANKS_DIR):
            (bundle / sub).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{bundle}: cannot create the bundle directory ({exc.strerror})") from None

    collect_id, host = mf.new_id(), hostname()
    env, set_by_collect, notes = child_env(bundle, base, collect_id=collect_id, host=host, nccl_debug=nccl_debug)
    iso, ns = mf.now()
    doc: dict[str, Any] = {
        mf.MARKER: mf.header("bundle"),
        "collect_id": collect_id, "job_id": job_id(base) or collect_id, "status": "running",
        "command": command, "launcher": guess_launcher(command), "cwd": os.getcwd(), "host": host, "pid": os.getpid(),
        "started_at": iso, "started_at_ns": ns, "ended_at": None, "ended_at_ns": None, "duration_s": None,
        "exit_code": None, "signal": None, "error": None, "world_size": None,
        "nccl": {"debug_file": env.get("NCCL_DEBUG_FILE"), "logs_in_bundle": env.get("NCCL_DEBUG_FILE", "").startswith(str(bundle) + os.sep),
                 "set_by_collect": [n for n in set_by_collect if n.startswith("NCCL_")]},
        "notes": notes, "versions": _collect_versions(),
        "env": mf.mask_env(env, set_by_collect=set_by_collect), "ranks": [], "topology": {},
    }
    path, earlier = mf.claim_manifest(bundle, doc)
    if earlier is not None:
        notes.append(f"{bundle} already held the bundle of an earlier run ({earlier}); its files stay and will be ingested "
                     "with this run's: use a new --out per run")
    probes = _Probes() if topology else None
    if probes is not None:
        probes.thread.start()
    if on_start is not None:
        on_start(bundle)

    received: list[int] = []
    unsent: list[int] = []  # arrived before the command existed
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, frame: Any) -> None:
        received.append(signum)
        if _terminal_sent(signum):
            return
        if child is None:
            unsent.append(signum)
        elif child.poll() is None:
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                pass

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for forwarded in _FORWARDED:
            previous[forwarded] = signal.signal(forwarded, forward)
    try:
        try:
            child = subprocess.Popen(command, env=env)
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            doc["error"] = f"{command[0]}: {'command not found' if code == 127 else exc.strerror or exc}"
            _finish(bundle, path, doc, probes, probe_grace_s, exit_code=code, status="not_started", sig=None)
            err = CollectError(doc["error"])
            err.exit_code = code
            raise err from None
        if unsent:
            child.send_signal(unsent[0])
        rc = child.wait()
    finally:
        for signum, h in previous.items():
            signal.signal(signum, h)
    exit_code = 128 - rc if rc < 0 else rc
    died_of = signal.Signals(-rc).name if rc < 0 else None
    interrupted = bool(received) or (died_of in ("SIGINT", "SIGTERM", "SIGHUP"))
    status = "ok" if rc == 0 and not received else ("interrupted" if interrupted else "failed")
    sig = died_of or (signal.Signals(received[0]).name if received else None)
    return _finish(bundle, path, doc, probes, probe_grace_s, exit_code=exit_code, status=status, sig=sig)


def _finish(bundle: Path, path: Path, doc: dict[str, Any], probes: _Probes | None, grace: float, *,
            exit_code: int, status: str, sig: str | None) -> CollectResult:
    """Complete the manifest: end time, outcome, topology, merged rank records."""
    from stallscope.collectors.topology import host_versions

    iso, ns = mf.now()
    doc.update({"ended_at": iso, "ended_at_ns": ns, "duration_s": round((ns - doc["started_at_ns"]) / 1e9, 3),
                "exit_code": exit_code, "status": status, "signal": sig})
    if probes is not None:
        topo = probes.finish(grace)
        doc["topology"][doc["host"]] = topo
        for k, v in host_versions(topo).items():
            if v is not None and doc["versions"].get(k) is None:
                doc["versions"][k] = v
    merged = mf.merge_ranks(bundle, doc, collect_id=doc["collect_id"])
    mf.write_json_atomic(path, doc)
    for p in merged:
        p.unlink(missing_ok=True)
    try:
        (bundle / mf.RANKS_DIR).rmdir()  # only when empty: records of other collects stay
    except OSError:
        pass
    traces = [p for p in (bundle / mf.TRACES_DIR).glob("*.pt.trace.json*") if not p.name.startswith(".")]
    logs = [p for p in (bundle / mf.NCCL_DIR).glob("*") if p.is_file() and p.stat().st_size > 0]
    return CollectResult(bundle=bundle, manifest=path, exit_code=exit_code, status=status, ranks=len(doc["ranks"]),
                         traces=len(traces), nccl_logs=len(logs), notes=list(doc["notes"]))
