"""Built-in offline examples: ResNet-like and MobileNet-like CNNs on scikit-learn's digits.

scikit-learn ships the 1,797 8x8 handwritten digits with the package, so these examples need no
download. The images are upsampled (bilinear) to ``image_size`` so that the CNNs have spatial
extent worth pruning and a latency worth measuring.

* ``resnet-digits``: a ResNet-18-style network (3x3 basic blocks with residual adds and 1x1
  projection shortcuts, three stages). Residual adds couple the channels of every block in a
  stage; the pruner must remove them together.
* ``mobilenet-digits``: a MobileNetV2/V3-style network (inverted residuals: 1x1 expand, 3x3
  depthwise, 1x1 project, with residual adds). Depthwise convs couple their input and output
  channels.

Two presets: ``ci`` (small images, narrow nets, few epochs: the whole evaluation runs in well
under three minutes on two cores) and ``full`` (32x32, the benchmark in ``docs/benchmarks.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from stallscope.compress.data import Splits, split
from stallscope.errors import CompressError

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

ExampleName = Literal["resnet-digits", "mobilenet-digits"]
Preset = Literal["ci", "full"]
EXAMPLES: tuple[str, ...] = ("resnet-digits", "mobilenet-digits")
PRESETS: tuple[str, ...] = ("ci", "full")


@dataclass(frozen=True)
class Example:
    """A ready-to-run example: how to build the model, its data, and how long to train it."""

    name: str
    preset: str
    build: Callable[[], "nn.Module"]
    splits: Splits
    train_epochs: float
    #: settings of :class:`stallscope.compress.evaluate.EvaluateConfig` that this example changes
    config: dict[str, Any] = field(default_factory=dict)


def digits_splits(*, image_size: int = 32, seed: int = 0) -> Splits:
    """scikit-learn's digits as ``(N, 1, image_size, image_size)`` float32, standardized, split 60/20/20."""
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.from_numpy(digits.images.astype(np.float32) / 16.0).unsqueeze(1)
    if image_size != 8:
        x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False)
    x = (x - 0.3) / 0.4  # roughly zero-mean, unit-variance pixels
    return split(x.numpy(), digits.target.astype(np.int64), seed=seed, name=f"digits{image_size}")


def resnet_digits(*, width: int = 32, blocks: tuple[int, ...] = (2, 2, 2), num_classes: int = 10) -> "nn.Module":
    """ResNet-like CNN: 3x3 stem, ``len(blocks)`` stages of basic blocks (channels x1, x2, x4)."""
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.shortcut: nn.Module = nn.Identity()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))

    class ResNetDigits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
            stages: list[nn.Module] = []
            cin = width
            for i, n in enumerate(blocks):
                cout = width * 2**i
                layers = [BasicBlock(cin if j == 0 else cout, cout, 2 if (i > 0 and j == 0) else 1) for j in range(n)]
                stages.append(nn.Sequential(*layers))
                cin = cout
            self.stages = nn.Sequential(*stages)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, num_classes)

        def forward(self, x: Any) -> Any:
            return self.fc(self.pool(self.stages(self.stem(x))).flatten(1))

    return ResNetDigits()


def mobilenet_digits(
    *, width: int = 16, expand: int = 4, stages: tuple[tuple[int, int, int], ...] | None = None, num_classes: int = 10
) -> "nn.Module":
    """MobileNet-like CNN of inverted residual blocks; ``stages`` = ((channel multiple, blocks, stride), ...)."""
    from torch import nn

    layout = stages or ((1, 1, 1), (2, 2, 2), (4, 2, 2), (6, 2, 1))

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            hidden = cin * expand
            self.expand = nn.Sequential(nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish())
            self.depthwise = nn.Sequential(
                nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish()
            )
            self.project = nn.Sequential(nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.residual = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            out = self.project(self.depthwise(self.expand(x)))
            return x + out if self.residual else out

    class MobileNetDigits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.Hardswish())
            layers: list[nn.Module] = []
            cin = width
            for mult, n, stride in layout:
                cout = width * mult
                for j in range(n):
                    layers.append(InvertedResidual(cin, cout, stride if j == 0 else 1))
                    cin = cout
            self.blocks = nn.Sequential(*layers)
            head = cin * 4
            self.head = nn.Sequential(nn.Conv2d(cin, head, 1, bias=False), nn.BatchNorm2d(head), nn.Hardswish())
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(head, num_classes)

        def forward(self, x: Any) -> Any:
            return self.fc(self.pool(self.head(self.blocks(self.stem(x)))).flatten(1))

    return MobileNetDigits()


def load_example(name: str, *, preset: str = "full", seed: int = 0) -> Example:
    """Build an :class:`Example` by name (``resnet-digits`` | ``mobilenet-digits``) and preset."""
    if name not in EXAMPLES:
        raise CompressError(f"unknown example {name!r}; choose one of: {', '.join(EXAMPLES)}")
    if preset not in PRESETS:
        raise CompressError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
    ci = preset == "ci"
    splits = digits_splits(image_size=16 if ci else 32, seed=seed)
    build: Callable[[], nn.Module]
    if name == "resnet-digits":
        if ci:
            build = lambda: resnet_digits(width=16, blocks=(1, 1, 1))  # noqa: E731
        else:
            build = lambda: resnet_digits(width=32, blocks=(2, 2, 2))  # noqa: E731
    else:
        if ci:
            build = lambda: mobilenet_digits(width=8, expand=4, stages=((1, 1, 1), (2, 1, 2), (4, 1, 2)))  # noqa: E731
        else:
            build = lambda: mobilenet_digits(width=16, expand=4)  # noqa: E731
    # Digits has 1,077 training samples: one epoch is only 17 optimizer steps, so the fine-tune
    # after each pruning step takes a few epochs to recover.
    config: dict[str, Any] = {"finetune_epochs": 3.0}
    if ci:
        config = {"budget_fractions": (1.0,), "finetune_epochs": 2.0, "runs_b1": 100, "runs_b32": 20, "max_steps": 6}
    return Example(name=name, preset=preset, build=build, splits=splits, train_epochs=8 if ci else 15, config=config)
