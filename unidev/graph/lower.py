"""Lowering: a graph to a Plan (a kernel per node, views as strides, temps in one arena)."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..contract import dtypes as _dtypes
from ..core.errors import InvalidArgumentError, UnsupportedError
from .ir import VIEW_OPS, Graph, Node, Value
from .passes import memory, unfuse
from .plan import Buffer, Plan, Step, TensorRef

__all__ = ["lower"]


def _contiguous(shape: tuple) -> tuple:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


def _is_contiguous(r: TensorRef) -> bool:
    return all(s == c for d, s, c in zip(r.shape, r.strides, _contiguous(r.shape), strict=True)
               if d != 1)


def _broadcast(r: TensorRef, shape: tuple) -> TensorRef:
    lead = len(shape) - len(r.shape)
    strides = [0] * lead + [s if d == shape[lead + i] else 0
                            for i, (d, s) in enumerate(zip(r.shape, r.strides, strict=True))]
    return TensorRef(r.buffer, r.dtype, tuple(shape), tuple(strides), r.offset)


def _nbytes(v: Value) -> int:
    return math.prod(v.shape) * _dtypes.itemsize(v.dtype)


def _kernel_dtype(n: Node) -> str:
    first = next((v for v in n.inputs if v is not None), None)
    return first.dtype if first is not None else n.outputs[0].dtype


class _Lowering:
    def __init__(self, g: Graph) -> None:
        self.g = g
        self.buffers: list[Buffer] = []
        self.refs: dict[Value, TensorRef] = {}
        self.steps: list[Step] = []
        self.intervals: dict[int, memory.Interval] = {}  # temp buffer -> lifetime
        self.inplace = 0

    def buffer(self, kind: str, slot: int, nbytes: int) -> int:
        self.buffers.append(Buffer(len(self.buffers), kind, slot, nbytes, 0))
        return len(self.buffers) - 1

    def whole(self, b: int, v: Value) -> TensorRef:
        return TensorRef(b, v.dtype, tuple(v.shape), _contiguous(tuple(v.shape)), 0)

    def touch(self, ref: TensorRef | None, step: int) -> None:
        if ref is not None and ref.buffer in self.intervals:
            iv = self.intervals[ref.buffer]
            iv.end = max(iv.end, step)

    def temp(self, v: Value, step: int) -> TensorRef:
        b = self.buffer("temp", -1, _nbytes(v))
        self.intervals[b] = memory.Interval(_nbytes(v), step, step)
        return self.whole(b, v)

    def view(self, n: Node, step_at: int) -> None:
        x, out = self.refs[n.inputs[0]], n.outputs[0]
        if n.op == "transpose":
            p = n.attrs["perm"]
            ref = TensorRef(x.buffer, x.dtype, tuple(x.shape[i] for i in p),
                            tuple(x.strides[i] for i in p), x.offset)
        elif n.op == "expand":
            ref = _broadcast(x, tuple(out.shape))
        elif _is_contiguous(x):
            ref = TensorRef(x.buffer, x.dtype, tuple(out.shape), _contiguous(tuple(out.shape)),
                            x.offset)
        else:  # reshape of a strided view: materialize it first
            tmp = self.temp(n.inputs[0], len(self.steps))
            self.copy(x, tmp, n.name)
            ref = TensorRef(tmp.buffer, x.dtype, tuple(out.shape), _contiguous(tuple(out.shape)))
        self.refs[out] = ref

    def copy(self, src: TensorRef, dst: TensorRef, node: str) -> None:
        self.touch(src, len(self.steps))
        self.touch(dst, len(self.steps))
        self.steps.append(Step("copy", src.dtype, [src], [dst], [], node))


def _roots(g: Graph) -> dict[Value, Value]:
    """Each value's storage: views and updated versions share their source's."""
    root: dict[Value, Value] = {v: v for v in g.inputs}
    root.update({v: v for v in g.consts})
    for n in g.order():
        for o in n.outputs:
            if o.updates is not None:
                root[o] = root[o.updates]
            elif n.op in VIEW_OPS:
                root[o] = root[n.inputs[0]]
            else:
                root[o] = o
    return root


def lower(graph: Graph, has_kernel: Callable[[str, str], bool], *,
          bind: dict[str, int] | None = None) -> Plan:
    """The plan for `graph` on a device whose kernels `has_kernel(op, dtype)` tells.

    A tier-4 node without a kernel is unfused into op-set ops; any other missing kernel is an
    UnsupportedError naming the node. Symbolic dimensions must be bound (`bind`). Temps get
    arena offsets by liveness; an elementwise op whose input dies at it writes over that input.
    """
    g = graph.specialize(**bind) if bind else graph.copy()
    sym = sorted({d for v in g.inputs for d in v.shape if isinstance(d, str)})
    if sym:
        raise InvalidArgumentError(f"lower: graph '{graph.name}' has symbolic dimensions {sym}; "
                                   "expected them bound (bind={...})")
    unfused, origin = [], {}
    for n in list(g.order()):
        if n.schema is not None and n.schema.tier == 4 and not has_kernel(n.op, _kernel_dtype(n)):
            unfused.append(n.name)
            before = set(g.nodes)
            unfuse.expand(g, n)
            origin.update((m, n) for m in g.nodes if m not in before)
    order = g.order()
    for n in order:
        if n.op not in VIEW_OPS and not has_kernel(n.op, _kernel_dtype(n)):
            src = f" (unfused from node '{origin[n].name}' ({origin[n].op}))" if n in origin else ""
            raise UnsupportedError(f"node '{n.name}' ({n.op}){src}: the device has no kernel "
                                   f"for dtype {_kernel_dtype(n)}")
    root = _roots(g)
    mutated = {root[o] for n in order for o in n.outputs if o.updates is not None}
    last_use: dict[Value, int] = {}
    for i, n in enumerate(order):
        for v in n.inputs:
            if v is not None:
                last_use[root[v]] = i
    lw = _Lowering(g)
    for k, v in enumerate(g.inputs):
        lw.refs[v] = lw.whole(lw.buffer("input", k, _nbytes(v)), v)
    consts = list(g.consts)
    for k, v in enumerate(consts):
        lw.refs[v] = lw.whole(lw.buffer("const", k, _nbytes(v)), v)
    out_refs, direct = [], {}
    for k, v in enumerate(g.outputs):
        b = lw.buffer("output", k, _nbytes(v))
        out_refs.append(lw.whole(b, v))
        if v.kind == "node" and root[v] is v and v not in direct and v not in mutated:
            direct[v] = out_refs[-1]  # its producer writes the output buffer itself
    pending = [(v, r) for v, r in zip(g.outputs, out_refs, strict=True) if direct.get(v) is not r]

    def flush() -> None:
        """Copy outputs into their buffers as soon as they exist: before anything updates
        their storage in place."""
        for item in [p for p in pending if p[0] in lw.refs]:
            lw.copy(lw.refs[item[0]], item[1], f"output:{item[0].name}")
            pending.remove(item)
    flush()
    for i, n in enumerate(order):
        if n.op in VIEW_OPS:
            lw.view(n, i)
            flush()
            continue
        ins = [lw.refs[v] if v is not None else None for v in n.inputs]
        ins = [_broadcast(r, t) if r is not None and t is not None and tuple(r.shape) != tuple(t)
               else r for r, t in zip(ins, n.targets, strict=False)]
        outs = []
        for o in n.outputs:
            if o.updates is not None:
                lw.refs[o] = lw.refs[o.updates]
                continue
            ref = direct.get(o)
            if ref is None:
                ref = _reuse(lw, n, o, ins, root, last_use, i, mutated, direct)
            if ref is None:
                ref = lw.temp(o, len(lw.steps))
            lw.refs[o] = ref
            outs.append(ref)
        for r in ins + outs:
            lw.touch(r, len(lw.steps))
        schema = n.schema
        attrs = [(a.name, a.type, n.attrs[a.name]) for a in schema.attrs]
        lw.steps.append(Step(n.op, _kernel_dtype(n), ins, outs, attrs, n.name))
        flush()
    assert not pending
    temps = sorted(lw.intervals)
    offsets, arena = memory.assign([lw.intervals[b] for b in temps])
    for b, off in zip(temps, offsets, strict=True):
        lw.buffers[b].offset = off
    ivs = list(lw.intervals.values())
    meta = {"peak_bytes": memory.peak(ivs), "arena_bytes": arena,
            "unplanned_bytes": sum(memory._align(max(iv.nbytes, 1)) for iv in ivs),
            "inplace": lw.inplace, "unfused": unfused, "nodes": len(order)}
    return Plan(lw.steps, lw.buffers, arena, [g.consts[v] for v in consts],
                [lw.refs[v] for v in g.inputs], out_refs, graph.key(), "", meta)


def _reuse(lw: _Lowering, n: Node, o: Value, ins: list, root, last_use, i, mutated,
           direct) -> TensorRef | None:
    """An input temp that dies at node `n` and that `n` may overwrite (in-place form)."""
    if len(n.outputs) != 1:
        return None
    want = lw.whole(-1, o)
    for v, r in zip(n.inputs, ins, strict=False):
        if v is None or r is None or r.buffer not in lw.intervals:
            continue
        rv = root[v]
        same = (tuple(r.shape), tuple(r.strides), r.dtype) == (want.shape, want.strides,
                                                                want.dtype)
        if last_use.get(rv) == i and rv not in mutated and rv not in direct and \
                n.inputs.count(v) == 1 and memory.inplace_ok(n.op, v.dtype, o.dtype, same) \
                and lw.buffers[r.buffer].nbytes == _nbytes(o) and r.offset == 0 \
                and not any(u is not v and u is not None and root[u] is rv for u in n.inputs):
            lw.inplace += 1
            return r
    return None
