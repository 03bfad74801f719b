"""What intra-node bandwidth a GPU's board gives, from the name its trace declares.

Traces name their GPUs (``deviceProperties``, the ``ranks.device_name`` column). The SXM/OAM
boards of NVIDIA's data-centre GPUs join every GPU of a node through NVLink (and NVSwitch from
A100 on): an 8-GPU all-reduce of tens of MiB moves 130 (V100) to 800 (B200) GB/s of bus
bandwidth in nccl-tests. Copies through host memory (NCCL's SHM transport, when P2P is off)
reach 10-25 GB/s on any of them, PCIe P2P 20-50. So on those boards an intra-node collective
that moves its bytes far below NVLink speed is not "a slow machine": P2P is off or NVLink is
down. PCIe cards (``H100 PCIe``, ``H100 NVL``, ``A100 80GB PCIe``, L4, A10, consumer cards)
legitimately run at PCIe or SHM speed and are never judged this way.

:data:`NVLINK_BOARDS` gives, per board family, a *conservative* bus bandwidth: about half of
what nccl-tests reports for an 8-GPU all-reduce of large messages, so that collectives sharing
the links with others, or of mid sizes, stay above it on a healthy node. It sizes the what-if
("these transfers at no less than NVLink's conservative speed"); a board is slow when it runs
under :data:`SLOW_SHARE` of it.
"""

from __future__ import annotations

import re

#: (pattern on the device name, conservative intra-node bus bandwidth in GB/s); the first match
#: wins. PCIe and NVL (PCIe with bridged pairs) variants are excluded by :data:`PCIE`.
NVLINK_BOARDS: tuple[tuple[re.Pattern[str], float], ...] = (
    (re.compile(r"\b(?:GB200|GB300|B100|B200|B300)\b", re.IGNORECASE), 350.0),
    (re.compile(r"\b(?:H100|H200|H20|GH200)\b", re.IGNORECASE), 200.0),
    (re.compile(r"\bH800\b", re.IGNORECASE), 150.0),
    (re.compile(r"\bA100(?:-SXM|-PG5)", re.IGNORECASE), 120.0),
    (re.compile(r"\bA800-SXM", re.IGNORECASE), 80.0),
    (re.compile(r"\bV100-SXM", re.IGNORECASE), 60.0),
)
#: board variants without an NVSwitch: their GPUs talk over PCIe (at most bridged pairs)
PCIE = re.compile(r"\b(?:PCIe|NVL)\b", re.IGNORECASE)
#: intra-node bus bandwidth under this share of the board's conservative figure is not NVLink
SLOW_SHARE = 0.4
#: what an intra-node collective takes before its bytes move (launch, handshake: nccl-tests'
#: small-message times on 8 NVLink GPUs are 10-20 µs); a replay at NVLink speed keeps it
LATENCY_NS = 10_000
#: messages of this size and more are bandwidth-bound on NVLink (smaller ones pay latency that
#: says nothing of the transport)
MIN_BYTES = 16 << 20


def nvlink_busbw(names: list[str | None]) -> float | None:
    """Conservative NVLink bus bandwidth (GB/s) of the job's GPUs: the lowest over the names, or
    None when any name is unknown, missing, or a PCIe variant (nothing to expect from NVLink)."""
    if not names:
        return None
    out = []
    for n in names:
        if not n or PCIE.search(n):
            return None
        ref = next((bw for pat, bw in NVLINK_BOARDS if pat.search(n)), None)
        if ref is None:
            return None
        out.append(ref)
    return min(out)
