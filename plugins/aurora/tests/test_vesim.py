"""vesim's own C tests (vesim/tests/vesim_test.c), one pytest case per C test."""

from __future__ import annotations

import os
import subprocess

import pytest

TESTS = ["errors_named", "device_info", "contexts", "scalar_mode", "pointer_layout",
         "copies_roundtrip", "bounds", "free_errors", "out_of_memory", "packed", "kernels",
         "crashes", "streams", "many_producers", "stream_errors", "poison",
         "two_threads_two_streams", "stats_and_profiler", "latency_model",
         "not_initialized"]


@pytest.mark.parametrize("name", TESTS)
def test_vesim(vesim_test, name: str) -> None:
    out = subprocess.run([str(vesim_test), name], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"PASS {name}" in out.stdout


def test_vesim_two_devices(vesim_test) -> None:
    env = dict(os.environ, VESIM_DEVICES="2")
    out = subprocess.run([str(vesim_test), "two_devices"], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_vesim_small_memory(vesim_test) -> None:
    # with 1 MiB the out-of-memory test still holds: all of it is reservable, one byte more is not
    env = dict(os.environ, VESIM_MEMORY="1M")
    out = subprocess.run([str(vesim_test), "out_of_memory"], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_unknown_test_name(vesim_test) -> None:
    out = subprocess.run([str(vesim_test), "no_such_test"], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 2
