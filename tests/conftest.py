"""Shared fixtures: the C test plugin built once per session and made discoverable."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

import unidev
from unidev.core import discovery

sys.path.insert(0, str(Path(__file__).resolve().parent))

from testplugin import make_site  # noqa: E402


@pytest.fixture(scope="session")
def plugin_sites(tmp_path_factory) -> tuple[Path, Path]:
    """(good site, broken site): folders to put on sys.path / PYTHONPATH."""
    return make_site(tmp_path_factory.mktemp("plugins"))


@pytest.fixture(scope="module")
def testdev(plugin_sites):
    """The test plugin, discoverable in this process through its entry point — for one module
    only: left discoverable, it would be one more plugin for every later module (the TF tests
    built and installed a TF adapter library for it)."""
    good, _ = plugin_sites
    added = str(good) not in sys.path
    if added:
        sys.path.insert(0, str(good))
    importlib.invalidate_caches()
    discovery.reset()
    rec = discovery.get("testdev")
    assert rec.status == "ok", rec.error
    yield "testdev"
    if added and str(good) in sys.path:
        sys.path.remove(str(good))
        importlib.invalidate_caches()
        discovery.reset()


@pytest.fixture
def subprocess_env(plugin_sites) -> dict:
    """Environment for a child Python that sees the good and the broken plugins."""
    good, bad = plugin_sites
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(good), str(bad), env.get("PYTHONPATH", "")])
    return env


def _bundled(name: str) -> str:
    """`name` if that bundled plugin is installed and loads, else the test is skipped."""
    try:
        rec = discovery.get(name)
    except unidev.PluginLoadError:
        pytest.skip(f"plugin {name} not installed")
    if rec.status != discovery.OK:
        pytest.skip(f"plugin {name}: {rec.status}")
    return name


@pytest.fixture(params=["testdev", "x86", "aurora"])
def dev(request) -> str:
    """Each device a framework-free test can use: the C test plugin, the bundled x86 and aurora."""
    if request.param == "testdev":
        return request.getfixturevalue("testdev")
    return _bundled(request.param)


@pytest.fixture(params=["x86", "aurora"])
def plugin(request) -> str:
    """Each bundled plugin with real kernels (x86, aurora); tests may define their own."""
    return _bundled(request.param)
