"""Shared helpers of unidev's benchmarks: interleaved timing, ratio tables, markdown and plots."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Case:
    """One measured problem: the same work done by several implementations.

    `work` is the flops (unit "GFLOP/s") or bytes moved (unit "GB/s") of one call; `impls` maps
    an implementation name ("unidev", "torch", "numpy") to a zero-argument callable that runs one
    call to completion, or None when that implementation lacks the op (shown as "—").
    `seconds` is filled by `measure`.
    """

    group: str
    name: str
    work: float
    unit: str
    impls: dict[str, Callable[[], object] | None]
    seconds: dict[str, float] = field(default_factory=dict)

    def rate(self, impl: str) -> float | None:
        """Work per second of `impl` in the case's unit (1e9 scale), or None if not measured."""
        t = self.seconds.get(impl)
        return None if t is None else self.work / t / 1e9

    def ratio(self, impl: str, base: str) -> float | None:
        """How many times faster `impl` is than `base` (base time / impl time)."""
        a, b = self.seconds.get(impl), self.seconds.get(base)
        return None if a is None or b is None else b / a


def _batch_time(fn: Callable[[], object], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def measure(cases: Sequence[Case], reps: int = 5, min_time: float = 0.02,
            log: Callable[[str], None] | None = print) -> None:
    """Times every implementation of every case, interleaved: within a case the implementations
    take turns (in a rotating order) for `reps` rounds, each round a batch of calls lasting about
    `min_time`; the best round counts. Interleaving exposes every implementation to the same
    machine state (other processes, clock, caches of the other libraries' thread pools)."""
    for case in cases:
        names = [n for n, f in case.impls.items() if f is not None]
        batch = {}
        for name in names:  # warm-up: caches, primitive creation, thread pools
            single = _batch_time(case.impls[name], 1)
            batch[name] = max(1, min(1000, int(min_time / max(single, 1e-7))))
        best = dict.fromkeys(names, math.inf)
        for r in range(reps):
            for k in range(len(names)):
                name = names[(k + r) % len(names)]
                best[name] = min(best[name], _batch_time(case.impls[name], batch[name]))
        case.seconds = best
        if log:
            rates = "  ".join(f"{n} {case.rate(n):8.1f}" for n in names)
            log(f"{case.group:>12} {case.name:<34} {rates}  {case.unit}")


def geomean(values: Sequence[float]) -> float:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")


def markdown_table(cases: Sequence[Case], impls: Sequence[str], base: str, subject: str) -> str:
    """A markdown table: one row per case, rates per implementation and subject/base ratio."""
    head = ["group", "case", "unit", *impls, f"{subject} / {base}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cases:
        rates = [f"{c.rate(i):.1f}" if c.rate(i) is not None else "—" for i in impls]
        r = c.ratio(subject, base)
        lines.append("| " + " | ".join([c.group, c.name, c.unit, *rates,
                                        f"{r:.2f}×" if r is not None else "—"]) + " |")
    return "\n".join(lines)


def ratio_plot(path: Path, cases: Sequence[Case], subject: str, base: str, title: str) -> None:
    """Horizontal bars of subject/base speed ratios (log scale), one per case."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(f"{c.group}: {c.name}", c.ratio(subject, base)) for c in cases]
    rows = [(n, r) for n, r in rows if r is not None]
    fig, ax = plt.subplots(figsize=(9, 0.22 * len(rows) + 1.5))
    colors = ["tab:green" if r >= 1 else "tab:red" for _, r in rows]
    ax.barh(range(len(rows)), [r for _, r in rows], color=colors)
    ax.set_yticks(range(len(rows)), [n for n, _ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel(f"speed ratio {subject} / {base} (higher is better)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
