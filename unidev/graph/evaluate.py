"""Reference interpreter: runs a graph through the numpy reference (the oracle for passes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..contract import dtypes as _dtypes
from ..core import reference
from ..core.errors import InvalidArgumentError
from .ir import Graph, Node, Value, type_str

__all__ = ["evaluate", "run_node"]


def _shape_ok(v: Value, a: np.ndarray) -> bool:
    return len(v.shape) == a.ndim and all(isinstance(d, str) or d == e
                                          for d, e in zip(v.shape, a.shape, strict=True))


def run_node(n: Node, ins: list) -> list[np.ndarray]:
    """One node on numpy arrays; outputs in node order (updated versions are the inputs,
    updated in place)."""
    if n.op == "reshape":
        return [np.reshape(ins[0], n.outputs[0].shape)]
    if n.op == "transpose":
        return [np.transpose(ins[0], n.attrs["perm"])]
    if n.op == "expand":
        return [np.broadcast_to(ins[0], n.outputs[0].shape)]
    out = None
    if not n.inputs:  # fill, zero, arange: shape and dtype from the output
        out = [np.empty(tuple(o.shape), _dtypes.to_numpy(o.dtype)) for o in n.outputs]
    specs = n.schema.inputs
    if specs and not specs[0].variadic:  # constants the op only reads (inference batch_norm)
        ins = [np.array(a) if a is not None and s.mutated and not a.flags.writeable else a
               for a, s in zip(ins, specs, strict=False)]
    try:
        res = list(reference.run(n.op, ins, n.attrs, out=out))
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"node '{n.name}' ({n.op}): {e}") from None
    return res + [ins[n.inputs.index(o.updates)] for o in n.outputs if o.updates is not None]


def evaluate(graph: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run `graph` on numpy `inputs` (graph input order) through unidev.core.reference.

    Like the plan executor, inputs the graph updates in place (optimizer state, running
    stats) are updated in the given arrays; pass copies to keep them.
    """
    if len(inputs) != len(graph.inputs):
        raise InvalidArgumentError(f"evaluate: graph '{graph.name}' takes {len(graph.inputs)} "
                                   f"inputs, got {len(inputs)}")
    env: dict[Value, np.ndarray] = {}
    bind: dict[str, int] = {}
    for k, (v, a) in enumerate(zip(graph.inputs, inputs, strict=True)):
        a = np.asarray(a)
        if a.dtype != _dtypes.to_numpy(v.dtype) or not _shape_ok(v, a) or any(
                bind.setdefault(d, e) != e for d, e in zip(v.shape, a.shape, strict=True)
                if isinstance(d, str)):
            raise InvalidArgumentError(f"evaluate: input {k} (%{v.name}) is {a.dtype}"
                                       f"{list(a.shape)}, expected {type_str(v)}"
                                       + (f" with {bind}" if bind else ""))
        env[v] = a
    if bind:  # symbolic dims take the inputs' sizes: run the specialized graph
        concrete = graph.specialize(**bind)
        return evaluate(concrete, [env[v] for v in graph.inputs])
    env.update(graph.consts)
    outputs = set(graph.outputs)
    snap: dict[Value, np.ndarray] = {}  # outputs whose storage is updated after them
    for n in graph.order():
        for i, _ in n.mutated:
            for w in outputs:
                if w in env and w not in snap and np.shares_memory(env[w], env[n.inputs[i]]):
                    snap[w] = env[w].copy()
        res = run_node(n, [env[v] if v is not None else None for v in n.inputs])
        for o, r in zip(n.outputs, res, strict=True):
            env[o] = r
    return [np.array(snap.get(v, env[v]), copy=True) for v in graph.outputs]
