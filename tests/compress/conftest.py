"""Shared fixtures for the compress tests: tiny digits splits and small trained CNNs.

Everything is sized for CI on two cores: 8x8 or 16x16 digits, a few epochs, 2 torch threads.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from stallscope.compress.examples import digits_splits, mobilenet_digits, resnet_digits  # noqa: E402
from stallscope.compress.training import fit  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _torch_threads():
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def digits8():
    """Digits at their native 8x8 resolution, split 60/20/20."""
    return digits_splits(image_size=8, seed=0)


@pytest.fixture(scope="session")
def digits16():
    return digits_splits(image_size=16, seed=0)


@pytest.fixture(scope="session")
def _trained_resnet(digits16):
    torch.manual_seed(0)
    model = resnet_digits(width=16, blocks=(1, 1))
    fit(model, digits16.x_train, digits16.y_train, epochs=4, seed=0)
    return model


@pytest.fixture()
def trained_resnet(_trained_resnet):
    """A small ResNet-like CNN (residual adds, projection shortcut) trained on 16x16 digits."""
    return copy.deepcopy(_trained_resnet)


@pytest.fixture(scope="session")
def _trained_mobilenet(digits16):
    torch.manual_seed(0)
    model = mobilenet_digits(width=8, expand=4, stages=((1, 2, 1), (2, 1, 2)))
    fit(model, digits16.x_train, digits16.y_train, epochs=1, seed=0)  # the tests need structure, not accuracy
    return model


@pytest.fixture()
def trained_mobilenet(_trained_mobilenet):
    """A small MobileNet-like CNN (depthwise convs, inverted residuals) trained on 16x16 digits."""
    return copy.deepcopy(_trained_mobilenet)
