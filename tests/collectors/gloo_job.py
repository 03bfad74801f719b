"""A real 2-process CPU training job for the collector tests: DDP over gloo, profiled with
``stallscope.collectors.profile``, one rank delayed in its data path every step.

    stallscope collect --out B -- torchrun --standalone --nproc_per_node=2 tests/collectors/gloo_job.py --delay-rank 1

``--exit-code N`` makes every rank exit with N after training (a failed job that still leaves a
bundle). ``--backend nccl`` runs the same job on CUDA (one GPU per rank, ``LOCAL_RANK``): the
check of the CUDA path (NCCL logs in the bundle, GPU kernels in the traces, GPU topology).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from stallscope.collectors import profile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--active", type=int, default=6)
    ap.add_argument("--delay-rank", type=int, default=1)
    ap.add_argument("--delay-ms", type=float, default=40.0)
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    a = ap.parse_args()
    torch.set_num_threads(1)
    device = torch.device("cpu")
    if a.backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group(a.backend)
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
    model = DDP(net, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256, device=device), torch.randint(0, 10, (64,), device=device)
    with profile(wait=1, warmup=1, active=a.active) as prof:
        for _ in range(a.steps):
            if rank == a.delay_rank:
                time.sleep(a.delay_ms / 1000)  # the slow data path
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            dist.all_reduce(loss.detach())
            prof.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    return a.exit_code


if __name__ == "__main__":
    sys.exit(main())
