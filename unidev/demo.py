"""``unidev demo``: what runs where — the installed plugins, and ops on each device vs numpy."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from .core import discovery, ops
from .core.array import DeviceArray


def _ensure_some_plugin() -> None:
    """With no plugin installed, build the C test plugin so the demo still shows the path."""
    if any(r.usable for r in discovery.discover()):
        return
    source = Path(__file__).resolve().parent.parent / "tests" / "testplugin"
    if not (source / "testplugin.c").exists():
        return
    import sys

    sys.path.insert(0, str(source.parent))
    from testplugin import make_site  # type: ignore[import-not-found]

    good, _ = make_site(Path(tempfile.mkdtemp(prefix="unidev-demo-")))
    sys.path.insert(0, str(good))
    import importlib

    importlib.invalidate_caches()
    discovery.reset()
    print(f"(no plugin installed: built the C test plugin into {good.parent})")


def _ops_on(device: str) -> list[tuple[str, float, float]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = rng.standard_normal((128, 32)).astype(np.float32)
    a, b = DeviceArray.from_numpy(x, device), DeviceArray.from_numpy(w, device)
    rows = []
    for name, fn, want in [
        ("add(x, x, alpha=2)", lambda: ops.add(a, a, alpha=2.0), x + 2 * x),
        ("matmul(x, w)", lambda: ops.matmul(a, b), x @ w),
        ("matmul(x.T.T, w) strided", lambda: ops.matmul(a.T.T, b), x @ w),
    ]:
        t0 = time.perf_counter()
        try:
            got = fn().numpy()
        except Exception as exc:  # a plugin without the op: say so, keep going
            print(f"    {name:<28} skipped: {exc}")
            continue
        ms = (time.perf_counter() - t0) * 1e3
        rows.append((name, float(np.abs(got - want).max()), ms))
    return rows


def cmd_demo(args: argparse.Namespace) -> int:
    from .cli import cmd_list

    _ensure_some_plugin()
    print("== installed plugins (unidev list)")
    cmd_list(args)
    for rec in discovery.discover():
        if not rec.usable:
            continue
        device = f"{rec.name}:0"
        print(f"\n== ops on {device} ({rec.library.device_properties(0)['name']}) vs numpy")
        for name, diff, ms in _ops_on(device):
            print(f"    {name:<28} max |device - numpy| = {diff:.2e}   {ms:7.2f} ms")
        print(f"\n== graph mode on {device}: traced from unidev.ops, fused, compiled to a "
              "native plan")
        try:
            from .demos import graph_demo

            graph_demo.run(device)
        except Exception as exc:  # a plugin without conv/gemm kernels: say so, keep going
            print(f"    skipped: {type(exc).__name__}: {exc}")
    for extra in _framework_demos():
        extra(args)
    return 0


def _framework_demos() -> list:
    """Model-training demos contributed by the adapters once they are installed."""
    demos = []
    for mod in ("unidev.demos.torch_demo", "unidev.demos.tf_demo"):
        try:
            import importlib

            demos.append(importlib.import_module(mod).run)
        except ImportError:
            continue
    return demos


COMMANDS = {"demo": (cmd_demo, "run the main demo: plugins, ops on each device, model training",
                     lambda p: None)}
