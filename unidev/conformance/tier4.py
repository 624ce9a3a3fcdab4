"""Tier-4 conformance cases: random programs, broadcasts, strides, reductions, fused epilogues."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..contract import opset
from .cases import BOUNDARY, Case, ViewSpec

if TYPE_CHECKING:
    from .target import Target

__all__ = ["random_program", "program_cases", "fused_cases", "MALFORMED"]

# smooth operators that keep values bounded when their operand is (|v| <= ~10)
_BOUNDED_UNARY = ("neg", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh",
                  "silu", "erf")
_CONSTANTS = ("c0.5", "c-1.5", "c2", "c3.25", "c-0.75")
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


def _positive(tokens: list[str]) -> list[str]:
    return tokens + ["abs", "c0.5", "add"]  # >= 0.5: a safe log/sqrt/divisor operand


def _leaf(rng: np.random.Generator, n_inputs: int, regs: list[int]) -> list[str]:
    r = rng.random()
    if regs and r < 0.25:
        return [f"r{rng.choice(regs)}"]
    if r < 0.85:
        return [f"i{rng.integers(n_inputs)}"]
    return [str(rng.choice(_CONSTANTS))]


def _leaf_input(rng: np.random.Generator, n_inputs: int) -> list[str]:
    return [f"i{rng.integers(n_inputs)}"]


def _expr(rng: np.random.Generator, depth: int, n_inputs: int, regs: list[int]) -> list[str]:
    """Tokens of a random expression over the inputs, bounded and continuous where it matters:
    operators that jump (floor, compares, where's condition) only ever see exact leaf values, so
    a plugin computing intermediates in its dtype cannot land on the other side of a jump."""
    if depth == 0:
        return _leaf(rng, n_inputs, regs)
    kind = rng.integers(12)

    def sub() -> list[str]:
        return _expr(rng, depth - 1, n_inputs, regs)

    if kind < 3:
        return sub() + [str(rng.choice(_BOUNDED_UNARY))]
    if kind == 3:  # growth guarded by tanh
        op = str(rng.choice(("exp", "square")))
        return sub() + ["tanh", op]
    if kind == 4:
        op = str(rng.choice(("log", "sqrt", "rsqrt", "reciprocal")))
        return _positive(sub()) + [op]
    if kind < 8:
        op = str(rng.choice(("add", "sub", "mul", "maximum", "minimum")))
        return sub() + sub() + [op]
    if kind == 8:
        return sub() + _positive(sub()) + ["div"]
    if kind == 9:
        return _positive(sub()) + sub() + ["tanh", "pow"]
    if kind == 10:
        op = str(rng.choice(("floor", "ceil", "round", "sign")))
        return _leaf_input(rng, n_inputs) + [op]
    cond = _leaf_input(rng, n_inputs) + _leaf(rng, n_inputs, []) + [str(rng.choice(_COMPARE))]
    if rng.random() < 0.5:
        return cond
    return sub() + sub() + cond + ["where"]


def random_program(rng: np.random.Generator, n_inputs: int, n_outputs: int,
                   depth: int = 3) -> str:
    """A valid random program: register stores and reuse, then `n_outputs` expressions."""
    tokens: list[str] = []
    regs: list[int] = []
    for _ in range(rng.integers(0, 3)):
        k = int(rng.integers(opset.PROGRAM_LIMITS["max_registers"]))
        tokens += _expr(rng, depth - 1, n_inputs, regs) + [f"s{k}"]
        regs.append(k)
    order = list(rng.permutation(n_outputs))  # outputs in any order
    for k in order:
        tokens += _expr(rng, depth, n_inputs, regs) + [f"o{k}"]
    return " ".join(tokens)


def _vals(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    return np.asarray(rng.uniform(-2.0, 2.0, size=shape), dtype)


def _case(cid: str, ins: list, program: str, views=None, out_view: str = "contiguous",
          reduce: str = "none", axes: tuple = ()) -> Case:
    attrs = {"program": program}
    if reduce != "none":
        attrs.update(reduce=reduce, reduce_axes=axes)
    return Case(cid, ins, attrs, views or [ViewSpec()] * len(ins), out_view=out_view)


def _pool(n_inputs: int, n_outputs: int, depth: int = 3) -> str:
    """One random program per (inputs, outputs, depth), the same for every dtype and case: a
    plugin that compiles each program (kernel_compile) compiles a few dozen, not hundreds."""
    return random_program(np.random.default_rng(1000 * depth + 10 * n_inputs + n_outputs),
                          n_inputs, n_outputs, depth)


_DOMAIN = ("log", "sqrt", "rsqrt")  # read the positive input
_UNARY = [t for t, a in opset.PROGRAM_OPS.items() if a == 1]
_BINARY = [t for t, a in opset.PROGRAM_OPS.items() if a == 2 and t not in _COMPARE]


def _unary_program(tokens: list[str]) -> str:
    return " ".join(f"i{1 if t in _DOMAIN else 0} {t} o{k}" for k, t in enumerate(tokens))


def _binary_program() -> str:
    """x op y for the arithmetic ops (pow: pos ** y), a op b (i3, i4) for the compares."""
    parts = [f"{'i2' if t == 'pow' else 'i0'} i1 {t}" for t in _BINARY]
    parts += [f"i3 i4 {t}" for t in _COMPARE]
    return " ".join(f"{p} o{k}" for k, p in enumerate(parts))


def program_cases(op: opset.OpSchema, dtype: str, rng: np.random.Generator) -> Iterator[Case]:
    """elementwise_program: random programs (a fixed pool) over shapes, broadcasts, views,
    output strides and reductions; then every operator, over ordinary and special values."""
    shapes = [(), (1,), (7,), (3, 5), (2, 3, 4), (0, 3), (257, 263)] + [(n,) for n in BOUNDARY[:3]]
    for k, shape in enumerate(shapes):
        n_in, n_out = 1 + k % 3, 1 + k % 2
        yield _case(f"random{k}-{shape}", [_vals(rng, shape, dtype) for _ in range(n_in)],
                    _pool(n_in, n_out))
    # broadcast forms: rows, columns, scalars, inner and outer stride 0, a broadcast view
    bshapes = [[(4, 5), (1, 5)], [(4, 1), (1, 3)], [(3, 4), ()], [(2, 3, 4), (3, 1)],
               [(5, 1, 6), (1, 7, 1), (6,)], [(3, 4097), (4097,)]]
    for k, group in enumerate(bshapes):
        yield _case(f"broadcast{k}-{group}", [_vals(rng, s, dtype) for s in group],
                    _pool(len(group), 2))
    yield _case("broadcast-view", [_vals(rng, (4, 5), dtype), _vals(rng, (5,), dtype)],
                _pool(2, 1), [ViewSpec(), ViewSpec("broadcast", (4, 5))])
    # input views and output strides
    for k, view in enumerate(("transposed", "offset", "strided", "shifted", "gapped", "stride0",
                              "stride0-inner")):
        ins = [_vals(rng, (6, 10), dtype) for _ in range(2)]
        # offset and strided views halve a dim: both inputs get them; the others only one
        other = view if view in ("offset", "strided") or k % 2 == 0 else "contiguous"
        yield _case(f"view-{view}", ins, _pool(2, 2), [ViewSpec(view), ViewSpec(other)])
    for out_view in ("transposed", "shifted", "gapped"):
        ins = [_vals(rng, (5, 1025), dtype) for _ in range(2)]
        yield _case(f"out-{out_view}", ins, _pool(2, 2), out_view=out_view)
    # reductions over the trailing axes, every kind, through tails and tiles
    red = [((7,), (0,)), ((3, 5), (1,)), ((2, 3, 4), (1, 2)), ((4, 0), (1,)), ((3, 1025), (1,)),
           ((2, 65537), (1,)), ((1025, 3), (1,)), ((0, 4), (1,))]
    for shape, axes in red:
        for reduce in ("sum", "mean", "max", "min"):
            if reduce in ("max", "min") and 0 in [shape[a] for a in axes]:
                continue
            ins = [_vals(rng, shape, dtype), _vals(rng, shape[-1:], dtype)]
            yield _case(f"reduce-{reduce}-{shape}-{axes}", ins, _pool(2, 2, 2), reduce=reduce,
                        axes=axes)
    ins = [_vals(rng, (6, 10), dtype), _vals(rng, (10,), dtype)]
    yield _case("reduce-transposed-broadcast", ins, _pool(2, 2, 2),
                [ViewSpec("transposed"), ViewSpec()], reduce="sum", axes=(1,))
    # every operator, over ordinary values and over every combination of special values
    x = _vals(rng, (3, 17), dtype) * 1.5
    pos = np.abs(x) + np.asarray(0.25, dtype)
    ints = [np.asarray(rng.integers(-2, 3, size=x.shape), dtype) for _ in range(3)]  # ties
    sub = np.finfo(dtype).smallest_subnormal * 3
    spec = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, sub, 1.0, -1.0, 0.5, -2.5, 3.0],
                    dtype)
    half = len(_UNARY) // 2
    for name, toks in (("a", _UNARY[:half]), ("b", _UNARY[half:])):
        yield _case(f"ops-unary-{name}", [x, pos], _unary_program(toks))
        yield _case(f"ops-unary-{name}-specials", [spec, spec], _unary_program(toks))
    yield _case("ops-binary", [x, _vals(rng, x.shape, dtype), pos, ints[0], ints[1]],
                _binary_program())
    gx, gy = (np.ascontiguousarray(g) for g in np.meshgrid(spec, spec, indexing="ij"))
    yield _case("ops-binary-specials", [gx, gy, gx, gx, gy], _binary_program())
    yield _case("ops-where", [x, pos, ints[2]], "i0 i1 i2 where o0")
    grid = [np.ascontiguousarray(g) for g in np.meshgrid(spec, spec, spec, indexing="ij")]
    yield _case("ops-where-specials", grid, "i0 i1 i2 where o0")
    yield _case("constants", [_vals(rng, (4,), dtype)],
                "i0 c2.5 mul c-1e-3 add o0 cinf c-inf add o1 cnan i0 maximum o2 c.5 c1e2 sub o3")
    yield _case("many-inputs-outputs", [_vals(rng, (33,), dtype) for _ in range(9)],
                _pool(9, 5, 2))


def fused_cases(op: opset.OpSchema, dtype: str, rng: np.random.Generator) -> Iterator[Case]:
    """conv2d_bias_act and gemm_bias_act over every activation, with and without bias and
    residual, strided inputs and outputs."""
    acts = opset.ACTIVATIONS
    if op.name == "gemm_bias_act":
        geo = [(3, 4, 5), (64, 33, 17), (1, 1, 1), (0, 4, 5), (5, 0, 3), (1025, 2, 3),
               (2, 4097, 3)]
        for k, (m, kk, n) in enumerate(geo):
            for j, act in enumerate(acts):
                if k > 1 and j % 3 != k % 3:
                    continue
                bias = _vals(rng, (n,), dtype) if (j + k) % 2 == 0 else None
                res = _vals(rng, (m, n), dtype) if (j + k) % 3 != 1 else None
                attrs = {"activation": act, "alpha": 1.0 if j % 2 else 0.5}
                yield Case(f"{(m, kk, n)}-{act}-bias={bias is not None}-res={res is not None}",
                           [_vals(rng, (m, kk), dtype), _vals(rng, (kk, n), dtype), bias, res],
                           attrs, [ViewSpec()] * 4)
        yield Case("transposed-relu", [_vals(rng, (6, 7), dtype), _vals(rng, (7, 5), dtype),
                                        _vals(rng, (5,), dtype), _vals(rng, (6, 5), dtype)],
                   {"activation": "relu"}, [ViewSpec("transposed"), ViewSpec("transposed"),
                                            ViewSpec(), ViewSpec("transposed")])
        yield Case("out-transposed-gelu", [_vals(rng, (5, 6), dtype), _vals(rng, (6, 4), dtype),
                                            _vals(rng, (4,), dtype), None],
                   {"activation": "gelu"}, [ViewSpec()] * 4, out_view="transposed")
        return
    geo = [((2, 3, 7, 6), (4, 3, 3, 3), 1, 1, 1, 1), ((2, 4, 9, 9), (6, 4, 3, 3), 2, 1, 1, 1),
           ((1, 2, 10, 8), (3, 2, 3, 2), 1, 2, 2, 1), ((2, 4, 6, 6), (4, 2, 3, 3), 1, 1, 1, 2),
           ((1, 6, 5, 5), (6, 1, 3, 3), 1, 1, 1, 6), ((2, 8, 5, 5), (16, 8, 1, 1), 1, 0, 1, 1),
           ((2, 16, 14, 14), (16, 16, 3, 3), 1, 1, 1, 1),
           ((1, 1, 65, 65), (2, 1, 3, 3), 1, 0, 1, 1)]
    from ..core import shapes as shp

    for k, (xs, ws, s, p, d, g) in enumerate(geo):
        for j, act in enumerate(acts):
            if k > 0 and j % 3 != k % 3:
                continue
            attrs = {"stride": (s, s), "padding": (p, p), "dilation": (d, d), "groups": g,
                     "activation": act}
            ys = shp._conv_geometry("conv2d", xs, ws, dict(attrs))
            bias = _vals(rng, (ws[0],), dtype) if (j + k) % 2 == 0 else None
            res = _vals(rng, ys, dtype) if (j + k) % 3 != 1 else None
            yield Case(f"x{xs}-w{ws}-s{s}-p{p}-d{d}-g{g}-{act}-bias={bias is not None}-"
                       f"res={res is not None}",
                       [_vals(rng, xs, dtype), _vals(rng, ws, dtype), bias, res], attrs,
                       [ViewSpec()] * 4)
    x, w = _vals(rng, (2, 3, 8, 8), dtype), _vals(rng, (4, 3, 3, 3), dtype)
    b, r = _vals(rng, (4,), dtype), _vals(rng, (2, 4, 8, 8), dtype)
    base = {"padding": (1, 1), "activation": "relu"}
    yield Case("x-offset-res-transposed", [np.concatenate([x, x]), w, b, r], base,
               [ViewSpec("offset"), ViewSpec(), ViewSpec(), ViewSpec("transposed")])
    yield Case("out-transposed", [x, w, b, r], base, [ViewSpec()] * 4, out_view="transposed")
    yield Case("out-gapped-silu", [x, w, None, r], dict(base, activation="silu"),
               [ViewSpec()] * 4, out_view="gapped")


# malformed programs for (n_inputs, n_outputs) = (2, 1): (program, a word the refusal names;
# kernel_compile, which does not know the output count, refuses "i0 o1" for o0)
MALFORMED: list[tuple[str, str]] = [
    ("", "empty"),
    ("i0 i1 foo o0", "foo"),
    ("i0 add o0", "add"),
    ("i0 i1", "left on the stack"),
    ("i0 i1 add", "left on the stack"),
    ("i2 o0", "i2"),
    ("i0 o1", "o1"),
    ("i0 o0 i1 o0", "o0"),
    ("r3 o0", "r3"),
    ("i0 s16 r16 o0", "s16"),
    ("c1e o0", "c1e"),
    ("c0x10 o0", "c0x10"),
    ("o0", "o0"),
    ("i0 s0", "o0"),
    ("i01 o0", "i01"),
    ("i-1 o0", "i-1"),
    ("i0 i1 add o0 extra", "extra"),
    (" ".join(["i0"] * 65) + " " + " ".join(["add"] * 64) + " o0", "stack"),
]


# ---- bad inputs (badinputs group "tier4"): the kernels and kernel_compile refuse them ---------

def claimed(t: Target) -> bool:
    """Whether a conformance target covers tier 4 (claimed, --unidev-tier 4 or --unidev-ops)."""
    return any(op.tier == 4 for op in t.ops())


def bad_cases(t: Target) -> dict:
    """name -> case(ctx) for the badinputs child; empty when tier 4 is not claimed."""
    if not claimed(t):
        return {}
    from .badinputs import INVALID, Skip, _attrs, _desc, expect_error

    op = "elementwise_program"

    def kcall(c, name, ins, outs, attrs, what, word=None):
        c.need(name)
        k = c.lib.kernel(name, "float32")
        msg = expect_error(c, lambda: k(c.dev, ins, outs, attrs, c.stream), (INVALID,), what,
                           sync=lambda: c.lib.stream_synchronize(c.stream))
        if word and word not in msg:
            raise AssertionError(f"{what}: refused, but the message does not name {word!r}: "
                                 f"{msg}")
        return msg

    def malformed(program: str, word: str):
        def case(c) -> str:
            x, y = c.array((4,)), c.array((4,))
            what = f"{op} program {program[:40]!r}"
            msg = ""
            if c.lib.kernel(op, "float32") is not None:
                msg = kcall(c, op, [_desc(x), _desc(x)], [_desc(y)],
                            _attrs(op, program=program), what, word)
            # only the kernel knows the input count: "i2" may be right for 3 inputs
            if c.lib.has_kernel_compile and program != "i2 o0":
                got = expect_error(c, lambda: c.lib.kernel_compile(op, "float32",
                                                                     _attrs(op, program=program)),
                                   (INVALID,), f"kernel_compile of {what}")
                if (word if program != "i0 o1" else "o0") not in got:
                    raise AssertionError(f"kernel_compile of {what}: refused, but the message "
                                         f"does not name {word!r}: {got}")
                msg = msg or got
            if not msg:
                raise Skip(f"no {op}[float32] kernel and no kernel_compile")
            return msg
        return case

    cases = {f"program-malformed-{k}": malformed(p, w) for k, (p, w) in enumerate(MALFORMED)}

    held: list = []  # the arrays behind the descriptors must outlive the call

    def arrays(c, *shapes, dtype="float32"):
        held[:] = held[-16:] + [c.array(s, dtype) for s in shapes]
        return [_desc(a) for a in held[len(held) - len(shapes):]]

    def output_count(c) -> str:
        x, y = arrays(c, (4,), (4,))
        return kcall(c, op, [x], [y], _attrs(op, program="i0 o0 i0 o1"),
                     f"{op} writing o1 with one output", "o1")

    def not_broadcast(c) -> str:
        a, b, y = arrays(c, (4,), (1,), (4,))
        return kcall(c, op, [a, b], [y], _attrs(op, program="i0 i1 add o0"),
                     f"{op} with inputs of shapes (4,) and (1,) (not pre-broadcast)")

    def input_dtype(c) -> str:
        (a,), (b,) = arrays(c, (4,)), arrays(c, (4,), dtype="float64")
        (y,) = arrays(c, (4,))
        return kcall(c, op, [a, b], [y], _attrs(op, program="i0 i1 add o0"),
                     f"{op} with a float32 and a float64 input")

    def axes_not_trailing(c) -> str:
        x, y = arrays(c, (3, 4), (4,))
        return kcall(c, op, [x], [y], _attrs(op, program="i0 o0", reduce="sum",
                                             reduce_axes=(0,)),
                     f"{op} reducing axis 0 of (3, 4) (not trailing)", "reduce_axes")

    def axes_without_reduce(c) -> str:
        x, y = arrays(c, (3, 4), (3,))
        return kcall(c, op, [x], [y], _attrs(op, program="i0 o0", reduce_axes=(1,)),
                     f"{op} with reduce_axes but reduce 'none'", "reduce_axes")

    def output_shape(c) -> str:
        x, y = arrays(c, (3, 4), (4,))
        return kcall(c, op, [x], [y], _attrs(op, program="i0 o0", reduce="sum",
                                             reduce_axes=(1,)),
                     f"{op} summing (3, 4) over axis 1 into shape (4,)")

    def unknown_reduce(c) -> str:
        x, y = arrays(c, (3, 4), (3,))
        return kcall(c, op, [x], [y], _attrs(op, program="i0 o0", reduce="prod",
                                             reduce_axes=(1,)),
                     f"{op} with reduce 'prod'", "prod")

    cases.update({"program-output-count": output_count, "program-not-broadcast": not_broadcast,
                  "program-input-dtype": input_dtype,
                  "program-axes-not-trailing": axes_not_trailing,
                  "program-axes-without-reduce": axes_without_reduce,
                  "program-output-shape": output_shape, "program-unknown-reduce": unknown_reduce})

    def gemm(c, bias_shape, res_shape, act, what, word=None) -> str:
        a, b, y = arrays(c, (3, 4), (4, 5), (3, 5))
        bias = arrays(c, bias_shape)[0] if bias_shape else None
        res = arrays(c, res_shape)[0] if res_shape else None
        return kcall(c, "gemm_bias_act", [a, b, bias, res], [y],
                     _attrs("gemm_bias_act", activation=act), what, word)

    def conv(c, bias_shape, res_shape, act, what, word=None) -> str:
        x, w, y = arrays(c, (1, 2, 5, 5), (3, 2, 3, 3), (1, 3, 3, 3))
        bias = arrays(c, bias_shape)[0] if bias_shape else None
        res = arrays(c, res_shape)[0] if res_shape else None
        return kcall(c, "conv2d_bias_act", [x, w, bias, res], [y],
                     _attrs("conv2d_bias_act", activation=act), what, word)

    cases.update({
        "gemm-bad-activation": lambda c: gemm(c, (5,), None, "swish",
                                              "gemm_bias_act activation 'swish'", "swish"),
        "gemm-bias-shape": lambda c: gemm(c, (6,), None, "relu",
                                          "gemm_bias_act with bias (6,) for N = 5", "bias"),
        "gemm-residual-shape": lambda c: gemm(c, None, (5, 3), "none",
                                              "gemm_bias_act with residual (5, 3) for [3, 5]",
                                              "residual"),
        "conv-bad-activation": lambda c: conv(c, None, None, "swish",
                                              "conv2d_bias_act activation 'swish'", "swish"),
        "conv-bias-shape": lambda c: conv(c, (2,), None, "relu",
                                          "conv2d_bias_act with bias (2,) for K = 3", "bias"),
        "conv-residual-shape": lambda c: conv(c, None, (1, 3, 3, 4), "relu",
                                              "conv2d_bias_act with residual (1, 3, 3, 4) for "
                                              "(1, 3, 3, 3)", "residual"),
    })
    return cases
