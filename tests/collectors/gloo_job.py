"""A real 2-process CPU training job for the collector tests: DDP over gloo, profiled with
``stallscope.collectors.profile``, one rank delayed in its data path every step.

    stallscope collect --out B -- torchrun --standalone --nproc_per_node=2 tests/collectors/gloo_job.py --delay-rank 1

``--exit-code N`` makes every rank exit with N after training (a failed job that still leaves a
bundle).
"""

from __future__ import annotations

import argparse
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
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
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
    dist.barrier()
    dist.destroy_process_group()
    return a.exit_code


if __name__ == "__main__":
    sys.exit(main())
