"""Shared helpers for the graph tests: random inputs, before/after comparison."""

from __future__ import annotations

import numpy as np

from unidev.graph import Graph, evaluate


def inputs_for(g: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(v.dtype) if v.dtype.startswith("float")
            else rng.integers(0, 3, v.shape).astype(v.dtype) for v in g.inputs]


def check_pass(g: Graph, run, *, rtol: float = 1e-5, atol: float = 1e-5, seed: int = 0) -> int:
    """Run pass `run` on g in place; its outputs must equal the reference's before the pass."""
    xs = inputs_for(g, seed)
    before = evaluate(g, [x.copy() for x in xs])
    count = run(g)
    g.check()
    after = evaluate(g, [x.copy() for x in xs])
    assert len(before) == len(after)
    for b, a in zip(before, after, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return count


def ops(g: Graph) -> list[str]:
    return [n.op for n in g.order()]


_UNARY = ("neg", "abs", "tanh", "sigmoid", "relu", "square", "sin", "cos", "gelu", "erf")
_BINARY = ("add", "sub", "mul", "maximum", "minimum", "where", "sigmoid_backward",
           "tanh_backward", "threshold_backward")


def random_graph(seed: int) -> Graph:
    """A random DAG of elementwise ops over broadcasting inputs, with the odd matmul in the
    middle, several outputs and sometimes a trailing reduction."""
    rng = np.random.default_rng(seed)
    g = Graph(f"random{seed}")
    shapes = [(3, 4, 5), (4, 5), (5,), (3, 1, 5), (1,)]
    vals = [g.input(shapes[k]) for k in rng.permutation(5)[:3]] + [g.const(np.float32(0.7))]
    for _ in range(rng.integers(4, 14)):
        if rng.random() < 0.45:
            v = g.call(str(rng.choice(_UNARY)), vals[rng.integers(len(vals))])
        else:
            a, b = (vals[k] for k in rng.integers(len(vals), size=2))
            op = str(rng.choice(_BINARY))
            extra = {"alpha": float(rng.choice([1.0, -0.5]))} if op in ("add", "sub") else {}
            v = g.call(op, a, b, **extra) if op != "where" else \
                g.call("where", a, b, g.call(str(rng.choice(["gt", "le"])), b, a))
        if rng.random() < 0.1:
            k = v.shape[-1] if v.ndim else 1
            v = g.call("matmul", v.reshape(-1, k), g.const(np.eye(k, dtype="f4"))) \
                .reshape(v.shape)
        vals.append(v)
    made = [v for v in vals if v.kind == "node"]
    outs = [made[-1]] + [made[k] for k in rng.integers(len(made), size=rng.integers(0, 3))]
    if made[-1].ndim == 3 and rng.random() < 0.5:
        outs[0] = g.call(str(rng.choice(["sum", "mean", "max"])), made[-1], axes=(1, 2))
    g.output(*outs)
    return g
