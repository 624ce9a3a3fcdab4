"""Tier 4 and ABI 1.2: the program parsers (C = Python), reference vs torch, unidev.ops, the
test plugin through the conformance cases, kernel_compile, and 1.0/1.1/1.2 tables side by side."""

from __future__ import annotations

import ctypes as C
import subprocess

import numpy as np
import pytest

import unidev
from unidev import _C
from unidev.conformance import abi, cases, tier4
from unidev.conformance.runner import run_case
from unidev.contract import opset
from unidev.core import ops, program, reference
from unidev.core.array import DeviceArray

SHIM = r"""
#include <unidev/plugin_kit.h>
int ud_test_parse(const char* text, int n_in, int n_out, char* msg, int n, int* counts) {
  UD_KitProgram* p = (UD_KitProgram*)malloc(sizeof *p);
  UD_Error* e = ud_kit_program_parse("elementwise_program", text, n_in, n_out, p);
  if (e) {
    snprintf(msg, (size_t)n, "%s", ud_kit_error_message(e));
    ud_kit_error_destroy(e);
    free(p);
    return 1;
  }
  counts[0] = p->num_outputs;
  counts[1] = p->max_stack;
  free(p);
  return 0;
}
void ud_test_eval(const char* text, int n_in, int count, const double* in, double* out) {
  UD_KitProgram* p = (UD_KitProgram*)malloc(sizeof *p);
  UD_Error* e = ud_kit_program_parse(NULL, text, n_in, -1, p);
  for (int i = 0; !e && i < count; i++)
    ud_kit_program_eval_f64(p, in + i * n_in, out + i * p->num_outputs);
  ud_kit_error_destroy(e);
  free(p);
}
"""


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    d = tmp_path_factory.mktemp("kit")
    (d / "shim.c").write_text(SHIM)
    from unidev.contract import gen

    include = str(gen.HEADER_PATH.parent.parent)
    subprocess.run(["cc", "-std=c17", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    f"-I{include}", str(d / "shim.c"), "-o", str(d / "shim.so"), "-lm"],
                   check=True)
    lib = C.CDLL(str(d / "shim.so"))
    lib.ud_test_parse.argtypes = [C.c_char_p, C.c_int, C.c_int, C.c_char_p, C.c_int,
                                  C.POINTER(C.c_int)]
    lib.ud_test_eval.argtypes = [C.c_char_p, C.c_int, C.c_int, C.POINTER(C.c_double),
                                 C.POINTER(C.c_double)]
    return lib


def _c_parse(kit, text: str, n_in: int, n_out: int | None) -> tuple[bool, str, int]:
    msg = C.create_string_buffer(1024)
    counts = (C.c_int * 2)()
    rc = kit.ud_test_parse(text.encode(), n_in, -1 if n_out is None else n_out, msg, 1024,
                           counts)
    return rc == 0, msg.value.decode(), counts[0]


def _py_parse(text: str, n_in: int, n_out: int | None) -> tuple[bool, str, int]:
    try:
        p = program.parse_program(text, n_in, n_out)
    except unidev.InvalidArgumentError as exc:
        return False, str(exc), 0
    return True, "", p.num_outputs


def _programs() -> list[tuple[str, int, int | None]]:
    rng = np.random.default_rng(7)
    out = [(p, 2, 1) for p, _ in tier4.MALFORMED]
    for _ in range(60):
        n_in, n_out = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        good = tier4.random_program(rng, n_in, n_out)
        out += [(good, n_in, n_out), (good, n_in, None)]
        toks = good.split()
        pool = toks + ["foo", "c1e", "i9", "o7", "r15", "s0", "where", "c-inf", "cnan", "c.5",
                       "c5.", "c+2", "c1e+3", "c1E-3", "c--1", "c1_0", "cInf", "i00", "o-0"]
        for _ in range(4):  # mutations: a token dropped, replaced, swapped
            t = list(toks)
            k = int(rng.integers(len(t)))
            choice = rng.integers(3)
            if choice == 0:
                del t[k]
            elif choice == 1:
                t[k] = str(rng.choice(pool))
            else:
                j = int(rng.integers(len(t)))
                t[k], t[j] = t[j], t[k]
            out.append((" ".join(t) if rng.random() < 0.7 else "\t".join(t) + "\n", n_in,
                        n_out))
    out += [("i0 " * 1025 + "o0", 1, 1), ("i0 o0\x01", 1, 1), ("i0 o0 é", 1, 1),
            ("  i0\n\to0  ", 1, 1), ("i0 c" + "1" * 70 + " add o0", 1, 1),
            ("i0 c1." + "5" * 60 + " add o0", 1, 1), ("i0 o0", 65, 1), ("i0 o0", 1, 17),
            ("i0 o0 i0 o1", 1, None), ("i0 o1", 1, None), ("i0 o0 i0 o0", 1, None),
            ("i0 o0", 1, 3), ("i0 o2", 1, 3)]
    return out


def test_c_parser_accepts_and_refuses_like_python_with_the_same_messages(kit) -> None:
    refused = 0
    for text, n_in, n_out in _programs():
        c_ok, c_msg, c_n = _c_parse(kit, text, n_in, n_out)
        p_ok, p_msg, p_n = _py_parse(text, n_in, n_out)
        assert (c_ok, c_msg, c_n) == (p_ok, p_msg, p_n), repr(text)
        refused += not p_ok
    assert refused > 100  # the mutations do produce malformed programs


def test_c_evaluator_matches_the_reference(kit) -> None:
    rng = np.random.default_rng(3)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5])
    for _ in range(40):
        n_in, n_out = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        text = tier4.random_program(rng, n_in, n_out)
        xs = rng.uniform(-2, 2, size=(64, n_in))
        xs[:8] = rng.choice(special, size=(8, n_in))
        out = np.zeros((64, n_out))
        kit.ud_test_eval(text.encode(), n_in, 64, np.ascontiguousarray(xs).ctypes.data_as(
            C.POINTER(C.c_double)), out.ctypes.data_as(C.POINTER(C.c_double)))
        want = program.evaluate(program.parse_program(text, n_in), [xs[:, i] for i in range(n_in)])
        np.testing.assert_allclose(out, np.stack(want, 1), rtol=1e-12, atol=1e-12,
                                   err_msg=text)


# ---- the reference against torch -----------------------------------------------------------

torch = pytest.importorskip("torch")
F = torch.nn.functional
_ACT = {"none": lambda v: v, "relu": torch.relu, "gelu": F.gelu,
        "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"), "sigmoid": torch.sigmoid,
        "tanh": torch.tanh, "silu": F.silu}


@pytest.mark.parametrize("act", opset.ACTIVATIONS)
def test_fused_references_match_torch(act) -> None:
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 4, 7, 7)), rng.standard_normal((6, 2, 3, 3))
    b, r = rng.standard_normal(6), rng.standard_normal((2, 6, 4, 4))
    attrs = {"stride": (2, 2), "padding": (1, 1), "groups": 2, "activation": act}
    (got,) = reference.run("conv2d_bias_act", [x, w, b, r], attrs)
    t = [torch.from_numpy(v) for v in (x, w, b, r)]
    want = _ACT[act](F.conv2d(t[0], t[1], t[2], stride=2, padding=1, groups=2) + t[3])
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)
    a, bb = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    bias, res = rng.standard_normal(4), rng.standard_normal((5, 4))
    (got,) = reference.run("gemm_bias_act", [a, bb, bias, res], {"alpha": 0.5, "activation": act})
    ta, tb, tbias, tres = (torch.from_numpy(v) for v in (a, bb, bias, res))
    np.testing.assert_allclose(got, _ACT[act](0.5 * (ta @ tb) + tbias + tres).numpy(),
                               rtol=1e-10, atol=1e-12)
    (nores,) = reference.run("gemm_bias_act", [a, bb], {"activation": act})
    np.testing.assert_allclose(nores, _ACT[act](ta @ tb).numpy(), rtol=1e-10, atol=1e-12)


_TORCH_OPS = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"), "silu": F.silu, "erf": torch.erf,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "sign": torch.sign,
    "square": torch.square, "add": torch.add, "sub": torch.sub, "mul": torch.mul,
    "div": torch.div, "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
    "ge": torch.ge, "where": lambda a, b, c: torch.where(c != 0, a, b),
}


def _torch_program(text: str, xs: list[np.ndarray]) -> list[np.ndarray]:
    stack, regs, outs = [], {}, {}
    for tok in text.split():
        if tok in _TORCH_OPS:
            n = opset.PROGRAM_OPS[tok]
            args, stack = stack[len(stack) - n:], stack[:len(stack) - n]
            stack.append(_TORCH_OPS[tok](*args).to(torch.float64))
        elif tok[0] == "i":
            stack.append(torch.from_numpy(xs[int(tok[1:])]))
        elif tok[0] == "c":
            stack.append(torch.tensor(float(tok[1:]), dtype=torch.float64))
        elif tok[0] == "s":
            regs[tok[1:]] = stack.pop()
        elif tok[0] == "r":
            stack.append(regs[tok[1:]])
        else:
            outs[int(tok[1:])] = stack.pop()
    return [outs[k].numpy() for k in range(len(outs))]


def test_program_reference_matches_torch_on_random_programs() -> None:
    assert set(_TORCH_OPS) == set(opset.PROGRAM_OPS)
    rng = np.random.default_rng(11)
    for _ in range(60):
        n_in, n_out = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        text = tier4.random_program(rng, n_in, n_out)
        xs = [rng.uniform(-2, 2, size=(5, 6)) for _ in range(n_in)]
        got = reference.run("elementwise_program", xs, {"program": text})
        for g, w in zip(got, _torch_program(text, xs), strict=True):
            np.testing.assert_allclose(g, np.broadcast_to(w, g.shape), rtol=1e-12, atol=1e-12,
                                       err_msg=text)
    x = rng.uniform(-2, 2, size=(3, 4, 5))
    (s,) = reference.run("elementwise_program", [x], {"program": "i0 exp o0", "reduce": "mean",
                                                      "reduce_axes": (-2, -1)})
    np.testing.assert_allclose(s, np.exp(x).mean(axis=(1, 2)), rtol=1e-12)


# ---- unidev.ops and the test plugin --------------------------------------------------------

def test_ops_validate_programs_before_any_kernel(testdev, monkeypatch) -> None:
    x = DeviceArray.from_numpy(np.ones((2, 3), np.float32), testdev)

    def no_kernel(*a, **k):
        raise AssertionError("a kernel was looked up for a malformed call")

    monkeypatch.setattr(ops, "kernel_for", no_kernel)
    monkeypatch.setattr(ops, "_compiled_for", no_kernel)
    for text, word in tier4.MALFORMED:
        with pytest.raises(unidev.InvalidArgumentError, match="program") as exc:
            ops.elementwise_program(x, x, program=text)
        # the output count comes from the program here: "i0 o1" lacks o0
        assert (word if text != "i0 o1" else "o0") in str(exc.value), (text, str(exc.value))
    for attrs, word in [({"reduce": "sum", "reduce_axes": (0,)}, "trailing"),
                        ({"reduce_axes": (1,)}, "reduce_axes"), ({"reduce": "sum"}, "trailing")]:
        with pytest.raises(unidev.InvalidArgumentError, match=word):
            ops.elementwise_program(x, program="i0 o0", **attrs)
    y = DeviceArray.empty((2, 3), "float32", testdev)
    with pytest.raises(unidev.InvalidArgumentError, match="o1"):
        ops.elementwise_program(x, program="i0 o0 i0 o1", out=y)  # one out= for two outputs


def test_ops_runs_programs_with_several_outputs_and_out(testdev) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal(5)
    x, y = DeviceArray.from_numpy(a, testdev), DeviceArray.from_numpy(b.astype(np.float32),
                                                                        testdev)
    s, e = ops.elementwise_program(x, y, program="i0 i1 mul s0 r0 o0 r0 exp o1")
    np.testing.assert_allclose(s.numpy(), a * b.astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(e.numpy(), np.exp(a * b.astype(np.float32)), rtol=1e-6)
    out = DeviceArray.empty((4,), "float32", testdev)
    got = ops.elementwise_program(x, y, program="i0 i1 sub o0", reduce="max", reduce_axes=(1,),
                                  out=out)
    assert got is out
    np.testing.assert_allclose(out.numpy(), (a - b.astype(np.float32)).max(1), rtol=1e-6)


def test_tier4_conformance_cases_pass_on_the_test_plugin(testdev) -> None:
    """Every tier-4 case (both dtypes) against the reference on the test plugin's naive kernels;
    its elementwise_program goes through kernel_compile (ABI 1.2), so that path runs too."""
    lib = unidev.core.discovery.get(testdev).library
    assert lib.has_kernel_compile
    n = 0
    for op in opset.by_tier(4):
        for dtype in op.dtypes:
            for case in cases.cases_for(op.name, dtype):
                outcome = run_case(op.name, dtype, case, testdev)
                assert outcome.ok, outcome.message
                n += 1
    assert n > 300


def test_a_wrong_program_kernel_fails_conformance(testdev, monkeypatch) -> None:
    """The cases can fail: a kernel that reads its program with the operands of sub swapped."""
    case = next(c for c in cases.cases_for("elementwise_program", "float32")
                if c.id == "ops-binary")
    assert "i0 i1 sub" in case.attrs["program"]
    assert run_case("elementwise_program", "float32", case, testdev).ok
    real = ops._compiled_for

    def swapped(dev, op, dtype, attr_list):
        attr_list = [(n, t, v.replace("i0 i1 sub", "i1 i0 sub") if n == "program" else v)
                     for n, t, v in attr_list]
        kernel = real(dev, op, dtype, attr_list)
        return lambda d, ins, outs, attrs, s: kernel(d, ins, outs, attr_list, s)

    monkeypatch.setattr(ops, "_compiled_for", swapped)
    outcome = run_case("elementwise_program", "float32", case, testdev)
    assert not outcome.ok and "ys" in outcome.message


# ---- kernel_compile and the ABI versions side by side --------------------------------------

def test_kernel_compile_refuses_malformed_programs_naming_the_token(testdev) -> None:
    lib = unidev.core.discovery.get(testdev).library
    attrs = [(a.name, a.type, a.default) for a in opset.get("elementwise_program").attrs]
    good = [("program", "str", "i0 i1 add o0")] + attrs[1:]
    assert lib.kernel_compile("elementwise_program", "float32", good) is not None
    assert lib.kernel_compile("copy", "float32", []) is None  # no specialization: lookup's
    for text, word in [("i0 foo o0", "foo"), ("i0 add o0", "add"), ("r2 o0", "r2")]:
        with pytest.raises(unidev.InvalidArgumentError, match=f"kernel_compile.*{word}"):
            lib.kernel_compile("elementwise_program", "float32",
                               [("program", "str", text)] + attrs[1:])


def test_abi_1_0_1_1_and_1_2_tables_load_side_by_side(tmp_path) -> None:
    from testplugin import build_abi_1_0_library, build_abi_1_1_library, build_library

    attrs = [("program", "str", "i0 o0"), ("reduce", "str", "none"), ("reduce_axes", "ints", [])]
    for build, minor, size in ((build_library, 2, abi.SIZE_1_2),
                               (build_abi_1_1_library, 1, abi.SIZE_1_1),
                               (build_abi_1_0_library, 0, abi.SIZE_1_0)):
        lib = _C.Library(str(build(tmp_path)))
        assert (lib.abi, lib.struct_size) == ((1, minor), size)
        raw = abi.Api(lib.api_address)
        assert lib.has_kernel_compile == (minor >= 2) == raw.has("kernel_compile")
        assert lib.has_mem_device == (minor >= 1)
        compiled = lib.kernel_compile("elementwise_program", "float32", attrs)
        # an older table never reads the garbage past its struct_size: no kernel_compile
        assert (compiled is not None) == (minor >= 2)
        assert lib.kernel("elementwise_program", "float32") is not None
        if minor >= 2:
            assert raw.compile("elementwise_program", "float32", attrs) is not None
            with pytest.raises(abi.PluginError, match="foo"):
                raw.compile("elementwise_program", "float32",
                            [("program", "str", "i0 foo o0")] + attrs[1:])
