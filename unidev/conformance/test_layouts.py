"""Layouts group: layout-sensitive ops on channels-last and other strides vs the reference."""

from __future__ import annotations

import functools

import pytest

from unidev.conformance import layouts
from unidev.conformance.plugin import target_of
from unidev.core import discovery
from unidev.core.errors import UnsupportedError

_OPTIONAL_DTYPES = {"float64"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "unidev_layout_case" not in metafunc.fixturenames:
        return
    t = target_of(metafunc.config)
    if t is None or not t.usable:
        why = "pass --unidev-device NAME to run conformance" if t is None else \
            f"{t.name} is {t.record.status}: {t.record.error}"
        metafunc.parametrize("unidev_layout_case", [pytest.param(None, marks=pytest.mark.skip(
            reason=why))])
        return
    names = set(layouts.layout_ops())
    params = []
    for op in t.ops():
        if op.name not in names:
            continue
        for dtype in op.dtypes:
            reason = t.exclusion(op.name, dtype)
            if reason is None and t.library.kernel(op.name, dtype) is None:
                reason = f"no {op.name}[{dtype}] kernel" if dtype in _OPTIONAL_DTYPES else None
            for case in _cases(op.name, dtype).values():
                params.append(pytest.param((op.name, dtype, case.id), id=f"{op.name}-{dtype}-"
                                           f"{case.id}", marks=[pytest.mark.skip(reason=reason)]
                                           if reason else []))
    metafunc.parametrize("unidev_layout_case", params)


@functools.lru_cache(maxsize=4)
def _cases(op: str, dtype: str) -> dict:
    return {c.id: c for c in layouts.layout_cases(op, dtype)}


def _copies(name: str) -> int | None:
    return discovery.debug_counters(name).get("layout_copies")


def test_layout(unidev_layout_case, unidev_target, unidev_tolerances, record_property) -> None:
    op, dtype, case_id = unidev_layout_case
    case = _cases(op, dtype)[case_id]
    before = _copies(unidev_target.name)
    try:
        outcome = layouts.run_layout_case(op, dtype, case, unidev_target.device,
                                          unidev_tolerances)
    except UnsupportedError as exc:  # allowed, if it says which op cannot take which strides
        assert op in str(exc), f"{op}: refused layout '{case.layout}' without naming the op: {exc}"
        pytest.skip(f"refused by the plugin: {exc}")
    after = _copies(unidev_target.name)
    if before is not None and after is not None:
        # reported, not judged: which layouts a plugin runs in place is its own choice
        record_property("layout_copies", after - before)
    record_property("max_diff", outcome.max_diff)
    assert outcome.ok, outcome.message
