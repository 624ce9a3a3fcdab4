"""Fixtures for the PyTorch adapter tests: the device this process is bound to, subprocess runs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="session")
def dev() -> str:
    """torch device type of the unidev backend in this process (the autoloaded plugin)."""
    import unidev.torch as ut

    try:
        return ut.load()
    except Exception as exc:  # no plugin, no compiler: nothing to test here
        pytest.skip(f"unidev torch backend not available: {exc}")


@pytest.fixture
def no_fallbacks(dev):
    """Fails the test if any aten op ran on the CPU instead of the device."""
    import unidev.torch as ut

    ut.reset_fallbacks()
    yield
    assert ut.fallback_report() == {}

