"""Plugin discovery: entry point group ``unidev``, allowlist, and a record of every failure."""

from __future__ import annotations

import os
import sys
import threading
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginLoadError
from .spec import PluginSpec

__all__ = ["PluginRecord", "discover", "get", "load", "register", "reset", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "unidev"
OK, BROKEN, NOT_APPLICABLE, NO_DEVICES = "ok", "broken", "not applicable", "no devices"


@dataclass
class PluginRecord:
    """What discovery learned about one plugin; `error` holds the real cause of any failure."""

    name: str
    source: str  # "entry point <dist> <version>" or "registered"
    spec: PluginSpec | None = None
    status: str = BROKEN
    error: str | None = None
    devices: int = 0
    library: Any = None  # unidev._C.Library once loaded
    abi: tuple[int, int] | None = None
    extra: dict = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.status == OK


_lock = threading.Lock()
_records: dict[str, PluginRecord] | None = None
_registered: list[tuple[str, object]] = []


def register(plugin: object, name: str | None = None) -> None:
    """Register a plugin object or module directly (for tests and embedding), then rediscover."""
    _registered.append((name or getattr(plugin, "__name__", repr(plugin)), plugin))
    reset()


def reset() -> None:
    """Forget what was discovered; the next call discovers again (libraries stay loaded)."""
    global _records
    with _lock:
        _records = None


def _describe(module: object) -> PluginSpec:
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    pm.register(module)
    pm.check_pending()
    spec = pm.hook.unidev_plugin()
    if not isinstance(spec, PluginSpec):
        raise TypeError(f"unidev_plugin() returned {type(spec).__name__}, expected "
                        "unidev.plugins.PluginSpec")
    return spec


def _short_error(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _load_library(rec: PluginRecord) -> None:
    from .. import _C  # native; imported lazily so a broken build never breaks `import unidev`

    spec = rec.spec
    assert spec is not None
    if spec.applicable:
        rec.status, rec.error = NOT_APPLICABLE, spec.applicable
        return
    if not os.path.exists(spec.library):
        rec.status, rec.error = BROKEN, f"native library not found: {spec.library}"
        return
    try:
        lib = _C.Library(spec.library)
    except Exception as exc:  # any loader failure is recorded, never raised
        rec.status, rec.error = BROKEN, f"{type(exc).__name__}: {exc}"
        return
    rec.library, rec.abi = lib, tuple(lib.abi)
    try:
        count, reason = lib.device_count()
    except Exception as exc:
        rec.status, rec.error = BROKEN, f"device_count failed: {exc}"
        return
    rec.devices = count
    if count == 0:
        rec.status, rec.error = NO_DEVICES, reason or "the plugin reports no devices"
    else:
        rec.status, rec.error = OK, None


def _allowlist() -> set[str] | None:
    raw = os.environ.get("UNIDEV_PLUGINS", "").strip()
    return {n.strip() for n in raw.split(",") if n.strip()} if raw else None


def _candidates() -> list[tuple[str, str, Any]]:
    """(name, source, loader) for every plugin to try, entry points first."""
    out: list[tuple[str, str, Any]] = []
    if os.environ.get("UNIDEV_DISABLE_PLUGIN_AUTOLOAD", "") not in ("1", "true", "yes"):
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = getattr(ep, "dist", None)
            src = f"entry point {ep.value}" + (f" ({dist.name} {dist.version})" if dist else "")
            out.append((ep.name, src, ep.load))
    for name, obj in _registered:
        out.append((name, "registered", lambda obj=obj: obj))
    return out


def discover(refresh: bool = False) -> list[PluginRecord]:
    """Every plugin found, in discovery order, each with its status; never raises."""
    global _records
    with _lock:
        if _records is not None and not refresh:
            return list(_records.values())
        allow = _allowlist()
        records: dict[str, PluginRecord] = {}
        for name, source, loader in _candidates():
            if allow is not None and name not in allow:
                continue
            rec = PluginRecord(name=name, source=source)
            try:
                module = loader()
                rec.spec = _describe(module)
            except Exception as exc:
                rec.error = f"plugin failed to describe itself: {_short_error(exc)}"
                records.setdefault(name, rec)
                continue
            key = rec.spec.name
            if key in records and records[key].spec is not None:
                rec.status = BROKEN
                rec.error = f"name {key!r} is already taken by {records[key].source}"
                records[f"{key}#{len(records)}"] = rec
                continue
            rec.name = key
            _load_library(rec)
            records[key] = rec
        _records = records
        return list(records.values())


def get(name: str) -> PluginRecord:
    """The record of plugin `name`; PluginLoadError listing what exists if there is none."""
    for rec in discover():
        if rec.name == name:
            return rec
    known = ", ".join(r.name for r in discover()) or "none"
    hint = ""
    if os.environ.get("UNIDEV_PLUGINS"):
        hint = f" (UNIDEV_PLUGINS={os.environ['UNIDEV_PLUGINS']!r} limits discovery)"
    raise PluginLoadError(f"no unidev plugin named {name!r}; installed: {known}{hint}")


def load(name: str):
    """The loaded native library of plugin `name`; raises with the recorded cause if unusable."""
    rec = get(name)
    if rec.library is None or rec.status not in (OK, NO_DEVICES):
        raise PluginLoadError(f"plugin {name!r} is {rec.status}: {rec.error}")
    return rec.library


def _debug() -> None:  # pragma: no cover - manual aid
    for r in discover():
        print(r, file=sys.stderr)
