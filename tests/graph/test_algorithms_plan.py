"""unidev.graph.compile(..., algorithms=selector): conv nodes of a plan run the chosen algorithm."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
import unidev.graph as ug
from unidev.algorithms import AlgorithmError
from unidev.core import discovery
from unidev.graph import Graph

pytestmark = pytest.mark.skipif(discovery.get("x86").status != discovery.OK,
                                reason="needs the x86 plugin (several conv algorithms)")
rng = np.random.default_rng(5)
X = rng.standard_normal((2, 8, 9, 9)).astype("float32")
W3 = rng.standard_normal((16, 8, 3, 3)).astype("float32")
W5 = rng.standard_normal((4, 16, 5, 5)).astype("float32")


def two_convs() -> Graph:
    g = Graph("convs")
    x, w3, w5 = g.input(X.shape), g.input(W3.shape), g.input(W5.shape)
    h = g.call("relu", g.call("conv2d", x, w3, padding=(1, 1)))
    g.output(g.call("conv2d", h, w5, stride=(2, 2)))
    return g


def run(cp) -> np.ndarray:
    arrays = [unidev.DeviceArray.from_numpy(a, device="x86:0") for a in (X, W3, W5)]
    return cp.run(arrays)[0].numpy()


def algorithms_of(cp) -> list[str]:
    return [dict((n, v) for n, _, v in s.attrs)["algorithm"] for s in cp.plan.steps
            if s.op.startswith("conv2d")]


def eager(names: list[str]) -> np.ndarray:
    d = lambda a: unidev.DeviceArray.from_numpy(a, device="x86:0")  # noqa: E731
    h = unidev.ops.relu(unidev.ops.conv2d(d(X), d(W3), padding=(1, 1), algorithm=names[0]))
    return unidev.ops.conv2d(h, d(W5), stride=(2, 2), algorithm=names[1]).numpy()


@pytest.mark.parametrize("selector, names", [
    ("im2col", ["im2col", "im2col"]),
    (["winograd", "direct"], ["winograd", "direct"]),
    (lambda layer: "onednn" if layer.index == 0 else "im2col", ["onednn", "im2col"]),
])
def test_the_plan_runs_the_selected_algorithms(selector, names):
    ug.cache.clear()
    cp = ug.compile(two_convs(), "x86:0", algorithms=selector, optimize=False)
    assert algorithms_of(cp) == names
    # bit-equal to the same algorithms called eagerly (and the algorithms differ among
    # themselves, so the equality says which ran)
    np.testing.assert_array_equal(run(cp), eager(names))


def test_selection_is_part_of_the_plan_key():
    ug.cache.clear()
    a = ug.compile(two_convs(), "x86:0", algorithms="im2col")
    b = ug.compile(two_convs(), "x86:0", algorithms="direct")
    c = ug.compile(two_convs(), "x86:0")
    assert a is not b and a is not c and algorithms_of(c) == ["auto", "auto"]


def test_per_direction_mapping_and_fused_nodes_take_conv2d_selector():
    ug.cache.clear()
    cp = ug.compile(two_convs(), "x86:0", algorithms={"conv2d": "im2col"})  # optimized: fused
    assert set(algorithms_of(cp)) == {"im2col"}


@pytest.mark.parametrize("selector, words", [
    ("winograd", ["winograd", "stride"]),  # the 5x5 stride-2 layer
    (["im2col"], ["list of 1", "2 matching"]),
    ("nonesuch", ["nonesuch"]),
    (lambda layer: 3, ["int", "expected an algorithm name"]),
])
def test_bad_selectors_are_refused_naming_the_layer(selector, words):
    with pytest.raises(AlgorithmError) as e:
        ug.compile(two_convs(), "x86:0", algorithms=selector, cache=False)
    for w in words:
        assert w in str(e.value), str(e.value)
