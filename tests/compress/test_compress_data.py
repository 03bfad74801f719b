"""Loading --data: .npz files, MODULE:FUNC, and one-line errors for bad arrays."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from stallscope.compress.data import load, make_splits, split
from stallscope.errors import CompressError


def _xy(n=200, shape=(1, 8, 8), classes=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, *shape)).astype(np.float32), rng.integers(0, classes, size=n)


def test_npz_with_x_and_y_is_split_stratified(tmp_path):
    x, y = _xy()
    np.savez(tmp_path / "d.npz", X=x, y=y)
    s = load(str(tmp_path / "d.npz"))
    assert len(s.y_train) + len(s.y_val) + len(s.y_test) == 200
    assert len(s.y_test) == 40 and len(s.y_val) == 40
    assert s.input_shape == (1, 8, 8) and s.num_classes == 4
    assert set(np.unique(s.y_val)) == {0, 1, 2, 3}
    assert s.x_train.dtype == np.float32


def test_npz_with_explicit_splits_is_used_as_is(tmp_path):
    x, y = _xy()
    np.savez(tmp_path / "d.npz", X_train=x[:100], y_train=y[:100], X_val=x[100:150], y_val=y[100:150],
             X_test=x[150:], y_test=y[150:])
    s = load(str(tmp_path / "d.npz"))
    assert (len(s.y_train), len(s.y_val), len(s.y_test)) == (100, 50, 50)
    np.testing.assert_array_equal(s.x_test, x[150:])


def test_module_function_returning_xy(tmp_path, monkeypatch):
    (tmp_path / "my_data_mod.py").write_text(
        "import numpy as np\n"
        "def get():\n"
        "    rng = np.random.default_rng(1)\n"
        "    return rng.normal(size=(90, 3, 4, 4)), np.arange(90) % 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    s = load("my_data_mod:get")
    assert s.input_shape == (3, 4, 4) and s.num_classes == 3
    sys.modules.pop("my_data_mod", None)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"X": np.zeros((10, 1, 8, 8)), "y": np.zeros(9)}, "X has 10 samples but y has 9"),
        ({"X": np.zeros(10), "y": np.zeros(10)}, "batch dimension"),
        ({"X": np.zeros((10, 4)), "y": np.full(10, 0.5)}, "integer class labels"),
        ({"X": np.full((10, 4), np.nan), "y": np.zeros(10)}, "NaN"),
        ({"features": np.zeros((10, 4))}, "expected arrays X and y"),
    ],
)
def test_bad_arrays_are_one_line_errors(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(CompressError, match=message) as err:
        load(str(tmp_path / "bad.npz"))
    assert "\n" not in str(err.value)


def test_missing_file_and_bad_specs():
    with pytest.raises(CompressError, match="no such file"):
        load("/nonexistent/x.npz")
    with pytest.raises(CompressError, match="cannot import"):
        load("no_such_module_xyz:f")
    with pytest.raises(CompressError, match="expected an existing .npz file or MODULE:FUNC"):
        load("plainword")


def test_splits_must_share_a_sample_shape():
    x, y = _xy()
    with pytest.raises(CompressError, match="different sample shapes"):
        make_splits(x[:50], y[:50], x[50:100, :, :4], y[50:100], x[100:], y[100:])


def test_split_is_deterministic():
    x, y = _xy()
    a, b = split(x, y, seed=3), split(x, y, seed=3)
    np.testing.assert_array_equal(a.y_test, b.y_test)
