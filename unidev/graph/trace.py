"""Tracing: ``with unidev.graph.trace() as g:`` records unidev.ops calls into a Graph."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..contract import opset
from ..core import ops as _ops
from ..core.array import DeviceArray
from ..core.errors import InvalidArgumentError
from .ir import Graph, Value

__all__ = ["trace"]


class _Recorder:
    def __init__(self, g: Graph, constants: bool) -> None:
        self.g, self.constants = g, constants
        self.thread = threading.get_ident()
        self.seen: dict[int, tuple[DeviceArray, Value]] = {}

    def value(self, op: str, arg: str, x: Any) -> Value | None:
        if x is None or isinstance(x, Value):
            return x
        if isinstance(x, DeviceArray):
            if id(x) not in self.seen:  # keep x alive so its id is not reused
                v = (self.g.const(x.numpy()) if self.constants
                     else self.g.input(x.shape, x.dtype))
                self.seen[id(x)] = (x, v)
                if not self.constants:
                    self.g.meta.setdefault("bindings", {})[v.name] = x
            return self.seen[id(x)][1]
        if isinstance(x, np.ndarray):
            return self.g.const(x)
        raise InvalidArgumentError(f"{op}: input '{arg}' is a {type(x).__name__}, expected a "
                                   "graph Value, a DeviceArray or a numpy array while tracing")

    def __call__(self, op: str, inputs: tuple, attrs: dict, *, out: Any, shape: Any,
                 dtype: Any) -> Any:
        if threading.get_ident() != self.thread:
            return NotImplemented  # only the tracing thread's calls are recorded
        schema = opset.get(op)
        if out is not None:
            raise InvalidArgumentError(f"{op}: out= is not recorded by unidev.graph.trace(); "
                                       "use the returned value")
        if schema.inputs and schema.inputs[0].variadic and len(inputs) == 1 and \
                isinstance(inputs[0], list | tuple):
            inputs = tuple(inputs[0])
        names = [i.name for i in schema.inputs] if not (schema.inputs and
                                                        schema.inputs[0].variadic) \
            else [f"{schema.inputs[0].name}[{k}]" for k in range(len(inputs))]
        vals = [self.value(op, names[k] if k < len(names) else str(k), x)
                for k, x in enumerate(inputs)]
        if dtype is not None and "dtype" in schema.attr_names:
            attrs = dict(attrs, dtype=dtype)
        return self.g.call(op, *vals, shape=shape, dtype=dtype, **attrs)


@contextlib.contextmanager
def trace(name: str = "trace", *, constants: bool = False) -> Iterator[Graph]:
    """Record unidev.ops calls made inside the block into the yielded Graph.

    Calls take graph Values (``g.input(shape, dtype)``), DeviceArrays (each becomes a graph
    input, listed in ``g.meta["bindings"]``; with constants=True its current contents become a
    constant) or numpy arrays (constants), and return Values; nothing runs on a device.
    """
    if _ops._trace_hook is not None:
        raise InvalidArgumentError("unidev.graph.trace(): already tracing (nested traces are "
                                   "not supported)")
    g = Graph(name)
    _ops._trace_hook = _Recorder(g, constants)
    try:
        yield g
    finally:
        _ops._trace_hook = None
