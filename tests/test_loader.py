"""The one loader: a 1.0-sized plugin loads via unidev._C, torch and TF; bad tables are refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from testplugin import INCLUDE, MODULE, add_distribution, build_abi_1_0_library, build_library

import unidev
from unidev import _C
from unidev.core import discovery

# A plugin whose table is another plugin's, altered: the loader tests' bad tables. It dlopens
# the inner library itself, so it needs nothing from the test plugin's sources.
WRAPPER = r"""
#include <dlfcn.h>
#include <string.h>
#include <unidev/unidev.h>

static UD_Api g_table;

UD_EXPORT const UD_Api* unidev_get_api(void) {
  void* dl = dlopen(INNER, RTLD_NOW | RTLD_LOCAL);
  if (!dl) return NULL;
  void* sym = dlsym(dl, UD_ENTRY_POINT);
  UD_GetApiFn get;
  memcpy(&get, &sym, sizeof get);
  const UD_Api* inner = get();
  memcpy(&g_table, inner, inner->struct_size < sizeof g_table ? inner->struct_size
                                                              : sizeof g_table);
#ifdef WRAP_SIZE
  g_table.struct_size = WRAP_SIZE;
#endif
#ifdef WRAP_NULL
  g_table.WRAP_NULL = NULL;
#endif
#ifdef WRAP_RETURN_NULL
  return NULL;
#endif
  return &g_table;
}
"""

# name -> (what the loader must say, exception class)
REFUSALS = {
    "badmajor": (r"implements unidev ABI 2\.\d+ but this unidev speaks ABI 1\.\d+",
                 unidev.AbiMismatchError),
    "badsize": (r"has a UD_Api of \d+ bytes, smaller than ABI 1\.0 requires",
                unidev.AbiMismatchError),
    "badnull": (r"leaves the required UD_Api function event_elapsed NULL", unidev.AbiMismatchError),
    "nullapi": (r"unidev_get_api\(\) returned NULL", unidev.PluginLoadError),
    "noentry": (r"does not export unidev_get_api\(\)", unidev.PluginLoadError),
}


def _cc(src: str, out: Path, *defines: str) -> Path:
    c = out.with_suffix(".c")
    c.write_text(src)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-std=c17", "-Wall", "-Werror", "-shared", "-fPIC", f"-I{INCLUDE}",
                    *[f"-D{d}" for d in defines], str(c), "-o", str(out), "-ldl"], check=True)
    return out


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> dict[str, Path]:
    """Every library the tests load: the 1.0-sized test plugin, the refused ones, and a full
    1.1-sized table that leaves the optional mem_device NULL."""
    root = tmp_path_factory.mktemp("loader")
    full = build_library(root)
    inner = f'INNER="{full}"'
    out = {"full": full, "abi10": build_abi_1_0_library(root),
           "badmajor": build_library(root, "libbadmajor.so", ("TESTPLUGIN_ABI_MAJOR=2",)),
           "badsize": _cc(WRAPPER, root / "libbadsize.so", inner,
                          "WRAP_SIZE=(UD_API_SIZE_1_0-sizeof(void*))"),
           "badnull": _cc(WRAPPER, root / "libbadnull.so", inner, "WRAP_NULL=event_elapsed"),
           "nullapi": _cc(WRAPPER, root / "libnullapi.so", inner, "WRAP_RETURN_NULL"),
           "noentry": _cc("int not_a_plugin(void) { return 0; }\n", root / "libnoentry.so"),
           "nomemdev": _cc(WRAPPER, root / "libnomemdev.so", inner, "WRAP_NULL=mem_device")}
    return out


@pytest.fixture(scope="module")
def site(libs, tmp_path_factory) -> Path:
    """Entry points: `testdev` is the 1.0-sized plugin, each refused library under its name."""
    site = tmp_path_factory.mktemp("loader-site")
    add_distribution(site, "unidev-testdev", "unidev_testdev_abi10",
                     MODULE.format(name="testdev", lib=str(libs["abi10"])), ep_name="testdev")
    for name in REFUSALS:
        add_distribution(site, f"unidev-{name}", f"unidev_{name}",
                         MODULE.format(name=name, lib=str(libs[name])), ep_name=name)
    return site


def _env(site: Path, plugins: str, **extra: str) -> dict:
    env = dict(os.environ, UNIDEV_PLUGINS=plugins, TF_CPP_MIN_LOG_LEVEL="2", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(__file__).resolve().parent),
                                         env.get("PYTHONPATH", "")])
    return env


def _run(code: str, env: dict, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def _result(out: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and lines, (out.returncode, out.stdout[-2000:],
                                           out.stderr[-3000:])
    return json.loads(lines[-1][7:])


# ---- unidev._C -----------------------------------------------------------------------------


def test_header_sizes():
    assert _C.API_SIZE_1_0 < _C.API_SIZE_1_1 <= _C.API_SIZE
    assert _C.ABI_MAJOR == 1 and _C.ABI_MINOR >= 1


def test_abi_1_0_plugin_loads_in_the_binding(libs):
    lib = _C.Library(str(libs["abi10"]))
    assert tuple(lib.abi) == (1, 0) and lib.struct_size == _C.API_SIZE_1_0
    assert lib.library == lib.path == str(libs["abi10"])
    assert not lib.has_mem_device  # the bytes past struct_size are garbage: never read
    with pytest.raises(unidev.UnsupportedError, match="mem_device.*ABI 1.0"):
        lib.mem_device(64)
    h = lib.malloc(0, 16)
    lib.copy_h2d(h, 0, np.arange(4, dtype=np.float32))
    kernel = lib.kernel("add", "float32")
    t = (h, 0, "float32", [4], [1])
    kernel(0, [t, t], [t], [("alpha", "float", 1.0)])
    back = np.zeros(4, np.float32)
    lib.copy_d2h(h, 0, back)
    assert back.tolist() == [0.0, 2.0, 4.0, 6.0]
    lib.free(0, h)


def test_optional_1_1_function_may_be_null(libs):
    lib = _C.Library(str(libs["nomemdev"]))
    assert lib.struct_size == _C.API_SIZE and not lib.has_mem_device
    full = _C.Library(str(libs["full"]))
    assert full.has_mem_device
    h = full.malloc(1, 100)
    assert full.mem_device(h) == 1 and full.mem_device(h + 99) == 1
    full.free(1, h)
    with pytest.raises(unidev.UnknownHandleError, match="mem_device"):
        full.mem_device(h)


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refusals_name_the_library(libs, name):
    pattern, exc = REFUSALS[name]
    with pytest.raises(exc, match=pattern) as info:
        _C.Library(str(libs[name]))
    assert str(libs[name]) in str(info.value)


def test_abi_1_0_plugin_and_refusals_through_discovery(libs, site):
    code = """
        import json, numpy as np
        from unidev import DeviceArray, ops
        from unidev.core import discovery
        lib = discovery.load("testdev")
        a = DeviceArray.from_numpy(np.arange(4, dtype=np.float32), "testdev:1")
        recs = {r.name: [r.status, r.error] for r in discovery.discover()}
        print("RESULT " + json.dumps({"abi": list(lib.abi), "size": lib.struct_size,
                                      "sum": ops.add(a, a).numpy().tolist(), "recs": recs}))
    """
    res = _result(_run(code, _env(site, ",".join(["testdev", *REFUSALS]))))
    assert res["abi"] == [1, 0] and res["size"] == _C.API_SIZE_1_0
    assert res["sum"] == [0.0, 2.0, 4.0, 6.0]
    for name, (pattern, exc) in REFUSALS.items():
        status, error = res["recs"][name]
        assert status == "broken", (name, status, error)
        assert exc.__name__ in error and str(libs[name]) in error, (name, error)
        assert re.search(pattern, error), (name, error)


# ---- torch ---------------------------------------------------------------------------------


def test_abi_1_0_plugin_and_refusals_through_torch(libs, site):
    pytest.importorskip("torch")
    code = f"""
        import json, os
        import torch
        import unidev.torch as ut
        refused = {{}}
        for name in {sorted(REFUSALS)!r}:
            os.environ["UNIDEV_TORCH_DEVICE"] = name
            try:
                ut.load()
            except Exception as exc:
                refused[name] = f"{{type(exc).__name__}}: {{exc}}"
        os.environ["UNIDEV_TORCH_DEVICE"] = "testdev"
        dev = ut.load()
        x = torch.arange(4.0).to(dev)
        print("RESULT " + json.dumps({{"dev": dev, "sum": (x + x).cpu().tolist(),
                                      "on": str((x + x).device), "refused": refused}}))
    """
    # no autoload: import torch would bind testdev, and a process binds one plugin only
    res = _result(_run(code, _env(site, ",".join(["testdev", *REFUSALS]),
                                  TORCH_DEVICE_BACKEND_AUTOLOAD="0")))
    assert res["dev"] == "testdev" and res["on"].startswith("testdev")
    assert res["sum"] == [0.0, 2.0, 4.0, 6.0]
    for name in REFUSALS:
        error = res["refused"].get(name, "")
        assert str(libs[name]) in error, (name, error)


# ---- TensorFlow ----------------------------------------------------------------------------

TF_SCRIPT = """
    import json, sys
    import tensorflow as tf
    from unidev.core import discovery
    types = [d.device_type for d in tf.config.list_physical_devices()]
    out = {"types": types}
    if "TESTDEV" in types:
        with tf.device("/device:TESTDEV:0"):
            y = tf.constant([1.0, 2.0]) + tf.constant([3.0, 4.0])
        out["sum"], out["on"] = y.numpy().tolist(), y.device
        lib = discovery.load("testdev")
        out["abi"], out["size"] = list(lib.abi), lib.struct_size
    print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def tf_adapter(tmp_path_factory) -> Path:
    """A TF_PLUGGABLE_DEVICE_LIBRARY_PATH folder with the TF adapter of plugin `testdev`; which
    library that is, discovery says when TF loads it."""
    from unidev.adapters.tensorflow import build
    from unidev.contract.spec import PluginSpec

    tf = build.tf_install()
    if tf is None:
        pytest.skip("tensorflow is not installed")
    rec = discovery.PluginRecord(name="testdev", source="test", status="ok", spec=PluginSpec(
        name="testdev", library="/nonexistent/libtestplugin.so", tf_type="TESTDEV"))
    folder = tmp_path_factory.mktemp("tf-adapter")
    built = build.build_plugin(tf, rec)
    (folder / "libtestdev.so").write_bytes(built.read_bytes())
    return folder


def _tf_site(libs, tmp_path: Path, library: str) -> Path:
    site = tmp_path / "site"
    add_distribution(site, "unidev-testdev", "unidev_testdev_tf",
                     MODULE.format(name="testdev", lib=library), ep_name="testdev")
    return site


def test_abi_1_0_plugin_loads_in_tensorflow(libs, tf_adapter, tmp_path):
    site = _tf_site(libs, tmp_path, str(libs["abi10"]))
    out = _run(TF_SCRIPT, _env(site, "testdev", TF_PLUGGABLE_DEVICE_LIBRARY_PATH=str(tf_adapter)))
    res = _result(out)
    assert "TESTDEV" in res["types"], (res, out.stderr[-3000:])
    assert res["sum"] == [4.0, 6.0] and "TESTDEV" in res["on"]
    assert res["abi"] == [1, 0] and res["size"] == _C.API_SIZE_1_0


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refusals_through_tensorflow(libs, tf_adapter, tmp_path, name):
    site = _tf_site(libs, tmp_path, str(libs[name]))
    out = _run(TF_SCRIPT, _env(site, "testdev", TF_PLUGGABLE_DEVICE_LIBRARY_PATH=str(tf_adapter)))
    res = _result(out)  # TF imported and ran: no crash
    assert "TESTDEV" not in res["types"]
    assert "TensorFlow device TESTDEV is disabled" in out.stderr, out.stderr[-3000:]
    assert str(libs[name]) in out.stderr, out.stderr[-3000:]
