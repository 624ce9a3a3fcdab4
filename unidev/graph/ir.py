"""The graph IR: nodes of op-set ops (and views) over typed values, checked as they are built."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..contract import dtypes as _dtypes
from ..contract import opset
from ..core import shapes
from ..core.errors import InvalidArgumentError
from ..core.ops import _check_scalars, normalize_attrs

__all__ = ["Value", "Node", "Graph", "VIEW_OPS", "Dim", "GraphError"]

Dim = int | str  # a str is a symbolic dimension (a batch size bound when the graph is lowered)
GraphError = InvalidArgumentError

# Graph-level views: no kernel, lowering turns them into strides (reshape of a non-contiguous
# value becomes a copy). StableHLO's reshape / transpose / broadcast_in_dim.
VIEW_OPS = {"reshape": ("shape",), "transpose": ("perm",), "expand": ("shape",)}

# symbolic dims go through the op set's integer shape rules as large primes; a result equal to
# one maps back to its symbol, any other huge result means the rule transformed a symbol
_SENTINELS = (1000000000039, 1000000000061, 1000000000063, 1000000000091, 1000000000121,
              1000000000163, 1000000000169, 1000000000177)
_SENTINEL_FLOOR = 10**11


class Value:
    """A tensor in the graph: made by a node (`producer`, output `index`), an input or a const.

    `updates` is set on the value a node writes in place: the new version of that older value
    (same storage; readers of the old version run before the update).
    """

    __slots__ = ("graph", "name", "shape", "dtype", "producer", "index", "kind", "updates")

    def __init__(self, graph: Graph, name: str, shape: tuple, dtype: str, kind: str,
                 producer: Node | None = None, index: int = 0,
                 updates: Value | None = None) -> None:
        self.graph, self.name, self.shape, self.dtype, self.kind = graph, name, shape, dtype, kind
        self.producer, self.index, self.updates = producer, index, updates

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"%{self.name}: {type_str(self)}"

    # DeviceArray-like views, so traced code can write x.T or x.reshape(...)
    def reshape(self, *shape: Dim) -> Value:
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], list | tuple) \
            else shape
        return self.graph.call("reshape", self, shape=shape)

    def transpose(self, *perm: int) -> Value:
        perm = tuple(perm[0]) if len(perm) == 1 and isinstance(perm[0], list | tuple) else perm
        return self.graph.call("transpose", self, perm=perm or tuple(reversed(range(self.ndim))))

    @property
    def T(self) -> Value:
        return self.transpose()

    def broadcast_to(self, shape: Sequence[Dim]) -> Value:
        return self.graph.call("expand", self, shape=tuple(shape))


class Node:
    """One op applied to input values (None for an absent optional input)."""

    __slots__ = ("name", "op", "inputs", "attrs", "outputs", "targets")

    def __init__(self, name: str, op: str, inputs: list, attrs: dict) -> None:
        self.name, self.op, self.inputs, self.attrs = name, op, inputs, attrs
        self.outputs: list[Value] = []
        self.targets: list = []  # per input: the shape it is broadcast to, or None

    @property
    def mutated(self) -> list[tuple[int, Value]]:
        """(input position, new version) for each input this node updates in place."""
        return [(self.inputs.index(v.updates), v) for v in self.outputs if v.updates is not None]

    @property
    def schema(self) -> opset.OpSchema | None:
        return None if self.op in VIEW_OPS else opset.get(self.op)

    def __repr__(self) -> str:
        return f"node '{self.name}' ({self.op})"


def type_str(v: Value) -> str:
    return f"{v.dtype}[{','.join(str(d) for d in v.shape)}]"


def _err(node: str, op: str, msg: str) -> GraphError:
    return GraphError(f"node '{node}' ({op}): {msg}")


def _check_shape(shape: Iterable, what: str) -> tuple:
    out = []
    for d in shape:
        if isinstance(d, str) and d.isidentifier():
            out.append(d)
        elif isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0:
            out.append(int(d))
        else:
            raise GraphError(f"{what}: dimension {d!r} in {tuple(shape)}, expected an int >= 0 "
                             "or a symbol name (str)")
    return tuple(out)


class _Symbols:
    """Maps symbolic dims to sentinel ints and back for one shape inference."""

    def __init__(self) -> None:
        self.fwd: dict[str, int] = {}
        self.back: dict[int, str] = {}

    def ints(self, shape: tuple | None) -> tuple | None:
        if shape is None:
            return None
        out = []
        for d in shape:
            if isinstance(d, str):
                if d not in self.fwd:
                    if len(self.fwd) == len(_SENTINELS):
                        raise GraphError(f"more than {len(_SENTINELS)} symbolic dims in one op")
                    self.fwd[d] = _SENTINELS[len(self.fwd)]
                    self.back[self.fwd[d]] = d
                d = self.fwd[d]
            out.append(d)
        return tuple(out)

    def dims(self, shape: tuple, where: str) -> tuple:
        out = []
        for d in shape:
            if d in self.back:
                out.append(self.back[d])
            elif d >= _SENTINEL_FLOOR:
                raise GraphError(f"{where}: the shape rule transforms a symbolic dimension "
                                 f"({sorted(self.fwd)}); bind it first (Graph.specialize)")
            else:
                out.append(int(d))
        return tuple(out)


def _view_shapes(op: str, x: tuple, attrs: dict, sym: _Symbols, where: str) -> tuple:
    """Output shape of a view op on `x` (sentinel ints); normalizes attrs in place."""
    key = VIEW_OPS[op][0]
    given = attrs[key]
    if isinstance(given, str | bytes) or not isinstance(given, Sequence) or not all(
            (isinstance(d, int | np.integer) and not isinstance(d, bool))
            or (op != "transpose" and isinstance(d, str)) for d in given):
        raise GraphError(f"{where}: attribute '{key}' = {given!r}, expected a sequence of ints"
                         + ("" if op == "transpose" else " (or symbol names)"))
    if op == "transpose":
        n = len(x)  # an axis outside [-n, n) is refused, not wrapped
        perm = tuple(int(p) % n if -n <= p < n else -1 for p in attrs["perm"])
        if sorted(perm) != list(range(n)):
            raise GraphError(f"{where}: attribute 'perm' = {attrs['perm']}, expected a "
                             f"permutation of {len(x)} axes")
        attrs["perm"] = perm
        return tuple(x[p] for p in perm)
    shape = list(sym.ints(tuple(-1 if d == -1 else d for d in attrs["shape"])))
    if op == "reshape":
        if shape.count(-1) > 1:
            raise GraphError(f"{where}: attribute 'shape' = {attrs['shape']} has more than one -1")
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            if known == 0 or math.prod(x) % known:
                raise GraphError(f"{where}: cannot reshape {x} to {attrs['shape']}")
            shape[shape.index(-1)] = math.prod(x) // known
        if math.prod(shape) != math.prod(x) or min(shape, default=0) < 0:
            raise GraphError(f"{where}: cannot reshape input of {math.prod(x)} elements to "
                             f"{attrs['shape']}")
    else:
        lead = len(shape) - len(x)
        if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(x)):
            raise GraphError(f"{where}: cannot broadcast input of shape {x} to {attrs['shape']}")
    attrs["shape"] = sym.dims(tuple(shape), where)
    return tuple(shape)


class Graph:
    """A dataflow graph. Build with input(), const(), node()/call(), output().

    Every node is checked when it is added (arity, dtypes, shapes through the op set's shape
    rules, values of this graph, in-place rules), so a Graph is always well formed; check()
    re-validates after passes rewire it (dangling values, cycles).
    """

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.consts: dict[Value, np.ndarray] = {}
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.meta: dict[str, Any] = {}  # e.g. trace(): {"bindings": {input name: DeviceArray}}
        self._names: set[str] = set()
        self._counter = 0

    # ---- building --------------------------------------------------------------------------
    def _fresh(self, name: str | None, prefix: str) -> str:
        if name is not None:
            if not isinstance(name, str) or not name or name in self._names:
                raise GraphError(f"name {name!r} is empty or already used in graph '{self.name}'")
        else:
            while f"{prefix}{self._counter}" in self._names:
                self._counter += 1
            name = f"{prefix}{self._counter}"
        self._names.add(name)
        return name

    def input(self, shape: Sequence[Dim], dtype: str = "float32", name: str | None = None) -> Value:
        """A value bound per call (an activation, a parameter, optimizer state)."""
        name = self._fresh(name, "in")
        shape = _check_shape(shape, f"input '{name}'")
        _dtypes.check(dtype, f"input '{name}': dtype")
        v = Value(self, name, shape, dtype, "input")
        self.inputs.append(v)
        return v

    def const(self, array: Any, name: str | None = None) -> Value:
        """A constant (copied, read-only); keyed by content, not by name."""
        data = np.array(array, copy=True)
        data.setflags(write=False)
        return self._const(data, name)

    def _const(self, data: np.ndarray, name: str | None) -> Value:
        """A constant from an array a graph already owns (read-only, never written): copies
        and specializations share it, and its content hash is computed once."""
        v = Value(self, self._fresh(name, "c"), tuple(int(d) for d in data.shape),
                  _dtypes.from_numpy(data.dtype), "const")
        self.consts[v] = data
        return v

    def output(self, *values: Value) -> None:
        for v in values:
            self._own(v, f"graph '{self.name}'", "output")
            self.outputs.append(v)

    def call(self, op: str, *inputs: Value | None, shape: Sequence[Dim] | None = None,
             dtype: str | None = None, name: str | None = None, **attrs: Any):
        """Add a node; returns its output (or a tuple of its outputs, None for none)."""
        if op in VIEW_OPS and shape is not None:
            attrs["shape"], shape = tuple(shape), None
        if dtype is not None and op in opset.OPS and "dtype" in opset.OPS[op].attr_names:
            attrs["dtype"] = dtype  # cast and arange take their output dtype as an attribute
        n = self.node(op, list(inputs), attrs, shape=shape, dtype=dtype, name=name)
        outs = [v for v in n.outputs if v.updates is None]
        return outs[0] if len(outs) == 1 else (tuple(outs) if outs else None)

    def _own(self, v: Any, node: str, arg: str) -> None:
        if not isinstance(v, Value):
            raise GraphError(f"{node}: {arg} is a {type(v).__name__}, expected a graph Value")
        if v.graph is not self:
            raise GraphError(f"{node}: {arg} %{v.name} belongs to graph '{v.graph.name}', not "
                             f"'{self.name}' (a dangling value)")
        if v.kind == "node" and v.producer not in self.nodes:
            raise GraphError(f"{node}: {arg} %{v.name} comes from removed node "
                             f"'{v.producer.name}' (a dangling value)")

    def node(self, op: str, inputs: list, attrs: dict | None = None, *,
             shape: Sequence[Dim] | None = None, dtype: str | None = None,
             name: str | None = None, outputs: int | None = None) -> Node:
        """Add op `op` on `inputs` (op-set order; None for an absent optional input).

        `shape`/`dtype` are for ops without inputs; `outputs` is the count of a variadic output.
        """
        attrs = dict(attrs or {})
        if op not in VIEW_OPS and op not in opset.OPS:
            raise GraphError(f"graph '{self.name}': unknown op {op!r}; expected one of the op "
                             f"set (unidev.contract.opset.OPS) or a view {sorted(VIEW_OPS)}")
        nname = self._fresh(name, "n")
        node = Node(nname, op, list(inputs), attrs)
        try:
            self._infer(node, shape, dtype, outputs)
        except BaseException:
            self._names.discard(nname)
            raise
        self.nodes.append(node)
        return node

    def _infer(self, node: Node, shape, dtype, n_out) -> None:
        op, where = node.op, f"node '{node.name}' ({node.op})"
        for i, v in enumerate(node.inputs):
            if v is not None:
                self._own(v, where, f"input {i}")
        sym = _Symbols()
        if op in VIEW_OPS:
            (x,) = node.inputs if len(node.inputs) == 1 else (None,)
            if x is None:
                raise _err(node.name, op, f"takes one input, got {len(node.inputs)}")
            missing = set(VIEW_OPS[op]) - set(node.attrs)
            extra = set(node.attrs) - set(VIEW_OPS[op])
            if missing or extra:
                raise _err(node.name, op, f"attributes {sorted(node.attrs)}, expected "
                           f"{list(VIEW_OPS[op])}")
            out = _view_shapes(op, sym.ints(x.shape), node.attrs, sym, where)
            node.outputs = [Value(self, self._fresh(None, "v"), sym.dims(out, where), x.dtype,
                                  "node", node, 0)]
            node.targets = [None]
            return
        schema = opset.get(op)
        ins, names, specs = self._bind(node, schema)
        op_dtype = self._dtype(node, schema, ins, names, specs, dtype)
        try:
            attrs = normalize_attrs(schema, node.attrs)
            if "dtype" in attrs and not schema.inputs:
                attrs["dtype"] = op_dtype
            _check_scalars(schema, node.attrs, attrs, op_dtype)
            variadic = bool(schema.outputs) and getattr(schema.outputs[-1], "variadic", False)
            out_shapes, targets = shapes.infer(
                schema, [sym.ints(v.shape) if v is not None else None for v in ins], attrs,
                sym.ints(_check_shape(shape, where + ": shape")) if shape is not None else None,
                *((n_out,) if variadic else ()))
        except (InvalidArgumentError, TypeError) as e:
            raise GraphError(f"{where}: {e}") from None
        node.attrs, node.inputs = attrs, ins
        node.targets = [sym.dims(t, where) if t is not None else None for t in (targets or [])]
        node.targets += [None] * (len(ins) - len(node.targets))
        outs_spec = list(schema.outputs)
        if variadic:
            outs_spec = outs_spec[:-1] + [outs_spec[-1]] * (len(out_shapes) - len(outs_spec) + 1)
        for k, (o, s) in enumerate(zip(outs_spec, out_shapes, strict=True)):
            dt = op_dtype if o.dtype == "same" else (
                attrs[o.dtype[5:]] if o.dtype.startswith("attr:") else o.dtype)
            node.outputs.append(Value(self, self._fresh(None, "v"), sym.dims(s, where), dt,
                                      "node", node, k))
        self._mutations(node, specs, names)

    def _bind(self, node: Node, schema: opset.OpSchema):
        ins = node.inputs
        if schema.inputs and schema.inputs[0].variadic:
            if not ins or any(v is None for v in ins):
                raise _err(node.name, node.op, f"input '{schema.inputs[0].name}' takes one or "
                           f"more values, got {len(ins)} (None not allowed)")
            return ins, [f"{schema.inputs[0].name}[{k}]" for k in range(len(ins))], \
                [schema.inputs[0]] * len(ins)
        if len(ins) > len(schema.inputs):
            raise _err(node.name, node.op, f"takes {len(schema.inputs)} inputs "
                       f"({', '.join(i.name for i in schema.inputs)}), got {len(ins)}")
        ins = ins + [None] * (len(schema.inputs) - len(ins))
        for spec, v in zip(schema.inputs, ins, strict=True):
            if v is None and not spec.optional:
                raise _err(node.name, node.op, f"input '{spec.name}' is required")
        return ins, [i.name for i in schema.inputs], list(schema.inputs)

    def _dtype(self, node, schema, ins, names, specs, dtype) -> str:
        op_dtype = None
        for name, spec, v in zip(names, specs, ins, strict=True):
            if v is None:
                continue
            if spec.dtypes == "same":
                if op_dtype is None:
                    op_dtype = v.dtype
                    if v.dtype not in schema.dtypes:
                        raise _err(node.name, node.op, f"input '{name}' has dtype {v.dtype}, "
                                   f"expected one of {list(schema.dtypes)}")
                elif v.dtype != op_dtype:
                    raise _err(node.name, node.op, f"input '{name}' has dtype {v.dtype}, "
                               f"expected {op_dtype} (same as the first input)")
            elif v.dtype not in spec.dtypes:
                raise _err(node.name, node.op, f"input '{name}' has dtype {v.dtype}, expected "
                           f"one of {list(spec.dtypes)}")
        if op_dtype is None:
            op_dtype = dtype or node.attrs.get("dtype") or "float32"
            if op_dtype not in schema.dtypes:
                raise _err(node.name, node.op, f"dtype {op_dtype}, expected one of "
                           f"{list(schema.dtypes)}")
        return op_dtype

    def _mutations(self, node: Node, specs, names) -> None:
        """A mutated input gets a new version (an extra output sharing its storage)."""
        if node.op == "batch_norm" and not node.attrs["training"]:
            return  # inference reads the running stats only
        for name, spec, v in zip(names, specs, node.inputs, strict=True):
            if v is None or not spec.mutated:
                continue
            if v.kind == "const":
                raise _err(node.name, node.op, f"input '{name}' is updated in place, expected "
                           f"an input or a node's output, not constant %{v.name}")
            if v.kind == "node" and v.producer.op in VIEW_OPS:
                raise _err(node.name, node.op, f"input '{name}' is updated in place, expected "
                           f"a value with storage of its own, not view %{v.name}")
            if node.inputs.count(v) > 1:
                raise _err(node.name, node.op, f"input '{name}' %{v.name} is updated in place "
                           "and passed more than once")
            later = self.version(v)
            if later is not v:
                raise _err(node.name, node.op, f"input '{name}' %{v.name} was already updated "
                           f"in place by '{later.producer.name}'; expected its latest version "
                           f"%{later.name}")
            node.outputs.append(Value(self, self._fresh(None, "v"), v.shape, v.dtype, "node",
                                      node, len(node.outputs), updates=v))

    def version(self, v: Value) -> Value:
        """The latest version of `v`'s storage (v itself if nothing updates it)."""
        newer = {o.updates: o for n in self.nodes for o in n.outputs if o.updates is not None}
        while v in newer:
            v = newer[v]
        return v

    # ---- queries ---------------------------------------------------------------------------
    def storage(self, v: Value) -> Value:
        """The value whose memory `v` is: views alias their input, an updated version the
        value it updates (an input, a constant or a node's own output)."""
        while v.kind == "node" and (v.updates is not None or v.producer.op in VIEW_OPS):
            v = v.updates if v.updates is not None else v.producer.inputs[0]
        return v

    def uses(self) -> dict[Value, list[tuple[Node, int]]]:
        """For each value, the (node, input position) pairs reading it."""
        out: dict[Value, list[tuple[Node, int]]] = {}
        for n in self.nodes:
            for i, v in enumerate(n.inputs):
                if v is not None:
                    out.setdefault(v, []).append((n, i))
        return out

    def effects(self) -> list[Value]:
        """The final versions of updated graph inputs: live like outputs."""
        return [w for v in self.inputs if (w := self.version(v)) is not v]

    def deps(self) -> dict[Node, set[Node]]:
        """For each node, the nodes that must run before it (producers; readers of what it
        updates in place)."""
        deps: dict[Node, set[Node]] = {n: set() for n in self.nodes}
        for n in self.nodes:
            for v in n.inputs:
                if v is not None and v.kind == "node":
                    deps[n].add(v.producer)
        updater = {o.updates: n for n in self.nodes for o in n.outputs if o.updates is not None}
        if not updater:
            return deps
        uses = self.uses()
        for v, u in updater.items():
            stack = [v]  # readers of v and of every view of it see the old contents
            while stack:
                w = stack.pop()
                for n, _ in uses.get(w, []):
                    if n.op in VIEW_OPS:
                        stack.append(n.outputs[0])
                    elif n is not u:
                        deps[u].add(n)
        return deps

    def order(self) -> list[Node]:
        """Nodes in a topological order (stable: ties keep insertion order); a reader of a
        value's old version runs before the node that updates it in place."""
        deps = self.deps()
        pos = {n: i for i, n in enumerate(self.nodes)}
        done: list[Node] = []
        state: dict[Node, int] = {}
        for root in self.nodes:
            if root in state:
                continue
            state[root] = 1
            stack = [(root, iter(sorted(deps[root], key=pos.__getitem__)))]
            while stack:
                n, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    state[n] = 2
                    done.append(n)
                elif nxt not in pos:
                    raise GraphError(f"node '{n.name}' ({n.op}): reads a value of node "
                                     f"'{nxt.name}', which is not in the graph (dangling)")
                elif state.get(nxt) == 1:
                    raise GraphError(f"node '{nxt.name}' ({nxt.op}): is part of a cycle "
                                     f"(through '{n.name}'); expected an acyclic graph")
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(sorted(deps[nxt], key=pos.__getitem__))))
        return done

    def acyclic(self) -> bool:
        """Whether order() succeeds: passes try a rewrite, and undo it where it made a cycle."""
        try:
            self.order()
        except GraphError:
            return False
        return True

    def check(self) -> Graph:
        """Re-validate after rewiring: every value reachable, no cycles; returns self."""
        for n in self.nodes:
            for i, v in enumerate(n.inputs):
                if v is not None:
                    self._own(v, f"node '{n.name}' ({n.op})", f"input {i}")
                if v is not None and v.kind == "input" and v not in self.inputs:
                    raise _err(n.name, n.op, f"input {i} %{v.name} is not an input of the graph")
        for v in self.outputs:
            self._own(v, f"graph '{self.name}'", "output")
        self.order()
        return self

    # ---- rewriting (for passes) -------------------------------------------------------------
    def replace(self, old: Value, new: Value) -> None:
        """Make every reader of `old` (and the graph's outputs) read `new` instead."""
        if old.shape != new.shape or old.dtype != new.dtype:
            raise GraphError(f"replace %{old.name} ({type_str(old)}) by %{new.name} "
                             f"({type_str(new)}): expected the same shape and dtype")
        for n in self.nodes:
            n.inputs = [new if v is old else v for v in n.inputs]
            for o in n.outputs:  # an update of old now updates new (passes keep old's storage
                if o.updates is old:  # unless new has storage of its own)
                    o.updates = new
        self.outputs = [new if v is old else v for v in self.outputs]

    def remove(self, node: Node) -> None:
        self.nodes.remove(node)

    def copy(self) -> Graph:
        """An independent copy (same names)."""
        g = Graph(self.name)
        m: dict[Value, Value] = {}
        for v in self.inputs:
            m[v] = g.input(v.shape, v.dtype, v.name)
        for v, data in self.consts.items():
            m[v] = g._const(data, v.name)
        for n in self.order():
            c = Node(g._fresh(n.name, "n"), n.op, [m.get(v) for v in n.inputs], dict(n.attrs))
            c.targets = list(n.targets)
            for o in n.outputs:
                m[o] = Value(g, g._fresh(o.name, "v"), o.shape, o.dtype, "node", c, o.index,
                             m[o.updates] if o.updates is not None else None)
                c.outputs.append(m[o])
            g.nodes.append(c)
        g.outputs = [m[v] for v in self.outputs]
        return g

    def specialize(self, **dims: int) -> Graph:
        """A copy with symbolic dimensions bound (N=32), every shape inferred again."""
        g = Graph(self.name)
        m: dict[Value, Value] = {}

        def bind(s):
            return tuple(dims.get(d, d) if isinstance(d, str) else d for d in s)
        for v in self.inputs:
            m[v] = g.input(bind(v.shape), v.dtype, v.name)
        for v, data in self.consts.items():
            m[v] = g._const(data, v.name)
        for n in self.order():
            attrs = dict(n.attrs)
            if n.op in ("reshape", "expand"):
                attrs["shape"] = bind(attrs["shape"])
            c = g.node(n.op, [m.get(v) for v in n.inputs], attrs, name=n.name,
                       shape=bind(n.outputs[0].shape) if not n.inputs else None,
                       dtype=n.outputs[0].dtype if not n.inputs else None,
                       outputs=len(n.outputs) if n.op == "elementwise_program" else None)
            for o, co in zip(n.outputs, c.outputs, strict=True):
                m[o] = co
        g.outputs = [m[v] for v in self.outputs]
        return g

    # ---- presentation and identity (canonical.py, dump.py) ----------------------------------
    def key(self) -> str:
        from .canonical import key
        return key(self)

    def __str__(self) -> str:
        from .dump import text
        return text(self)

    def to_dot(self) -> str:
        from .dump import dot
        return dot(self)

    def draw(self, path: str) -> str:
        from .dump import draw
        return draw(self, path)

    def save(self, path: str) -> None:
        """Write the graph as a JSON file (Graph.load reads it back through every check)."""
        from .serialize import save
        save(self, path)

    @staticmethod
    def load(path: str) -> Graph:
        from .serialize import load
        return load(path)
