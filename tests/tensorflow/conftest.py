"""Model-level TF tests marked slow run only when asked for (pytest -m slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow; run with -m slow")
    for item in items:
        if "slow" in item.keywords and HERE in Path(str(item.fspath)).parents:
            item.add_marker(skip)
