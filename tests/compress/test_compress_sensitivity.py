"""Fisher channel sensitivity: shapes, a dead filter scores zero, coupled masks add before squaring."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from stallscope.compress.sensitivity import fisher_scores, group_fisher, mask_gradients  # noqa: E402
from stallscope.compress.training import batches  # noqa: E402
from stallscope.errors import CompressError  # noqa: E402


def _plain_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 5, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(5, 10),
    )


def test_scores_have_one_entry_per_output_channel(digits8):
    model = _plain_cnn()
    scores = fisher_scores(model, ["0", "2"], batches(digits8.x_train, digits8.y_train, batch_size=32, count=3))
    assert scores["0"].shape == (6,)
    assert scores["2"].shape == (5,)
    assert all(bool((s >= 0).all()) for s in scores.values())
    assert float(scores["0"].sum()) > 0


def test_zeroed_filter_scores_zero_and_live_filters_do_not(digits8):
    model = _plain_cnn()
    with torch.no_grad():
        model[0].weight[3].zero_()
        model[0].bias[3] = 0.0
    scores = fisher_scores(model, ["0"], batches(digits8.x_train, digits8.y_train, batch_size=64, count=4))["0"]
    assert float(scores[3]) == pytest.approx(0.0, abs=1e-12)
    live = torch.cat([scores[:3], scores[4:]])
    assert float(live.min()) > 1e3 * max(float(scores[3]), 1e-30)


def test_mask_gradients_are_per_sample_and_leave_the_model_unchanged(digits8):
    model = _plain_cnn()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    grads = mask_gradients(model, ["2"], batches(digits8.x_train, digits8.y_train, batch_size=16, count=2))
    assert grads["2"].shape == (32, 5)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_per_sample_gradient_matches_autograd_on_the_mask(digits8):
    """g[n, c] equals d loss_n / d m_c computed by hand for one sample."""
    model = _plain_cnn().eval()
    x = torch.from_numpy(digits8.x_train[:4])
    y = torch.from_numpy(digits8.y_train[:4])
    grads = mask_gradients(model, ["0"], [(x, y)])["0"]
    mask = torch.ones(1, 6, 1, 1, requires_grad=True)
    out = model[0](x[1:2]) * mask
    for layer in list(model)[1:]:
        out = layer(out)
    loss = nn.functional.cross_entropy(out, y[1:2], reduction="sum")
    (expected,) = torch.autograd.grad(loss, mask)
    torch.testing.assert_close(grads[1], expected.flatten(), rtol=1e-4, atol=1e-6)


def test_group_fisher_sums_coupled_gradients_before_squaring():
    g_a = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
    g_b = torch.tensor([[-1.0, 0.5], [0.0, 1.0]])
    members = [("a", [0, 1], [0, 1]), ("b", [1, 0], [0, 1])]  # b's channel 1 is group channel 0
    got = group_fisher({"a": g_a, "b": g_b}, members, 2)
    shared = torch.stack([g_a[:, 0] + g_b[:, 1], g_a[:, 1] + g_b[:, 0]], dim=1)
    torch.testing.assert_close(got, 0.5 * shared.pow(2).sum(0))


def test_unknown_module_is_a_clear_error(digits8):
    with pytest.raises(CompressError, match="no module"):
        mask_gradients(_plain_cnn(), ["nope"], [])
