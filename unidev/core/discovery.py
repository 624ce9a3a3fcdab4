"""Plugin discovery: entry point group ``unidev``, allowlist, and a record of every failure."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pluggy

from ..contract import hookspecs
from ..contract.spec import PluginSpec
from .errors import PluginLoadError

__all__ = ["PluginRecord", "debug_counters", "discover", "get", "load", "register", "reset",
           "ENTRY_POINT_GROUP"]

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
                        "unidev.kit.PluginSpec")
    return spec


def _short_error(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _load_library(rec: PluginRecord, lib_cls: Any) -> None:
    """Open the plugin's library in this process; only after its probe verdict was clean."""
    assert rec.spec is not None
    try:
        lib = lib_cls(rec.spec.library)
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


# --- probing a plugin library in a child process ----------------------------------------------
#
# A native library runs code as soon as it is mapped (constructors) and in every call; one that
# crashes or hangs in device_count would take the user's process with it. So before discovery
# opens a library here, a child process opens it and runs everything discovery, `unidev info` and
# the adapters' initialisation run (table, device_count, device_properties, memory info, a
# stream, every kernel lookup). The verdict is cached, keyed by the library's SHA-256, the ABI of
# this unidev and what the probe runs, in the private cache; an entry that anyone else could have
# written is never read.

PROBE_TIMEOUT_S = 20.0
_PROBE_FORMAT = 1  # bump when the probe runs something new
_STARTUP_S = 120.0  # for the child's interpreter and imports, before the timeout starts
_RETRY_HUNG_S = 3600.0  # a hang may be a loaded machine: probe again after this long
_MAX_PROBED_DEVICES = 64


def _probe_child(path: str, fd: int) -> None:
    """Child side: report each step on `fd` before taking it, so a crash names its step."""

    def say(kind: str, text: str = "") -> None:
        os.write(fd, f"{kind} {' '.join(str(text).split())}\n".encode())

    def note(what: str, exc: BaseException) -> None:
        say("note", f"{what}: {type(exc).__name__}: {exc}")

    from .. import _C
    from ..contract import abi, dtypes, opset

    say("stage", "start")
    try:
        say("stage", "dlopen (the library's constructors)")
        try:
            handle = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            note("dlopen", exc)  # unidev._C reports the same cleanly in the user's process
            handle = None
        api = None
        if handle is not None and hasattr(handle, "unidev_get_api"):
            say("stage", "unidev_get_api")
            get = handle.unidev_get_api
            get.restype, get.argtypes = ctypes.c_void_p, []
            api = get()
        if api:
            say("stage", "reading the UD_Api table")
            # nothing past device_count is read before unidev._C has checked the table
            head = abi.ApiTable.from_address(api)
            if (head.abi_major == _C.ABI_MAJOR and abi.covers(head, "device_count")
                    and head.device_count and head.error_message and head.error_destroy):
                say("stage", "device_count")
                count, reason = ctypes.c_int32(0), ctypes.c_char_p()
                fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32),
                                      ctypes.POINTER(ctypes.c_char_p))(head.device_count)
                err = fn(ctypes.byref(count), ctypes.byref(reason))
                if err:
                    say("stage", "error_message")
                    ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(head.error_message)(err)
                    say("stage", "error_destroy")
                    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(head.error_destroy)(err)
        say("stage", "unidev._C.Library (ABI check, device_count, device_properties(0))")
        try:
            lib = _C.Library(path)
        except Exception as exc:  # a clean error: the user's process gets the same one
            note("open", exc)
        else:
            _probe_calls(lib, say, note, opset, dtypes)
    except Exception as exc:  # a bug of the probe itself must not condemn the plugin
        note("probe", exc)
    say("done")
    os._exit(0)  # the probe judges discovery, not the library's behaviour at exit


def _probe_calls(lib: Any, say, note, opset, dtypes) -> None:
    say("stage", "device_count")
    try:
        count = int(lib.device_count()[0])
    except Exception as exc:
        note("device_count", exc)
        count = 0
    for i in range(min(count, _MAX_PROBED_DEVICES)):
        for step, call in ((f"device_properties({i})", lambda i=i: lib.device_properties(i)),
                           (f"device_memory_info({i})", lambda i=i: lib.memory_info(i))):
            say("stage", step)
            try:
                call()
            except Exception as exc:
                note(step, exc)
        say("stage", f"stream_create({i})")
        try:
            stream = lib.stream_create(i)
        except Exception as exc:
            note("stream_create", exc)
            continue
        for step, call in (("stream_synchronize", lib.stream_synchronize),
                           ("stream_destroy", lib.stream_destroy)):
            say("stage", f"{step}({i})")
            try:
                call(stream)
            except Exception as exc:
                note(step, exc)
    for op in opset.OPS:
        for dtype in dtypes.DTYPES:
            say("stage", f"kernel_lookup({op}, {dtype})")
            try:
                lib.kernel(op, dtype)
            except Exception as exc:
                note(f"kernel_lookup({op}, {dtype})", exc)


_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); from unidev.core import discovery; "
          "discovery._probe_child(sys.argv[2], int(sys.argv[3]))")


def _probe_timeout() -> float:
    raw = os.environ.get("UNIDEV_PROBE_TIMEOUT", "").strip()
    try:
        value = float(raw) if raw else PROBE_TIMEOUT_S
    except ValueError:
        value = PROBE_TIMEOUT_S
    return value if value > 0 else PROBE_TIMEOUT_S


class _Probe:
    """One child process probing one library. The timeout counts from the child's "start"
    (its interpreter and unidev imported), so a slow start on a loaded machine is no hang."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.proto = tempfile.TemporaryFile()
        self.out = tempfile.TemporaryFile()
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
        python = os.environ.get("UNIDEV_PROBE_PYTHON") or sys.executable  # for embedders
        self.proc = subprocess.Popen(
            [python, "-c", _CHILD, package_parent, path, str(self.proto.fileno())],
            stdin=subprocess.DEVNULL, stdout=self.out, stderr=subprocess.STDOUT,
            pass_fds=(self.proto.fileno(),), start_new_session=True, close_fds=True)
        self.deadline = time.monotonic() + _STARTUP_S
        self.started = False
        self.hung = False

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the child's own children too
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()

    def poll(self) -> bool:
        """True once the child has ended (or was killed for running past its deadline)."""
        if self.proc.poll() is not None:
            return True
        now = time.monotonic()
        # the child shares the file offset: look at the size, never seek while it runs
        if not self.started and os.fstat(self.proto.fileno()).st_size > 0:
            self.started, self.deadline = True, now + _probe_timeout()
        if now > self.deadline:
            self.hung = True
            self.kill()
            return True
        return False

    def verdict(self) -> dict:
        """What the ended child reported, as a verdict."""
        rc, hung = self.proc.returncode, self.hung
        self.proto.seek(0)
        lines = self.proto.read().decode(errors="replace").splitlines()
        self.out.seek(0, os.SEEK_END)
        self.out.seek(max(0, self.out.tell() - 400))
        tail = " ".join(self.out.read().decode(errors="replace").split())[-300:]
        self.proto.close()
        self.out.close()
        stages = [ln[6:] for ln in lines if ln.startswith("stage ")]
        notes = [ln[5:] for ln in lines if ln.startswith("note ")]
        where = stages[-1] if stages else "starting"
        verdict = {"format": _PROBE_FORMAT, "library": self.path, "ok": False, "hung": hung,
                   "cache": True, "notes": notes[:20], "time": time.time(), "error": None}
        if not hung and rc == 0 and "done " in lines:
            verdict["ok"] = True
        elif not stages:  # the child never reached the plugin: nothing is known about it
            verdict["cache"] = False
            how = (f"did not start within {_STARTUP_S:g} s" if hung
                   else f"failed before loading the library (exit status {rc})")
            verdict["error"] = f"the probe process {how}: {tail or 'no output'}"
        elif hung:
            verdict["error"] = (f"timed out after {_probe_timeout():g} s in {where} (the library "
                                "hangs there)")
        elif rc < 0:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"
            verdict["error"] = f"killed by {sig} in {where}"
        else:
            verdict["error"] = f"exited with status {rc} in {where}"
        if verdict["error"] and stages and tail:
            verdict["error"] += f"; its output: {tail}"
        return verdict


def _run_probes(probes: list[_Probe]) -> None:
    """Wait for all probes together, so each one's deadline is judged on time."""
    running = list(probes)
    try:
        while running:
            running = [p for p in running if not p.poll()]
            if running:
                time.sleep(0.01)
    except BaseException:
        for p in running:
            p.kill()
        raise


def _verdict_dir() -> Path:
    from . import cache as _cache  # the one private, checked cache of unidev

    return _cache.private_dir("plugin-probes")


def _read_verdict(folder: Path, key: str) -> dict | None:
    from . import cache as _cache

    try:
        raw = _cache.read_private(folder / f"{key}.json")
    except (OSError, ValueError):  # untrusted or unreadable: probe again and replace it
        return None
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("ok"), bool):
        return None
    if not data["ok"] and not isinstance(data.get("error"), str):
        return None
    when = data.get("time")
    fresh = isinstance(when, (int, float)) and time.time() - when <= _RETRY_HUNG_S
    if data.get("hung") and not fresh:
        return None
    return data


def _verdicts(wanted: dict[str, str]) -> dict[str, dict]:
    """{key: verdict} for {key: library path}, probing (in parallel) what is not cached; each
    verdict's "source" says where it came from."""
    from . import cache as _cache

    found: dict[str, dict] = {}
    try:
        folder: Path | None = _verdict_dir()
    except Exception as exc:  # no private cache: probe every time, keep nothing
        folder, probed = None, f"probed now (verdicts not cached: {exc})"
    else:
        probed = "probed now"
        for key in wanted:
            if (v := _read_verdict(folder, key)) is not None:
                found[key] = v
    missing = {k: p for k, p in wanted.items() if k not in found}
    lock = None
    if missing and folder is not None:
        with contextlib.suppress(OSError):
            lock = open(folder / ".lock", "a")  # noqa: SIM115 - held across the probes
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process probes, the others read its verdict
            for key in list(missing):
                if (v := _read_verdict(folder, key)) is not None:
                    found[key] = v
                    del missing[key]
    for v in found.values():
        v["source"] = "cached verdict"
    try:
        probes = {}
        for key, path in missing.items():
            try:
                probes[key] = _Probe(path)
            except OSError as exc:
                found[key] = {"ok": False, "cache": False, "hung": False, "source": probed,
                              "error": f"could not start the probe process: {exc}"}
        _run_probes(list(probes.values()))
        for key, probe in probes.items():
            verdict = probe.verdict()
            verdict["key"] = key
            if folder is not None and verdict["cache"]:
                with contextlib.suppress(OSError):
                    _cache.write_private(folder / f"{key}.json", json.dumps(verdict).encode())
            verdict["source"] = probed if verdict["cache"] else "probed now (not cached)"
            found[key] = verdict
    finally:
        if lock is not None:
            lock.close()
    return found


def _forget_verdicts() -> int:
    """Delete every cached probe verdict (``unidev list --reprobe``); returns how many."""
    folder = _verdict_dir()
    n = 0
    for f in folder.glob("*.json"):
        with contextlib.suppress(OSError):
            f.unlink()
            n += 1
    return n


_probe_salt_memo: str | None = None


def _probe_salt(abi: tuple[int, int]) -> str:
    """What else a verdict depends on: this unidev's ABI and the lookups the probe makes."""
    global _probe_salt_memo
    if _probe_salt_memo is None:
        from ..contract import dtypes, opset

        h = hashlib.sha256(" ".join(sorted(opset.OPS)).encode() + b"|" +
                           " ".join(dtypes.DTYPES).encode())
        _probe_salt_memo = f"abi{abi[0]}.{abi[1]}-p{_PROBE_FORMAT}-{h.hexdigest()[:12]}"
    return _probe_salt_memo


def _load_libraries(recs: list[PluginRecord]) -> None:
    """Probe (or recall the verdict for) each record's library, then open the sane ones here."""
    try:
        from .. import _C  # native; imported lazily so a broken build never breaks `import unidev`
    except Exception as exc:
        for rec in recs:
            rec.status, rec.error = BROKEN, f"unidev._C is not importable: {exc}"
        return
    from . import cache as _cache

    salt = _probe_salt((_C.ABI_MAJOR, _C.ABI_MINOR))
    keyed: list[tuple[PluginRecord, str]] = []
    for rec in recs:
        spec = rec.spec
        assert spec is not None
        if spec.applicable:
            rec.status, rec.error = NOT_APPLICABLE, spec.applicable
            continue
        if not os.path.exists(spec.library):
            rec.status, rec.error = BROKEN, f"native library not found: {spec.library}"
            continue
        try:
            digest = _cache.file_sha256(spec.library)
        except OSError as exc:
            rec.status, rec.error = BROKEN, f"cannot read native library {spec.library}: {exc}"
            continue
        rec.extra["sha256"] = digest
        keyed.append((rec, f"{digest}-{salt}"))
    if not keyed:
        return
    verdicts = _verdicts({key: os.path.abspath(r.spec.library) for r, key in keyed})
    for rec, key in keyed:
        verdict = verdicts[key]
        rec.extra["probe"] = verdict["source"]
        if not verdict["ok"]:
            rec.status = BROKEN
            rec.error = (f"native library failed its probe in a child process: "
                         f"{verdict['error']}; it was not loaded in this process "
                         "(`unidev list --reprobe` probes again)")
            continue
        _load_library(rec, _C.Library)


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
    """Every plugin found, in discovery order, each with its status; never raises.

    A plugin's Python code (entry point import, hooks) may raise anything but KeyboardInterrupt,
    SystemExit included: the plugin is recorded as broken. Its native library is opened here only
    after a child process has opened and exercised it without crashing or hanging.
    """
    global _records
    with _lock:
        if _records is not None and not refresh:
            return list(_records.values())
        allow = _allowlist()
        records: dict[str, PluginRecord] = {}
        to_load: list[PluginRecord] = []
        for name, source, loader in _candidates():
            if allow is not None and name not in allow:
                continue
            rec = PluginRecord(name=name, source=source)
            try:
                module = loader()
                rec.spec = _describe(module)
                rec.extra["module"] = module
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # SystemExit from a plugin must not end the process
                rec.spec = None
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
            records[key] = rec
            to_load.append(rec)
        _load_libraries(to_load)
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


def debug_counters(name: str) -> dict[str, int]:
    """Plugin `name`'s debug counters (hook ``unidev_debug_counters``; {} if it has none).

    Loads the plugin first, so the counters are those of the library this process uses.
    """
    rec = get(name)
    load(name)
    module = rec.extra.get("module")
    if module is None:
        return {}
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    pm.register(module)
    return {str(k): int(v) for k, v in (pm.hook.unidev_debug_counters() or {}).items()}


def _debug() -> None:  # pragma: no cover - manual aid
    for r in discover():
        print(r, file=sys.stderr)
