"""Which algorithms exist: each plugin's (hook ``unidev_algorithms``) plus the user's own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pluggy

from ..contract import hookspecs, opset
from ..core import discovery
from .spec import CONV_OPS, AlgorithmError, AlgorithmSpec, Layer

__all__ = ["algorithms", "custom", "find", "register", "unregister", "kernel_dtypes"]

_plugin_cache: dict[str, dict[str, list[AlgorithmSpec]]] = {}
_custom: dict[str, dict[str, AlgorithmSpec]] = {}  # op -> name -> spec


def _from_plugin(plugin: str) -> dict[str, list[AlgorithmSpec]]:
    if plugin in _plugin_cache:
        return _plugin_cache[plugin]
    rec = discovery.get(plugin)
    module = rec.extra.get("module")
    raw: Any = {}
    if module is not None:
        pm = pluggy.PluginManager(discovery.ENTRY_POINT_GROUP)
        pm.add_hookspecs(hookspecs)
        pm.register(module)
        raw = pm.hook.unidev_algorithms() or {}
    if not isinstance(raw, Mapping):
        raise AlgorithmError(f"plugin {plugin!r}: unidev_algorithms() returned "
                             f"{type(raw).__name__}, expected a dict op -> list of AlgorithmSpec")
    table: dict[str, list[AlgorithmSpec]] = {}
    for op, specs in raw.items():
        if op not in opset.OPS or "algorithm" not in opset.OPS[op].attr_names:
            raise AlgorithmError(f"plugin {plugin!r}: unidev_algorithms() lists op {op!r}, which "
                                 "has no 'algorithm' attribute in the op set")
        table[op] = []
        for s in specs:
            spec = s if isinstance(s, AlgorithmSpec) else AlgorithmSpec(**dict(s))
            table[op].append(AlgorithmSpec(**{**spec.__dict__, "plugin": plugin}))
    _plugin_cache[plugin] = table
    return table


def algorithms(plugin: str, op: str | None = None) -> dict[str, list[AlgorithmSpec]]:
    """op -> the algorithms plugin `plugin` has for it (its own first, then registered ones).

    With `op`, only that op's entry. An op the plugin lists nothing for still has ``auto``.
    """
    table = {k: list(v) for k, v in _from_plugin(plugin).items()}
    for cop, named in _custom.items():
        table.setdefault(cop, []).extend(named.values())
    if op is not None:
        return {op: table.get(op, [])}
    return table


def kernel_dtypes(plugin: str, op: str) -> tuple[str, ...]:
    """The dtypes the plugin has a kernel for `op` (empty if its library is not loaded)."""
    try:
        lib = discovery.load(plugin)
    except Exception:
        return ()
    return tuple(d for d in opset.OPS[op].dtypes if lib.kernel(op, d) is not None)


def find(plugin: str, op: str, name: str, layer: Layer | None = None,
         selector: str = "") -> AlgorithmSpec | None:
    """The spec of `name` for `op` on `plugin` (None for ``auto``); AlgorithmError naming the
    layer, the selector and the known names if there is no such algorithm."""
    if name == "auto":
        return None
    for spec in algorithms(plugin, op)[op]:
        if spec.name == name:
            return spec
    known = ", ".join(["auto", "autotune"] + [s.name for s in algorithms(plugin, op)[op]])
    where = f"{layer}: " if layer is not None else ""
    by = f" (selector {selector})" if selector else ""
    raise AlgorithmError(f"{where}unknown algorithm {name!r} for {op} on plugin {plugin!r}{by}; "
                         f"known: {known}")


def register(op: str, name: str, fn: Callable[..., Any], description: str = "",
             dtypes: tuple[str, ...] | None = None, requires: Mapping[str, Any] | None = None,
             applies: Callable[[Layer], str | None] | None = None) -> AlgorithmSpec:
    """Add a Python composite algorithm for `op`, selectable on every plugin like a built-in.

    `fn` takes the op's inputs and attributes as ``unidev.ops`` does (without ``algorithm``):
    ``fn(x, weight, bias, stride=, padding=, dilation=, groups=)`` for conv2d, and returns its
    output as a ``unidev.DeviceArray``; write it with ``unidev.ops`` so it runs on any device.
    """
    if op not in CONV_OPS:
        raise AlgorithmError(f"register: op {op!r} has no algorithm choice; expected one of "
                             f"{list(CONV_OPS)}")
    if not callable(fn):
        raise AlgorithmError(f"register({op!r}, {name!r}): fn is a {type(fn).__name__}, "
                             "expected a callable")
    spec = AlgorithmSpec(name, description or (fn.__doc__ or "").strip().split("\n")[0]
                         or "custom Python composite", dtypes, dict(requires or {}), applies, fn)
    for plugin in list(_plugin_cache):
        if any(s.name == name for s in _plugin_cache[plugin].get(op, [])):
            raise AlgorithmError(f"register({op!r}, {name!r}): plugin {plugin!r} already has an "
                                 "algorithm of that name")
    _custom.setdefault(op, {})[name] = spec
    return spec


def custom(op: str, name: str) -> AlgorithmSpec | None:
    """The registered composite `name` of `op`, None if there is none."""
    return _custom.get(op, {}).get(name)


def unregister(op: str, name: str) -> None:
    """Remove a registered algorithm (tests)."""
    _custom.get(op, {}).pop(name, None)
