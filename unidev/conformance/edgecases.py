"""Case classes every op and dtype gets, derived from the op set: layouts, special values, ties."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..contract import opset
from .cases import Case, ViewSpec

__all__ = ["extend", "special_values", "int_extremes"]


def special_values(dtype: str) -> np.ndarray:
    """IEEE special and edge values: NaN, +-inf, -0, subnormals, the smallest normal, and a few
    ordinary values (moderate, so transcendental ops stay in their accurate range)."""
    fi = np.finfo(dtype)
    sub = fi.smallest_subnormal * 3
    vals = [np.nan, np.inf, -np.inf, -0.0, 0.0, sub, -sub, fi.tiny, 1.0, -1.0, 0.5, -2.5, 3.0,
            100.0, -100.0]
    return np.array(vals, dtype)


def int_extremes(dtype: str) -> np.ndarray:
    """Integer edge values: the type's limits, and values a float detour would round (above
    2^53 for int64, above 2^24 for int32)."""
    ii = np.iinfo(dtype)
    big = 2**53 if dtype == "int64" else 2**24
    # the most telling first: a small input gets these
    vals = [ii.max, ii.min, big + 1, -1, ii.min + 1, ii.max - 1, -big - 1, 0, 1, 2,
            (ii.max >> 1) + 7]
    return np.array(vals, dtype)


def _spec(op: opset.OpSchema, slot: int) -> opset.Input:
    return op.inputs[0] if op.inputs and op.inputs[0].variadic else op.inputs[slot]


def _value_slots(op: opset.OpSchema, case: Case) -> list[int]:
    """Inputs that carry the op's dtype (not indices, targets or conditions)."""
    return [i for i, x in enumerate(case.inputs)
            if x is not None and _spec(op, i).dtypes == "same" and x.size > 0]


def _plain(case: Case) -> bool:
    return case.out_view == "contiguous" and all(v.kind == "contiguous" for v in case.views)


def _representative(op: opset.OpSchema, cases: list[Case]) -> Case | None:
    """A small plain case whose inputs have as many dims as the op's cases offer (so that
    transposes mean something), every input holding more than one element."""
    best, key = None, None
    for c in cases:
        if not _plain(c):
            continue
        if not op.inputs:
            shapes = [c.shape if c.shape is not None else (_arange_len(c.attrs),)]
        else:
            shapes = [x.shape for x in c.inputs if x is not None]
        sizes = [int(np.prod(s)) for s in shapes]
        if not shapes or 0 in sizes or sum(sizes) < 2 or sum(sizes) > 5000:
            continue
        units = sum(d == 1 for s in shapes for d in s)
        k = (-min(max(len(s) for s in shapes), 4), units, sum(sizes))
        if key is None or k < key:
            best, key = c, k
    return best


def _arange_len(attrs: dict) -> int:
    return max(0, int(np.ceil((attrs["stop"] - attrs["start"]) / attrs["step"])))


def _with(case: Case, cid: str, inputs=None, views=None, out_view=None) -> Case:
    return Case(cid, list(case.inputs if inputs is None else inputs), dict(case.attrs),
                list(views if views is not None else case.views or
                     [ViewSpec()] * len(case.inputs)),
                case.shape, case.dtype, out_view or case.out_view)


# ---- layouts: every input and output of every op, not only elementwise ones ----------------

def _layouts(op: opset.OpSchema, rep: Case) -> Iterator[Case]:
    n = len(rep.inputs)
    present = [i for i, x in enumerate(rep.inputs) if x is not None]
    if present:
        for kind in ("transposed", "shifted", "gapped"):
            if kind == "transposed" and not any(rep.inputs[i].ndim >= 2 for i in present):
                continue
            views = [ViewSpec(kind) if x is not None else ViewSpec() for x in rep.inputs]
            yield _with(rep, f"src-{kind}", views=views)
        for i in present:
            x, spec = rep.inputs[i], _spec(op, i)
            if spec.mutated or x.ndim == 0:
                continue  # a stride-0 view cannot be updated in place
            name = spec.name if not spec.variadic else f"{spec.name}{i}"
            for kind in ("stride0", "stride0-inner") if x.ndim >= 2 else ("stride0",):
                if x.shape[0 if kind == "stride0" else -1] < 2:
                    continue
                views = [ViewSpec()] * n
                views[i] = ViewSpec(kind)
                yield _with(rep, f"src-{kind}-{name}", views=views)
    for kind in ("transposed", "shifted", "gapped"):
        yield _with(rep, f"out-{kind}", out_view=kind)


# ---- special values -------------------------------------------------------------------------

def _elementwise_grid(op: opset.OpSchema, dtype: str, rng, values: np.ndarray,
                      tag: str) -> Iterator[Case]:
    """Every pair (or, for three value inputs, a sample of triples) of edge values."""
    slots = [i for i, s in enumerate(op.inputs) if s.dtypes == "same"]
    k = len(values)
    if len(slots) == 1:
        grids = [np.concatenate([values, rng.permutation(values)]).reshape(2, k)]
    elif len(slots) == 2:
        grids = [np.repeat(values, k).reshape(k, k), np.tile(values, k).reshape(k, k)]
    else:
        grids = [rng.choice(values, size=(8, 16)) for _ in slots]
    shape = grids[0].shape
    ins, g = [], iter(grids)
    for s in op.inputs:
        if s.dtypes == "same":
            ins.append(np.asarray(next(g), dtype))
        else:  # a condition (where)
            ins.append(rng.random(shape) < 0.5)
    attr_sets = [{}]
    for a in op.attrs:
        if a.type == "float" and dtype.startswith("float"):
            attr_sets.append({a.name: float("nan")})
            attr_sets.append({a.name: float("inf")})
    for attrs in attr_sets:
        cid = f"{tag}" + "".join(f"-{k}={v}" for k, v in attrs.items())
        yield Case(cid, ins, attrs, [ViewSpec()] * len(ins))


def _inject(case: Case, slots: list[int], values: list, rng, cid: str) -> Case:
    """The case with `values` written at spread positions (first, last, past 1024, random) of
    the given inputs."""
    ins = list(case.inputs)
    for i in slots:
        x = np.array(ins[i])
        flat = x.reshape(-1)
        n = flat.size
        picks = {0, n - 1, min(n - 1, 1024), n // 2}
        picks |= set(rng.choice(n, size=min(n, max(1, n // 16)), replace=False).tolist())
        for j, p in enumerate(sorted(picks)):
            flat[p] = values[j % len(values)]
        ins[i] = x
    return _with(case, cid, inputs=ins)


def _specials(op: opset.OpSchema, dtype: str, rep: Case, rng) -> Iterator[Case]:
    slots = _value_slots(op, rep)
    if not slots:
        return
    fi = np.finfo(dtype)
    for i in slots:
        name = _spec(op, i).name if not _spec(op, i).variadic else f"tensors{i}"
        yield _inject(rep, [i], [np.nan], rng, f"nan-in-{name}")
    yield _inject(rep, slots, [np.inf, -np.inf], rng, "inf")
    yield _inject(rep, slots, [-0.0, fi.smallest_subnormal * 5, -fi.smallest_subnormal, 0.0],
                  rng, "signed-zero-subnormal")


# ---- ties, empty and all -inf windows for arg-reductions and pooling --------------------------

def _reduce_extras(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    def case(cid, x, axes, keepdims=False):
        return Case(cid, [np.asarray(x, dtype)], {"axes": axes, "keepdims": keepdims},
                    [ViewSpec()])

    small = rng.integers(-1, 2, size=(4, 1500))
    if op.name == "prod":  # products of many values only stay exact for 0 and +-1
        small = np.where(small == 0, 1, small)
    small[1] = 1  # a row of equal values: the first index wins
    small[2, [7, 1100, 1499]] = 5  # the maximum three times, across the tile boundary
    small[3, [3, 1200]] = -5
    yield case("ties-rows", small, (1,))
    yield case("ties-columns", small.T.copy(), (0,))
    yield case("ties-flat", small[:2], ())
    if not dtype.startswith("float"):
        yield case("int-extremes-rows", rng.choice(int_extremes(dtype), size=(3, 1100)), (1,))
        return
    def normal(shape):  # prod: near 1, so that float32 products stay in range
        return rng.uniform(0.9, 1.1, shape) if op.name == "prod" else rng.standard_normal(shape)

    x = normal((4, 2500))
    x[1, 1500] = np.nan
    x[2, [2499, 1030]] = np.nan  # two NaNs: the first wins for arg-reductions
    x[3, 0] = np.nan
    yield case("nan-late", x, (1,))
    yield case("nan-columns", x.T.copy(), (0,))
    y = normal((4, 1100))
    y[0] = -np.inf  # all -inf: max is -inf, the arg-reductions give 0
    y[1, [5, 1050]] = np.inf
    y[2, [5, 1050]] = [np.inf, -np.inf]  # sum and mean: nan
    y[3, [0, 1099]] = -0.0
    yield case("inf-rows", y, (1,))
    z = np.zeros((3, 1030))
    z[0, ::2] = -0.0  # -0 and 0 are equal: ties
    z[1] = np.finfo(dtype).smallest_subnormal
    z[2, 1029] = np.finfo(dtype).smallest_subnormal
    yield case("zero-subnormal-ties", z, (1,))


def _pool_extras(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    from ..core import reference

    is_max = op.name.startswith("max")
    attrs = {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}
    attrs.update({"dilation": (1, 1)} if is_max else {"count_include_pad": False})
    xs = []
    ties = np.asarray(rng.integers(0, 2, size=(2, 3, 9, 11)), dtype)
    ties[0, 0] = 1.0  # a plane of equal values: the first in-bounds tap wins everywhere
    xs.append(("ties", ties))
    neg = np.asarray(rng.standard_normal((1, 2, 9, 11)), dtype)
    neg[0, 0, :4, :5] = -np.inf  # windows of only -inf: the first in-bounds position
    neg[0, 1, 3, 3] = np.nan  # nan wins
    neg[0, 1, 6, 8] = np.inf
    xs.append(("inf-nan", neg))
    for tag, x in xs:
        if not op.name.endswith("backward"):
            yield Case(tag, [x], dict(attrs), [ViewSpec()])
            continue
        fwd = reference.run(op.name.replace("_backward", ""), [x], dict(attrs))
        gy = np.asarray(rng.standard_normal(fwd[0].shape), dtype)
        ins = [gy, x, fwd[1]] if is_max else [gy, x]
        yield Case(tag, ins, dict(attrs), [ViewSpec()] * len(ins))


def _softmax_extras(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    if op.name.endswith("backward"):
        return
    x = np.asarray(rng.standard_normal((5, 1100)), dtype)
    x[0, ::3] = -np.inf  # masked positions
    x[1] = -np.inf  # a fully masked row: nan
    x[2, 1050] = np.inf
    x[3, 1030] = np.nan
    x[4, :] = 7.0  # equal values
    yield Case("masked-rows", [x], {"axis": 1}, [ViewSpec()])


def _int_extremes(op: opset.OpSchema, dtype: str, rep: Case | None, rng) -> Iterator[Case]:
    ext = int_extremes(dtype)
    if op.broadcast and op.inputs:
        yield from _elementwise_grid(op, dtype, rng, ext, "int-extremes")
        return
    if rep is not None and _value_slots(op, rep):
        slots = _value_slots(op, rep)
        ins = list(rep.inputs)
        for k, i in enumerate(slots):
            ins[i] = np.resize(np.roll(ext, -k), rep.inputs[i].shape).astype(dtype)
        yield _with(rep, "int-extremes", inputs=ins)


# ---- the entry point --------------------------------------------------------------------------

_EXTRAS = {"reduce": _reduce_extras, "pool2d": _pool_extras}


def extend(op: opset.OpSchema, dtype: str, base: list[Case], rng) -> list[Case]:
    """The case classes added to an op's own cases: layouts of every input and output, special
    values (floats), integer extremes (ints), ties and special windows where the op has them."""
    rep = _representative(op, base)
    out: list[Case] = []
    own = {c.id for c in base}
    if rep is not None:  # a layout the op's own cases already have is not repeated
        out += [c for c in _layouts(op, rep) if c.id not in own]
    if op.name in ("max_pool2d_backward", "avg_pool2d_backward"):
        out += list(_pool_extras(op, dtype, rng))
    elif op.shape in _EXTRAS:
        out += list(_EXTRAS[op.shape](op, dtype, rng))
    if op.name in ("softmax", "log_softmax"):
        out += list(_softmax_extras(op, dtype, rng))
    if dtype.startswith("float") and op.inputs:
        elementwise = op.broadcast and op.name != "mse_loss"
        if elementwise and op.name != "cast":
            out += list(_elementwise_grid(op, dtype, rng, special_values(dtype), "specials"))
        elif op.name == "cast":
            x = special_values(dtype)
            for to in ("float32", "float64", "bool"):  # float to int of nan/inf is undefined
                out.append(Case(f"specials-to-{to}", [x], {"dtype": to}, [ViewSpec()]))
        # padded zeros times a non-finite weight: the op set does not say whether padding
        # takes part in products (0 * inf is nan), so the special values go to unpadded cases
        unpadded = _representative(op, [c for c in base if not any(c.attrs.get("padding", ()))])
        if (unpadded or rep) is not None and not elementwise:
            out += list(_specials(op, dtype, unpadded or rep, rng))
    elif dtype.startswith("int") and op.inputs:
        out += list(_int_extremes(op, dtype, rep, rng))
    seen = {c.id for c in base}
    for c in out:
        assert c.id not in seen, f"{op.name}[{dtype}]: duplicate case id {c.id}"
        seen.add(c.id)
    return out
