"""Kernel conformance: every op × dtype × case of the tested tiers vs the numpy reference."""

from __future__ import annotations

import functools

import pytest

from unidev.conformance import cases
from unidev.conformance.runner import run_case


@functools.lru_cache(maxsize=4)
def _cases(op: str, dtype: str) -> dict:
    # regenerated at run time (deterministic) rather than held from collection: saves memory
    return {c.id: c for c in cases.cases_for(op, dtype)}


def test_kernel(unidev_kernel_case, unidev_target, unidev_tolerances, record_property) -> None:
    kind, op, dtype, case_id = unidev_kernel_case
    if kind == "missing":
        pytest.fail(f"{op}[{dtype}]: no kernel, but the plugin claims tier {unidev_target.tier} "
                    "and float32 is required for every op of a claimed tier")
    outcome = run_case(op, dtype, _cases(op, dtype)[case_id], unidev_target.device,
                       unidev_tolerances)
    record_property("max_diff", outcome.max_diff)
    assert outcome.ok, outcome.message
