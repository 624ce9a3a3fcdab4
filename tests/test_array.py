"""DeviceArray: every view constructor checked against the contract and its allocation."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev import DeviceArray, ops


def _array(dev: str, n: int = 16) -> DeviceArray:
    return DeviceArray.from_numpy(np.arange(n, dtype=np.float32), dev)


# ---- item 5: negative strides and views past the allocation --------------------------------

@pytest.mark.parametrize("shape, strides, offset", [
    ((2,), (-1,), 3),          # read heap garbage before the fix
    ((2, 2), (2, -1), 3),
    ((3, 3), (4, -1), 3),
    ((4,), (-1000000,), 3),
    ((4, 4), (400000, -100000), 3),
])
def test_as_strided_refuses_negative_strides(dev, shape, strides, offset):
    a = _array(dev)
    with pytest.raises(unidev.InvalidArgumentError,
                       match=r"as_strided: strides\[\d\] = -\d+, expected >= 0"):
        a.as_strided(shape, strides, offset)


@pytest.mark.parametrize("shape, strides, offset", [
    ((20,), (1,), 0), ((4,), (1,), 13), ((2,), (1,), 16), ((4, 4), (2**61, 1), 0),
    ((3,), (2**63 - 1,), 0),
])
def test_as_strided_refuses_views_past_the_allocation(dev, shape, strides, offset):
    a = _array(dev)
    with pytest.raises(unidev.OutOfBoundsError, match="past the allocation of 64 bytes"):
        a.as_strided(shape, strides, offset)


def test_as_strided_refuses_bad_arguments(dev):
    a = _array(dev)
    with pytest.raises(unidev.InvalidArgumentError,
                       match=r"as_strided: offset = -1, expected >= 0"):
        a.as_strided((2,), (1,), -1)
    with pytest.raises(unidev.InvalidArgumentError, match=r"as_strided: shape\[0\] = -2"):
        a.as_strided((-2,), (1,))
    with pytest.raises(unidev.InvalidArgumentError, match="strides .* have 1 dims, shape"):
        a.as_strided((2, 2), (1,))
    with pytest.raises(unidev.InvalidArgumentError, match=r"shape\[0\] = 1.5 \(float\)"):
        a.as_strided((1.5,), (1,))
    with pytest.raises(unidev.InvalidArgumentError, match="17 dims, at most 16"):
        a.as_strided((1,) * 17, (1,) * 17)


def test_valid_views_still_read_right(dev):
    x = np.arange(16, dtype=np.float32)
    a = DeviceArray.from_numpy(x, dev)
    np.testing.assert_array_equal(a.as_strided((3, 3), (4, 1), 1).numpy(),
                                  np.lib.stride_tricks.as_strided(x[1:], (3, 3), (16, 4)))
    np.testing.assert_array_equal(a.as_strided((4,), (0,), 15).numpy(), np.full(4, 15.0))
    np.testing.assert_array_equal(a.as_strided((0,), (1,), 16).numpy(), np.zeros(0))
    m = a.reshape(4, 4)
    np.testing.assert_array_equal(m[1:, ::3].T.numpy(), x.reshape(4, 4)[1:, ::3].T)
    np.testing.assert_array_equal(m[3, 1:].numpy(), x[13:])
    np.testing.assert_array_equal(m[4:].numpy(), np.zeros((0, 4)))


def test_other_view_constructors_check_their_arguments(dev):
    a = _array(dev).reshape(4, 4)
    with pytest.raises(unidev.InvalidArgumentError, match="broadcast_to: shape"):
        a[:1].broadcast_to((-1, 4))
    with pytest.raises(unidev.InvalidArgumentError, match="more than one -1"):
        a.reshape(-1, -1)
    with pytest.raises(unidev.InvalidArgumentError, match=r"reshape: shape\[0\] = -2"):
        a.reshape(-2, -8)  # the product matches; before the fix this made a negative shape
    with pytest.raises(unidev.InvalidArgumentError, match="cannot reshape"):
        DeviceArray.empty((0, 3), "float32", dev).reshape(0, -1)  # ZeroDivisionError before
    with pytest.raises(unidev.InvalidArgumentError, match="DeviceArray: strides"):
        DeviceArray(a.buffer, (2,), "float32", (-4,), 8)
    with pytest.raises(unidev.OutOfBoundsError, match="DeviceArray: view"):
        DeviceArray(a.buffer, (9,), "float64")


# ---- item 11: freed arrays and their views ---------------------------------------------------

def test_freed_buffer_refused_everywhere_even_after_handle_reuse(dev):
    n = 1 << 16  # large enough for the host allocator of x86 and testdev to reuse the block
    a = _array(dev, n)
    views = [a, a[1:], a.reshape(256, 256).T, a.as_strided((2,), (0,), 3)]
    handle = a.buffer.handle
    a.buffer.free()
    unidev.device(dev).library.synchronize(0)
    # plugins hand freed handles out again (aurora only after 4M allocations); before the fix
    # the stale arrays then read or wrote whichever array got the handle
    others = []
    for _ in range(8):
        others.append(ops.fill(device=dev, shape=(n,), value=7.0))
        if others[-1].buffer.handle == handle:
            break
    for v in views:
        with pytest.raises(unidev.UnknownHandleError, match="freed"):
            v.numpy()
        with pytest.raises(unidev.UnknownHandleError, match="copy: input 'x' .* was freed"):
            ops.copy(v)
        with pytest.raises(unidev.UnknownHandleError, match=r"fill: out\[0\] .* was freed"):
            ops.fill(out=v, value=1.0)
        with pytest.raises(unidev.UnknownHandleError, match="freed"):
            v.descriptor()
        with pytest.raises(unidev.UnknownHandleError, match="freed"):
            v.__dlpack__()
    for o in others:
        np.testing.assert_array_equal(o.numpy(), np.full(n, 7.0))


# ---- item 19: integers beyond int64 in shapes, strides, offsets, indices ----------------------

BIG = [2**63, -2**63 - 1, 2**64]


@pytest.mark.parametrize("value", BIG)
def test_huge_integers_in_array_arguments_are_named(dev, value):
    a = _array(dev)
    cases = {
        "empty: shape[1]": lambda: DeviceArray.empty((2, value), "float32", dev),
        "as_strided: shape[0]": lambda: a.as_strided((value,), (1,)),
        "as_strided: strides[0]": lambda: a.as_strided((2,), (value,)),
        "as_strided: offset": lambda: a.as_strided((2,), (1,), value),
        "broadcast_to: shape[0]": lambda: a.broadcast_to((value, 16)),
        "reshape: shape[0]": lambda: a.reshape(value, 1),
    }
    for what, fn in cases.items():
        with pytest.raises(unidev.InvalidArgumentError) as info:
            fn()
        assert what in str(info.value) and str(value) in str(info.value), (what, info.value)
    with pytest.raises(IndexError, match=f"index {value} out of range"):
        a[value]
    with pytest.raises(unidev.InvalidArgumentError, match=f"transpose: axes\\[0\\] = {value}"):
        a.transpose(value)  # accepted as axis 0 before (value % ndim)
    if value > 0:
        np.testing.assert_array_equal(a[3::value].numpy(), [3.0])  # one element: any step
        assert a[value:].size == 0


def test_empty_too_large_for_any_device(dev):
    with pytest.raises(unidev.InvalidArgumentError, match=r"empty: shape .* needs \d+ bytes"):
        DeviceArray.empty((2**40, 2**40), "float32", dev)
    with pytest.raises(unidev.InvalidArgumentError, match="device: .* index in"):
        DeviceArray.empty((2,), "float32", unidev.Device(dev, 2**63))


def test_unhashable_dtype_is_named(dev):
    with pytest.raises(TypeError, match=r"empty: unknown dtype \[\]|unknown dtype \[\]"):
        DeviceArray.empty((2,), [], dev)  # "unhashable type: 'list'" before
