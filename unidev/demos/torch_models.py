"""Small models for the demo, the tests and the benchmark: an MLP, a CNN, a small ResNet."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, c: int, stride: int = 1) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(c // stride, c, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(c)
        self.skip = None if stride == 1 else nn.Sequential(
            nn.Conv2d(c // stride, c, 1, stride, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.skip is None else self.skip(x)))


def resnet(width: int = 8, classes: int = 10) -> nn.Module:
    """conv-bn-relu-maxpool stem, two residual blocks, adaptive average pool, linear."""
    return nn.Sequential(
        nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        nn.MaxPool2d(2), Block(width), Block(2 * width, stride=2), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(2 * width, classes))


def mlp(inputs: int = 32, hidden: int = 64, classes: int = 10) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, classes))


def small_cnn(classes: int = 5) -> nn.Module:
    """The demo's CNN, layer for layer the Keras model of unidev's TensorFlow demo (NCHW here)."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(8, classes))
