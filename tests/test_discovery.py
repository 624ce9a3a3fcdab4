"""Discovery and loading: allowlist, autoload switch, and broken plugins recorded, not raised."""

from __future__ import annotations

import subprocess
import sys

import pytest
from testplugin import build_library

import unidev
from unidev.core import discovery
from unidev.core.spec import PluginSpec
from unidev.plugins import hookimpl


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


LIST = ("from unidev.core import discovery\n"
        "for r in discovery.discover(): print(r.name, '|', r.status, '|', r.error)")


def test_broken_plugins_are_recorded_and_testdev_still_works(subprocess_env):
    code = LIST + """
import numpy as np, unidev
a = unidev.DeviceArray.from_numpy(np.ones(3, np.float32), 'testdev')
print('sum', unidev.ops.add(a, a).numpy().tolist())
"""
    out = _run(code, subprocess_env)
    assert out.returncode == 0, out.stderr
    lines = {line.split(" | ")[0]: line for line in out.stdout.splitlines() if " | " in line}
    assert lines["testdev"].startswith("testdev | ok")
    assert "ModuleNotFoundError" in lines["badimport"] and "broken" in lines["badimport"]
    assert "native library not found" in lines["nolib"]
    assert "ABI 99.0" in lines["abi_mismatch"] and "ABI 1.0" in lines["abi_mismatch"]
    assert "sum [2.0, 2.0, 2.0]" in out.stdout


def test_allowlist_and_autoload_switch(subprocess_env):
    env = dict(subprocess_env, UNIDEV_PLUGINS="testdev,nolib")
    names = [line.split(" | ")[0] for line in _run(LIST, env).stdout.splitlines()]
    assert sorted(names) == ["nolib", "testdev"]
    env = dict(subprocess_env, UNIDEV_DISABLE_PLUGIN_AUTOLOAD="1")
    assert _run(LIST, env).stdout.strip() == ""


def test_import_unidev_never_imports_frameworks(subprocess_env):
    code = ("import sys, unidev; unidev.discover(); "
            "assert 'torch' not in sys.modules and 'tensorflow' not in sys.modules, "
            "[m for m in sys.modules if m.startswith(('torch', 'tensorflow'))]")
    out = _run(code, subprocess_env)
    assert out.returncode == 0, out.stderr


def test_newer_minor_loads_and_other_major_is_refused(tmp_path):
    from unidev import _C

    newer = build_library(tmp_path, "libminor.so", ("TESTPLUGIN_ABI_MINOR=7",))
    assert tuple(_C.Library(str(newer)).abi) == (1, 7)
    older_major = build_library(tmp_path, "libmajor0.so", ("TESTPLUGIN_ABI_MAJOR=0",))
    with pytest.raises(unidev.AbiMismatchError, match=r"ABI 0\.0 but this unidev speaks ABI 1\.0"):
        _C.Library(str(older_major))
    with pytest.raises(unidev.PluginLoadError, match="cannot load plugin library"):
        _C.Library(str(tmp_path / "nothing.so"))
    with pytest.raises(unidev.PluginLoadError, match="does not export unidev_get_api"):
        _C.Library("libm.so.6")


def test_registered_plugin_with_no_devices(tmp_path):
    lib = build_library(tmp_path, "libnodev.so", ("TESTPLUGIN_DEVICES=0",))

    class NoDevices:
        @hookimpl
        def unidev_plugin(self):
            return PluginSpec(name="nodev", library=str(lib))

    discovery.register(NoDevices(), "nodev")
    try:
        rec = discovery.get("nodev")
        assert rec.status == "no devices" and "TESTPLUGIN_DEVICES=0" in rec.error
        with pytest.raises(unidev.PluginLoadError, match="nodev.*no devices"):
            unidev.DeviceArray.empty((1,), "float32", "nodev")
    finally:
        discovery._registered.clear()
        discovery.reset()


def test_spec_validation():
    with pytest.raises(ValueError, match="tf_type"):
        PluginSpec(name="ok", library="/x", tf_type="Bad-Type")
    with pytest.raises(ValueError, match="built-in torch device"):
        PluginSpec(name="gpu", library="/x", torch_name="cuda")
    with pytest.raises(ValueError, match="name"):
        PluginSpec(name="Bad Name", library="/x")
    with pytest.raises(ValueError, match=r"torch_name.*\[a-z_\]\+"):
        PluginSpec(name="x86", library="/x", tf_type="XS")
    with pytest.raises(ValueError, match="contains 'CPU'"):
        PluginSpec(name="xcpu", library="/x")


def test_unknown_plugin_names_installed(testdev):
    with pytest.raises(unidev.PluginLoadError, match="no unidev plugin named 'nope'.*testdev"):
        discovery.get("nope")
