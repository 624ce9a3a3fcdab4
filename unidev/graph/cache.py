"""Compiled-plan cache: in memory for the process (hit/miss counters), plan files on disk."""

from __future__ import annotations

import hashlib
import json
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .. import _C
from ..core import cache as disk
from ..core.device import Device
from ..core.device import device as parse_device
from ..core.errors import InvalidArgumentError
from . import plan as planfile
from .executor import CompiledPlan

__all__ = ["compile", "cache_key", "stats", "clear", "FOLDER"]

FOLDER = "graph-plans"  # under unidev.core.cache.cache_root() (UNIDEV_CACHE_DIR)
CAPACITY = 64  # plans kept in memory (each holds its arena and constants on the device)

_lock = threading.Lock()
_plans: OrderedDict[str, CompiledPlan] = OrderedDict()
_counters = dict.fromkeys(("hits", "misses", "disk_hits", "disk_writes", "disk_rebuilt"), 0)
_kernels: dict[tuple[str, str, str], bool] = {}


def stats() -> dict[str, int]:
    """Counters since the last clear(): hits, misses, disk_hits, disk_writes, disk_rebuilt."""
    with _lock:
        return dict(_counters, entries=len(_plans))


def clear() -> None:
    """Forget every cached plan and reset the counters (disk entries stay)."""
    with _lock:
        _plans.clear()
        for k in _counters:
            _counters[k] = 0


def cache_key(graph_key: str, inputs: list[tuple[tuple, str]], device: Device) -> str:
    """Digest of (graph key, input shapes/dtypes, device, plugin name + version, ABI, format)."""
    lib = device.library
    blob = json.dumps([graph_key, [[list(s), d] for s, d in inputs], str(device), lib.name,
                       lib.version, list(lib.abi), [_C.ABI_MAJOR, _C.ABI_MINOR],
                       planfile.VERSION])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _has_kernel(dev: Device) -> Callable[[str, str], bool]:
    lib = dev.library

    def has(op: str, dtype: str) -> bool:
        k = (dev.plugin, op, dtype)
        if k not in _kernels:
            try:
                _kernels[k] = lib.kernel(op, dtype) is not None
            except InvalidArgumentError:  # a dtype the binding does not know
                _kernels[k] = False
        return _kernels[k]
    return has


def _from_disk(key: str, dev: Device) -> CompiledPlan | None:
    path = None
    try:
        path = disk.private_dir(FOLDER) / f"{key}.udplan"
        data = disk.read_private(path)
        if data is None:
            return None
        plan = planfile.from_bytes(data)
        if plan.meta.get("cache_key") != key or plan.plugin != dev.plugin:
            raise planfile.PlanFileError("written for another graph, shape or plugin")
        return CompiledPlan(plan, dev, data)
    except Exception as exc:  # noqa: BLE001 - any broken entry is rebuilt, never used
        warnings.warn(f"unidev: not loading the cached plan {path or FOLDER}: {exc}; rebuilding "
                      "it", RuntimeWarning, stacklevel=3)
        with _lock:
            _counters["disk_rebuilt"] += 1
        return None


def compile(graph: Any, device: str | Device, *, dims: dict[str, int] | None = None,
            optimize: bool = True, cache: bool = True, persist: bool = False,
            algorithms: Any = None) -> CompiledPlan:
    """Optimize a copy of `graph` (symbolic dimensions bound by `dims`; passes.optimize for
    inference unless optimize=False), lower it for `device` and prepare it natively.

    algorithms: a unidev.algorithms selector for the conv nodes (graph/algorithms.py's choose);
    the chosen names are part of the graph and so of the plan's key.

    cache: reuse a plan compiled in this process for the same key (cache_key()); persist: also
    keep the plan file under UNIDEV_CACHE_DIR/graph-plans and start from it in a later process
    (a broken or foreign entry is rebuilt with a RuntimeWarning)."""
    dev = parse_device(device)
    if dims:
        graph = graph.specialize(**dims)
    for v in graph.inputs:
        if any(not isinstance(d, int) for d in v.shape):
            raise InvalidArgumentError(f"compile: input '{v.name}' has symbolic shape {v.shape}; "
                                       "bind its dimensions with dims={...} (plans are "
                                       "shape-specialized)")
    if algorithms is not None:
        from .algorithms import choose
        graph = choose(graph, algorithms, dev.plugin)
    gkey = graph.key()
    key = cache_key(f"{gkey}:{int(optimize)}", [(tuple(v.shape), v.dtype) for v in graph.inputs],
                    dev)
    with _lock:
        hit = _plans.get(key) if cache else None
        if hit is not None:
            _plans.move_to_end(key)
            _counters["hits"] += 1
            return hit
        _counters["misses"] += 1
    compiled = _from_disk(key, dev) if persist else None
    if compiled is not None:
        with _lock:
            _counters["disk_hits"] += 1
    else:
        from .lower import lower
        from .passes import optimize as run_passes
        g = graph.copy()
        has_kernel = _has_kernel(dev)
        if optimize:
            run_passes(g, has_kernel=has_kernel)
        plan = lower(g, has_kernel)
        plan.plugin = dev.plugin
        plan.key = gkey
        plan.meta["cache_key"] = key
        compiled = CompiledPlan(plan, dev)
        if persist:
            disk.write_private(disk.private_dir(FOLDER) / f"{key}.udplan", compiled.data)
            with _lock:
                _counters["disk_writes"] += 1
    if cache:
        with _lock:
            _plans[key] = compiled
            while len(_plans) > CAPACITY:
                _plans.popitem(last=False)
    return compiled
