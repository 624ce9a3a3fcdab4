"""unidev-x86 beyond the kernel conformance: ISPC, the raw table, threaded paths, bad inputs."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import unidev
from unidev.conformance import abi
from unidev.core import discovery, reference

# ISPC provisioning is this plugin's build tool (cmake/ispc.py), loaded by path: it is not installed
_ISPC_PY = Path(__file__).resolve().parent.parent / "cmake" / "ispc.py"
_spec = importlib.util.spec_from_file_location("unidev_x86_build_ispc", _ISPC_PY)
ispc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ispc)

DEV = "x86:0"
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def api() -> abi.Api:
    rec = discovery.get("x86")
    assert rec.status == "ok", rec.error
    return abi.Api(discovery.load("x86").api_address)


def dev(a: np.ndarray) -> unidev.DeviceArray:
    a = np.asarray(a)
    return unidev.DeviceArray.from_numpy(a if a.flags.c_contiguous else a.copy(), device=DEV)


def run(op: str, inputs: list, attrs: dict | None = None, views: list | None = None,
        rtol: float = 1e-5, atol: float = 1e-6) -> tuple:
    """Run `op` on the device (inputs given as numpy, optionally turned into device views by
    `views`) and compare every output with the numpy reference."""
    attrs = attrs or {}
    args = [None if x is None else dev(x) for x in inputs]
    host = list(inputs)
    for i, make in enumerate(views or []):
        if make is not None:
            args[i], host[i] = make(args[i]), make(np.asarray(inputs[i]))
    where = {} if inputs else {"device": DEV}
    got = getattr(unidev.ops, op)(*args, **attrs, **where)
    got = got if isinstance(got, tuple) else (got,)
    want = reference.run(op, [None if h is None else np.array(h) for h in host], attrs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=rtol, atol=atol, equal_nan=True)
    return tuple(g.numpy() for g in got)


# ---- the package ---------------------------------------------------------------------------

def test_ispc_is_provisioned_and_cached() -> None:
    path = ispc.ensure_ispc()
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True)
    assert "ISPC" in out.stdout
    start = time.perf_counter()
    assert ispc.ensure_ispc() == path
    assert time.perf_counter() - start < 5.0  # cached: no download the second time
    cli = subprocess.run([sys.executable, str(_ISPC_PY)], capture_output=True,
                         text=True, check=True)
    assert cli.stdout.strip() == path


def test_ispc_forced_path_must_run(monkeypatch) -> None:
    monkeypatch.setenv("UNIDEV_ISPC", "/nonexistent/ispc")
    with pytest.raises(ispc.IspcError, match="UNIDEV_ISPC"):
        ispc.ensure_ispc()


def test_ispc_without_apt_says_what_to_do(tmp_path) -> None:
    env = dict(os.environ, UNIDEV_CACHE_DIR=str(tmp_path), PATH=str(tmp_path))
    env.pop("UNIDEV_ISPC", None)
    done = subprocess.run([sys.executable, str(_ISPC_PY)], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 1 and "needs Debian's apt" in done.stderr and "ispc" in done.stderr


def test_spec_and_library() -> None:
    rec = discovery.get("x86")
    spec = rec.spec
    assert (spec.name, spec.torch_name, spec.priority, spec.host_addressable) == (
        "x86", "avx", 40, True)
    assert spec.conformance.tier == 4 and os.path.exists(spec.library)
    lib = ctypes.CDLL(spec.library)
    lib.unidev_get_api.restype = ctypes.c_void_p
    table = abi.ApiTable.from_address(lib.unidev_get_api())
    assert table.abi_major == 1 and table.plugin_name == b"x86"


def test_every_tier_op_has_a_float32_kernel(api) -> None:
    from unidev.contract import opset
    for op in opset.OPS.values():
        for dtype in op.dtypes:
            assert api.lookup(op.name, dtype) is not None, f"{op.name}[{dtype}]"
    assert api.lookup("no_such_op", "float32") is None
    assert api.lookup("exp", "int32") is None  # the op set has exp for floats only


# ---- memory, streams, events ---------------------------------------------------------------

def test_memory_round_trip_memset_and_bounds(api) -> None:
    s = api.stream(0)
    h = api.alloc(0, s, 100)
    assert h % 64 == 0
    api.call("memset", s, h, 0x0102, 2, 50)
    out = (ctypes.c_uint16 * 50)()
    api.call("memcpy_d2h", s, out, h, 100)
    assert set(out) == {0x0102}
    with pytest.raises(abi.PluginError, match="allocation has 36 left"):
        api.call("memcpy_d2h", s, out, h + 64, 40)
    api.call("mem_free", 0, s, h)
    with pytest.raises(abi.PluginError, match="not a live allocation"):
        api.call("mem_free", 0, s, h)
    zero = api.alloc(0, s, 0)
    assert zero and zero != api.alloc(0, s, 0)  # size 0 still gives a unique handle
    api.call("stream_destroy", s)


def test_events_time_the_stream(api) -> None:
    s, e0, e1 = api.stream(0), api.event(0), api.event(0)
    done = ctypes.c_int32(0)
    api.call("event_query", e0, ctypes.byref(done))
    assert done.value == 1  # never recorded counts as done
    with pytest.raises(abi.PluginError, match="never recorded"):
        api.elapsed(e0, e1)
    api.call("event_record", e0, s)
    x = dev(RNG.random(1 << 20, dtype=np.float32))
    unidev.ops.exp(x)
    api.call("event_record", e1, s)
    api.call("stream_wait_event", s, e1)
    api.call("event_synchronize", e1)
    assert api.elapsed(e0, e1) >= 0.0
    for e in (e0, e1):
        api.call("event_destroy", e)
    api.call("stream_destroy", s)


# ---- large and strided work: the threaded and tiled paths ----------------------------------

def test_broadcast_strided_output_and_in_place() -> None:
    x = RNG.standard_normal((513, 1031)).astype(np.float32)
    row = RNG.standard_normal(513).astype(np.float32)
    out = dev(np.zeros((513, 1031), np.float32))
    got = unidev.ops.add(dev(x).T, dev(row), alpha=-0.5, out=out.T)
    np.testing.assert_allclose(got.numpy(), x.T - 0.5 * row, rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), (x.T - 0.5 * row).T, rtol=1e-6)
    a = dev(x)
    unidev.ops.mul(a, a, out=a)  # the output is the input: elementwise aliasing is allowed
    np.testing.assert_allclose(a.numpy(), x * x, rtol=1e-6)


def test_large_outputs_take_the_streaming_stores() -> None:
    """Outputs of >= 16 MB are written with non-temporal stores from their first 64-byte
    boundary on: offset (unaligned) outputs, odd lengths, one-byte and strided outputs, copies
    and in-place calls must all come out exact."""
    n = (1 << 22) + 37
    x = RNG.standard_normal(n + 3).astype(np.float32)
    y = RNG.standard_normal(n + 3).astype(np.float32)
    for off in (0, 1, 3):
        run("add", [x, y], {"alpha": 2.0}, views=[lambda t, o=off: t[o:o + n]] * 2, rtol=0,
            atol=0)
        run("copy", [x], views=[lambda t, o=off: t[o:o + n]], rtol=0, atol=0)
    out = dev(np.zeros(n + 1, np.float32))
    got = unidev.ops.mul(dev(x[:n]), dev(y[:n]), out=out[1:])
    np.testing.assert_array_equal(got.numpy(), x[:n] * y[:n])
    assert out.numpy()[0] == 0
    big = RNG.standard_normal(1 << 25).astype(np.float32)  # bool output: 32 MB
    run("gt", [big, -big], rtol=0, atol=0)
    run("relu", [big.reshape(1 << 12, 1 << 13)], views=[lambda t: t.T], rtol=0, atol=0)
    a = dev(big)
    unidev.ops.mul(a, a, out=a)
    np.testing.assert_array_equal(a.numpy(), big * big)


def test_where_and_casts_on_views() -> None:
    x = RNG.standard_normal((300, 700))
    cond = RNG.random((700,)) < 0.5
    run("where", [x, -x, cond], views=[lambda t: t[::2], lambda t: t[::2], None], rtol=0)
    for src in ("float32", "float64", "int32", "int64", "bool"):
        for dst in ("float32", "float64", "int32", "int64", "bool"):
            v = (RNG.standard_normal((129, 65)) * 50).astype(src)
            run("cast", [v], {"dtype": dst}, views=[lambda t: t.T], rtol=0, atol=0)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod", "argmax", "argmin"])
@pytest.mark.parametrize("axes", [(), (0,), (1,), (0, 2)])
def test_reductions_large(op: str, axes: tuple) -> None:
    if op.startswith("arg") and len(axes) > 1:
        return
    x = RNG.standard_normal((96, 57, 41)).astype(np.float32)
    if op == "prod":
        x = 1 + x / 1000
    run(op, [x], {"axes": axes}, rtol=1e-4, atol=1e-4)
    run(op, [x], {"axes": axes, "keepdims": True}, views=[lambda t: t.transpose(2, 0, 1)],
        rtol=1e-4, atol=1e-4)


def test_split_reductions_keep_first_and_nan() -> None:
    x = np.full(1 << 19, 3.0, np.float32)
    assert run("argmax", [x])[0] == 0  # ties across the threads' parts: the first wins
    x[400_000] = np.nan
    x[300_000] = np.nan
    assert run("argmin", [x])[0] == 300_000
    assert np.isnan(run("max", [x])[0])
    ints = RNG.integers(-(1 << 40), 1 << 40, size=1 << 19)
    run("sum", [ints], rtol=0, atol=0)
    run("max", [ints.astype(np.int32)], rtol=0, atol=0)


def test_softmax_along_strided_axes() -> None:
    x = RNG.standard_normal((8, 33, 70)).astype(np.float32) * 10
    for axis in (0, 1, -1):
        y = run("softmax", [x], {"axis": axis}, views=[lambda t: t[:, ::2]])[0]
        run("log_softmax", [x], {"axis": axis}, atol=1e-5)  # x - max - log(sum): float32 rounding
        run("softmax_backward", [x, y], {"axis": axis}, views=[lambda t: t[:, ::2], None],
            atol=1e-5)


def test_nan_and_signed_zero_semantics() -> None:
    v = np.array([np.nan, -0.0, 0.0, 2.5, -3.0, np.inf, -np.inf], np.float32)
    w = np.array([1.0, np.nan, -0.0, 2.5, np.inf, 0.0, np.nan], np.float32)
    for op in ("sign", "relu", "abs", "neg", "floor", "round", "square"):
        run(op, [v], rtol=0, atol=0)
    for op in ("maximum", "minimum", "eq", "ne", "lt", "ge", "mul"):
        run(op, [v, w], rtol=0, atol=0)
    run("threshold_backward", [np.ones(7, np.float32), v], {"threshold": -0.0}, rtol=0, atol=0)
    run("threshold_backward", [np.arange(4, dtype=np.int32), np.array([0, 1, -1, 2], np.int32)],
        {"threshold": -0.5}, rtol=0, atol=0)
    x = np.full((1, 1, 4, 4), -np.inf, np.float32)
    x[0, 0, 3, 3] = np.nan
    run("max_pool2d", [x], {"kernel_size": (2, 2), "padding": (1, 1)}, rtol=0, atol=0)


# ---- nn ops ----------------------------------------------------------------------------------

def test_pooling_on_channels_last_views() -> None:
    x = RNG.standard_normal((2, 9, 11, 3)).astype(np.float32)  # NHWC memory, NCHW view
    nchw = [lambda t: t.transpose(0, 3, 1, 2)]
    attrs = {"kernel_size": (3, 2), "stride": (2, 3), "padding": (1, 1), "dilation": (2, 1),
             "ceil_mode": True}
    y, idx = run("max_pool2d", [x], attrs, views=nchw)
    run("max_pool2d_backward", [RNG.standard_normal(y.shape).astype(np.float32), x, idx],
        attrs, views=[None, nchw[0], None])
    avg = {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True,
           "count_include_pad": False}
    y = run("avg_pool2d", [x], avg, views=nchw)[0]
    run("avg_pool2d_backward", [np.ones_like(y), x], avg, views=[None, nchw[0]])
    y = run("adaptive_avg_pool2d", [x], {"output_size": (4, 5)}, views=nchw)[0]
    run("adaptive_avg_pool2d_backward", [y, x], {"output_size": (4, 5)}, views=[None, nchw[0]])


def test_batch_norm_updates_running_stats() -> None:
    x = (RNG.standard_normal((6, 5, 7, 9)) * 3 + 100).astype(np.float32)  # a large mean
    w, b = RNG.standard_normal(5).astype(np.float32), RNG.standard_normal(5).astype(np.float32)
    rm, rv = dev(np.zeros(5, np.float32)), dev(np.ones(5, np.float32))
    y, mean, invstd = unidev.ops.batch_norm(dev(x), dev(w), dev(b), rm, rv, momentum=0.2)
    ref_rm, ref_rv = np.zeros(5, np.float32), np.ones(5, np.float32)
    want = reference.run("batch_norm", [x, w, b, ref_rm, ref_rv],
                         {"training": True, "momentum": 0.2, "eps": 1e-5})
    for got, exp in zip((y, mean, invstd, rm, rv), (*want, ref_rm, ref_rv), strict=True):
        np.testing.assert_allclose(got.numpy(), exp, rtol=1e-4, atol=1e-4)
    gy = RNG.standard_normal(x.shape).astype(np.float32)
    run("batch_norm_backward", [gy, x, w, mean.numpy(), invstd.numpy()], rtol=1e-3, atol=1e-3)
    run("batch_norm", [x, None, None, ref_rm, ref_rv], {"training": False}, rtol=1e-4, atol=1e-4)


def test_losses() -> None:
    logp = np.log(RNG.dirichlet(np.ones(7), size=20)).astype(np.float32)
    target = RNG.integers(0, 7, size=20)
    target[3] = -100
    w = RNG.random(7).astype(np.float32)
    for red in ("none", "mean", "sum"):
        loss, total = run("nll_loss", [logp, target, w], {"reduction": red})
        g = np.ones_like(loss)
        run("nll_loss_backward", [g, logp, target, w, total], {"reduction": red})
        x = RNG.standard_normal((700, 300)).astype(np.float32)
        t = RNG.standard_normal(300).astype(np.float32)
        loss = run("mse_loss", [x, t], {"reduction": red}, rtol=1e-4)[0]
        run("mse_loss_backward", [np.ones_like(loss), x, t], {"reduction": red})


def test_memory_ops() -> None:
    parts = [RNG.standard_normal((4, n)).astype(np.float32) for n in (3, 0, 5)]
    got = unidev.ops.concat([dev(parts[0]), dev(parts[1]), dev(parts[2].T.copy()).T], axis=1)
    np.testing.assert_array_equal(got.numpy(), np.concatenate(parts, axis=1))
    run("pad_constant", [RNG.integers(0, 9, (2, 3, 4)).astype(np.int64)],
        {"pads": (1, 0, 0, 2, 3, 1), "value": -7.0}, rtol=0, atol=0)
    run("arange", [], {"start": 10.0, "stop": -3.0, "step": -1.5, "dtype": "float64"})
    y = unidev.ops.fill(shape=(3, 3), dtype="int64", value=float(1 << 40), device=DEV)
    assert (y.numpy() == 1 << 40).all()


# ---- bad inputs reach the kernels through the raw table --------------------------------------

def _raw(api, op, dtype, inputs, outputs, attrs=(), device=0):
    abi.Raw(api).kernel(op, dtype, device, 0, inputs, outputs, list(attrs))


def test_bad_inputs_name_op_and_argument(api) -> None:
    T = abi.RawTensor
    h, o = api.alloc(0, 0, 256), api.alloc(0, 0, 256)
    cases = [
        ("add", "float32", [T(h, "float32", [4]), T(h, "float64", [4])], [T(o, "float32", [4])],
         [("alpha", "float", 1.0)], "add: 'y' has dtype float64, expected float32"),
        ("add", "float32", [T(h, "float32", [4]), T(h, "float32", [4])], [T(o, "float32", [4])],
         [], "add: 0 attributes, expected 1"),
        ("gelu", "float32", [T(h, "float32", [4])], [T(o, "float32", [4])],
         [("approximate", "str", "fast")], "expected 'none' or 'tanh'"),
        ("sum", "float32", [T(h, "float32", [4, 4])], [T(o, "float32", [4])],
         [("axes", "ints", [2]), ("keepdims", "bool", False)], "axis 2 is out of range"),
        ("max", "float32", [T(h, "float32", [4, 0])], [T(o, "float32", [4])],
         [("axes", "ints", [1]), ("keepdims", "bool", False)], "empty axis"),
        ("copy", "float32", [T(h, "float32", [100])], [T(o, "float32", [100])], [],
         "copy: 'x' needs 400 bytes"),
        ("copy", "float32", [T(h + 4096 * 1024, "float32", [4])], [T(o, "float32", [4])], [],
         "is not inside a live allocation"),
        ("cast", "float32", [T(h, "float32", [4])], [T(o, "float32", [4])],
         [("dtype", "str", "complex64")], "attribute 'dtype' is 'complex64'"),
        ("softmax", "int32", [T(h, "int32", [4])], [T(o, "int32", [4])], [("axis", "int", 0)],
         "no kernel"),
        ("max_pool2d", "float32", [T(h, "float32", [1, 1, 4, 4])],
         [T(o, "float32", [1, 1, 2, 2]), T(o, "int64", [1, 1, 2, 2])],
         [("kernel_size", "ints", [2, 2]), ("stride", "ints", []), ("padding", "ints", [2, 2]),
          ("dilation", "ints", [1, 1]), ("ceil_mode", "bool", False)], "at most half"),
    ]
    for op, dtype, ins, outs, attrs, message in cases:
        with pytest.raises(abi.PluginError, match=message):
            _raw(api, op, dtype, ins, outs, attrs)
    with pytest.raises(abi.PluginError, match="device 3 does not exist"):
        _raw(api, "copy", "float32", [T(h, "float32", [4])], [T(o, "float32", [4])], device=3)


def test_bounds_errors_name_the_variadic_element(api) -> None:
    T = abi.RawTensor
    h, o = api.alloc(0, 0, 64), api.alloc(0, 0, 512)
    with pytest.raises(abi.PluginError, match=r"concat: 'tensors\[1\]' needs 400 bytes"):
        _raw(api, "concat", "float32", [T(h, "float32", [4]), T(h, "float32", [100])],
             [T(o, "float32", [104])], [("axis", "int", 0)])


def test_mem_device_abi_1_1(api) -> None:
    """ABI 1.1 table; mem_device: the one device owns [base, base + size) of every live
    allocation, nothing past its end, nothing once freed."""
    assert (api.table.abi_minor, api.table.struct_size) == (2, abi.SIZE_1_2)  # 1.2: + kernel_compile
    h = api.alloc(0, 0, 100)  # 64-byte aligned: h + 100 lies in no allocation
    assert [api.mem_device(h + off) for off in (0, 1, 99)] == [0, 0, 0]
    z = api.alloc(0, 0, 0)
    assert api.mem_device(z) == 0

    def unknown(*handles: int) -> None:
        for handle in handles:
            with pytest.raises(abi.PluginError, match="mem_device: handle") as exc:
                api.mem_device(handle)
            assert exc.value.code_name == "UNKNOWN_HANDLE"

    unknown(h + 100, z + 1, 0)
    api.call("mem_free", 0, 0, h)
    unknown(h, h + 50)
    api.call("mem_free", 0, 0, z)


def test_bad_targets_and_indices_are_errors() -> None:
    logp = dev(np.zeros((3, 4), np.float32))
    with pytest.raises(unidev.InvalidArgumentError, match="target"):
        unidev.ops.nll_loss(logp, dev(np.array([0, 4, 1])))
    x = dev(np.zeros((1, 1, 4, 4), np.float32))
    y, idx = unidev.ops.max_pool2d(x)
    bad = dev(np.full((1, 1, 2, 2), 99, np.int64))
    with pytest.raises(unidev.InvalidArgumentError, match="indices"):
        unidev.ops.max_pool2d_backward(y, x, bad)


def test_concurrent_host_threads_share_the_pool(api) -> None:
    import threading
    n = 1 << 20
    src = np.arange(n, dtype=np.float32) % 7
    h = api.alloc(0, 0, 4 * n)
    api.call("memcpy_h2d", 0, h, src.ctypes.data_as(ctypes.c_void_p), 4 * n)
    failures = []

    def work(k: int) -> None:
        out = api.alloc(0, 0, 8)
        for _ in range(20):  # ctypes drops the GIL: these kernels really overlap
            _raw(api, "sum", "float32", [abi.RawTensor(h, "float32", [n])],
                 [abi.RawTensor(out, "float32", [])], [("axes", "ints", []),
                                                      ("keepdims", "bool", False)])
            got = ctypes.c_float()
            api.call("memcpy_d2h", 0, ctypes.byref(got), out, 4)
            if got.value != float(src.sum(dtype=np.float64)):
                failures.append((k, got.value))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures and not any(t.is_alive() for t in threads)


def test_fork_runs_inline() -> None:
    code = ("import os, numpy as np, unidev\n"
            "x = unidev.DeviceArray.from_numpy(np.ones(1 << 20, np.float32), device='x86')\n"
            "assert unidev.ops.sum(x).numpy() == 1 << 20\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os._exit(0 if unidev.ops.sum(x).numpy() == 1 << 20 else 1)\n"
            "assert os.waitpid(pid, 0)[1] == 0\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
