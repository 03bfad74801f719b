"""Iterative, structured, Fisher-guided filter pruning under an accuracy-drop budget.

Each step:

1. builds torch-pruning's dependency graph, which groups channels that must go together
   (a residual add couples every block output of a stage; a depthwise conv couples its input
   and output; the next layers' input channels follow);
2. scores every group channel with the group Fisher sensitivity (:mod:`.sensitivity`) and
   prices it by the MACs its removal saves (:mod:`.cost`);
3. removes the channels with the least loss increase per MAC saved, in chunks that keep every
   group's width a multiple of ``round_to`` (vector units and int8 GEMM kernels run full tiles),
   until the step removes ``step_fraction`` of the current MACs;
4. physically shrinks the layers (new, smaller weight tensors), fine-tunes briefly, and
   measures validation accuracy. If the drop from the reference exceeds ``max_accuracy_drop``
   the step is rolled back and retried with half the step size; pruning ends at the target
   MAC ratio, when the step size falls below ``min_step_fraction``, or after ``max_steps``.

Every accepted step is kept as a checkpoint, so the caller can walk back (the HQP gate applies
Δmax to the final *quantized* model and steps back until it holds).
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stallscope.compress import cost as cost_mod
from stallscope.compress.failures import as_compress_error
from stallscope.compress.sensitivity import group_fisher, mask_gradients
from stallscope.errors import CompressError

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn


@dataclass(frozen=True)
class PruneConfig:
    """How far and how carefully to prune.

    ``max_accuracy_drop`` is a fraction (0.015 = 1.5 percentage points) of validation accuracy
    relative to the reference (the dense model).
    """

    max_accuracy_drop: float = 0.015
    #: stop once MACs are at or below this fraction of the starting model's MACs
    target_macs_ratio: float = 0.1
    #: fraction of the current MACs a step tries to remove
    step_fraction: float = 0.3
    #: give up when a rolled-back step would have to be smaller than this
    min_step_fraction: float = 0.04
    #: keep every group's channel count a multiple of this
    round_to: int = 8
    #: never shrink a group below this many channels (defaults to ``round_to``)
    min_channels: int | None = None
    max_steps: int = 12


@dataclass(frozen=True)
class PruneStep:
    """One attempted step of the iterative pruner, accepted or rolled back."""

    step: int
    fraction: float
    macs_before: int
    macs_after: int
    params_after: int
    channels_removed: int
    val_accuracy: float
    accuracy_drop_pp: float
    accepted: bool


@dataclass
class Checkpoint:
    """An accepted pruned model (step 0 is the starting model)."""

    step: int
    model: "nn.Module"
    macs: int
    params: int
    val_accuracy: float


@dataclass
class PruneResult:
    """The pruned model (the last checkpoint), all checkpoints and the step history."""

    checkpoints: list[Checkpoint]
    history: list[PruneStep] = field(default_factory=list)

    @property
    def model(self) -> "nn.Module":
        return self.checkpoints[-1].model


#: (earlier attempts' (fraction, accepted), this fraction) -> (model after the step, channels removed, val accuracy)
StepCache = dict[tuple[tuple[tuple[float, bool], ...], float], tuple["nn.Module", int, float]]


@dataclass
class ChannelGroup:
    """Coupled channels that are pruned together, with their Fisher mask points and price."""

    root: str
    channels: int
    #: (mask module, channel indices in that module, matching group indices)
    mask_points: list[tuple[str, list[int], list[int]]]
    #: MACs saved (per sample) by removing one channel of the group
    macs_per_channel: float
    group: Any  # torch_pruning Group (full indices), used to map indices and prune


def prunable_groups(
    model: "nn.Module", example: "torch.Tensor", *, ignored: Iterable[str] = ()
) -> tuple[Any, list[ChannelGroup], cost_mod.ModelCost]:
    """Dependency graph, channel groups and cost of ``model`` (output layers are never pruned)."""
    import torch_pruning as tp
    from torch import nn

    cost = cost_mod.measure(model, example)
    modules = dict(model.named_modules())
    ignored_names = set(ignored) | set(cost.output_layers)
    ignored_modules = [modules[n] for n in ignored_names if n in modules]
    with as_compress_error("pruning: building the dependency graph failed"):
        graph = tp.DependencyGraph().build_dependency(model, example_inputs=example[:1], verbose=False)
    name_of = {m: n for n, m in modules.items()}
    groups: list[ChannelGroup] = []
    for group in graph.get_all_groups(ignored_layers=ignored_modules, root_module_types=(nn.Conv2d, nn.Linear)):
        root_module = group[0].dep.target.module
        root = name_of.get(root_module)
        if root is None:
            continue
        channels = graph.get_out_channels(root_module)
        mask_points: list[tuple[str, list[int], list[int]]] = []
        priced: dict[str, float] = {}
        for item in group.items:
            dep, idxs = item.dep, list(item.idxs)
            module = dep.target.module
            name = name_of.get(module)
            if name is None or name not in cost.layers:
                continue
            layer = cost.layers[name]
            is_out = graph.is_out_channel_pruning_fn(dep.handler)
            depthwise = layer.groups > 1 and layer.groups == layer.in_channels == layer.out_channels
            if is_out:
                mask_points.append((cost.bn_after.get(name, name), idxs, list(item.root_idxs)))
                priced[name] = layer.macs / max(1, layer.out_channels)
            elif name not in priced and not depthwise:
                priced[name] = layer.macs / max(1, layer.in_channels)
        if mask_points and channels:
            groups.append(ChannelGroup(root, int(channels), mask_points, sum(priced.values()), group))
    return graph, groups, cost


def select_channels(
    groups: list[ChannelGroup],
    scores: list["torch.Tensor"],
    *,
    macs_to_remove: float,
    round_to: int,
    min_channels: int,
) -> dict[int, list[int]]:
    """Pick channels to remove: lowest Fisher score per MAC saved, in rounding-preserving chunks.

    Returns ``{group index: sorted channel indices}``. A group of ``C`` channels first loses
    ``C mod round_to`` channels (to reach a multiple), then ``round_to`` at a time, never going
    below ``min_channels``.
    """
    heap: list[tuple[float, int]] = []
    order: dict[int, list[int]] = {}
    taken: dict[int, int] = {}

    def push(gi: int) -> None:
        g = groups[gi]
        remaining = g.channels - taken[gi]
        chunk = remaining % round_to or round_to
        if remaining - chunk < min_channels or g.macs_per_channel <= 0:
            return
        idxs = order[gi][taken[gi] : taken[gi] + chunk]
        loss = float(sum(float(scores[gi][i]) for i in idxs))
        heapq.heappush(heap, (loss / (chunk * g.macs_per_channel), gi))

    for gi, g in enumerate(groups):
        values = [float(v) for v in scores[gi]]
        order[gi] = sorted(range(g.channels), key=values.__getitem__)
        taken[gi] = 0
        push(gi)
    removed = 0.0
    while heap and removed < macs_to_remove:
        _, gi = heapq.heappop(heap)
        remaining = groups[gi].channels - taken[gi]
        chunk = remaining % round_to or round_to
        taken[gi] += chunk
        removed += chunk * groups[gi].macs_per_channel
        push(gi)
    return {gi: sorted(order[gi][: taken[gi]]) for gi in taken if taken[gi] > 0}


def prune_step(
    model: "nn.Module",
    example: "torch.Tensor",
    calibration: list[tuple["torch.Tensor", "torch.Tensor"]],
    *,
    fraction: float,
    round_to: int = 8,
    min_channels: int | None = None,
    ignored: Iterable[str] = (),
    device: str = "cpu",
) -> int:
    """Remove about ``fraction`` of ``model``'s MACs in place; return the channels removed."""
    import torch

    graph, groups, cost = prunable_groups(model, example, ignored=ignored)
    if not groups:
        return 0
    points = sorted({p[0] for g in groups for p in g.mask_points})
    with as_compress_error("Fisher sensitivity failed"):
        grads = mask_gradients(model, points, calibration, device=device)
    scores = [group_fisher(grads, g.mask_points, g.channels) for g in groups]
    chosen = select_channels(
        groups,
        scores,
        macs_to_remove=fraction * cost.macs,
        round_to=round_to,
        min_channels=min_channels if min_channels is not None else round_to,
    )
    with torch.no_grad(), as_compress_error("pruning failed"):
        out_before = model.eval()(example[:1]).shape
        removed = 0
        for gi, idxs in chosen.items():
            root = groups[gi].group[0].dep
            pruning = graph.get_pruning_group(root.target.module, root.handler, idxs)
            if graph.check_pruning_group(pruning):
                pruning.prune()
                removed += len(idxs)
        out_after = model(example[:1]).shape
    if out_after != out_before:
        raise CompressError(f"pruning changed the model output shape from {tuple(out_before)} to {tuple(out_after)}")
    return removed


def iterative_prune(
    model: "nn.Module",
    *,
    example: "torch.Tensor",
    calibration: Callable[[int], list[tuple["torch.Tensor", "torch.Tensor"]]],
    evaluate: Callable[["nn.Module"], float],
    finetune: Callable[["nn.Module", int], None],
    config: PruneConfig,
    reference_accuracy: float | None = None,
    ignored: Iterable[str] = (),
    device: str = "cpu",
    progress: Callable[[str], None] | None = None,
    cache: StepCache | None = None,
) -> PruneResult:
    """Prune a copy of ``model`` step by step, rolling back any step that exceeds the budget.

    ``calibration(step)`` returns the batches for the Fisher scores of a step; ``evaluate``
    returns validation accuracy (a fraction); ``finetune(model, step)`` trains in place.
    ``reference_accuracy`` defaults to the starting model's validation accuracy.

    ``cache`` lets trajectories of the same model under different budgets share work: a step
    is identified by the path that led to it (every earlier attempt's fraction and verdict) and
    its own fraction, so two budgets reuse each other's steps until their verdicts first differ.
    Pass the same dict (initially empty) to every call for one model.
    """
    say = progress or (lambda _msg: None)
    model = copy.deepcopy(model).eval()
    start = cost_mod.measure(model, example)
    reference = evaluate(model) if reference_accuracy is None else reference_accuracy
    current_acc = evaluate(model) if reference_accuracy is not None else reference
    result = PruneResult([Checkpoint(0, copy.deepcopy(model), start.macs, start.params, current_acc)])
    fraction = config.step_fraction
    macs = start.macs
    target = config.target_macs_ratio * start.macs
    attempt = 0
    while macs > target and fraction >= config.min_step_fraction and attempt < config.max_steps:
        attempt += 1
        snapshot = copy.deepcopy(model)
        goal = min(fraction, 1 - target / macs) if macs > 0 else 0.0
        key = (tuple((round(h.fraction, 6), h.accepted) for h in result.history), round(goal, 6))
        if cache is not None and key in cache:
            cached_model, removed, acc = cache[key]
            model = copy.deepcopy(cached_model)
        else:
            removed = prune_step(
                model,
                example,
                calibration(attempt),
                fraction=goal,
                round_to=config.round_to,
                min_channels=config.min_channels,
                ignored=ignored,
                device=device,
            )
            if removed:
                finetune(model, attempt)
            acc = evaluate(model) if removed else 0.0
            if cache is not None:
                cache[key] = (copy.deepcopy(model), removed, acc)
        if removed == 0:
            say(f"  step {attempt}: nothing left to prune at this granularity")
            model = snapshot
            break
        after = cost_mod.measure(model, example)
        drop = reference - acc
        accepted = drop <= config.max_accuracy_drop + 1e-9
        result.history.append(
            PruneStep(attempt, goal, macs, after.macs, after.params, removed, acc, round(100 * drop, 4), accepted)
        )
        say(
            f"  step {attempt}: -{goal:.0%} MACs -> {after.macs / start.macs:.1%} of dense, "
            f"val acc {acc:.4f} (drop {100 * drop:.2f}pp) {'kept' if accepted else 'rolled back'}"
        )
        if accepted:
            macs = after.macs
            result.checkpoints.append(Checkpoint(attempt, copy.deepcopy(model), after.macs, after.params, acc))
        else:
            model = snapshot
            fraction /= 2
    return result
