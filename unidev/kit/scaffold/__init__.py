"""`unidev new-plugin`: writes a plugin package from the templates beside this module."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

__all__ = ["write", "TEMPLATES"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# template path -> path in the package ("pkg" becomes the import package)
_LAYOUT = {
    "pyproject.toml.in": "pyproject.toml",  # .in: no tool mistakes it for a project file
    "CMakeLists.txt": "CMakeLists.txt",
    "README.md": "README.md",
    "pkg/__init__.py": "unidev_{name}/__init__.py",
    "src/plugin.h": "src/plugin.h",
    "src/plugin.c": "src/plugin.c",
    "src/memory.c": "src/memory.c",
    "src/kernels.c": "src/kernels.c",
    "tests/test_conformance.py": "tests/test_conformance.py",
}


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
    for src, dst in _LAYOUT.items():
        text = (TEMPLATES / src).read_text()
        text = text.replace("{{name}}", name).replace("{{NAME}}", name.upper())
        out = root / dst.format(name=name)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return root
