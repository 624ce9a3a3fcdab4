"""Graph-layer benchmark: fused vs unfused plans vs a copy, plan overhead per node, compile times.

    .venv/bin/python benchmarks/graph.py [--quick] [--device x86] [--lock FILE]
        [--out benchmarks/results]

Every implementation is a compiled plan (unidev.graph.compile) run through run_descriptors with
inputs and outputs prepared once, synchronized after each call, timed interleaved
(_timing.measure):
- elementwise chains of 2-8 ops on 1M-16M float32 elements: "fused" (the fuse pass makes one
  elementwise_program, the plugin's kernel_compile specializes it), "unfused" (one step per op),
  "copy" (a one-step plan of the plugin's copy op on the same tensor). Rates are GB/s of the
  chain's own traffic (input read + output written), the same figure for all three, so
  fused/copy is the share of a copy's bandwidth the chain reaches;
- conv2d + bias + relu at ResNet-18 layer shapes and gemm + bias + gelu at MLP shapes (GFLOP/s of
  the conv/gemm), fused (conv2d_bias_act, gemm_bias_act) vs the unfused three-step sequence;
- a 1,000-node chain of tiny adds: microseconds per node of a plan run (and of eager unidev.ops
  calls for contrast);
- compile times: first compile in a fresh UNIDEV_CACHE_DIR (generated kernels built), a memory
  cache hit, a plan-file hit on disk (memory cache cleared), and a compile in a new process with
  only the plugin's generated-kernel cache warm, or also the plan file.
Fused cases print "n/a (plugin lacks X)" when the plugin has no kernel for X. Writes
<out>/graph.md and graph.json (graph_quick.* with --quick). Machine figures (copy_bw.c, FMA peak)
come from _machine.py, measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # as run.py: numpy's workers sleep at once
# A fresh cache, so the first compile builds its generated kernels (removed at exit).
if "--child-compile" not in sys.argv:  # a child inherits the parent's cache
    _COLD = tempfile.TemporaryDirectory(prefix="unidev-graph-bench-")
    os.environ["UNIDEV_CACHE_DIR"] = _COLD.name

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import Machine  # noqa: E402
from _timing import RESULTS, Case, measure, shown_args  # noqa: E402

import unidev  # noqa: E402
from unidev import graph as ug  # noqa: E402
from unidev.graph import Graph  # noqa: E402

CHAIN_OPS = ("mul", "add", "relu", "neg", "abs", "mul", "maximum", "add")  # c: a constant operand
WITH_CONST = {"mul", "add", "maximum"}
RESNET18 = [(64, 56, 64), (128, 28, 128), (256, 14, 256), (512, 7, 512)]  # C, H=W, K; 3x3 pad 1
MLP = [(256, 1024, 1024), (256, 1024, 4096), (256, 4096, 1024)]  # M, K, N


class Bench:
    def __init__(self, device: str) -> None:
        self.device = unidev.core.device.device(device)
        self.lib = self.device.library
        self.rng = np.random.default_rng(0)

    def lacks(self, op: str) -> str | None:
        return None if self.lib.kernel(op, "float32") is not None else f"n/a (plugin lacks {op})"

    def runner(self, graph: Graph, optimize: bool):
        """(callable running the compiled plan to completion, the plan)."""
        cp = ug.compile(graph, self.device, optimize=optimize)
        ins = [unidev.DeviceArray.from_numpy(
            self.rng.standard_normal(v.shape).astype(np.float32), self.device)
            for v in graph.inputs]
        outs = cp.new_outputs()
        i_d, o_d = [a.descriptor() for a in ins], [a.descriptor() for a in outs]
        dev, lib = self.device.index, self.lib

        def call() -> None:
            cp.run_descriptors(i_d, o_d)
            lib.synchronize(dev)
        call.keep = (ins, outs)  # the arrays live as long as the callable
        return call, cp

    def chain(self, n_ops: int, size: int) -> Graph:
        g = Graph(f"chain{n_ops}")
        h = g.input((size,))
        for op in CHAIN_OPS[:n_ops]:
            h = g.call(op, h, g.const(np.float32(0.75))) if op in WITH_CONST else g.call(op, h)
        g.output(h)
        return g

    def copy(self, size: int) -> Graph:
        g = Graph("copy")
        g.output(g.call("copy", g.input((size,))))
        return g

    def conv(self, c: int, h: int, k: int) -> Graph:
        g = Graph("conv_bias_relu")
        w = g.const((self.rng.standard_normal((k, c, 3, 3)) * 0.05).astype(np.float32))
        b = g.const(self.rng.standard_normal((k, 1, 1)).astype(np.float32))
        x = g.input((1, c, h, h))
        g.output(g.call("relu", g.call("add", g.call("conv2d", x, w, padding=(1, 1)), b)))
        return g

    def gemm(self, m: int, k: int, n: int) -> Graph:
        g = Graph("gemm_bias_gelu")
        w = g.const((self.rng.standard_normal((k, n)) * 0.05).astype(np.float32))
        b = g.const(self.rng.standard_normal(n).astype(np.float32))
        g.output(g.call("gelu", g.call("add", g.call("matmul", g.input((m, k)), w), b)))
        return g


def fused_case(bench: Bench, group: str, name: str, graph: Graph, work: float, unit: str,
               fused_op: str, notes: list[str]) -> Case:
    impls = {}
    impls["unfused"], _ = bench.runner(graph, optimize=False)
    missing = bench.lacks(fused_op)
    if missing:
        notes.append(f"{group} {name}: fused {missing}")
        impls["fused"] = None
    else:
        try:
            impls["fused"], cp = bench.runner(graph, optimize=True)
        except unidev.core.errors.UnidevError as exc:  # e.g. kernel_compile refused the program
            notes.append(f"{group} {name}: fused failed: {exc}")
            impls["fused"] = None
            return Case(group, name, work, unit, impls)
        ops = [op for _, op in cp.steps]
        if fused_op not in ops:
            notes.append(f"{group} {name}: fused plan has no {fused_op} step ({ops})")
        elif cp.num_compiled:
            notes.append(f"{group} {name}: fused plan runs {cp.num_compiled} kernel_compile "
                         "specialization(s)")
    return Case(group, name, work, unit, impls)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    ap.add_argument("--device", default="x86")
    ap.add_argument("--lock", default="", help="hold this flock file while measuring")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--child-compile", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--persist", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_compile:  # one compile in this fresh process: print its seconds
        bench = Bench(args.device)
        g = bench.chain(4, args.child_compile)
        t0 = time.perf_counter()
        ug.compile(g, bench.device, persist=args.persist)
        print(time.perf_counter() - t0)
        return 0
    q = args.quick
    bench, notes, cases = Bench(args.device), [], []
    machine = Machine(tries=1 if q else 3)
    with contextlib.ExitStack() as stack:
        if args.lock:
            fcntl.flock(stack.enter_context(open(args.lock, "a")), fcntl.LOCK_EX)
        machine.measure()
        # compile times first: the cache is cold only once
        g4 = bench.chain(4, 1 << 16 if q else 1 << 20)
        t0 = time.perf_counter()
        first = ug.compile(g4, bench.device, cache=False, persist=True)
        compile_s = {"first compile (cold cache)": time.perf_counter() - t0}
        ug.compile(g4, bench.device)
        t0 = time.perf_counter()
        for _ in range(20):
            ug.compile(g4, bench.device)
        compile_s["memory cache hit"] = (time.perf_counter() - t0) / 20
        t0 = time.perf_counter()
        for _ in range(5):
            ug.cache.clear()
            ug.compile(g4, bench.device, persist=True)
        compile_s["plan file on disk"] = (time.perf_counter() - t0) / 5
        for persist in (False, True):  # a new process: only the disk caches are warm
            child = subprocess.run(
                [sys.executable, __file__, "--child-compile", str(g4.inputs[0].shape[0]),
                 "--device", args.device] + (["--persist"] if persist else []),
                capture_output=True, text=True, env=dict(os.environ), check=True)
            what = "plan file" if persist else "generated kernels only"
            compile_s[f"new process, {what} cached"] = float(child.stdout.split()[-1])
        compile_s["generated kernels in the plan"] = first.num_compiled
        ug.cache.clear()

        for size in ((1 << 16,) if q else (1 << 20, 1 << 22, 1 << 24)):
            copy, _ = bench.runner(bench.copy(size), optimize=False)
            for n in ((2, 4) if q else (2, 4, 8)):
                c = fused_case(bench, "elementwise", f"{n} ops, {size / 2**20:g}M",
                               bench.chain(n, size), 2 * 4 * size, "GB/s",
                               "elementwise_program", notes)
                c.impls["copy"] = copy
                cases.append(c)
        for c_, h, k in (RESNET18[-1:] if q else RESNET18):
            if q:
                c_, h, k = 8, 8, 8
            cases.append(fused_case(bench, "conv+b+relu", f"C{c_} {h}x{h} K{k}", bench.conv(
                c_, h, k), 2 * c_ * k * 9 * h * h, "GFLOP/s", "conv2d_bias_act", notes))
        for m, k, n in ([(16, 64, 64)] if q else MLP):
            cases.append(fused_case(bench, "gemm+b+gelu", f"{m}x{k}x{n}", bench.gemm(m, k, n),
                                    2 * m * k * n, "GFLOP/s", "gemm_bias_act", notes))
        measure(cases, reps=2 if q else 5, min_time=0.005 if q else 0.05)

        nodes = 1000
        g = Graph("tiny")
        h = g.input((8,))
        for i in range(nodes):
            h = g.call("add" if i % 2 else "mul", h, g.const(np.float32(1.0)))
        g.output(h)
        run, cp = bench.runner(g, optimize=False)
        assert len(cp.steps) == nodes, len(cp.steps)
        per_node = Case("overhead", f"{nodes} tiny ops", nodes, "Gnode/s", {"plan": run})
        x = unidev.DeviceArray.from_numpy(np.ones(8, np.float32), bench.device)
        one = unidev.DeviceArray.from_numpy(np.ones(1, np.float32), bench.device)

        def eager() -> None:
            y = x
            for i in range(nodes):
                y = unidev.ops.add(y, one) if i % 2 else unidev.ops.mul(y, one)
            bench.lib.synchronize(bench.device.index)
        per_node.impls["eager unidev.ops"] = eager
        measure([per_node], reps=2 if q else 5, min_time=0.01 if q else 0.2)
        machine.measure()

    lines = [f"# Graph layer on {bench.device} ({bench.lib.name} {bench.lib.version})", "",
             f"Command: `{shown_args(sys.argv)}`", "",
             *machine.lines(), ""]
    lines += ["| group | case | fused | unfused | copy | fused/unfused | fused/copy |",
              "|---|---|---|---|---|---|---|"]

    def fmt(v):
        return "—" if v is None else f"{v:.3g}"
    rows = []
    for c in cases:
        fu, un, cp_ = c.rate("fused"), c.rate("unfused"), c.rate("copy")
        r = {"group": c.group, "case": c.name, "unit": c.unit, "fused": fu, "unfused": un,
             "copy": cp_, "fused/unfused": c.ratio("fused", "unfused"),
             "fused/copy": None if fu is None or cp_ is None else fu / cp_}
        rows.append(r)
        lines.append(f"| {c.group} | {c.name} | {fmt(fu)} | {fmt(un)} | {fmt(cp_)} | "
                     f"{fmt(r['fused/unfused'])} | {fmt(r['fused/copy'])} |")
    us = {k: per_node.seconds[k] / nodes * 1e6 for k in per_node.seconds}
    lines += ["", "Rates: GB/s (elementwise: input read + output written) or GFLOP/s "
              "(conv/gemm); ratios >1 mean fused is faster.", "",
              f"Plan execution, {nodes}-node chain of 8-element ops: "
              + ", ".join(f"{k} {v:.2f} µs/node" for k, v in us.items()), "",
              "Compile (4-op chain): " + ", ".join(
                  f"{k} {v * 1e3:.2f} ms" if isinstance(v, float) else f"{k}: {v}"
                  for k, v in compile_s.items())]
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "graph_quick" if q else "graph"
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps(
        {"cases": rows, "us_per_node": us, "compile": compile_s, "notes": notes,
         "machine": {"copy_GBs": machine.copy, "peak_GFLOPs": machine.peak,
                     "loads": machine.loads}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
