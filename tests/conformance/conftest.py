"""Fixtures for the suite's own tests: the wrong-kernels plugin and a child environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def wrong_site(tmp_path_factory) -> Path:
    from wrongplugin import make_site

    return make_site(tmp_path_factory.mktemp("wrongplugin"))


@pytest.fixture
def suite_env(plugin_sites, wrong_site) -> dict:
    """A child environment that sees testdev and wrongdev."""
    good, _ = plugin_sites
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(good), str(wrong_site), env.get("PYTHONPATH", "")])
    # only the plugins under test: other installed plugins may be rebuilt while a test runs
    env["UNIDEV_PLUGINS"] = "testdev,wrongdev"
    return env
