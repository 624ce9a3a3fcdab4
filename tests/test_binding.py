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
    from unidev import _C

    assert rec.abi == (_C.ABI_MAJOR, _C.ABI_MINOR)  # built against the same unidev.h
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
    """The binding refuses such descriptors itself (views made by DeviceArray never get there:
    tests/test_array.py)."""
    a = DeviceArray.from_numpy(np.ones((4, 4), np.float32), testdev)
    k = discovery.load(testdev).kernel("copy", "float32")
    h, off, dt, _, _ = a.descriptor()
    with pytest.raises(unidev.InvalidArgumentError, match=r"strides\[1\] = -1, expected >= 0"):
        k(0, [(h, 12, dt, [4, 4], [4, -1])], [a.descriptor()], [])
    with pytest.raises(unidev.InvalidArgumentError, match="extent overflows"):
        k(0, [(h, off, dt, [4, 4], [2**61, 1])], [a.descriptor()], [])


def test_descriptor_larger_than_allocation(testdev):
    a = DeviceArray.from_numpy(np.ones((4, 4), np.float32), testdev)
    k = discovery.load(testdev).kernel("copy", "float32")
    h, off, dt, _, _ = a.descriptor()
    out = DeviceArray.empty((5, 4), "float32", testdev)
    with pytest.raises(unidev.OutOfBoundsError, match=r"exceed the allocation of 64 bytes"):
        k(0, [(h, off, dt, [5, 4], [4, 1])], [out.descriptor()], [])
    with pytest.raises(unidev.OutOfBoundsError, match="past the allocation of 64 bytes"):
        a.as_strided((4,), (1,), offset=13)


def test_freed_handle(testdev):
    a = DeviceArray.from_numpy(np.ones(4, np.float32), testdev)
    dst = DeviceArray.empty((3,), "float32", testdev)
    view = a[1:]
    a.buffer.free()
    with pytest.raises(unidev.UnknownHandleError, match="copy: input 'x' .* was freed"):
        ops.copy(view)
    k = discovery.load(testdev).kernel("copy", "float32")
    h, off, dt, sh, st = dst.descriptor()
    with pytest.raises(unidev.UnknownHandleError, match="not a live allocation"):
        k(0, [(a.buffer.handle, 4, dt, sh, st)], [(h, off, dt, sh, st)], [])
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


# ---- issue 14 item 19: every conversion error names the call, the argument and the value ----

@pytest.mark.parametrize("value", [2**64, -1, -2**63 - 1, 2**65, 1.5, "7"])
def test_library_arguments_named(testdev, value):
    """Before: pybind11's "incompatible function arguments" naming neither argument nor value."""
    lib = discovery.load(testdev)
    a = DeviceArray.from_numpy(np.ones(4, np.float32), testdev)
    h = a.buffer.handle
    buf = np.zeros(4, np.uint8)
    calls = {
        ("malloc", "size"): lambda: lib.malloc(0, value),
        ("malloc", "stream"): lambda: lib.malloc(0, 16, value),
        ("malloc", "device"): lambda: lib.malloc(value, 16),
        ("free", "handle"): lambda: lib.free(0, value),
        ("copy_h2d", "offset"): lambda: lib.copy_h2d(h, value, buf),
        ("copy_d2h", "handle"): lambda: lib.copy_d2h(value, 0, buf),
        ("copy_d2d", "size"): lambda: lib.copy_d2d(h, 0, h, 0, value),
        ("memset", "count"): lambda: lib.memset(h, 0, 0, 4, value),
        ("memset", "elem_size"): lambda: lib.memset(h, 0, 0, value, 1),
        ("stream_synchronize", "stream"): lambda: lib.stream_synchronize(value),
        ("event_query", "event"): lambda: lib.event_query(value),
        ("device_properties", "device"): lambda: lib.device_properties(value),
    }
    for (fn, arg), call in calls.items():
        if value == -1 and arg in ("device",):
            continue  # a valid int32, refused as out of range by the plugin check instead
        with pytest.raises(unidev.InvalidArgumentError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"{fn}: {arg} = {value!r}"), msg
        assert "expected" in msg, msg


@pytest.mark.parametrize("value", [2**64, -2**63 - 1, 2**63])
def test_kernel_call_arguments_named(testdev, value):
    k = discovery.load(testdev).kernel("add", "float32")
    a = DeviceArray.from_numpy(np.ones(3, np.float32), testdev)
    h, off, dt, sh, st = a.descriptor()
    good = [("alpha", "float", 1.0)]
    cases = {
        "add: input 1: shape[0]": lambda: k(0, [a.descriptor(), (h, off, dt, [value], st)],
                                             [a.descriptor()], good),
        "add: output 0: strides[0]": lambda: k(0, [a.descriptor()] * 2,
                                               [(h, off, dt, sh, [value])], good),
        "add: input 0: byte_offset": lambda: k(0, [(h, value, dt, sh, st), a.descriptor()],
                                               [a.descriptor()], good),
        "add: device": lambda: k(value, [a.descriptor()] * 2, [a.descriptor()], good),
        "add: stream": lambda: k(0, [a.descriptor()] * 2, [a.descriptor()], good, value),
        "add: attribute 'n'": lambda: k(0, [a.descriptor()] * 2, [a.descriptor()],
                                        good + [("n", "int", value)]),
        "add: attribute 'pads'[1]": lambda: k(0, [a.descriptor()] * 2, [a.descriptor()],
                                              good + [("pads", "ints", [0, value])]),
    }
    for what, call in cases.items():
        if value == 2**63 and "stream" in what:
            continue  # a valid uint64: an unknown stream handle
        with pytest.raises(unidev.InvalidArgumentError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(what) and str(value) in msg, (what, msg)
    with pytest.raises(unidev.InvalidArgumentError, match=r"add: attrs\[0\] = .*expected"):
        k(0, [a.descriptor()] * 2, [a.descriptor()], [("alpha", 1.0)])
    with pytest.raises(unidev.InvalidArgumentError, match=r"add: input 0 = 5, expected"):
        k(0, [5, a.descriptor()], [a.descriptor()], good)
