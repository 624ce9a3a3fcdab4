"""Kernel conformance v1 run the way a vendor runs it, against the C test plugin."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from unidev.conformance import cases
from unidev.contract import opset


def test_suite_passes_on_testplugin(subprocess_env, tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
           "unidev.conformance", "--unidev-device", "testdev", "--unidev-tier", "1",
           "--unidev-ops", "copy,fill,zero,cast,arange,add,mul,matmul"]
    out = subprocess.run(cmd, env=subprocess_env, capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout


_ALL_CASES: dict = {}


def _all(op: str, dtype: str) -> list:
    """cases_for, generated once per test session (about 3 s for every op and dtype)."""
    if (op, dtype) not in _ALL_CASES:
        _ALL_CASES[op, dtype] = cases.cases_for(op, dtype)
    return _ALL_CASES[op, dtype]


def test_every_op_and_dtype_has_cases():
    for op in opset.OPS.values():
        for dtype in op.dtypes:
            got = _all(op.name, dtype)
            assert got, f"no conformance cases for {op.name}[{dtype}]"


def test_cases_cover_views_and_edge_shapes():
    ids = {c.id for c in cases.cases_for("add", "float32")}
    assert {"transposed", "offset", "strided", "broadcast-row", "broadcast-view"} <= ids
    assert any("(0,)" in i for i in ids) and any("()" == i[:2] for i in ids)


# ---- the case classes every op and dtype gets (unidev.conformance.edgecases, refusals) -------

def _pairs():
    return [(op, dtype) for op in opset.OPS.values() for dtype in op.dtypes]


def test_every_op_gets_strided_offset_and_stride0_layouts_of_inputs_and_outputs():
    for op, dtype in _pairs():
        ids = {c.id for c in _all(op.name, dtype)}
        assert {"out-shifted", "out-gapped"} <= ids, (op.name, dtype)
        if op.inputs:
            assert {"src-shifted", "src-gapped"} <= ids, (op.name, dtype)
            # inputs updated in place cannot be stride-0 views (optimizer steps: all but scalars)
            if not all(i.mutated or i.dtypes != "same" for i in op.inputs):
                assert any(i.startswith("src-stride0") for i in ids), (op.name, dtype)
        if any(len(c.inputs) and any(x is not None and x.ndim >= 2 for x in c.inputs)
               for c in _all(op.name, dtype)):
            assert "src-transposed" in ids or "transposed" in ids, (op.name, dtype)


def test_float_ops_get_special_values():
    for op, dtype in _pairs():
        if not dtype.startswith("float") or not op.inputs:
            continue
        seen = set()
        for c in _all(op.name, dtype):
            for x in c.inputs:
                if x is None or x.dtype.kind != "f":
                    continue
                seen |= {"nan"} if np.isnan(x).any() else set()
                seen |= {"+inf"} if np.isposinf(x).any() else set()
                seen |= {"-inf"} if np.isneginf(x).any() else set()
                seen |= {"-0"} if (np.signbit(x) & (x == 0)).any() else set()
                tiny = np.finfo(x.dtype).tiny
                seen |= {"subnormal"} if ((x != 0) & (np.abs(x) < tiny)).any() else set()
        assert seen == {"nan", "+inf", "-inf", "-0", "subnormal"}, (op.name, dtype, seen)


def test_integer_ops_get_extremes():
    for op, dtype in _pairs():
        if not dtype.startswith("int") or not op.inputs:
            continue
        if not any(s.dtypes == "same" for s in op.inputs):
            continue
        big = 2**53 if dtype == "int64" else 2**24
        top = np.iinfo(dtype).max
        vals = [x for c in _all(op.name, dtype) for x in c.inputs
                if x is not None and x.dtype == np.dtype(dtype)]
        assert any((x > big).any() and (x == top).any() and (x == -top - 1).any()
                   for x in vals), (op.name, dtype)


def test_sizes_cross_tiles_and_thread_chunks():
    for op, dtype in _pairs():
        sizes = [x.size for c in _all(op.name, dtype) for x in c.inputs if x is not None]
        sizes += [int(np.prod(c.shape)) for c in _all(op.name, dtype) if c.shape is not None]
        sizes += [int(c.attrs["stop"] - c.attrs["start"]) for c in _all(op.name, dtype)
                  if "stop" in c.attrs]
        assert max(sizes) > 4096, (op.name, dtype)
        if op.shape in ("same", "broadcast", "reduce", "none", "arange", "loss", "concat",
                        "pad") and op.name not in ("softmax_backward", "log_softmax_backward"):
            assert max(sizes) > 65536, (op.name, dtype, max(sizes))


def test_arg_reductions_and_max_pooling_get_exact_ties():
    from unidev.core import reference

    for name in ("argmax", "argmin"):
        for dtype in opset.get(name).dtypes:
            c = next(c for c in _all(name, dtype) if c.id == "ties-rows")
            x = c.inputs[0]
            first = reference.run(name, [x], c.attrs)[0]
            last = x.shape[1] - 1 - reference.run(name, [x[:, ::-1].copy()], c.attrs)[0]
            assert (first != last).all(), (name, dtype)  # every row has a tie for its extreme
    c = next(c for c in _all("max_pool2d", "float32") if c.id == "ties")
    assert (c.inputs[0][0, 0] == 1).all()  # a plane of equal values
    ids = {c.id for c in _all("max_pool2d", "float32")}
    assert {"ties", "inf-nan"} <= ids


def test_refusals_cover_attributes_the_dtype_cannot_hold_and_bad_indices():
    from unidev.conformance import refusals

    def names(op, dtype):
        return {r.name for r in refusals.refusals_for(op, dtype)}

    assert {"value=nan", "value=inf", "value=1e+20", "value=2^31"} <= names("fill", "int32")
    assert "value=2^63" in names("fill", "int64") and "value=2^31" not in names("fill", "int64")
    assert {"alpha=0.5", "alpha=nan"} <= names("add", "int32")
    assert not names("add", "float32") and not names("fill", "float64")
    pool = names("max_pool2d_backward", "float32")
    assert {"indices[-1]=-1", "indices[-1]=2^40"} <= pool and len(pool) == 3
    assert "target[-1]=-1" in names("nll_loss", "float32")
    assert {"start=nan", "step=inf"} <= names("arange", "float32")


def test_output_views_are_checked_for_writes_outside_them(testdev):
    from unidev.conformance import runner
    from unidev.conformance.cases import Case, ViewSpec
    from unidev.core import ops

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for kind in ("shifted", "gapped", "transposed"):
        case = Case(f"out-{kind}", [x], {}, [ViewSpec()], out_view=kind)
        out = runner.run_case("copy", "float32", case, testdev)
        assert out.ok, out.message
    case = Case("out-gapped", [x], {}, [ViewSpec()], out_view="gapped")
    schema = opset.get("copy")
    dev_x = runner.device_view(x, ViewSpec(), testdev)
    outs, gaps = runner._view_outputs(schema, "float32", [dev_x], case, {}, testdev)
    assert runner._check_gaps(gaps) is None
    ops.zero(out=gaps[0].base)  # a kernel that ignores the view's strides writes the gaps
    msg = runner._check_gaps(gaps)
    assert msg and "outside its view" in msg


def test_source_views_keep_their_values(testdev):
    from unidev.conformance import runner
    from unidev.conformance.cases import ViewSpec

    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    for kind in ("transposed", "shifted", "gapped", "stride0", "stride0-inner"):
        spec = ViewSpec(kind)
        dev = runner.device_view(x, spec, testdev)
        assert (dev.numpy() == runner.host_view(x, spec)).all(), kind
        assert kind not in ("shifted", "gapped") or (dev.numpy() == x).all()
    assert runner.device_view(x, ViewSpec("stride0"), testdev).strides[0] == 0
    assert runner.device_view(x, ViewSpec("stride0-inner"), testdev).strides[-1] == 0
    assert runner.device_view(x, ViewSpec("shifted"), testdev).offset % 2 == 1
