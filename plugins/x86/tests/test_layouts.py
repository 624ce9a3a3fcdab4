"""unidev-x86 layouts (issue 24): channels-last in place, other strides copied and counted."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev.conformance import layouts
from unidev.core import discovery, reference

DEV = "x86:0"


def copies() -> int:
    return unidev.debug_counters("x86")["layout_copies"]


def _run(op: str, dtype: str, layout: str) -> int:
    """Runs every case of (op, dtype) in `layout`; returns the layout copies they made."""
    before = copies()
    for case in layouts.layout_cases(op, dtype):
        if case.layout == layout:
            out = layouts.run_layout_case(op, dtype, case, DEV)
            assert out.ok, out.message
    return copies() - before


def test_counter_is_exposed() -> None:
    c = unidev.debug_counters("x86")
    assert c["layout_copies"] >= 0 and all(v >= 0 for v in c.values())


def _has(op: str, dtype: str) -> bool:
    try:  # at collection: a machine where x86 cannot load fails in the tests that need it
        return discovery.load("x86").kernel(op, dtype) is not None
    except unidev.UnidevError:
        return False


# float64 conv has no oneDNN: im2col takes its activations as they are, weights KCRS (below)
_NATIVE = [(op, dt, lay) for op in layouts.layout_ops() for dt in ("float32", "float64")
           for lay in ("channels_last", "channels_last_hwio")
           if not (op.startswith("conv2d") and dt == "float64") and _has(op, dt)
           and (lay == "channels_last" or op.startswith("conv2d"))]


@pytest.mark.parametrize("op,dtype,layout", _NATIVE)
def test_channels_last_makes_no_copy(op: str, dtype: str, layout: str) -> None:
    assert _run(op, dtype, layout) == 0


@pytest.mark.parametrize("op", ["conv2d", "conv2d_backward_input", "conv2d_backward_weight"])
@pytest.mark.parametrize("layout", ["permuted", "gapped"])
def test_other_conv_layouts_are_copied_and_counted(op: str, layout: str) -> None:
    # each case copies at least its x-shaped tensors (float32: the weight goes to oneDNN as is)
    n = sum(c.layout == layout for c in layouts.layout_cases(op, "float32"))
    assert _run(op, "float32", layout) >= 2 * n


@pytest.mark.parametrize("op", ["conv2d", "conv2d_backward_input", "conv2d_backward_weight"])
@pytest.mark.parametrize("layout", ["channels_last", "channels_last_hwio"])
def test_float64_conv_copies_only_the_weight(op: str, layout: str) -> None:
    # im2col reads and writes channels-last activations in place but takes KCRS weights: one
    # copy per case whose weight (or grad_w) is not dense KCRS in this layout
    def kcrs(shape: tuple[int, ...]) -> bool:
        _, strides, _, _ = layouts.place(shape, layouts.LAYOUTS[layout][2], 0, np.float64)
        want = np.empty(shape).strides
        return all(d == 1 or s * 8 == w for d, s, w in zip(shape, strides, want, strict=True))

    cases = [c for c in layouts.layout_cases(op, "float64") if c.layout == layout]
    shapes = [c.attrs["weight_shape"] if op.endswith("weight") else c.inputs[1].shape
              for c in cases]
    n = sum(not kcrs(tuple(s)) for s in shapes)
    assert n > 0 and _run(op, "float64", layout) == n


def _cl(a: np.ndarray) -> unidev.DeviceArray:
    return unidev.DeviceArray.from_numpy(np.ascontiguousarray(a.transpose(0, 2, 3, 1)),
                                         DEV).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("groups", [1, 8])
@pytest.mark.parametrize("algorithm", ["onednn", "direct", "im2col"])
def test_channels_last_conv_by_algorithm(algorithm: str, groups: int) -> None:
    # in place but for direct's non-depthwise loops (NCHW: x and y copied)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 8, 9, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8 // groups, 3, 3)).astype(np.float32)
    attrs = {"padding": (1, 1), "groups": groups, "algorithm": algorithm}
    want = reference.run("conv2d", [x, w], dict(attrs))[0]
    before = copies()
    y = unidev.ops.conv2d(_cl(x), unidev.DeviceArray.from_numpy(w, DEV),
                          out=_cl(np.zeros_like(want)), **attrs)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    assert copies() - before == (2 if algorithm == "direct" and groups == 1 else 0)


def test_channels_last_max_pool_bad_index_is_refused() -> None:
    x = np.arange(2 * 16 * 4 * 4, dtype=np.float32).reshape(2, 16, 4, 4)
    y, idx = reference.run("max_pool2d", [x], {"kernel_size": (2, 2)})
    idx = idx.copy()
    idx[1, 5, 1, 0] = 99
    gy = np.ones_like(y)
    with pytest.raises(unidev.InvalidArgumentError, match="99"):
        unidev.ops.max_pool2d_backward(_cl(gy), _cl(x), _cl(idx), kernel_size=(2, 2),
                                       out=_cl(np.zeros_like(x)))
