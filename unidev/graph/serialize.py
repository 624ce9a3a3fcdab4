"""Graph files (JSON, constants base64): save a graph, load it back through every check."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from ..contract import dtypes as _dtypes
from ..core.errors import InvalidArgumentError
from .ir import Graph, Value

__all__ = ["save", "load", "FORMAT"]

FORMAT = "unidev-graph/1"


def _jsonable(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def to_dict(g: Graph) -> dict:
    order = g.order()
    return {
        "format": FORMAT, "name": g.name,
        "inputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype} for v in g.inputs],
        "consts": [{"name": v.name, "shape": list(d.shape), "dtype": v.dtype,
                    "data": base64.b64encode(np.ascontiguousarray(d).tobytes()).decode()}
                   for v, d in g.consts.items()],
        "nodes": [{"name": n.name, "op": n.op,
                   "inputs": [v.name if v is not None else None for v in n.inputs],
                   "attrs": {k: _jsonable(a) for k, a in n.attrs.items()},
                   "outputs": [o.name for o in n.outputs]} for n in order],
        "outputs": [v.name for v in g.outputs],
    }


def save(g: Graph, path: str) -> None:
    with open(path, "w") as f:
        json.dump(to_dict(g), f, indent=1)


def from_dict(d: dict, where: str = "graph file") -> Graph:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise InvalidArgumentError(f"{where}: expected a JSON object with format {FORMAT!r}")
    try:
        g = Graph(d["name"])
        env: dict[str, Value] = {}
        for e in d["inputs"]:
            env[e["name"]] = g.input(e["shape"], e["dtype"], e["name"])
        for e in d["consts"]:
            data = np.frombuffer(base64.b64decode(e["data"]), _dtypes.to_numpy(e["dtype"]))
            env[e["name"]] = g.const(data.reshape(e["shape"]), e["name"])
        for e in d["nodes"]:
            ins = []
            for name in e["inputs"]:
                if name is not None and name not in env:
                    raise InvalidArgumentError(
                        f"node '{e['name']}' ({e['op']}): input %{name} is not defined before "
                        "it (a dangling value or a cycle)")
                ins.append(env[name] if name is not None else None)
            n = g.node(e["op"], ins, e["attrs"], name=e["name"],
                       outputs=len(e["outputs"]) if e["op"] == "elementwise_program" else None,
                       shape=e.get("shape"), dtype=e.get("dtype"))
            if len(n.outputs) != len(e["outputs"]):
                raise InvalidArgumentError(f"node '{n.name}' ({n.op}): the file lists "
                                           f"{len(e['outputs'])} outputs, the op makes "
                                           f"{len(n.outputs)}")
            g._names.difference_update(o.name for o in n.outputs)
            for o, name in zip(n.outputs, e["outputs"], strict=True):
                o.name = g._fresh(name, "v")
                env[name] = o
        g.output(*(env[name] for name in d["outputs"]))
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, InvalidArgumentError):
            raise
        raise InvalidArgumentError(f"{where}: malformed ({type(e).__name__}: {e})") from None
    return g


def load(path: str) -> Graph:
    with open(path) as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"{path}: not a graph file ({e})") from None
    return from_dict(d, path)
