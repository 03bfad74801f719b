"""Fixtures for the rule tests: small generated jobs, each with one known cause, ingested once.

Each fixture is a 2-4 host job written by ``stallscope.samples`` (which knows nothing about the
rules) with its ground truth. A few are then altered the way real bundles go wrong: a rank's
trace left out, a corrupt file added, GPUDirect RDMA absent from every host's NCCL log, traces
of two different runs mixed in one bundle.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stallscope import api
from stallscope.rules.context import Context
from stallscope.rules.engine import postmortem
from stallscope.rules.registry import RULES
from stallscope.rules.base import Finding
from stallscope.samples import generate
from stallscope.store.queries import Store

BASE: dict[str, Any] = dict(nodes=2, gpus=4, steps=5, detail="lean", noise="low", truncate=0, drop=0, windows=0, step_marks=True, clock_offset_ms=30.0)

#: name -> (scenario, seed, knobs); the seeds are fixed so every run sees the same jobs
JOBS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "healthy": ("healthy", 11, dict(logs="all", parallelism="ddp", archive="dir")),
    "healthy_tp": ("healthy", 12, dict(logs="all", parallelism="tp_dp")),
    "imbalanced": ("healthy_imbalanced", 13, dict(logs="all")),
    "socket_logs": ("socket_fallback", 14, dict(logs="all")),
    # older traces: no collective metadata, so no message sizes and no bandwidth to measure
    "socket_nosizes": ("socket_fallback", 33, dict(logs="all", metadata=False, torch_variant="kineto_2022")),
    "degraded_logs": ("degraded_nic", 16, dict(logs="all", severity="severe", nodes=3)),
    "degraded_nologs": ("degraded_nic", 17, dict(logs="none", severity="severe", nodes=3)),
    # no logs, H100 hosts with 8 x 400 Gb/s: one host's NICs degraded to ~41 GB/s per host, above
    # any no-log floor, while the job spends ~3/4 of its time in exposed inter-node collectives
    "degraded_fast_nologs": ("degraded_nic", 70, dict(logs="none", gpu="H100", severity="severe", nodes=3)),
    # two hosts only: NCCL's lower graph bandwidth on one of them, corroborated by the transfers
    "degraded_2hosts": ("degraded_nic", 31, dict(logs="all", severity="moderate", nodes=2, parallelism="fsdp")),
    # two hosts, DDP: NCCL's graph search gives one host half the inter-node bandwidth for the same
    # communicator, while the transfers run above what the other host's graph promises (so they
    # cannot corroborate): the same communicator's search is the evidence
    "degraded_2hosts_graph": ("degraded_nic", 67, dict(logs="all", severity="moderate", nodes=2, gpus=8, parallelism="ddp",
                                                       graph_subsys=True)),
    # only the healthy host's NCCL log, with its graph search (24 GB/s, 20.4 expected): the transfers
    # at 9.0 GB/s per host are far below it, though above 70 % of the 10 GB/s floor of the one NIC
    # it lists (like seed 22000 #0096)
    "degraded_onegraph": ("degraded_nic", 6, dict(logs="some", graph_subsys=True, severity="moderate", metadata=True,
                                                  torch_variant="kineto_2024")),
    "healthy_onegraph": ("healthy", 2, dict(logs="some", graph_subsys=True, metadata=True, torch_variant="kineto_2024")),
    # only the culprit host's NCCL log, with port errors, and no message sizes in the traces: the
    # log names the host, the traces cannot measure the cost
    # seed 24000 #0036: one host's port at 65 % of its peers' speed, which NCCL's graph search
    # rounds to half their bandwidth; the replay must not speed transfers past the healthy graph
    "degraded_partial_graph": ("degraded_nic", 2400072036, dict(
        nodes=4, gpus=4, steps=6, parallelism="fsdp", severity="moderate", noise="medium", nccl_version="2.17.1",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="rank", gzip=False, archive="zip", logs="some",
        log_style="torchrun", red_herrings=True, graph_subsys=True, culprit_rank=8, culprit_host=2)),
    "degraded_onelog": ("degraded_nic", 43, dict(logs="some", severity="severe", metadata=False, torch_variant="kineto_2022",
                                                 nodes=2, archive="dir")),
    # one host's log, no hardware events in it: nothing to blame
    "healthy_onelog": ("healthy", 11, dict(logs="some", parallelism="ddp")),
    "compute": ("compute_straggler", 18, dict(logs="none", severity="moderate")),
    # a straggler inside a tensor-parallel group: its whole host arrives late at the data-parallel
    # all-reduce because its TP peers waited for it
    "compute_tp": ("compute_straggler", 32, dict(logs="none", severity="subtle", parallelism="tp_dp", nodes=4, gpus=8,
                                                 detail="sparse", noise="medium", drift=True, steps=8)),
    "hoststall": ("host_stall_straggler", 19, dict(logs="none", severity="moderate")),
    "intermittent": ("intermittent_straggler", 20, dict(logs="none", steps=8, severity="moderate")),
    # two ranks on different hosts stall in the same step: each alone explains nothing (the step
    # still waits for the other), together they explain the step
    "intermittent_pair": ("intermittent_straggler", 53, dict(logs="none", severity="moderate", parallelism="tp_dp",
                                                             nodes=3, steps=2)),
    # seed 33000 #0135: GC pauses on two ranks of one tensor-parallel host, late in turns (rank 9
    # in four steps, rank 10 in three): the host's replay beat either rank alone, while both
    # together, the only origins of its lateness, recover as much
    "intermittent_two_tp": ("intermittent_straggler", 3300099135, dict(
        nodes=6, gpus=4, steps=8, parallelism="tp_dp", severity="subtle", noise="low", nccl_version="2.20.5",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="rank", gzip=False, archive="dir", logs="some",
        log_style="debug_file", detail="lean", clock_offset_ms=5.0, red_herrings=True, culprit_rank=9, culprit_host=2)),
    # seed 36000 #0184: HSDP without collective metadata, rank 9's GC pauses in three steps of six
    # delay its host's shard-group all-gathers, which share one NCCL stream id with the other
    # hosts' and end in lockstep with them otherwise: the groups must be told apart by the step
    # where the offset jumps, or host 2 reads as late together (LOC001) instead of rank 9 (SYN002)
    "intermittent_hsdp_unsized": ("intermittent_straggler", 3600108184, dict(
        nodes=4, gpus=4, steps=6, parallelism="hsdp", severity="subtle", noise="low", nccl_version="2.12.12",
        torch_variant="kineto_2022", metadata=False, seq=False, naming="arbitrary", gzip=True, archive="tar.gz",
        logs="none", log_style="debug_file", detail="lean", clock_offset_ms=80.0, drift=True, red_herrings=True,
        graph_subsys=True, culprit_rank=9, culprit_host=2)),
    # seed 37000 #0153: DataLoader stalls of ranks 17 and 20 (one FSDP host) in 7 of 10 steps of a
    # noisy 64-rank HSDP job; the pair replays for 2.9 % (2.7 % planted), a hair under half of the
    # jitter what-if (5.9 %), which is itself under the noise floor (9.2 %)
    "intermittent_pair_under_floor": ("intermittent_straggler", 3700111153, dict(
        nodes=8, gpus=8, steps=10, parallelism="hsdp", severity="subtle", noise="high", nccl_version="2.20.5",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="tensorboard", gzip=False, archive="tar.gz",
        logs="none", log_style="torchrun", detail="sparse", clock_offset_ms=30.0, drift=True, red_herrings=False,
        graph_subsys=True, culprit_rank=17, culprit_host=2)),
    # seed 34000 #0122: a subtle compute straggler (rank 6) of an HSDP host under heavy noise; its
    # host-mate 7's own work grew a little too, and the host's replay gains 12.8 % (2.4 % planted)
    "compute_inside_noisy": ("compute_straggler", 3400102122, dict(
        nodes=4, gpus=4, steps=4, parallelism="hsdp", severity="subtle", noise="high", nccl_version="2.10.3",
        torch_variant="kineto_2022", metadata=False, seq=False, naming="arbitrary", gzip=False, archive="dir", logs="none",
        log_style="debug_file", detail="lean", clock_offset_ms=30.0, drift=False, red_herrings=True, graph_subsys=False,
        culprit_rank=6, culprit_host=1)),
    # seed 34000 #0014: GC pauses of ~25 ms on ranks 28 and 30 of one FSDP host in 5 of 10 steps, under
    # heavy noise; the typical rank steady, so the jitter what-if's gain is noise (4.2 %) plus theirs (3.3 %)
    "intermittent_pair_noisy": ("intermittent_straggler", 3400102014, dict(
        nodes=8, gpus=4, steps=10, parallelism="fsdp", severity="subtle", noise="high", nccl_version="2.20.5",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="tensorboard", gzip=False, archive="dir", logs="none",
        log_style="torchrun", detail="lean", clock_offset_ms=80.0, drift=True, red_herrings=True, graph_subsys=True,
        culprit_rank=28, culprit_host=7)),
    # seed 35000 #0007: subtle jitter on 8 FSDP ranks; its replay gains 1.9 % (2.6 % planted), under
    # the noise floor of 8 ranks (3.3 %), while the typical rank's host-side time varies twice as much
    # as any healthy job's: the floor's healthy share is half of it
    "jitter_subtle": ("jitter_amplification", 3500105007, dict(
        nodes=2, gpus=4, steps=8, parallelism="fsdp", severity="subtle", noise="low", nccl_version="2.24.3",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="arbitrary", gzip=True, archive="dir", logs="none",
        log_style="debug_file", detail="full", clock_offset_ms=0.0, drift=False, red_herrings=True, graph_subsys=True,
        culprit_rank=2, culprit_host=0)),
    # seed 38000 #0076: subtle jitter on all 16 DDP ranks of two hosts; the origins of lateness are
    # four ranks of one host and three of the other, and the first host's four together replay for
    # 2.9 % of a 5.4 % jitter what-if (6.2 % planted)
    "jitter_both_hosts": ("jitter_amplification", 3800114076, dict(
        nodes=2, gpus=8, steps=6, parallelism="ddp", severity="subtle", noise="medium", nccl_version="2.19.3",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="tensorboard", gzip=True, archive="tar.gz",
        logs="some", log_style="torchrun", detail="lean", clock_offset_ms=80.0, drift=False, red_herrings=True,
        graph_subsys=True, culprit_rank=0, culprit_host=0)),
    # seed 39000 #0048: moderate jitter on 16 HSDP ranks of two hosts over 3 steps (lognormal
    # delays); ranks 0 and 1 drew the largest, once each, and replay for 5.1 % of a 9.3 % what-if
    "jitter_tail_hsdp": ("jitter_amplification", 3900117048, dict(
        nodes=2, gpus=8, steps=3, parallelism="hsdp", severity="moderate", noise="medium", nccl_version="2.18.6",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="tensorboard", gzip=True, archive="dir",
        logs="some", log_style="debug_file", detail="lean", clock_offset_ms=0.0, drift=False, red_herrings=False,
        graph_subsys=True, step_marks=False, culprit_rank=2, culprit_host=0)),
    # seed 40000 #0198: subtle jitter on 12 ranks of three 4-GPU tensor-parallel hosts over 3 steps;
    # rank 11's and rank 9's DataLoader delays (6.5 and 8.1 ms) made their host the latest in two steps
    "jitter_tp_hosts_short": ("jitter_amplification", 4000120198, dict(
        nodes=3, gpus=4, steps=3, parallelism="tp_dp", severity="subtle", noise="high", nccl_version="2.20.5",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="rank", gzip=True, archive="tar.gz",
        logs="none", log_style="debug_file", detail="lean", clock_offset_ms=30.0, drift=False, red_herrings=True,
        graph_subsys=True, culprit_rank=0, culprit_host=0)),
    # seed 40000 #0050 without its logs: a socket fallback under a 2-stage pipeline of two 4-GPU
    # hosts, rank 5's trace lost (its partner rank 1's sends and receives have one end recorded)
    "socket_pipeline_lost_rank": ("socket_fallback", 4000120050, dict(
        nodes=2, gpus=4, steps=6, parallelism="pipeline", severity="moderate", noise="low", nccl_version="2.21.5",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="tensorboard", gzip=False, archive="tar.gz",
        logs="none", log_style="debug_file", detail="full", clock_offset_ms=30.0, drift=True, red_herrings=False,
        graph_subsys=True, drop=1, culprit_rank=3, culprit_host=0)),
    # seed 37000 #0145: a severe compute straggler (rank 20) among 32 HSDP ranks that jitter, 3 steps:
    # the typical rank varies, and rank 20 does more work than its peers in every step
    "compute_in_jitter_short": ("two_faults", 3700111145, dict(
        nodes=4, gpus=8, steps=3, parallelism="hsdp", severity="severe", noise="low", nccl_version="2.18.6",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="tensorboard", gzip=False, archive="tar.gz",
        logs="none", log_style="debug_file", detail="lean", clock_offset_ms=80.0, drift=False, red_herrings=True,
        graph_subsys=False, culprit_rank=20, culprit_host=2, primary="compute_straggler",
        secondary="jitter_amplification")),
    # seed 38000 #0118: DataLoader stalls of 167 and 124 ms on ranks 31 and 34 (two pipeline stages)
    # in the same step of a 64-rank job: rank 34's hides behind rank 31's (alone it replays for
    # nothing, with rank 31 for 1.7 % more: 7.7 % in all, as planted)
    "intermittent_hidden_pipeline": ("intermittent_straggler", 3800114118, dict(
        nodes=8, gpus=8, steps=3, parallelism="pipeline", severity="subtle", noise="medium", nccl_version="2.17.1",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="arbitrary", gzip=True, archive="tar.gz",
        logs="some", log_style="debug_file", detail="sparse", clock_offset_ms=80.0, drift=False, red_herrings=True,
        graph_subsys=False, windows=1, culprit_rank=34, culprit_host=4)),
    # seed 39000 #0014 with rank 4's trace cut short: intermittent stragglers 1 and 5 of a TP+DP
    # job, late together in two steps and apart in five (rank 5 alone 14.7 %, rank 1 alone 5.9 %,
    # both 25.3 %): rank 1 joins by what it adds, though more than half of it shows alone
    "intermittent_pair_cut": ("intermittent_straggler", 3900117014, dict(
        nodes=3, gpus=4, steps=10, parallelism="tp_dp", severity="severe", noise="medium", nccl_version="2.18.6",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="tensorboard", gzip=True, archive="dir",
        logs="all", log_style="torchrun", detail="lean", clock_offset_ms=80.0, drift=False, red_herrings=True,
        graph_subsys=False, truncate=1, culprit_rank=1, culprit_host=0)),
    "jitter": ("jitter_amplification", 21, dict(logs="none", severity="moderate", steps=8)),
    # jitter in a TP+DP job: the groups' medians vary from step to step too; within-group medians
    # alone leave that variation (3-4 % here, under the noise floor)
    "jitter_tp": ("jitter_amplification", 41, dict(logs="none", severity="moderate", parallelism="tp_dp", nodes=4,
                                                   steps=10, noise="medium")),
    "p2p_logs": ("p2p_disabled_one_host", 22, dict(logs="all", parallelism="tp_dp")),
    "p2p_nologs": ("p2p_disabled_one_host", 23, dict(logs="none", parallelism="tp_dp")),
    # P2P off on every host (a job-wide NCCL_P2P_DISABLE): no host stands apart from its peers;
    # the logs say SHM everywhere, the traces that NVLink boards move their TP traffic at SHM speed
    "p2p_job_logs": ("p2p_disabled_one_host", 5, dict(logs="all", parallelism="tp_dp", p2p_hosts="all")),
    "p2p_job_nologs": ("p2p_disabled_one_host", 5, dict(logs="none", parallelism="hsdp", nodes=3, p2p_hosts="all")),
    # one 8-GPU host, nothing to compare with but what its NVLink board gives
    "p2p_one_node": ("p2p_disabled_one_host", 3, dict(logs="none", parallelism="tp_dp", nodes=1, gpus=8, p2p_hosts="all")),
    # flat DDP: only the world's rings cross the SHM hops, hidden under backward (~2 %): the logs'
    # setting is reported, low
    "p2p_job_ddp": ("p2p_disabled_one_host", 5, dict(logs="all", parallelism="ddp", gpus=8, p2p_hosts="all")),
    "healthy_one_node": ("healthy", 3, dict(logs="none", parallelism="tp_dp", nodes=1, gpus=8)),
    # every log on SHM, FSDP over the world, no message sizes: the rings' SHM hops hold a job
    # that waits on its inter-node collectives (61 % lost); FAB001's network-bound reading yields
    "p2p_job_unsized": ("p2p_disabled_one_host", 11, dict(logs="all", parallelism="fsdp", nodes=3, metadata=False,
                                                         torch_variant="kineto_2022", p2p_hosts="all")),
    # only the culprit's log, on SHM without the setting echoed: on an NVLink board SHM is a fault
    "p2p_lone_nvlink": ("p2p_disabled_one_host", 38, dict(logs="some", parallelism="tp_dp", culprit_host=0)),
    "xsock_logs": ("cross_socket_nic_one_host", 24, dict(logs="all", graph_subsys=True, severity="moderate")),
    "xsock_nologs": ("cross_socket_nic_one_host", 25, dict(logs="none", severity="moderate", nodes=3)),
    # subtle: the host's ranks are late in every step, by less than the job's jitter what-if recovers
    "xsock_subtle": ("cross_socket_nic_one_host", 40, dict(logs="none", severity="subtle", nodes=4, parallelism="fsdp",
                                                           noise="medium", steps=6)),
    # subtle, noisy, 3 steps: the host's 4 ranks are late in every step, two of them replayed alone
    # recover over half of what the host does, and each of the host's ranks' own work grew (no one
    # of them stands out as where the lateness starts)
    "xsock_minority": ("cross_socket_nic_one_host", 72, dict(logs="none", severity="subtle", nodes=3, parallelism="ddp",
                                                             noise="high", steps=3)),
    # TP+DP on two hosts, no logs: the cross-socket host's slow NIC path halves the one link both
    # hosts share, so it is late by little; only its CPU-side stalls set it apart (seed 21000 #0009)
    "xsock_2hosts": ("cross_socket_nic_one_host", 92, dict(logs="none", severity="moderate", gpus=8, parallelism="tp_dp")),
    # no logs, FSDP on H100s: the host whose GPUs and NICs sit across sockets is late in every step
    # and the job is network-bound (inter-node collectives exposed > half the time)
    "xsock_bound": ("cross_socket_nic_one_host", 83, dict(logs="none", gpu="H100", severity="moderate", nodes=3,
                                                          parallelism="fsdp")),
    # TP+DP, noisy, 3 steps: every rank of the cross-socket host stalls on its CPU; one of them is
    # the last at the host's tensor-parallel collectives, but the others' own work grew too, so
    # it is the last of a slow host, not a straggler inside it (seed 20000 #0134)
    "xsock_tp_inside": ("cross_socket_nic_one_host", 86, dict(logs="none", severity="severe", nodes=4, gpus=4, steps=3,
                                                              parallelism="tp_dp", noise="high")),
    # TP+DP 8x4, 3 steps: rank 10 stalls 17 ms on its DataLoader at the start of the first step;
    # the data-parallel all-reduces queue behind each other on their stream while tensor-parallel
    # ones run on, one of them ending within microseconds of a queued start (seed 42000 #0138)
    "intermittent_tp_queued": ("intermittent_straggler", 4200126138, dict(
        nodes=8, gpus=4, steps=3, parallelism="tp_dp", severity="subtle", noise="medium", nccl_version="2.17.1",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="tensorboard", gzip=False, archive="dir",
        logs="none", log_style="debug_file", detail="lean", clock_offset_ms=30.0, drift=False, red_herrings=True,
        graph_subsys=False, truncate=0, culprit_rank=10, culprit_host=2)),
    # FSDP 6x8, noisy: compute straggler 25; replaying it exposes rank 28, next in two of its
    # steps, whose noise adds 15 % of its gain (seed 42000 #0156)
    "compute_noise_exposed": ("compute_straggler", 4200126156, dict(
        nodes=6, gpus=8, steps=8, parallelism="fsdp", severity="subtle", noise="high", nccl_version="2.21.5",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="arbitrary", gzip=True, archive="dir",
        logs="none", log_style="debug_file", detail="sparse", clock_offset_ms=80.0, drift=False, red_herrings=True,
        graph_subsys=False, truncate=0, culprit_rank=25, culprit_host=3)),
    # DDP 4x8, noisy, 3 steps: every rank of the cross-socket host late in every step, 6 of 8 of
    # them origins; its three latest ranks recover about what the host does (seed 42000 #0207)
    # TP+DP 8x4 without group metadata (kineto 2022): the tensor-parallel pairs share one stream
    # id and run in lockstep; the cross-socket host ip-10-0-99-44 is 15 ms late in every step, with
    # an intermittent straggler beside it (seed 43000 #0102)
    "xsock_lockstep_pairs": ("two_faults", 4300129102, dict(
        nodes=8, gpus=4, steps=6, parallelism="tp_dp", severity="subtle", noise="low", nccl_version="2.14.3",
        torch_variant="kineto_2022", metadata=False, seq=False, naming="rank", gzip=True, archive="dir", logs="some",
        log_style="debug_file", detail="lean", clock_offset_ms=5.0, drift=True, red_herrings=True, graph_subsys=True,
        truncate=0, culprit_rank=10, culprit_host=2, primary="cross_socket_nic_one_host", secondary="intermittent_straggler")),
    # HSDP 4x4, 2 steps, jitter on every rank (dataloader pauses of 1-14 ms): one host ~9 ms late in
    # one step. The other hosts' reduce-scatters, measured from all-reduces that ended late waiting
    # for it, leave 1.5 ms of their 12 ms layers: taken as its pace they replayed the host at 10.4 %
    # of the job (seed 43000 #0181)
    "jitter_hsdp_host_residue": ("jitter_amplification", 4300129181, dict(
        nodes=4, gpus=4, steps=2, parallelism="hsdp", severity="moderate", noise="medium", nccl_version="2.14.3",
        torch_variant="kineto_2022", metadata=False, seq=False, naming="arbitrary", gzip=False, archive="dir", logs="none",
        log_style="debug_file", detail="lean", clock_offset_ms=5.0, drift=False, red_herrings=True, graph_subsys=False,
        truncate=0, culprit_rank=15, culprit_host=3)),
    "xsock_latest_three": ("cross_socket_nic_one_host", 4200126207, dict(
        nodes=4, gpus=8, steps=3, parallelism="ddp", severity="subtle", noise="high", nccl_version="2.21.5",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="tensorboard", gzip=True, archive="dir",
        logs="some", log_style="debug_file", detail="lean", clock_offset_ms=0.0, drift=False, red_herrings=True,
        graph_subsys=False, truncate=0, culprit_rank=30, culprit_host=3)),
    # pipeline stages on different hosts: the inter-node traffic is send/recv pairs, not collectives
    "socket_pipeline": ("socket_fallback", 61, dict(logs="none", parallelism="pipeline", severity="severe")),
    "healthy_pipeline": ("healthy", 62, dict(logs="none", parallelism="pipeline")),
    # activations of 0.65 MiB: nothing crosses nodes in bandwidth-bound messages, yet each takes
    # milliseconds beyond any latency over TCP (seed 21000 #0018, #0172)
    "socket_pipeline_small": ("socket_fallback", 125, dict(logs="none", parallelism="pipeline", severity="severe",
                                                          metadata=True, torch_variant="kineto_2024")),
    # a pipeline without message sizes: network-bound by the time its pairs take once both sides
    # are there (seed 21000 #0093, #0195); the healthy one spends a few percent there
    "socket_pipeline_unsized": ("socket_fallback", 101, dict(logs="none", parallelism="pipeline", severity="severe",
                                                            metadata=False, torch_variant="kineto_2022")),
    # seed 34000 #0036: TCP sockets at 1.5 GB/s under a 4-stage pipeline, no sizes: its pairs take
    # 39 % of the time once both sides are there, under the collectives' bar of a half
    "socket_pipeline_moderate": ("socket_fallback", 3400102036, dict(
        nodes=4, gpus=4, steps=6, parallelism="pipeline", severity="moderate", noise="low", nccl_version="2.19.3",
        torch_variant="kineto_2024", metadata=False, seq=False, naming="tensorboard", gzip=True, archive="dir", logs="none",
        log_style="debug_file", detail="lean", clock_offset_ms=80.0, red_herrings=False, graph_subsys=True,
        culprit_rank=9, culprit_host=2)),
    "healthy_pipeline_unsized": ("healthy", 62, dict(logs="none", parallelism="pipeline", metadata=False,
                                                     torch_variant="kineto_2022")),
    # TCP sockets at 11 GB/s per host on H100s: above the 100 Gb/s floor (7); without logs, what
    # one healthy 100 Gb/s NIC gives
    "socket_h100": ("socket_fallback", 63, dict(logs="none", gpu="H100", magnitude=11.0)),
    # TCP sockets at 20 GB/s per host on H100s, whose NICs would have carried 2-9x that, and a 3 %
    # host-stall straggler: one 200 Gb/s NIC per host (the floor) would gain nothing, so only the
    # middle of the bracket ranks the proven socket fallback above the straggler
    "socket_fast_two": ("two_faults", 64, dict(logs="all", primary="socket_fallback", secondary="host_stall_straggler",
                                               gpu="H100", severity="moderate", nodes=4)),
    # seed 36000 #0188: DDP on 4 A100 hosts, NCCL_NET=Socket moving 20 GB/s per host (logs from 3 of
    # 4 hosts) and a 3 % host-stall straggler: TCP beat one 100 Gb/s NIC, so RDMA over those NICs is
    # bracketed from the sockets' own speed (the floor NIC gave the fallback 0.6 %, under the straggler)
    "socket_beats_floor": ("two_faults", 3600108188, dict(
        nodes=4, gpus=4, steps=10, parallelism="ddp", severity="moderate", noise="medium", nccl_version="2.21.5",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="arbitrary", gzip=True, archive="dir", logs="some",
        log_style="torchrun", detail="lean", clock_offset_ms=80.0, drift=False, red_herrings=True, graph_subsys=False,
        culprit_rank=6, culprit_host=1, primary="socket_fallback", secondary="host_stall_straggler")),
    # seed 36000 #0020: DDP on 6 hosts, 2 steps, node-03's NIC failing transfers (20 WARNs in its log;
    # 26 % lost) under a 4 % intermittent straggler pair: every ring crosses node-03, so the traces
    # cannot measure the link; its replay at twice the inter-node speed orders it first
    "degraded_warned_two": ("two_faults", 3600108020, dict(
        nodes=6, gpus=4, steps=2, parallelism="ddp", severity="moderate", noise="medium", nccl_version="2.17.1",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="rank", gzip=True, archive="dir", logs="all",
        log_style="debug_file", detail="lean", clock_offset_ms=80.0, drift=False, red_herrings=True, graph_subsys=False,
        drop=1, culprit_rank=12, culprit_host=3, primary="degraded_nic", secondary="intermittent_straggler")),
    # no logs, no message sizes: no bandwidth to measure, only the exposed inter-node time
    "socket_unsized": ("socket_fallback", 65, dict(logs="none", metadata=False, torch_variant="kineto_2022", severity="severe")),
    "healthy_unsized": ("healthy", 66, dict(logs="none", metadata=False, torch_variant="kineto_2022", parallelism="ddp")),
    # HSDP, 4 steps: one 0.58 s DataLoader stall of rank 1 in one step. Its shard group's next
    # all-gather, queued behind the one rank 1 held up, starts 3 µs before that one ends on the
    # waiting ranks (seed 22000 #0189): the replay must anchor it there, not on the step before
    "oneoff_hsdp": ("intermittent_straggler", 2200066189,
                    dict(logs="none", parallelism="hsdp", severity="severe", steps=4, detail="full", clock_offset_ms=0.0,
                         drift=True, torch_variant="kineto_2025", nccl_version="2.24.3", culprit_rank=1, culprit_host=0)),
    # 6-stage pipeline, 4 replicas: rank 4 (stage 1 of replica 0) stalls on the host in most
    # steps; replica 0's last stage (rank 20) is late at its stage's all-reduce every step for
    # it, and the replay credits it with as much (seed 23000 #0162): held up, not a culprit
    "held_up_pipeline": ("host_stall_straggler", 2300069162,
                         dict(logs="none", parallelism="pipeline", nodes=6, gpus=4, steps=10, severity="subtle", noise="low",
                              nccl_version="2.20.5", torch_variant="kineto_2025", metadata=False, seq=True, naming="tensorboard",
                              clock_offset_ms=80.0, drift=False, red_herrings=True, culprit_rank=4, culprit_host=1)),
    # a host stall in every step of a middle stage, which the pipeline's bubbles absorb: late in one
    # step of six (seed 24000 #0127, on 4 hosts)
    "absorbed_pipeline": ("host_stall_straggler", 2400072127,
                          dict(logs="none", parallelism="pipeline", nodes=4, gpus=4, steps=6, severity="subtle", noise="medium",
                               nccl_version="2.20.5", torch_variant="kineto_2025", metadata=True, seq=True, naming="tensorboard",
                               gzip=True, archive="dir", log_style="debug_file", detail="lean", clock_offset_ms=80.0, drift=False,
                               red_herrings=True, graph_subsys=False, culprit_rank=13, culprit_host=3)),
    "truncated": ("healthy", 26, dict(logs="none", truncate=1)),
    # seed 25000 #0207: HSDP, rank 7 computes 68 % slower; rank 5 of its host is cut in the first
    # of two steps, and its cross-host replicas waited for it (it waited for rank 7) every step
    "truncated_straggler": ("two_faults", 2500075207, dict(
        nodes=4, gpus=4, steps=2, parallelism="hsdp", severity="severe", noise="medium", nccl_version="2.20.5",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="tensorboard", gzip=False, archive="tar.gz", logs="some",
        log_style="debug_file", clock_offset_ms=5.0, drift=False, red_herrings=True, graph_subsys=False, truncate=1,
        culprit_rank=7, culprit_host=1, primary="compute_straggler", secondary="degraded_nic")),
    "few_steps": ("healthy", 27, dict(logs="none", steps=2)),
    # seed 27000 #0058: rank 7 stalls on the host (13 % lost); dgx07's port runs at 94 % of its peers'
    # speed, which NCCL's graph search rounds to half their bandwidth, while the transfers reach
    # what the other hosts' graph promises: the handicap must not be replayed (it read 26 %)
    "straggler_slight_nic": ("two_faults", 2700081058, dict(
        nodes=8, gpus=4, steps=3, parallelism="ddp", severity="moderate", noise="high", nccl_version="2.24.3",
        torch_variant="kineto_2025", metadata=True, seq=True, naming="rank", gzip=True, archive="dir", logs="all",
        log_style="torchrun", clock_offset_ms=30.0, drift=False, red_herrings=True, graph_subsys=True,
        culprit_rank=7, culprit_host=1, primary="host_stall_straggler", secondary="degraded_nic")),
    # seed 28000 #0166: rank 6 computes 39 % slower (17.8 % lost); gpu-a024's NICs run at 93 % of
    # their speed, which its graph search gives as half its peers' bandwidth per channel, while the
    # transfers through it move 160 GB/s per host, more than its eight NICs at that speed could
    # (96): the handicap is bounded by what the peers' NICs carry (it read 23.8 %)
    "straggler_fast_rails": ("two_faults", 2800084166, dict(
        nodes=2, gpus=8, steps=6, parallelism="ddp", severity="moderate", noise="medium", nccl_version="2.18.6",
        torch_variant="kineto_2024", metadata=True, seq=False, naming="tensorboard", gzip=False, archive="tar.gz", logs="all",
        log_style="torchrun", detail="lean", clock_offset_ms=80.0, drift=False, red_herrings=True, graph_subsys=True,
        culprit_rank=6, culprit_host=0, primary="compute_straggler", secondary="degraded_nic")),
}

#: jobs of which one rank left no trace at all (its file lost): name -> (like, seed, knobs, rank dropped)
MISSING: dict[str, tuple[str, int, dict[str, Any], int]] = {
    # the straggler's host-mate (rank 5) is missing: its replica groups wait on it, as it waited on
    # rank 7 (an intra-host group) every step; the others' transfers there include that wait
    "missing_straggler": ("truncated_straggler", 2500075207, dict(truncate=0, archive="dir"), 5),
    # seed 26000 #0008: P2P off on node-00; node-01 has 3 of its 4 TP ranks, so its groups hold 3
    # members yet move a 4-rank group's bytes (intra-node speed compares groups by declared size)
    "missing_p2p": ("p2p_nologs", 2600078008, dict(
        steps=8, severity="subtle", nccl_version="2.21.5", torch_variant="kineto_2025", metadata=True, seq=True, naming="rank",
        archive="dir", detail="full", drift=False, red_herrings=True, graph_subsys=True, culprit_rank=2, culprit_host=0), 4),
    # seed 26000 #0062: healthy; rank 9 missing leaves its host 3 traces, yet 4 GPUs: a 4-rank
    # single-node graph search there is no multi-node one (NCCL 2.20 prints no nNodes)
    "missing_graph": ("healthy", 2600078062, dict(
        nodes=3, steps=12, parallelism="hsdp", severity="moderate", nccl_version="2.20.5", torch_variant="kineto_2025",
        metadata=True, seq=True, naming="rank", archive="dir", logs="some", log_style="debug_file", clock_offset_ms=80.0,
        drift=True, red_herrings=True, graph_subsys=True, culprit_rank=6, culprit_host=1), 9),
}


@dataclass
class Job:
    name: str
    truth: dict[str, Any]
    store: Store
    job: str
    ctx: Context
    raw: list[Finding]          #: every rule's findings before arbitration
    doc: dict[str, Any]         #: the findings document (after arbitration)

    def fired(self, *, raw: bool = False) -> dict[str, dict[str, Any]]:
        """rule code -> finding (as in the findings document); ``raw``: before arbitration."""
        fs = [f.as_dict() for f in self.raw] if raw else self.doc["findings"]
        return {f["rule"]: f for f in fs}

    def causes(self) -> set[str]:
        """Rules reported (after arbitration), input-quality rules left out."""
        return {f["rule"] for f in self.doc["findings"] if f["cause"] != "input"}


def _ingest(name: str, bundle: Path, truth: dict[str, Any], root: Path) -> Job:
    res = api.ingest([bundle], store=root / "store")
    store = api.open_store(root / "store", job=res.job)
    ctx = Context.build(store, res.job)
    raw = [f for rule in RULES.values() for f in rule().check(ctx)]
    doc = postmortem(store, res.job)
    return Job(name, truth, store, res.job, ctx, raw, doc)


def _generated(name: str, root: Path, alter: Callable[[Path, dict[str, Any]], None] | None = None,
               **extra: Any) -> Job:
    scenario, seed, knobs = JOBS[name] if name in JOBS else JOBS[extra.pop("like")]
    seed = extra.pop("seed", seed)
    gt = generate(scenario, out=root, seed=seed, **(BASE | knobs | extra))
    truth = json.loads((gt.bundle_path.parent / "truth.json").read_text())
    bundle = gt.bundle_path
    if alter is not None:
        if not bundle.is_dir():
            raise AssertionError(f"{name}: alterations need a directory bundle")
        alter(bundle, truth)
    return _ingest(name, bundle, truth, root)


# -- alterations: how real bundles go wrong ------------------------------------------------------


def _drop_rank(rank: int) -> Callable[[Path, dict[str, Any]], None]:
    def alter(bundle: Path, truth: dict[str, Any]) -> None:
        (bundle / truth["bundle"]["traces"][str(rank)]).unlink()
    return alter


def _add_corrupt_file(bundle: Path, truth: dict[str, Any]) -> None:
    (bundle / "rank9.pt.trace.json").write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": ')
    (bundle / "notes.bin").write_bytes(b"\x00\x01garbage")
    # a gzip stream that is not gzip
    (bundle / "rank10.pt.trace.json.gz").write_bytes(b"\x1f\x8bnot really gzip")


def _no_gdr(bundle: Path, truth: dict[str, Any]) -> None:
    """Every host's NCCL log as it reads without GPUDirect RDMA (nvidia-peermem not loaded)."""
    for log in (f for files in truth["bundle"]["nccl_logs"].values() for f in files):
        p = bundle / log
        text = p.read_text()
        text = text.replace("/GDRDMA", "")
        text = re.sub(r"GPU Direct RDMA Enabled", "GPU Direct RDMA Disabled", text)
        p.write_text(text)


def _drop_culprit_logs(bundle: Path, truth: dict[str, Any]) -> None:
    """The culprit host's NCCL logs are missing (its log directory was not collected)."""
    for host in truth["culprit_hosts"]:
        for log in truth["bundle"]["nccl_logs"].get(host, []):
            (bundle / log).unlink()


def _keep_only_culprit_logs(bundle: Path, truth: dict[str, Any]) -> None:
    """Only the culprit host's NCCL logs were collected (the others' directories were not)."""
    for host, logs in truth["bundle"]["nccl_logs"].items():
        if host not in truth["culprit_hosts"]:
            for log in logs:
                (bundle / log).unlink(missing_ok=True)  # ranks sharing a pid share a file


#: jobs profiled without step marks: name -> the fixture whose knobs they take (as folders; the
#: same job with its marks is ``name + "+marks"``)
NO_MARKS = {"compute_no_marks": "compute", "intermittent_no_marks": "intermittent", "healthy_no_marks": "healthy"}


def _manifest_ports(degraded: bool) -> Callable[[Path, dict[str, Any]], None]:
    """Add the collector's manifest with its ``/sys/class/infiniband`` probe per host: every port
    ACTIVE at the job's link rate; on the culprit host of a degraded NIC, one port trained down to
    the planted share of the rate (NCCL spreads channels evenly, so the host's NICs carry that share)."""
    def alter(bundle: Path, truth: dict[str, Any]) -> None:
        net = truth["job"]["network"]
        culprits = set(truth["culprit_hosts"]) if degraded else set()
        slow_factor = truth["faults"][0]["bandwidth_factor"] if degraded else 1.0
        topo = {}
        for host in truth["job"]["hosts"]:
            ports = []
            for i in range(net["nics_per_host"]):
                rate = net["link_gbps"] * (slow_factor if host in culprits and i == 0 else 1.0)
                ports.append({"device": f"mlx5_{i}", "port": 1, "rate": f"{rate:g} Gb/sec (4X)", "rate_gbps": rate,
                              "state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "InfiniBand", "numa_node": 0})
            topo[host] = {"infiniband": {"status": "ok", "command": "read /sys/class/infiniband", "seconds": 0.01,
                                         "raw": "", "parsed": {"ports": ports}}}
        doc = {"stallscope_manifest": {"version": 1, "kind": "bundle"}, "job_id": truth["name"], "status": "ok",
               "world_size": truth["job"]["world_size"], "topology": topo}
        (bundle / "manifest.json").write_text(json.dumps(doc))
    return alter


class Jobs:
    """Lazily generated and ingested fixture jobs, shared by the whole session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._jobs: dict[str, Job] = {}

    def __getitem__(self, name: str) -> Job:
        if name not in self._jobs:
            d = self.root / name
            d.mkdir(parents=True, exist_ok=True)
            if name in JOBS:
                self._jobs[name] = _generated(name, d)
            elif name in MISSING:
                like, seed, knobs, rank = MISSING[name]
                self._jobs[name] = _generated(name, d, _drop_rank(rank), like=like, seed=seed, **knobs)
            elif name in NO_MARKS:
                self._jobs[name] = _generated(name, d, like=NO_MARKS[name], archive="dir", step_marks=False)
            elif name.removesuffix("+marks") in NO_MARKS:  # the same job with its marks
                self._jobs[name] = _generated(name, d, like=NO_MARKS[name.removesuffix("+marks")], archive="dir")
            elif name == "missing_rank":
                self._jobs[name] = _generated(name, d, _drop_rank(5), like="healthy")
            elif name == "corrupt_file":
                self._jobs[name] = _generated(name, d, _add_corrupt_file, like="healthy")
            elif name == "no_gdr":
                self._jobs[name] = _generated(name, d, _no_gdr, like="healthy")
            elif name == "degraded_manifest":
                self._jobs[name] = _generated(name, d, _manifest_ports(True), like="degraded_nologs", severity="moderate",
                                              archive="dir", seed=29)
            elif name == "healthy_manifest":
                self._jobs[name] = _generated(name, d, _manifest_ports(False), like="healthy", logs="none", nodes=3)
            elif name == "xsock_other_logs":
                self._jobs[name] = _generated(name, d, _drop_culprit_logs, like="xsock_logs", archive="dir", nodes=3,
                                              severity="severe")
            elif name == "p2p_lone_log":
                self._jobs[name] = _generated(name, d, _keep_only_culprit_logs, like="p2p_logs", seed=80, parallelism="ddp",
                                              nodes=3, gpus=8, archive="dir", metadata=True, torch_variant="kineto_2024")
            elif name == "xsock_ownlog":
                self._jobs[name] = _generated(name, d, _keep_only_culprit_logs, like="xsock_logs", archive="dir", nodes=3,
                                              severity="severe")
            elif name == "xsock_2hosts_ownlog":
                self._jobs[name] = _generated(name, d, _keep_only_culprit_logs, like="xsock_2hosts", logs="all", archive="dir")
            elif name == "mixed_runs":
                self._jobs[name] = _mixed_runs(d)
            else:
                raise KeyError(name)
        return self._jobs[name]


def _mixed_runs(root: Path) -> Job:
    """Host 0's traces from one run and host 1's from another run of the same job (a bundle
    assembled from two attempts): nothing ties the two hosts' clocks together."""
    scenario, seed, knobs = JOBS["healthy"]
    a = generate(scenario, out=root / "a", seed=seed, **(BASE | knobs | dict(logs="none")))
    b = generate(scenario, out=root / "b", seed=seed + 1000, **(BASE | knobs | dict(logs="none")))
    ta = json.loads((a.bundle_path.parent / "truth.json").read_text())
    tb = json.loads((b.bundle_path.parent / "truth.json").read_text())
    bundle = root / "mixed"
    bundle.mkdir()
    g = ta["knobs"]["gpus"]
    for r in range(2 * g):
        t, src = (ta, a.bundle_path) if r < g else (tb, b.bundle_path)
        f = src / t["bundle"]["traces"][str(r)]
        shutil.copy(f, bundle / f"rank{r}.{f.name}")
    return _ingest("mixed_runs", bundle, ta, root)


@pytest.fixture(scope="session")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Jobs:
    return Jobs(tmp_path_factory.mktemp("rule-jobs"))
