"""Fixtures for the aurora tests: the loaded plugin, its raw UD_Api table, vesim's tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for aurora_testutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@pytest.fixture(scope="session")
def record():
    """The discovered aurora plugin (installed with pip)."""
    from unidev.core import discovery

    rec = discovery.get("aurora")
    assert rec.status == "ok", rec.error
    return rec


@pytest.fixture(scope="session")
def api(record):
    """The plugin's UD_Api table through ctypes: calls reach the plugin with no checks of ours."""
    from unidev.conformance import abi

    return abi.Api(record.library.api_address)


@pytest.fixture(scope="session")
def raw(api):
    from unidev.conformance import abi

    return abi.Raw(api)


@pytest.fixture(scope="session")
def vesim_test(tmp_path_factory) -> Path:
    """vesim's C test program, built with CMake in a temporary build folder."""
    build = tmp_path_factory.mktemp("vesim-build")
    cmake = ["cmake", "-S", str(ROOT), "-B", str(build), f"-DPython_EXECUTABLE={sys.executable}",
             "-DAURORA_TESTS=ON", "-DCMAKE_BUILD_TYPE=Release"]
    subprocess.run(cmake, check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "--target", "vesim_test", "-j2"], check=True,
                   capture_output=True)
    return build / "vesim" / "vesim_test"


