"""Graph passes, one module each; optimize() runs them in order."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import Graph
from . import cse, dce, fold, fuse, memory, simplify

__all__ = ["optimize", "dce", "cse", "fold", "simplify", "fuse", "memory"]


def optimize(g: Graph, *, training: bool = False, fusion: bool = True,
             has_kernel: Callable[[str, str], bool] | None = None) -> dict[str, int]:
    """Run the passes in place (dce, cse, fold, simplify, fuse, dce); rewrites per pass.

    training=False allows inference-only rewrites (batch-norm folding into conv). has_kernel
    (op, dtype) -> bool, a device's kernel query: fuse only into fused ops it has.
    """
    counts = {"dce": dce.run(g), "cse": cse.run(g), "fold": fold.run(g),
              "simplify": simplify.run(g)}
    counts["cse"] += cse.run(g)
    if fusion:
        counts["fuse"] = fuse.run(g, training=training, has_kernel=has_kernel)
    counts["dce"] += dce.run(g)
    g.check()
    return counts
