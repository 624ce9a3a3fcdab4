"""Fusion: batch-norm folding, conv/gemm epilogues, elementwise regions -> elementwise_program."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...contract import opset
from ...core.errors import InvalidArgumentError
from ...core.program import format_constant
from ..ir import Graph, Node, Value

__all__ = ["run", "fold_batch_norm", "fuse_epilogues", "fuse_elementwise"]

_ACT = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh"}
_REDUCE_OPS = ("sum", "mean", "max", "min")
_FLOATS = opset.get("conv2d").dtypes


def _single_use(g: Graph, v: Value, uses) -> Node | None:
    """The one node reading `v`, if exactly one does and v is no graph output."""
    u = uses.get(v, [])
    if len(u) != 1 or v in g.outputs:
        return None
    return u[0][0]


def _pure(n: Node) -> bool:
    return all(o.updates is None for o in n.outputs)


# ---- batch-norm folding (inference) ----------------------------------------------------------

def fold_batch_norm(g: Graph) -> int:
    """conv2d -> batch_norm(training=False) becomes one conv2d with scaled weights and a shifted
    bias, written as op-set nodes (constant folding turns them into constants)."""
    folded = 0
    uses = g.uses()
    for bn in list(g.order()):
        if bn.op != "batch_norm" or bn.attrs["training"]:
            continue
        y = bn.inputs[0]
        conv = y.producer if y.kind == "node" else None
        if conv is None or conv.op != "conv2d" or _single_use(g, y, uses) is not bn \
                or any(uses.get(o) or o in g.outputs for o in bn.outputs[1:3]):
            continue
        x, w, b = conv.inputs
        gamma, beta, mean, var = bn.inputs[1:5]
        k = w.shape[0]
        eps = g.const(np.array(bn.attrs["eps"], dtype=w.dtype))
        scale = g.call("rsqrt", g.call("add", var, eps))
        if gamma is not None:
            scale = g.call("mul", gamma, scale)
        w2 = g.call("mul", w, g.call("reshape", scale, shape=(k, 1, 1, 1)))
        shift = g.call("mul", mean, scale)
        shift = g.call("sub", beta, shift) if beta is not None else g.call("neg", shift)
        if b is not None:
            shift = g.call("add", shift, g.call("mul", b, scale))
        new = g.node("conv2d", [x, w2, shift], dict(conv.attrs))
        g.replace(bn.outputs[0], new.outputs[0])
        g.remove(bn)
        folded += 1
    return folded


def _kept(g: Graph, moved: list[tuple[Value, Value]], made: list[Node]) -> bool:
    """Whether a rewrite (readers of each old value moved to its new one, nodes `made` added)
    left g acyclic; else it is undone."""
    if g.acyclic():
        return True
    for old, v in moved:
        g.replace(v, old)
    for n in made:
        g.remove(n)
    return False


def _cleaned(g: Graph, fused: int) -> int:
    """fused, after removing what the rewrites left dead."""
    if fused:
        from . import dce
        dce.run(g)
    return fused


# ---- conv2d / gemm / matmul epilogues --------------------------------------------------------

def _activation(g: Graph, v: Value, uses) -> tuple[str, Value] | None:
    """(activation, result) if v's only consumer is an activation (or v * sigmoid(v))."""
    readers = uses.get(v, [])
    if v in g.outputs:
        return None
    if len(readers) == 1:
        n = readers[0][0]
        if n.op in _ACT:
            return _ACT[n.op], n.outputs[0]
        if n.op == "gelu":
            return ("gelu" if n.attrs["approximate"] == "none" else "gelu_tanh"), n.outputs[0]
    if len(readers) == 2:
        ops = {n.op: n for n, _ in readers}
        s, m = ops.get("sigmoid"), ops.get("mul")
        if s and m and _single_use(g, s.outputs[0], uses) is m and \
                set(m.inputs) == {v, s.outputs[0]}:
            return "silu", m.outputs[0]
    return None


def _epilogue(g: Graph, anchor: Node, uses, bias_shapes: tuple, bias: Value | None,
              residual: Value | None = None):
    """Walk bias add / residual add / activation after `anchor`'s output."""
    cur = anchor.outputs[0]
    act = "none"
    absorbed = 0
    while True:
        n = _single_use(g, cur, uses)
        if n is not None and n.op == "add" and n.attrs["alpha"] == 1 and \
                n.outputs[0].shape == cur.shape and n.inputs[0] is not n.inputs[1]:
            other = n.inputs[1] if n.inputs[0] is cur else n.inputs[0]
            if bias is None and other.shape in bias_shapes:
                bias = other if other.shape == bias_shapes[0] else \
                    g.call("reshape", other, shape=bias_shapes[0])
            elif residual is None and other.shape == cur.shape:
                residual = other
            else:
                break
            cur, absorbed = n.outputs[0], absorbed + 1
            continue
        found = _activation(g, cur, uses)
        if found is not None:
            act, cur = found
            absorbed += 1
        break
    return absorbed, bias, residual, act, cur


def fuse_epilogues(g: Graph, has_kernel: Callable[[str, str], bool] | None = None) -> int:
    """conv2d / gemm / 2-D matmul + bias + residual + activation -> conv2d_bias_act /
    gemm_bias_act (y = act(op + bias + residual), the op set's tier 4); only where `has_kernel`
    (when given) says the device has the fused kernel, so that elsewhere the epilogue joins an
    elementwise region instead of being unfused at lowering."""
    fused = 0
    uses = g.uses()
    for anchor in list(g.order()):
        if anchor.op not in ("conv2d", "gemm", "matmul") or \
                anchor.outputs[0].dtype not in _FLOATS:
            continue
        if anchor.op == "conv2d":
            x, w, b = anchor.inputs
            k = w.shape[0]
            shapes = ((k,), (k, 1, 1), (1, k, 1, 1))
            absorbed, bias, res, act, last = _epilogue(g, anchor, uses, shapes, b)
            op, ins = "conv2d_bias_act", [x, w, bias, res]
            attrs = dict(anchor.attrs, activation=act)
        elif anchor.op in ("gemm", "matmul") and anchor.inputs[0].ndim == 2 and \
                anchor.inputs[1].ndim == 2:
            a, b = anchor.inputs[:2]
            c = anchor.inputs[2] if anchor.op == "gemm" else None
            n_ = b.shape[1]
            shapes = ((n_,), (1, n_))
            out = anchor.outputs[0].shape
            if c is not None and (anchor.attrs["beta"] != 1 or c.shape not in shapes + (out,)):
                continue
            bias = c if c is not None and c.shape in shapes else None
            if bias is not None and bias.shape != (n_,):
                bias = g.call("reshape", bias, shape=(n_,))
            res = c if c is not None and c.shape == out and c.shape not in shapes else None
            absorbed, bias, res, act, last = _epilogue(g, anchor, uses, shapes, bias, res)
            op, ins = "gemm_bias_act", [a, b, bias, res]
            attrs = {"alpha": anchor.attrs.get("alpha", 1.0), "activation": act}
        else:
            continue
        if not absorbed or (has_kernel and not has_kernel(op, anchor.outputs[0].dtype)):
            continue
        new = g.node(op, ins, attrs)
        g.replace(last, new.outputs[0])
        if not _kept(g, [(last, new.outputs[0])], [new]):  # e.g. the residual is a value
            continue                                        # updated in place after x is read
        uses = g.uses()
        fused += 1
    return _cleaned(g, fused)


# ---- elementwise regions ---------------------------------------------------------------------

_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
# op-set ops that are small programs of their own: operand indices and tokens
_TEMPLATES = {
    "where": [0, 1, 2, "where"],  # `x y cond where`: cond ? x : y
    "sigmoid_backward": [0, 1, "mul", "c1.0", 1, "sub", "mul"],
    "tanh_backward": [0, "c1.0", 1, "square", "sub", "mul"],
}


def _template(n: Node) -> list | None:
    """The node as program tokens over its operands (ints: input positions); None if it has
    no program form."""
    a = n.attrs
    if n.op in ("add", "sub"):
        return [0, 1, n.op] if a["alpha"] == 1 else [0, 1, format_constant(a["alpha"]), "mul",
                                                        n.op]
    if n.op == "gelu":
        return [0, "gelu" if a["approximate"] == "none" else "gelu_tanh"]
    if n.op == "threshold_backward":  # 0 where x <= threshold else grad (nan x passes grad)
        return ["c0.0", 0, 1, format_constant(a["threshold"]), "le", "where"]
    if n.op in ("addcmul", "addcdiv"):
        return [0, format_constant(a["value"]), 1, "mul", 2,
                "mul" if n.op == "addcmul" else "div", "add"]
    if n.op == "lerp":
        return [0, format_constant(a["weight"]), 1, 0, "sub", "mul", "add"]
    if n.op in _TEMPLATES:
        return _TEMPLATES[n.op]
    src = opset.PROGRAM_SOURCES.get(n.op)
    if src is None or src[0] != n.op or n.attrs != {x.name: x.default
                                                     for x in opset.get(n.op).attrs}:
        return None
    return list(range(opset.PROGRAM_OPS[n.op])) + [n.op]


def _eligible(n: Node) -> bool:
    """Pure, one output, float operands of one dtype (a compare's bool result and where's bool
    condition stay inside the program as 1/0)."""
    if len(n.outputs) != 1 or not _pure(n) or _template(n) is None or not n.inputs \
            or any(v is None for v in n.inputs):
        return False
    dt = n.inputs[0].dtype
    out = n.outputs[0].dtype
    operands = n.inputs[:2] if n.op == "where" else n.inputs
    return dt in _FLOATS and all(v.dtype == dt for v in operands) and (
        out == dt or (n.op in _COMPARE and out == "bool"))


def _regions(g: Graph) -> list[list[Node]]:
    """Greedy convex regions of eligible nodes with the same output shape and op dtype.

    A node joins the region of one of its producers unless something else it depends on
    depends on that region (the fused node would then feed itself; in-place updates order
    readers first, so those edges count too); a one-node region whose only dependent joins
    another region is pulled into it when nothing it depends on depends on that region.
    """
    region: dict[Node, int] = {}
    anc: dict[Node, frozenset] = {}  # the regions each node depends on
    members: list[list[Node]] = []
    keys: list[tuple] = []
    deps = g.deps()
    dependents: dict[Node, int] = {}
    for ds in deps.values():
        for d in ds:
            dependents[d] = dependents.get(d, 0) + 1

    for n in g.order():
        rid = None
        if _eligible(n):
            key = (n.outputs[0].shape, n.inputs[0].dtype)
            for v in n.inputs:
                r = region.get(v.producer) if v.kind == "node" else None
                if r is not None and keys[r] == key and \
                        all(r not in anc[d] for d in deps[n] if region.get(d) != r):
                    rid = r
                    break
            if rid is None:
                rid = len(members)
                members.append([])
                keys.append(key)
            for v in n.inputs:  # pull in one-node regions that only feed n
                p = v.producer if v.kind == "node" else None
                r = region.get(p)
                if r is not None and r != rid and keys[r] == key and members[r] == [p] and \
                        dependents.get(p) == 1 and v not in g.outputs and \
                        all(rid not in anc[d] for d in deps[p]):
                    members[r] = []
                    region[p] = rid
                    members[rid].append(p)
            region[n] = rid
            members[rid].append(n)
        anc[n] = frozenset().union(*(anc[d] | ({region[d]} if d in region else frozenset())
                                     for d in deps[n]))
    return _merge_siblings(members, keys, anc, g)


def _merge_siblings(members: list[list[Node]], keys: list, anc: dict, g: Graph):
    """Regions that read a common input and do not depend on each other become one program
    (sum(x) and sum(x * x) read x once). Dependence is transitive in `anc`, so pairwise
    checks keep the merged regions acyclic."""
    owner = list(range(len(members)))

    def find(r: int) -> int:
        while owner[r] != r:
            r = owner[r]
        return r

    def depends(a: int, b: int) -> bool:  # does region a depend on region b?
        return any(find(r) == b for n in members[a] for r in anc[n])

    def reads(r: int) -> set:
        inside = set(members[r])
        return {v for n in members[r] for v in n.inputs
                if v is not None and not (v.kind == "node" and v.producer in inside)}
    uses = g.uses()
    live = [r for r in range(len(members)) if members[r]]
    sig = {r: _signature(g, members[r], uses) for r in live}
    for i, a in enumerate(live):
        for b in live[i + 1:]:
            a, b = find(a), find(b)
            if a == b or keys[a] != keys[b] or sig[a] is None or sig[a] != sig[b] or \
                    not reads(a) & reads(b) or depends(a, b) or depends(b, a):
                continue
            members[a] += members[b]
            members[b] = []
            owner[b] = a
    pos = {n: k for k, n in enumerate(g.order())}
    return [sorted(m, key=pos.__getitem__) for m in members if m]


def _reduction(g: Graph, escaping: list[Value], uses, s: tuple):
    """The common trailing reduction every escaping value feeds, if there is one."""
    nodes = []
    for v in escaping:
        readers = uses.get(v, [])
        if v in g.outputs or len(readers) != 1 or readers[0][0].op not in _REDUCE_OPS:
            return None
        nodes.append(readers[0][0])
    first = nodes[0]
    axes = first.attrs["axes"] or tuple(range(len(s)))
    if not axes or axes != tuple(range(len(s) - len(axes), len(s))) or any(
            (n.op, n.attrs) != (first.op, first.attrs) for n in nodes):
        return None
    return first.op, axes, nodes


def _emit(region: list[Node], escaping: list[Value], uses) -> tuple[str, list[Value]] | None:
    """Postfix program for the region: shared values in registers, others inlined."""
    inside = set(region)
    internal = {n.outputs[0]: 0 for n in region}
    for n in region:
        for ref in _template(n):
            if isinstance(ref, int) and n.inputs[ref] in internal:
                internal[n.inputs[ref]] += 1
    shared = {v for v, k in internal.items() if k > 1 or v in escaping}
    inputs: list[Value] = []
    regs: dict[Value, int] = {}
    free = list(range(opset.PROGRAM_LIMITS["max_registers"]))[::-1]
    remaining = dict(internal)
    toks: list[str] = []

    def push(v: Value) -> None:
        if v in regs:
            toks.append(f"r{regs[v]}")
            remaining[v] -= 1
            if not remaining[v]:
                free.append(regs.pop(v))
        elif v.kind == "node" and v.producer in inside:
            expr(v.producer)
        elif v.kind == "const" and v.graph.consts[v].size == 1:
            toks.append(format_constant(float(v.graph.consts[v].reshape(()))))
        else:
            if v not in inputs:
                inputs.append(v)
            toks.append(f"i{inputs.index(v)}")

    def expr(n: Node) -> None:
        for ref in _template(n):
            if isinstance(ref, int):
                push(n.inputs[ref])
            else:
                toks.append(ref)
    for n in region:
        v = n.outputs[0]
        if v not in shared:
            continue
        expr(n)
        if remaining[v]:
            if not free:
                return None
            regs[v] = free.pop()
            toks.append(f"s{regs[v]}")
        if v in escaping:
            if remaining[v]:
                toks.append(f"r{regs[v]}")
            toks.append(f"o{escaping.index(v)}")
    lim = opset.PROGRAM_LIMITS
    if len(toks) > lim["max_tokens"] or len(inputs) > lim["max_inputs"] or \
            len(escaping) > lim["max_outputs"]:
        return None
    return " ".join(toks), inputs


def _plan(g: Graph, region: list[Node], uses):
    """(escaping values, trailing reduction or None) if the region can become one program."""
    inside = set(region)
    escaping = [n.outputs[0] for n in region
                if n.outputs[0] in g.outputs or any(u not in inside
                                                    for u, _ in uses.get(n.outputs[0], []))]
    if not escaping or any(v.dtype != region[0].inputs[0].dtype for v in escaping):
        return None  # (a compare's bool result read outside: it stays an op)
    return escaping, _reduction(g, escaping, uses, region[0].outputs[0].shape)


def _signature(g: Graph, region: list[Node], uses):
    """What a region's program would be: None (not fusable), 'none' or its reduction."""
    planned = _plan(g, region, uses)
    if planned is None:
        return None
    red = planned[1]
    return (red[0], red[1], tuple(sorted(red[2][0].attrs.items()))) if red else "none"


def fuse_elementwise(g: Graph) -> int:
    """Each region of >= 2 elementwise ops (a trailing reduction counts) -> elementwise_program."""
    fused = 0
    uses = g.uses()
    for region in _regions(g):
        planned = _plan(g, region, uses)
        if planned is None or len(region) + (1 if planned[1] else 0) < 2:
            continue
        escaping, red = planned
        emitted = _emit(region, escaping, uses)
        if emitted is None:
            continue
        program, inputs = emitted
        attrs = {"program": program}
        if red:
            attrs.update(reduce=red[0], reduce_axes=red[1])
        try:
            new = g.node("elementwise_program", inputs, attrs, outputs=len(escaping))
        except InvalidArgumentError:
            continue  # a shape the op refuses (e.g. max over an empty axis): stay unfused
        targets = [n.outputs[0] for n in red[2]] if red else escaping
        made, moved = [new], []
        for old, v in zip(targets, new.outputs, strict=True):
            if old.shape != v.shape:  # keepdims=True reductions
                made.append(g.node("reshape", [v], {"shape": old.shape}))
                v = made[-1].outputs[0]
            g.replace(old, v)
            moved.append((old, v))
        if not _kept(g, moved, made):  # greedy regions can still meet through each other:
            continue                    # keep this one unfused
        uses = g.uses()
        fused += 1
    return _cleaned(g, fused)


def run(g: Graph, training: bool = False,
        has_kernel: Callable[[str, str], bool] | None = None) -> int:
    """All fusions; batch-norm folding only for inference graphs (training=False). With
    `has_kernel` (a device's kernel query), only into fused ops the device has."""
    from . import fold
    n = 0
    if not training:
        n += fold_batch_norm(g)
        fold.run(g)
    n += fuse_epilogues(g, has_kernel)
    if has_kernel is None or any(has_kernel("elementwise_program", d) for d in _FLOATS):
        n += fuse_elementwise(g)
    return n
