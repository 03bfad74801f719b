"""NCCL and PyTorch-profiler versions: which format features each one has.

Every version-dependent spelling the writers use is decided here, from the format fingerprints
in ``../shared/logs/nccl/SOURCES.md`` and the real traces in ``../shared/traces``:

NCCL (debug log and kernel names)
  * ``Channel NN :`` connection lines without ``/connIndex`` before 2.12; ``Channel NN/C :`` from 2.12
  * the bracket after a rank is the busId in hex up to 2.18.1, the nvmlDev index from 2.18.3
  * P2P spelling: ``P2P/IPC/read`` up to 2.18, ``P2P/CUMEM/read`` (A100) / ``P2P/CUMEM`` (H100) from 2.19
  * ``Using non-device net plugin version 0`` from 2.19
  * ``Init START`` lines from 2.19; function name prefix (``ncclCommInitRankConfig comm ...``) from 2.21
  * ``Init timings: ...`` in 2.22; ``Init timings - <func>: ... alloc ...`` from 2.23
  * ``Bootstrap: Using`` (no space before the colon) from 2.23, ``Bootstrap : Using`` before
  * ``Connected all rings, use ring PXN 0 GDR 1`` from 2.24, plain ``Connected all rings`` before
  * ring print lists at most 20 ranks up to 2.22; from 2.23 the line is cut at 127 characters
  * kernel names ``ncclKernel_*`` before 2.19, ``ncclDevKernel_*`` from 2.19; NCCL launches with
    ``cudaLaunchKernel`` before 2.17, ``cudaLaunchKernelExC`` in 2.17-2.18, the driver's
    ``cuLaunchKernelEx`` from 2.19

PyTorch profiler (Kineto JSON)
  * ``kineto_2022`` (torch 1.12/1.13, like ``trace_diff/control``): integer ``ts``/``dur`` in µs
    since the Unix epoch, no ``baseTimeNanoseconds``, ``distributedInfo`` without ``pg_config``,
    no collective metadata, flows ``async_cpu_to_gpu``/``async_gpu``, cpu_op args with
    ``Trace name``/``Trace iteration``/``Profiler Event Index``
  * ``kineto_2024`` (torch 2.3/2.4, like ``nccl_parser_config/nccl_data``): float ``ts`` with ns
    resolution relative to ``baseTimeNanoseconds``, ``pg_config``, collective metadata on
    ``record_param_comms`` and on the NCCL kernel, but no ``Seq``
  * ``kineto_2025`` (torch 2.6+, top-level keys like ``cpu_gloo``): adds ``Seq`` and ``Rank``
    (and ``Src Rank``/``Dst Rank`` on point-to-point ops), ``host_name``, ``trace_id``,
    ``record_shapes`` with ``Input Dims``/``Input type`` on cpu_ops
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering

#: NCCL releases we imitate, with the CUDA version they were typically built with
NCCL_RELEASES: dict[str, str] = {
    "2.10.3": "11.4", "2.12.12": "11.7", "2.14.3": "11.8", "2.17.1": "12.1", "2.18.6": "12.2",
    "2.19.3": "12.3", "2.20.5": "12.4", "2.21.5": "12.4", "2.23.4": "12.6", "2.24.3": "12.8",
}

#: profiler variants and the NCCL releases shipped with the torch versions they stand for
TORCH_VARIANTS: dict[str, tuple[str, ...]] = {
    "kineto_2022": ("2.10.3", "2.12.12", "2.14.3"),
    "kineto_2024": ("2.17.1", "2.18.6", "2.19.3", "2.20.5"),
    "kineto_2025": ("2.20.5", "2.21.5", "2.23.4", "2.24.3"),
}


@total_ordering
@dataclass(frozen=True)
class NcclVersion:
    major: int
    minor: int
    patch: int
    cuda: str

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def full(self) -> str:
        """As NCCL prints it: ``2.21.5+cuda12.4``."""
        return f"{self.text}+cuda{self.cuda}"

    def _t(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __lt__(self, other: object) -> bool:
        o = other._t() if isinstance(other, NcclVersion) else tuple(other)  # type: ignore[arg-type]
        return self._t() < o

    def __ge__(self, other: object) -> bool:
        return not self.__lt__(other)

    # -- features ------------------------------------------------------------------------
    @property
    def new_kernel_names(self) -> bool:
        return self >= (2, 19, 0)

    @property
    def conn_index(self) -> bool:
        return self >= (2, 12, 0)

    @property
    def nvml_brackets(self) -> bool:
        return self >= (2, 18, 3)

    @property
    def cumem(self) -> bool:
        return self >= (2, 19, 0)

    @property
    def init_start(self) -> bool:
        return self >= (2, 19, 0)

    @property
    def func_prefix(self) -> bool:
        return self >= (2, 21, 0)

    @property
    def launch(self) -> tuple[str, str, int]:
        """(name, Kineto category, CUPTI cbid) of the call NCCL launches its kernel with."""
        if self >= (2, 19, 0):
            return ("cuLaunchKernelEx", "cuda_driver", 652)
        if self >= (2, 17, 0):
            return ("cudaLaunchKernelExC", "cuda_runtime", 430)
        return ("cudaLaunchKernel", "cuda_runtime", 211)


def version(text: str) -> NcclVersion:
    """Parse ``2.21.5`` (CUDA taken from :data:`NCCL_RELEASES`) or ``2.21.5+cuda12.4``."""
    base, _, cuda = text.partition("+cuda")
    parts = [int(x) for x in base.split(".")]
    while len(parts) < 3:
        parts.append(0)
    return NcclVersion(parts[0], parts[1], parts[2], cuda or NCCL_RELEASES.get(base, "12.4"))
