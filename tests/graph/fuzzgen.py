"""Random graph generator for the graph fuzz tests (views, broadcasts, 0/1 dims, in place)."""

from __future__ import annotations

import numpy as np

from unidev.core.errors import InvalidArgumentError
from unidev.graph import Graph

UNARY = ("neg", "abs", "exp", "tanh", "sigmoid", "relu", "square", "sin", "floor", "erf",
         "gelu", "sign", "round")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "lt", "ge", "eq")
REDUCE = ("sum", "mean", "max", "min", "prod")


def _shape(rng, ndim: int) -> tuple[int, ...]:
    return tuple(int(rng.choice([0, 1, 1, 2, 3, 4, 5])) if rng.random() < 0.15
                 else int(rng.integers(1, 6)) for _ in range(ndim))


def random_graph(seed: int, dtype: str | None = None) -> Graph:
    """A random valid graph; invalid random combinations are skipped (the IR refuses them)."""
    rng = np.random.default_rng(seed)
    dt = dtype or str(rng.choice(["float32", "float64"]))
    g = Graph(f"fuzz{seed}")
    base = _shape(rng, int(rng.integers(1, 4)))
    vals = []
    for _ in range(int(rng.integers(1, 4))):
        s = list(base)
        for k in range(len(s)):
            if rng.random() < 0.3:
                s[k] = 1
        s = s[int(rng.integers(0, len(s))):] if rng.random() < 0.3 else s
        vals.append(g.input(tuple(s), dt))
    if rng.random() < 0.5:
        vals.append(g.const(rng.standard_normal(base[-1:]).astype(dt)))
    if rng.random() < 0.3:
        vals.append(g.const(np.array(rng.standard_normal(), dt)))
    state = None
    if rng.random() < 0.3:  # optimizer state updated in place
        state = g.input(base, dt, name="param")
    for _ in range(int(rng.integers(2, 12))):
        x = vals[int(rng.integers(len(vals)))]
        r = rng.random()
        try:
            if r < 0.3:
                v = g.call(str(rng.choice(UNARY)), x)
            elif r < 0.6:
                y = vals[int(rng.integers(len(vals)))]
                op = str(rng.choice(BINARY))
                v = g.call(op, x, y)
                if v.dtype != dt:
                    v = g.call("cast", v, dtype=dt)
            elif r < 0.68 and x.ndim:
                v = x.transpose(*[int(p) for p in rng.permutation(x.ndim)])
            elif r < 0.76:
                v = x.reshape(-1) if rng.random() < 0.5 or not x.ndim else \
                    x.reshape(*(x.shape[:-1]), 1, x.shape[-1])
            elif r < 0.82:
                v = x.broadcast_to((int(rng.integers(1, 3)),) + tuple(x.shape))
            elif r < 0.9 and x.ndim:
                axes = tuple(sorted({int(a) for a in rng.integers(0, x.ndim, size=2)}))
                op = str(rng.choice(REDUCE))
                if op in ("max", "min") and any(x.shape[a] == 0 for a in axes):
                    op = "sum"
                v = g.call(op, x, axes=axes, keepdims=bool(rng.random() < 0.5))
            elif r < 0.95 and x.ndim >= 1:
                k = x.shape[-1]
                w = g.const(rng.standard_normal((k, int(rng.integers(0, 4)))).astype(dt))
                v = g.call("matmul", x.reshape(-1, k), w)
            elif r < 0.97 and x.ndim:
                v = g.call("softmax", x, axis=int(rng.integers(-x.ndim, x.ndim)))
            else:
                v = _image(g, rng, dt)
        except InvalidArgumentError:
            continue
        vals.append(v)
    for _ in range(int(rng.integers(0, 3))):
        a, b = (vals[int(k)] for k in rng.integers(len(vals), size=2))
        try:
            r = rng.random()
            if r < 0.4 and a.ndim:
                v = g.call("concat", a, b, axis=int(rng.integers(0, a.ndim)))
            elif r < 0.7:
                v = g.call("pad_constant", a, pads=tuple(int(p) for p in
                                                         rng.integers(0, 2, 2 * a.ndim)),
                           value=1.5)
            else:
                v = g.call("elementwise_program", a, b, program="i0 i1 mul s0 r0 r0 add o0 i1 o1")
                v = v[1] if isinstance(v, tuple) else v
        except InvalidArgumentError:
            continue
        vals.append(v)
    made = [v for v in vals if v.kind == "node"] or [g.call("neg", vals[0])]
    picks = {int(k) for k in rng.integers(len(made), size=int(rng.integers(1, 4)))}
    outs = [made[-1]] + [made[k] for k in sorted(picks)]
    if rng.random() < 0.2:
        outs.append(vals[0])  # an input as an output (a copy step)
    if state is not None:
        grad = made[-1]
        if grad.shape == state.shape and grad.dtype == dt:
            grad = g.call("add", grad, g.const(np.array(0, dt)))
            g.call("sgd_update", state, grad, lr=0.5)
        else:
            g.call("sgd_update", state, g.call("neg", state), lr=0.25)
    g.output(*outs)
    return g


def _image(g: Graph, rng, dt: str):
    """A conv/pool/batch-norm chain on a fresh NCHW input (batch and channels may be 0 or 1)."""
    n, c = int(rng.choice([0, 1, 2])), int(rng.choice([1, 2, 3]))
    x = g.input((n, c, int(rng.integers(3, 7)), int(rng.integers(3, 7))), dt)
    k = int(rng.choice([1, 2, 4]))
    groups = int(rng.choice([1, c])) if k % c == 0 else 1
    w = g.const(rng.standard_normal((k, c // groups, 3, 3)).astype(dt))
    b = g.const(rng.standard_normal(k).astype(dt)) if rng.random() < 0.5 else None
    y = g.call("conv2d", x, w, b, stride=int(rng.choice([1, 2])), padding=int(rng.integers(0, 2)),
               groups=groups)
    if rng.random() < 0.5:
        y = g.call("relu", y)
    if rng.random() < 0.5:
        rm, rv = g.input((k,), dt, name=None), g.input((k,), dt)
        y = g.call("batch_norm", y, None, None, rm, rv, training=bool(n > 0), momentum=0.1,
                   eps=1e-3)
        y = y[0] if isinstance(y, tuple) else y
    if rng.random() < 0.5 and min(y.shape[2:]) >= 2:
        y = g.call("max_pool2d", y, kernel_size=2, ceil_mode=bool(rng.random() < 0.5))
        y = y[0] if isinstance(y, tuple) else y
    return y


def inputs_for(g: Graph, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + 7)
    return [rng.standard_normal(v.shape).astype(v.dtype) for v in g.inputs]
