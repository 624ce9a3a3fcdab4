"""Selectors (a name, a list, a function of the layer, "auto", "autotune") resolved per layer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .catalog import find, kernel_dtypes
from .spec import AlgorithmError, Layer, why_not

__all__ = ["Selector", "DIRECTIONS", "resolve", "check", "directions"]

Selector = str | Sequence[str] | Callable[[Layer], str]

# the ops a conv layer runs, in the order forward, grad of x, grad of weight
DIRECTIONS = ("conv2d", "conv2d_backward_input", "conv2d_backward_weight")
SPECIAL = ("auto", "autotune")


def describe(selector: Any) -> str:
    if isinstance(selector, str):
        return repr(selector)
    if callable(selector):
        return f"function {getattr(selector, '__qualname__', repr(selector))}"
    if isinstance(selector, list | tuple):
        return f"list of {len(selector)}"
    return type(selector).__name__


def check(name: str, layer: Layer, op: str, plugin: str, selector: str = "") -> None:
    """Raise AlgorithmError naming the layer, the algorithm and why if `name` cannot run it."""
    if name in SPECIAL:
        return
    spec = find(plugin, op, name, layer, selector)
    reason = why_not(spec, layer, kernel_dtypes(plugin, op))
    if reason is not None:
        by = f" (selector {selector})" if selector else ""
        raise AlgorithmError(f"{layer}: algorithm {name!r} of {op} on plugin {plugin!r}{by} "
                             f"does not apply: it {reason}")


def resolve(selector: Selector, layers: Sequence[Layer], op: str, plugin: str) -> list[str]:
    """One name per layer ("auto" and "autotune" kept as such), each checked against the layer.

    A list needs exactly one entry per layer; a function is called with each :class:`Layer`
    and must return a string. Errors name the layer, the selector and the reason.
    """
    desc = describe(selector)
    if isinstance(selector, str):
        names = [selector] * len(layers)
    elif isinstance(selector, list | tuple):
        if len(selector) != len(layers):
            raise AlgorithmError(f"{op}: selector is a list of {len(selector)} names but the "
                                 f"model has {len(layers)} matching layers "
                                 f"({', '.join(repr(lay.name) for lay in layers)})")
        names = list(selector)
    elif callable(selector):
        names = []
        for layer in layers:
            try:
                names.append(selector(layer))
            except AlgorithmError:
                raise
            except Exception as exc:
                raise AlgorithmError(f"{layer}: selector {desc} raised {type(exc).__name__}: "
                                     f"{exc}") from exc
    else:
        raise AlgorithmError(f"{op}: selector is a {type(selector).__name__}, expected an "
                             "algorithm name, a list of names, a function of the layer, 'auto' "
                             "or 'autotune'")
    for layer, name in zip(layers, names, strict=True):
        if not isinstance(name, str):
            raise AlgorithmError(f"{layer}: selector {desc} gave {name!r} "
                                 f"({type(name).__name__}) for {op}, expected an algorithm name "
                                 "(str)")
        check(name, layer, op, plugin, desc)
    return names


def directions(selector: Selector | Mapping[str, Selector]) -> dict[str, Selector]:
    """op -> selector for the three conv directions: one selector serves all three; a mapping
    gives each op its own, "conv2d" standing in for a gradient it leaves out."""
    if not isinstance(selector, Mapping):
        return dict.fromkeys(DIRECTIONS, selector)
    unknown = sorted(set(selector) - set(DIRECTIONS))
    if unknown:
        raise AlgorithmError(f"swap: unknown op key(s) {unknown}; expected {list(DIRECTIONS)}")
    base = selector.get("conv2d", "auto")
    return {op: selector.get(op, base) for op in DIRECTIONS}
