"""Fisher-information sensitivity of output channels, from channel-mask gradients.

Why a mask: removing output channel ``c`` of a layer is the same as multiplying that channel of
the layer's output by a mask ``m_c`` and setting ``m_c = 0``. A second-order Taylor expansion of
the loss around ``m = 1`` whose Hessian is approximated by the (empirical) Fisher information
gives the loss increase of removing ``c``::

    ΔL_c ≈ ½ · F_cc = ½ · Σ_n g_{n,c}²,   g_{n,c} = ∂L_n/∂m_c = Σ_{h,w} a_{n,c,h,w} · ∂L_n/∂a_{n,c,h,w}

(Molchanov et al. 2019; Liu et al. "Group Fisher Pruning", ICML 2021). Only the diagonal is
kept, which is what makes it cheap: one backward pass per calibration batch yields every
channel's per-sample gradient, because the mask here is per sample (shape ``N x C``) and the
loss is summed over the batch, so ``mask.grad[n, c]`` is exactly ``g_{n,c}``.

Channels that must be removed together (coupled by a residual add, or the input and output of a
depthwise conv) share one mask, so their per-sample gradients are summed *before* squaring:
:func:`group_fisher`.

The mask sits after the BatchNorm that follows a conv (when there is one): zeroing the BN
output is exactly what removing the channel does, whereas a mask before the BN would leave the
BN shift ``β`` behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from stallscope.errors import CompressError

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn


def mask_gradients(
    model: "nn.Module",
    module_names: Iterable[str],
    batches: Iterable[tuple["torch.Tensor", "torch.Tensor"]],
    *,
    device: str = "cpu",
) -> dict[str, "torch.Tensor"]:
    """Per-sample channel-mask gradients ``g[n, c]`` for the outputs of the named modules.

    Returns ``{module name: tensor of shape (samples, channels)}`` accumulated over all
    ``batches`` of ``(inputs, integer labels)``. The model runs in eval mode (BatchNorm uses its
    running statistics, so samples do not interact and the gradients are truly per sample); its
    parameters are left untouched and receive no gradient.
    """
    import torch
    import torch.nn.functional as F

    modules = dict(model.named_modules())
    wanted = list(dict.fromkeys(module_names))
    missing = [name for name in wanted if name not in modules]
    if missing:
        raise CompressError(f"Fisher sensitivity: the model has no module(s) {missing}")
    masks: dict[str, list[torch.Tensor]] = {name: [] for name in wanted}

    def make_hook(name: str) -> Callable[..., "torch.Tensor"]:
        def hook(module: "nn.Module", inputs: tuple, output: "torch.Tensor") -> "torch.Tensor":
            shape = [output.shape[0], output.shape[1]] + [1] * (output.ndim - 2)
            mask = torch.ones(shape, dtype=output.dtype, device=output.device, requires_grad=True)
            masks[name].append(mask)
            return output * mask

        return hook

    handles = [modules[name].register_forward_hook(make_hook(name)) for name in wanted]
    was_training = model.training
    requires = {p: p.requires_grad for p in model.parameters()}
    collected: dict[str, list[torch.Tensor]] = {name: [] for name in wanted}
    model.eval()
    try:
        for p in model.parameters():
            p.requires_grad_(False)
        for inputs, labels in batches:
            for name in wanted:
                masks[name].clear()
            with torch.enable_grad():
                logits = model(inputs.to(device))
                loss = F.cross_entropy(logits, labels.to(device), reduction="sum")
                used = [m for name in wanted for m in masks[name]]
                if not used:
                    raise CompressError("Fisher sensitivity: none of the masked modules ran in the forward pass")
                grads = torch.autograd.grad(loss, used, allow_unused=True)
            by_mask = {id(m): g for m, g in zip(used, grads)}
            for name in wanted:
                total = None
                for mask in masks[name]:  # a module called twice shares one mask: sum its gradients
                    g = by_mask[id(mask)]
                    g = torch.zeros_like(mask) if g is None else g
                    total = g if total is None else total + g
                if total is not None:
                    collected[name].append(total.detach().flatten(1).cpu())
    finally:
        for h in handles:
            h.remove()
        for p, flag in requires.items():
            p.requires_grad_(flag)
        model.train(was_training)
    return {name: torch.cat(chunks) for name, chunks in collected.items() if chunks}


def fisher_scores(
    model: "nn.Module",
    module_names: Iterable[str],
    batches: Iterable[tuple["torch.Tensor", "torch.Tensor"]],
    *,
    device: str = "cpu",
) -> dict[str, "torch.Tensor"]:
    """Diagonal Fisher score ``½ Σ_n g_{n,c}²`` of every output channel of each named module."""
    grads = mask_gradients(model, module_names, batches, device=device)
    return {name: 0.5 * g.pow(2).sum(0) for name, g in grads.items()}


def group_fisher(
    grads: Mapping[str, "torch.Tensor"],
    members: Sequence[tuple[str, Sequence[int], Sequence[int]]],
    num_channels: int,
) -> "torch.Tensor":
    """Fisher score of a group of coupled channels that share one mask.

    ``members`` lists ``(module name, channel indices in that module, matching indices in the
    group)``. Per-sample gradients of all members are summed per group channel, then squared and
    summed over samples.
    """
    import torch

    total: torch.Tensor | None = None
    for name, layer_idxs, group_idxs in members:
        g = grads.get(name)
        if g is None:
            continue
        if total is None:
            total = torch.zeros(g.shape[0], num_channels, dtype=g.dtype)
        total[:, list(group_idxs)] += g[:, list(layer_idxs)]
    if total is None:
        return torch.zeros(num_channels)
    return 0.5 * total.pow(2).sum(0)
