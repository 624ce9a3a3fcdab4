"""The conformance suite catches the bug classes it claims to: seeded into a copy of the x86
plugin's sources, each bug (mutant) must fail the suite, and the unmutated copy must pass it.

Slow (one full build of the copy, ~2 minutes on 2 cores, then an incremental rebuild and a
targeted conformance run per mutant). Run it with

    .venv/bin/python -m pytest tests/conformance/test_mutation.py -m slow -v

The real plugin sources are never touched: plugins/x86 is copied into a temporary folder, each
mutant patches one file of the copy, rebuilds, and is run through `unidev conformance x86` with
UNIDEV_X86_LIBRARY pointing at the mutant's library.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
X86 = ROOT / "plugins" / "x86"


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to plugins/x86
    old: str  # must occur exactly once in the file
    new: str
    ops: str  # what conformance runs
    groups: str
    killed_by: tuple[str, ...]  # case ids, one of which must fail (substring of a failure)


MUTANTS = [
    # wrong NaN handling: maximum(nan, y) gives y
    Mutant("nan", "ispc/elementwise.def", "(x > y || x != x) ? x : y", "(x > y) ? x : y",
           "maximum", "kernels", ("case 'specials'",)),
    # off by one at a tile boundary: a full packed tile loses its last element on the way out
    Mutant("tile", "src/elementwise.c",
           "  if (os != 1) ud_x86_unpack[P->size[0]](n, ptr[0], tiles[0], os);",
           "  if (os != 1) ud_x86_unpack[P->size[0]](n - (n == UD_TILE), ptr[0], tiles[0], os);",
           "add", "kernels", ("case 'boundary-out-gapped'",)),
    # off by one at a thread-chunk boundary: every chunk but the last stops one element short
    Mutant("chunk", "src/threads.c", "fn(ctx, at, at + chunk < n ? at + chunk : n)",
           "fn(ctx, at, at + chunk < n ? at + chunk - 1 : n)", "add", "kernels",
           ("case '(131075,)'",)),
    # ignoring the input stride: pooling assumes a unit inner stride of x
    Mutant("input-stride", "src/pool2d.c", "g->xs[j] = P.x->strides[2 + j];",
           "g->xs[j] = j ? 1 : P.x->strides[2];", "max_pool2d", "kernels",
           ("case 'src-transposed'", "case 'src-gapped'", "case 'src-stride0-inner-x'")),
    # ignoring the output stride: pooling writes y as if its inner stride were 1
    Mutant("output-stride", "src/pool2d.c", "g->ys[j] = P.y->strides[2 + j];",
           "g->ys[j] = j ? 1 : P.y->strides[2];", "max_pool2d", "kernels",
           ("case 'out-transposed'", "case 'out-gapped'")),
    # ignoring the output offset: pooling writes y from the start of its allocation
    Mutant("output-offset", "src/pool2d.c",
           "char *x = part(P, P->x, p), *y = part(P, P->y, p);",
           "char *x = part(P, P->x, p), *y = part(P, P->y, p) - P->y->byte_offset;",
           "max_pool2d", "kernels", ("case 'out-shifted'",)),
    # accepting an out-of-range index: max_pool2d_backward drops the check's verdict
    Mutant("index", "src/pool2d.c", "UD_KIT_REQUIRE(!atomic_load(&P.any_bad)",
           "UD_KIT_REQUIRE(1 || !atomic_load(&P.any_bad)", "max_pool2d_backward", "bad_inputs",
           ("values/max_pool2d_backward[float32]-indices[-1]=-1",)),
    # accepting a fill value the dtype cannot hold (an int32 fill of nan)
    Mutant("fill-value", "src/memory.c", "UD_KIT_TRY(ud_kit_check_scalars(op, a, y->dtype));",
           "(void)0;", "fill", "bad_inputs",
           ("values/fill[int32]-value=nan",)),
    # tie-breaking wrong in argmax: the last maximum wins
    Mutant("argmax-ties", "ispc/reduce.ispc", "#define UD_ARGMAX_BEATS(v, b) ((v) > (b) ||",
           "#define UD_ARGMAX_BEATS(v, b) ((v) >= (b) ||", "argmax", "kernels",
           ("case 'ties-rows'",)),
]


def _applicable() -> str | None:
    if platform.machine() not in ("x86_64", "AMD64"):
        return "the x86 plugin builds and runs on x86-64 only"
    if not (X86 / "CMakeLists.txt").is_file():
        return "plugins/x86 sources are not in this checkout"
    if shutil.which("cmake") is None:
        return "cmake is needed to build a copy of the x86 plugin"
    try:
        if " avx2" not in Path("/proc/cpuinfo").read_text():
            return "the x86 plugin needs AVX2"
    except OSError:
        pass
    return None


class Copy:
    """A build of a copy of plugins/x86 in a temporary folder; mutants rebuild it in place."""

    def __init__(self, root: Path) -> None:
        self.src, self.build, self.libs = root / "src", root / "build", root / "libs"
        shutil.copytree(X86, self.src, ignore=shutil.ignore_patterns(
            "build", "tests", "__pycache__", "*.so", "*.egg-info"))
        self.libs.mkdir()
        gen = ["-G", "Ninja"] if shutil.which("ninja") or Path(sys.executable).with_name(
            "ninja").exists() else []
        ninja = shutil.which("ninja") or str(Path(sys.executable).with_name("ninja"))
        cfg = ["cmake", "-S", str(self.src), "-B", str(self.build), *gen,
               f"-DPython_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release",
               # the copy is outside the checkout: point it at this checkout's contract
               f"-Dunidev_DIR={ROOT / 'unidev' / 'contract' / 'cmake'}"]
        if gen:
            cfg.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")
        out = subprocess.run(cfg, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            pytest.skip(f"the x86 plugin's copy does not configure here: {out.stderr[-1500:]}")

    def library(self, name: str) -> Path:
        """Build the copy as it is now; returns a copy of its library named after `name`."""
        out = subprocess.run(["cmake", "--build", str(self.build)], capture_output=True,
                             text=True, timeout=1200)
        assert out.returncode == 0, f"{name}: build failed:\n{out.stdout[-3000:]}{out.stderr}"
        lib = self.libs / name / "libunidev_x86.so"
        lib.parent.mkdir()
        shutil.copy2(self.build / "libunidev_x86.so", lib)
        return lib

    def mutant(self, m: Mutant) -> Path:
        path = self.src / m.file
        text = path.read_text()
        assert text.count(m.old) == 1, (
            f"mutant {m.name}: {m.file} no longer holds {m.old!r} exactly once; update the "
            "mutant to the plugin's current source")
        path.write_text(text.replace(m.old, m.new))
        try:
            return self.library(m.name)
        finally:
            path.write_text(text)


def _conformance(lib: Path, ops: str, groups: str, report: Path) -> dict:
    env = dict(os.environ, UNIDEV_X86_LIBRARY=str(lib), UNIDEV_PLUGINS="x86")
    out = subprocess.run([sys.executable, "-m", "unidev", "conformance", "x86", "--ops", ops,
                          "--groups", groups, "--report", str(report), "--quiet"],
                         capture_output=True, text=True, env=env, cwd=report.parent,
                         timeout=900)
    assert (report / "report.json").is_file(), out.stdout[-3000:] + out.stderr[-3000:]
    data = json.loads((report / "report.json").read_text())
    data["returncode"] = out.returncode
    return data


@pytest.fixture(scope="module")
def x86_copy(tmp_path_factory) -> Copy:
    why = _applicable()
    if why:
        pytest.skip(why)
    return Copy(tmp_path_factory.mktemp("x86-mutants"))


@pytest.mark.slow
def test_unmutated_copy_passes(x86_copy, tmp_path) -> None:
    lib = x86_copy.library("unmutated")
    ops = ",".join(sorted({m.ops for m in MUTANTS}))
    data = _conformance(lib, ops, "kernels,bad_inputs", tmp_path / "report")
    assert data["totals"]["failed"] == 0, [f["message"] for f in data["failures"]][:10]
    assert data["returncode"] == 0
    assert data["groups"]["kernels"]["passed"] > 300


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_killed(x86_copy, mutant, tmp_path) -> None:
    if mutant.name == "chunk" and (os.cpu_count() or 1) < 2:
        pytest.skip("the x86 plugin splits work over threads only with 2 or more cores")
    lib = x86_copy.mutant(mutant)
    data = _conformance(lib, mutant.ops, mutant.groups, tmp_path / "report")
    msgs = [f["message"] for f in data["failures"]]
    assert data["returncode"] == 1 and msgs, f"mutant {mutant.name} survived the suite"
    assert any(k in m for m in msgs for k in mutant.killed_by), (
        f"mutant {mutant.name} failed, but not in the cases meant to catch it "
        f"{mutant.killed_by}: {msgs[:5]}")


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_still_applies(mutant) -> None:
    """Fast: each seeded bug's text is still in the plugin's source exactly once (a stale mutant
    would only fail in the slow run, after the source it targets was rewritten)."""
    assert (X86 / mutant.file).read_text().count(mutant.old) == 1, (
        f"mutant {mutant.name}: update it to {mutant.file}'s current source")
