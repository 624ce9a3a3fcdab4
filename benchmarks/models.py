"""The torch models of the benchmark rows: conv-net, depthwise-heavy net, resnet18 (224²), MLP."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from unidev.demos import torch_models


def convnet() -> nn.Module:
    """The issue's small ResNet-style net: 3×3 conv + BatchNorm + ReLU stem, max-pool, two
    residual blocks (32 and 64 channels), global average pool, linear (unidev.demos' resnet at
    width 32; batch 32 at 32×32 trains in ~23 ms a step on torch CPU on a quiet 2-core machine)."""
    return torch_models.resnet(width=32)


class InvertedResidual(nn.Module):
    """MobileNetV2/V3 and EfficientNet's block: 1×1 expand, depthwise k×k (stride), optional
    squeeze-and-excitation, 1×1 project, residual when the shape is kept."""

    def __init__(self, cin: int, expand: int, cout: int, k: int, stride: int, se: bool) -> None:
        super().__init__()
        mid = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU()]
        layers += [nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False),
                   nn.BatchNorm2d(mid), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, max(8, mid // 4), 1),
                                nn.ReLU(), nn.Conv2d(max(8, mid // 4), mid, 1),
                                nn.Sigmoid()) if se else None
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        if self.se is not None:
            y = y * self.se(y)
        y = self.project(y)
        return x + y if self.residual else y


# (expand, out channels, kernel, stride, squeeze-excite): MobileNetV3-Small-like, on 64×64.
DEPTHWISE_BLOCKS = [(1, 16, 3, 2, True), (4, 24, 3, 2, False), (3, 24, 3, 1, False),
                    (4, 40, 5, 2, True), (6, 40, 5, 1, True), (3, 48, 5, 1, True),
                    (6, 96, 5, 2, True), (6, 96, 5, 1, True)]


def depthwise_net(classes: int = 10) -> nn.Module:
    """A MobileNetV3-Small-like net (ReLU for hard-swish): 3×3/2 stem, the inverted-residual
    blocks of DEPTHWISE_BLOCKS (depthwise 3×3 and 5×5, strides 2, SE on most), 1×1 to 576,
    global average pool, linear."""
    layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                               nn.ReLU()]
    cin = 16
    for expand, cout, k, stride, se in DEPTHWISE_BLOCKS:
        layers.append(InvertedResidual(cin, expand, cout, k, stride, se))
        cin = cout
    layers += [nn.Conv2d(cin, 576, 1, bias=False), nn.BatchNorm2d(576), nn.ReLU(),
               nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(576, classes)]
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """ResNet-18/34's block: two 3×3 conv + BatchNorm, ReLU, a 1×1/2 projection when it shrinks."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


def resnet18(classes: int = 1000) -> nn.Module:
    """ResNet-18 (He et al. 2015; torchvision's layer configuration): 7×7/2 stem, 3×3/2 max-pool,
    four stages of two BasicBlocks (64, 128, 256, 512 channels), average pool, linear."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                               nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for i, cout in enumerate((64, 128, 256, 512)):
        layers += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def mlp() -> nn.Module:
    """512-1024-1024-10 with ReLU: GEMM-bound at batch 256."""
    return torch_models.mlp(inputs=512, hidden=1024)


@dataclass(frozen=True)
class Row:
    """One training-step row: a model, its input (batch, channels or features, size), classes."""

    key: str
    title: str
    build: object  # () -> nn.Module
    batch: int
    shape: tuple[int, ...]  # one sample's shape
    classes: int = 10

    def data(self, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(self.batch, *self.shape, generator=g)
        return x, torch.randint(0, self.classes, (self.batch,), generator=g)


def rows(quick: bool) -> list[Row]:
    """The training-step rows; quick: smaller batches (a smoke run, not the reported figures)."""
    b = (lambda full, small: small) if quick else (lambda full, small: full)
    return [
        Row("mlp", f"MLP step (batch {b(256, 64)}, 512-1024-1024-10)", mlp, b(256, 64), (512,)),
        Row("convnet", f"conv-net step (ResNet-style, batch {b(32, 8)}, 32²)", convnet,
            b(32, 8), (3, 32, 32)),
        Row("depthwise", f"depthwise net step (MobileNetV3-like, batch {b(32, 8)}, 64²)",
            depthwise_net, b(32, 8), (3, 64, 64)),
        Row("resnet18", f"resnet18 step (batch {b(4, 1)}, 224²)", resnet18, b(4, 1),
            (3, 224, 224), 1000),
    ]
