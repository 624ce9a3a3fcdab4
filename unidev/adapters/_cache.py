"""Private, verified build cache for adapter libraries compiled on the user's machine.

A build lives in ``<cache>/<framework>-<framework version>/<name>-<source hash>/`` with a
``manifest.json`` recording the framework version and the source hash. The cache root is created
with mode 0700 and must be owned by the user (another user's or a world-writable folder is
refused), and a cached library is used only if its manifest matches what is being asked for.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["cache_root", "source_hash", "build_dir", "lookup", "commit"]


def cache_root() -> Path:
    """``$UNIDEV_CACHE_DIR``, ``$XDG_CACHE_HOME/unidev`` or ``~/.cache/unidev``, checked private."""
    root = os.environ.get("UNIDEV_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "unidev")
    path = Path(root)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise PermissionError(f"unidev cache {path} belongs to uid {st.st_uid}, not to you; set "
                              "UNIDEV_CACHE_DIR to a folder of your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(f"unidev cache {path} is writable by others; chmod 700 it or set "
                              "UNIDEV_CACHE_DIR")
    return path


def source_hash(paths: Iterable[str | os.PathLike], extra: str = "") -> str:
    """sha256 over the files' names and contents (sorted) and `extra` (flags, plugin name)."""
    h = hashlib.sha256(extra.encode())
    for p in sorted(Path(p) for p in paths):
        h.update(p.name.encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build_dir(framework: str, version: str, name: str, digest: str) -> Path:
    """The folder for one build (created, private)."""
    path = cache_root() / f"{framework}-{version}" / f"{name}-{digest}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def lookup(framework: str, version: str, name: str, digest: str, artifact: str) -> Path | None:
    """The cached artifact if its manifest matches (framework version, source hash), else None."""
    folder = cache_root() / f"{framework}-{version}" / f"{name}-{digest}"
    manifest = folder / "manifest.json"
    target = folder / artifact
    if not (manifest.exists() and target.exists()):
        return None
    try:
        data = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return None
    if data.get("framework_version") != version or data.get("source_hash") != digest:
        return None
    if data.get("artifact") != artifact or target.stat().st_uid != os.getuid():
        return None
    return target


def commit(folder: Path, framework: str, version: str, digest: str, artifact: str) -> Path:
    """Record a finished build (atomically) so lookup() accepts it."""
    data = {"framework": framework, "framework_version": version, "source_hash": digest,
            "artifact": artifact}
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".manifest")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, folder / "manifest.json")
    return folder / artifact
