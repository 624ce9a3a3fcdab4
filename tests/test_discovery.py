"""Discovery and loading: allowlist, autoload switch, and broken plugins recorded, not raised."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from testplugin import MODULE, add_distribution, build_library
from wrongplugin import build_crash_library, crash_site

import unidev
from unidev.contract.spec import PluginSpec
from unidev.core import discovery
from unidev.kit import hookimpl


def _run(code: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=timeout)


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
    from unidev import _C

    m = _C.ABI_MINOR  # the test plugin claims major 99 with this unidev's minor
    assert f"ABI 99.{m}" in lines["abi_mismatch"] and f"ABI 1.{m}" in lines["abi_mismatch"]
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
    m = _C.ABI_MINOR
    with pytest.raises(unidev.AbiMismatchError,
                       match=rf"ABI 0\.{m} but this unidev speaks ABI 1\.{m}"):
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


# --- plugins that crash, hang, exit or raise BaseException (issue 14, items 6 and 7) --------------

LIST_PROBE = ("from unidev.core import discovery\n"
              "for r in discovery.discover():\n"
              "    print(r.name, '|', r.status, '|', r.error, '|', r.extra.get('probe'))")
USE_GOOD = """
import numpy as np, unidev
for dev in ('testdev', 'x86'):
    if any(r.name == dev and r.usable for r in unidev.discover()):
        a = unidev.DeviceArray.from_numpy(np.arange(3, dtype=np.float32), dev)
        print('sum', dev, unidev.ops.add(a, a).numpy().tolist())
"""


def _rows(out: subprocess.CompletedProcess) -> dict[str, list[str]]:
    return {cols[0]: cols for line in out.stdout.splitlines()
            if len(cols := line.split(" | ")) == 4}


@pytest.fixture
def crash_env(subprocess_env, tmp_path_factory, tmp_path) -> dict:
    """The good and broken test plugins plus the crashing ones, a fresh verdict cache, a 2 s
    probe timeout."""
    env = dict(subprocess_env, UNIDEV_CACHE_DIR=str(tmp_path / "cache"), UNIDEV_PROBE_TIMEOUT="2")
    env["PYTHONPATH"] = os.pathsep.join([str(crash_site(tmp_path_factory)), env["PYTHONPATH"]])
    return env


NATIVE_VERDICTS = {
    "segv": "killed by SIGSEGV in device_count",
    "hang": "timed out after 2 s in device_count",
    "exits": "exited with status 7 in device_count",
    "abortlookup": "killed by SIGABRT in kernel_lookup(add, float32)",
    "ctorcrash": "killed by SIGSEGV in dlopen",
}


def test_crashing_libraries_are_probed_in_a_child_and_listed_broken(crash_env):
    for run in ("probed now", "cached verdict"):
        out = _run(LIST_PROBE + USE_GOOD, crash_env)
        assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
        rows = _rows(out)
        for name, verdict in NATIVE_VERDICTS.items():
            status, error, probe = rows[name][1:]
            assert status == "broken" and verdict in error and "not loaded" in error, rows[name]
            assert probe == run, rows[name]
        assert rows["testdev"][1] == "ok" and rows["testdev"][3] == run
        assert "sum testdev [0.0, 2.0, 4.0]" in out.stdout


PYTHON_ERRORS = {
    "sysexit_import": "SystemExit: 3",
    "baseexc_import": "PluginPanic: plugin gave up while importing",
    "sysexit_hook": "SystemExit: 4",
    "genexit_hook": "GeneratorExit: not a generator",
}


def test_base_exceptions_from_plugin_code_are_contained(crash_env):
    out = _run(LIST_PROBE + USE_GOOD + "\nprint('still running')", crash_env)
    assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    rows = _rows(out)
    for name, error in PYTHON_ERRORS.items():
        assert rows[name][1] == "broken" and error in rows[name][2], rows[name]
    assert "sum testdev [0.0, 2.0, 4.0]" in out.stdout and "still running" in out.stdout


@pytest.mark.parametrize("raised", [SystemExit(5), GeneratorExit(), BaseException("odd")],
                         ids=["SystemExit", "GeneratorExit", "BaseException"])
def test_registered_plugin_raising_base_exception_is_broken(raised):
    class Raises:
        @hookimpl
        def unidev_plugin(self):
            raise raised

    discovery.register(Raises(), "raises")
    try:
        rec = discovery.get("raises")
        assert rec.status == "broken" and type(raised).__name__ in rec.error
    finally:
        discovery._registered.clear()
        discovery.reset()


def test_keyboard_interrupt_is_not_swallowed():
    class Interrupted:
        @hookimpl
        def unidev_plugin(self):
            raise KeyboardInterrupt

    discovery._registered.append(("interrupted", Interrupted()))
    try:
        discovery.reset()
        with pytest.raises(KeyboardInterrupt):
            discovery.discover()
    finally:
        discovery._registered.clear()
        discovery.reset()


def _single_site(root: Path, name: str, lib: Path) -> Path:
    site = root / f"site-{name}"
    add_distribution(site, f"unidev-{name}", f"unidev_{name}",
                     MODULE.format(name=name, lib=str(lib)), ep_name=name)
    return site


def _only(env: dict, site: Path, name: str, cache: Path) -> dict:
    return dict(env, PYTHONPATH=os.pathsep.join([str(site), env.get("PYTHONPATH", "")]),
                UNIDEV_PLUGINS=name, UNIDEV_CACHE_DIR=str(cache))


def test_changed_library_is_probed_again(subprocess_env, tmp_path):
    lib = build_library(tmp_path / "lib", "libswapped.so")
    env = _only(subprocess_env, _single_site(tmp_path, "swapped", lib), "swapped", tmp_path / "c")
    first = _rows(_run(LIST_PROBE, env))
    assert first["swapped"][1] == "ok", first
    crashing = build_crash_library(tmp_path / "new", "CRASH_IN_DEVICE_COUNT")
    os.replace(crashing, lib)  # same path, new bytes: e.g. the plugin was upgraded
    out = _run(LIST_PROBE, env)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    rows = _rows(out)
    assert rows["swapped"][1] == "broken", rows
    assert "killed by SIGSEGV in device_count" in rows["swapped"][2]
    assert rows["swapped"][3] == "probed now"


@pytest.mark.parametrize("forgery", ["group-writable", "another user's"])
def test_verdict_written_by_someone_else_is_not_trusted(subprocess_env, tmp_path, forgery):
    if forgery == "another user's" and os.getuid() != 0:
        pytest.skip("chown to another user needs root")
    lib = build_crash_library(tmp_path / "lib", "CRASH_IN_DEVICE_COUNT")
    cache = tmp_path / "cache"
    env = _only(subprocess_env, _single_site(tmp_path, "forged", lib), "forged", cache)
    assert _rows(_run(LIST_PROBE, env))["forged"][1] == "broken"
    (verdict,) = (cache / "plugin-probes").glob("*.json")
    data = json.loads(verdict.read_text())
    data.update(ok=True, error=None)  # a forged "this library is sane"
    verdict.write_text(json.dumps(data))
    if forgery == "group-writable":
        os.chmod(verdict, 0o660)
    else:
        os.chown(verdict, 65534, 65534)
    out = _run(LIST_PROBE, env)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])  # loading it would crash
    rows = _rows(out)
    assert rows["forged"][1] == "broken" and "SIGSEGV in device_count" in rows["forged"][2]
    assert rows["forged"][3] == "probed now"
    st = os.stat(verdict)  # replaced by a verdict of our own
    assert st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def test_import_torch_survives_crashing_plugins(crash_env):
    pytest.importorskip("torch")
    env = {k: v for k, v in crash_env.items()
           if k not in ("UNIDEV_TORCH_DEVICE", "UNIDEV_PLUGINS", "TORCH_DEVICE_BACKEND_AUTOLOAD",
                        "UNIDEV_CACHE_DIR")}  # the user's cache: it holds the built adapter
    code = """
import torch
autoloaded = torch._C._get_privateuse1_backend_name()
import unidev.torch as ut
dev = ut.load()
assert dev == autoloaded, (dev, autoloaded)
print('device', dev, (torch.arange(3.0, device=dev) * 2).cpu().tolist())
"""
    out = _run(code, env, timeout=900)  # the first import torch may build the adapter
    assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-3000:])
    assert "[0.0, 2.0, 4.0]" in out.stdout
    for name in [*NATIVE_VERDICTS, *PYTHON_ERRORS]:
        assert f"device {name}" not in out.stdout


def test_probe_and_conformance_share_the_one_table_mirror():
    import ctypes
    import inspect

    from unidev.conformance import abi as conformance_abi
    from unidev.contract import abi

    assert conformance_abi.ApiTable is abi.ApiTable
    own = [n for n, v in vars(discovery).items()
           if inspect.isclass(v) and issubclass(v, ctypes.Structure)]
    assert not own, f"discovery defines its own ctypes structs {own}"
    assert "abi.ApiTable" in inspect.getsource(discovery._probe_child)


def test_hang_verdicts_expire_and_malformed_verdicts_are_ignored(tmp_path, monkeypatch):
    import time

    from unidev.core import cache as _cache

    monkeypatch.setenv("UNIDEV_CACHE_DIR", str(tmp_path / "cache"))
    folder = discovery._verdict_dir()

    def verdict(key: str, **fields) -> dict | None:
        data = {"key": key, "ok": False, "error": "timed out", "hung": True, "time": time.time()}
        data.update(fields)
        _cache.write_private(folder / f"{key}.json", json.dumps(data).encode())
        return discovery._read_verdict(folder, key)

    assert verdict("fresh")["error"] == "timed out"
    assert verdict("old", time=time.time() - 2 * discovery._RETRY_HUNG_S) is None
    assert verdict("crash", hung=False, time=0)["error"] == "timed out"  # crashes do not expire
    assert verdict("badtime", time="yesterday") is None
    assert verdict("noerror", error=None) is None
    assert verdict("badok", ok="yes") is None
    (folder / "wrongkey.json").write_text(json.dumps({"key": "other", "ok": True}))
    assert discovery._read_verdict(folder, "wrongkey") is None
