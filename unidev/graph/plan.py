"""Plans: a lowered, shape-specialized graph: kernel per step, temps in an arena; file format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

BUFFER_KINDS = ("input", "output", "const", "temp")


@dataclass
class Buffer:
    """One memory region a step reads or writes; temps live in the arena at `offset`."""

    index: int
    kind: str
    slot: int
    nbytes: int
    offset: int = 0


@dataclass
class TensorRef:
    """A strided view (strides and offset in elements) of one buffer."""

    buffer: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0


@dataclass
class Step:
    """One kernel call: op, kernel dtype, views, attributes (name, type, value) in schema order."""

    op: str
    dtype: str
    inputs: list[TensorRef | None]
    outputs: list[TensorRef]
    attrs: list[tuple[str, str, Any]] = field(default_factory=list)
    node: str = ""


@dataclass
class Plan:
    """Steps over buffers; the arena holds every temp; consts are uploaded once."""

    steps: list[Step]
    buffers: list[Buffer]
    arena_bytes: int
    consts: list[np.ndarray]
    inputs: list[TensorRef]
    outputs: list[TensorRef]
    key: str = ""
    plugin: str = ""
    meta: dict = field(default_factory=dict)
