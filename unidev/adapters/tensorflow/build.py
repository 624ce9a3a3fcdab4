"""Build, cache and install one TF PluggableDevice library per usable unidev plugin."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ...core import cache as _cache
from ...core import discovery
from ...kit import include_dir
from . import ops

__all__ = ["TfInstall", "tf_install", "plugin_dir", "build", "build_plugin", "build_varops",
           "library_name", "VAROPS_NAME"]

CSRC = Path(__file__).resolve().parent / "csrc"
PREFIX = "libunidev_tf_"
VAROPS_NAME = "libunidev_tf_varops.so"
# TF's own compile flags (tf.sysconfig.get_compile_flags() for the pip wheels), read without
# importing TensorFlow so a build never loads the libraries it is about to replace.
TF_FLAGS = ["-D_GLIBCXX_USE_CXX11_ABI=1", "-DEIGEN_MAX_ALIGN_BYTES=64"]


@dataclass(frozen=True)
class TfInstall:
    root: Path  # the tensorflow package folder
    version: str

    @property
    def include(self) -> Path:
        return self.root / "include"

    @property
    def framework(self) -> Path:
        return self.root / "libtensorflow_framework.so.2"


def tf_install() -> TfInstall | None:
    """The installed TensorFlow (found without importing it), or None."""
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    for dist in ("tensorflow-cpu", "tensorflow", "tf-nightly", "tensorflow-intel"):
        try:
            return TfInstall(root, importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def plugin_dir(tf: TfInstall) -> Path:
    """Where TF autoloads PluggableDevices at import: ``<site-packages>/tensorflow-plugins``,
    or ``$UNIDEV_TF_PLUGIN_DIR`` (then point TF_PLUGGABLE_DEVICE_LIBRARY_PATH at it)."""
    override = os.environ.get("UNIDEV_TF_PLUGIN_DIR")
    return Path(override) if override else tf.root.parent / "tensorflow-plugins"


def library_name(plugin: str) -> str:
    return f"{PREFIX}{plugin}.so"


def _compile(sources: list[Path], out: Path, flags: list[str], tf: TfInstall,
             libs: tuple[str, ...] = ()) -> None:
    """Each source to an object beside `out`, in parallel (~2 s a file), then one link."""
    cxx = os.environ.get("CXX", "g++")
    base = [cxx, "-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", *TF_FLAGS,
            f"-I{tf.include}", f"-I{include_dir()}", f"-I{out.parent}", *flags]
    objs = [out.parent / f"{src.stem}.o" for src in sources]
    cmds = [base + ["-c", str(src), "-o", str(obj)] for src, obj in zip(sources, objs, strict=True)]
    cmds.append([cxx, "-shared", *map(str, objs), f"-L{tf.root}",
                 "-l:libtensorflow_framework.so.2", *libs, f"-Wl,-rpath,{tf.root}", "-o",
                 str(out)])

    def run(cmd: list[str]) -> None:
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"building {out.name} failed:\n{' '.join(cmd)}\n"
                               f"{res.stderr[-4000:]}")

    with ThreadPoolExecutor(max_workers=max(1, min(len(sources), os.cpu_count() or 1))) as pool:
        list(pool.map(run, cmds[:-1]))
    run(cmds[-1])


def _cached(tf: TfInstall, name: str, sources: list[Path], extra: str, artifact: str,
            make) -> Path:
    headers = [Path(include_dir()) / "unidev" / h for h in ("unidev.h", "ops.h", "loader.h")]
    digest = _cache.source_hash(sources + headers,
                                extra=extra + " ".join(TF_FLAGS))
    hit = _cache.lookup("tensorflow", tf.version, name, digest, artifact)
    if hit is not None:
        return hit
    folder = _cache.build_dir("tensorflow", tf.version, name, digest)
    make(folder / artifact)
    return _cache.commit(folder, "tensorflow", tf.version, digest, artifact)


def build_varops(tf: TfInstall) -> Path:
    """The C++ variable-update op library (one per TF version, shared by every plugin)."""
    sources = [CSRC / "varops.cc", CSRC / "bridge.h"]
    return _cached(tf, "varops", sources, "", VAROPS_NAME,
                   lambda out: _compile([CSRC / "varops.cc"], out, [], tf))


def _plugin_key(tf: TfInstall, rec: discovery.PluginRecord):
    spec = rec.spec
    assert spec is not None
    # No paths: the plugin's library is resolved through discovery when TF loads the adapter,
    # the variable-op library is the one installed beside it.
    defines = {"UDTF_TYPE": spec.tf_type, "UDTF_PLUGIN": rec.name,
               "UDTF_VAROPS_NAME": VAROPS_NAME, "UDTF_TF_VERSION": tf.version}
    sources = sorted(p for p in CSRC.iterdir() if p.name != "varops.cc")
    return sources, defines, ops.generate()


def build_plugin(tf: TfInstall, rec: discovery.PluginRecord,
                 cached_only: bool = False) -> Path | None:
    """The PluggableDevice library for one plugin (its name and device type compiled in);
    with `cached_only`, the cached build or None."""
    sources, defines, table = _plugin_key(tf, rec)
    flags = [f'-D{k}="{v}"' for k, v in defines.items()]

    def make(out: Path) -> None:
        if cached_only:
            raise LookupError
        (out.parent / "optable.inc").write_text(table)
        # libtensorflow_cc has the C API's op definitions (TF_GraphGetOpDef, opdef.cc)
        _compile(sorted(p for p in CSRC.glob("*.cc") if p.name != "varops.cc"), out, flags, tf,
                 ("-l:libtensorflow_cc.so.2",))

    try:
        return _cached(tf, rec.name, sources, table + repr(sorted(defines.items())),
                       library_name(rec.name), make)
    except LookupError:
        return None


def _install(src: Path, dst: Path) -> None:
    """Atomic copy, so a TF starting meanwhile never sees half a library."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=".unidev-", suffix=".tmp")
    os.close(fd)
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, dst)


def _install_hooks(tf: TfInstall, types: set[str]) -> list[str]:
    """startup_hooks.py as ``<site-packages>/_unidev_tf_hooks.py`` plus the .pth importing it."""
    site = tf.root.parent
    module, pth = site / "_unidev_tf_hooks.py", site / "unidev_tf_hooks.pth"
    for old in (site / "_unidev_tf_keras.py", site / "unidev_tf_keras.pth"):  # its former name
        old.unlink(missing_ok=True)
    if not types:
        for f in (module, pth):
            f.unlink(missing_ok=True)
        return []
    src = (Path(__file__).parent / "startup_hooks.py").read_text().replace(
        "TYPES: frozenset = frozenset()", f"TYPES: frozenset = frozenset({sorted(types)!r})")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "m.py").write_text(src)
        (Path(tmp) / "p.pth").write_text("import _unidev_tf_hooks\n")
        _install(Path(tmp) / "m.py", module)
        _install(Path(tmp) / "p.pth", pth)
    return [f"tensorflow: Keras jit_compile and memory-growth hooks -> {pth}"]


def build(install: bool = True) -> list[str]:
    """Build (or reuse from the cache) and install the TF libraries of every usable plugin.

    A plugin is validated in Python first — it loads, its ABI matches and it has devices — so TF
    never receives an adapter for a plugin that would fail. Libraries of plugins that are no
    longer usable are removed from the plugin folder. Returns one message per action.
    """
    tf = tf_install()
    if tf is None:
        return ["tensorflow: not installed (pip install tensorflow-cpu==2.21.0); nothing built"]
    if not tf.include.is_dir() or not tf.framework.exists():
        return [f"tensorflow {tf.version}: no C headers or framework library under {tf.root}"]
    target = plugin_dir(tf)
    msgs: list[str] = []
    try:
        varops = build_varops(tf)
        if install:
            _install(varops, target / "unidev" / VAROPS_NAME)
    except Exception as exc:  # the devices still work; variable updates fall back to TF's
        msgs.append(f"tensorflow: variable-op library not built: {exc}")
    wanted, types = set(), set()
    for rec in discovery.discover():
        if not rec.usable or rec.spec is None:
            msgs.append(f"tensorflow: skipped plugin {rec.name}: {rec.status} ({rec.error})")
            continue
        try:
            lib = build_plugin(tf, rec)
        except Exception as exc:  # keep what is installed: a failed rebuild is no uninstall
            wanted.add(library_name(rec.name))
            types.add(rec.spec.tf_type)
            msgs.append(f"tensorflow: plugin {rec.name} failed to build (an installed library "
                        f"stays): {exc}")
            continue
        wanted.add(library_name(rec.name))
        types.add(rec.spec.tf_type)
        if install:
            _install(lib, target / library_name(rec.name))
            msgs.append(f"tensorflow: {rec.spec.tf_type} ({rec.name}) -> "
                        f"{target / library_name(rec.name)}")
        else:
            msgs.append(f"tensorflow: {rec.spec.tf_type} ({rec.name}) built: {lib}")
    if install:
        msgs += _install_hooks(tf, types)
    if install and target.is_dir():
        for stale in target.glob(f"{PREFIX}*.so"):
            if stale.name not in wanted:
                stale.unlink()
                msgs.append(f"tensorflow: removed {stale} (its plugin is gone or unusable)")
    return msgs
