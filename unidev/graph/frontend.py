"""Operand and shape helpers that frontends' translations into the IR share (no framework)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .ir import Graph, Value

__all__ = ["operand", "axes", "pair", "squeezed", "unsqueezed", "swapped", "expanded"]


def operand(g: Graph, v: Any, like: Value) -> Value:
    """A tensor operand; a Python number becomes a 0-d constant of `like`'s dtype."""
    if isinstance(v, Value):
        return v
    if isinstance(v, bool | int | float):
        return g.const(np.array(v, dtype=np.dtype(like.dtype)))
    raise TypeError(f"operand {v!r}")


def axes(dims: Any, ndim: int) -> tuple[int, ...]:
    """Sorted non-negative axes of `dims` (an int, a list, or None/empty: all of them)."""
    if dims is None or (isinstance(dims, list | tuple) and not dims):
        return tuple(range(ndim))
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted(d % max(ndim, 1) for d in dims))


def pair(v: Any) -> tuple[int, int]:
    """A 2-d attribute from one value or a list of one or two."""
    v = tuple(v) if isinstance(v, list | tuple) else (v,)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def squeezed(x: Value, dims: Any = None) -> tuple:
    """x's shape without its size-1 dimensions among `dims` (None: any)."""
    ax = axes(dims, x.ndim) if dims is not None else range(x.ndim)
    return tuple(d for i, d in enumerate(x.shape) if not (i in ax and d == 1))


def unsqueezed(x: Value, dim: int) -> tuple:
    """x's shape with a size-1 dimension inserted at `dim` (negative: from the end)."""
    s = list(x.shape)
    s.insert(dim % (x.ndim + 1), 1)
    return tuple(s)


def swapped(ndim: int, i: int, j: int) -> tuple[int, ...]:
    """The permutation exchanging axes i and j (negative: from the end)."""
    perm = list(range(ndim))
    i, j = i % ndim, j % ndim
    perm[i], perm[j] = perm[j], perm[i]
    return tuple(perm)


def expanded(x: Value, shape: Any) -> tuple[int, ...]:
    """An expand's target shape, -1 keeping x's size there (leading new dims allowed)."""
    return tuple(x.shape[i - len(shape) + x.ndim] if d == -1 else int(d)
                 for i, d in enumerate(shape))
