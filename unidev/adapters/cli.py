"""``unidev build torch|tensorflow|all``: compile the adapters against the installed frameworks."""

from __future__ import annotations

import argparse
import importlib


def _build_one(framework: str) -> tuple[bool, list[str]]:
    module = {"torch": "unidev.adapters.torch.build",
              "tensorflow": "unidev.adapters.tensorflow.build"}[framework]
    try:
        build = importlib.import_module(module)
    except ImportError as exc:
        return False, [f"{framework}: adapter not available in this unidev ({exc})"]
    try:
        return True, list(build.build())
    except Exception as exc:  # a failed build is reported, the other framework still builds
        return False, [f"{framework}: build FAILED: {type(exc).__name__}: {exc}"]


def cmd_build(args: argparse.Namespace) -> int:
    targets = ["torch", "tensorflow"] if args.framework == "all" else [args.framework]
    ok = True
    for framework in targets:
        done, lines = _build_one(framework)
        ok = ok and done
        for line in lines:
            print(line)
    return 0 if ok else 1


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("framework", choices=["torch", "tensorflow", "all"],
                   help="which adapter to build (against the installed framework)")


COMMANDS = {"build": (cmd_build, "build the framework adapters for the installed frameworks",
                      _configure)}
