"""Find or provision the ISPC compiler for plugin builds (``python plugins/x86/cmake/ispc.py``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["ensure_ispc", "IspcError", "cache_dir"]

# ISPC is on neither PyPI nor Debian 12; Debian 13's build needs a newer glibc than Debian 12's,
# so it runs through the newer glibc's loader from a private folder, never installed system-wide.
_SUITE = "trixie"
_MIRROR = "http://deb.debian.org/debian"
_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
_LLVM_PACKAGE = "libllvm19"  # the LLVM that Debian 13's ispc links; Debian 12 ships it
# dpkg architecture -> (multiarch triplet, dynamic loader)
_ARCHES = {
    "amd64": ("x86_64-linux-gnu", "ld-linux-x86-64.so.2"),
    "arm64": ("aarch64-linux-gnu", "ld-linux-aarch64.so.1"),
}


class IspcError(RuntimeError):
    """ISPC could not be found or provisioned; the message says why and what to do."""


def cache_dir() -> Path:
    """Where the compiler is provisioned: ``<unidev cache>/ispc``.

    The cache is ``$UNIDEV_CACHE_DIR``, else ``$XDG_CACHE_HOME/unidev``, else ``~/.cache/unidev``
    (the same folder the adapters' build cache uses).
    """
    base = os.environ.get("UNIDEV_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "unidev"
    return Path(base) / "ispc"


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise IspcError(f"ISPC provisioning: {what}: {cmd[0]} not found") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-2000:]
        raise IspcError(f"ISPC provisioning: {what} failed ({' '.join(cmd)}):\n{tail}")
    return done.stdout


def _works(ispc: Path) -> bool:
    try:
        done = subprocess.run([str(ispc), "--version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _host_arch() -> tuple[str, str, str]:
    arch = _run(["dpkg", "--print-architecture"], "reading the host architecture").strip()
    if arch not in _ARCHES:
        raise IspcError(f"ISPC provisioning: host architecture {arch!r} is not supported; "
                        f"expected one of {sorted(_ARCHES)} (or put an ispc on PATH)")
    return (arch, *_ARCHES[arch])


def _apt_options(work: Path) -> list[str]:
    """apt-get options that read a private sources list and keep all state under `work`."""
    sources = work / "sources.list"
    sources.write_text(f"deb [signed-by={_KEYRING}] {_MIRROR} {_SUITE} main\n")
    for sub in ("lists/partial", "cache/archives/partial"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    return ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", f"Dir::State::Lists={work / 'lists'}", "-o", f"Dir::Cache={work / 'cache'}",
            "-o", "APT::Get::List-Cleanup=0"]


def _ensure_llvm(arch: str) -> None:
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", f"{_LLVM_PACKAGE}:{arch}"],
                            capture_output=True, text=True, check=False)
    if status.returncode == 0 and "install ok installed" in status.stdout:
        return
    if os.geteuid() != 0:
        raise IspcError(f"ISPC provisioning: Debian 13's ispc needs {_LLVM_PACKAGE}; run "
                        f"`sudo apt-get install -y {_LLVM_PACKAGE}` once, then build again")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # a fresh machine has no package lists yet: without an update, install finds nothing
    subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, check=False)
    done = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", _LLVM_PACKAGE],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise IspcError(f"ISPC provisioning: apt-get install {_LLVM_PACKAGE} failed:\n"
                        f"{done.stderr.strip()[-2000:]}")


def _provision(root: Path) -> Path:
    """Fetch Debian 13's ispc and glibc into `root` and return the wrapper script's path."""
    for tool in ("apt-get", "dpkg", "dpkg-query"):
        if shutil.which(tool) is None:
            raise IspcError(f"ISPC provisioning needs Debian's apt ({tool} is not on PATH); on "
                            "other systems install ISPC ≥ 1.20 from https://ispc.github.io and "
                            "put `ispc` on PATH")
    arch, triplet, loader = _host_arch()
    _ensure_llvm(arch)
    with tempfile.TemporaryDirectory(prefix="unidev-ispc-") as tmp:
        work = Path(tmp)
        opts = _apt_options(work)
        _run(["apt-get", *opts, "update"], f"apt-get update for Debian {_SUITE}")
        debs = work / "debs"
        debs.mkdir()
        _run(["apt-get", *opts, "download", f"ispc:{arch}", f"libc6:{arch}"],
             f"apt-get download ispc libc6 from Debian {_SUITE}", cwd=debs)
        staged = work / "root"
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg", "-x", str(deb), str(staged)], f"unpacking {deb.name}")
        libdir = staged / "usr" / "lib" / triplet
        if not (staged / "usr" / "bin" / "ispc").exists() or not (libdir / loader).exists():
            raise IspcError(f"ISPC provisioning: the Debian {_SUITE} packages lack usr/bin/ispc "
                            f"or {loader}")
        if root.exists():
            shutil.rmtree(root)
        shutil.move(str(staged), root)
    libdir = root / "usr" / "lib" / triplet
    wrapper = root.parent / "bin" / "ispc"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(
        "#!/bin/sh\n# Debian 13's ispc through its own glibc loader (plugins/x86/cmake/ispc.py)\n"
        f'exec "{libdir / loader}" --library-path "{libdir}:/usr/lib/{triplet}" '
        f'"{root / "usr" / "bin" / "ispc"}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def ensure_ispc() -> str:
    """Path of an ISPC compiler: ``$UNIDEV_ISPC``, ``ispc`` on PATH, or a provisioned one.

    Provisioning runs once and is cached under :func:`cache_dir`; concurrent callers wait for
    each other. Raises :class:`IspcError` with the reason and a remedy when it cannot.
    """
    forced = os.environ.get("UNIDEV_ISPC")
    if forced:
        if not _works(Path(forced)):
            raise IspcError(f"UNIDEV_ISPC={forced!r} does not run `--version`")
        return forced
    on_path = shutil.which("ispc")
    if on_path:
        return on_path
    cache = cache_dir()
    wrapper = cache / "bin" / "ispc"
    if _works(wrapper):
        return str(wrapper)
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _works(wrapper):  # another process may have finished while we waited
            with contextlib.suppress(FileNotFoundError):
                wrapper.unlink()
            wrapper = _provision(cache / "root")
            if not _works(wrapper):
                raise IspcError(f"ISPC provisioning: {wrapper} was installed but does not run; "
                                f"try `{wrapper} --version`")
    return str(wrapper)


def main() -> int:
    try:
        print(ensure_ispc())
    except IspcError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
