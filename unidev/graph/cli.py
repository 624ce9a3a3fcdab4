"""`unidev graph show FILE`: print a saved graph (optionally optimized) and draw it."""

from __future__ import annotations

import argparse
import sys

__all__ = ["COMMANDS"]


def cmd_graph(args: argparse.Namespace) -> int:
    from ..core.errors import UnidevError
    from . import passes, serialize
    try:
        g = serialize.load(args.file)
        if args.optimize:
            passes.optimize(g, training=args.training)
        print(g)
        print(f"key {g.key()}")
        if args.draw:
            print(f"drawn to {g.draw(args.draw)}")
    except (OSError, UnidevError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="graph_command", required=True)
    show = sub.add_parser("show", help="print a graph file (Graph.save) as text")
    show.add_argument("file")
    show.add_argument("--optimize", action="store_true", help="run the passes first")
    show.add_argument("--training", action="store_true",
                      help="with --optimize: a training graph (no batch-norm folding)")
    show.add_argument("--draw", metavar="PATH",
                      help="also write a drawing: .dot (DOT text) or .png/.svg (needs Graphviz)")


COMMANDS = {"graph": (cmd_graph, "graph files: show (text dump, key, DOT drawing)", _configure)}
