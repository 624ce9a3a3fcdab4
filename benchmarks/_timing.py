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
        for name in names:
            _batch_time(case.impls[name], 1)  # warm-up: caches, primitive creation, thread pools
            # Sized from a second call: the first one's thread-pool start or wake-up could be
            # 100x a warm call and leave one-call batches that time only that latency.
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


def markdown_table(cases: Sequence[Case], impls: Sequence[str], base: str, subject: str,
                   ranges: dict[str, str] | None = None) -> str:
    """A markdown table: one row per case, rates per implementation and subject/base ratio;
    with `ranges` (case name -> text), a column of the ratio's range over process pairs."""
    head = ["group", "case", "unit", *impls, f"{subject} / {base}"]
    if ranges is not None:
        head.append("range over pairs")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cases:
        rates = [f"{c.rate(i):.1f}" if c.rate(i) is not None else "—" for i in impls]
        r = c.ratio(subject, base)
        cells = [c.group, c.name, c.unit, *rates, f"{r:.2f}×" if r is not None else "—"]
        if ranges is not None:
            cells.append(ranges.get(c.name, ""))
        lines.append("| " + " | ".join(cells) + " |")
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


# --- Processes: baselines and devices each in their own process, alternated -----------------

# A framework baseline process: no unidev plugin, no adapter (torch's entry point is skipped,
# discovery finds nothing; the TF child also keeps TF from scanning tensorflow-plugins/).
BASELINE_ENV = {"UNIDEV_DISABLE_PLUGIN_AUTOLOAD": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def shown_args(argv: Sequence[str]) -> str:
    """The command-line options that shape the numbers: argv without --out and --lock."""
    argv, shown = list(argv), []
    while argv:
        a = argv.pop(0)
        if a in ("--out", "--lock"):
            argv = argv[1:]
        elif not a.startswith(("--out=", "--lock=")):
            shown.append(a)
    return " ".join(shown)


def sig3(v: float) -> str:
    """Three significant digits, never an exponent (1.23, 45.6, 789, 3360)."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def fmt_range(values: Sequence[float], fmt: str | Callable[[float], str] = "{:.2f}",
              unit: str = "") -> str:
    """'a–b<unit>' over the values (min–max), one figure when they agree at that precision;
    `fmt` is a format string or a function of one value."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return "—"
    show = fmt.format if isinstance(fmt, str) else fmt
    lo, hi = show(min(vals)), show(max(vals))
    return f"{lo}{unit}" if lo == hi else f"{lo}–{hi}{unit}"


def pair_ratios(base: Sequence[float | None], dev: Sequence[float | None]) -> list[float]:
    """base[i] / dev[i] for each process pair that measured both (a speed-up when times)."""
    return [b / d for b, d in zip(base, dev, strict=False) if b and d]


def mapped_unidev_libraries() -> list[str]:
    """Shared libraries of unidev (plugins, adapters, unidev._C) mapped into this process."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    libs = {line.split()[-1] for line in maps.splitlines() if ".so" in line}
    return sorted(p for p in libs if "unidev" in Path(p).name or "/unidev/" in p)


def rotation(labels: Sequence[str], rounds: int) -> list[list[str]]:
    """The order of each round: the labels rotated by one per round (A B C, B C A, C A B...)."""
    return [[labels[(k + r) % len(labels)] for k in range(len(labels))] for r in range(rounds)]


def run_json(argv: list[str], env: dict[str, str]) -> tuple[dict | None, str]:
    """Runs one child process; its last stdout line parsed as JSON (None if it failed) and its
    stderr's tail."""
    import json
    import os
    import subprocess

    p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env})
    lines = p.stdout.strip().splitlines()
    if p.returncode == 0 and lines:
        try:
            return json.loads(lines[-1]), p.stderr[-3000:]
        except json.JSONDecodeError:
            pass
    return None, f"rc {p.returncode}: {p.stderr[-3000:]}"


def alternate(runs: Sequence[tuple[str, list[str], dict[str, str]]], pairs: int,
              lock: str | None = None, log: Callable[[str], None] | None = print,
              ) -> dict[str, list[dict | None]]:
    """Runs every (label, argv, extra env) once per round, `pairs` rounds, in `rotation` order
    (so no one always runs right after another), and returns per label the JSON object each run
    printed on its last stdout line (None for a failed run, stderr logged). Round i of every
    label forms pair i. With `lock`, each round holds an exclusive flock on that file (other
    benchmarks of a shared machine wait between rounds, not for the whole run)."""
    import contextlib
    import fcntl

    by_label = {label: (argv, env) for label, argv, env in runs}
    out: dict[str, list[dict | None]] = {label: [] for label in by_label}
    for r, order in enumerate(rotation(list(by_label), pairs)):
        with contextlib.ExitStack() as stack:
            if lock:
                fcntl.flock(stack.enter_context(open(lock, "a")), fcntl.LOCK_EX)
            for label in order:
                t0 = time.perf_counter()
                data, err = run_json(*by_label[label])
                if log:
                    log(f"round {r + 1}/{pairs} {label}: " + (
                        f"{time.perf_counter() - t0:.1f} s" if data else f"FAILED, {err}"))
                out[label].append(data)
    return out
