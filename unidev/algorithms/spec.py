"""What an algorithm is (AlgorithmSpec), what a layer is (Layer), and whether one fits the other."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AlgorithmError", "AlgorithmSpec", "Layer", "CONV_OPS", "RULES", "why_not"]

# the ops with an `algorithm` attribute (unidev/contract/opset.py); a conv layer runs the first
# three (forward, grad of x, grad of weight)
CONV_OPS = ("conv2d", "conv2d_backward_input", "conv2d_backward_weight", "conv2d_bias_act")

# the declarative rules an AlgorithmSpec may state in `requires`, with what each means
RULES = {
    "kernel": "kernel (R, S) equals the value",
    "stride": "stride equals the value",
    "dilation": "dilation equals the value",
    "groups": "1: ungrouped only; 'depthwise': one input channel per group only",
    "min_channels": "input and output channels per group are both >= the value",
}


class AlgorithmError(ValueError):
    """A selector, an algorithm name or a layer that do not go together; says which and why."""


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm of one op, as a plugin (hook ``unidev_algorithms``) or a user declares it.

    ``dtypes``: None for every dtype the plugin has a kernel for. ``requires``: rules of
    :data:`RULES` the layer must meet. ``applies``: an optional predicate of a :class:`Layer`
    returning None if the algorithm can run it, else a one-line reason. ``fn``: a Python
    composite (for algorithms registered with ``unidev.algorithms.register``); None for the
    plugin's own kernels, which get the name as their ``algorithm`` attribute.
    """

    name: str
    description: str
    dtypes: tuple[str, ...] | None = None
    requires: Mapping[str, Any] = field(default_factory=dict)
    applies: Callable[[Layer], str | None] | None = None
    fn: Callable[..., Any] | None = None
    plugin: str = ""  # filled by the catalog: who provides it ("" for a custom one)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name in ("auto", "autotune"):
            raise AlgorithmError(f"AlgorithmSpec.name: {self.name!r} must be a non-empty string "
                                 "other than 'auto' and 'autotune'")
        bad = sorted(set(self.requires) - set(RULES))
        if bad:
            raise AlgorithmError(f"AlgorithmSpec {self.name!r}: unknown rule(s) {bad}; known: "
                                 f"{sorted(RULES)}")

    def rule_text(self) -> str:
        """The requirements in words, e.g. ``kernel 3x3, stride 1x1`` (or ``any``)."""
        parts = []
        for key, value in self.requires.items():
            shown = "x".join(map(str, value)) if isinstance(value, tuple | list) else str(value)
            parts.append(f"{key.replace('_', ' ')} {shown}")
        if self.applies is not None:
            parts.append("plugin check")
        return ", ".join(parts) or "any"


@dataclass(frozen=True)
class Layer:
    """A convolution layer as a selector sees it. ``input_shape`` is None until known."""

    name: str
    index: int
    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    dtype: str = "float32"
    device: str = ""  # the plugin's name
    bias: bool = True
    input_shape: tuple[int, ...] | None = None

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.out_channels, self.in_channels // self.groups, *self.kernel)

    @property
    def output_shape(self) -> tuple[int, ...] | None:
        if self.input_shape is None:
            return None
        n, _, h, w = self.input_shape
        oh, ow = ((size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, s, p, d in zip(
            (h, w), self.kernel, self.stride, self.padding, self.dilation, strict=True))
        return (n, self.out_channels, oh, ow)

    @property
    def depthwise(self) -> bool:
        return self.in_channels == self.groups

    def with_input(self, shape: tuple[int, ...]) -> Layer:
        return Layer(**{**self.__dict__, "input_shape": tuple(int(s) for s in shape)})

    def __str__(self) -> str:
        pair = "x".join
        text = (f"layer {self.index} {self.name!r} (conv {self.in_channels}->{self.out_channels}, "
                f"kernel {pair(map(str, self.kernel))}, stride {pair(map(str, self.stride))}, "
                f"dilation {pair(map(str, self.dilation))}, groups {self.groups}, {self.dtype}")
        if self.input_shape is not None:
            text += f", input {list(self.input_shape)}"
        return text + ")"


def _check_rule(key: str, want: Any, layer: Layer) -> str | None:
    if key in ("kernel", "stride", "dilation"):
        got = getattr(layer, key)
        if tuple(want) != tuple(got):
            return f"needs {key} {'x'.join(map(str, want))}, got {'x'.join(map(str, got))}"
    elif key == "groups":
        if want == "depthwise" and not layer.depthwise:
            return f"needs a depthwise layer (groups == in_channels), got groups {layer.groups}"
        if want == 1 and layer.groups != 1:
            return f"needs groups 1, got {layer.groups}"
    elif key == "min_channels":
        cg, kg = layer.in_channels // layer.groups, layer.out_channels // layer.groups
        if min(cg, kg) < want:
            return f"needs >= {want} channels per group on both sides, got {cg} and {kg}"
    return None


def why_not(spec: AlgorithmSpec, layer: Layer, kernel_dtypes: tuple[str, ...] = ()) -> str | None:
    """None if `spec` can run `layer`, else why not (dtype, rules, then the predicate)."""
    dtypes = spec.dtypes if spec.dtypes is not None else kernel_dtypes or None
    if dtypes is not None and layer.dtype not in dtypes:
        return f"supports {', '.join(dtypes)} only, the layer is {layer.dtype}"
    for key, want in spec.requires.items():
        reason = _check_rule(key, want, layer)
        if reason:
            return reason
    if spec.applies is not None:
        try:
            reason = spec.applies(layer)
        except Exception as exc:  # a plugin's predicate must not take the caller down with it
            return f"its applicability check raised {type(exc).__name__}: {exc}"
        if reason is not None and not isinstance(reason, str):
            return f"its applicability check returned {type(reason).__name__}, expected str|None"
        return reason
    return None


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
