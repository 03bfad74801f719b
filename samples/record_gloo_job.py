"""Record a real 2-process CPU training job (torchrun, gloo) with the PyTorch profiler.

This is how ``samples/gloo-straggler.tar.gz`` was made (on the project's 2-core CPU machine,
torch 2.13.0+cpu): a small MLP in DDP, 8 profiled steps, and one rank deliberately delayed in
its data path every step (a sleep), so the job has a known synchronization straggler::

    torchrun --standalone --nproc_per_node=2 samples/record_gloo_job.py --out /tmp/gloo --delay-rank 1 --delay-ms 40
    tar -C /tmp/gloo -czf samples/gloo-straggler.tar.gz .

Traces are named by ``tensorboard_trace_handler`` (``{host}_{pid}.{ts}.pt.trace.json.gz``).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--delay-rank", type=int, default=1)
    ap.add_argument("--delay-ms", type=float, default=40.0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.ReLU(), torch.nn.Linear(512, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    y = torch.randint(0, 10, (64,))
    os.makedirs(a.out, exist_ok=True)
    sched = schedule(wait=1, warmup=1, active=a.steps)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True,
                 on_trace_ready=tensorboard_trace_handler(a.out, use_gzip=True)) as prof:
        for _ in range(a.steps + 2):
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


if __name__ == "__main__":
    main()
