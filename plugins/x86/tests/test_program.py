"""unidev-x86's elementwise_program: kernel_compile's generated ISPC and the interpreter kernel
against the numpy reference (random programs, broadcasts, strides, reductions), and the disk
cache of generated kernels across processes (hits, bad entries rebuilt, no ISPC, races)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import unidev
from unidev.conformance.tier4 import random_program
from unidev.core import reference
from unidev.core.device import device
from unidev.core.errors import InvalidArgumentError

DEV = "x86:0"
OP = "elementwise_program"
TOL = {"float32": dict(rtol=3e-5, atol=3e-6), "float64": dict(rtol=1e-12, atol=1e-13)}


def dev(a: np.ndarray) -> unidev.DeviceArray:
    return unidev.DeviceArray.from_numpy(np.ascontiguousarray(a), device=DEV)


def attr_list(program: str, reduce: str = "none", axes: tuple = ()) -> list:
    return [("program", "str", program), ("reduce", "str", reduce), ("reduce_axes", "ints", axes)]


def kernels(dtype: str, attrs: list) -> dict:
    """The interpreter (kernel_lookup) and the generated kernel (kernel_compile)."""
    lib = device(DEV).library
    compiled = lib.kernel_compile(OP, dtype, attrs)
    assert compiled is not None
    return {"interpreted": lib.kernel(OP, dtype), "compiled": compiled}


def counters() -> dict[str, int]:
    return unidev.debug_counters("x86")


def run(kernel, ins: list, outs: list, attrs: list) -> list[np.ndarray]:
    kernel(0, [x.descriptor() for x in ins], [y.descriptor() for y in outs], attrs, 0)
    return [y.numpy() for y in outs]


def check(dtype: str, ins: list[unidev.DeviceArray], program: str, n_out: int,
          reduce: str = "none", axes: tuple = (), out_view=None) -> None:
    attrs = attr_list(program, reduce, axes)
    want = reference.run(OP, [x.numpy() for x in ins],
                         {"program": program, "reduce": reduce, "reduce_axes": axes})
    for name, k in kernels(dtype, attrs).items():
        outs = [unidev.DeviceArray.empty(w.shape, dtype, DEV) for w in want]
        if out_view:
            outs = [out_view(w.shape) for w in want]
        for got, w in zip(run(k, ins, outs, attrs), want, strict=True):
            np.testing.assert_allclose(got, w, equal_nan=True, err_msg=f"{name} {program!r}",
                                       **TOL[dtype])
    assert len(want) == n_out


def broadcast_input(rng, shape: tuple, dtype: str) -> unidev.DeviceArray:
    """A full input, or one broadcast (stride 0) over some dims, or a scalar broadcast."""
    form = rng.integers(4)
    small = (tuple(1 if rng.random() < 0.5 else d for d in shape) if form == 1 else
             () if form == 2 else shape[:-1] + (1,) if form == 3 else shape)
    x = rng.uniform(-3, 3, small).astype(dtype)
    return dev(x).broadcast_to(shape) if small != shape else dev(x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_random_programs_vs_reference(dtype: str) -> None:
    rng = np.random.default_rng(18)
    before = counters()
    for shape in [(1,), (7,), (1025,), (3, 333), (2, 3, 129)]:
        for _ in range(2):
            n_in, n_out = int(rng.integers(1, 4)), int(rng.integers(1, 3))
            ins = [broadcast_input(rng, shape, dtype) for _ in range(n_in)]
            check(dtype, ins, random_program(rng, n_in, n_out), n_out)
    after = counters()
    assert after["program_no_jit"] == before["program_no_jit"]  # every one was generated


def test_every_operator_and_special_constants() -> None:
    rng = np.random.default_rng(3)
    x, y = dev(rng.uniform(0.1, 3, (3, 41))), dev(rng.uniform(-3, 3, (3, 41)))
    unary = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh",
             "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "erf", "floor", "ceil", "round",
             "sign", "square"]
    binary = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le",
              "gt", "ge"]
    prog = (" ".join(f"i0 {u} o{k}" for k, u in enumerate(unary[:8])) + " " +
            " ".join(f"i1 {u} o{k + 8}" for k, u in enumerate(unary[8:16])))
    check("float64", [x, y], prog, 16)
    check("float64", [x, y], " ".join(f"i0 i1 {b} o{k}" for k, b in enumerate(binary)), 13)
    x, y = dev(x.numpy().astype(np.float32)), dev(y.numpy().astype(np.float32))
    check("float32", [x, y], "i1 round o0 i1 sign o1 i1 c0 gt i0 i1 where o2 cnan i0 maximum o3 "
          "c-inf i1 minimum o4 cinf i0 mul o5 c-1e-3 c2.5 div o6", 7)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_reductions(reduce: str) -> None:
    rng = np.random.default_rng(5)
    for dtype, shape, axes in [("float32", (5, 1031), (1,)), ("float64", (3, 4, 257), (1, 2)),
                               ("float32", (2, 3, 5), (0, 1, 2)), ("float64", (6, 1), (1,))]:
        x = rng.standard_normal(shape).astype(dtype)
        x.flat[x.size // 2] = np.nan if reduce in ("max", "min") else x.flat[0]  # nan propagates
        row = dev(rng.standard_normal(shape[-1:]).astype(dtype)).broadcast_to(shape)
        xt = dev(x.T.copy()).T  # transposed strides
        check(dtype, [xt, row], "i0 i1 mul c0.5 add o0 i1 exp o1", 2, reduce, axes)


def test_output_strides_and_in_place() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((33, 65)), rng.standard_normal((33, 65))
    check("float64", [dev(a), dev(b)], "i0 i1 sub s0 r0 r0 mul o0 r0 o1", 2,
          out_view=lambda s: unidev.DeviceArray.empty(s[::-1], "float64", DEV).T)
    for name, k in kernels("float32", attr_list("i0 c1 add o0 i0 i1 mul o1")).items():
        x, y = dev(a.astype(np.float32)), dev(b.astype(np.float32))
        o1 = unidev.DeviceArray.empty(a.shape, "float32", DEV)
        run(k, [x, y], [x, o1], attr_list("i0 c1 add o0 i0 i1 mul o1"))  # o0 is x itself
        np.testing.assert_allclose(x.numpy(), a.astype(np.float32) + 1, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(o1.numpy(), (a * b).astype(np.float32), rtol=1e-6)


def test_large_outputs_stream_from_any_alignment() -> None:
    n = (1 << 22) + 3  # 16 MB of float32: the non-temporal store path
    x = np.arange(n + 1, dtype=np.float32) * np.float32(1e-6)
    big = dev(x)
    for offset in (0, 1):
        ins = [big[offset:offset + n]]
        check("float32", ins, "i0 c2 mul c1 add o0", 1,
              out_view=lambda s, o=offset: unidev.DeviceArray.empty((n + 1,), "float32", DEV)[
                  o:o + n])
        check("float32", ins, "i0 c2 mul o0 i0 c3 sub o1", 2,
              out_view=lambda s, o=offset: unidev.DeviceArray.empty((n + 2,), "float32", DEV)[
                  o:o + n])


def test_malformed_programs_and_mismatched_calls_are_refused() -> None:
    lib = device(DEV).library
    with pytest.raises(InvalidArgumentError, match="token 2 'foo'"):
        lib.kernel_compile(OP, "float32", attr_list("i0 i1 foo o0"))
    k = lib.kernel_compile(OP, "float32", attr_list("i0 i1 add o0"))
    x, y = dev(np.ones(4, np.float32)), unidev.DeviceArray.empty((4,), "float32", DEV)
    with pytest.raises(InvalidArgumentError, match="compiled for program 'i0 i1 add o0'"):
        run(k, [x, x], [y], attr_list("i0 i1 sub o0"))
    with pytest.raises(InvalidArgumentError, match="compiled for"):
        run(k, [x], [y], attr_list("i0 i1 add o0"))  # reads an input the call lacks
    assert lib.kernel_compile("add", "float32", []) is None  # nothing to specialize


# ---- the disk cache, across processes -----------------------------------------------------
CHILD = r"""
import json, sys
import numpy as np, unidev
from unidev.core.device import device
lib = device("x86:0").library
res = {}
for prog in sys.argv[1:]:
    k = lib.kernel_compile("elementwise_program", "float32",
                           [("program", "str", prog), ("reduce", "str", "none"),
                            ("reduce_axes", "ints", ())])
    x = unidev.DeviceArray.from_numpy(np.arange(100, dtype=np.float32), device="x86:0")
    y = unidev.DeviceArray.empty((100,), "float32", "x86:0")
    k(0, [x.descriptor()], [y.descriptor()], [("program", "str", prog), ("reduce", "str", "none"),
      ("reduce_axes", "ints", ())], 0)
    res[prog] = y.numpy().tolist()
print(json.dumps({"out": res, "counters": unidev.debug_counters("x86")}))
"""
PROGS = ["i0 c3 mul c1 add o0", "i0 i0 mul c0.5 sub o0"]
WANT = [np.arange(100, dtype=np.float32) * 3 + 1, np.arange(100, dtype=np.float32) ** 2 - 0.5]


def child(cache: Path, *progs: str, **env: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", CHILD, *progs], capture_output=True, text=True,
                          env={**os.environ, "UNIDEV_CACHE_DIR": str(cache), **env}, timeout=120)
    assert done.returncode == 0, done.stderr
    res = json.loads(done.stdout)
    for p, w in zip(progs, WANT[:len(progs)], strict=True):
        np.testing.assert_allclose(res["out"][p], w, rtol=1e-6)
    return res["counters"], done.stderr


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "programs").glob("*.so"), key=lambda p: p.stat().st_mtime_ns)


def test_disk_cache_hits_and_rebuilds_bad_entries(tmp_path: Path) -> None:
    c, err = child(tmp_path, *PROGS)
    assert (c["program_compiles"], c["program_disk_hits"], c["program_no_jit"]) == (2, 0, 0), err
    first, second = entries(tmp_path)
    c, err = child(tmp_path, *PROGS)  # a new process: both from disk, nothing compiled
    assert (c["program_compiles"], c["program_disk_hits"], c["program_rebuilds"]) == (0, 2, 0)
    assert "rebuilding" not in err
    good = first.read_bytes()
    bad = {"corrupt (checksum)": good[:500] + bytes([good[500] ^ 1]) + good[501:],
           "truncated or not an entry": good[:-9],
           "another program's (foreign)": second.read_bytes()}
    # a trailer that matches (key, size, checksum) over bytes that are no shared object
    junk = b"\x7fELF" + bytes(4000)
    fnv = 0xCBF29CE484222325
    for byte in junk:
        fnv = ((fnv ^ byte) * 0x100000001B3) % (1 << 64)
    key = struct.unpack_from("<Q", good, len(good) - 24)[0]
    trailer = b"UDPROG1\0" + struct.pack("<QQQ", key, len(junk), fnv)
    bad["not loadable or missing a symbol"] = junk + trailer
    for why, data in bad.items():
        first.write_bytes(data)
        c, err = child(tmp_path, PROGS[0])
        assert (c["program_rebuilds"], c["program_compiles"]) == (1, 1), (why, err)
        assert f"is {why}; rebuilding it" in err, (why, err)
        assert first.read_bytes() == good  # rebuilt: the same object as before
    assert not list((tmp_path / "programs").glob("tmp-*"))


def test_no_ispc_falls_back_to_the_interpreter(tmp_path: Path) -> None:
    c, err = child(tmp_path, PROGS[0], UNIDEV_ISPC=str(tmp_path / "no-ispc"))
    assert (c["program_no_jit"], c["program_compiles"]) == (1, 0) and "no ISPC" in err


def test_two_processes_compiling_one_program(tmp_path: Path) -> None:
    env = {**os.environ, "UNIDEV_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, *PROGS], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        got = json.loads(out)["out"]
        for prog, w in zip(PROGS, WANT, strict=True):
            np.testing.assert_allclose(got[prog], w, rtol=1e-6)
    assert len(entries(tmp_path)) == 2 and not list((tmp_path / "programs").glob("tmp-*"))
    c, err = child(tmp_path, *PROGS)  # what they left is whole: both load
    assert (c["program_disk_hits"], c["program_rebuilds"]) == (2, 0), err
