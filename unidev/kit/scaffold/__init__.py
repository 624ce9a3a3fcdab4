"""`unidev new-plugin`: writes a plugin package from the templates beside this module."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

__all__ = ["write", "write_sources", "TEMPLATES", "SOURCES"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# template path -> path in the package ("pkg" becomes the import package)
# (.in: no tool mistakes a template for a project file or a source to compile)
_LAYOUT = {
    "pyproject.toml.in": "pyproject.toml",
    "CMakeLists.txt": "CMakeLists.txt",
    "README.md": "README.md",
    "pkg/__init__.py": "unidev_{name}/__init__.py",
    "src/plugin.h.in": "src/plugin.h",
    "src/plugin.c.in": "src/plugin.c",
    "src/memory.c.in": "src/memory.c",
    "src/kernels.c.in": "src/kernels.c",
    "tests/test_conformance.py": "tests/test_conformance.py",
}
SOURCES = ("src/plugin.c", "src/memory.c", "src/kernels.c")


def write(name: str, parent: Path, force: bool = False) -> Path:
    """Write the package ``unidev-NAME`` into `parent`; returns its folder."""
    if not _NAME.match(name):
        raise ValueError(f"plugin name {name!r} must match [a-z][a-z0-9_]* (it becomes the "
                         "device name, a Python package and C identifiers)")
    from ...contract.spec import PluginSpec

    PluginSpec(name=name, library="")  # refuses names that clash with torch's devices
    root = Path(parent) / f"unidev-{name}"
    if root.exists():
        if not force:
            raise FileExistsError(f"{root} exists (use --force to overwrite)")
        shutil.rmtree(root)
    _render(name, root, _LAYOUT)
    return root


def write_sources(name: str, folder: Path) -> Path:
    """Write only the C sources (src/*.c, src/plugin.h) for `name` into `folder`/src; returns it.

    For builds that are not a package (unidev's own test plugin compiles them with extra
    kernels); `name` is not checked against the device names torch reserves.
    """
    if not _NAME.match(name):
        raise ValueError(f"plugin name {name!r} must match [a-z][a-z0-9_]*")
    _render(name, Path(folder), {k: v for k, v in _LAYOUT.items() if k.startswith("src/")})
    return Path(folder) / "src"


def _render(name: str, root: Path, layout: dict[str, str]) -> None:
    for src, dst in layout.items():
        text = (TEMPLATES / src).read_text()
        text = text.replace("{{name}}", name).replace("{{NAME}}", name.upper())
        out = root / dst.format(name=name)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
