"""Per-layer algorithm selection (ai3's idea): list, select, autotune and register algorithms.

Framework-free: plugins list their algorithms (hook ``unidev_algorithms``), selectors pick one
per layer and direction, autotune times them with ``unidev.ops``. The PyTorch frontend is
``unidev.torch.swap_conv2d`` / ``swap_backend`` (imported only when used); see
docs/algorithms.md.
"""

from __future__ import annotations

from .catalog import algorithms, find, register, unregister
from .select import DIRECTIONS, Selector, check, directions, resolve
from .spec import CONV_OPS, RULES, AlgorithmError, AlgorithmSpec, Layer, why_not
from .tune import autotune, candidates, clear, decisions, run_algorithm

__all__ = [
    "AlgorithmError", "AlgorithmSpec", "CONV_OPS", "DIRECTIONS", "Layer", "RULES", "Selector",
    "algorithms", "autotune", "candidates", "check", "clear", "decisions", "directions", "find",
    "register", "resolve", "run_algorithm", "unregister", "why_not",
]
