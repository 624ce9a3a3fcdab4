"""Autotune: time each applicable algorithm of a layer's op, verify it, keep the fastest on disk."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import opset
from ..core import cache, discovery, reference
from ..core import ops as uops
from ..core.array import DeviceArray
from .catalog import algorithms, find, kernel_dtypes
from .spec import AlgorithmError, Layer, why_not

__all__ = ["autotune", "candidates", "decisions", "run_algorithm", "cache_file", "clear"]

_memo: dict[str, dict] = {}


def cache_file() -> Path:
    """``<unidev cache>/autotune/decisions.json``: every decision of every process."""
    return cache.private_dir("autotune") / "decisions.json"


@contextlib.contextmanager
def _locked():
    fd = os.open(cache.private_dir("autotune") / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def decisions() -> dict[str, dict]:
    """Every persisted decision, key -> record (see :func:`autotune`)."""
    raw = cache.read_private(cache_file())
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def clear() -> int:
    """Forget every persisted decision; returns how many there were."""
    with _locked():
        n = len(decisions())
        cache.write_private(cache_file(), b"{}")
    _memo.clear()
    return n


def _attrs(layer: Layer, op: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {"stride": layer.stride, "padding": layer.padding,
                             "dilation": layer.dilation, "groups": layer.groups}
    if op == "conv2d_backward_input":
        attrs["input_shape"] = layer.input_shape
    elif op == "conv2d_backward_weight":
        attrs["weight_shape"] = layer.weight_shape
    return attrs


def _host_inputs(layer: Layer, op: str) -> list[np.ndarray | None]:
    rng = np.random.default_rng(0)

    def r(shape):
        return rng.standard_normal(shape).astype(layer.dtype)

    if op == "conv2d":
        return [r(layer.input_shape), r(layer.weight_shape),
                r((layer.out_channels,)) if layer.bias else None]
    if op == "conv2d_backward_input":
        return [r(layer.output_shape), r(layer.weight_shape)]
    if op == "conv2d_backward_weight":
        return [r(layer.output_shape), r(layer.input_shape)]
    raise AlgorithmError(f"autotune: op {op!r} is not tunable; expected conv2d, "
                         "conv2d_backward_input or conv2d_backward_weight")


def run_algorithm(plugin: str, op: str, name: str, inputs: list, attrs: dict) -> DeviceArray:
    """Run `op` with algorithm `name` (a plugin's, a registered composite's, or "auto")."""
    spec = find(plugin, op, name)
    if spec is not None and spec.fn is not None:
        return spec.fn(*inputs, **attrs)
    return uops.call(op, *inputs, algorithm=name, **attrs)


def candidates(layer: Layer, op: str) -> tuple[list[str], dict[str, str]]:
    """(names that apply to the layer, name -> why not for those that do not)."""
    ok, refused = [], {}
    dts = kernel_dtypes(layer.device, op)
    for spec in algorithms(layer.device, op)[op]:
        reason = why_not(spec, layer, dts)
        if reason is None:
            ok.append(spec.name)
        else:
            refused[spec.name] = reason
    return ok, refused


def _key(layer: Layer, op: str, names: list[str], layout: str) -> str:
    rec = discovery.get(layer.device)
    lib = discovery.load(layer.device)
    parts = [layer.device, rec.spec.version if rec.spec else "?", str(lib.version),
             lib.device_properties(0)["name"], op, "x" + "x".join(map(str, layer.input_shape)),
             "w" + "x".join(map(str, layer.weight_shape)), "s{}x{}".format(*layer.stride),
             "p{}x{}".format(*layer.padding), "d{}x{}".format(*layer.dilation),
             f"g{layer.groups}",
             layer.dtype, layout, "+".join(sorted(names))]
    return "|".join(parts)


def _time(fns: dict[str, Any], sync, reps: int) -> dict[str, float]:
    """Seconds per call of each fn: `reps` rounds in which every fn runs once (rotating order,
    so all see the same machine state); times above 1.25x a fn's fastest are outliers (another
    process took the cores) and dropped, the rest averaged."""
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            fns[name]()
            sync()
            times[name].append(time.perf_counter() - t0)
    out = {}
    for name, ts in times.items():
        kept = [t for t in ts if t <= 1.25 * min(ts)]
        out[name] = sum(kept) / len(kept)
    return out


def _verify(op: str, got: np.ndarray, host: list, attrs: dict, dtype: str) -> str | None:
    from ..conformance.cases import tolerance

    wide = [None if h is None else h.astype(np.float64) for h in host]
    want = reference.run(op, wide, attrs)[0]
    # rounding error grows with the sum of |terms|, so the bound scales with conv(|a|, |b|)
    bound = reference.run(op, [None if h is None else np.abs(h) for h in wide], attrs)[0]
    rtol, atol = tolerance(opset.OPS[op], dtype)
    err = np.abs(got.astype(np.float64) - want)
    bad = err > atol + rtol * bound
    if np.isnan(got).any() or bad.any():
        return f"differs from the numpy reference by up to {float(np.nanmax(err)):.3g}"
    return None


def autotune(layer: Layer, op: str, reps: int = 5, layout: str = "nchw",
             use_cache: bool = True) -> str:
    """The fastest applicable algorithm of `op` for `layer`'s exact configuration.

    Times each candidate (a warm-up call, then `reps` interleaved rounds, outliers above 1.25x
    the fastest dropped; "auto" too, for the record's ``auto_ms``), refuses any whose result
    misses the numpy reference beyond the op's tolerance, and persists the decision keyed by
    (plugin, versions, device, op, shapes, stride, padding, dilation, groups, dtype, layout,
    candidates) in :func:`cache_file`; later calls and later processes reuse it. Returns "auto"
    if the plugin names no algorithm for the layer.
    """
    if layer.input_shape is None:
        raise AlgorithmError(f"{layer}: autotune needs the layer's input shape (swap with "
                             "example_inputs=, or let the first forward pass tune it)")
    names, refused = candidates(layer, op)
    if not names:
        return "auto"
    key = _key(layer, op, names, layout)
    if use_cache:
        hit = _memo.get(key) or decisions().get(key)
        if hit:
            _memo[key] = hit
            return hit["best"]
    host = _host_inputs(layer, op)
    dev = f"{layer.device}:0"
    inputs = [None if h is None else DeviceArray.from_numpy(h, dev) for h in host]
    attrs = _attrs(layer, op)
    lib = discovery.load(layer.device)
    ok = []
    for name in [*names, "auto"]:
        try:
            out = run_algorithm(layer.device, op, name, inputs, attrs)  # also the warm-up
            reason = _verify(op, out.numpy(), host, attrs, layer.dtype)
        except Exception as exc:  # the kernel refused this configuration: not a candidate
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if reason is None:
            ok.append(name)
        elif name != "auto":
            refused[name] = reason
    if not [n for n in ok if n != "auto"]:
        raise AlgorithmError(f"{layer}: autotune of {op}: no algorithm passed: {refused}")
    # "auto", the plugin's own choice, is timed alongside for the record (auto_ms)
    times = _time({n: (lambda n=n: run_algorithm(layer.device, op, n, inputs, attrs))
                   for n in ok}, lambda: lib.synchronize(0), reps)
    auto = times.pop("auto", float("nan"))
    best = min(times, key=times.__getitem__)
    record = {"plugin": layer.device, "op": op, "layer": layer.name,
              "input_shape": list(layer.input_shape), "weight_shape": list(layer.weight_shape),
              "stride": list(layer.stride), "padding": list(layer.padding),
              "dilation": list(layer.dilation), "groups": layer.groups, "dtype": layer.dtype,
              "layout": layout, "best": best, "ms": {n: t * 1e3 for n, t in times.items()},
              "auto_ms": auto * 1e3,
              "refused": refused, "time": time.time()}
    _memo[key] = record
    if use_cache:
        with _locked():
            data = decisions()
            data[key] = record
            cache.write_private(cache_file(), json.dumps(data, indent=1).encode())
    return best
