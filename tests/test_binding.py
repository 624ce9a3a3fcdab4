"""The whole native path on the test plugin: discovery, ABI, memory, kernels, DLPack, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev import DeviceArray, ops
from unidev.core import discovery


def test_discovery_finds_testplugin(testdev):
    rec = discovery.get(testdev)
    assert rec.status == "ok" and rec.devices == 2
    assert rec.abi == (1, 0)
    assert rec.library.device_properties(0)["host_addressable"] is True
    assert "entry point" in rec.source


def test_roundtrip_and_views(testdev):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = DeviceArray.from_numpy(x, "testdev:1")
    assert a.device == unidev.Device("testdev", 1)
    np.testing.assert_array_equal(a.numpy(), x)
    np.testing.assert_array_equal(a.T.numpy(), x.T)
    np.testing.assert_array_equal(a[1:, ::2].numpy(), x[1:, ::2])
    np.testing.assert_array_equal(a[2].numpy(), x[2])
    np.testing.assert_array_equal(a[:1].broadcast_to((5, 3, 4)).numpy(),
                                  np.broadcast_to(x[:1], (5, 3, 4)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_add_mul_broadcast_strided(testdev, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 5)) * 10).astype(dtype)
    y = (rng.standard_normal((5,)) * 10).astype(dtype)
    a, b = DeviceArray.from_numpy(x, testdev), DeviceArray.from_numpy(y, testdev)
    np.testing.assert_allclose(ops.add(a, b, alpha=2).numpy(), (x + 2 * y).astype(dtype))
    np.testing.assert_allclose(ops.mul(a.T, a.T).numpy(), x.T * x.T)


def test_matmul_transposed_and_batched(testdev):
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 3, 4), np.float32), rng.standard_normal((4, 5), np.float32)
    a = DeviceArray.from_numpy(x, testdev)
    b = DeviceArray.from_numpy(w.T.copy(), testdev).T
    got = ops.matmul(a, b[None].broadcast_to((2, 4, 5)))
    np.testing.assert_allclose(got.numpy(), x @ w, rtol=1e-5, atol=1e-5)


def test_tier0_ops(testdev):
    z = ops.fill(device=testdev, shape=(2, 3), dtype="int64", value=7)
    np.testing.assert_array_equal(z.numpy(), np.full((2, 3), 7))
    r = ops.arange(start=1, stop=4, step=0.5, device=testdev)
    np.testing.assert_allclose(r.numpy(), np.arange(1, 4, 0.5, dtype=np.float32))
    c = ops.cast(DeviceArray.from_numpy(np.array([1.7, -2.2, 0.0]), testdev), dtype="int32")
    np.testing.assert_array_equal(c.numpy(), [1, -2, 0])
    out = DeviceArray.empty((3, 2), "float32", testdev)
    ops.copy(DeviceArray.from_numpy(np.ones((2, 3), np.float32), testdev).T, out=out)
    np.testing.assert_array_equal(out.numpy(), np.ones((3, 2)))


def test_dlpack_zero_copy_to_numpy(testdev):
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    a = DeviceArray.from_numpy(x, testdev)
    assert a.__dlpack_device__() == (1, 0)
    h = np.from_dlpack(a.T)
    np.testing.assert_array_equal(h, x.T)
    ops.fill(out=a, value=5.0)  # the numpy view shares the device (host) memory
    np.testing.assert_array_equal(h, np.full((3, 2), 5.0))
    del a  # the capsule keeps the buffer alive
    np.testing.assert_array_equal(h, np.full((3, 2), 5.0))


def test_memory_is_freed(testdev):
    lib = discovery.load(testdev)
    before = lib.live_allocations()
    arrays = [DeviceArray.empty((100,), "float32", testdev) for _ in range(5)]
    assert lib.live_allocations() == before + 5
    del arrays
    assert lib.live_allocations() == before


# ---- malformed calls -------------------------------------------------------------------------

def test_wrong_dtype(testdev):
    a = DeviceArray.from_numpy(np.ones(3, np.float32), testdev)
    b = DeviceArray.from_numpy(np.ones(3, np.float64), testdev)
    with pytest.raises(unidev.InvalidArgumentError, match=r"add: input 'y' has dtype float64"):
        ops.add(a, b)
    with pytest.raises(unidev.InvalidArgumentError, match=r"matmul: input 'a' has dtype int32"):
        ops.matmul(DeviceArray.from_numpy(np.ones((2, 2), np.int32), testdev),
                   DeviceArray.from_numpy(np.ones((2, 2), np.int32), testdev))


def test_shape_mismatch(testdev):
    a = DeviceArray.from_numpy(np.ones((2, 3), np.float32), testdev)
    b = DeviceArray.from_numpy(np.ones((4,), np.float32), testdev)
    with pytest.raises(unidev.InvalidArgumentError, match=r"add: input 'y' shape \(4,\)"):
        ops.add(a, b)
    with pytest.raises(unidev.InvalidArgumentError, match=r"matmul: input 'b'.*inner dim"):
        ops.matmul(a, a)


def test_negative_and_overflowing_strides(testdev):
    a = DeviceArray.from_numpy(np.ones((4, 4), np.float32), testdev)
    with pytest.raises(unidev.InvalidArgumentError, match=r"strides\[1\] = -1, expected >= 0"):
        ops.copy(a.as_strided((4, 4), (4, -1), 3))
    with pytest.raises(unidev.InvalidArgumentError, match="extent overflows"):
        ops.copy(a.as_strided((4, 4), (2**61, 1)))


def test_descriptor_larger_than_allocation(testdev):
    a = DeviceArray.from_numpy(np.ones((4, 4), np.float32), testdev)
    with pytest.raises(unidev.OutOfBoundsError, match=r"exceed the allocation of 64 bytes"):
        ops.copy(a.as_strided((5, 4), (4, 1)))
    with pytest.raises(unidev.OutOfBoundsError):
        ops.copy(a.as_strided((4,), (1,), offset=13))


def test_freed_handle(testdev):
    a = DeviceArray.from_numpy(np.ones(4, np.float32), testdev)
    view = a[1:]
    a.buffer.free()
    with pytest.raises(unidev.UnknownHandleError, match="not a live allocation"):
        ops.copy(view)
    with pytest.raises(unidev.UnknownHandleError):
        view.numpy()
    lib = discovery.load(testdev)
    with pytest.raises(unidev.UnknownHandleError, match="freed twice"):
        lib.free(0, a.buffer.handle)


def test_foreign_stream_and_event_handles(testdev):
    lib = discovery.load(testdev)
    garbage = 0xDEAD0000BEEF
    for call in (lambda: lib.stream_synchronize(garbage), lambda: lib.stream_query(garbage),
                 lambda: lib.stream_destroy(garbage), lambda: lib.malloc(0, 64, garbage)):
        with pytest.raises(unidev.UnknownHandleError, match="stream_create"):
            call()
    s, e = lib.stream_create(0), lib.event_create(0)
    for call in (lambda: lib.event_record(garbage, s), lambda: lib.event_query(garbage),
                 lambda: lib.stream_wait_event(s, garbage), lambda: lib.event_destroy(garbage)):
        with pytest.raises(unidev.UnknownHandleError, match="event_create"):
            call()
    lib.event_record(e, s)
    lib.event_synchronize(e)
    lib.event_destroy(e)
    lib.stream_destroy(s)
    with pytest.raises(unidev.UnknownHandleError, match="destroyed"):
        lib.event_query(e)
    with pytest.raises(unidev.UnknownHandleError, match="destroyed"):
        lib.stream_synchronize(s)


def test_bad_device_index(testdev):
    with pytest.raises(unidev.InvalidArgumentError, match=r"index 7 out of range.*2 device"):
        DeviceArray.empty((2,), "float32", "testdev:7")
    lib = discovery.load(testdev)
    with pytest.raises(unidev.InvalidArgumentError, match="device index -1 out of range"):
        lib.malloc(-1, 16)
    a = DeviceArray.from_numpy(np.ones(3, np.float32), "testdev:0")
    b = DeviceArray.from_numpy(np.ones(3, np.float32), "testdev:1")
    with pytest.raises(unidev.InvalidArgumentError, match="is on testdev:1, expected testdev:0"):
        ops.add(a, b)


def test_unknown_op_and_attr(testdev):
    a = DeviceArray.from_numpy(np.ones(3, np.float32), testdev)
    with pytest.raises(AttributeError):
        ops.not_an_op  # noqa: B018
    with pytest.raises(KeyError, match="unknown op 'frobnicate'"):
        ops.call("frobnicate", a)
    with pytest.raises(unidev.InvalidArgumentError, match=r"unknown attribute\(s\) \['beta'\]"):
        ops.add(a, a, beta=2)
    with pytest.raises(unidev.InvalidArgumentError,
                       match="attribute 'alpha' = 'x', expected float"):
        ops.add(a, a, alpha="x")
    assert discovery.load(testdev).kernel("no_such_op", "float32") is None


def test_unsupported_kernel(testdev):
    a = DeviceArray.from_numpy(np.ones(3, np.float32), testdev)
    with pytest.raises(unidev.UnsupportedError, match="plugin 'testdev' has no kernel"):
        ops.exp(a)


def test_plugin_side_checks_reach_python(testdev):
    """Bypass unidev.ops: the plugin's own validation comes back as an exception with its text."""
    lib = discovery.load(testdev)
    k = lib.kernel("add", "float32")
    a = DeviceArray.from_numpy(np.ones(3, np.float32), testdev)
    b = DeviceArray.from_numpy(np.ones(4, np.float32), testdev)
    with pytest.raises(unidev.InvalidArgumentError, match="add: add: 'y' shape does not match"):
        k(0, [a.descriptor(), b.descriptor()], [a.descriptor()], [("alpha", "float", 1.0)])
    with pytest.raises(unidev.InvalidArgumentError, match="unknown dtype 'float8'"):
        lib.kernel("add", "float8")
