"""Kernel conformance: every op × dtype × case of the claimed tiers vs the numpy reference."""

from __future__ import annotations

import pytest

from unidev.conformance.runner import run_case


def test_kernel(unidev_kernel_case, unidev_tolerances) -> None:
    target, op, dtype, case = unidev_kernel_case
    if target == "missing":
        pytest.fail(f"{op}[{dtype}]: no kernel, but the plugin claims this op's tier "
                    "(float32 is required for every op of a claimed tier)")
    outcome = run_case(op, dtype, case, target, unidev_tolerances)
    assert outcome.ok, outcome.message
