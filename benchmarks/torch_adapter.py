"""PyTorch adapter benchmark: torch CPU and each unidev device in their own processes, alternated.

    .venv/bin/python benchmarks/torch_adapter.py [--quick] [--pairs 3] [--plugins x86,aurora]
        [--rows tiny,mlp,mlp-fused,convnet,convnet-fused,convnet-cl,depthwise,resnet18]
        [--threads N]
        [--lock FILE]

Rows: 10k tiny adds (per-op overhead), and training steps (forward, cross-entropy, backward,
SGD momentum 0.9) of the models in benchmarks/models.py: the MLP, the ResNet-style conv-net,
the depthwise-heavy net and resnet18 at 224²; `-fused` rows use `SGD(fused=True)`, the others
torch's default (foreach for a PrivateUse1 device, for-loop on the CPU); `convnet-cl` is the
conv-net in `torch.channels_last` (model and input) on both sides, and the report gives each
device's channels-last step against its NCHW step from the same process.

Each round runs one torch CPU process (unidev's autoload off: `UNIDEV_DISABLE_PLUGIN_AUTOLOAD=1
TORCH_DEVICE_BACKEND_AUTOLOAD=0`, checked: no unidev library mapped) and one process per plugin
(`UNIDEV_PLUGINS=<plugin> UNIDEV_TORCH_DEVICE=<plugin>`: one plugin loaded), in an order that
rotates per round; a process times each row as the best of several steps after warm-up, and
round i's CPU and device processes form pair i. Reported: ratios CPU time / device time as
min–max over the pairs, the CPU fallbacks of one step per row, the load average, the FMA peak
and copy bandwidth measured in the same run. Writes <out>/torch_adapter.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import Machine  # noqa: E402
from _timing import (  # noqa: E402
    BASELINE_ENV,
    RESULTS,
    alternate,
    fmt_range,
    mapped_unidev_libraries,
    pair_ratios,
    shown_args,
    sig3,
)

ROW_KEYS = ("tiny", "mlp", "mlp-fused", "convnet", "convnet-fused", "convnet-cl", "depthwise",
            "resnet18")


def _steps(run, min_steps: int, min_time: float) -> list[float]:
    """Per-step seconds of at least `min_steps` steps lasting together at least `min_time`."""
    times: list[float] = []
    t_end = time.perf_counter() + min_time
    while len(times) < min_steps or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return times


def _child(quick: bool, keys: list[str]) -> None:
    import models
    import torch
    import torch.nn.functional as F

    baseline = os.environ.get("UNIDEV_DISABLE_PLUGIN_AUTOLOAD") == "1"
    if baseline:
        dev, ut, sync = "cpu", None, lambda: None
    else:
        import unidev.torch as ut

        dev = ut.load()
        sync = getattr(torch, dev).synchronize

    def tiny():
        a, b = torch.ones(8, device=dev), torch.ones(8, device=dev)

        def run():
            for _ in range(10_000):
                a + b
            sync()
        return run

    def step(row, fused: bool, channels_last: bool = False):
        torch.manual_seed(0)  # the same weights in every process
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        m = row.build().to(dev).to(memory_format=fmt)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, fused=fused or None)
        x, y = row.data()
        x, y = x.contiguous(memory_format=fmt).to(dev), y.to(dev)

        def run():
            loss = F.cross_entropy(m(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sync()
        return run

    rows = {r.key: r for r in models.rows(quick)}
    out = {}
    for key in keys:
        base = key.removesuffix("-fused").removesuffix("-cl")
        if base == "tiny":
            run, title = tiny(), "tiny add, 8 floats (10k calls)"
        else:
            run = step(rows[base], key.endswith("-fused"), key.endswith("-cl"))
            title = rows[base].title + (", SGD fused=True" if key.endswith("-fused") else "") + (
                ", channels_last" if key.endswith("-cl") else "")
        for _ in range(1 if quick else 2):  # warm-up: allocator, primitives, momentum buffers
            run()
        fallbacks = {}
        if ut is not None:  # one step's CPU fallbacks
            ut.reset_fallbacks()
            run()
            fallbacks = ut.fallback_report()
        big = base == "resnet18"
        times = _steps(run, 1 if quick else 2 if big else 3,
                       0.1 if quick else 2.0 if big else 1.0)
        out[key] = {"title": title, "best_s": min(times), "median_s": statistics.median(times),
                    "steps": len(times), "fallbacks": fallbacks}
    print(json.dumps({"device": dev, "plugin": "" if ut is None else os.environ.get(
        "UNIDEV_TORCH_DEVICE", ""), "torch": torch.__version__, "threads": torch.get_num_threads(),
        "unidev_libraries": mapped_unidev_libraries(), "rows": out}))


def table(runs: dict[str, list[dict | None]], plugins: list[str], keys: list[str]) -> list[str]:
    """Markdown rows: per case, torch CPU best-step ms (range over processes), then per plugin
    its ms range and the speed-up range (CPU / device, pair by pair)."""
    cpu = runs["cpu"]
    devs = {p: next((d["device"] for d in runs[p] if d), p) for p in plugins}
    head = ["case", "torch CPU (ms)"] + [f"{p} `{devs[p]}` (ms)" for p in plugins] + [
        f"{p} speed-up" for p in plugins]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        def best(results, key=key):
            return [d["rows"][key]["best_s"] if d and key in d["rows"] else None for d in results]
        title = next((d["rows"][key]["title"] for d in cpu if d and key in d["rows"]), key)
        cells = [title, fmt_range([t * 1e3 for t in best(cpu) if t], sig3)]
        cells += [fmt_range([t * 1e3 for t in best(runs[p]) if t], sig3) for p in plugins]
        cells += [fmt_range(pair_ratios(best(cpu), best(runs[p])), unit="×") for p in plugins]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def layout_lines(runs: dict[str, list[dict | None]], plugins: list[str],
                 keys: list[str]) -> list[str]:
    """Per plugin: its channels-last conv-net step against its NCHW one, process by process."""
    if "convnet-cl" not in keys or "convnet" not in keys:
        return []
    out = []
    for p in plugins:
        ratios = [d["rows"]["convnet"]["best_s"] / d["rows"]["convnet-cl"]["best_s"]
                  for d in runs[p] if d]
        out.append(f"- {p}: conv-net step NCHW time / channels_last time in the same process: "
                   f"{fmt_range(ratios, unit='×')} (> 1: channels_last is faster)")
    return out


def fallback_lines(runs: dict[str, list[dict | None]], plugins: list[str],
                   keys: list[str]) -> list[str]:
    """One line per plugin: the aten ops of each row that ran on the CPU in one step."""
    out = []
    for p in plugins:
        d = next((d for d in runs[p] if d), None)
        if d is None:
            continue
        parts = []
        for key in keys:
            fb = d["rows"].get(key, {}).get("fallbacks", {})
            parts.append(f"{key}: " + (", ".join(f"{op} ×{n}" for op, n in fb.items())
                                       if fb else "none"))
        out.append(f"- CPU fallbacks per step on {p}: " + "; ".join(parts))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small batches, one pair: a smoke run")
    p.add_argument("--pairs", type=int, default=0, help="process pairs (default 3, quick 1)")
    p.add_argument("--plugins", default="", help="comma-separated plugins (default: all usable)")
    p.add_argument("--rows", default=",".join(ROW_KEYS), help="comma-separated rows")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--threads", type=int, default=0, help="threads of torch and the plugins "
                   "(OMP_NUM_THREADS, UNIDEV_X86_THREADS; default: torch's default, all cores)")
    p.add_argument("--lock", default="", help="hold this flock file during each round")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    keys = [k for k in args.rows.split(",") if k]
    if bad := [k for k in keys if k not in ROW_KEYS]:
        p.error(f"--rows: unknown {', '.join(bad)}; expected some of {', '.join(ROW_KEYS)}")
    if args.child:
        _child(args.quick, keys)
        return 0
    from unidev.core import discovery

    plugins = [n for n in args.plugins.split(",") if n] or [
        r.name for r in discovery.discover() if r.usable]
    pairs = args.pairs or (1 if args.quick else 3)
    child = [sys.executable, __file__, "--child", "--rows", ",".join(keys)] + (
        ["--quick"] if args.quick else [])
    threads = {"OMP_NUM_THREADS": str(args.threads), "UNIDEV_X86_THREADS": str(args.threads)
               } if args.threads else {}
    procs = [("cpu", child, {**BASELINE_ENV, **threads})] + [
        (n, child, {"UNIDEV_PLUGINS": n, "UNIDEV_TORCH_DEVICE": n, **threads}) for n in plugins]
    machine = Machine(threads=args.threads or os.cpu_count() or 1, tries=1 if args.quick else 3)
    machine.measure()
    t0 = time.perf_counter()
    runs = alternate(procs, pairs, lock=args.lock or None, log=lambda s: print(s, file=sys.stderr))
    machine.measure()
    leaked = {lib for d in runs["cpu"] if d for lib in d["unidev_libraries"]}
    if not any(runs["cpu"]) or leaked:
        print(f"torch CPU baseline failed or not clean (unidev libraries mapped: {leaked})",
              file=sys.stderr)
        return 1
    cpu0 = next(d for d in runs["cpu"] if d)
    cmd = "benchmarks/torch_adapter.py " + shown_args(sys.argv[1:])
    lines = [f"Measured by `.venv/bin/python {cmd.strip()}` ({time.strftime('%Y-%m-%d %H:%M')} "
             f"UTC, {time.perf_counter() - t0:.0f} s): torch {cpu0['torch']}, "
             f"{cpu0['threads']} threads, {pairs} round{'s' if pairs > 1 else ''} of one torch CPU "
             "process (unidev "
             "autoload off; no unidev library mapped) and one process per plugin, alternated; "
             "each figure the best step of its process, ranges over the processes, speed-up = "
             "CPU time / device time pair by pair (> 1: the device is faster).", "",
             *machine.lines(), *fallback_lines(runs, plugins, keys),
             *layout_lines(runs, plugins, keys), "",
             *table(runs, plugins, keys)]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "torch_adapter" + ("_quick" if args.quick else "")
    (args.out / f"{name}.md").write_text(text)
    (args.out / f"{name}.json").write_text(json.dumps(
        {"machine": machine.__dict__, "pairs": pairs, "runs": runs}, indent=1) + "\n")
    ok = all(all(runs[n]) for n in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
