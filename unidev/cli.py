"""The ``unidev`` command: list plugins, describe one, check the toolchain."""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence

from .contract import opset
from .core import cache, discovery


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_list(args: argparse.Namespace) -> int:
    if getattr(args, "reprobe", False):
        try:
            forgotten = discovery._forget_verdicts()
        except OSError as exc:
            print(f"error: cannot clear the plugin probe verdicts: {exc}", file=sys.stderr)
            return 2
        print(f"probing plugin libraries again ({forgotten} cached verdicts dropped)")
    records = discovery.discover(refresh=bool(getattr(args, "reprobe", False)))
    if not records:
        print("no unidev plugins installed (entry point group 'unidev')")
        if os.environ.get("UNIDEV_DISABLE_PLUGIN_AUTOLOAD"):
            print("  UNIDEV_DISABLE_PLUGIN_AUTOLOAD is set")
        return 0
    rows = []
    for r in records:
        s = r.spec
        rows.append((r.name, s.version if s else "?", s.torch_name if s else "-",
                     s.tf_type if s else "-", str(r.devices), r.status))
    header = ("plugin", "version", "torch", "tensorflow", "devices", "status")
    widths = [max(len(str(row[i])) for row in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for r, row in zip(records, rows, strict=True):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if r.error:
            print(f"    └─ {r.error}")
    for extra in _adapter_status():
        print(extra)
    return 0


def _adapter_status() -> list[str]:
    """Lines from the framework adapters, if they are installed and have something to say."""
    lines = []
    for mod in ("unidev.adapters.torch.status", "unidev.adapters.tensorflow.status"):
        try:
            if importlib.util.find_spec(mod) is None:
                continue
            status = importlib.import_module(mod)
            lines.extend(status.summary())
        except Exception:  # an adapter's status report must never break `unidev list`
            continue
    return lines


def cmd_info(args: argparse.Namespace) -> int:
    try:
        rec = discovery.get(args.name)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    s = rec.spec
    print(f"{rec.name}: {rec.status}" + (f" ({rec.error})" if rec.error else ""))
    print(f"  source      {rec.source}")
    if s:
        print(f"  library     {s.library}")
        print(f"  torch name  {s.torch_name}    tensorflow type  {s.tf_type}    "
              f"priority {s.priority}")
        print(f"  claims tier {s.conformance.tier}; host-addressable memory: {s.host_addressable}")
        for key, why in s.conformance.exclusions.items():
            print(f"  excludes    {key}: {why}")
    if getattr(args, "algorithms", False) and s:
        from .algorithms.cli import print_algorithms

        try:
            print_algorithms(rec.name)
        except Exception as exc:  # a plugin's broken hook must not hide the rest of its info
            print(f"  algorithms: the plugin's unidev_algorithms hook failed: {exc}")
    if rec.library is None:
        return 1 if rec.status == discovery.BROKEN else 0
    lib = rec.library
    print(f"  ABI         {lib.abi[0]}.{lib.abi[1]}; plugin version {lib.version}")
    for i in range(rec.devices):
        p = lib.device_properties(i)
        print(f"  device {i}    {p['name']}: {_fmt_bytes(p['total_memory'])}, "
              f"{p['compute_units']} compute units, {p['vector_width']}-byte vectors")
    print("  ops by tier (dtypes with a kernel):")
    for tier in opset.TIERS:
        have, missing = [], []
        for op in opset.by_tier(tier):
            ok = [d for d in op.dtypes if lib.kernel(op.name, d) is not None]
            (have if ok else missing).append(op.name + (f"[{','.join(ok)}]" if args.dtypes and ok
                                                        else ""))
        print(f"    tier {tier}: {len(have)}/{len(have) + len(missing)}"
              + (f"  missing: {', '.join(missing)}" if missing else ""))
        if args.dtypes:
            print("      " + " ".join(have))
    return 0


def _version(cmd: Sequence[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        text = (out.stdout or out.stderr).strip().splitlines()
        return text[0] if text else "?"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"not usable ({exc})"


def cmd_doctor(args: argparse.Namespace) -> int:
    print(f"python      {sys.version.split()[0]} on {platform.machine()} ({platform.system()})")
    for tool, flag in (("cc", "--version"), ("c++", "--version"), ("cmake", "--version"),
                       ("ninja", "--version"), ("nvcc", "--version"), ("ispc", "--version")):
        path = shutil.which(tool)
        print(f"{tool:<11} {_version([path, flag]) if path else 'not found'}")
    if not shutil.which("ispc"):  # plugins/x86/cmake/ispc.py provisions it into the cache
        try:
            wrapper = cache.cache_root() / "ispc" / "bin" / "ispc"
            print(f"{'ispc (x86)':<11} {wrapper if wrapper.exists() else 'not provisioned yet'}")
        except Exception as exc:
            print(f"{'ispc (x86)':<11} cache unusable: {exc}")
    for mod in ("numpy", "torch", "tensorflow", "pluggy"):
        spec = importlib.util.find_spec(mod)
        if spec is None:
            print(f"{mod:<11} not installed")
            continue
        try:
            from importlib.metadata import version

            dist = {"tensorflow": "tensorflow-cpu"}.get(mod, mod)
            try:
                v = version(dist)
            except Exception:
                v = version(mod)
            print(f"{mod:<11} {v}")
        except Exception:
            print(f"{mod:<11} installed (version unknown)")
    try:
        from . import _C

        print(f"unidev._C   ABI {_C.ABI_MAJOR}.{_C.ABI_MINOR}")
    except ImportError as exc:
        print(f"unidev._C   not importable: {exc}")
        return 1
    return 0


COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {
    "list": (cmd_list, "installed plugins, their devices and status (with load errors)"),
    "info": (cmd_info, "one plugin's properties and supported ops by tier"),
    "doctor": (cmd_doctor, "compilers, ISPC, nvcc and framework versions found"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unidev", description="unidev: one device layer for "
                                "PyTorch and TensorFlow")
    sub = p.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name == "list":
            sp.add_argument("--reprobe", action="store_true",
                            help="forget the cached verdicts and probe every plugin library again "
                                 "in a child process")
        if name == "info":
            sp.add_argument("name", help="plugin name, e.g. aurora")
            sp.add_argument("--dtypes", action="store_true", help="list dtypes per op")
            sp.add_argument("--algorithms", action="store_true",
                            help="list the algorithms per op (unidev.algorithms)")
    _extend(sub)
    return p


def _extend(sub) -> None:
    """Subcommands contributed by other unidev modules (adapters, conformance) when present."""
    for mod in ("unidev.conformance.cli", "unidev.adapters.cli", "unidev.demo", "unidev.graph.cli",
                "unidev.algorithms.cli"):
        try:
            if importlib.util.find_spec(mod) is None:
                continue
        except ModuleNotFoundError:
            continue
        module = importlib.import_module(mod)
        for name, (fn, help_text, configure) in getattr(module, "COMMANDS", {}).items():
            sp = sub.add_parser(name, help=help_text, description=help_text)
            configure(sp)
            COMMANDS[name] = (fn, help_text)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command][0](args)


if __name__ == "__main__":
    sys.exit(main())
