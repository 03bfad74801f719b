"""Host topology probes: GPUs, PCIe/NVLink paths, CPUs, NUMA nodes and InfiniBand ports.

Each probe runs with a timeout and never raises. Its result says what happened:

* ``ok`` — the tool or the files exist and were read: ``raw`` text plus ``parsed`` facts;
* ``unavailable`` — the tool is not installed or the files do not exist (a CPU-only host has no
  ``nvidia-smi``, a host without RDMA has no ``/sys/class/infiniband``): ``error`` says which;
* ``failed`` — the tool exists but failed or timed out (``nvidia-smi`` without a driver): the
  first line of its error is kept.

=================== ===================================== ====================================
probe               source                                parsed
=================== ===================================== ====================================
``nvidia_smi_topo`` ``nvidia-smi topo -m``                link matrix (NV#, PIX, PXB, PHB,
                                                          NODE, SYS), CPU/NUMA affinity, NICs
``nvidia_smi_q``    ``nvidia-smi -q``                     driver and CUDA version; per GPU name,
                                                          UUID, bus id, PCIe gen/width, MIG...
``lscpu``           ``lscpu``                             sockets, cores, threads, NUMA CPUs
``numa``            ``/sys/devices/system/node``          per node: CPUs, memory, distances
``infiniband``      ``/sys/class/infiniband``             per port: rate, state, link layer
``ibstat``          ``ibstat``                            per CA: type, firmware, ports
=================== ===================================== ====================================

The parsers are pure functions over text (tested on captured outputs).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: seconds a probe command may run
DEFAULT_TIMEOUT_S = 20.0
#: raw output kept per probe
MAX_RAW_BYTES = 1 << 20

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

Result = dict[str, Any]


def _result(status: str, *, command: str, seconds: float = 0.0, raw: str | None = None, parsed: Any = None,
            error: str | None = None) -> Result:
    return {"status": status, "command": command, "seconds": round(seconds, 3), "raw": raw, "parsed": parsed, "error": error}


def _run(argv: list[str], parse: Callable[[str], Any], *, timeout: float) -> Result:
    command = " ".join(argv)
    exe = shutil.which(argv[0])
    if exe is None:
        return _result("unavailable", command=command, error=f"{argv[0]} not found on PATH")
    t0 = time.perf_counter()
    try:
        p = subprocess.run([exe, *argv[1:]], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return _result("failed", command=command, seconds=time.perf_counter() - t0, error=f"timed out after {timeout:g} s")
    except OSError as exc:
        return _result("failed", command=command, seconds=time.perf_counter() - t0, error=f"could not run: {exc}")
    dt = time.perf_counter() - t0
    out = p.stdout[:MAX_RAW_BYTES].decode("utf-8", "replace")
    if p.returncode != 0:
        err = (p.stderr.decode("utf-8", "replace").strip() or out.strip()).splitlines()
        return _result("failed", command=command, seconds=dt, raw=out or None,
                       error=f"exit code {p.returncode}: {err[0] if err else 'no output'}")
    try:
        parsed = parse(out)
    except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the raw text
        return _result("ok", command=command, seconds=dt, raw=out, error=f"raw kept; parser failed: {type(exc).__name__}: {exc}")
    return _result("ok", command=command, seconds=dt, raw=out, parsed=parsed)


# -- nvidia-smi topo -m --------------------------------------------------------------------


def parse_topo_matrix(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi topo -m``: the connection matrix between GPUs and NICs, each GPU's CPU
    and NUMA affinity, and the NIC legend (``NIC0: mlx5_0``). Older drivers name NIC rows by
    device (``mlx5_0``) and have no legend; both forms are read.
    """
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header: list[str] | None = None
    rows: dict[str, list[str]] = {}
    nics: dict[str, str] = {}
    legend: dict[str, str] = {}
    section = "matrix"
    for ln in lines:
        s = ln.strip()
        if not s:
            continue
        if s.startswith("Legend"):
            section = "legend"
            continue
        if s.startswith("NIC Legend"):
            section = "nics"
            continue
        if section == "matrix":
            cells = [c.strip() for c in ln.split("\t") if c.strip()]
            if header is None:
                header = cells
            elif cells:
                rows[cells[0]] = cells[1:]
        elif section == "legend":
            m = re.match(r"(\S+)\s+=\s+(.*)", s)
            if m:
                legend[m.group(1)] = m.group(2)
        elif section == "nics":
            m = re.match(r"(\S+):\s*(\S+)", s)
            if m:
                nics[m.group(1)] = m.group(2)
    if header is None:
        raise ValueError("no matrix header")
    devices = list(rows)
    links: dict[str, dict[str, str]] = {}
    extra: dict[str, dict[str, str]] = {}
    for name, cells in rows.items():
        for col, val in zip(header, cells):
            if col in rows:
                links.setdefault(name, {})[col] = val
            else:
                extra.setdefault(col, {})[name] = val
    gpus = [d for d in devices if d.startswith("GPU")]
    return {
        "devices": devices,
        "gpus": gpus,
        "nics": {d: nics.get(d, d) for d in devices if not d.startswith("GPU")},
        "links": links,
        "cpu_affinity": extra.get("CPU Affinity", {}),
        "numa_affinity": extra.get("NUMA Affinity", {}),
        "gpu_numa_id": extra.get("GPU NUMA ID", {}),
        "legend": legend,
    }


# -- nvidia-smi -q -------------------------------------------------------------------------


def _indent_tree(text: str) -> dict[str, Any]:
    """``nvidia-smi -q`` text as a nested dict: ``Key : value`` lines are leaves, a line without
    ``:`` opens a section holding the more indented lines below it. A repeated section name
    (one ``GPU <bus id>`` per GPU) is kept as ``name``, ``name#2``, ..."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for raw in text.splitlines():
        ln = _ANSI.sub("", raw).rstrip()
        if not ln.strip() or ln.strip().startswith("===="):
            continue
        indent = len(ln) - len(ln.lstrip())
        while stack and indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        s = ln.strip()
        if " : " in s or s.endswith(" :"):
            key, _, value = s.partition(":")
            parent[_unique(parent, key.strip())] = value.strip()
        else:
            child: dict[str, Any] = {}
            parent[_unique(parent, s)] = child
            stack.append((indent, child))
    return root


def _unique(d: dict[str, Any], key: str) -> str:
    if key not in d:
        return key
    i = 2
    while f"{key}#{i}" in d:
        i += 1
    return f"{key}#{i}"


def _get(d: Any, *path: str) -> Any:
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _intval(v: Any) -> int | None:
    m = re.match(r"\s*(\d+)", v) if isinstance(v, str) else None
    return int(m.group(1)) if m else None


def parse_nvidia_smi_q(text: str) -> dict[str, Any]:
    """Summarize ``nvidia-smi -q``: driver and CUDA versions and, per GPU, the facts that matter
    for distributed performance (PCIe link running below its maximum, MIG, persistence, ECC)."""
    tree = _indent_tree(text)
    gpus = []
    for key, sec in tree.items():
        if not key.startswith("GPU ") or not isinstance(sec, dict):
            continue
        link = _get(sec, "PCI", "GPU Link Info") or {}
        gpus.append({
            "bus_id": _get(sec, "PCI", "Bus Id") or key.split(" ", 1)[1].split("#")[0],
            "name": sec.get("Product Name"),
            "uuid": sec.get("GPU UUID"),
            "minor_number": _intval(sec.get("Minor Number")),
            "persistence_mode": sec.get("Persistence Mode"),
            "mig_mode": _get(sec, "MIG Mode", "Current"),
            "ecc_mode": _get(sec, "ECC Mode", "Current"),
            "pcie_gen_current": _intval(_get(link, "PCIe Generation", "Current")),
            "pcie_gen_max": _intval(_get(link, "PCIe Generation", "Max")),
            "pcie_width_current": _intval(_get(link, "Link Width", "Current")),
            "pcie_width_max": _intval(_get(link, "Link Width", "Max")),
            "memory_total_mib": _intval(_get(sec, "FB Memory Usage", "Total")),
            "fabric_state": _get(sec, "Fabric", "State"),
        })
    return {
        "driver_version": tree.get("Driver Version"),
        "cuda_version": tree.get("CUDA Version"),
        "attached_gpus": _intval(tree.get("Attached GPUs")),
        "gpus": gpus,
    }


# -- lscpu ---------------------------------------------------------------------------------


def parse_lscpu(text: str) -> dict[str, Any]:
    """``lscpu`` as ``{field: value}`` plus a summary (sockets, cores, threads, NUMA CPUs).
    Section headers and cache/vulnerability lines of newer util-linux are kept as plain fields."""
    fields: dict[str, str] = {}
    for ln in text.splitlines():
        key, sep, value = ln.partition(":")
        if sep and key.strip() and value.strip():
            fields.setdefault(key.strip(), value.strip())
    numa = {k.split()[1].lower(): v for k, v in fields.items() if re.fullmatch(r"NUMA node\d+ CPU\(s\)", k)}
    return {
        "architecture": fields.get("Architecture"),
        "model_name": fields.get("Model name"),
        "cpus": _intval(fields.get("CPU(s)")),
        "sockets": _intval(fields.get("Socket(s)")),
        "cores_per_socket": _intval(fields.get("Core(s) per socket")),
        "threads_per_core": _intval(fields.get("Thread(s) per core")),
        "numa_nodes": _intval(fields.get("NUMA node(s)")),
        "numa_cpus": numa,
        "fields": fields,
    }


# -- sysfs: NUMA nodes and InfiniBand ports ------------------------------------------------


def _read(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None


def read_numa(root: Path = Path("/sys/devices/system/node")) -> tuple[str, dict[str, Any]]:
    """Per NUMA node: CPU list, total memory (kB) and the distance row. Returns (raw, parsed)."""
    nodes: dict[str, Any] = {}
    raw = []
    for d in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        cpulist = _read(d / "cpulist")
        distance = _read(d / "distance")
        meminfo = _read(d / "meminfo") or ""
        m = re.search(r"MemTotal:\s+(\d+)\s*kB", meminfo)
        nodes[d.name] = {"cpulist": cpulist, "mem_total_kb": int(m.group(1)) if m else None,
                         "distance": [int(x) for x in distance.split()] if distance else None}
        raw.append(f"{d.name}: cpulist={cpulist} distance={distance} mem_total_kb={nodes[d.name]['mem_total_kb']}")
    return "\n".join(raw), {"nodes": nodes}


def parse_ib_rate(rate: str | None) -> float | None:
    """``200 Gb/sec (4X HDR)`` -> 200.0 (Gbit/s)."""
    m = re.match(r"\s*([\d.]+)\s*Gb/sec", rate or "")
    return float(m.group(1)) if m else None


def read_infiniband(root: Path = Path("/sys/class/infiniband")) -> tuple[str, dict[str, Any]]:
    """Per RDMA device port: rate (text and Gbit/s), state, physical state, link layer, and the
    device's NUMA node. Returns (raw, parsed)."""
    ports = []
    raw = []
    for dev in sorted(root.iterdir()):
        numa = _read(dev / "device" / "numa_node")
        for port in sorted((dev / "ports").glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 0):
            rec: dict[str, Any] = {"device": dev.name, "port": int(port.name) if port.name.isdigit() else None,
                   "rate": _read(port / "rate"), "state": _read(port / "state"),
                   "phys_state": _read(port / "phys_state"), "link_layer": _read(port / "link_layer"),
                   "numa_node": int(numa) if numa and numa.lstrip("-").isdigit() else None}
            rec["rate_gbps"] = parse_ib_rate(rec["rate"])
            ports.append(rec)
            raw.append(f"{dev.name}/{port.name}: rate={rec['rate']} state={rec['state']} "
                       f"phys_state={rec['phys_state']} link_layer={rec['link_layer']} numa_node={numa}")
    return "\n".join(raw), {"ports": ports}


def _sysfs(name: str, root: Path, reader: Callable[[Path], tuple[str, dict[str, Any]]], *, want: str) -> Result:
    command = f"read {root}"
    if not root.is_dir() or not any(root.glob(want)):
        return _result("unavailable", command=command, error=f"{root} not present")
    t0 = time.perf_counter()
    try:
        raw, parsed = reader(root)
    except OSError as exc:
        return _result("failed", command=command, seconds=time.perf_counter() - t0, error=str(exc))
    return _result("ok", command=command, seconds=time.perf_counter() - t0, raw=raw, parsed=parsed)


# -- ibstat --------------------------------------------------------------------------------


def parse_ibstat(text: str) -> dict[str, Any]:
    """``ibstat``: per CA its type, firmware, and per port state, physical state, rate (Gbit/s)
    and link layer."""
    cas: dict[str, Any] = {}
    ca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for ln in text.splitlines():
        s = ln.strip()
        m = re.match(r"CA '([^']+)'", s)
        if m:
            ca = {"ports": {}}
            cas[m.group(1)] = ca
            port = None
            continue
        if ca is None:
            continue
        m = re.match(r"Port (\d+):$", s)
        if m:
            port = {}
            ca["ports"][m.group(1)] = port
            continue
        key, sep, value = s.partition(":")
        if not sep:
            continue
        key = key.strip().lower().replace(" ", "_")
        (port if port is not None else ca)[key] = value.strip()
    return {"cas": cas}


# -- all probes ----------------------------------------------------------------------------

#: probe name -> function(timeout) -> result, in the order they run
PROBES: dict[str, Callable[[float], Result]] = {
    "nvidia_smi_topo": lambda t: _run(["nvidia-smi", "topo", "-m"], parse_topo_matrix, timeout=t),
    "nvidia_smi_q": lambda t: _run(["nvidia-smi", "-q"], parse_nvidia_smi_q, timeout=t),
    "lscpu": lambda t: _run(["lscpu"], parse_lscpu, timeout=t),
    "numa": lambda t: _sysfs("numa", Path("/sys/devices/system/node"), read_numa, want="node[0-9]*"),
    "infiniband": lambda t: _sysfs("infiniband", Path("/sys/class/infiniband"), read_infiniband, want="*"),
    "ibstat": lambda t: _run(["ibstat"], parse_ibstat, timeout=t),
}


def probe_all(*, timeout: float = DEFAULT_TIMEOUT_S, only: tuple[str, ...] | None = None) -> dict[str, Result]:
    """Run every probe (or ``only`` those) on this host; never raises."""
    out: dict[str, Result] = {}
    for name, fn in PROBES.items():
        if only is not None and name not in only:
            continue
        try:
            out[name] = fn(timeout)
        except Exception as exc:  # noqa: BLE001 - a probe must never break collection
            out[name] = _result("failed", command=name, error=f"{type(exc).__name__}: {exc}")
    return out


def host_versions(topology: dict[str, Result]) -> dict[str, str | None]:
    """Driver and CUDA (driver API) versions from the ``nvidia_smi_q`` probe, when it ran."""
    parsed = (topology.get("nvidia_smi_q") or {}).get("parsed") or {}
    return {"driver": parsed.get("driver_version"), "cuda_driver": parsed.get("cuda_version")}
