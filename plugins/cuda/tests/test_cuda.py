"""unidev-cuda tests: discovery, the no-GPU path, and the host-side argument checks via ctypes."""

from __future__ import annotations

import ctypes as C
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import unidev_cuda

from unidev.contract import dtypes, opset

# ---- the C ABI, mirrored for ctypes (unidev.h) ---------------------------------------------------


class DType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class Tensor(C.Structure):
    _fields_ = [("handle", C.c_uint64), ("device_type", C.c_int32), ("device_id", C.c_int32),
                ("ndim", C.c_int32), ("dtype", DType), ("shape", C.POINTER(C.c_int64)),
                ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class _Ints(C.Structure):
    _fields_ = [("data", C.POINTER(C.c_int64)), ("len", C.c_int64)]


class _Value(C.Union):
    _fields_ = [("i", C.c_int64), ("f", C.c_double), ("b", C.c_int32), ("s", C.c_char_p),
                ("ints", _Ints)]


class Attr(C.Structure):
    _fields_ = [("name", C.c_char_p), ("type", C.c_int), ("value", _Value)]


class KernelArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("device", C.c_int32), ("stream", C.c_void_p),
                ("inputs", C.POINTER(Tensor)), ("num_inputs", C.c_int32),
                ("outputs", C.POINTER(Tensor)), ("num_outputs", C.c_int32),
                ("attrs", C.POINTER(Attr)), ("num_attrs", C.c_int32)]


KERNEL = C.CFUNCTYPE(C.c_void_p, C.POINTER(KernelArgs))
INVALID, UNSUPPORTED = 1, 5


class Api:
    """The plugin's UD_Api table, read by field offsets (only what these tests call)."""

    def __init__(self, lib: C.CDLL) -> None:
        lib.unidev_get_api.restype = C.c_void_p
        base = lib.unidev_get_api()
        names = ["error_code", "error_message", "error_destroy", "device_count",
                 "device_properties", "device_memory_info", "device_synchronize", "mem_alloc",
                 "mem_free", "memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memset", "stream_create",
                 "stream_destroy", "stream_synchronize", "stream_query", "stream_wait_event",
                 "event_create", "event_destroy", "event_record", "event_query",
                 "event_synchronize", "event_elapsed", "kernel_lookup"]
        ptrs = C.cast(base, C.POINTER(C.c_void_p))
        first = 4  # struct_size, abi_major|abi_minor, plugin_name, plugin_version
        self.fn = {n: ptrs[first + i] for i, n in enumerate(names)}
        self.code = C.CFUNCTYPE(C.c_int, C.c_void_p)(self.fn["error_code"])
        self.message = C.CFUNCTYPE(C.c_char_p, C.c_void_p)(self.fn["error_message"])
        self.destroy = C.CFUNCTYPE(None, C.c_void_p)(self.fn["error_destroy"])
        self.lookup = C.CFUNCTYPE(C.c_void_p, C.c_char_p, DType, C.POINTER(C.c_void_p))(
            self.fn["kernel_lookup"])
        self.count = C.CFUNCTYPE(C.c_void_p, C.POINTER(C.c_int32), C.POINTER(C.c_char_p))(
            self.fn["device_count"])
        self.mem_alloc = C.CFUNCTYPE(C.c_void_p, C.c_int32, C.c_void_p, C.c_uint64,
                                     C.POINTER(C.c_uint64))(self.fn["mem_alloc"])

    def take(self, err: int | None) -> tuple[int, str]:
        """(code, message) of an error object, which is then released; (0, '') for success."""
        if not err:
            return 0, ""
        out = self.code(err), self.message(err).decode()
        self.destroy(err)
        return out


@pytest.fixture(scope="module")
def lib() -> C.CDLL:
    lib = C.CDLL(unidev_cuda.library_path())
    lib.unidev_cuda_check_args.restype = C.c_void_p
    lib.unidev_cuda_check_args.argtypes = [C.c_char_p, C.POINTER(KernelArgs)]
    return lib


@pytest.fixture(scope="module")
def api(lib: C.CDLL) -> Api:
    return Api(lib)


@pytest.fixture(scope="module")
def devices(api: Api) -> tuple[int, str]:
    n, reason = C.c_int32(), C.c_char_p()
    assert api.take(api.count(C.byref(n), C.byref(reason))) == (0, "")
    return n.value, (reason.value or b"").decode()


# ---- building kernel arguments ---------------------------------------------------------------


class Call:
    """Kernel arguments that stay alive as long as this object (ctypes arrays are referenced)."""

    def __init__(self, inputs: list, outputs: list, attrs: list) -> None:
        self.keep: list = []
        self.ins = (Tensor * max(len(inputs), 1))(*[self.tensor(t) for t in inputs])
        self.outs = (Tensor * max(len(outputs), 1))(*[self.tensor(t) for t in outputs])
        self.attrs = (Attr * max(len(attrs), 1))(*[self.attr(a) for a in attrs])
        self.args = KernelArgs(C.sizeof(KernelArgs), 0, None, self.ins, len(inputs), self.outs,
                               len(outputs), self.attrs, len(attrs))

    def tensor(self, spec) -> Tensor:
        """spec: None (absent), or (shape, dtype[, strides])."""
        if spec is None:
            return Tensor(0, 12, 0, -1, DType(2, 32, 1), None, None, 0)
        shape, dtype, *rest = spec
        code, bits = dtypes.DTYPES[dtype]
        strides = rest[0] if rest else tuple(int(s) for s in np.cumprod(
            (1,) + tuple(reversed(shape[1:])))[::-1]) if shape else ()
        sh = (C.c_int64 * max(len(shape), 1))(*shape)
        st = (C.c_int64 * max(len(strides), 1))(*strides)
        self.keep += [sh, st]
        return Tensor(0x10000, 12, 0, len(shape), DType(code, bits, 1), sh, st, 0)

    def attr(self, a) -> Attr:
        name, value = a
        v = _Value()
        if isinstance(value, bool):
            kind, v.b = 2, int(value)
        elif isinstance(value, int):
            kind, v.i = 0, value
        elif isinstance(value, float):
            kind, v.f = 1, value
        elif isinstance(value, str):
            kind, v.s = 3, value.encode()
            self.keep.append(v.s)
        else:
            arr = (C.c_int64 * max(len(value), 1))(*value)
            self.keep.append(arr)
            kind, v.ints = 4, _Ints(arr, len(value))
        return Attr(name.encode(), kind, v)


def defaults(op: str, **over) -> list:
    schema = opset.get(op)
    return [(a.name, over.get(a.name, a.default)) for a in schema.attrs]


def check(lib: C.CDLL, api: Api, op: str, inputs: list, outputs: list, **attrs) -> tuple[int, str]:
    call = Call(inputs, outputs, defaults(op, **attrs))
    return api.take(lib.unidev_cuda_check_args(op.encode(), C.byref(call.args)))


F32 = "float32"

# ---- discovery and the no-GPU path -----------------------------------------------------------


def test_listed_with_reason(devices: tuple[int, str]) -> None:
    out = subprocess.run([sys.executable, "-m", "unidev", "list"], capture_output=True, text=True,
                         check=True).stdout
    assert "cuda" in out and "nvgpu" in out and "NVGPU" in out
    count, reason = devices
    if count == 0:
        assert reason and reason in out, out


def test_status_names_libraries() -> None:
    text = unidev_cuda.status()
    assert "cuBLAS:" in text and "cuDNN:" in text and "runtime CUDA:" in text
    # where the nvidia-* wheels are installed, the plugin must find and fully resolve them
    dirs = unidev_cuda.library_dirs()
    for lib, label in (("libcublas.so.13", "cuBLAS"), ("libcudnn.so.9", "cuDNN")):
        if any((Path(d) / lib).exists() for d in dirs):
            line = next(x for x in text.splitlines() if x.startswith(label + ":"))
            assert line.endswith("/" + lib), line


def test_every_tier_op_has_a_float32_kernel(api: Api) -> None:
    for op in opset.OPS.values():
        for name in dtypes.DTYPES:
            code, bits = dtypes.DTYPES[name]
            fn = C.c_void_p()
            assert api.take(api.lookup(op.name.encode(), DType(code, bits, 1), C.byref(fn)))[0] == 0
            dense = op.name in ("matmul", "gemm", "copy") or op.name.startswith("conv2d")
            expected = name in op.dtypes or (dense and name in ("float16", "bfloat16"))
            if name == "float32":
                assert fn.value, f"{op.name}: no float32 kernel"
            if not expected:
                assert not fn.value, f"{op.name}: a {name} kernel the op set does not allow"
    fn = C.c_void_p()
    assert api.take(api.lookup(b"no_such_op", DType(2, 32, 1), C.byref(fn))) == (0, "")
    assert not fn.value


def test_without_device_calls_fail_cleanly(api: Api, devices: tuple[int, str]) -> None:
    if devices[0]:
        pytest.skip("a GPU is present; this tests the no-device path")
    h = C.c_uint64()
    code, msg = api.take(api.mem_alloc(0, None, 64, C.byref(h)))
    assert code == UNSUPPORTED and devices[1] in msg
    fn = C.c_void_p()
    api.take(api.lookup(b"add", DType(2, 32, 1), C.byref(fn)))
    call = Call([((3,), F32), ((3,), F32)], [((3,), F32)], defaults("add"))
    code, msg = api.take(KERNEL(fn.value)(C.byref(call.args)))
    assert code == UNSUPPORTED and "no devices" in msg
    # a malformed call is still refused as such, before any device is touched
    bad = Call([((3,), F32), ((4,), F32)], [((3,), F32)], defaults("add"))
    assert api.take(KERNEL(fn.value)(C.byref(bad.args)))[0] == INVALID


def test_abi_1_1_mem_device_refuses_unknown_handles(lib: C.CDLL) -> None:
    """The table is ABI 1.1 sized; mem_device answers from the plugin's allocation registry, so
    handles it never returned (0, address-like values) are UNKNOWN_HANDLE, GPU or not."""
    from unidev.conformance import abi

    lib.unidev_get_api.restype = C.c_void_p
    table = abi.Api(lib.unidev_get_api())
    assert table.table.abi_minor >= 1 and table.has("mem_device")
    assert table.table.struct_size == C.sizeof(abi.ApiTable)
    for h in (0, 0x10000, (7 << 48) | 0x7F0000000000):
        with pytest.raises(abi.PluginError) as err:
            table.mem_device(h)
        assert err.value.code_name == "UNKNOWN_HANDLE" and "mem_device" in err.value.message


# ---- host-side argument checks -----------------------------------------------------------------

GOOD = [
    ("add", [((2, 3), F32), ((2, 3), F32, (0, 1))], [((2, 3), F32)], {}),
    ("where", [((4,), "int64"), ((4,), "int64"), ((4,), "bool")], [((4,), "int64")], {}),
    ("eq", [((4,), F32), ((4,), F32)], [((4,), "bool")], {}),
    ("cast", [((4,), F32)], [((4,), "int32")], {"dtype": "int32"}),
    ("arange", [], [((5,), F32)], {"start": 0.0, "stop": 5.0}),
    ("sum", [((2, 3, 4), F32)], [((2, 4), F32)], {"axes": (1,)}),
    ("argmax", [((2, 3), F32)], [((2, 1), "int64")], {"axes": (-1,), "keepdims": True}),
    ("matmul", [((5, 2, 3), F32), ((5, 3, 4), F32)], [((5, 2, 4), F32)], {}),
    ("gemm", [((2, 3), F32), ((3, 4), F32), ((2, 4), F32, (0, 1))], [((2, 4), F32)], {}),
    ("matmul", [((2, 3), "bfloat16"), ((3, 4), "bfloat16")], [((2, 4), "bfloat16")], {}),
    ("conv2d", [((2, 4, 8, 8), F32), ((6, 2, 3, 3), F32), ((6,), F32)], [((2, 6, 4, 4), F32)],
     {"stride": (2, 2), "padding": (1, 1), "groups": 2, "algorithm": "im2col"}),
    ("conv2d_backward_input", [((1, 3, 6, 6), F32), ((3, 2, 3, 3), F32)], [((1, 2, 8, 8), F32)],
     {"input_shape": (1, 2, 8, 8)}),
    ("conv2d_backward_weight", [((1, 3, 6, 6), F32), ((1, 2, 8, 8), F32)], [((3, 2, 3, 3), F32)],
     {"weight_shape": (3, 2, 3, 3)}),
    ("max_pool2d", [((1, 2, 5, 5), F32)], [((1, 2, 3, 3), F32), ((1, 2, 3, 3), "int64")],
     {"kernel_size": (2, 2), "ceil_mode": True}),
    ("avg_pool2d_backward", [((1, 1, 2, 2), F32), ((1, 1, 4, 4), F32)], [((1, 1, 4, 4), F32)], {}),
    ("batch_norm", [((4, 3, 2), F32), ((3,), F32), ((3,), F32), None, None],
     [((4, 3, 2), F32), ((3,), F32), ((3,), F32)], {}),
    ("batch_norm", [((1, 3), F32), None, None, ((3,), F32), ((3,), F32)],
     [((1, 3), F32), ((3,), F32), ((3,), F32)], {}),  # one value per channel (layer_norm)
    ("fill", [], [((3,), "int32")], {"value": -2147483648.0}),
    ("add", [((3,), "int64"), ((3,), "int64")], [((3,), "int64")], {"alpha": -3.0}),
    ("softmax", [((2, 3), F32)], [((2, 3), F32)], {"axis": 0}),
    ("nll_loss", [((4, 3), F32), ((4,), "int64"), None], [((), F32), ((), F32)], {}),
    ("mse_loss_backward", [((), F32), ((2, 2), F32), ((2, 2), F32)], [((2, 2), F32)], {}),
    ("concat", [((2, 3), F32), ((2, 1), F32)], [((2, 4), F32)], {"axis": 1}),
    ("pad_constant", [((2, 3), F32)], [((3, 6), F32)], {"pads": (1, 0, 1, 2)}),
    ("sgd_update", [((2, 3), F32), ((2, 3), F32, (1, 2)), ((2, 3), F32), ((), F32), ((1,), F32)],
     [], {"momentum": 0.9}),
    ("adam_update", [((5,), "float64")] * 4 + [None, ((), F32), None, ((), "float64")], [], {}),
    # tier 4
    ("elementwise_program", [((2, 3), F32), ((2, 3), F32, (0, 1))], [((2, 3), F32)] * 2,
     {"program": "i0 i1 add s0 r0 o0 r0 exp o1"}),
    ("elementwise_program", [((2, 3, 4), "float64")], [((2,), "float64")],
     {"program": "i0 c2 mul o0", "reduce": "mean", "reduce_axes": (1, 2)}),
    ("conv2d_bias_act", [((2, 4, 8, 8), F32), ((6, 2, 3, 3), F32), ((6,), F32),
                         ((2, 6, 4, 4), F32, (96, 1, 24, 6))], [((2, 6, 4, 4), F32)],
     {"stride": (2, 2), "padding": (1, 1), "groups": 2, "activation": "silu"}),
    ("gemm_bias_act", [((2, 3), F32), ((3, 4), F32, (1, 3)), ((4,), F32), None],
     [((2, 4), F32)], {"activation": "gelu_tanh", "alpha": 0.5}),
]


@pytest.mark.parametrize("op,ins,outs,attrs", GOOD, ids=[g[0] for g in GOOD])
def test_valid_calls_pass(lib, api, op, ins, outs, attrs) -> None:
    assert check(lib, api, op, ins, outs, **attrs) == (0, "")


BAD = [
    # (op, inputs, outputs, attrs, words the message must contain)
    ("add", [((2, 3), F32), ((3,), F32)], [((2, 3), F32)], {}, ["add", "'y'", "(3,)", "(2, 3)"]),
    ("add", [((3,), F32), ((3,), "float64")], [((3,), F32)], {}, ["add", "'y'", "float64"]),
    ("add", [((3,), "bool"), ((3,), "bool")], [((3,), "bool")], {}, ["add", "bool"]),
    ("exp", [((3,), "int32")], [((3,), "int32")], {}, ["exp", "int32"]),
    ("eq", [((3,), F32), ((3,), F32)], [((3,), F32)], {}, ["eq", "output", "bool"]),
    ("where", [((3,), F32), ((3,), F32), ((3,), F32)], [((3,), F32)], {}, ["'cond'", "bool"]),
    ("gelu", [((3,), F32)], [((3,), F32)], {"approximate": "erf"}, ["approximate", "'erf'"]),
    ("cast", [((3,), F32)], [((3,), F32)], {"dtype": "int7"}, ["dtype", "int7"]),
    ("sum", [((2, 3), F32)], [((2,), F32)], {"axes": (2,)}, ["sum", "axes", "[-2, 2)"]),
    ("sum", [((2, 3), F32)], [((2,), F32)], {"axes": (1, -1)}, ["repeats"]),
    ("sum", [((2, 3), F32)], [((3,), F32)], {"axes": (1,)}, ["output", "(3,)", "(2,)"]),
    ("max", [((2, 0), F32)], [((2,), F32)], {"axes": (1,)}, ["empty axis"]),
    ("argmax", [((2, 3), F32)], [((), "int64")], {"axes": (0, 1)}, ["at most one"]),
    ("argmax", [((2, 3), F32)], [((2,), F32)], {"axes": (1,)}, ["int64"]),
    ("matmul", [((2, 3), F32), ((4, 5), F32)], [((2, 5), F32)], {}, ["matmul", "'b'", "(4, 5)"]),
    ("matmul", [((3,), F32), ((3,), F32)], [((), F32)], {}, ["ndim >= 2"]),
    ("gemm", [((2, 3), F32), ((3, 4), F32), ((2, 5), F32)], [((2, 4), F32)], {}, ["'c'"]),
    ("conv2d", [((1, 4, 8, 8), F32), ((6, 3, 3, 3), F32), None], [((1, 6, 6, 6), F32)], {},
     ["weight", "input channels"]),
    ("conv2d", [((1, 4, 8, 8), F32), ((6, 4, 3, 3), F32), None], [((1, 6, 6, 6), F32)],
     {"algorithm": "winograd"}, ["algorithm", "'winograd'", "im2col"]),
    ("conv2d", [((1, 4, 8, 8), F32), ((6, 4, 3, 3), F32), None], [((1, 6, 6, 6), F32)],
     {"stride": (0, 1)}, ["stride", ">= 1"]),
    ("conv2d", [((1, 4, 8, 8), F32), ((6, 4, 3, 3), F32), None], [((1, 6, 8, 8), F32)], {},
     ["output 'y'", "(1, 6, 6, 6)"]),
    ("conv2d", [((1, 4, 8, 8), F32), ((6, 2, 3, 3), F32), ((5,), F32)], [((1, 6, 6, 6), F32)],
     {"groups": 2}, ["bias", "(6,)"]),
    ("conv2d", [((1, 4, 2, 2), F32), ((6, 4, 3, 3), F32), None], [((1, 6, 1, 1), F32)], {},
     ["too small"]),
    ("conv2d_backward_input", [((1, 3, 6, 6), F32), ((3, 2, 3, 3), F32)], [((1, 2, 8, 8), F32)],
     {"input_shape": (1, 2, 8)}, ["input_shape", "4"]),
    ("max_pool2d", [((1, 2, 5, 5), F32)], [((1, 2, 2, 2), F32), ((1, 2, 2, 2), F32)], {},
     ["indices", "int64"]),
    ("max_pool2d", [((1, 2, 5, 5), F32)], [((1, 2, 2, 2), F32), ((1, 2, 2, 2), "int64")],
     {"padding": (2, 2)}, ["padding", "half"]),
    ("avg_pool2d", [((2, 5, 5), F32)], [((2, 2, 2), F32)], {}, ["4-D", "NCHW"]),
    ("adaptive_avg_pool2d", [((1, 1, 5, 5), F32)], [((1, 1, 2, 2), F32)],
     {"output_size": (0, 2)}, ["output_size"]),
    ("batch_norm", [((4, 3), F32), ((4,), F32), None, None, None],
     [((4, 3), F32), ((3,), F32), ((3,), F32)], {}, ["weight", "(3,)"]),
    ("batch_norm", [((4, 3), F32), None, None, None, None],
     [((4, 3), F32), ((3,), F32), ((3,), F32)], {"training": False}, ["running_mean"]),
    ("batch_norm", [((0, 3), F32), None, None, None, None],
     [((0, 3), F32), ((3,), F32), ((3,), F32)], {}, ["at least one value"]),
    ("fill", [], [((3,), "int32")], {"value": float("nan")}, ["value", "int32"]),
    ("arange", [], [((2,), "int32")], {"start": 3e9, "stop": 3e9 + 2, "dtype": "int32"},
     ["start", "int32"]),
    ("arange", [], [((0,), F32)], {"start": 0.0, "stop": float("inf")}, ["finite"]),
    ("fill", [], [((3,), "int64")], {"value": 1e20}, ["value", "int64"]),
    ("pad_constant", [((2,), "int32")], [((4,), "int32")], {"pads": (1, 1), "value": 1e10},
     ["value", "int32"]),
    ("add", [((3,), "int32"), ((3,), "int32")], [((3,), "int32")], {"alpha": 0.5},
     ["alpha", "integral"]),
    ("sub", [((3,), "int64"), ((3,), "int64")], [((3,), "int64")], {"alpha": float("nan")},
     ["alpha", "int64"]),
    ("softmax", [((2, 3), F32)], [((2, 3), F32)], {"axis": 2}, ["axis", "[-2, 2)"]),
    ("nll_loss", [((4, 3), F32), ((4,), F32), None], [((), F32), ((), F32)], {},
     ["target", "int32 or int64"]),
    ("nll_loss", [((4, 3), F32), ((5,), "int64"), None], [((), F32), ((), F32)], {},
     ["target", "(5,)"]),
    ("nll_loss", [((4, 3), F32), ((4,), "int64"), None], [((), F32), ((), F32)],
     {"reduction": "avg"}, ["reduction", "'avg'"]),
    ("mse_loss", [((2, 2), F32), ((2, 2), F32)], [((2, 2), F32)], {}, ["loss", "()"]),
    ("concat", [((2, 3), F32), ((3, 1), F32)], [((2, 4), F32)], {"axis": 1}, ["tensors[1]"]),
    ("pad_constant", [((2, 3), F32)], [((3, 6), F32)], {"pads": (1, 0)}, ["pads", "4"]),
    ("pad_constant", [((2, 3), F32)], [((3, 6), F32)], {"pads": (1, 0, -1, 2)}, ["negative"]),
    ("sgd_update", [((3,), F32), ((3,), F32), None, None, None], [], {"momentum": 0.5},
     ["momentum_buffer", "0.5"]),
    ("sgd_update", [((3,), F32), ((4,), F32), None, None, None], [], {}, ["'grad'", "(4,)"]),
    ("adam_update", [((3,), F32)] * 3 + [((3,), "float64"), None, None, None, None], [], {},
     ["'exp_avg_sq'", "float64"]),
    ("adam_update", [((3,), F32)] * 4 + [None, ((2,), F32), None, None], [], {},
     ["'state_step'", "one float32"]),
    ("elementwise_program", [((3,), F32)] * 2, [((3,), F32)], {"program": "i0 i1 foo o0"},
     ["program", "token 2", "'foo'"]),
    ("elementwise_program", [((3,), F32)], [((3,), F32)], {"program": "i0 o0 i0 o1"},
     ["'o1'", "1 output(s)"]),
    ("elementwise_program", [((2, 3), F32), ((3,), F32)], [((2, 3), F32)],
     {"program": "i0 i1 add o0"}, ["'xs[1]'", "pre-broadcast"]),
    ("elementwise_program", [((2, 3), F32)], [((3,), F32)],
     {"program": "i0 o0", "reduce": "sum", "reduce_axes": (0,)}, ["reduce_axes", "trailing"]),
    ("elementwise_program", [((2, 3), "int32")], [((2, 3), "int32")], {"program": "i0 o0"},
     ["int32"]),
    ("conv2d_bias_act", [((1, 2, 5, 5), F32), ((3, 2, 3, 3), F32), None, None],
     [((1, 3, 3, 3), F32)], {"activation": "swish"}, ["activation", "'swish'"]),
    ("conv2d_bias_act", [((1, 2, 5, 5), F32), ((3, 2, 3, 3), F32), None, ((1, 3, 3, 4), F32)],
     [((1, 3, 3, 3), F32)], {}, ["residual"]),
    ("gemm_bias_act", [((2, 3), F32), ((3, 4), F32), ((5,), F32), None], [((2, 4), F32)], {},
     ["bias"]),
    ("gemm_bias_act", [((2, 2, 3), F32), ((3, 4), F32), None, None], [((2, 4), F32)], {},
     ["2-D"]),
    ("copy", [((2, 3), F32, (3, -1))], [((2, 3), F32)], {}, ["strides[1]", ">= 0"]),
    ("copy", [((2, -3), F32, (3, 1))], [((2, 3), F32)], {}, ["shape[1]", ">= 0"]),
]


@pytest.mark.parametrize("op,ins,outs,attrs,words", BAD, ids=[f"{b[0]}-{i}" for i, b in
                                                               enumerate(BAD)])
def test_invalid_calls_are_named(lib, api, op, ins, outs, attrs, words) -> None:
    code, msg = check(lib, api, op, ins, outs, **attrs)
    assert code == INVALID, msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


def test_counts_and_attr_types(lib: C.CDLL, api: Api) -> None:
    call = Call([((3,), F32)], [((3,), F32)], defaults("add"))
    code, msg = api.take(lib.unidev_cuda_check_args(b"add", C.byref(call.args)))
    assert code == INVALID and "1 inputs" in msg and "expected 2" in msg
    call = Call([((3,), F32), ((3,), F32)], [((3,), F32)], [("alpha", 2)])
    code, msg = api.take(lib.unidev_cuda_check_args(b"add", C.byref(call.args)))
    assert code == INVALID and "alpha" in msg and "float" in msg  # ud_kit_check_signature's words
    call = Call([((3,), F32), ((3,), F32)], [((3,), F32)], [])
    code, msg = api.take(lib.unidev_cuda_check_args(b"add", C.byref(call.args)))
    assert code == INVALID and "attributes" in msg
    call = Call([((3,), F32)], [((3,), F32)], [])
    assert api.take(lib.unidev_cuda_check_args(b"nope", C.byref(call.args)))[0] == INVALID


def test_table_matches_op_set(lib: C.CDLL, api: Api) -> None:
    """Input/output counts and attribute types of the C op table agree with unidev's op set."""
    for op in opset.OPS.values():
        ins = [((1,), F32)] * len(op.inputs)
        outs = [((1,), F32)] * len(op.outputs)
        code, msg = check(lib, api, op.name, ins, outs)
        assert not re.search(r"inputs and|attributes, expected|wrong type", msg), (
            f"{op.name}: {msg}")
        call = Call(ins, outs, defaults(op.name)[:-1] if op.attrs else [("extra", 1)])
        code, msg = api.take(lib.unidev_cuda_check_args(op.name.encode(), C.byref(call.args)))
        assert code == INVALID and "attributes" in msg, f"{op.name}: {msg}"


def test_abi_1_2_kernel_compile_validates_programs(lib: C.CDLL) -> None:
    """kernel_compile (ABI 1.2) has no specialization to give (one interpreter runs every
    program): NULL for valid programs and other ops, a refusal naming the token otherwise."""
    from unidev.conformance import abi

    lib.unidev_get_api.restype = C.c_void_p
    table = abi.Api(lib.unidev_get_api())
    assert (table.table.abi_minor, table.table.struct_size) == (2, abi.SIZE_1_2)
    attrs = [(a.name, a.type, a.default) for a in opset.get("elementwise_program").attrs]
    good = [("program", "str", "i0 i7 mul s3 r3 o0 r3 o1")] + attrs[1:]
    assert table.compile("elementwise_program", "float32", good) is None
    assert table.compile("conv2d_bias_act", "float32", []) is None
    for text, word in [("i0 foo o0", "foo"), ("i0 o0 o1", "o1"), ("c1e5x o0", "c1e5x")]:
        with pytest.raises(abi.PluginError) as err:
            table.compile("elementwise_program", "float64", [("program", "str", text)] + attrs[1:])
        assert err.value.code_name == "INVALID_ARGUMENT" and word in err.value.message
    with pytest.raises(abi.PluginError, match="attributes"):
        table.compile("elementwise_program", "float32", good[:1])


def test_extent_overflow_is_refused(lib: C.CDLL, api: Api) -> None:
    big = 1 << 40
    code, msg = check(lib, api, "copy", [((big, big), F32, (big, 1))], [((big, big), F32)])
    assert code == INVALID and "overflow" in msg


# ---- on a GPU (skipped with the plugin's reason when it reports no devices) --------------------


def test_gpu_add_roundtrip(devices: tuple[int, str]) -> None:
    if devices[0] == 0:
        pytest.skip(f"cuda: no devices: {devices[1]}")
    import unidev

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = unidev.DeviceArray.from_numpy(x, device="cuda:0")
    out = unidev.ops.add(a, a.T.T, alpha=2.0).numpy()
    np.testing.assert_array_equal(out, x * 3)


@pytest.fixture
def gpu(devices: tuple[int, str]):
    if devices[0] == 0:
        pytest.skip(f"cuda: no devices: {devices[1]}")
    from unidev.core.device import device

    return device("cuda:0")


def _dev(x: np.ndarray):
    from unidev.core.array import DeviceArray

    return DeviceArray.from_numpy(x, "cuda:0")


CONV_ATTRS = {"stride": (2, 2), "padding": (1, 1), "dilation": (1, 1), "groups": 2}


@pytest.mark.parametrize("algorithm", ["auto", "cudnn", "im2col", "direct"])
def test_gpu_conv_algorithms(gpu, algorithm: str) -> None:
    """Every `algorithm` of conv2d and its backward ops agrees with the numpy reference."""
    from unidev.core import ops, reference

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 9, 9), dtype=np.float32)
    w = rng.standard_normal((6, 2, 3, 3), dtype=np.float32)
    b = rng.standard_normal(6, dtype=np.float32)
    attrs = dict(CONV_ATTRS, algorithm=algorithm)
    (want,) = reference.run("conv2d", [x, w, b], dict(attrs))
    got = ops.conv2d(_dev(x), _dev(w), _dev(b), **attrs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    gy = rng.standard_normal(want.shape, dtype=np.float32)
    for op, second, key, shape in (("conv2d_backward_input", w, "input_shape", x.shape),
                                   ("conv2d_backward_weight", x, "weight_shape", w.shape)):
        a = dict(attrs, **{key: shape})
        (want,) = reference.run(op, [gy, second], dict(a))
        got = ops.call(op, _dev(gy), _dev(second), **a).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=op)


def test_gpu_half_matmul(gpu) -> None:
    """float16 and bfloat16 matmul (kernels beyond the op set's dtypes) through cuBLAS."""
    from unidev.core.array import DeviceArray

    rng = np.random.default_rng(2)
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((17, 9)).astype(np.float32)
    want = a @ b
    lib = gpu.library
    for dt in ("float16", "bfloat16"):
        def to_bits(m: np.ndarray, dt=dt) -> np.ndarray:
            if dt == "float16":
                return m.astype(np.float16).view(np.uint16)
            return (m.view(np.uint32) >> 16).astype(np.uint16)  # truncation is a valid bf16

        arrs = []
        for m in (a, b, np.zeros((33, 9), np.float32)):
            d = DeviceArray.empty(m.shape, dt, gpu)
            lib.copy_h2d(d.buffer.handle, 0, np.ascontiguousarray(to_bits(m)).view(np.uint8))
            arrs.append(d)
        k = lib.kernel("matmul", dt)
        k(gpu.index, [arrs[0].descriptor(), arrs[1].descriptor()], [arrs[2].descriptor()], [], 0)
        lib.synchronize(gpu.index)
        bits = np.zeros(33 * 9, np.uint16)
        lib.copy_d2h(arrs[2].buffer.handle, 0, bits.view(np.uint8))
        if dt == "float16":
            got = bits.view(np.float16).astype(np.float32).reshape(33, 9)
        else:
            got = (bits.astype(np.uint32) << 16).view(np.float32).reshape(33, 9)
        np.testing.assert_allclose(got, want, rtol=5e-2, atol=0.3, err_msg=dt)


def test_gpu_fault_surfaces_at_synchronize(gpu) -> None:
    from unidev import UnidevError
    from unidev.core import ops

    logp = _dev(np.log(np.full((4, 3), 1 / 3, np.float32)))
    target = _dev(np.array([0, 1, 7, 2], np.int64))
    with pytest.raises(UnidevError) as info:
        ops.nll_loss(logp, target)
        gpu.library.synchronize(gpu.index)
    assert "nll_loss" in str(info.value) and "7" in str(info.value)
    ok = ops.nll_loss(logp, _dev(np.array([0, 1, 2, 2], np.int64)))[0].numpy()
    np.testing.assert_allclose(ok, np.log(3.0), rtol=1e-6)


def test_gpu_freed_handle_is_refused(gpu) -> None:
    from unidev import UnknownHandleError
    from unidev.core import ops

    x = _dev(np.ones(64, np.float32))
    x.buffer.free()
    _dev(np.ones(64, np.float32))  # the pool likely hands the freed block out again
    with pytest.raises(UnknownHandleError):
        ops.copy(x)


@pytest.mark.parametrize("op", ["elementwise_program", "conv2d_bias_act", "gemm_bias_act"])
def test_gpu_tier4_conformance_cases(gpu, op: str) -> None:
    """Every tier-4 conformance case (both dtypes) on the GPU against the numpy reference."""
    from unidev.conformance import cases
    from unidev.conformance.runner import run_case

    for dtype in opset.get(op).dtypes:
        for case in cases.cases_for(op, dtype):
            outcome = run_case(op, dtype, case, "cuda:0")
            assert outcome.ok, outcome.message
