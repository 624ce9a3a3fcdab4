"""The aurora plugin: its description, devices, streams and events, argument checks, algorithms
and results against the numpy reference."""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest
from aurora_testutil import run_python

import unidev
from unidev.conformance import abi
from unidev.contract import opset
from unidev.core import errors, reference
from unidev.core import ops as uops

F32 = "float32"


def dev(x: np.ndarray) -> unidev.DeviceArray:
    return unidev.DeviceArray.from_numpy(np.ascontiguousarray(x), "aurora")


def test_spec(record) -> None:
    spec = record.spec
    assert (spec.name, spec.torch_name, spec.tf_type, spec.priority) == ("aurora", "aurora",
                                                                        "AURORA", 50)
    assert not spec.host_addressable and spec.conformance.tier == 4
    assert os.path.isfile(spec.library) and record.devices >= 1


def test_every_op_and_dtype_has_a_kernel(record) -> None:
    missing = [(op.name, d) for op in opset.OPS.values() for d in op.dtypes
               if record.library.kernel(op.name, d) is None]
    assert missing == []


def test_unsupported_pair_is_null(api) -> None:
    assert api.lookup("exp", "int32") is None
    assert api.lookup("no_such_op", F32) is None


def test_device_properties(api) -> None:
    p = api.properties(0)
    assert b"vesim" in p.name
    assert p.compute_units == 8 and p.vector_width == 256 * 8
    assert p.host_addressable == 0 and p.total_memory == 48 << 30
    with pytest.raises(abi.PluginError) as err:
        api.properties(7)
    assert err.value.code_name == "INVALID_ARGUMENT"


def test_environment_settings() -> None:
    code = """
from unidev.core import discovery
from unidev.conformance import abi
api = abi.Api(discovery.get("aurora").library.api_address)
print(api.device_count(), api.properties(2).total_memory)
"""
    r = run_python(code, {"VESIM_DEVICES": "3", "VESIM_MEMORY": "2G"})
    assert r.stdout.split() == ["3", str(2 << 30)], r.stderr
    code = ("from unidev.core import discovery; r = discovery.get('aurora'); "
            "print(r.status, r.devices)")
    r = run_python(code, {"VESIM_DEVICES": "0"})
    assert r.stdout.split() == ["no", "devices", "0"], r.stderr


def test_mem_device_asks_the_allocation_table() -> None:
    """ABI 1.1: the device comes from vesim's table, not from the pointer's device bits alone."""
    code = """
from unidev.core import discovery
from unidev.conformance import abi
api = abi.Api(discovery.get("aurora").library.api_address)
assert api.table.abi_minor >= 1 and api.has("mem_device")
hs = [(d, api.alloc(d, 0, 100)) for d in range(3)]
print([api.mem_device(h + off) for d, h in hs for off in (0, 99)])
def refused(h):
    try:
        api.mem_device(h)
    except abi.PluginError as e:
        return e.code_name
    return "accepted"
d2, h2 = hs[2]
invented = (2 << 59) | (4000 << 37)  # device 2's layout, an index never handed out
print(refused(h2 + 100), refused(invented), refused(0), refused(31 << 59 | 1 << 37))
api.call("mem_free", 2, 0, h2)
api.call("stream_synchronize", 0)
print(refused(h2), refused(h2 + 5))
"""
    r = run_python(code, {"VESIM_DEVICES": "3"})
    lines = r.stdout.splitlines()
    assert lines[0] == "[0, 0, 1, 1, 2, 2]", r.stderr
    assert lines[1].split() == ["UNKNOWN_HANDLE"] * 4, r.stdout + r.stderr
    assert lines[2].split() == ["UNKNOWN_HANDLE"] * 2, r.stdout + r.stderr


def test_latency_model() -> None:
    code = """
import ctypes, time
from unidev.core import discovery
from unidev.conformance import abi
api = abi.Api(discovery.get("aurora").library.api_address)
h = api.alloc(0, 0, 8)
buf = (ctypes.c_char * 8)()
t = time.perf_counter()
for _ in range(100):
    api.call("memcpy_h2d", None, h, buf, 8)
api.call("stream_synchronize", None)
print(time.perf_counter() - t)
"""
    slow = float(run_python(code, {"VESIM_LATENCY": "veda"}).stdout)
    assert slow >= 100 * 12e-6  # ~12 us per small copy, like AVEO's


def test_streams_and_events(api) -> None:
    s1, s2 = api.stream(0), api.stream(0)
    n = 1 << 20
    h = api.alloc(0, s1, 4 * n)
    api.call("memset", s1, h, 0x3F800000, 4, n)  # 1.0f everywhere
    ev0, ev = api.event(0), api.event(0)
    api.call("event_record", ev0, s1)
    api.call("event_record", ev, s1)
    api.call("stream_wait_event", s2, ev)  # s2 may read what s1 wrote before the event
    out = np.zeros(n, np.float32)
    api.call("memcpy_d2h", s2, out.ctypes.data_as(ctypes.c_void_p), h, 4 * n)
    api.call("stream_synchronize", s2)
    assert (out == 1.0).all()
    done = ctypes.c_int32(0)
    api.call("event_query", ev, ctypes.byref(done))
    assert done.value == 1
    api.call("event_synchronize", ev)
    assert api.elapsed(ev0, ev) >= 0.0
    for e in (ev0, ev):
        api.call("event_destroy", e)
    api.call("mem_free", 0, s1, h)
    for s in (s1, s2):
        api.call("stream_synchronize", s)
        api.call("stream_destroy", s)


def test_bad_arguments_name_op_argument_and_expectation(api, raw) -> None:
    h = api.alloc(0, 0, 64)
    a = abi.RawTensor(h, F32, [4])
    cases = [
        (("add", F32, [a, abi.RawTensor(h, "float64", [4])], [a], [("alpha", "float", 1.0)]),
         ["add", "input 1", "float64", "expected float32"]),
        (("add", F32, [a, a], [a], []), ["add", "alpha"]),
        (("add", F32, [a, abi.RawTensor(h, F32, [2])], [a], [("alpha", "float", 1.0)]),
         ["add", "input 1", "shape"]),
        (("gelu", F32, [a], [a], [("approximate", "str", "cubic")]), ["gelu", "cubic"]),
        (("sum", F32, [a], [abi.RawTensor(h, F32, [])], [("axes", "ints", [3]),
                                                          ("keepdims", "bool", False)]),
         ["sum", "axes", "3"]),
        (("neg", F32, [abi.RawTensor(h, F32, [1 << 40, 1 << 40], [0, 0])],
          [abi.RawTensor(h, F32, [1 << 40, 1 << 40], [0, 0])], []), ["neg", "elements"]),
    ]
    for (op, dtype, ins, outs, attrs), words in cases:
        with pytest.raises(abi.PluginError) as err:
            raw.kernel(op, dtype, 0, 0, ins, outs, attrs)
        assert err.value.code_name == "INVALID_ARGUMENT"
        for w in words:
            assert w in err.value.message, (w, err.value.message)
    with pytest.raises(abi.PluginError) as err:
        raw.kernel("neg", F32, 9, 0, [a], [a], [])
    assert err.value.code_name == "INVALID_ARGUMENT" and "device 9" in err.value.message
    api.call("mem_free", 0, None, h)
    api.call("stream_synchronize", None)


def test_errors_found_on_the_device(api, raw) -> None:
    """Values only the device sees (targets, indices) fail at the next synchronize."""
    logp = dev(np.zeros((2, 3), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="target"):
        unidev.ops.nll_loss(logp, dev(np.array([0, 7])), reduction="sum")[0].numpy()
    x = dev(np.ones((1, 1, 2, 2), np.float32))
    gy = dev(np.ones((1, 1, 1, 1), np.float32))
    idx = dev(np.array([[[[9]]]], np.int64))
    with pytest.raises(errors.InvalidArgumentError, match="indices"):
        unidev.ops.max_pool2d_backward(gy, x, idx, kernel_size=(2, 2)).numpy()


@pytest.mark.parametrize("op", ["conv2d", "conv2d_backward_input", "conv2d_backward_weight"])
def test_conv_algorithms_agree(op: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    attrs = {"stride": (2, 1), "padding": (1, 1), "dilation": (1, 2), "groups": 2}
    gy_shape = (2, 6, 5, 8)
    gy = rng.standard_normal(gy_shape).astype(np.float32)
    if op == "conv2d":
        args, ref_in = [dev(x), dev(w), None], [x, w, None]
    elif op == "conv2d_backward_input":
        attrs["input_shape"] = x.shape
        args, ref_in = [dev(gy), dev(w)], [gy, w]
    else:
        attrs["weight_shape"] = w.shape
        args, ref_in = [dev(gy), dev(x)], [gy, x]
    want = reference.run(op, ref_in, dict(attrs, algorithm="auto"))[0]
    for algo in ("direct", "im2col", "auto"):
        got = getattr(unidev.ops, op)(*args, algorithm=algo, **attrs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=algo)
    with pytest.raises(errors.InvalidArgumentError, match="algorithm"):
        getattr(unidev.ops, op)(*args, algorithm="winograd", **attrs)


def test_strided_broadcast_and_offset_views() -> None:
    rng = np.random.default_rng(1)
    base = rng.standard_normal((6, 10)).astype(np.float32)
    a = dev(base)[1:, ::2]           # offset + stride
    b = dev(base[0]).broadcast_to((5, 10))[:, 1::2]  # stride 0 + offset
    got = unidev.ops.add(a, b, alpha=3.0).numpy()
    np.testing.assert_allclose(got, base[1:, ::2] + 3.0 * base[0, 1::2], rtol=1e-6)
    m = rng.standard_normal((70, 33)).astype(np.float32)
    at = dev(m).T                    # a transposed operand goes to BLAS as it is
    got = unidev.ops.matmul(at, dev(m)).numpy()
    np.testing.assert_allclose(got, m.T.astype(np.float64) @ m, rtol=1e-4, atol=1e-4)
    s = unidev.ops.sum(dev(m)[::3, 1:], axes=(0,)).numpy()
    np.testing.assert_allclose(s, m[::3, 1:].sum(axis=0), rtol=1e-5, atol=1e-5)


def test_large_reduction_and_softmax_match_reference() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(300_001).astype(np.float32)  # one output: split over the cores
    got = unidev.ops.sum(dev(x)).numpy()
    np.testing.assert_allclose(got, x.astype(np.float64).sum(), rtol=1e-5)
    y = rng.standard_normal((7, 129, 3)).astype(np.float32)
    got = unidev.ops.log_softmax(dev(y), axis=1).numpy()
    np.testing.assert_allclose(got, reference.run("log_softmax", [y], {"axis": 1})[0], rtol=1e-5,
                               atol=1e-6)


POOL_GEOMETRIES = [  # kernel, stride, padding, dilation, ceil_mode
    ((2, 2), (2, 2), (0, 0), (1, 1), False), ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 3), (1, 1), (1, 1), (1, 1), False), ((3, 2), (2, 3), (1, 1), (1, 1), True),
    ((2, 3), (3, 1), (1, 0), (2, 2), True), ((4, 5), (3, 4), (2, 2), (1, 3), True),
    ((1, 1), (1, 1), (0, 0), (1, 1), False), ((2, 2), (1, 1), (1, 1), (3, 3), False),
    ((5, 5), (2, 2), (2, 2), (1, 1), True)]


@pytest.mark.parametrize("dtype", [F32, "float64"])
@pytest.mark.parametrize("geo", POOL_GEOMETRIES)
def test_max_pool_matches_reference_with_ties_nan_and_inf(geo, dtype: str) -> None:
    kernel, stride, padding, dilation, ceil_mode = geo
    rng = np.random.default_rng(3)
    attrs = {"kernel_size": kernel, "stride": stride, "padding": padding, "dilation": dilation,
             "ceil_mode": ceil_mode}
    for shape in [(2, 3, 11, 37), (1, 2, 5, 300), (1, 1, 9, 10)]:
        x = rng.integers(-3, 4, shape).astype(dtype)  # many ties: the first tap must win
        x.flat[rng.choice(x.size, 9, replace=False)] = np.nan
        x.flat[rng.choice(x.size, 9, replace=False)] = -np.inf
        x[0, 0, 1] = -np.inf  # a whole row of -inf
        want_y, want_i = reference.run("max_pool2d", [x], attrs)
        got_y, got_i = (a.numpy() for a in unidev.ops.max_pool2d(dev(x), **attrs))
        np.testing.assert_array_equal(got_y, want_y, err_msg=str(shape))
        np.testing.assert_array_equal(got_i, want_i, err_msg=str(shape))
    strided = dev(np.pad(x, ((0, 0), (0, 0), (0, 0), (2, 1))))[..., 2:-1]  # a view, gathered
    np.testing.assert_array_equal(unidev.ops.max_pool2d(strided, **attrs)[1].numpy(), want_i)


@pytest.mark.parametrize("dtype", [F32, "float64"])
@pytest.mark.parametrize("batch", [1, 19])
def test_im2col_conv_over_a_batch_matches_reference(batch: int, dtype: str) -> None:
    # 19: many images per core (per-core column buffers, partial weight gradients); 1: each
    # image's output (or input) channels cut into parts for the cores
    rng = np.random.default_rng(4)
    x = rng.standard_normal((batch, 4, 7, 6)).astype(dtype)
    w = rng.standard_normal((10, 2, 3, 3)).astype(dtype)
    attrs = {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 2,
             "algorithm": "im2col"}
    y = reference.run("conv2d", [x, w, None], attrs)[0]
    gy = rng.standard_normal(y.shape).astype(dtype)
    tol = {"rtol": 1e-4, "atol": 1e-4}
    np.testing.assert_allclose(unidev.ops.conv2d(dev(x), dev(w), None, **attrs).numpy(), y, **tol)
    gx = reference.run("conv2d_backward_input", [gy, w], dict(attrs, input_shape=x.shape))[0]
    np.testing.assert_allclose(unidev.ops.conv2d_backward_input(
        dev(gy), dev(w), input_shape=x.shape, **attrs).numpy(), gx, **tol)
    gw = reference.run("conv2d_backward_weight", [gy, x], dict(attrs, weight_shape=w.shape))[0]
    np.testing.assert_allclose(unidev.ops.conv2d_backward_weight(
        dev(gy), dev(x), weight_shape=w.shape, **attrs).numpy(), gw, **tol)


# ---- special values, batch norm edge cases, bad indices and attribute values (issue 14) ------

def _special_grid(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    if np.dtype(dtype).kind == "f":
        fi = np.finfo(dtype)
        v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, fi.tiny / 4, -fi.tiny, 1.0, -1.0, 2.5,
                      -0.5, 3.0, 88.0, -100.0, 1e4], dtype)
    elif np.dtype(dtype).kind == "i":
        i = np.iinfo(dtype)
        v = np.array([0, 1, -1, 2, -7, i.max, i.min, i.max - 1], dtype)
    else:
        v = np.array([False, True])
    x, y = np.meshgrid(v, v, indexing="ij")
    return x.copy(), y.copy()


_raw_call = uops.call_kernel  # past unidev.ops's own checks


_EW_CASES = [(op.name, d, attrs) for op in opset.OPS.values()
             if op.broadcast and op.shape in ("same", "broadcast")
             and op.name not in ("copy", "cast")
             for d in op.dtypes
             for attrs in ([{"threshold": t} for t in (0.0, 1.0, np.nan, -np.inf)]
                           if op.name == "threshold_backward" else [{}])]


@pytest.mark.parametrize("op,dtype,attrs", _EW_CASES, ids=str)
def test_elementwise_ops_on_special_values(op: str, dtype: str, attrs: dict) -> None:
    # regression: sign(nan) was nan (the op set says 0); threshold_backward zeroed grad where x
    # or the threshold is nan (x <= nan is false: grad passes)
    x, y = _special_grid(dtype)
    nin = len(opset.get(op).inputs)
    ins = [x, y, (np.arange(x.size).reshape(x.shape) % 2).astype(bool) if op == "where"
           else np.flip(x).copy()][:nin]
    if nin == 1:
        ins = [x.ravel()]
    want = reference.run(op, ins, attrs)[0]
    got = getattr(unidev.ops, op)(*[dev(a) for a in ins], **attrs).numpy()
    if want.dtype.kind == "f":
        rtol = 2e-6 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-37, equal_nan=True)
        assert (np.isnan(got) == np.isnan(want)).all()
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(1, 3), (1, 2, 1), (1, 2, 1, 1, 1), (3, 2, 4), (2, 3, 1, 1, 2)],
                         ids=str)
def test_batch_norm_one_value_per_channel_and_any_rank(shape) -> None:
    # regression: one value per channel (F.layer_norm's decomposition) was refused
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(F32)
    c = shape[1]
    w, b = rng.standard_normal(c).astype(F32), rng.standard_normal(c).astype(F32)
    rm, rv = np.zeros(c, F32), np.ones(c, F32)
    drm, drv = dev(rm), dev(rv)
    got = unidev.ops.batch_norm(dev(x), dev(w), dev(b), drm, drv, training=True)
    want = reference.run("batch_norm", [x, w, b, rm, rv], {"training": True})
    for g, r in zip([*got, drm, drv], [*want, rm, rv], strict=True):
        np.testing.assert_allclose(g.numpy(), r, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("bad", [-1, 16, -(1 << 62)])
def test_max_pool2d_backward_refuses_out_of_range_indices(bad: int) -> None:
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    y, idx = reference.run("max_pool2d", [x], {"kernel_size": (2, 2)})
    idx[0, 0, 1, 0] = bad
    gx = dev(np.zeros_like(x))
    with pytest.raises(errors.InvalidArgumentError, match=f"max_pool2d_backward.*{bad}"):
        _raw_call("max_pool2d_backward", [dev(np.ones_like(y)), dev(x), dev(idx)], [gx],
                  {"kernel_size": (2, 2)})
        gx.numpy()


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_attributes_the_dtype_cannot_hold_are_refused(dtype: str) -> None:
    # regression: fill/pad_constant with nan, inf or 1e20 gave INT_MIN; add/sub took alpha 0.5
    y = dev(np.zeros(4, dtype))
    for value in (np.nan, np.inf, -np.inf, 1e20):
        with pytest.raises(errors.InvalidArgumentError, match=f"fill.*value.*{dtype}"):
            _raw_call("fill", [], [y], {"value": value})
        with pytest.raises(errors.InvalidArgumentError, match=f"pad_constant.*value.*{dtype}"):
            _raw_call("pad_constant", [dev(np.zeros(2, dtype))], [y],
                      {"pads": (1, 1), "value": value})
    x = dev(np.arange(4, dtype=dtype))
    for op in ("add", "sub"):
        for alpha in (0.5, np.nan, np.inf, 1e30):
            with pytest.raises(errors.InvalidArgumentError, match=f"{op}.*alpha"):
                _raw_call(op, [x, x], [dev(np.zeros(4, dtype))], {"alpha": alpha})
    with pytest.raises(errors.InvalidArgumentError, match=f"arange.*{dtype}"):
        _raw_call("arange", [], [dev(np.zeros(2, dtype))],
                  {"start": 1e19, "stop": 1e19 + 2e18, "step": 1e18, "dtype": dtype})
    _raw_call("fill", [], [y], {"value": float(np.iinfo(dtype).min)})
    assert (y.numpy() == np.iinfo(dtype).min).all()
