"""Static cost of a model: multiply-accumulates (MACs), parameters, and the layer structure.

One traced forward pass with hooks on every leaf module records, per Conv/Linear layer, its MACs
(output elements x input channels per group x kernel area), its call order, and which
BatchNorm directly consumes its output. The pruner uses the per-layer MACs to price a channel
(how much compute removing it saves) and the conv -> BN pairs to place the Fisher channel masks
where removing a channel is exact (after the BN). The ONNX exporter uses the pairs to name a
conv+BN node that the exporter fused after the conv, not the BN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn


@dataclass(frozen=True)
class LayerCost:
    """Cost of one Conv/Linear layer for one sample."""

    name: str
    macs: int
    in_channels: int
    out_channels: int
    groups: int
    order: int


@dataclass(frozen=True)
class ModelCost:
    """MACs (per sample), parameter count and layer structure of a model."""

    macs: int
    params: int
    layers: dict[str, LayerCost]
    #: conv/linear module name -> name of the BatchNorm that directly consumes its output
    bn_after: dict[str, str]
    #: names of the Conv/Linear layers whose output is (a reshaping of) the model output
    output_layers: tuple[str, ...]


def measure(model: "nn.Module", example: "torch.Tensor") -> ModelCost:
    """Run ``model`` once on ``example[:1]`` and return its cost (MACs are per sample)."""
    import torch
    from torch import nn

    names = {module: name for name, module in model.named_modules()}
    layers: dict[str, LayerCost] = {}
    produced_by: dict[int, str] = {}
    bn_after: dict[str, str] = {}
    handles = []

    def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        name = names[module]
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            src = produced_by.get(id(inputs[0]))
            if src is not None:
                bn_after.setdefault(src, name)
            return
        if isinstance(module, nn.modules.conv._ConvNd):
            kernel = 1
            for k in module.kernel_size:
                kernel *= int(k)
            per_out = kernel * module.in_channels // module.groups
            macs = int(output[0].numel()) * per_out
            cost = LayerCost(name, macs, module.in_channels, module.out_channels, module.groups, len(layers))
        elif isinstance(module, nn.Linear):
            macs = int(output[0].numel()) * module.in_features
            cost = LayerCost(name, macs, module.in_features, module.out_features, 1, len(layers))
        else:
            return
        if name in layers:  # a module called twice: its cost counts twice
            prev = layers[name]
            cost = LayerCost(name, prev.macs + cost.macs, cost.in_channels, cost.out_channels, cost.groups, prev.order)
        layers[name] = cost
        produced_by[id(output)] = name

    for module in model.modules():
        if isinstance(module, (nn.modules.conv._ConvNd, nn.Linear, nn.modules.batchnorm._BatchNorm)):
            handles.append(module.register_forward_hook(hook))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(example[:1])
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    output_layers = tuple(
        name for name, cost in layers.items() if cost.order == max(c.order for c in layers.values())
    ) if layers else ()
    # The last layer called produces the logits unless something after it changes the width.
    if output_layers and isinstance(out, torch.Tensor) and out.shape[-1] != layers[output_layers[0]].out_channels:
        output_layers = ()
    params = sum(p.numel() for p in model.parameters())
    return ModelCost(
        macs=sum(c.macs for c in layers.values()),
        params=int(params),
        layers=layers,
        bn_after=bn_after,
        output_layers=output_layers,
    )
