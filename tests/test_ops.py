"""unidev.ops: overlapping outputs, stream order, scalar attributes and huge integers."""

from __future__ import annotations

import re

import numpy as np
import pytest

import unidev
from unidev import DeviceArray, ops
from unidev.contract import opset
from unidev.core import discovery, reference


def need(dev: str, *ops_: str, dtype: str = "float32") -> None:
    lib = discovery.load(dev)
    for op in ops_:
        if lib.kernel(op, dtype) is None:
            pytest.skip(f"{dev} has no {op}[{dtype}] kernel")


def arr(x, dev: str) -> DeviceArray:
    return DeviceArray.from_numpy(np.asarray(x), dev)


RNG = np.random.default_rng(14)


# ---- item 10: outputs overlapping inputs ------------------------------------------------------

def test_matmul_into_its_own_input(dev):
    need(dev, "matmul")
    x = RNG.standard_normal((5, 5)).astype(np.float32)
    a = arr(x, dev)
    ops.matmul(a, a.T, out=a)  # computed in place before the fix: rows read after written
    np.testing.assert_allclose(a.numpy(), x @ x.T, rtol=1e-5, atol=1e-5)


def test_shifted_elementwise_output(dev):
    need(dev, "add")
    x = RNG.standard_normal(16).astype(np.float32)
    v = arr(x, dev)
    ops.add(v[1:], v[:15], out=v[1:])
    want = x.copy()
    want[1:] = x[1:] + x[:15]
    np.testing.assert_allclose(v.numpy(), want, rtol=1e-6)


def test_exact_in_place_elementwise_runs_in_place(dev):
    need(dev, "add", "mul")
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    y = RNG.standard_normal(6).astype(np.float32)
    a, b = arr(x, dev), arr(y, dev)
    lib = discovery.load(dev)
    before = lib.live_allocations()
    ops.add(a, b, alpha=2.0, out=a)
    ops.mul(a.T, a.T, out=a.T)
    assert lib.live_allocations() == before, "the exact in-place form needs no temporary"
    np.testing.assert_allclose(a.numpy(), (x + 2 * y) ** 2, rtol=1e-5)


def test_softmax_into_transposed_input(dev):
    need(dev, "softmax")
    x = RNG.standard_normal((6, 6)).astype(np.float32)
    a = arr(x, dev)
    ops.softmax(a, axis=1, out=a.T)
    want = reference.run("softmax", [x], {"axis": 1})[0].T
    np.testing.assert_allclose(a.numpy(), want, rtol=1e-5, atol=1e-6)


def test_conv2d_into_its_input(dev):
    need(dev, "conv2d")
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((2, 2, 3, 3)).astype(np.float32)
    a = arr(x, dev)
    ops.conv2d(a, arr(w, dev), padding=(1, 1), out=a)
    want = reference.run("conv2d", [x, w], {"padding": (1, 1)})[0]
    np.testing.assert_allclose(a.numpy(), want, rtol=1e-4, atol=1e-4)


def test_output_that_overlaps_itself_is_refused(dev):
    need(dev, "add")
    x = arr(np.ones((3, 4), np.float32), dev)
    row = DeviceArray.empty((1, 4), "float32", dev)
    with pytest.raises(unidev.InvalidArgumentError,
                       match=r"add: output 'out' .* strides \(0, 1\) has elements that share"):
        ops.add(x, x, out=row.broadcast_to((3, 4)))
    flat = DeviceArray.empty((8,), "float32", dev)
    with pytest.raises(unidev.InvalidArgumentError, match="copy: output 'y' .* share memory"):
        ops.copy(x, out=flat.as_strided((3, 4), (1, 1)))
    with pytest.raises(unidev.InvalidArgumentError, match="fill: output 'y'"):
        ops.fill(out=flat.as_strided((2, 3), (2, 1)), value=1.0)  # rows overlap by one element
    ops.fill(out=flat.as_strided((3, 2), (2, 1)), value=3.0)  # interleaved but distinct
    np.testing.assert_array_equal(flat.numpy()[:6], np.full(6, 3.0))


def test_outputs_overlapping_each_other_are_refused(dev):
    need(dev, "max_pool2d")
    x = arr(RNG.standard_normal((1, 1, 4, 4)).astype(np.float32), dev)
    y = DeviceArray.empty((1, 1, 2, 2), "int64", dev)
    as_float = DeviceArray(y.buffer, (1, 1, 2, 2), "float32")
    with pytest.raises(unidev.InvalidArgumentError,
                       match="max_pool2d: output 'y' and output 'indices' overlap"):
        ops.max_pool2d(x, out=(as_float, y))


def test_updated_in_place_inputs_must_be_separate(dev):
    need(dev, "batch_norm")
    x = arr(RNG.standard_normal((4, 3, 2, 2)).astype(np.float32), dev)
    stats = arr(np.zeros(3, np.float32), dev)
    with pytest.raises(unidev.InvalidArgumentError, match="batch_norm: input 'running_mean' "
                       r"\(updated in place\) and input 'running_var' \(updated in place\)"):
        ops.batch_norm(x, None, None, stats, stats)


def _random_view(rng, n: int, shape: tuple[int, ...]) -> tuple[tuple, int]:
    """Random non-negative strides and an offset that keep `shape` inside n elements."""
    while True:
        strides = tuple(int(rng.integers(0, 9)) for _ in shape)
        span = sum((d - 1) * st for d, st in zip(shape, strides, strict=True))
        if span < n:
            return strides, int(rng.integers(0, n - span))


@pytest.mark.parametrize("op", ["add", "matmul"])
def test_random_aliasing_matches_numpy(dev, op):
    """Outputs and inputs as random views of one buffer: the result is the one computed from
    the inputs as they were, written through the output's strides — or a refusal when the
    output's own elements share memory."""
    need(dev, op)
    rng = np.random.default_rng(10)
    n = 64
    for _ in range(60):
        shape = (3, 4) if op == "add" else (3, 3)
        host = rng.standard_normal(n).astype(np.float32)
        buf = arr(host, dev)
        (sx, ox), (sy, oy), (so, oo) = (_random_view(rng, n, shape) for _ in range(3))
        view = np.lib.stride_tricks.as_strided
        hx, hy = (view(host[o:], shape, [st * 4 for st in s]).copy()
                  for s, o in ((sx, ox), (sy, oy)))
        x, y, out = (buf.as_strided(shape, s, o) for s, o in ((sx, ox), (sy, oy), (so, oo)))
        offsets = np.add.outer(np.arange(shape[0]) * so[0], np.arange(shape[1]) * so[1])
        if np.unique(offsets).size != offsets.size:
            with pytest.raises(unidev.InvalidArgumentError, match="share memory"):
                ops.call(op, x, y, out=out)
            continue
        ops.call(op, x, y, out=out)
        want = host.copy()
        view(want[oo:], shape, [st * 4 for st in so])[...] = hx + hy if op == "add" else hx @ hy
        np.testing.assert_allclose(buf.numpy(), want, rtol=1e-5, atol=1e-5)


# ---- item 12: stream order -------------------------------------------------------------------

def test_ops_on_a_stream_are_ordered(dev):
    need(dev, "add", "mul")
    lib = discovery.load(dev)
    s = lib.stream_create(0)
    try:
        x = np.arange(1 << 18, dtype=np.float32)
        a = arr(x, dev)
        for _ in range(5):
            y = ops.add(a, a, stream=s)  # allocated on s; before the fix on the default stream
            z = ops.mul(y, y, stream=s)
            del y  # freed on s, after mul; before the fix on the default stream, before mul ran
            np.testing.assert_array_equal(z.numpy(), (2 * x) ** 2)  # read after s's work
        lib.stream_synchronize(s)  # reported unknown handles before the fix
        w = ops.add(z, a)  # default stream after s: waits for s's last use of z
        np.testing.assert_array_equal(w.numpy(), (2 * x) ** 2 + x)
        ops.copy(a, out=z, stream=s)
        np.testing.assert_array_equal(z.numpy(), x)
    finally:
        lib.stream_destroy(s)
    # arrays last used on a destroyed stream still read and free on the default one
    np.testing.assert_array_equal(z.numpy(), x)
    del z, w
    lib.synchronize(0)


def test_out_argument_checked(dev):
    a = arr(np.ones(3, np.float32), dev)
    for bad in (5, np.ones(3, np.float32), [a.numpy()]):
        with pytest.raises(unidev.InvalidArgumentError, match=r"(copy|fill): out"):
            ops.copy(a, out=bad)
        with pytest.raises(unidev.InvalidArgumentError, match=r"fill: out"):
            ops.fill(out=bad, value=1.0)


def test_stream_argument_checked(dev):
    a = arr(np.ones(3, np.float32), dev)
    with pytest.raises(unidev.InvalidArgumentError, match=r"copy: argument 'stream' = -1"):
        ops.copy(a, stream=-1)
    with pytest.raises(unidev.InvalidArgumentError, match=f"copy: argument 'stream' = {2**64}"):
        ops.copy(a, stream=2**64)
    with pytest.raises(unidev.UnknownHandleError, match="copy: argument 'stream': stream "
                       "0xdead0000beef was not made by stream_create"):
        ops.copy(a, stream=0xDEAD0000BEEF)
    lib = discovery.load(dev)
    s = lib.stream_create(0)
    lib.stream_destroy(s)
    with pytest.raises(unidev.UnknownHandleError, match="add: argument 'stream': .* destroyed"):
        ops.add(a, a, stream=s)


# ---- item 17: scalar attributes against the dtype --------------------------------------------

@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e20, -1e20])
def test_integer_fill_and_pad_refuse_unrepresentable_values(dev, dtype, value):
    with pytest.raises(unidev.InvalidArgumentError,
                       match=re.escape(f"fill: attribute 'value' = {value}")):
        ops.fill(device=dev, shape=(3,), dtype=dtype, value=value)
    x = np.ones(2, dtype)
    with pytest.raises(ValueError):
        reference.run("fill", [], {"value": value}, out=[np.empty(3, dtype)])
    with pytest.raises(ValueError):
        reference.run("pad_constant", [x], {"pads": (1, 1), "value": value})
    if discovery.load(dev).kernel("pad_constant", dtype) is not None:
        with pytest.raises(unidev.InvalidArgumentError,
                           match=re.escape(f"pad_constant: attribute 'value' = {value}")):
            ops.pad_constant(arr(x, dev), pads=(1, 1), value=value)


def test_integer_fill_edges(dev):
    got = ops.fill(device=dev, shape=(2,), dtype="int32", value=-2.7).numpy()
    np.testing.assert_array_equal(got, [-2, -2])  # toward zero, like the reference and torch
    big = ops.fill(device=dev, shape=(1,), dtype="int64", value=2**53).numpy()
    assert big[0] == 2**53
    with pytest.raises(unidev.InvalidArgumentError, match="not exactly representable"):
        ops.fill(device=dev, shape=(1,), dtype="int64", value=2**53 + 1)
    with pytest.raises(unidev.InvalidArgumentError, match=r"\[-2147483648, 2147483647\]"):
        ops.fill(device=dev, shape=(1,), dtype="int32", value=2**31)
    ops.fill(device=dev, shape=(1,), dtype="float32", value=float("nan"))  # floats take any


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("alpha", [0.5, float("nan"), float("inf"), 1e300])
def test_integer_add_sub_refuse_non_integral_alpha(dev, dtype, alpha):
    need(dev, "add", dtype=dtype)
    x = arr(np.arange(4, dtype=dtype), dev)
    with pytest.raises(unidev.InvalidArgumentError,
                       match=re.escape(f"add: attribute 'alpha' = {alpha}")):
        ops.add(x, x, alpha=alpha)
    if discovery.load(dev).kernel("sub", dtype) is not None:
        with pytest.raises(unidev.InvalidArgumentError, match="sub: attribute 'alpha'"):
            ops.sub(x, x, alpha=alpha)
    np.testing.assert_array_equal(ops.add(x, x, alpha=-3.0).numpy(), -2 * np.arange(4))


def test_integer_arange_range(dev):
    with pytest.raises(unidev.InvalidArgumentError, match="arange: .* outside int32's range"):
        ops.arange(start=3e9, stop=3e9 + 4, dtype="int32", device=dev)
    with pytest.raises(unidev.InvalidArgumentError, match="outside int32's range"):
        ops.arange(start=2**31 - 2, stop=2**31 + 2, dtype="int32", device=dev)
    got = ops.arange(start=2**31 - 3, stop=2**31, dtype="int32", device=dev).numpy()
    np.testing.assert_array_equal(got, [2**31 - 3, 2**31 - 2, 2**31 - 1])
    got = ops.arange(start=3e9, stop=3e9 + 2, dtype="int64", device=dev).numpy()
    np.testing.assert_array_equal(got, [3_000_000_000, 3_000_000_001])


def test_scalar_attributes_are_marked_in_the_op_set():
    marked = {(op.name, a.name) for op in opset.OPS.values() for a in op.attrs if a.scalar}
    assert {("fill", "value"), ("pad_constant", "value"), ("add", "alpha"),
            ("sub", "alpha")} <= marked


# ---- item 19: integers beyond int64 ----------------------------------------------------------

BIG = [2**63, -2**63 - 1, 2**64]


def _int_attrs():
    for op in opset.OPS.values():
        for a in op.attrs:
            if a.type in ("int", "ints"):
                yield op.name, a


@pytest.mark.parametrize("value", BIG)
def test_every_int_attribute_of_every_op_names_itself(dev, value):
    """Before the fix these reached pybind11: "Unable to cast ... to C++ type '?'"."""
    x = arr(np.ones((1, 2, 4, 4), np.float32), dev)
    checked = 0
    for name, a in _int_attrs():
        schema = opset.OPS[name]
        ins = [x] * sum(1 for i in schema.inputs if not i.optional)
        kwargs = {} if schema.inputs else {"device": dev, "shape": (2,)}
        for v in (value, [1, value] if a.type == "ints" else None):
            if v is None:
                continue
            with pytest.raises(unidev.InvalidArgumentError) as info:
                ops.call(name, *ins, **kwargs, **{a.name: v})
            msg = str(info.value)
            assert msg.startswith(f"{name}: attribute '{a.name}' = ") and str(value) in msg, msg
            checked += 1
    assert checked > 40


@pytest.mark.parametrize("value", BIG)
def test_shapes_and_float_attributes_with_huge_integers(dev, value):
    with pytest.raises(unidev.InvalidArgumentError,
                       match=rf"fill: argument 'shape'\[0\] = {value}"):
        ops.fill(device=dev, shape=(value,), value=1.0)
    with pytest.raises(unidev.InvalidArgumentError, match=r"zero: argument 'shape'\[1\]"):
        ops.zero(device=dev, shape=(2, value))
    x = arr(np.ones(3, np.float32), dev)
    with pytest.raises(unidev.InvalidArgumentError, match="add: attribute 'alpha' = 1000"):
        ops.add(x, x, alpha=10**400)  # float() of it overflows
    with pytest.raises(unidev.InvalidArgumentError, match="arange: output 'y' of shape"):
        ops.arange(start=0.0, stop=1e30, device=dev)


def test_front_door_garbage_is_named(dev):
    """Found by probing every op with garbage arguments: each gave a bare Python error."""
    x = arr(np.float32(3), dev)
    if discovery.load(dev).kernel("max", "float32") is not None:
        assert ops.max(x, axes=-1).numpy() == 3.0  # IndexError in the shape rule before
    with pytest.raises(unidev.InvalidArgumentError, match=r"concat: input 'tensors\[1\]' is a "
                       "NoneType"):
        ops.concat([arr(np.ones(3, np.float32), dev), None])  # TypeError before
    with pytest.raises(unidev.InvalidArgumentError,
                       match=r"sum: attribute 'axes' = \[\[1\]\], expected ints"):
        ops.sum(x, axes=[[1]])
