"""Bad-input group: each malformed-call class gets a clear error; a crash or a hang is charged to
its case (cases run in child processes, one per group, resumed after a crash)."""

from __future__ import annotations

import pytest

from unidev.conformance import badinputs

_results: dict[tuple[str, str], dict] = {}


def test_bad_input(unidev_bad_case, unidev_usable, record_property) -> None:
    group, name = unidev_bad_case
    key = (unidev_usable.device, group)
    if key not in _results:
        _results[key] = badinputs.run_group(unidev_usable, group)
    res = _results[key].get(name)
    assert res is not None, f"{group}/{name}: the child process never reported this case"
    if res["outcome"] == "skipped":
        pytest.skip(res["message"])
    record_property("detail", res["message"])
    if res["outcome"] != "passed":
        pytest.fail(res["message"], pytrace=False)
