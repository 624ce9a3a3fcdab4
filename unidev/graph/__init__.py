"""The graph layer: a framework-neutral IR, optimizing passes, lowering to plans."""

from __future__ import annotations

# dump (the canonical key's text) loads with the package, not on the first compile: without
# bytecode caches a fresh process paid ~1.5 ms there (fuse.py loads core.program, ~3 ms, likewise)
from . import dump  # noqa: F401
from .cache import compile
from .evaluate import evaluate
from .executor import CompiledPlan, load
from .ir import VIEW_OPS, Graph, Node, Value
from .lower import lower
from .passes import optimize
from .trace import trace

__all__ = ["Graph", "Node", "Value", "VIEW_OPS", "evaluate", "lower", "optimize", "trace",
           "compile", "CompiledPlan", "load"]
