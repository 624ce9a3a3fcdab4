"""pytest plugin (entry point pytest11): --unidev-device NAME turns on the conformance suite."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ..core import discovery
from . import cases, report
from .target import GROUPS, Target, resolve

TARGET_KEY = pytest.StashKey[Target]()
RESULT_KEY = pytest.StashKey[dict]()

# dtypes a plugin may leave out of a claimed tier (float32 is required)
_OPTIONAL_DTYPES = {"float64", "int32", "int64", "bool"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("unidev", "unidev conformance")
    group.addoption("--unidev-device", default=None,
                    help="plugin name (or name:index) to prove; enables the conformance tests")
    group.addoption("--unidev-tier", type=int, default=None,
                    help="highest op tier to test (default: the tier the plugin claims)")
    group.addoption("--unidev-ops", default=None, help="comma-separated ops to limit the run to")
    group.addoption("--unidev-groups", default=None,
                    help=f"comma-separated test groups to run (default all: {','.join(GROUPS)})")
    group.addoption("--unidev-report", default=None, metavar="DIR",
                    help="write report.md and report.json into DIR")


def target_of(config: pytest.Config) -> Target | None:
    return config.stash.get(TARGET_KEY, None)


def pytest_configure(config: pytest.Config) -> None:
    device = config.getoption("--unidev-device", None)
    if not device:
        return
    try:
        target = resolve(device, config.getoption("--unidev-tier"),
                         config.getoption("--unidev-ops"), config.getoption("--unidev-groups"))
    except Exception as exc:
        raise pytest.UsageError(f"--unidev-device {device}: {exc}") from None
    config.stash[TARGET_KEY] = target
    config.pluginmanager.register(Recorder(config, target), "unidev-recorder")


# ---- parametrization ---------------------------------------------------------------------------

def _no_device(reason: str = "pass --unidev-device NAME to run conformance") -> list:
    return [pytest.param(None, marks=pytest.mark.skip(reason=reason))]


def _kernel_params(t: Target) -> list:
    if not t.usable:
        return _no_device(f"{t.name} is {t.record.status}: {t.record.error}")
    params = []
    for op in t.ops():
        for dtype in op.dtypes:
            base = f"{op.name}-{dtype}"
            reason = t.exclusion(op.name, dtype)
            if reason:
                params.append(pytest.param(("excluded", op.name, dtype, reason), id=base,
                                           marks=pytest.mark.skip(
                                               reason=f"excluded by the plugin: {reason}")))
                continue
            if t.library.kernel(op.name, dtype) is None:
                if dtype in _OPTIONAL_DTYPES:
                    params.append(pytest.param(("unsupported", op.name, dtype, None), id=base,
                                               marks=pytest.mark.skip(
                                                   reason=f"unsupported: no {op.name}[{dtype}] "
                                                          "kernel")))
                else:
                    params.append(pytest.param(("missing", op.name, dtype, None), id=base))
                continue
            for case in cases.cases_for(op.name, dtype):
                params.append(pytest.param(("run", op.name, dtype, case.id),
                                           id=f"{base}-{case.id}"))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    t = target_of(metafunc.config)
    names = metafunc.fixturenames
    if "unidev_kernel_case" in names:
        metafunc.parametrize("unidev_kernel_case", _kernel_params(t) if t else _no_device())
    if "unidev_bad_case" in names:
        from . import badinputs

        if t is None or not t.usable:
            params = _no_device() if t is None else _no_device(f"{t.name} is {t.record.status}")
        else:
            params = [pytest.param((g, n), id=f"{g}-{n}") for g, n in badinputs.case_names(t)]
        metafunc.parametrize("unidev_bad_case", params)
    if "unidev_framework_case" in names:
        from . import framework

        if t is None or not t.usable:
            params = _no_device() if t is None else _no_device(f"{t.name} is {t.record.status}")
        else:
            params = [pytest.param((fw, item), id=f"{fw}-{item}")
                      for fw, item in framework.item_names(t)]
        metafunc.parametrize("unidev_framework_case", params)


def _group_of(item: pytest.Item) -> str:
    stem = Path(str(item.path)).stem
    return stem[5:] if stem.startswith("test_") else stem


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    t = target_of(config)
    here = Path(__file__).resolve().parent
    keep, drop = [], []
    for item in items:
        if Path(str(item.path)).resolve().parent != here:
            keep.append(item)
            continue
        group = _group_of(item)
        if t is not None and group not in t.groups:
            drop.append(item)
            continue
        meta = {"group": group}
        params = getattr(getattr(item, "callspec", None), "params", {})
        kc = params.get("unidev_kernel_case")
        if kc:
            meta.update(kind=kc[0], op=kc[1], dtype=kc[2], case=kc[3] if kc[0] == "run" else None)
        bc = params.get("unidev_bad_case")
        if bc:
            meta.update(subgroup=bc[0], case=bc[1])
        fc = params.get("unidev_framework_case")
        if fc:
            from . import framework

            meta.update(framework=fc[0], case=fc[1], tier=framework.item_tier(fc[0], fc[1]))
        item.user_properties.append(("unidev", meta))
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    order = {g: i for i, g in enumerate(GROUPS)}
    # contract first: when it fails, everything after it is explained by it
    keep.sort(key=lambda it: order.get(dict(it.user_properties).get("unidev", {}).get(
        "group", ""), -1))
    items[:] = keep


# ---- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def unidev_target(request: pytest.FixtureRequest) -> Target:
    """The plugin under test; skips when no --unidev-device was given."""
    t = target_of(request.config)
    if t is None:
        pytest.skip("pass --unidev-device NAME to run conformance")
    return t


@pytest.fixture(scope="session")
def unidev_usable(unidev_target: Target) -> Target:
    """The plugin under test, loaded; skips (the contract group fails) if it is not usable."""
    if unidev_target.record.status != discovery.OK:
        pytest.skip(f"{unidev_target.name} is {unidev_target.record.status}: "
                    f"{unidev_target.record.error}")
    return unidev_target


@pytest.fixture
def unidev_tolerances(request: pytest.FixtureRequest) -> dict:
    t = target_of(request.config)
    return t.tolerances() if t else {}


# ---- results -----------------------------------------------------------------------------------

class Recorder:
    """Collects every test's outcome with its group/op/dtype/case, and writes the report."""

    def __init__(self, config: pytest.Config, target: Target) -> None:
        self.config, self.target = config, target
        self.records: dict[str, dict] = {}
        self.started = time.time()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        meta = props.get("unidev")
        if meta is None:
            return
        rec = self.records.setdefault(report.nodeid, dict(meta, outcome="passed",
                                                          seconds=0.0, message=""))
        rec["seconds"] += report.duration
        if "max_diff" in props:
            rec["max_diff"] = props["max_diff"]
        for key in ("detail", "fallbacks"):
            if key in props:
                rec[key] = props[key]
        if report.skipped:
            rec["outcome"] = "skipped"
            lr = report.longrepr
            text = str(lr[2]) if isinstance(lr, tuple) else str(lr)
            rec["message"] = text.removeprefix("Skipped: ")
        elif report.failed:
            rec["outcome"] = "failed"
            rec["message"] = _failure_text(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        data = report.build(self.target, list(self.records.values()),
                            time.time() - self.started)
        self.config.stash[RESULT_KEY] = data
        out = self.config.getoption("--unidev-report")
        if out:
            paths = report.write(data, Path(out))
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                tr.write_line(f"unidev conformance report: {paths[0]} and {paths[1]}")


def _failure_text(rep: pytest.TestReport) -> str:
    """The assertion's message (the 'E' lines), not the whole traceback."""
    text = rep.longreprtext or ""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    if lines:
        first = [ln for ln in lines if not ln.startswith(("assert ", "+", "where"))]
        text = " ".join(first or lines)
        return text.removeprefix("AssertionError: ").removeprefix("Failed: ")[:2000]
    return text.strip().splitlines()[-1][:2000] if text.strip() else "failed"
