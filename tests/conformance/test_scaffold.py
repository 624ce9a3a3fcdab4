"""`unidev new-plugin`: the generated package builds, installs and passes tier 0 at once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from unidev.kit import scaffold


def test_refuses_bad_names(tmp_path) -> None:
    with pytest.raises(ValueError, match="must match"):
        scaffold.write("Bad-Name", tmp_path)
    with pytest.raises(ValueError, match="built-in torch"):
        scaffold.write("cuda", tmp_path)
    scaffold.write("okname", tmp_path)
    with pytest.raises(FileExistsError):
        scaffold.write("okname", tmp_path)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is needed to build a plugin")
def test_scaffold_installs_and_passes_tier0(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "unidev", "new-plugin", "acme", "--dir",
                          str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    site = tmp_path / "site"
    # --no-deps: the name "unidev" on PyPI is another project
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                          "--no-deps", "--target", str(site), str(tmp_path / "unidev-acme")],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    env = dict(os.environ, UNIDEV_PLUGINS="acme",
               PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    rep = tmp_path / "report"
    run = subprocess.run([sys.executable, "-m", "unidev", "conformance", "acme", "--groups",
                          "contract,memory,streams,kernels,bad_inputs", "--report", str(rep)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    data = json.loads((rep / "report.json").read_text())
    assert data["tiers"]["0"]["status"] == "passed", data["tiers"]["0"]
    assert data["tiers_passed"] == [0]
    assert data["groups"]["bad_inputs"]["failed"] == 0 and data["groups"]["bad_inputs"]["passed"]


def test_testplugin_sources_are_the_scaffold(tmp_path) -> None:
    """tests/testplugin/src is the scaffold's C sources for testdev, current with the templates."""
    from testplugin import HERE, write_sources

    fresh = write_sources(tmp_path)
    committed = HERE / "src"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in committed.iterdir())
    for name in names:
        assert (committed / name).read_text() == (fresh / name).read_text(), (
            f"tests/testplugin/src/{name} is stale: run `python tests/testplugin/__init__.py`")
    assert not list(scaffold.TEMPLATES.rglob("*.c")) and not list(scaffold.TEMPLATES.rglob("*.h"))


def test_testplugin_abi_variants(tmp_path) -> None:
    """The default build is an ABI 1.2 table (mem_device, kernel_compile); UD_TESTPLUGIN_ABI_1_1
    and _1_0 the older ones."""
    import ctypes

    from testplugin import build_abi_1_0_library, build_abi_1_1_library, build_library

    from unidev.contract import abi

    for lib, size, minor in ((build_library(tmp_path), abi.SIZE_1_2, 2),
                             (build_abi_1_1_library(tmp_path), abi.SIZE_1_1, 1),
                             (build_abi_1_0_library(tmp_path), abi.SIZE_1_0, 0)):
        get = ctypes.CDLL(str(lib)).unidev_get_api
        get.restype = ctypes.POINTER(ctypes.c_size_t)
        table = get()
        assert table[0] == size, lib
        head = ctypes.cast(table, ctypes.POINTER(ctypes.c_int32))
        assert (head[2], head[3]) == (1, minor), lib
