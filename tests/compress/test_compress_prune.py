"""Structured pruning: layers physically shrink, coupled channels stay consistent, rounding, rollback."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from stallscope.compress import cost  # noqa: E402
from stallscope.compress.prune import (  # noqa: E402
    ChannelGroup,
    PruneConfig,
    iterative_prune,
    prunable_groups,
    prune_step,
    select_channels,
)
from stallscope.compress.training import accuracy, batches  # noqa: E402


def _calib(splits, count=2):
    return list(batches(splits.x_train, splits.y_train, batch_size=64, count=count))


def _convs(model):
    return {n: m for n, m in model.named_modules() if isinstance(m, nn.Conv2d)}


def test_resnet_step_shrinks_layers_and_keeps_residual_widths(trained_resnet, digits16):
    model = trained_resnet
    x = torch.from_numpy(digits16.x_val[:8])
    before = cost.measure(model, x)
    shapes_before = {n: tuple(m.weight.shape) for n, m in _convs(model).items()}
    removed = prune_step(model, x, _calib(digits16), fraction=0.4, round_to=4)
    after = cost.measure(model, x)
    assert removed > 0
    assert after.macs < 0.75 * before.macs
    assert after.params < before.params
    convs = _convs(model)
    assert any(tuple(m.weight.shape) != shapes_before[n] for n, m in convs.items())
    # every conv and BN really holds tensors of its new size, and the model still runs
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            assert m.weight.shape[0] == m.out_channels and m.weight.shape[1] * m.groups == m.in_channels
        if isinstance(m, nn.BatchNorm2d):
            assert m.running_mean.shape[0] == m.num_features == m.weight.shape[0]
    # the residual add couples the stem with the first stage's block output
    assert convs["stem.0"].out_channels == convs["stages.0.0.conv2"].out_channels
    assert convs["stages.1.0.conv2"].out_channels == convs["stages.1.0.shortcut.0"].out_channels
    with torch.no_grad():
        assert model(x).shape == (8, 10)
    assert accuracy(model, digits16.x_val, digits16.y_val) > 0.1


def test_mobilenet_step_keeps_depthwise_convs_depthwise(trained_mobilenet, digits16):
    model = trained_mobilenet
    x = torch.from_numpy(digits16.x_val[:8])
    before = cost.measure(model, x)
    prune_step(model, x, _calib(digits16), fraction=0.4, round_to=4)
    assert cost.measure(model, x).macs < 0.8 * before.macs
    depthwise = [m for n, m in _convs(model).items() if "depthwise" in n]
    assert depthwise
    assert any(m.out_channels < 32 for m in depthwise)  # some were pruned (width 8 x expand 4 = 32)
    for m in depthwise:
        assert m.groups == m.in_channels == m.out_channels
    with torch.no_grad():
        assert model(x).shape == (8, 10)


@pytest.mark.parametrize("round_to", [4, 8])
def test_pruned_widths_are_multiples_of_round_to(trained_resnet, digits16, round_to):
    model = trained_resnet
    x = torch.from_numpy(digits16.x_val[:8])
    prune_step(model, x, _calib(digits16), fraction=0.5, round_to=round_to)
    widths = {n: m.out_channels for n, m in _convs(model).items()}
    assert all(w % round_to == 0 and w >= round_to for w in widths.values()), widths


def test_select_channels_rounds_chunks_and_prefers_cheap_loss_per_mac():
    groups = [
        ChannelGroup("a", 10, [], macs_per_channel=100.0, group=None),
        ChannelGroup("b", 16, [], macs_per_channel=100.0, group=None),
    ]
    scores = [torch.arange(10, dtype=torch.float32) + 100, torch.arange(16, dtype=torch.float32)]
    chosen = select_channels(groups, scores, macs_to_remove=800, round_to=4, min_channels=4)
    assert chosen == {1: list(range(8))}  # b is cheaper: two chunks of 4, lowest scores first
    chosen = select_channels(groups, scores, macs_to_remove=1e9, round_to=4, min_channels=4)
    assert 10 - len(chosen[0]) == 4 and 16 - len(chosen[1]) == 4  # a: 2 to reach 8, then 4; floor 4


def test_output_layer_is_never_pruned(trained_resnet, digits16):
    x = torch.from_numpy(digits16.x_val[:4])
    _, groups, model_cost = prunable_groups(trained_resnet, x)
    assert model_cost.output_layers == ("fc",)
    assert all(g.root != "fc" for g in groups)


def test_step_exceeding_budget_is_rolled_back_and_retried_smaller(trained_resnet, digits16):
    """A fake validation metric that collapses below 70% of the dense MACs forces rollbacks."""
    x = torch.from_numpy(digits16.x_val[:4])
    dense_macs = cost.measure(trained_resnet, x).macs

    def evaluate(model):
        return 0.95 if cost.measure(model, x).macs >= 0.7 * dense_macs else 0.5

    reference_state = copy.deepcopy(trained_resnet.state_dict())
    result = iterative_prune(
        trained_resnet,
        example=x,
        calibration=lambda step: _calib(digits16, count=1),
        evaluate=evaluate,
        finetune=lambda model, step: None,
        config=PruneConfig(max_accuracy_drop=0.01, step_fraction=0.5, min_step_fraction=0.05, round_to=4, max_steps=8),
    )
    history = result.history
    assert not history[0].accepted and history[0].fraction == pytest.approx(0.5)
    assert history[1].fraction == pytest.approx(0.25)
    rejected = [h for h in history if not h.accepted]
    assert rejected and all(h.macs_after < 0.7 * dense_macs for h in rejected)
    assert any(h.accepted for h in history)
    # every kept model honours the budget, and the final one is the last accepted step
    for ckpt in result.checkpoints:
        assert ckpt.macs >= 0.7 * dense_macs
    assert result.checkpoints[-1].step == max(h.step for h in history if h.accepted)
    assert cost.measure(result.model, x).macs == result.checkpoints[-1].macs
    # the caller's model is untouched
    assert all(torch.equal(v, trained_resnet.state_dict()[k]) for k, v in reference_state.items())


def test_pruning_stops_at_the_target_ratio(trained_resnet, digits16):
    x = torch.from_numpy(digits16.x_val[:4])
    result = iterative_prune(
        trained_resnet,
        example=x,
        calibration=lambda step: _calib(digits16, count=1),
        evaluate=lambda model: 1.0,
        finetune=lambda model, step: None,
        config=PruneConfig(max_accuracy_drop=0.01, target_macs_ratio=0.5, step_fraction=0.3, round_to=4),
    )
    dense = result.checkpoints[0].macs
    assert result.checkpoints[-1].macs <= 0.5 * dense * 1.15  # rounding may leave it a little above
    assert len(result.checkpoints) >= 2
    assert all(h.accepted for h in result.history)


def test_budgets_share_steps_until_their_verdicts_differ(trained_resnet, digits16):
    x = torch.from_numpy(digits16.x_val[:4])
    dense_macs = cost.measure(trained_resnet, x).macs
    calls = {"finetune": 0}

    def finetune(model, step):
        calls["finetune"] += 1

    def evaluate(model):  # accuracy falls with the MACs removed: 1 pp per 10%
        return 0.99 - 0.1 * (1 - cost.measure(model, x).macs / dense_macs)

    shared: dict = {}
    kwargs = dict(example=x, calibration=lambda step: _calib(digits16, count=1), evaluate=evaluate,
                  finetune=finetune, reference_accuracy=0.99, cache=shared)
    tight = iterative_prune(trained_resnet, config=PruneConfig(max_accuracy_drop=0.04, round_to=4, max_steps=4), **kwargs)
    computed = calls["finetune"]
    loose = iterative_prune(trained_resnet, config=PruneConfig(max_accuracy_drop=0.08, round_to=4, max_steps=4), **kwargs)
    # the loose budget replays the tight one's steps while both accept them, then computes its own
    shared_prefix = 0
    for a, b in zip(tight.history, loose.history):
        if (a.fraction, a.accepted) != (b.fraction, b.accepted):
            break
        assert a.macs_after == b.macs_after and a.val_accuracy == b.val_accuracy
        shared_prefix += 1
    assert shared_prefix >= 1
    assert calls["finetune"] - computed <= len(loose.history) - shared_prefix + 1
    assert loose.checkpoints[-1].macs <= tight.checkpoints[-1].macs
