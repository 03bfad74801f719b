"""Datasets for ``stallscope compress``: loading ``--data``, splitting, and checking the arrays.

A dataset is three labelled splits of numpy arrays: *train* (calibration for the Fisher
sensitivity and for int8 quantization, and fine-tuning after each pruning step), *validation*
(the accuracy gate: every pruning step and the final quantized model are judged here) and
*test* (held out; only reported, never used for a decision).

``--data`` accepts either

* a ``.npz`` file with arrays ``X`` and ``y`` (split here: 60/20/20, stratified, seeded), or with
  explicit ``X_train, y_train, X_val, y_val, X_test, y_test``; or
* ``MODULE:FUNC``: an importable function called without arguments that returns ``(X, y)``, a
  mapping with the same keys as the ``.npz`` file, or a :class:`Splits`.

``X`` is float data shaped like the model input with the batch first (``N, C, H, W`` for a CNN);
``y`` holds integer class labels ``0..K-1``. This module imports numpy only (no torch).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stallscope.compress.failures import first_line
from stallscope.errors import CompressError

SPLIT_KEYS = ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test")


@dataclass(frozen=True)
class Splits:
    """Train / validation / test arrays of one classification dataset.

    ``x_*`` are float32 with the batch first; ``y_*`` are int64 labels in ``[0, num_classes)``.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    name: str = "data"

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample (without the batch dimension)."""
        return tuple(int(d) for d in self.x_train.shape[1:])

    def describe(self) -> str:
        """One line: sizes of the splits and the sample shape."""
        return (
            f"{self.name}: train {len(self.y_train)}, val {len(self.y_val)}, test {len(self.y_test)}, "
            f"sample shape {self.input_shape}, {self.num_classes} classes"
        )


def split(
    x: np.ndarray,
    y: np.ndarray,
    *,
    val_fraction: float = 0.2,
    test_fraction: float = 0.2,
    seed: int = 0,
    name: str = "data",
) -> Splits:
    """Split ``(x, y)`` into train / validation / test, stratified by class when possible."""
    from sklearn.model_selection import train_test_split

    x, y = _check_xy(x, y, where=name)
    if not 0 < val_fraction < 1 or not 0 < test_fraction < 1 or val_fraction + test_fraction >= 1:
        raise CompressError(f"{name}: val and test fractions must be in (0, 1) and sum below 1")
    counts = np.bincount(y)
    stratify = y if counts[counts > 0].min() >= 3 else None
    x_rest, x_test, y_rest, y_test = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=stratify
    )
    stratify_rest = y_rest if stratify is not None else None
    x_train, x_val, y_train, y_val = train_test_split(
        x_rest, y_rest, test_size=val_fraction / (1 - test_fraction), random_state=seed, stratify=stratify_rest
    )
    return make_splits(x_train, y_train, x_val, y_val, x_test, y_test, name=name)


def make_splits(
    x_train: Any,
    y_train: Any,
    x_val: Any,
    y_val: Any,
    x_test: Any,
    y_test: Any,
    *,
    name: str = "data",
) -> Splits:
    """Validate six arrays and bundle them; the class count is the largest label + 1."""
    parts = {}
    for split_name, (x, y) in {
        "train": (x_train, y_train),
        "val": (x_val, y_val),
        "test": (x_test, y_test),
    }.items():
        parts[split_name] = _check_xy(x, y, where=f"{name} ({split_name} split)")
    shapes = {k: v[0].shape[1:] for k, v in parts.items()}
    if len(set(shapes.values())) != 1:
        raise CompressError(f"{name}: the splits have different sample shapes: {shapes}")
    num_classes = int(max(int(v[1].max()) for v in parts.values())) + 1
    if num_classes < 2:
        raise CompressError(f"{name}: labels must hold at least two classes")
    return Splits(
        *parts["train"], *parts["val"], *parts["test"], num_classes=num_classes, name=name
    )


def load(spec: str, *, seed: int = 0) -> Splits:
    """Load ``--data``: a ``.npz`` path or ``MODULE:FUNC`` (see the module docstring)."""
    path = Path(spec)
    if spec.endswith(".npz") or path.exists():
        return _from_npz(path, seed=seed)
    if ":" in spec:
        return _from_callable(spec, seed=seed)
    raise CompressError(f"--data {spec!r}: expected an existing .npz file or MODULE:FUNC")


def _from_npz(path: Path, *, seed: int) -> Splits:
    if not path.exists():
        raise CompressError(f"--data {path}: no such file")
    if not path.is_file():
        raise CompressError(f"--data {path}: not a file (expected a .npz file)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except Exception as exc:  # zipfile.BadZipFile, ValueError, OSError, ...
        raise CompressError(f"--data {path}: not a readable .npz file ({first_line(exc)})") from None
    return _from_mapping(arrays, name=path.stem, seed=seed, where=f"--data {path}")


def _from_callable(spec: str, *, seed: int) -> Splits:
    func = resolve_callable(spec, what="--data")
    try:
        result = func()
    except Exception as exc:
        raise CompressError(f"--data {spec}: the function raised {first_line(exc)}") from None
    if isinstance(result, Splits):
        return result
    name = spec.rsplit(":", 1)[1]
    if isinstance(result, Mapping):
        return _from_mapping(dict(result), name=name, seed=seed, where=f"--data {spec}")
    if isinstance(result, tuple) and len(result) == 2:
        return split(_to_numpy(result[0]), _to_numpy(result[1]), seed=seed, name=name)
    raise CompressError(
        f"--data {spec}: expected (X, y), a mapping with X/y or {', '.join(SPLIT_KEYS)}, or Splits; "
        f"got {type(result).__name__}"
    )


def _from_mapping(arrays: dict[str, Any], *, name: str, seed: int, where: str) -> Splits:
    arrays = {k: _to_numpy(v) for k, v in arrays.items()}
    if all(k in arrays for k in SPLIT_KEYS):
        try:
            return make_splits(*(arrays[k] for k in SPLIT_KEYS), name=name)
        except CompressError as exc:
            raise CompressError(f"{where}: {exc}") from None
    if "X" in arrays and "y" in arrays:
        try:
            return split(arrays["X"], arrays["y"], seed=seed, name=name)
        except CompressError as exc:
            raise CompressError(f"{where}: {exc}") from None
    raise CompressError(f"{where}: expected arrays X and y (or {', '.join(SPLIT_KEYS)}); found {sorted(arrays)}")


def resolve_callable(spec: str, *, what: str) -> Any:
    """Import ``MODULE:ATTR`` (dots allowed in ATTR) and return the attribute.

    The current directory is importable, as it is for ``python -m``: users point at a file
    beside them without installing it.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CompressError(f"{what} {spec!r}: expected MODULE:NAME, e.g. mypkg.models:build")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise CompressError(
            f"{what} {spec}: cannot import {module_name!r} ({first_line(exc)})"
        ) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CompressError(f"{what} {spec}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise CompressError(f"{what} {spec}: {attr!r} is not callable")
    return obj


def _check_xy(x: Any, y: Any, *, where: str) -> tuple[np.ndarray, np.ndarray]:
    x = _to_numpy(x)
    y = _to_numpy(y)
    if x.ndim < 2:
        raise CompressError(f"{where}: X must have a batch dimension and a sample shape; got shape {x.shape}")
    if y.ndim != 1:
        raise CompressError(f"{where}: y must be a 1-D array of class labels; got shape {y.shape}")
    if len(x) != len(y):
        raise CompressError(f"{where}: X has {len(x)} samples but y has {len(y)} labels")
    if len(x) == 0:
        raise CompressError(f"{where}: no samples")
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        raise CompressError(f"{where}: X must be real numbers; got dtype {x.dtype}")
    x = x.astype(np.float32, copy=False)
    if not np.isfinite(x).all():
        raise CompressError(f"{where}: X holds NaN or infinite values")
    if np.issubdtype(y.dtype, np.floating):
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise CompressError(f"{where}: y must hold integer class labels")
    elif not np.issubdtype(y.dtype, np.integer):
        raise CompressError(f"{where}: y must hold integer class labels; got dtype {y.dtype}")
    y = y.astype(np.int64)
    if y.min() < 0:
        raise CompressError(f"{where}: class labels must be >= 0")
    return np.ascontiguousarray(x), y


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    return np.asarray(value)

