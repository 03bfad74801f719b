"""Topology probes: parsers on captured outputs, sysfs readers on fake trees, and probes that
skip cleanly (tool missing, tool failing, tool hanging)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stallscope.collectors import topology as topo

FIX = Path(__file__).parent / "fixtures"


def test_topo_matrix() -> None:
    t = topo.parse_topo_matrix((FIX / "nvidia_smi_topo_m.txt").read_text())
    assert t["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert t["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert t["links"]["GPU0"]["GPU1"] == "NV18" and t["links"]["GPU0"]["NIC0"] == "PXB" and t["links"]["GPU2"]["NIC0"] == "SYS"
    assert t["links"]["NIC1"]["GPU3"] == "PXB" and t["links"]["GPU1"]["GPU1"] == "X"
    assert t["cpu_affinity"] == {"GPU0": "0-31,64-95", "GPU1": "0-31,64-95", "GPU2": "32-63,96-127", "GPU3": "32-63,96-127"}
    assert t["numa_affinity"]["GPU3"] == "1" and t["gpu_numa_id"]["GPU0"] == "N/A"
    assert t["legend"]["SYS"].startswith("Connection traversing PCIe as well as the SMP")


def test_topo_matrix_old_driver_and_ansi() -> None:
    text = (FIX / "nvidia_smi_topo_m_old.txt").read_text().replace("GPU0\tGPU1", "\x1b[4mGPU0\tGPU1\x1b[0m", 1)
    t = topo.parse_topo_matrix(text)
    assert t["gpus"] == ["GPU0", "GPU1"] and t["nics"] == {"mlx5_0": "mlx5_0"}
    assert t["links"]["GPU0"]["mlx5_0"] == "PHB" and t["cpu_affinity"] == {"GPU0": "0-11", "GPU1": "0-11"}


def test_nvidia_smi_q_summary() -> None:
    q = topo.parse_nvidia_smi_q((FIX / "nvidia_smi_q.txt").read_text())
    assert (q["driver_version"], q["cuda_version"], q["attached_gpus"]) == ("550.90.07", "12.4", 2)
    g0, g1 = q["gpus"]
    assert g0["bus_id"] == "00000000:18:00.0" and g0["name"] == "NVIDIA H100 80GB HBM3"
    assert g0["uuid"].startswith("GPU-00000000") and g0["minor_number"] == 0 and g0["mig_mode"] == "Disabled"
    assert (g0["pcie_gen_current"], g0["pcie_gen_max"], g0["pcie_width_current"], g0["pcie_width_max"]) == (5, 5, 16, 16)
    # the second GPU's link trained down: the fact a locality rule needs
    assert (g1["pcie_gen_current"], g1["pcie_width_current"]) == (3, 8)
    assert g1["memory_total_mib"] == 81559 and g1["ecc_mode"] == "Enabled"
    assert topo.host_versions({"nvidia_smi_q": {"parsed": q}}) == {"driver": "550.90.07", "cuda_driver": "12.4"}


def test_lscpu() -> None:
    c = topo.parse_lscpu((FIX / "lscpu.txt").read_text())
    assert (c["cpus"], c["sockets"], c["cores_per_socket"], c["threads_per_core"], c["numa_nodes"]) == (128, 2, 32, 2, 2)
    assert c["numa_cpus"] == {"node0": "0-31,64-95", "node1": "32-63,96-127"}
    assert c["model_name"].startswith("Intel(R) Xeon(R)")


def test_ibstat() -> None:
    ib = topo.parse_ibstat((FIX / "ibstat.txt").read_text())["cas"]
    assert set(ib) == {"mlx5_0", "mlx5_1"} and ib["mlx5_0"]["firmware_version"] == "28.39.1002"
    assert ib["mlx5_0"]["ports"]["1"]["state"] == "Active" and ib["mlx5_0"]["ports"]["1"]["rate"] == "400"
    assert ib["mlx5_1"]["ports"]["1"]["physical_state"] == "Disabled"


def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def test_infiniband_sysfs(tmp_path: Path) -> None:
    root = tmp_path / "infiniband"
    for dev, rate, state, numa in [("mlx5_0", "400 Gb/sec (4X NDR)", "4: ACTIVE", "0"), ("mlx5_1", "100 Gb/sec (4X EDR)", "1: DOWN", "1")]:
        _write(root / dev / "ports" / "1" / "rate", rate)
        _write(root / dev / "ports" / "1" / "state", state)
        _write(root / dev / "ports" / "1" / "phys_state", "5: LinkUp")
        _write(root / dev / "ports" / "1" / "link_layer", "InfiniBand")
        _write(root / dev / "device" / "numa_node", numa)
    raw, parsed = topo.read_infiniband(root)
    p0, p1 = parsed["ports"]
    assert (p0["device"], p0["port"], p0["rate_gbps"], p0["state"], p0["numa_node"]) == ("mlx5_0", 1, 400.0, "4: ACTIVE", 0)
    assert (p1["rate_gbps"], p1["state"]) == (100.0, "1: DOWN")
    assert "mlx5_1/1: rate=100 Gb/sec" in raw


def test_numa_sysfs(tmp_path: Path) -> None:
    for i, cpus in enumerate(["0-31,64-95", "32-63,96-127"]):
        _write(tmp_path / f"node{i}" / "cpulist", cpus)
        _write(tmp_path / f"node{i}" / "distance", "10 21" if i == 0 else "21 10")
        _write(tmp_path / f"node{i}" / "meminfo", f"Node {i} MemTotal:       263856612 kB\nNode {i} MemFree: 1 kB")
    _, parsed = topo.read_numa(tmp_path)
    assert parsed["nodes"]["node1"] == {"cpulist": "32-63,96-127", "mem_total_kb": 263856612, "distance": [21, 10]}


def test_probes_skip_cleanly_on_this_host() -> None:
    res = topo.probe_all(timeout=10)
    assert set(res) == set(topo.PROBES)
    for name, r in res.items():
        assert r["status"] in ("ok", "unavailable", "failed"), name
        assert (r["status"] == "ok") == (r["error"] is None or "parser failed" in r["error"]), (name, r)
    if not Path("/sys/class/infiniband").exists():
        assert res["infiniband"]["status"] == "unavailable" and "not present" in res["infiniband"]["error"]
    if res["lscpu"]["status"] == "ok":
        assert res["lscpu"]["parsed"]["cpus"] == os.cpu_count()


def _fake_tool(bin_dir: Path, name: str, script: str) -> None:
    p = bin_dir / name
    p.write_text("#!/bin/sh\n" + script + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def test_missing_failing_and_hanging_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    sleep, cat = shutil.which("sleep"), shutil.which("cat")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert topo.probe_all(only=("nvidia_smi_q",))["nvidia_smi_q"]["status"] == "unavailable"
    _fake_tool(tmp_path, "nvidia-smi", "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; exit 9")
    r = topo.probe_all(only=("nvidia_smi_q",))["nvidia_smi_q"]
    assert r["status"] == "failed" and r["error"].startswith("exit code 9: NVIDIA-SMI has failed")
    _fake_tool(tmp_path, "nvidia-smi", f"exec {sleep} 30")
    r = topo.probe_all(timeout=0.5, only=("nvidia_smi_topo",))["nvidia_smi_topo"]
    assert r["status"] == "failed" and "timed out" in r["error"]
    _fake_tool(tmp_path, "nvidia-smi", f"{cat} {FIX / 'nvidia_smi_topo_m.txt'}")
    r = topo.probe_all(only=("nvidia_smi_topo",))["nvidia_smi_topo"]
    assert r["status"] == "ok" and r["parsed"]["nics"]["NIC1"] == "mlx5_1"
