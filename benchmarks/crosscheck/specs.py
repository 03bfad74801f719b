"""Every bundle of the cross-check set: generator, its keyword arguments and the ground truth.

Five sets, made by five reviewers with five independent simulators (``ddp_sim``,
``pipeline_sim``, ``fabric_sim``, ``moe_sim`` and ``noisy_sim``, see README.md):

* ``generator`` -- ``"ddp"`` (``ddp_sim.Cfg``), ``"pipeline"`` (``pipeline_sim.Cfg``) or ``"fabric"``
  (``fabric_sim.Cfg``: bundles with NCCL debug logs); ``"moe"`` and ``"noisy"`` further down
  (``SimSpec``, by the module in ``SIMS``);
* ``kwargs`` -- the ``Cfg`` fields that differ from the defaults (the seed fixes every byte);
* ``cause`` -- ``none``, ``synchronization``, ``locality`` or ``fabric``;
* ``ranks`` / ``hosts`` -- the culprit ranks and culprit host *indices* (0-based, in the order
  of the generator's ``hostfmt``); empty when the cause has no culprit (fabric, job-wide jitter).
  ``pipeline_sim`` and ``fabric_sim`` truths also name the host of a culprit rank;
* ``lost`` -- the true lost fraction, ``(makespan - healthy makespan) / makespan``, as the
  pipeline and fabric simulators computed it when the set was made (``ddp_sim`` has no healthy twin: None).
  ``write`` recomputes it, so a drift of the simulator shows up;
* ``note`` -- what is special about a variant.

Damaged bundles: ``c1m`` leaves one rank's file out (``drop_ranks``), ``c1t``, ``t_tr``, ``t_trs``
and ``p_tr`` cut one rank's file at 70 % (``truncate_rank``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ddp_sim  # noqa: E402
import fabric_sim  # noqa: E402
import pipeline_sim  # noqa: E402


@dataclass(frozen=True)
class Spec:
    name: str
    generator: str
    kwargs: dict[str, Any]
    cause: str
    ranks: list[int]
    hosts: list[int]
    lost: float | None = None
    note: str = ""

    def cfg(self) -> Any:
        if self.generator == "ddp":
            return ddp_sim.Cfg(name=self.name, **self.kwargs)
        if self.generator == "fabric":
            return fabric_sim.Cfg(name=self.name, **self.kwargs)
        return pipeline_sim.Cfg(**self.kwargs)

    def host_names(self) -> list[str]:
        """The culprit hosts as the traces name them."""
        fmt = self.cfg().hostfmt
        return [fmt.format(h + 1) for h in self.hosts]

    def write(self, outdir: str | Path) -> dict[str, Any]:
        """Write the bundle into ``outdir`` (replaced): ``paths`` and, for pipeline_sim and fabric_sim, ``lost_frac``."""
        if self.generator == "ddp":
            return {"paths": ddp_sim.write_bundle(self.cfg(), str(outdir)), "lost_frac": None}
        if self.generator == "fabric":
            return fabric_sim.write_bundle(self.cfg(), str(outdir))
        return pipeline_sim.write_bundle(self.cfg(), str(outdir))


def S(name: str, generator: str, kwargs: dict[str, Any], cause: str, ranks: list[int], hosts: list[int],
      lost: float | None = None, note: str = "") -> Spec:
    return Spec(name, generator, kwargs, cause, ranks, hosts, lost, note)


SPECS: list[Spec] = [
    # --- ddp_sim: the 28 base bundles (healthy, straggler, host stall, intermittent, locality, fabric, jitter)
    S("h1", "ddp", dict(scenario='healthy', nodes=2, gpn=4, mode='ddp', seed=1), "none", [], []),
    S("h2", "ddp", dict(scenario='healthy', nodes=4, gpn=4, mode='fsdp', with_args=False, new_names=False, seed=2, naming='rank'), "none", [], []),
    S("h3", "ddp", dict(scenario='healthy', nodes=2, gpn=8, mode='ddp', with_args=False, float_ts=False, seed=3, gz=True, inter_bw=15e9), "none", [], []),
    S("h4", "ddp", dict(scenario='healthy', nodes=8, gpn=2, mode='fsdp', seed=4, new_sig=True, hostfmt='ip-10-0-{}-17.ec2.internal'), "none", [], []),
    S("c1", "ddp", dict(scenario='compute_straggler', nodes=2, gpn=4, culprit_rank=5, slow=0.3, seed=11), "synchronization", [5], []),
    S("c2", "ddp", dict(scenario='compute_straggler', nodes=4, gpn=4, mode='fsdp', culprit_rank=9, slow=0.2, seed=12, with_args=False, new_names=False), "synchronization", [9], []),
    S("c3", "ddp", dict(scenario='compute_straggler', nodes=2, gpn=8, culprit_rank=0, slow=0.15, seed=13, naming='rank', gz=True), "synchronization", [0], []),
    S("c4", "ddp", dict(scenario='compute_straggler', nodes=3, gpn=4, mode='fsdp', culprit_rank=7, slow=0.4, seed=14, new_sig=True, float_ts=False), "synchronization", [7], []),
    S("s1", "ddp", dict(scenario='host_stall', nodes=2, gpn=4, culprit_rank=2, stall_ms=25, seed=21), "synchronization", [2], []),
    S("s2", "ddp", dict(scenario='host_stall', nodes=4, gpn=4, mode='fsdp', culprit_rank=14, stall_ms=40, seed=22, with_args=False), "synchronization", [14], []),
    S("s3", "ddp", dict(scenario='host_stall', nodes=2, gpn=8, culprit_rank=11, stall_ms=15, seed=23, new_names=False, naming='rank'), "synchronization", [11], []),
    S("s4", "ddp", dict(scenario='host_stall', nodes=4, gpn=2, mode='fsdp', culprit_rank=1, stall_ms=60, seed=24, hostfmt='ip-10-0-{}-17.ec2.internal'), "synchronization", [1], []),
    S("i1", "ddp", dict(scenario='intermittent', nodes=2, gpn=4, culprit_rank=6, stall_ms=80, stall_steps=[2, 6], steps=9, seed=31), "synchronization", [6], []),
    S("i2", "ddp", dict(scenario='intermittent', nodes=4, gpn=4, mode='fsdp', culprit_rank=3, stall_ms=50, stall_steps=[1, 4, 7], steps=10, seed=32, with_args=False), "synchronization", [3], []),
    S("i3", "ddp", dict(scenario='intermittent', nodes=2, gpn=8, culprit_rank=12, stall_ms=100, stall_steps=[3, 5], steps=8, seed=33, new_names=False, gz=True), "synchronization", [12], []),
    S("i4", "ddp", dict(scenario='intermittent', nodes=3, gpn=4, culprit_rank=10, stall_ms=35, stall_steps=[0, 4, 8], steps=10, seed=34, naming='rank', float_ts=False), "synchronization", [10], []),
    S("l1", "ddp", dict(scenario='locality', nodes=2, gpn=4, culprit_host=1, slow=0.25, seed=41), "locality", [4, 5, 6, 7], [1]),
    S("l2", "ddp", dict(scenario='locality', nodes=4, gpn=4, mode='fsdp', culprit_host=2, slow=0.15, host_bw_factor=0.7, seed=42, with_args=False, new_names=False), "locality", [8, 9, 10, 11], [2]),
    S("l3", "ddp", dict(scenario='locality', nodes=3, gpn=8, culprit_host=0, slow=0.1, seed=43, naming='rank'), "locality", [0, 1, 2, 3, 4, 5, 6, 7], [0]),
    S("l4", "ddp", dict(scenario='locality', nodes=4, gpn=2, culprit_host=3, slow=0.3, seed=44, gz=True, new_sig=True), "locality", [6, 7], [3]),
    S("f1", "ddp", dict(scenario='fabric', nodes=2, gpn=4, fabric_bw=2.5e9, seed=51), "fabric", [], []),
    S("f2", "ddp", dict(scenario='fabric', nodes=4, gpn=4, mode='fsdp', fabric_bw=3e9, seed=52, with_args=False, new_names=False), "fabric", [], []),
    S("f3", "ddp", dict(scenario='fabric', nodes=2, gpn=8, fabric_bw=4e9, seed=53, naming='rank', float_ts=False), "fabric", [], []),
    S("f4", "ddp", dict(scenario='fabric', nodes=8, gpn=2, mode='fsdp', fabric_bw=1.5e9, seed=54, with_args=False, gz=True), "fabric", [], []),
    S("j1", "ddp", dict(scenario='jitter', nodes=2, gpn=4, jitter_ms=10, seed=61), "synchronization", [], []),
    S("j2", "ddp", dict(scenario='jitter', nodes=4, gpn=4, mode='fsdp', jitter_ms=8, seed=62, with_args=False), "synchronization", [], []),
    S("j3", "ddp", dict(scenario='jitter', nodes=2, gpn=8, jitter_ms=15, seed=63, new_names=False, naming='rank'), "synchronization", [], []),
    S("j4", "ddp", dict(scenario='jitter', nodes=4, gpn=2, jitter_ms=12, seed=64, float_ts=False), "synchronization", [], []),

    # --- ddp_sim: variants made later (damaged bundles, formats, HSDP, clock skew, no host names)
    S("c1m", "ddp", dict(scenario='compute_straggler', nodes=2, gpn=4, culprit_rank=5, slow=0.3, seed=11, drop_ranks=[2]), "synchronization", [5], [], note="c1 with rank 2's trace left out of the bundle"),
    S("c1t", "ddp", dict(scenario='compute_straggler', nodes=2, gpn=4, culprit_rank=5, slow=0.3, seed=11, truncate_rank=7), "synchronization", [5], [], note="c1 with rank 7's trace cut at 70 % of its bytes"),
    S("c5", "ddp", dict(scenario='compute_straggler', nodes=3, gpn=4, culprit_rank=6, slow=0.25, seed=75, naming='bare', clock_ms=15, mode='fsdp'), "synchronization", [6], [], note="no host names in the bundle, +-15 ms clocks"),
    S("c6", "ddp", dict(scenario='compute_straggler', nodes=4, gpn=4, culprit_rank=13, slow=0.2, seed=81, clock_ms=60), "synchronization", [13], [], note="+-60 ms clocks"),
    S("ch1", "ddp", dict(scenario='compute_straggler', nodes=2, gpn=8, mode='fsdp', hsdp=True, culprit_rank=10, slow=0.25, seed=94), "synchronization", [10], [], note="HSDP"),
    S("f1n", "ddp", dict(scenario='fabric', nodes=2, gpn=4, fabric_bw=2.5e9, seed=51, with_args=False), "fabric", [], [], note="f1 without collective metadata"),
    S("f2a", "ddp", dict(scenario='fabric', nodes=4, gpn=4, mode='fsdp', fabric_bw=3e9, seed=52, with_args=True, new_names=False), "fabric", [], [], note="f2 with collective metadata, old NCCL kernel names"),
    S("f2b", "ddp", dict(scenario='fabric', nodes=4, gpn=4, mode='fsdp', fabric_bw=3e9, seed=52, with_args=True, new_names=True), "fabric", [], [], note="f2 with collective metadata, new NCCL kernel names"),
    S("f2c", "ddp", dict(scenario='fabric', nodes=4, gpn=4, mode='fsdp', fabric_bw=3e9, seed=52, with_args=False, new_names=True), "fabric", [], [], note="f2 without collective metadata, new NCCL kernel names"),
    S("fh1", "ddp", dict(scenario='fabric', nodes=4, gpn=4, mode='fsdp', hsdp=True, fabric_bw=1.5e9, seed=95), "fabric", [], [], note="HSDP"),
    S("h1L24", "ddp", dict(scenario='healthy', nodes=2, gpn=4, mode='ddp', seed=1, layers=24), "none", [], [], note="h1 with 24 layers"),
    S("h1L4", "ddp", dict(scenario='healthy', nodes=2, gpn=4, mode='ddp', seed=1, layers=4), "none", [], [], note="h1 with 4 layers"),
    S("h5", "ddp", dict(scenario='healthy', nodes=4, gpn=8, mode='ddp', seed=71, inter_bw=12e9, gpu_name='NVIDIA A100-SXM4-80GB'), "none", [], [], note="32 A100s on 12 GB/s links"),
    S("h6", "ddp", dict(scenario='healthy', nodes=2, gpn=8, mode='fsdp', seed=72, inter_bw=12e9), "none", [], [], note="FSDP on 12 GB/s links"),
    S("h6a", "ddp", dict(scenario='healthy', nodes=2, gpn=8, mode='fsdp', seed=72, inter_bw=12e9, gpu_name='NVIDIA A100-SXM4-80GB'), "none", [], [], note="h6 on A100s"),
    S("h7", "ddp", dict(scenario='healthy', nodes=3, gpn=4, mode='fsdp', seed=73, naming='bare', clock_ms=15), "none", [], [], note="no host names in the bundle, +-15 ms clocks"),
    S("hh1", "ddp", dict(scenario='healthy', nodes=3, gpn=4, mode='fsdp', hsdp=True, seed=91), "none", [], [], note="HSDP"),
    S("j5", "ddp", dict(scenario='jitter', nodes=4, gpn=4, jitter_ms=8, jitter_kind='compute', seed=76), "synchronization", [], [], note="per-rank compute jitter"),
    S("j6", "ddp", dict(scenario='jitter', nodes=2, gpn=8, jitter_ms=10, jitter_kind='compute', seed=77, mode='fsdp', with_args=False), "synchronization", [], [], note="per-rank compute jitter, FSDP"),
    S("l5", "ddp", dict(scenario='locality', nodes=4, gpn=4, culprit_host=1, slow=0.2, seed=74, naming='bare', clock_ms=15), "locality", [4, 5, 6, 7], [1], note="no host names in the bundle, +-15 ms clocks"),
    S("l6", "ddp", dict(scenario='locality', nodes=3, gpn=4, culprit_host=2, slow=0.2, seed=82, clock_ms=60, mode='fsdp', with_args=False), "locality", [8, 9, 10, 11], [2], note="+-60 ms clocks, no collective metadata"),
    S("lh1", "ddp", dict(scenario='locality', nodes=3, gpn=4, mode='fsdp', hsdp=True, culprit_host=1, slow=0.2, seed=92), "locality", [4, 5, 6, 7], [1], note="HSDP"),
    S("lh2", "ddp", dict(scenario='locality', nodes=3, gpn=4, mode='fsdp', hsdp=True, culprit_host=0, slow=0.0, intra_slow_bw=0.1, seed=93), "locality", [0, 1, 2, 3], [0], note="HSDP, host 0's NVLink at 10 %, its compute normal"),
    S("x1", "ddp", dict(scenario='healthy', nodes=2, gpn=4, mode='ddp', seed=1), "none", [], [], note="a byte-identical repeat of h1, kept from the original set"),

    # --- pipeline_sim: TP + DP (TP inside a host, DP across hosts)
    S("t_h1", "pipeline", dict(seed=1), "none", [], [], lost=0.0),
    S("t_h2", "pipeline", dict(nodes=8, seed=2, with_args=False, clock_ms=50), "none", [], [], lost=0.0),
    S("t_h3", "pipeline", dict(nodes=4, gpn=4, tp=4, seed=3, new_names=False, dist_info=False, naming='rank'), "none", [], [], lost=0.0),
    S("t_s1", "pipeline", dict(seed=4, fault='straggler', culprit_rank=3, slow=0.3), "synchronization", [3], [0], lost=0.1625),
    S("t_s2", "pipeline", dict(nodes=8, seed=5, fault='straggler', culprit_rank=45, slow=0.2, float_ts=False), "synchronization", [45], [5], lost=0.0996),
    S("t_s3", "pipeline", dict(nodes=4, gpn=4, tp=4, seed=6, fault='straggler', culprit_rank=6, slow=0.25, with_args=False, gz=True), "synchronization", [6], [1], lost=0.1428),
    S("t_l1", "pipeline", dict(nodes=4, seed=7, fault='slow_host', culprit_host=2, slow=0.2), "locality", [16, 17, 18, 19, 20, 21, 22, 23], [2], lost=0.1194),
    S("t_l2", "pipeline", dict(nodes=8, seed=8, fault='slow_host', culprit_host=5, slow=0.25, float_ts=False, clock_ms=50), "locality", [40, 41, 42, 43, 44, 45, 46, 47], [5], lost=0.145),
    S("t_l3", "pipeline", dict(nodes=4, gpn=4, tp=4, seed=9, fault='slow_host', culprit_host=0, slow=0.15, with_args=False, dist_info=False, naming='rank'), "locality", [0, 1, 2, 3], [0], lost=0.0961),
    S("t_f1", "pipeline", dict(nodes=4, seed=10, dp_bucket_bytes=4194304, fault='fabric', fabric_bw=4e9), "fabric", [], [], lost=0.5904),
    S("t_f2", "pipeline", dict(nodes=8, seed=11, dp_bucket_bytes=2097152, fault='fabric', fabric_bw=2e9, with_args=False), "fabric", [], [], lost=0.6316),
    S("t_f3", "pipeline", dict(seed=12, dp_bucket_bytes=1048576, fault='fabric', fabric_bw=1e9, dist_info=False, naming='rank'), "fabric", [], [], lost=0.4977),
    S("t_i1", "pipeline", dict(nodes=4, steps=5, seed=13, fault='intermittent', culprit_rank=13, stall_ms=80, stall_steps=(1, 3)), "synchronization", [13], [1], lost=0.3925),
    S("t_tr", "pipeline", dict(nodes=4, seed=14, truncate_rank=7), "none", [], [], lost=0.0, note="rank 7's trace cut at 70 %"),
    S("t_trs", "pipeline", dict(nodes=4, seed=15, fault='straggler', culprit_rank=20, slow=0.3, truncate_rank=3), "synchronization", [20], [2], lost=0.1576, note="rank 3's trace cut at 70 %"),

    # --- pipeline_sim: PP (+TP, +DP)
    S("p_h1", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, seed=21, pp_sync=True), "none", [], [], lost=0.0),
    S("p_h2", "pipeline", dict(nodes=4, pp=4, layers=2, seed=22, last_stage_extra=0.4, stage_work=[1.2, 1, 1, 1], pp_sync=True), "none", [], [], lost=0.0),
    S("p_h3", "pipeline", dict(tp=1, pp=2, micro=8, sched='gpipe', layers=2, seed=23), "none", [], [], lost=0.0),
    S("p_h4", "pipeline", dict(nodes=8, pp=4, layers=2, seed=24, pp_sync=True, dist_info=False, naming='rank', clock_ms=50), "none", [], [], lost=0.0),
    S("p_h5", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, micro=6, layers=2, seed=25, last_stage_extra=0.6, pp_sync=True, with_args=False), "none", [], [], lost=0.0),
    S("p_i1", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, steps=5, seed=26, fault='intermittent', culprit_rank=9, stall_ms=120, stall_steps=(1, 3), pp_sync=True), "synchronization", [9], [2], lost=0.2763),
    S("p_i2", "pipeline", dict(nodes=4, pp=4, layers=2, steps=5, seed=27, fault='intermittent', culprit_rank=17, stall_ms=100, stall_steps=(0, 2), pp_sync=True), "synchronization", [17], [2], lost=0.2133),
    S("p_s1", "pipeline", dict(pp=2, layers=2, seed=28, fault='straggler', culprit_rank=10, slow=0.3, pp_sync=True), "synchronization", [10], [1], lost=0.1662),
    S("p_l1", "pipeline", dict(nodes=8, pp=4, layers=2, seed=29, fault='slow_host', culprit_host=3, slow=0.5, pp_sync=True), "locality", [24, 25, 26, 27, 28, 29, 30, 31], [3], lost=0.0643),
    S("p_l2", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, seed=30, fault='slow_host', culprit_host=1, slow=0.3, pp_sync=True), "locality", [4, 5, 6, 7], [1], lost=0.0335),
    S("p_f1", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, seed=31, fault='fabric', pp_sync=True, fabric_bw=2e9), "fabric", [], [], lost=0.7828),
    S("p_f2", "pipeline", dict(nodes=8, pp=2, layers=2, seed=32, act_bytes=4194304, dp_bucket_bytes=4194304, fault='fabric', pp_sync=True, fabric_bw=4e9), "fabric", [], [], lost=0.4733),
    S("p_tr", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, seed=33, pp_sync=True, gz=True, truncate_rank=5), "none", [], [], lost=0.0, note="rank 5's trace cut at 70 %"),
    S("p_h6", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, seed=34, new_names=False), "none", [], [], lost=0.0),

    # --- pipeline_sim: _nc = clocks aligned (clock_ms=0.001), _pa = p2p annotations name the peer
    S("p_f1_nc", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, seed=31, fault='fabric', pp_sync=True, fabric_bw=2e9, clock_ms=0.001), "fabric", [], [], lost=0.7828, note="clocks aligned"),
    S("p_f1_pa", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, seed=31, fault='fabric', pp_sync=True, fabric_bw=2e9, p2p_peer_ann=True), "fabric", [], [], lost=0.7828, note="p2p annotations name the peer"),
    S("p_f2_pa", "pipeline", dict(nodes=8, pp=2, layers=2, seed=32, act_bytes=4194304, dp_bucket_bytes=4194304, fault='fabric', pp_sync=True, fabric_bw=4e9, p2p_peer_ann=True), "fabric", [], [], lost=0.4733, note="p2p annotations name the peer"),
    S("p_h1_nc", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, seed=21, pp_sync=True, clock_ms=0.001), "none", [], [], lost=0.0, note="clocks aligned"),
    S("p_h1_pa", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, seed=21, pp_sync=True, p2p_peer_ann=True), "none", [], [], lost=0.0, note="p2p annotations name the peer"),
    S("p_i1_nc", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, steps=5, seed=26, fault='intermittent', culprit_rank=9, stall_ms=120, stall_steps=(1, 3), pp_sync=True, clock_ms=0.001), "synchronization", [9], [2], lost=0.2763, note="clocks aligned"),
    S("p_i1_pa", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, steps=5, seed=26, fault='intermittent', culprit_rank=9, stall_ms=120, stall_steps=(1, 3), pp_sync=True, p2p_peer_ann=True), "synchronization", [9], [2], lost=0.2763, note="p2p annotations name the peer"),
    S("p_i2_nc", "pipeline", dict(nodes=4, pp=4, layers=2, steps=5, seed=27, fault='intermittent', culprit_rank=17, stall_ms=100, stall_steps=(0, 2), pp_sync=True, clock_ms=0.001), "synchronization", [17], [2], lost=0.2133, note="clocks aligned"),
    S("p_i2_pa", "pipeline", dict(nodes=4, pp=4, layers=2, steps=5, seed=27, fault='intermittent', culprit_rank=17, stall_ms=100, stall_steps=(0, 2), pp_sync=True, p2p_peer_ann=True), "synchronization", [17], [2], lost=0.2133, note="p2p annotations name the peer"),
    S("p_l1_nc", "pipeline", dict(nodes=8, pp=4, layers=2, seed=29, fault='slow_host', culprit_host=3, slow=0.5, pp_sync=True, clock_ms=0.001), "locality", [24, 25, 26, 27, 28, 29, 30, 31], [3], lost=0.0643, note="clocks aligned"),
    S("p_l1_pa", "pipeline", dict(nodes=8, pp=4, layers=2, seed=29, fault='slow_host', culprit_host=3, slow=0.5, pp_sync=True, p2p_peer_ann=True), "locality", [24, 25, 26, 27, 28, 29, 30, 31], [3], lost=0.0643, note="p2p annotations name the peer"),
    S("p_l2_nc", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, seed=30, fault='slow_host', culprit_host=1, slow=0.3, pp_sync=True, clock_ms=0.001), "locality", [4, 5, 6, 7], [1], lost=0.0335, note="clocks aligned"),
    S("p_l2_pa", "pipeline", dict(nodes=4, gpn=4, tp=1, pp=4, layers=2, seed=30, fault='slow_host', culprit_host=1, slow=0.3, pp_sync=True, p2p_peer_ann=True), "locality", [4, 5, 6, 7], [1], lost=0.0335, note="p2p annotations name the peer"),
    S("p_s1_nc", "pipeline", dict(pp=2, layers=2, seed=28, fault='straggler', culprit_rank=10, slow=0.3, pp_sync=True, clock_ms=0.001), "synchronization", [10], [1], lost=0.1662, note="clocks aligned"),
    S("p_s1_pa", "pipeline", dict(pp=2, layers=2, seed=28, fault='straggler', culprit_rank=10, slow=0.3, pp_sync=True, p2p_peer_ann=True), "synchronization", [10], [1], lost=0.1662, note="p2p annotations name the peer"),

    # --- fabric_sim: DDP / FSDP / HSDP / TP+DP jobs with NCCL debug logs (one per process or per host)
    S("l_h1", "fabric", dict(mode='ddp', nodes=2, gpn=8, seed=301), "none", [], [], lost=0.0, note='DDP, NCCL 2.21.5, one log per process'),
    S("l_h2", "fabric", dict(mode='fsdp', nodes=4, gpn=4, seed=302, nccl='2.18.1', log_layout='host', log_prefix='torchrun', subsys='all'), "none", [], [], lost=0.0, note='FSDP, NCCL 2.18.1 busId brackets, per-host torchrun capture, NET/GRAPH lines'),
    S("l_h3", "fabric", dict(mode='tp', nodes=2, gpn=8, seed=303, nccl='2.20.5', log_hosts=[0]), "none", [], [], lost=0.0, note="TP+DP, only host 0's logs"),
    S("l_h4", "fabric", dict(mode='hsdp', nodes=3, gpn=4, seed=304, nccl='2.17.1', naming='rank', with_args=False), "none", [], [], lost=0.0, note='HSDP, rank<N> traces without host names (hosts only in the logs), no collective metadata'),
    S("l_h5", "fabric", dict(mode='ddp', nodes=8, gpn=4, seed=305, link='RoCE', float_ts=False, gz=True, log_layout='host'), "none", [], [], lost=0.0, note='32 ranks, RoCE, integer timestamps, gzip'),
    S("l_s1", "fabric", dict(mode='ddp', nodes=2, gpn=8, seed=311, scenario='socket', socket_gbs=3.0), "fabric", [], [], lost=0.8181, note='NET/Socket everywhere (NCCL_IB_DISABLE echoed)'),
    S("l_s2", "fabric", dict(mode='fsdp', nodes=4, gpn=4, seed=312, scenario='socket', socket_gbs=6.0, env_echo=False, nccl='2.18.1', log_layout='host'), "fabric", [], [], lost=0.747, note='NET/Socket, libibverbs missing (no env echo)'),
    S("l_s3", "fabric", dict(mode='tp', nodes=2, gpn=8, seed=313, scenario='socket', socket_gbs=12.0, nccl='2.20.5', log_hosts=[1]), "fabric", [], [], lost=0.3148, note="TP+DP on a fast Socket transport (subtle), only host 1's logs"),
    S("l_s4", "fabric", dict(mode='hsdp', nodes=4, gpn=4, seed=314, scenario='socket', socket_gbs=3.0, naming='rank'), "fabric", [], [], lost=0.7811, note='HSDP on Socket, rank<N> traces'),
    S("l_g1", "fabric", dict(mode='fsdp', nodes=4, gpn=4, seed=321, scenario='gdr_off', factor=0.5, subsys='all'), "fabric", [], [], lost=0.1756, note="GDR off everywhere, 'GPU Direct RDMA Disabled for HCA' lines"),
    S("l_g2", "fabric", dict(mode='ddp', nodes=4, gpn=4, seed=322, scenario='gdr_off', factor=0.45, nccl='2.18.1'), "fabric", [], [], lost=0.1861, note='GDR off everywhere, only the missing /GDRDMA shows it'),
    S("l_g3", "fabric", dict(mode='tp', nodes=2, gpn=8, seed=323, scenario='gdr_off', factor=0.5, nccl='2.20.5', log_layout='host'), "fabric", [], [], lost=0.0697, note='GDR off, TP+DP (subtle)'),
    S("l_n1", "fabric", dict(mode='ddp', nodes=4, gpn=4, seed=331, scenario='nic_degraded', factor=0.35, culprit_host=2, culprit_rank=9), "fabric", [8, 9, 10, 11], [2], lost=0.307, note="host 2's NIC flaps (IB async port errors)"),
    S("l_n2", "fabric", dict(mode='fsdp', nodes=4, gpn=4, seed=332, scenario='nic_degraded', factor=0.5, culprit_host=1, culprit_rank=6, warn_kind='completion', nccl='2.18.1'), "fabric", [4, 5, 6, 7], [1], lost=0.1764, note='host 1: IB completion error 12 WARN'),
    S("l_n3", "fabric", dict(mode='tp', nodes=2, gpn=8, seed=333, scenario='nic_degraded', factor=0.5, culprit_host=1, culprit_rank=13, drop_hca=True, nccl='2.20.5', log_layout='host', log_prefix='torchrun'), "fabric", [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.0697, note='host 1: one HCA missing from NET/IB : Using, async port errors'),
    S("l_n4", "fabric", dict(mode='ddp', nodes=3, gpn=8, seed=334, scenario='nic_degraded', factor=0.4, culprit_host=0, culprit_rank=2, log_hosts=[0, 2]), "fabric", [0, 1, 2, 3, 4, 5, 6, 7], [0], lost=0.0632, note='subtle, logs of hosts 0 and 2 only'),
    S("l_n5", "fabric", dict(mode='ddp', nodes=2, gpn=8, seed=335, grad_mb=96.0, scenario='nic_degraded', factor=0.5, culprit_host=1, culprit_rank=12, warn_kind='none', drop_hca=True, nccl='2.17.1'), "fabric", [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.1333, note='host 1: an HCA missing, no WARN at all'),
    S("l_p1", "fabric", dict(mode='ddp', nodes=2, gpn=8, seed=341, scenario='p2p_off', factor=0.1, culprit_host=1), "locality", [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.3321, note='host 1 on SHM (NCCL_P2P_DISABLE echoed)'),
    S("l_p2", "fabric", dict(mode='tp', nodes=4, gpn=4, seed=342, scenario='p2p_off', factor=0.12, culprit_host=2, env_echo=False, nccl='2.18.1', log_layout='host'), "locality", [8, 9, 10, 11], [2], lost=0.4527, note='host 2 on SHM without any env echo'),
    S("l_p3", "fabric", dict(mode='hsdp', nodes=2, gpn=8, seed=343, scenario='p2p_off', factor=0.15, culprit_host=0, subsys='all', nccl='2.20.5'), "locality", [0, 1, 2, 3, 4, 5, 6, 7], [0], lost=0.1633, note='HSDP, host 0 on SHM'),
    S("l_p4", "fabric", dict(mode='fsdp', nodes=4, gpn=4, seed=344, scenario='p2p_off', factor=0.1, culprit_host=3, env_echo=False), "locality", [12, 13, 14, 15], [3], lost=0.3831, note='SHM at 15 GB/s, no env echo'),
    S("l_p5", "fabric", dict(mode='ddp', nodes=4, gpn=8, seed=345, scenario='p2p_off', factor=0.1, culprit_host=1, log_hosts=[1]), "locality", [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.3461, note="32 ranks, only the culprit host's logs"),
    S("l_x1", "fabric", dict(mode='ddp', nodes=4, gpn=4, seed=351, scenario='cross_socket', factor=0.4, culprit_host=1, subsys='all'), "locality", [4, 5, 6, 7], [1], lost=0.2432, note="host 1's NIC across sockets: path SYS, GDR disabled there"),
    S("l_x2", "fabric", dict(mode='fsdp', nodes=2, gpn=8, seed=352, scenario='cross_socket', factor=0.3, culprit_host=0, grad_mb=96.0, nccl='2.18.1'), "locality", [0, 1, 2, 3, 4, 5, 6, 7], [0], lost=0.462, note='host 0 cross-socket, only the missing /GDRDMA on its side shows it'),
    S("l_x3", "fabric", dict(mode='tp', nodes=2, gpn=8, seed=353, scenario='cross_socket', factor=0.5, culprit_host=1, subsys='all', nccl='2.20.5', log_layout='host'), "locality", [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.0696, note='TP+DP, host 1 cross-socket (subtle)'),
    S("l_x4", "fabric", dict(mode='hsdp', nodes=4, gpn=4, seed=354, scenario='cross_socket', factor=0.35, culprit_host=3, subsys='all', nccl='2.17.1', log_hosts=[1, 3]), "locality", [12, 13, 14, 15], [3], lost=0.2368, note='HSDP, logs of hosts 1 and 3 only'),
    S("l_c1", "fabric", dict(mode='ddp', nodes=2, gpn=8, seed=361, scenario='straggler', factor=0.25, culprit_rank=11), "synchronization", [11], [1], lost=0.1807, note='compute straggler, healthy logs'),
    S("l_c2", "fabric", dict(mode='fsdp', nodes=4, gpn=4, seed=362, scenario='straggler', factor=0.12, culprit_rank=6, nccl='2.18.1', log_layout='host'), "synchronization", [6], [1], lost=0.0921, note='subtle straggler'),
    S("l_c3", "fabric", dict(mode='tp', nodes=2, gpn=8, seed=363, scenario='straggler', factor=0.2, culprit_rank=3, nccl='2.20.5', log_hosts=[0]), "synchronization", [3], [0], lost=0.1122, note="TP+DP straggler, only host 0's logs"),
    S("l_c4", "fabric", dict(mode='hsdp', nodes=3, gpn=4, seed=364, scenario='straggler', factor=0.3, culprit_rank=9, naming='rank', with_args=False), "synchronization", [9], [2], lost=0.2106, note='HSDP straggler, rank<N> traces, no metadata'),
]

BY_NAME: dict[str, Spec] = {s.name: s for s in SPECS}
assert len(BY_NAME) == len(SPECS), "duplicate spec names"

# --- moe_sim (simulator #4, README.md): MoE training with expert parallelism, trace-only bundles.
# Host indices count from 0 (hostfmt "moe-node{:02d}" names index 0 "moe-node01"). Truth rules of
# this set: shifting routing imbalance is "none" when it costs under 3 % against balanced routing,
# else "synchronization" without a culprit (job-wide, like jitter); a persistent hot expert is
# "synchronization" with the ranks holding it; a degraded NIC names its host only where the
# traces can tell it apart (its EP group and its EP-replica rings intersect in that host).
import moe_sim  # noqa: E402


@dataclass(frozen=True)
class SimSpec(Spec):
    """A bundle of a simulator whose module has ``Cfg(name=..., **kwargs)`` and
    ``write_bundle(cfg, outdir)`` (``moe_sim``, ``noisy_sim``), by ``generator``."""

    def cfg(self) -> Any:
        return SIMS[self.generator].Cfg(name=self.name, **self.kwargs)

    def write(self, outdir: str | Path) -> dict[str, Any]:
        return SIMS[self.generator].write_bundle(self.cfg(), str(outdir))


SIMS: dict[str, Any] = {"moe": moe_sim}


def M(name: str, kwargs: dict[str, Any], cause: str, ranks: list[int], hosts: list[int], lost: float,
      note: str = "") -> Spec:
    return SimSpec(name, "moe", kwargs, cause, ranks, hosts, lost, note)


MOE_SPECS: list[Spec] = [
    M('mo_h1', {'nodes': 2, 'gpn': 8, 'seed': 401}, 'none', [], [], lost=0.0000, note='2x8, EP over the world'),
    M('mo_h2', {'nodes': 4, 'gpn': 4, 'seed': 402, 'accum': 2, 'prof_per_micro': True, 'new_names': False, 'with_args': False, 'gz': 'all', 'float_ts': False}, 'none', [], [], lost=0.0000, note='4x4, grad accumulation 2 with a ProfilerStep per micro-step, NCCL 2.18 names, no metadata, gzip, integer ts'),
    M('mo_h3', {'nodes': 8, 'gpn': 8, 'layers': 2, 'steps': 5, 'seed': 403, 'gz': 'odd'}, 'none', [], [], lost=0.0000, note='8x8 = 64 ranks, EP over the world, 2 layers, odd ranks gzipped'),
    M('mo_h4', {'nodes': 4, 'gpn': 8, 'ep_hosts': 2, 'seed': 404, 'accum': 2, 'overlap': False, 'float_ts': False}, 'none', [], [], lost=0.0000, note='4x8, two EP groups of 2 hosts, accumulation 2, gradient all-reduce after backward (no overlap)'),
    M('mo_i1', {'nodes': 2, 'gpn': 8, 'scenario': 'imbalance', 'imbalance': 0.3, 'seed': 405}, 'none', [], [], lost=0.0202, note='shifting hot expert (+30 %, a new one every step and layer): loses ~2 % vs balanced routing, below 3 %: none'),
    M('mo_i2', {'nodes': 4, 'gpn': 8, 'ep_hosts': 1, 'scenario': 'imbalance', 'imbalance': 1.0, 'seed': 406}, 'synchronization', [], [], lost=0.1281, note='shifting hot expert (2x, moves every step and layer), EP inside each host: no persistent culprit'),
    M('mo_i3', {'nodes': 6, 'gpn': 4, 'scenario': 'imbalance', 'imbalance': 0.6, 'seed': 407}, 'synchronization', [], [], lost=0.0880, note='6x4, shifting hot expert (1.6x), no persistent culprit'),
    M('mo_x1', {'nodes': 2, 'gpn': 8, 'scenario': 'hot_expert', 'hot_ranks': [5], 'hot_mult': 2.5, 'seed': 411}, 'synchronization', [5], [0], lost=0.3838, note="rank 5's experts get 2.5x the routing share"),
    M('mo_x2', {'nodes': 4, 'gpn': 8, 'ep_hosts': 2, 'scenario': 'hot_expert', 'hot_ranks': [17], 'hot_mult': 1.3, 'seed': 412}, 'synchronization', [17], [2], lost=0.0810, note="subtle: rank 17's experts 1.3x"),
    M('mo_x3', {'nodes': 4, 'gpn': 4, 'scenario': 'hot_expert', 'hot_ranks': [4, 5, 6, 7], 'hot_mult': 2.0, 'seed': 413}, 'synchronization', [4, 5, 6, 7], [1], lost=0.2568, note="moe-node02's four ranks hold the hot experts (2x); split sizes show the extra tokens"),
    M('mo_x4', {'nodes': 2, 'gpn': 8, 'ep_hosts': 1, 'scenario': 'hot_expert', 'hot_ranks': [10], 'hot_mult': 3.0, 'seed': 414, 'with_args': False}, 'synchronization', [10], [1], lost=0.3664, note='EP inside each host, rank 10 hot (3x), no metadata'),
    M('mo_s1', {'nodes': 2, 'gpn': 8, 'scenario': 'straggler', 'culprit_rank': 11, 'factor': 1.3, 'seed': 421}, 'synchronization', [11], [1], lost=0.1104, note='compute straggler 1.3x'),
    M('mo_s2', {'nodes': 4, 'gpn': 8, 'ep_hosts': 2, 'scenario': 'straggler', 'culprit_rank': 20, 'factor': 1.2, 'seed': 422, 'new_names': False}, 'synchronization', [20], [2], lost=0.0577, note='subtle straggler 1.2x (partly masked by routing noise), NCCL 2.18 names'),
    M('mo_s3', {'nodes': 8, 'gpn': 8, 'layers': 2, 'steps': 5, 'scenario': 'straggler', 'culprit_rank': 42, 'factor': 1.5, 'seed': 423, 'gz': 'all'}, 'synchronization', [42], [5], lost=0.1293, note='64 ranks, straggler 1.5x'),
    M('mo_s4', {'nodes': 2, 'gpn': 8, 'ep_hosts': 1, 'scenario': 'straggler', 'culprit_rank': 3, 'factor': 1.2, 'seed': 424, 'accum': 2}, 'synchronization', [3], [0], lost=0.0909, note='EP inside each host, accumulation 2, straggler 1.2x'),
    M('mo_t1', {'nodes': 4, 'gpn': 4, 'scenario': 'host_stall', 'culprit_rank': 6, 'stall_ms': 8, 'seed': 431}, 'synchronization', [6], [1], lost=0.1984, note="rank 6's DataLoader 8 ms late every step"),
    M('mo_t2', {'nodes': 8, 'gpn': 4, 'ep_hosts': 2, 'scenario': 'host_stall', 'culprit_rank': 25, 'stall_ms': 4, 'accum': 2, 'prof_per_micro': True, 'seed': 432, 'new_names': False, 'float_ts': False}, 'synchronization', [25], [6], lost=0.0629, note='subtle: rank 25 stalls 4 ms on the first micro-step only, ProfilerStep per micro-step'),
    M('mo_n1', {'nodes': 4, 'gpn': 8, 'ep_hosts': 2, 'scenario': 'nic_degraded', 'culprit_host': 1, 'factor': 0.4, 'seed': 441}, 'fabric', [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.3163, note="moe-node02's NIC at 40 %: its EP group's all-to-alls and its EP-replica all-reduces are slow, the intersection names it"),
    M('mo_n2', {'nodes': 2, 'gpn': 8, 'scenario': 'nic_degraded', 'culprit_host': 1, 'factor': 0.35, 'seed': 442}, 'fabric', [], [], lost=0.3647, note="moe-node02's NIC at 35 %, but with 2 hosts every inter-host pair touches it: the traces cannot name the host (not scored)"),
    M('mo_n3', {'nodes': 4, 'gpn': 8, 'ep_hosts': 1, 'scenario': 'nic_degraded', 'culprit_host': 2, 'factor': 0.5, 'seed': 443, 'with_args': False}, 'fabric', [], [], lost=0.2416, note="moe-node03's NIC at 50 %, EP inside hosts: only world-spanning rings cross hosts, the host is not identifiable (not scored)"),
    M('mo_n4', {'nodes': 8, 'gpn': 4, 'ep_hosts': 2, 'scenario': 'nic_degraded', 'culprit_host': 5, 'factor': 0.3, 'seed': 444}, 'fabric', [20, 21, 22, 23], [5], lost=0.4916, note="8x4, EP groups of 2 hosts, moe-node06's NIC at 30 %"),
    M('mo_f1', {'nodes': 2, 'gpn': 8, 'scenario': 'fabric', 'factor': 0.5, 'seed': 451}, 'fabric', [], [], lost=0.2359, note='every NIC at 50 %'),
    M('mo_f2', {'nodes': 4, 'gpn': 8, 'ep_hosts': 2, 'scenario': 'fabric', 'factor': 0.8, 'seed': 452}, 'fabric', [], [], lost=0.0723, note='subtle: every NIC at 80 %'),
    M('mo_f3', {'nodes': 4, 'gpn': 8, 'ep_hosts': 1, 'scenario': 'fabric', 'factor': 0.4, 'seed': 453}, 'fabric', [], [], lost=0.3398, note='EP inside hosts, every NIC at 40 % (only gradient rings cross hosts)'),
    M('mo_p1', {'nodes': 2, 'gpn': 8, 'ep_hosts': 1, 'scenario': 'p2p_off', 'culprit_host': 1, 'factor': 0.12, 'seed': 461}, 'locality', [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.3792, note='EP inside each host, moe-node02 on SHM (12 % of NVLink)'),
    M('mo_p2', {'nodes': 4, 'gpn': 8, 'ep_hosts': 1, 'scenario': 'p2p_off', 'culprit_host': 2, 'factor': 0.15, 'seed': 462}, 'locality', [16, 17, 18, 19, 20, 21, 22, 23], [2], lost=0.3022, note='4x8, EP inside hosts, moe-node03 on SHM (15 %)'),
    M('mo_p3', {'nodes': 4, 'gpn': 4, 'ep_hosts': 1, 'scenario': 'p2p_off', 'culprit_host': 0, 'factor': 0.1, 'seed': 463, 'with_args': False, 'gz': 'all'}, 'locality', [0, 1, 2, 3], [0], lost=0.3734, note='4x4, EP inside hosts, moe-node01 on SHM (10 %), no metadata'),
    M('mo_p4', {'nodes': 4, 'gpn': 8, 'ep_hosts': 2, 'scenario': 'p2p_off', 'culprit_host': 1, 'factor': 0.1, 'seed': 464}, 'locality', [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.0798, note='subtle: EP groups of 2 hosts, moe-node02 on SHM (10 %): only its intra-host pairs slow'),
    M('mo_j1', {'nodes': 2, 'gpn': 8, 'scenario': 'jitter', 'jitter_ms': 1.5, 'seed': 471}, 'synchronization', [], [], lost=0.1666, note='job-wide DataLoader jitter (exponential, mean 1.5 ms per rank and micro-step)'),
    M('mo_j2', {'nodes': 8, 'gpn': 8, 'layers': 2, 'steps': 5, 'scenario': 'jitter', 'jitter_ms': 0.4, 'seed': 472, 'gz': 'odd'}, 'synchronization', [], [], lost=0.0830, note='subtle: 64 ranks, jitter mean 0.4 ms'),
]
SPECS += MOE_SPECS
BY_NAME.update({s.name: s for s in MOE_SPECS})
assert len(BY_NAME) == len(SPECS), "duplicate spec names"

# --- noisy_sim (simulator #5, README.md): DDP / FSDP / TP+DP with the nuisances of real clusters
# (GC and DataLoader hiccups on random ranks, a slow first step, heavy-tailed kernels, per-step work
# changes, host clocks, mixed names and gzip, a killed rank; Socket bootstrap, harmless WARNs and
# env echoes in the logs). Host indices count from 0 (hostfmt "gpu-node-{:03d}" names index 0
# "gpu-node-001"). Truth rules of this set: a fault that loses < 3 % against the healthy twin is
# "none"; a synchronization truth names the culprit rank (and its host); a degraded NIC names its host
# only when the bundle holds that host's NCCL log (otherwise every world ring crosses it and the
# traces cannot tell it); P2P off and a cross-socket NIC are "locality" with the host, used only
# where the host can be told (TP groups inside the host, or that host's logs); with two faults the
# truth is the one that loses more alone.
import noisy_sim  # noqa: E402

SIMS["noisy"] = noisy_sim


def N(name: str, kwargs: dict[str, Any], cause: str, ranks: list[int], hosts: list[int], lost: float,
      note: str = "") -> Spec:
    return SimSpec(name, "noisy", kwargs, cause, ranks, hosts, lost, note)


NOISY_SPECS: list[Spec] = [
    N('n5_h1', {'mode': 'ddp', 'nodes': 2, 'gpn': 8, 'seed': 5101}, 'none', [], [], lost=0.0, note='DDP 2x8 H100, 8x400G IB; GC/DataLoader noise, warm-up step, +-8 ms clocks; trace-only'),
    N('n5_h2', {'mode': 'fsdp', 'nodes': 4, 'gpn': 8, 'nics': 4, 'nic_gbps': 200, 'seed': 5102, 'gz': 'all', 'logs': 'all', 'nccl': '2.21.5'}, 'none', [], [], lost=0.0, note='FSDP 4x8 on 4x200G (all-gathers partly exposed, by design); all gzipped; logs of every host'),
    N('n5_h3', {'mode': 'tpdp', 'nodes': 4, 'gpn': 8, 'seed': 5103, 'naming': 'rank', 'clock_ms': 20}, 'none', [], [], lost=0.0, note='TP8 x DP4, rank<N> file names (no host names), +-20 ms clocks; trace-only'),
    N('n5_h4', {'mode': 'ddp', 'nodes': 8, 'gpn': 4, 'gpu': 'A100', 'nics': 4, 'nic_gbps': 200, 'seed': 5104, 'gz': 'odd', 'logs': [0, 2, 5], 'nccl': '2.18.3'}, 'none', [], [], lost=0.0, note='DDP 8x4 A100, logs of 3 of 8 hosts, NCCL 2.18.3, odd ranks gzipped'),
    N('n5_h5', {'mode': 'fsdp', 'nodes': 8, 'gpn': 8, 'layers': 6, 'steps': 6, 'seed': 5105, 'truncate_rank': 37, 'gz': 'some'}, 'none', [], [], lost=0.0, note="FSDP 64 ranks, rank 37's file cut at 70 % (killed job); trace-only"),
    N('n5_h6', {'mode': 'ddp', 'nodes': 4, 'gpn': 4, 'nics': 4, 'nic_gbps': 200, 'seed': 5106, 'gc_prob': 0.04, 'dl_hiccup_prob': 0.02, 'kern_sigma': 0.08, 'tail_prob': 0.006, 'logs': 'all', 'nccl': '2.17.1', 'log_style': 'host'}, 'none', [], [], lost=0.0, note='noisy healthy DDP 4x4: 4 % GC, 2 % DataLoader hiccups per rank-step, kernel sigma 0.08; torchrun-captured logs, NCCL 2.17.1'),
    N('n5_h7', {'mode': 'tpdp', 'nodes': 2, 'gpn': 8, 'seed': 5107, 'clock_ms': 25, 'logs': 'all', 'nccl': '2.19.3'}, 'none', [], [], lost=0.0, note='TP8 x DP2 with logs (NCCL 2.19.3), +-25 ms clocks'),
    N('n5_h8', {'mode': 'ddp', 'nodes': 2, 'gpn': 4, 'gpu': 'A100', 'nics': 2, 'nic_gbps': 100, 'grad_mb': 120, 'seed': 5108, 'naming': 'job'}, 'none', [], [], lost=0.0, note='DDP 2x4 A100 on 2x100G (a slow but healthy fabric), custom file names; trace-only'),
    N('n5_z1', {'mode': 'ddp', 'nodes': 4, 'gpn': 4, 'seed': 5109, 'faults': [{'kind': 'straggler', 'rank': 5, 'slow': 0.02}]}, 'none', [], [], lost=0.0035, note='rank 5 2 % slower: under 3 %, so none; trace-only'),
    N('n5_z2', {'mode': 'ddp', 'nodes': 2, 'gpn': 8, 'seed': 5110, 'logs': 'all', 'faults': [{'kind': 'nic_degraded', 'host': 1, 'factor': 0.8, 'log': 'flap'}]}, 'none', [], [], lost=0.0016, note="host 1's NIC flapping (port error WARNs) at 80 %, hidden under backward: none"),
    N('n5_s1', {'mode': 'ddp', 'nodes': 4, 'gpn': 4, 'seed': 5111, 'truncate_rank': 2, 'truncate_at': 0.75, 'faults': [{'kind': 'straggler', 'rank': 13, 'slow': 0.25}]}, 'synchronization', [13], [3], lost=0.1242, note="compute straggler 1.25x, rank 2's file cut at 75 %; trace-only"),
    N('n5_s2', {'mode': 'fsdp', 'nodes': 2, 'gpn': 8, 'seed': 5112, 'logs': 'all', 'nccl': '2.20.5', 'faults': [{'kind': 'straggler', 'rank': 6, 'slow': 0.12}]}, 'synchronization', [6], [0], lost=0.0945, note='subtle compute straggler 1.12x in FSDP, healthy logs'),
    N('n5_s3', {'mode': 'tpdp', 'nodes': 8, 'gpn': 8, 'layers': 6, 'steps': 6, 'seed': 5113, 'gz': 'all', 'faults': [{'kind': 'straggler', 'rank': 42, 'slow': 0.2}]}, 'synchronization', [42], [5], lost=0.0435, note='64 ranks TP8 x DP8, straggler 1.2x: its TP peers wait every layer'),
    N('n5_t1', {'mode': 'ddp', 'nodes': 4, 'gpn': 4, 'seed': 5114, 'logs': [0, 2], 'faults': [{'kind': 'host_stall', 'rank': 9, 'ms': 25}]}, 'synchronization', [9], [2], lost=0.0932, note="rank 9's DataLoader 25 ms late every step; logs of hosts 0 and 2"),
    N('n5_t2', {'mode': 'fsdp', 'nodes': 4, 'gpn': 8, 'seed': 5115, 'naming': 'rank', 'faults': [{'kind': 'host_stall', 'rank': 3, 'ms': 10}]}, 'synchronization', [3], [0], lost=0.0412, note='subtle host stall 10 ms per step, rank<N> names; trace-only'),
    N('n5_i1', {'mode': 'ddp', 'nodes': 4, 'gpn': 8, 'seed': 5116, 'faults': [{'kind': 'intermittent', 'rank': 20, 'ms': 120, 'steps': [2, 5]}]}, 'synchronization', [20], [2], lost=0.1058, note='rank 20 stalls 120 ms mid-forward in steps 2 and 5 (GC noise elsewhere); trace-only'),
    N('n5_i2', {'mode': 'fsdp', 'nodes': 2, 'gpn': 8, 'seed': 5117, 'clock_ms': 20, 'logs': 'all', 'nccl': '2.18.3', 'faults': [{'kind': 'intermittent', 'rank': 7, 'ms': 60, 'steps': [1, 3, 6]}]}, 'synchronization', [7], [0], lost=0.1103, note='rank 7 stalls 60 ms in 3 of 8 steps, +-20 ms clocks, logs'),
    N('n5_j1', {'mode': 'ddp', 'nodes': 4, 'gpn': 8, 'seed': 5118, 'faults': [{'kind': 'jitter', 'ms': 4}]}, 'synchronization', [], [], lost=0.0449, note='job-wide CPU jitter (exp. mean 4 ms DataLoader + 2 ms mid-forward per rank and step); trace-only'),
    N('n5_j2', {'mode': 'fsdp', 'nodes': 8, 'gpn': 4, 'seed': 5119, 'gz': 'some', 'logs': 'all', 'faults': [{'kind': 'jitter', 'ms': 2.5}]}, 'synchronization', [], [], lost=0.0593, note='job-wide jitter mean 2.5 ms, FSDP 8x4, logs'),
    N('n5_f1', {'mode': 'ddp', 'nodes': 2, 'gpn': 8, 'seed': 5120, 'logs': 'all', 'faults': [{'kind': 'socket', 'gbps': 4.5}]}, 'fabric', [], [], lost=0.8445, note='NCCL_IB_DISABLE=1: Socket at 4.5 GB/s per host, logs'),
    N('n5_f2', {'mode': 'fsdp', 'nodes': 4, 'gpn': 4, 'gpu': 'A100', 'nics': 4, 'nic_gbps': 200, 'seed': 5121, 'faults': [{'kind': 'socket', 'gbps': 6.0}]}, 'fabric', [], [], lost=0.421, note='Socket fallback 6 GB/s, FSDP 4x4 A100; trace-only'),
    N('n5_n1', {'mode': 'ddp', 'nodes': 4, 'gpn': 4, 'nics': 4, 'nic_gbps': 200, 'seed': 5122, 'logs': 'all', 'faults': [{'kind': 'nic_degraded', 'host': 2, 'factor': 0.3, 'log': 'flap'}]}, 'fabric', [8, 9, 10, 11], [2], lost=0.2908, note="host 2's NIC flapping at 30 %: port error WARNs there"),
    N('n5_n2', {'mode': 'fsdp', 'nodes': 4, 'gpn': 8, 'nics': 2, 'nic_gbps': 200, 'seed': 5123, 'logs': [1, 3], 'nccl': '2.19.3', 'faults': [{'kind': 'nic_degraded', 'host': 1, 'factor': 0.5, 'log': 'down'}]}, 'fabric', [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.1332, note="one of host 1's two NICs down (missing from NET/IB : Using), logs of hosts 1 and 3"),
    N('n5_n3', {'mode': 'ddp', 'nodes': 4, 'gpn': 4, 'nics': 4, 'nic_gbps': 200, 'seed': 5124, 'faults': [{'kind': 'nic_degraded', 'host': 0, 'factor': 0.4}]}, 'fabric', [], [], lost=0.1848, note="host 0's NIC at 40 %, trace-only: every world ring crosses it, host not identifiable (not scored)"),
    N('n5_p1', {'mode': 'tpdp', 'nodes': 4, 'gpn': 8, 'seed': 5125, 'faults': [{'kind': 'p2p_off', 'host': 1}]}, 'locality', [8, 9, 10, 11, 12, 13, 14, 15], [1], lost=0.5418, note='P2P off on host 1 (SHM 22 GB/s): its TP all-reduces slow, its ranks late at DP; trace-only'),
    N('n5_p2', {'mode': 'ddp', 'nodes': 4, 'gpn': 8, 'seed': 5126, 'logs': 'all', 'nccl': '2.19.3', 'faults': [{'kind': 'p2p_off', 'host': 3}]}, 'locality', [24, 25, 26, 27, 28, 29, 30, 31], [3], lost=0.4204, note="P2P off on host 3: the world ring runs at SHM speed, SHM lines only in host 3's logs"),
    N('n5_x1', {'mode': 'ddp', 'nodes': 4, 'gpn': 4, 'nics': 4, 'nic_gbps': 200, 'seed': 5127, 'logs': 'all', 'faults': [{'kind': 'xsocket', 'host': 1, 'factor': 0.45}]}, 'locality', [4, 5, 6, 7], [1], lost=0.1149, note="host 1's GPUs reach their NICs across sockets (SYS, GDR off): x0.45 there"),
    N('n5_x2', {'mode': 'fsdp', 'nodes': 4, 'gpn': 8, 'nics': 2, 'nic_gbps': 200, 'seed': 5128, 'logs': [2, 3], 'nccl': '2.20.5', 'log_style': 'host', 'faults': [{'kind': 'xsocket', 'host': 2, 'factor': 0.4}]}, 'locality', [16, 17, 18, 19, 20, 21, 22, 23], [2], lost=0.2746, note='host 2 cross-socket NIC (x0.4), torchrun-captured logs of hosts 2 and 3'),
    N('n5_d1', {'mode': 'ddp', 'nodes': 4, 'gpn': 4, 'nics': 4, 'nic_gbps': 200, 'seed': 5129, 'logs': 'all', 'faults': [{'kind': 'straggler', 'rank': 5, 'slow': 0.3}, {'kind': 'nic_degraded', 'host': 3, 'factor': 0.7, 'log': 'flap'}]}, 'synchronization', [5], [1], lost=0.1879, note='two faults: straggler 1.3x (dominant) + host 3 NIC at 70 % with WARNs'),
    N('n5_d2', {'mode': 'fsdp', 'nodes': 2, 'gpn': 8, 'seed': 5130, 'faults': [{'kind': 'socket', 'gbps': 8.0}, {'kind': 'host_stall', 'rank': 2, 'ms': 6}]}, 'fabric', [], [], lost=0.6251, note='two faults: Socket 8 GB/s (dominant) + rank 2 DataLoader 6 ms late; trace-only'),
]
SPECS += NOISY_SPECS
BY_NAME.update({s.name: s for s in NOISY_SPECS})
assert len(BY_NAME) == len(SPECS), "duplicate spec names"
