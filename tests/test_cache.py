"""The private build cache: SHA-256 recorded and verified, nothing others could write is used."""

from __future__ import annotations

import json
import os
import stat
import warnings

import pytest

from unidev.core import cache as _cache

FW, VER, NAME, DIGEST, ART = "torch", "9.9", "adapter", "0123456789abcdef", "adapter.so"
NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("UNIDEV_CACHE_DIR", str(root))
    return root


def _build(payload: bytes = b"\x7fELF built") -> os.PathLike:
    folder = _cache.build_dir(FW, VER, NAME, DIGEST)
    (folder / ART).write_bytes(payload)
    return _cache.commit(folder, FW, VER, DIGEST, ART)


def _lookup():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        found = _cache.lookup(FW, VER, NAME, DIGEST, ART)
    return found, " ".join(str(w.message) for w in seen)


def test_commit_records_sha256_and_lookup_verifies_it(cache):
    target = _build()
    manifest = json.loads((target.parent / "manifest.json").read_text())
    assert manifest["sha256"] == _cache.file_sha256(target)
    assert _lookup() == (target, "")


def test_replaced_artifact_is_refused_and_rebuilt(cache):
    target = _build()
    target.write_bytes(b"\x7fELF poisoned")  # same owner and mode: only the hash can tell
    found, why = _lookup()
    assert found is None and "SHA-256" in why and "rebuilt" in why
    rebuilt = _build(b"\x7fELF rebuilt")
    assert _lookup() == (rebuilt, "")


def test_manifest_without_hash_is_not_trusted(cache):
    target = _build()
    manifest = target.parent / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["sha256"]
    manifest.write_text(json.dumps(data))
    assert _lookup() == (None, "")


@pytest.mark.parametrize("which", ["version folder", "build folder", "manifest", "artifact"])
@pytest.mark.parametrize("bit", [stat.S_IWGRP, stat.S_IWOTH], ids=["group", "others"])
def test_writable_by_others_is_refused(cache, which, bit):
    target = _build()
    path = {"version folder": target.parent.parent, "build folder": target.parent,
            "manifest": target.parent / "manifest.json", "artifact": target}[which]
    os.chmod(path, stat.S_IMODE(os.stat(path).st_mode) | bit)
    found, why = _lookup()
    assert found is None and "writable by" in why and str(path) in why


@as_root
@pytest.mark.parametrize("which", ["build folder", "manifest", "artifact"])
def test_owned_by_another_user_is_refused(cache, which):
    target = _build()
    path = {"build folder": target.parent, "manifest": target.parent / "manifest.json",
            "artifact": target}[which]
    os.chown(path, NOBODY, NOBODY)
    found, why = _lookup()
    assert found is None and f"uid {NOBODY}" in why


def test_symlinked_artifact_is_refused(cache, tmp_path):
    target = _build()
    elsewhere = tmp_path / "elsewhere.so"
    elsewhere.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(elsewhere)  # the manifest's hash still matches the bytes behind the link
    found, why = _lookup()
    assert found is None and "symbolic link" in why


def test_build_dir_replaces_an_untrusted_folder(cache):
    target = _build()
    folder = target.parent
    os.chmod(folder, 0o777)
    (folder / "planted.txt").write_text("from someone else")
    with pytest.warns(RuntimeWarning, match="replacing it"):
        fresh = _cache.build_dir(FW, VER, NAME, DIGEST)
    assert fresh == folder and sorted(p.name for p in fresh.iterdir()) == []
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o700
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".untrusted-")]


def test_every_level_is_created_private_whatever_the_umask(cache):
    old = os.umask(0o002)
    try:
        target = _build()
    finally:
        os.umask(old)
    for path in (cache / f"{FW}-{VER}", target.parent, target, target.parent / "manifest.json"):
        assert not os.stat(path).st_mode & (stat.S_IWGRP | stat.S_IWOTH), path
    assert _lookup() == (target, "")


def test_cache_root_writable_by_others_is_refused(cache):
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)
    with pytest.raises(PermissionError, match="writable by others"):
        _cache.cache_root()


@as_root
def test_private_files_from_another_user_are_refused(cache):
    folder = _cache.private_dir("verdicts")
    entry = folder / "v.json"
    _cache.write_private(entry, b"{}")
    assert _cache.read_private(entry) == b"{}"
    os.chown(entry, NOBODY, NOBODY)
    with pytest.raises(_cache.UntrustedCacheError, match=f"uid {NOBODY}"):
        _cache.read_private(entry)
    os.chown(entry, 0, 0)
    os.chmod(entry, 0o622)
    with pytest.raises(_cache.UntrustedCacheError, match="writable by"):
        _cache.read_private(entry)
