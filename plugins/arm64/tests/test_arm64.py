"""Tests of unidev-arm64 on any host: packaging, build files and scripts (fast), and the whole
cross-build + qemu conformance run (slow)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
X86 = HERE.parent / "x86"
SCRIPTS = ("provision", "cross-build", "qemu-conformance")
sys.path.insert(0, str(HERE))

import unidev_arm64  # noqa: E402


def test_spec_not_applicable_off_aarch64(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unidev_arm64.platform, "machine", lambda: "x86_64")
    spec = unidev_arm64.unidev_plugin()
    assert spec.name == "arm64"
    assert spec.applicable == "aarch64 plugin; this machine is x86_64"
    monkeypatch.setattr(unidev_arm64.platform, "machine", lambda: "aarch64")
    assert unidev_arm64.unidev_plugin().applicable is None


def test_library_path_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNIDEV_ARM64_LIBRARY", "/x/libunidev_arm64.so")
    assert unidev_arm64.unidev_plugin().library == "/x/libunidev_arm64.so"
    monkeypatch.delenv("UNIDEV_ARM64_LIBRARY")
    assert unidev_arm64.library_path().endswith("unidev_arm64/libunidev_arm64.so")


def test_toolchain_file_targets_aarch64() -> None:
    text = (HERE / "cmake" / "aarch64-linux-gnu.cmake").read_text()
    settings = dict(re.findall(r"set\((\w+) ([^)\s]+)\)", text))
    assert settings["CMAKE_SYSTEM_NAME"] == "Linux"
    assert settings["CMAKE_SYSTEM_PROCESSOR"] == "aarch64"
    assert settings["CMAKE_C_COMPILER"] == "aarch64-linux-gnu-gcc"
    assert settings["CMAKE_CXX_COMPILER"] == "aarch64-linux-gnu-g++"
    assert settings["CMAKE_FIND_ROOT_PATH_MODE_PROGRAM"] == "NEVER"


def test_cmake_reuses_x86_sources_that_exist() -> None:
    cmake = (HERE / "CMakeLists.txt").read_text()
    assert "neon-i32x4" in cmake and "--arch=aarch64" in cmake
    assert list((X86 / "ispc").glob("*.ispc")), "no ISPC kernels in plugins/x86/ispc"
    for name in re.findall(r"\$\{D\}/(\w+\.cpp)", cmake):
        assert (X86 / "src" / "dense" / name).is_file(), name
    for path in ("src/x86.h", "src/api.c", "src/exports.map", "src/registry.c"):
        assert (X86 / path).is_file(), path
    assert "conv_onednn" not in cmake  # no oneDNN on aarch64
    # nothing of x86's is copied here: every source file of this plugin is its own
    mine = {p.name for p in (HERE / "src").iterdir()}
    assert mine == {"api.c", "x86_api_shim.h"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_are_executable_bash(script: str) -> None:
    path = HERE / "scripts" / script
    assert os.access(path, os.X_OK), f"{path} is not executable"
    assert path.read_text().startswith("#!/bin/bash\n")
    subprocess.run(["bash", "-n", str(path)], check=True)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_native_configure_off_aarch64_builds_nothing(tmp_path: Path) -> None:
    if os.uname().machine == "aarch64":
        pytest.skip("on aarch64 the native configure builds the library")
    done = subprocess.run(["cmake", "-S", str(HERE), "-B", str(tmp_path)], capture_output=True,
                          text=True, check=True)
    assert "the native library is not built" in done.stdout
    built = subprocess.run(["cmake", "--build", str(tmp_path)], capture_output=True, text=True,
                           check=True)
    assert "unidev_arm64" not in built.stdout


@pytest.mark.slow
def test_qemu_conformance() -> None:
    """Cross-builds and proves every tier 0-2 op under qemu-aarch64 (-cpu neoverse-n1)."""
    if os.uname().machine != "x86_64" or shutil.which("apt-get") is None:
        pytest.skip("the emulation recipe is for Debian-family x86-64 hosts")
    done = subprocess.run([str(HERE / "scripts" / "qemu-conformance")], capture_output=True,
                          text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((HERE.parents[1] / "build" / "arm64-qemu" / "report" / "report.json")
                        .read_text())
    assert report["versions"]["platform"] == "Linux aarch64"
    matrix = report["matrix"]
    from unidev.contract import opset

    for op in opset.OPS.values():
        if op.tier <= 2 and "float32" in op.dtypes:
            cell = matrix[op.name]["dtypes"]["float32"]
            assert cell["status"] == "pass" and cell["cases"] > 0, (op.name, cell)


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="needs gcc-aarch64-linux-gnu (scripts/provision installs it)")
def test_entry_point_cross_compiles(tmp_path: Path) -> None:
    """x86's api.c (through the shim) and ours compile for aarch64, warning-free."""
    include = HERE.parent.parent / "unidev" / "contract" / "include"
    common = ["aarch64-linux-gnu-gcc", "-std=c17", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC",
              f"-I{include}", f"-I{X86 / 'src'}", "-c"]
    subprocess.run([*common, "-include", str(HERE / "src" / "x86_api_shim.h"),
                    "-Dunidev_get_api=ud_arm64_x86_api", str(X86 / "src" / "api.c"),
                    "-o", str(tmp_path / "x86_api.o")], check=True)
    subprocess.run([*common, str(HERE / "src" / "api.c"), "-o", str(tmp_path / "api.o")],
                   check=True)
    nm = subprocess.run(["aarch64-linux-gnu-nm", str(tmp_path / "x86_api.o"),
                         str(tmp_path / "api.o")], capture_output=True, text=True, check=True)
    assert re.search(r" T ud_arm64_x86_api$", nm.stdout, re.M)
    assert re.search(r" T unidev_get_api$", nm.stdout, re.M)
