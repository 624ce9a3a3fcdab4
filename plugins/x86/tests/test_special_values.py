"""unidev-x86 on special values (nan, +-inf, -0, subnormals), batch norm edge cases, bad indices
and attribute values a dtype cannot hold, each against the numpy reference (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev.contract import opset
from unidev.core import ops as uops
from unidev.core import reference
from unidev.core.errors import InvalidArgumentError

DEV = "x86:0"


def dev(a: np.ndarray) -> unidev.DeviceArray:
    return unidev.DeviceArray.from_numpy(np.ascontiguousarray(a), device=DEV)


def specials(dtype: str) -> np.ndarray:
    """Special values, then ordinary and large ones, in lanes of every position of a vector."""
    fi = np.finfo(dtype)
    v = [np.nan, np.inf, -np.inf, 0.0, -0.0, fi.tiny / 4, -fi.tiny / 4, fi.tiny, 1.0, -1.0, 2.5,
         -2.5, 0.5, 3.0, 88.0, -88.0, 710.0, 1e-7, 100.0, -100.0, 1e4, -3e5, float(fi.max)]
    return np.array(v * 3, dtype)[: 67]  # 67: crosses the 8- and 16-lane widths unevenly


def same(got: np.ndarray, want: np.ndarray, rtol: float, atol: float = 0.0) -> None:
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    assert (np.isnan(got) == np.isnan(want)).all()


raw_call = uops.call_kernel  # past unidev.ops's own checks


FLOAT_UNARY = [op.name for op in opset.OPS.values()
               if op.broadcast and len(op.inputs) == 1 and op.dtypes == ("float32", "float64")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary_ops_on_special_values(op, dtype):
    # regression: ISPC's float log(nan) = 89.1, log(inf) = 88.7, log(subnormal) off by 4,
    # sin(1e30) = -inf, sin(subnormal) = 6e-8, sin(88) off by 7e-5
    x = specials(dtype)
    attrs = {"approximate": "tanh"} if op == "gelu" else {}
    got = getattr(unidev.ops, op)(dev(x), **attrs).numpy()
    same(got, reference.run(op, [x], attrs)[0], 3e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_on_special_values(dtype):
    # regression: pow(nan, 2) = inf, pow(nan, 0) != 1, large results off in the 6th digit
    v = specials(dtype)[:23]
    x, y = (a.copy() for a in np.meshgrid(v, v, indexing="ij"))
    got = unidev.ops.pow(dev(x), dev(y)).numpy()
    same(got, reference.run("pow", [x, y])[0], 3e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_softmax_of_an_all_minus_inf_row_is_nan(dtype):
    x = np.array([[-np.inf] * 5, [-np.inf, 0, 1, -np.inf, 2], [0, -90, -100, np.inf, 1],
                  [0, -90, -100, -103, 1]], dtype)  # -90: a subnormal softmax in float32
    for op in ("softmax", "log_softmax"):
        same(getattr(unidev.ops, op)(dev(x), axis=1).numpy(),
             reference.run(op, [x], {"axis": 1})[0], 1e-5, 3e-45)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_tanh_backward_saturates_for_large_negative_x(dtype):
    # regression: exp(-2u) overflowed to inf and inf * 0 gave nan below x ~ -10
    x = np.array([-12.0, -30.0, -88.0, -700.0, 12.0, 30.0, 88.0, np.nan], dtype)
    g = np.ones_like(x)
    got = unidev.ops.gelu_backward(dev(g), dev(x), approximate="tanh").numpy()
    same(got, reference.run("gelu_backward", [g, x], {"approximate": "tanh"})[0], 1e-6, 1e-30)


# ---- batch norm --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 3), (1, 2, 1), (1, 2, 1, 1), (1, 2, 1, 1, 1), (3, 2, 4),
                                   (2, 3, 1, 1, 2), (4, 3, 2, 2, 2, 2)], ids=str)
def test_batch_norm_training_any_rank_and_one_value_per_channel(shape):
    # regression: one value per channel (F.layer_norm's decomposition) was refused; torch takes
    # it: variance 0, save_invstd 1/sqrt(eps), running_var 0/0 = nan
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    rm, rv = np.zeros(c, np.float32), np.ones(c, np.float32)
    drm, drv = dev(rm), dev(rv)
    got = unidev.ops.batch_norm(dev(x), dev(w), dev(b), drm, drv, training=True)
    want = reference.run("batch_norm", [x, w, b, rm, rv], {"training": True})
    for g, r in zip([*got, drm, drv], [*want, rm, rv], strict=True):
        np.testing.assert_allclose(g.numpy(), r, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_channels_holding_nan_and_inf(training):
    # regression: fmax(var, 0) turned a nan variance into save_invstd = 316; an inf first value
    # made the shifted moments nan (the mean of [inf, 1] is inf); inference computed 0 * x and
    # gave nan for x = inf
    x = np.array([[np.nan, np.inf, -np.inf, 1.0, np.inf],
                  [1.0, 1.0, 2.0, 2.0, 3.0],
                  [2.0, 5.0, 3.0, np.inf, 4.0]], np.float32)
    rm, rv = np.zeros(5, np.float32), np.ones(5, np.float32)
    got = unidev.ops.batch_norm(dev(x), None, None, dev(rm), dev(rv), training=training)
    want = reference.run("batch_norm", [x, None, None, rm, rv], {"training": training})
    for g, r in zip(got, want, strict=True):
        same(g.numpy(), r, 1e-5)
    xm, xs = want[1:] if training else (np.zeros(5, np.float32), np.ones(5, np.float32))
    gy = np.ones_like(x)
    got = unidev.ops.batch_norm_backward(dev(gy), dev(x), None, dev(xm), dev(xs),
                                         training=training)
    want = reference.run("batch_norm_backward", [gy, x, None, xm, xs], {"training": training})
    for g, r in zip(got, want, strict=True):
        same(g.numpy(), r, 1e-5)


# ---- indices and attribute values ------------------------------------------------------------

@pytest.mark.parametrize("bad", [-1, -2, 16, 1 << 40, -(1 << 62)])
def test_max_pool2d_backward_refuses_every_out_of_range_index(bad):
    # regression: -1 doubled as the kernel's "no bad index" marker: reported success, dropped
    # the gradient
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    y, idx = reference.run("max_pool2d", [x], {"kernel_size": (2, 2)})
    idx[0, 0, 1, 0] = bad
    gx = dev(np.zeros_like(x))
    with pytest.raises(InvalidArgumentError, match=f"max_pool2d_backward.*indices.*{bad}"):
        raw_call("max_pool2d_backward", [dev(np.ones_like(y)), dev(x), dev(idx)], [gx],
                 {"kernel_size": (2, 2)})


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e20, -1e20])
def test_integer_fill_and_pad_refuse_values_the_dtype_cannot_hold(dtype, value):
    # regression: gave INT_MIN everywhere; the reference and torch raise
    y = dev(np.zeros(4, dtype))
    with pytest.raises(InvalidArgumentError, match=f"fill.*value.*{dtype}"):
        raw_call("fill", [], [y], {"value": value})
    with pytest.raises(InvalidArgumentError, match=f"pad_constant.*value.*{dtype}"):
        raw_call("pad_constant", [dev(np.zeros(2, dtype))], [y], {"pads": (1, 1), "value": value})
    edge = float(np.iinfo(dtype).min)  # representable: still accepted
    raw_call("fill", [], [y], {"value": edge})
    assert (y.numpy() == np.iinfo(dtype).min).all()


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("alpha", [0.5, -2.25, np.nan, np.inf, 1e30])
def test_integer_add_sub_refuse_alpha_that_is_not_an_integer(op, dtype, alpha):
    x = dev(np.arange(4, dtype=dtype))
    with pytest.raises(InvalidArgumentError, match=f"{op}.*alpha"):
        raw_call(op, [x, x], [dev(np.zeros(4, dtype))], {"alpha": alpha})
    out = dev(np.zeros(4, dtype))
    raw_call(op, [x, x], [out], {"alpha": -3.0})
    np.testing.assert_array_equal(out.numpy(), reference.run(op, [np.arange(4, dtype=dtype)] * 2,
                                                             {"alpha": -3.0})[0])


@pytest.mark.parametrize("start,stop,step", [(3e9, 3e9 + 4, 1.0), (0.0, 3e10, 1e10),
                                             (np.nan, 4.0, 1.0), (0.0, np.inf, 1.0)])
def test_int32_arange_refuses_values_outside_its_range(start, stop, step):
    # regression: int32 arange from 3e9 saturated
    n = int(np.ceil((stop - start) / step)) if np.isfinite([start, stop]).all() else 1
    with pytest.raises(InvalidArgumentError, match="arange.*(int32|finite)"):
        raw_call("arange", [], [dev(np.zeros(n, "int32"))],
                 {"start": start, "stop": stop, "step": step, "dtype": "int32"})
