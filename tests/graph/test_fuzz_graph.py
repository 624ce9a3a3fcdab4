"""Graph fuzzing: random graphs compiled on x86/aurora vs evaluate, malformed graphs, bindings
and plan files."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from fuzzgen import inputs_for, random_graph

import unidev.graph as ug
from unidev import _C
from unidev.contract import opset
from unidev.core import discovery
from unidev.core.array import DeviceArray
from unidev.core.errors import InvalidArgumentError, UnidevError
from unidev.graph import Graph, evaluate, passes
from unidev.graph import plan as planfile

DEVICES = [d for d in ("x86", "aurora") if discovery.get(d).status == discovery.OK]


def _check_graph(g: Graph, seed: int, dev: str, optimize: bool) -> None:
    xs = inputs_for(g, seed)
    want_state = [x.copy() for x in xs]
    want = evaluate(g, want_state)
    cp = ug.compile(g, dev, optimize=optimize, cache=False)
    ins = [DeviceArray.from_numpy(x, dev) for x in xs]
    got = [o.numpy() for o in cp.run(ins)]
    tol = 1e-4 if g.inputs[0].dtype == "float32" else 1e-9
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.shape == b.shape and a.dtype == b.dtype, (k, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True, err_msg=f"output {k}")
    for k, (a, b) in enumerate(zip(ins, want_state, strict=True)):  # state updated in place
        np.testing.assert_allclose(a.numpy(), b, rtol=tol, atol=tol, equal_nan=True,
                                   err_msg=f"input {k} after the run")


@pytest.mark.parametrize("dev", DEVICES)
def test_random_graphs_match_reference(dev):
    for seed in range(40):
        g = random_graph(seed)
        for optimize in (True, False):
            _check_graph(g, seed, dev, optimize)


@pytest.mark.slow
@pytest.mark.parametrize("dev", DEVICES)
def test_random_graphs_match_reference_many(dev):
    for seed in range(40, 600):
        g = random_graph(seed)
        for optimize in (True, False):
            _check_graph(g, seed, dev, optimize)


def test_transpose_axis_out_of_range_is_refused():
    g = Graph()
    x = g.input((2, 3))
    for perm in [(0, 2), (2, 1), (0, -3)]:  # wrapped modulo ndim they were (0, 1): silently wrong
        with pytest.raises(InvalidArgumentError, match="perm"):
            g.call("transpose", x, perm=perm)
    assert g.call("transpose", x, perm=(-1, 0)).shape == (3, 2)


def test_passes_keep_values_updated_in_place():
    """x+0, a duplicate node and a foldable node whose result is then updated in place
    (sgd_update writes its grad) keep their own storage; the update stays attached."""
    g = Graph()
    p, q, r, x = g.input((4,)), g.input((4,)), g.input((4,)), g.input((4,))
    zero, c = g.const(np.zeros((), "f4")), g.const(np.arange(4, dtype="f4"))
    grad = g.call("add", x, zero)               # simplify: x + 0
    twin, dup = g.call("exp", x), g.call("exp", x)  # cse
    folded = g.call("neg", c)                   # fold
    g.call("sgd_update", p, grad, lr=0.5)
    g.call("sgd_update", q, dup, lr=0.5)
    g.call("sgd_update", r, g.call("add", folded, x), lr=0.5)
    g.output(x, twin, g.call("mul", folded, x))
    h = g.copy()
    passes.optimize(h)
    h.copy().check()
    for dev in DEVICES:
        _check_graph(g, 3, dev, True)


def test_malformed_nodes_raise_unidev_errors():
    rng = np.random.default_rng(0)
    junk = [None, "x", "", -1, 0, 2, 2**63, 1.5, float("nan"), True, (), (1,), (1, 2, 3, 4, 5),
            [0.5, 1], {"a": 1}, b"x", np.int64(3), "sum", "i0 o0", "i0 i0 add o0 o0"]
    ops = list(opset.OPS) + ["reshape", "transpose", "expand"]
    for _ in range(1500):
        op = str(rng.choice(ops))
        g = Graph()
        shape = tuple(int(d) for d in rng.integers(0, 4, int(rng.integers(0, 5))))
        ins = [g.input(shape, str(rng.choice(["float32", "float64", "int32", "bool"])))
               if rng.random() < 0.9 else None for _ in range(int(rng.integers(0, 6)))]
        names = opset.OPS[op].attr_names if op in opset.OPS else \
            {"reshape": ("shape",), "transpose": ("perm",), "expand": ("shape",)}[op]
        attrs = {a: junk[int(rng.integers(len(junk)))] for a in names if rng.random() < 0.6}
        try:
            g.node(op, ins, attrs, shape=shape if rng.random() < 0.3 else None)
        except UnidevError:
            pass  # anything else (TypeError, KeyError, ...) fails the test


@pytest.mark.parametrize("dev", DEVICES)
def test_outputs_may_not_alias_what_the_plan_reads_or_writes(dev):
    g = Graph()
    x, y = g.input((3, 4)), g.input((4,))
    g.output(g.call("add", x, y), g.call("sum", x, axes=(1,)))
    cp = ug.compile(g, dev, cache=False)
    X = DeviceArray.from_numpy(np.ones((3, 4), np.float32), dev)
    Y = DeviceArray.from_numpy(np.ones(4, np.float32), dev)
    with pytest.raises(InvalidArgumentError, match="input 0 and output 0 share memory"):
        cp.run([X, Y], [X, cp.new_outputs()[1]])  # gave sum = 8: x was overwritten first
    big = DeviceArray.from_numpy(np.zeros(20, np.float32), dev)
    with pytest.raises(InvalidArgumentError, match="output 0 and output 1 share memory"):
        cp.run([X, Y], [big[:12].reshape(3, 4), big[10:13]])
    out = cp.run([X, X[0]], [big[:12].reshape(3, 4), big[12:15]])  # inputs may share: read only
    np.testing.assert_allclose(out[1].numpy(), [4, 4, 4])
    # an input the plan updates in place may not share memory with another input
    h = Graph()
    p, grad = h.input((4,)), h.input((4,))
    h.call("sgd_update", p, grad, lr=0.5)
    h.output(h.call("neg", grad))
    cp = ug.compile(h, dev, cache=False)
    with pytest.raises(InvalidArgumentError, match="input 0 and input 1 share memory"):
        cp.run([Y, Y])


@pytest.mark.parametrize("dev", DEVICES)
def test_mutated_plan_files_are_refused_or_run(dev):
    """Random byte mutations (CRC recomputed, so the parser proper sees them) either fail with a
    unidev error at create/run or run; never a crash."""
    graphs = [random_graph(s) for s in range(4)]
    datas = [ug.compile(g, dev, cache=False).data for g in graphs]
    d = ug.compile(graphs[0], dev, cache=False).device
    H = planfile.HEADER
    for s in range(150):
        rng = np.random.default_rng(s)
        k = int(rng.integers(len(datas)))
        b = bytearray(datas[k])
        meta = H.unpack_from(b)[3]
        for _ in range(int(rng.integers(1, 4))):
            pos = H.size + int(rng.integers(meta)) if rng.random() < 0.7 else \
                int(rng.integers(len(b)))
            if rng.random() < 0.7:
                b[pos] ^= 1 << int(rng.integers(8))
            elif pos + 8 <= len(b):
                b[pos:pos + 8] = struct.pack("<q", int(rng.choice([-1, 2**62, 2**31, 1 << 40])))
        fields = list(H.unpack_from(b))
        fields[5] = zlib.crc32(bytes(b[H.size:]))
        b[:H.size] = H.pack(*fields)
        try:
            native = _C.Plan(d.library, d.index, bytes(b))
            xs = [DeviceArray.from_numpy(x, dev) for x in inputs_for(graphs[k], k)]
            outs = [DeviceArray.from_numpy(np.zeros(max(nb, 1), np.uint8), dev)
                    for _, _, _, nb in native.outputs]
            native.run([x.descriptor() for x in xs],
                       [(o.descriptor()[0], 0, dt, tuple(sh), tuple(st))
                        for o, (dt, sh, st, _) in zip(outs, native.outputs, strict=True)], 0)
            d.library.stream_synchronize(0)
        except UnidevError:
            pass
