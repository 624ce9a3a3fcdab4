"""Memory planning: arena offsets by liveness, peak figure."""

from __future__ import annotations

import itertools
import random

from unidev.graph.passes.memory import ALIGN, Interval, assign, inplace_ok, peak


def _check(ivs: list[Interval]) -> int:
    offsets, arena = assign(ivs)
    for (i, a), (j, b) in itertools.combinations(enumerate(ivs), 2):
        if a.start <= b.end and b.start <= a.end:  # alive together: disjoint bytes
            assert offsets[i] + a.nbytes <= offsets[j] or offsets[j] + b.nbytes <= offsets[i]
    assert all(o % ALIGN == 0 for o in offsets)
    assert all(o + iv.nbytes <= arena for o, iv in zip(offsets, ivs, strict=True))
    assert arena >= peak(ivs)
    return arena


def test_chain_reuses_two_buffers():
    # a chain: each temp lives from its step to the next one
    ivs = [Interval(4096, k, k + 1) for k in range(10)]
    assert _check(ivs) == 2 * 4096 == peak(ivs)


def test_random_lifetimes():
    rng = random.Random(0)
    for _ in range(50):
        ivs = []
        for _ in range(rng.randint(1, 30)):
            s = rng.randint(0, 20)
            ivs.append(Interval(rng.randint(0, 5000), s, s + rng.randint(0, 6)))
        arena = _check(ivs)
        assert arena <= sum((iv.nbytes + ALIGN - 1) // ALIGN * ALIGN or ALIGN for iv in ivs)


def test_inplace_rules():
    assert inplace_ok("add", "float32", "float32", True)
    assert not inplace_ok("add", "float32", "float32", False)  # not the same view
    assert not inplace_ok("eq", "float32", "bool", True)       # another dtype
    assert not inplace_ok("matmul", "float32", "float32", True)
    assert not inplace_ok("sum", "float32", "float32", True)
