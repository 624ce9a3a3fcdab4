"""pytest plugin (entry point pytest11): --unidev-device NAME turns on the conformance tests."""

from __future__ import annotations

import pytest

from ..core import discovery, opset
from . import cases

_UNSUPPORTED_OK_DTYPES = {"float64", "int32", "int64", "bool"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("unidev", "unidev conformance")
    group.addoption("--unidev-device", default=None,
                    help="plugin name (or name:index) to prove; enables the conformance tests")
    group.addoption("--unidev-tier", type=int, default=None,
                    help="highest op tier to test (default: the tier the plugin claims)")
    group.addoption("--unidev-ops", default=None, help="comma-separated ops to limit the run to")


def _params(config: pytest.Config) -> list:
    target = config.getoption("--unidev-device")
    name = target.partition(":")[0]
    rec = discovery.get(name)
    if rec.status != discovery.OK:
        return [pytest.param(None, id=f"{name}-{rec.status}",
                             marks=pytest.mark.skip(reason=f"{name}: {rec.status}: {rec.error}"))]
    conf = rec.spec.conformance
    tier = config.getoption("--unidev-tier")
    tier = conf.tier if tier is None else tier
    only = config.getoption("--unidev-ops")
    only = set(only.split(",")) if only else None
    params = []
    for op in opset.OPS.values():
        if op.tier > tier or (only and op.name not in only):
            continue
        for dtype in op.dtypes:
            base = f"{op.name}-{dtype}"
            reason = conf.exclusions.get(f"{op.name}:{dtype}") or conf.exclusions.get(op.name)
            if reason:
                params.append(pytest.param(None, id=base, marks=pytest.mark.skip(
                    reason=f"excluded by the plugin: {reason}")))
                continue
            if rec.library.kernel(op.name, dtype) is None:
                if dtype in _UNSUPPORTED_OK_DTYPES:
                    params.append(pytest.param(None, id=base, marks=pytest.mark.skip(
                        reason=f"unsupported: {op.name} has no {dtype} kernel")))
                else:
                    params.append(pytest.param(("missing", op.name, dtype, None), id=base))
                continue
            for case in cases.cases_for(op.name, dtype):
                params.append(pytest.param((target, op.name, dtype, case),
                                           id=f"{base}-{case.id}"))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "unidev_kernel_case" not in metafunc.fixturenames:
        return
    if not metafunc.config.getoption("--unidev-device"):
        metafunc.parametrize("unidev_kernel_case", [pytest.param(
            None, marks=pytest.mark.skip(reason="pass --unidev-device NAME to run conformance"))])
        return
    metafunc.parametrize("unidev_kernel_case", _params(metafunc.config))


@pytest.fixture
def unidev_tolerances(request: pytest.FixtureRequest) -> dict:
    target = request.config.getoption("--unidev-device") or ""
    rec = discovery.get(target.partition(":")[0])
    return dict(rec.spec.conformance.tolerances) if rec.spec else {}
