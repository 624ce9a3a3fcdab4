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
