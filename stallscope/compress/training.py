"""Training, fine-tuning and accuracy of PyTorch classifiers on in-memory numpy splits.

Small and deliberate: AdamW with a one-cycle schedule, optional light augmentation (random
translation and scale for image batches) and label smoothing. The same loop trains the built-in
examples and fine-tunes a model briefly after each pruning step. Epochs may be fractional so a
fine-tune can be shorter than one pass over the data.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn


def fit(
    model: "nn.Module",
    x: np.ndarray,
    y: np.ndarray,
    *,
    epochs: float,
    batch_size: int = 64,
    lr: float = 3e-3,
    weight_decay: float = 5e-4,
    label_smoothing: float = 0.05,
    augment: bool = True,
    seed: int = 0,
    device: str = "cpu",
) -> None:
    """Train ``model`` in place for ``epochs`` passes (fractional allowed) over ``(x, y)``."""
    import torch
    import torch.nn.functional as F

    steps = max(1, math.ceil(epochs * len(x) / batch_size)) if epochs > 0 else 0
    if steps == 0:
        return
    generator = torch.Generator().manual_seed(seed)
    xt = torch.from_numpy(x)
    yt = torch.from_numpy(y)
    model.to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.25)
    done = 0
    while done < steps:
        order = torch.randperm(len(xt), generator=generator)
        for start in range(0, len(order) - batch_size // 2, batch_size):
            idx = order[start : start + batch_size]
            xb = xt[idx]
            if augment and xb.ndim == 4:
                xb = _jitter(xb, generator)
            logits = model(xb.to(device))
            loss = F.cross_entropy(logits, yt[idx].to(device), label_smoothing=label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            done += 1
            if done >= steps:
                break
    model.eval()


def accuracy(model: "nn.Module", x: np.ndarray, y: np.ndarray, *, batch_size: int = 512, device: str = "cpu") -> float:
    """Top-1 accuracy of ``model`` (in eval mode) on ``(x, y)``, as a fraction."""
    import torch

    model.eval()
    correct = 0
    with torch.inference_mode():
        for start in range(0, len(x), batch_size):
            logits = model(torch.from_numpy(x[start : start + batch_size]).to(device))
            correct += int((logits.argmax(1).cpu().numpy() == y[start : start + batch_size]).sum())
    return correct / len(x)


def batches(
    x: np.ndarray, y: np.ndarray, *, batch_size: int, count: int, seed: int = 0
) -> Iterator[tuple["torch.Tensor", "torch.Tensor"]]:
    """``count`` shuffled batches of ``(x, y)`` as tensors (calibration for the Fisher scores)."""
    import torch

    order = np.random.default_rng(seed).permutation(len(x))
    for i in range(count):
        idx = order[(i * batch_size) % len(x) :][:batch_size]
        if len(idx) == 0:
            break
        yield torch.from_numpy(x[idx]), torch.from_numpy(y[idx])


def _jitter(xb: "torch.Tensor", generator: "torch.Generator") -> "torch.Tensor":
    """Random translation (up to 1/8 of the side) and scale (±10%) of an image batch."""
    import torch
    import torch.nn.functional as F

    n = xb.shape[0]
    scale = 1 + (torch.rand(n, generator=generator) - 0.5) * 0.2
    shift = (torch.rand(n, 2, generator=generator) - 0.5) * 0.25
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0] = scale
    theta[:, 1, 1] = scale
    theta[:, :, 2] = shift
    grid = F.affine_grid(theta, list(xb.shape), align_corners=False)
    return F.grid_sample(xb, grid, padding_mode="border", align_corners=False)
