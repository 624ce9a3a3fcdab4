"""Private, verified cache for what unidev builds or learns on the user's machine.

A build lives in ``<cache>/<framework>-<framework version>/<name>-<source hash>/`` with a
``manifest.json`` recording the framework version, the source hash and the artifact's SHA-256.
Every component from the cache root down (folders, manifest, artifact) must be owned by the user
and writable by nobody else; the cache root may be a symlink, nothing below it may. A cached
library is used only if all of that holds, its manifest matches what is being asked for and its
bytes still hash to what the manifest recorded; otherwise lookup() says "not cached" and the
caller rebuilds. build_dir() moves a folder that fails the checks out of the way rather than
building into it. Plugin-probe verdicts (unidev.core.discovery) live under the same root.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path

__all__ = ["cache_root", "source_hash", "build_dir", "lookup", "commit", "file_sha256",
           "check_private", "private_dir", "read_private", "write_private", "UntrustedCacheError"]

_MANIFEST = "manifest.json"


class UntrustedCacheError(PermissionError):
    """A cache entry that someone other than the user could have written."""


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
        raise UntrustedCacheError(f"unidev cache {path} belongs to uid {st.st_uid}, not to you; "
                                  "set UNIDEV_CACHE_DIR to a folder of your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedCacheError(f"unidev cache {path} is writable by others; chmod 700 it or "
                                  "set UNIDEV_CACHE_DIR")
    return path


def _why_untrusted(st: os.stat_result, path: Path) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not to you"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "others" if st.st_mode & stat.S_IWOTH else "its group"
        return f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def check_private(path: Path, root: Path | None = None) -> None:
    """Raise UntrustedCacheError unless every component from below `root` down to `path` exists,
    is no symlink, is owned by the user and is writable by nobody else (root: cache_root())."""
    root = cache_root() if root is None else root
    rel = Path(path).relative_to(root)
    current = root
    for part in rel.parts:
        current = current / part
        why = _why_untrusted(os.lstat(current), current)
        if why:
            raise UntrustedCacheError(f"unidev cache: {why}")


def _quarantine(path: Path) -> None:
    """Move an untrusted entry aside (renaming needs only the parent, which is ours) and try to
    delete it; it is never used again either way."""
    aside = path.with_name(f".untrusted-{path.name}-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:  # another process moved it first
        return
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(aside)


def private_dir(*parts: str) -> Path:
    """``cache_root()/parts...``, every level created 0700 (mkdir -p would use the umask) and
    checked; a level that fails the checks is moved aside and created afresh."""
    current = cache_root()
    for part in parts:
        current = current / part
        try:
            why = _why_untrusted(os.lstat(current), current)
        except FileNotFoundError:
            why = None
        if why:
            warnings.warn(f"unidev cache: not using {current}: {why}; replacing it",
                          RuntimeWarning, stacklevel=2)
            _quarantine(current)
        try:
            os.mkdir(current, 0o700)
            os.chmod(current, 0o700)  # whatever the umask took away
        except FileExistsError:
            pass
        check_private(current, current.parent)
    return current


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_private(path: Path) -> bytes | None:
    """The file's bytes if it and every folder above it (to the cache root) pass check_private;
    None if it is missing; UntrustedCacheError if it fails the checks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink
        raise UntrustedCacheError(f"unidev cache: {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        why = _why_untrusted(os.fstat(f.fileno()), path)
        if why:
            raise UntrustedCacheError(f"unidev cache: {why}")
        check_private(path.parent)
        return f.read()


def write_private(path: Path, data: bytes) -> None:
    """Replace `path` atomically with a 0600 file holding `data`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def source_hash(paths: Iterable[str | os.PathLike], extra: str = "") -> str:
    """sha256 over the files' names and contents (sorted) and `extra` (flags, plugin name)."""
    h = hashlib.sha256(extra.encode())
    for p in sorted(Path(p) for p in paths):
        h.update(p.name.encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build_dir(framework: str, version: str, name: str, digest: str) -> Path:
    """The folder for one build (created private; an untrusted one is replaced)."""
    return private_dir(f"{framework}-{version}", f"{name}-{digest}")


def lookup(framework: str, version: str, name: str, digest: str, artifact: str) -> Path | None:
    """The cached artifact if every component is private, the manifest matches (framework
    version, source hash, artifact) and the artifact's SHA-256 is the recorded one, else None.
    A refusal for any reason other than "not built yet" is reported as a RuntimeWarning."""
    root = cache_root()
    folder = root / f"{framework}-{version}" / f"{name}-{digest}"
    target = folder / artifact
    try:
        raw = read_private(folder / _MANIFEST)
        if raw is None or not os.path.lexists(target):
            return None
        check_private(target, root)
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("manifest is not an object")
    except (UntrustedCacheError, ValueError, OSError) as exc:
        warnings.warn(f"unidev: not loading the cached {artifact}: {exc}; it will be rebuilt",
                      RuntimeWarning, stacklevel=2)
        return None
    if (data.get("framework_version") != version or data.get("source_hash") != digest
            or data.get("artifact") != artifact):
        return None
    recorded = data.get("sha256")
    if recorded is None:  # written before artifacts were hashed: rebuild once
        return None
    actual = file_sha256(target)
    if actual != recorded:
        warnings.warn(f"unidev: not loading the cached {target}: its SHA-256 {actual[:16]}... is "
                      f"not the {str(recorded)[:16]}... recorded when it was built (replaced "
                      "since); it will be rebuilt", RuntimeWarning, stacklevel=2)
        return None
    return target


def commit(folder: Path, framework: str, version: str, digest: str, artifact: str) -> Path:
    """Record a finished build (atomically, with the artifact's SHA-256) so lookup() accepts it;
    the artifact's group and other write bits are cleared first (a umask of 002 sets them)."""
    target = folder / artifact
    st = os.lstat(target)
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedCacheError(f"unidev cache: built artifact {target} is not a regular file")
    os.chmod(target, stat.S_IMODE(st.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
    data = {"framework": framework, "framework_version": version, "source_hash": digest,
            "artifact": artifact, "sha256": file_sha256(target)}
    write_private(folder / _MANIFEST, json.dumps(data).encode())
    return target
