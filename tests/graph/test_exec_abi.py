"""Plans on the C test plugin: kernel_compile specializations (ABI 1.2), a 1.0 table without."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import unidev.graph as ug
from unidev import _C
from unidev.core.array import DeviceArray
from unidev.graph import Graph
from unidev.graph import plan as planfile

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from plan_helpers import Builder  # noqa: E402
from testplugin import build_abi_1_0_library  # noqa: E402

rng = np.random.default_rng(2)


def test_fused_chain_runs_the_compiled_kernel(testdev):
    g = Graph("chain")
    x, y = g.input((4, 6)), g.input((4, 6))
    g.output(g.call("mul", g.call("add", x, y), g.const(np.float32(3.0))))
    cp = ug.compile(g, testdev, cache=False)
    assert [op for _, op in cp.steps] == ["elementwise_program"] and cp.num_compiled == 1
    xv, yv = rng.standard_normal((2, 4, 6)).astype(np.float32)
    (out,) = cp.run([DeviceArray.from_numpy(xv, testdev), DeviceArray.from_numpy(yv, testdev)])
    np.testing.assert_allclose(out.numpy(), (xv + yv) * 3, rtol=1e-6)


def test_abi_1_0_plugin_runs_plans_with_kernel_lookup(tmp_path):
    lib = _C.Library(str(build_abi_1_0_library(tmp_path)))
    assert lib.abi == (1, 0) and not lib.has_kernel_compile
    b = Builder("abi10", plugin="testdev")
    x, y = b.input((5,)), b.input((5,))
    t = b.temp((5,))
    out = b.output((5,))
    b.step("elementwise_program", [x, y], [t], "prog", program="i0 i1 mul o0")
    b.step("add", [t, x], [out], "plus")
    plan = _C.Plan(lib, 0, planfile.to_bytes(b.plan()))
    assert plan.num_compiled == 0 and plan.steps == [("prog", "elementwise_program"),
                                                     ("plus", "add")]
    xv, yv = rng.standard_normal((2, 5)).astype(np.float32)
    hs = [lib.malloc(0, 20) for _ in range(3)]
    try:
        lib.copy_h2d(hs[0], 0, xv.view(np.uint8))
        lib.copy_h2d(hs[1], 0, yv.view(np.uint8))
        plan.run([(h, 0, "float32", (5,), (1,)) for h in hs[:2]],
                 [(hs[2], 0, "float32", (5,), (1,))])
        got = np.empty(5, np.float32)
        lib.copy_d2h(hs[2], 0, got.view(np.uint8))
        np.testing.assert_allclose(got, xv * yv + xv, rtol=1e-6)
    finally:
        del plan
        for h in hs:
            lib.free(0, h)
