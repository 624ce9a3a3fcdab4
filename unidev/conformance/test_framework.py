"""Framework group: the plugin inside torch and TensorFlow (through unidev's adapters) — op sweeps
and MLP/CNN training vs CPU; skipped with the reason when an adapter is not installed."""

from __future__ import annotations

import pytest

from unidev.conformance import framework

_runs: dict[tuple[str, str], dict] = {}


def test_framework(unidev_framework_case, unidev_usable, record_property) -> None:
    fw, check = unidev_framework_case
    key = (unidev_usable.device, fw)
    if key not in _runs:
        _runs[key] = framework.run_framework(unidev_usable, fw)
    run = _runs[key]
    if not run.get("available"):
        pytest.skip(run.get("reason") or f"{fw} is not available")
    if run.get("error"):
        pytest.fail(f"{fw}/{check}: {run['error']}", pytrace=False)
    res = run["items"].get(check)
    if res is None:
        pytest.fail(f"{fw}/{check}: the {fw} child process never reported this check",
                    pytrace=False)
    if res.get("fallbacks"):
        uop = framework.unidev_op(fw, check)
        record_property("fallbacks", {"framework_ops": dict(res["fallbacks"]),
                                      "unidev_ops": {uop: 1} if uop else {}})
    if res["outcome"] != "passed":
        pytest.fail(f"{fw}/{check}: {res['message']}", pytrace=False)
