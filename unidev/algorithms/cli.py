"""``unidev autotune report|clear``: the persisted autotune decisions as a table (and a PNG)."""

from __future__ import annotations

import argparse
import sys

from .catalog import algorithms
from .spec import AlgorithmSpec
from .tune import cache_file, clear, decisions

__all__ = ["COMMANDS", "print_algorithms"]


def print_algorithms(plugin: str) -> None:
    """The plugin's algorithms per op, for ``unidev info NAME --algorithms``."""
    table = algorithms(plugin)
    print("  algorithms (besides 'auto', the plugin's heuristic, and 'autotune'):")
    if not table:
        print("    none listed (the plugin has no unidev_algorithms hook): only 'auto'")
    groups: dict[tuple, tuple[list[str], list[AlgorithmSpec]]] = {}  # same list: printed once
    for op, specs in table.items():
        key = tuple((s.name, s.description, s.dtypes, s.rule_text()) for s in specs)
        groups.setdefault(key, ([], specs))[0].append(op)
    for ops, specs in groups.values():
        print(f"    {', '.join(ops)}:")
        for s in specs:
            print(f"      {s.name:<10} {_dtypes(s):<16} {s.rule_text():<40} {s.description}")


def _dtypes(spec: AlgorithmSpec) -> str:
    return ",".join(spec.dtypes) if spec.dtypes else "all"


def _report(args: argparse.Namespace) -> int:
    rows = sorted(decisions().values(), key=lambda r: (r.get("plugin", ""), r.get("time", 0)))
    print(f"autotune decisions in {cache_file()}: {len(rows)}")
    if not rows:
        return 0
    print(f"{'plugin':<7} {'op':<23} {'layer':<14} {'input':<18} {'weight':<15} {'s/p/d/g':<12}"
          f" {'dtype':<8} {'best':<9} {'vs auto':<8} ms per algorithm")
    for r in rows:
        conf = f"{r['stride'][0]}/{r['padding'][0]}/{r['dilation'][0]}/{r['groups']}"
        times = " ".join(f"{n}={t:.3g}" for n, t in sorted(r["ms"].items(), key=lambda kv: kv[1]))
        refused = f"  refused: {', '.join(r['refused'])}" if r.get("refused") else ""
        gain = f"{r['auto_ms'] / r['ms'][r['best']]:.2f}x" if r.get("auto_ms") else "?"
        print(f"{r['plugin']:<7} {r['op']:<23} {str(r.get('layer', ''))[:14]:<14} "
              f"{'x'.join(map(str, r['input_shape'])):<18} "
              f"{'x'.join(map(str, r['weight_shape'])):<15} {conf:<12} {r['dtype']:<8} "
              f"{r['best']:<9} {gain:<8} {times}{refused}")
    if args.png:
        _chart(rows, args.png)
        print(f"chart: {args.png}")
    return 0


def _chart(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for r in rows for n in r["ms"]})
    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.6), 4))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        ax.bar([j + i * width for j in range(len(rows))], [r["ms"].get(name, 0) for r in rows],
               width, label=name)
    ax.set_xticks([j + 0.4 for j in range(len(rows))],
                  [f"{r.get('layer', '')}\n{r['op'].replace('conv2d_backward_', 'grad_')}"
                   for r in rows], rotation=90, fontsize=6)
    ax.set_ylabel("ms")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def cmd_autotune(args: argparse.Namespace) -> int:
    if args.action == "clear":
        print(f"forgot {clear()} autotune decision(s)")
        return 0
    try:
        return _report(args)
    except (OSError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _configure(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("action", choices=("report", "clear"),
                    help="report: print the persisted decisions; clear: forget them")
    sp.add_argument("--png", metavar="PATH", help="also write a chart of ms per algorithm per "
                    "layer (report)")


COMMANDS = {"autotune": (cmd_autotune, "autotune decisions: report (table, --png chart) or "
                         "clear", _configure)}
