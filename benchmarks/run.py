"""Kernel benchmark of a host-memory unidev plugin (default x86) vs torch CPU vs numpy.

    .venv/bin/python benchmarks/run.py [--quick] [--device x86] [--pairs 3] [--threads N]
        [--algos auto,onednn,winograd|all] [--lock FILE] [--out benchmarks/results]

Baselines and the plugin run in their own processes, alternated (baseline, plugin, plugin,
baseline, ...; `--pairs` rounds): a baseline process times torch and numpy with unidev's
autoload off and no unidev library mapped (checked), a plugin process times the plugin through
unidev._C kernels with descriptors prepared once (what the framework adapters do per call; a few
microseconds of pybind11 conversion remain) and runs no torch kernel, so Python-side checks of
unidev.ops stay out of the numbers and neither library's state (thread pools, OpenMP runtimes,
allocators) can touch the other's figures. Rates are the best over all processes; ratios are
given per pair as min–max. Writes <out>/<device>.md (full table), <out>/<device>_summary.md
(README's table), <out>/<device>.json and <out>/<device>.png (ratios vs torch).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path


def _set_threads_from_argv() -> None:
    """OpenMP (oneDNN, torch) and the x86 pool read their thread counts once, at start-up.
    Torch runs as plain torch CPU here: the unidev adapter is not autoloaded at import."""
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    # OpenBLAS workers (numpy's copy among them) busy-wait ~2^28 cycles after each call: in an
    # interleaved run they took a core from whichever library ran next (unidev's sgemm 1024:
    # 96 GFLOP/s right after numpy's, 201 with this). 2^4 cycles: they sleep at once.
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    if "--threads" in sys.argv:
        n = sys.argv[sys.argv.index("--threads") + 1]
        os.environ["OMP_NUM_THREADS"] = os.environ["UNIDEV_X86_THREADS"] = n


_set_threads_from_argv()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import Machine  # noqa: E402
from _timing import (  # noqa: E402
    BASELINE_ENV,
    RESULTS,
    Case,
    alternate,
    fmt_range,
    geomean,
    mapped_unidev_libraries,
    markdown_table,
    measure,
    ratio_plot,
    shown_args,
    sig3,
)

# ResNet-18 at 224x224: every distinct conv layer as (C, H, K, kernel, stride, padding).
RESNET18_CONVS = [
    (3, 224, 64, 7, 2, 3),
    (64, 56, 64, 3, 1, 1),
    (64, 56, 128, 3, 2, 1), (128, 28, 128, 3, 1, 1), (64, 56, 128, 1, 2, 0),
    (128, 28, 256, 3, 2, 1), (256, 14, 256, 3, 1, 1), (128, 28, 256, 1, 2, 0),
    (256, 14, 512, 3, 2, 1), (512, 7, 512, 3, 1, 1), (256, 14, 512, 1, 2, 0),
]
CONV_ALGOS = ("auto", "onednn", "im2col", "winograd", "direct")
# The default set: "direct" and "im2col" are the plugin's slow fallbacks, and timing them on every
# ResNet-18 layer took most of a full run (a 112 s plugin process of 131 s a round).
DEFAULT_ALGOS = ("auto", "onednn", "winograd")


class Plugin:
    """Prepared calls into one plugin device; inactive (a baseline process): no unidev code runs,
    arrays and calls are None."""

    def __init__(self, device: str, active: bool = True) -> None:
        self.device = device
        self.active = active
        self.rng = np.random.default_rng(0)

    def array(self, a: np.ndarray):
        if not self.active:
            return None
        import unidev

        return unidev.DeviceArray.from_numpy(np.ascontiguousarray(a), device=self.device)

    def prepared(self, op: str, *inputs, **attrs) -> Callable[[], None] | None:
        """A callable running `op` through the plugin kernel, outputs allocated once; None when
        the plugin has no kernel for it or the plugin is inactive."""
        if not self.active:
            return None
        from unidev.contract import opset
        from unidev.core import ops as uops
        from unidev.core import shapes
        from unidev.core.errors import UnsupportedError

        try:
            outs = uops.call(op, *inputs, **attrs)  # validates and allocates once
        except UnsupportedError as e:
            print(f"skipped: {e}")
            return None
        outs = outs if isinstance(outs, tuple) else (outs,)
        schema = opset.get(op)
        inputs = inputs + (None,) * (len(schema.inputs) - len(inputs))
        full = uops.normalize_attrs(schema, attrs)
        _, targets = shapes.infer(schema, [x.shape if x is not None else None for x in inputs],
                                  full, None)
        views = [x.broadcast_to(t) if x is not None and t is not None and x.shape != t else x
                 for x, t in zip(inputs, targets, strict=False)] if targets else list(inputs)
        dev = inputs[0].device
        kernel = uops.kernel_for(dev, op, inputs[0].dtype)
        ins = [v.descriptor() if v is not None else None for v in views]
        out_desc = [o.descriptor() for o in outs]
        attr_list = [(a.name, a.type, full[a.name]) for a in schema.attrs]
        keep = (inputs, outs)  # keep device buffers alive as long as the callable

        def run(_keep=keep) -> None:
            kernel(dev.index, ins, out_desc, attr_list, 0)

        return run


def elementwise_cases(p: Plugin, n: int) -> list[Case]:
    label = f"{n >> 20}M"
    a, b = (p.rng.standard_normal(n).astype(np.float32) for _ in range(2))
    ua, ub = p.array(a), p.array(b)
    ta, tb, to = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n)
    o = np.empty(n, np.float32)
    cases = [Case("copy", f"copy {label}", 8.0 * n, "GB/s", {
        "unidev": p.prepared("copy", ua), "torch": lambda: to.copy_(ta),
        "numpy": lambda: np.copyto(o, a)})]
    binary = [
        ("add", lambda: torch.add(ta, tb, out=to), lambda: np.add(a, b, out=o)),
        ("mul", lambda: torch.mul(ta, tb, out=to), lambda: np.multiply(a, b, out=o)),
    ]
    unary = [
        ("relu", lambda: torch.clamp_min(ta, 0, out=to), lambda: np.maximum(a, 0, out=o)),
        ("exp", lambda: torch.exp(ta, out=to), lambda: np.exp(a, out=o)),
    ]
    for op, tf, nf in binary:
        cases.append(Case("elementwise", f"{op} {label}", 12.0 * n, "GB/s",
                          {"unidev": p.prepared(op, ua, ub), "torch": tf, "numpy": nf}))
    for op, tf, nf in unary:
        cases.append(Case("elementwise", f"{op} {label}", 8.0 * n, "GB/s",
                          {"unidev": p.prepared(op, ua), "torch": tf, "numpy": nf}))
    return cases


def memory_cases(p: Plugin, quick: bool) -> list[Case]:
    cases = []
    for n in [1 << 20] if quick else [1 << 20, 1 << 24]:
        cases += elementwise_cases(p, n)
    rows = 4096 if not quick else 1024
    m = p.rng.standard_normal((rows, 4096)).astype(np.float32)
    um, tm = p.array(m), torch.from_numpy(m)
    tsum, tmax, tsm = torch.empty(()), torch.empty(rows), torch.empty(rows, 4096)
    om = np.empty(rows, np.float32)
    cases += [
        Case("reduction", f"sum all {rows}x4096", 4.0 * m.size, "GB/s", {
            "unidev": p.prepared("sum", um), "torch": lambda: torch.sum(tm, dim=(0, 1), out=tsum),
            "numpy": lambda: np.sum(m)}),
        Case("reduction", f"max rows {rows}x4096", 4.0 * m.size, "GB/s", {
            "unidev": p.prepared("max", um, axes=(1,)),
            "torch": lambda: torch.amax(tm, dim=1, out=tmax),
            "numpy": lambda: np.max(m, axis=1, out=om)}),
        Case("softmax", f"softmax rows {rows}x4096", 8.0 * m.size, "GB/s", {
            "unidev": p.prepared("softmax", um, axis=-1),
            "torch": lambda: torch.softmax(tm, dim=-1, out=tsm),
            "numpy": lambda: _np_softmax(m)}),
    ]
    x = p.rng.standard_normal((8, 64, 112, 112)).astype(np.float32)
    ux, tx = p.array(x), torch.from_numpy(x)
    cases.append(Case("pool", "max_pool2d 3x3/2 8x64x112²", 7.0 * x.size, "GB/s", {
                          "unidev": p.prepared("max_pool2d", ux, kernel_size=(3, 3), stride=(2, 2),
                                               padding=(1, 1)),
                          "torch": lambda: F.max_pool2d(tx, 3, 2, 1, return_indices=True)}))
    x = p.rng.standard_normal((8, 64, 56, 56)).astype(np.float32)
    ux, tx = p.array(x), torch.from_numpy(x)
    c = 64
    w, bias = np.ones(c, np.float32), np.zeros(c, np.float32)
    rm, rv = np.zeros(c, np.float32), np.ones(c, np.float32)
    uw, ub, urm, urv = p.array(w), p.array(bias), p.array(rm), p.array(rv)
    tw, tbias, trm, trv = (torch.from_numpy(v.copy()) for v in (w, bias, rm, rv))
    cases.append(Case("norm", "batch_norm train 8x64x56²", 12.0 * x.size, "GB/s", {
        "unidev": p.prepared("batch_norm", ux, uw, ub, urm, urv, training=True),
        "torch": lambda: F.batch_norm(tx, trm, trv, tw, tbias, training=True)}))
    return cases


def _np_softmax(m: np.ndarray) -> np.ndarray:
    e = np.exp(m - m.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def gemm_cases(p: Plugin, quick: bool) -> list[Case]:
    cases = []
    for n in (256, 512, 1024) if quick else (256, 512, 1024, 2048):
        a, b = (p.rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        ta, tb, to = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n, n)
        o = np.empty((n, n), np.float32)
        cases.append(Case("sgemm", f"sgemm {n}", 2.0 * n**3, "GFLOP/s", {
            "unidev": p.prepared("matmul", p.array(a), p.array(b)),
            "torch": lambda ta=ta, tb=tb, to=to: torch.matmul(ta, tb, out=to),
            "numpy": lambda a=a, b=b, o=o: np.matmul(a, b, out=o)}))
    return cases


def conv_layer_cases(p: Plugin, layer: tuple, batch: int, algos: tuple[str, ...]) -> list[Case]:
    c, h, k, r, s, pad = layer
    x = p.rng.standard_normal((batch, c, h, h)).astype(np.float32)
    w = (p.rng.standard_normal((k, c, r, r)) / np.sqrt(c * r * r)).astype(np.float32)
    oh = (h + 2 * pad - r) // s + 1
    gy = p.rng.standard_normal((batch, k, oh, oh)).astype(np.float32)
    tx, tw, tgy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(gy)
    ux, uw, ugy = p.array(x), p.array(w), p.array(gy)
    flops = 2.0 * batch * k * c * r * r * oh * oh
    st, pd = (s, s), (pad, pad)

    def torch_bwd(mask: list[bool]) -> tuple:
        return torch.ops.aten.convolution_backward(tgy, tx, tw, None, st, pd, (1, 1), False,
                                                   (0, 0), 1, mask)

    torch_impl = {
        "fwd": lambda: F.conv2d(tx, tw, None, st, pd),
        "bwd_input": lambda: torch_bwd([True, False, False]),
        "bwd_weight": lambda: torch_bwd([False, True, False]),
    }
    cases = []
    for direction, op, ins, extra in [
        ("fwd", "conv2d", (ux, uw), {}),
        ("bwd_input", "conv2d_backward_input", (ugy, uw), {"input_shape": x.shape}),
        ("bwd_weight", "conv2d_backward_weight", (ugy, ux), {"weight_shape": w.shape}),
    ]:
        impls = {"torch": torch_impl[direction]}
        for algo in algos:
            if algo != "winograd" or (r == 3 and s == 1):
                impls[f"unidev:{algo}"] = p.prepared(op, *ins, stride=st, padding=pd,
                                                     algorithm=algo, **extra)
        cases.append(Case("conv2d", f"{direction} {c}x{h}² → {k} {r}x{r}/{s}", flops, "GFLOP/s",
                          impls))
    return cases


def conv_cases(p: Plugin, quick: bool, batch: int, algos: tuple[str, ...]) -> list[Case]:
    layers = RESNET18_CONVS[1:3] if quick else RESNET18_CONVS
    return [case for layer in layers for case in conv_layer_cases(p, layer, batch, algos)]


def conv_summary(cases: list[Case]) -> tuple[str, float]:
    """Per-layer fwd+bwd ratios (sum of the three times) of each algorithm vs torch."""
    layers: dict[str, list[Case]] = {}
    for c in cases:
        layers.setdefault(c.name.split(" ", 1)[1], []).append(c)
    algos = [f"unidev:{a}" for a in CONV_ALGOS if any(f"unidev:{a}" in c.seconds for c in cases)]
    lines = ["| layer (batch 8) | " + " | ".join(a.split(":")[1] for a in algos) + " |",
             "|---|" + "---|" * len(algos)]
    per_algo: dict[str, list[float]] = {a: [] for a in algos}
    for name, cs in layers.items():
        row = []
        t_torch = sum(c.seconds["torch"] for c in cs)
        for a in algos:
            if all(a in c.seconds for c in cs):
                ratio = t_torch / sum(c.seconds[a] for c in cs)
                per_algo[a].append(ratio)
                row.append(f"{ratio:.2f}×")
            else:
                row.append("—")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    gm = {a: geomean(v) for a, v in per_algo.items()}
    lines.append("| **geometric mean** | " + " | ".join(
        f"**{gm[a]:.2f}×**" if per_algo[a] else "—" for a in algos) + " |")
    return "\n".join(lines), gm["unidev:auto"]


def bandwidth_fractions(memory: list[Case]) -> list[tuple[Case, float]]:
    """unidev's rate of each elementwise and reduction case over the best copy rate (any
    implementation) at the same working-set size: 1M-element cases (4 MB operands, L3-resident)
    against copy 1M, the 16M-element cases and the 4096x4096 reductions (64 MB, DRAM) against
    copy 16M. Comparing every case with the single best copy would hold DRAM-bound cases to an
    L3 copy rate."""
    copies = {c.name.split()[-1]: max(c.rate(i) for i in c.seconds)
              for c in memory if c.group == "copy"}
    out = []
    for c in memory:
        if c.group in ("elementwise", "reduction") and c.rate("unidev") is not None:
            size = c.name.split()[-1] if c.group == "elementwise" else "16M"
            if size in copies:
                out.append((c, c.rate("unidev") / copies[size]))
    return out


def build_cases(p: Plugin, quick: bool, batch: int, algos: tuple[str, ...],
                ) -> tuple[list[Case], list[Case], list[Case]]:
    return memory_cases(p, quick), gemm_cases(p, quick), conv_cases(p, quick, batch, algos)


def _child(args: argparse.Namespace, role: str) -> None:
    """One process's measurements: role "baseline" (torch, numpy) or "plugin" (unidev), as JSON."""
    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    p = Plugin(args.device, active=role == "plugin")
    reps, min_time = (2, 0.005) if args.quick else (2, 0.03)
    reps = args.reps or reps
    groups = build_cases(p, args.quick, args.batch, tuple(args.algos.split(",")))
    for cases in groups:
        for c in cases:  # each process runs only its own side
            c.impls = {n: f for n, f in c.impls.items() if (n.startswith("unidev")) == p.active}
    measure(groups[0], reps, min_time, log=None)
    measure(groups[1], reps, min_time, log=None)
    measure(groups[2], max(1, reps - 1) if args.quick else reps, min_time, log=None)
    print(json.dumps({"role": role, "torch": torch.__version__, "numpy": np.__version__,
                      "threads": threads, "unidev_libraries": mapped_unidev_libraries(),
                      "cases": [[c.group, c.name, c.work, c.unit, c.seconds]
                                for cases in groups for c in cases]}))


def merged(results: list[dict]) -> tuple[list[Case], list[Case], list[Case]]:
    """The cases of child results, each implementation's best time over them."""
    cases: dict[tuple[str, str], Case] = {}
    for d in results:
        for group, name, work, unit, seconds in d["cases"]:
            c = cases.setdefault((group, name), Case(group, name, work, unit, {}))
            for impl, t in seconds.items():
                c.seconds[impl] = min(t, c.seconds.get(impl, t))
    all_cases = list(cases.values())
    conv = [c for c in all_cases if c.group == "conv2d"]
    gemm = [c for c in all_cases if c.group == "sgemm"]
    memory = [c for c in all_cases if c.group not in ("conv2d", "sgemm")]
    for c in conv:  # the plain table shows the "auto" choice; the summary shows every algorithm
        if "unidev:auto" in c.seconds:
            c.seconds["unidev"] = c.seconds["unidev:auto"]
    return memory, gemm, conv


def summary(memory: list[Case], gemm: list[Case], conv: list[Case]) -> dict[str, float]:
    """The headline ratios of one set of measurements (unidev / torch speed)."""
    out = {"sgemm": geomean([c.ratio("unidev", "torch") for c in gemm]),
           "conv": conv_summary(conv)[1],
           "memory": geomean([c.ratio("unidev", "torch") for c in memory
                              if c.group in ("elementwise", "reduction")])}
    for c in memory + gemm + conv:
        out[c.name] = c.ratio("unidev", "torch")
    return out


def readme_summary(memory: list[Case], gemm: list[Case], conv: list[Case],
                   per_pair: list[dict[str, float]], machine: Machine, low: tuple) -> str:
    """README's table: rates (best over the processes) and ratio ranges over the pairs."""
    def rng(key: str) -> str:
        return fmt_range([d.get(key) for d in per_pair], unit="×")

    def rate(name: str, impl: str) -> str:
        c = next((c for c in memory + gemm + conv if c.name == name), None)
        r = c.rate(impl) if c else None
        return "—" if r is None else sig3(r)

    def rates(names: list[str], impl: str) -> str:
        return " / ".join(rate(n, impl) for n in names)

    def ranges(names: list[str]) -> str:
        return " / ".join(rng(n) for n in names)

    sizes = [c.name.split()[-1] for c in gemm]
    stem = [c.name for c in conv if c.name.endswith("7x7/2")
            and not c.name.startswith("bwd_weight")]
    names = [c.name for c in gemm]
    rows = ["| case | unidev | torch | ratio (range over pairs) |", "|---|---|---|---|"]
    if machine.peak:
        rows.append(f"| FP32 FMA peak, {machine.threads} threads (`benchmarks/fma_peak.c`, "
                    f"same run) | {machine.peak:.0f} GFLOP/s | | |")
    rows += [f"| copy bandwidth at {k} (`benchmarks/copy_bw.c`, same run) | {v:.0f} GB/s | | |"
             for k, v in machine.copy.items()]
    rows += [f"| sgemm {' / '.join(sizes)} (GFLOP/s) | {rates(names, 'unidev')} | "
             f"{rates(names, 'torch')} | geomean {rng('sgemm')} |",
             f"| ResNet-18 conv layers, fwd + both bwd, `auto` | | | geomean {rng('conv')} |"]
    if stem:
        rows.append(f"| conv 7×7/2 stem fwd / bwd-input (GFLOP/s) | {rates(stem, 'unidev')} | "
                    f"{rates(stem, 'torch')} | {ranges(stem)} |")
    rows.append("| elementwise + reductions (add, mul, relu, exp, sum, max) | | | geomean "
                f"{rng('memory')} |")
    if low[0] is not None:
        rows.append(f"| lowest fraction of a same-size copy's bandwidth (exp excluded) | "
                    f"{low[1]:.0%} ({low[0].name}) | | |")
    for group in (["copy 1M", "add 1M"], ["add 16M", "relu 16M"], ["exp 1M", "exp 16M"],
                  ["sum all 4096x4096", "max rows 4096x4096"],
                  ["softmax rows 4096x4096", "max_pool2d 3x3/2 8x64x112²"],
                  ["batch_norm train 8x64x56²"]):
        have = [n for n in group if any(c.name == n for c in memory)]
        if have:
            rows.append(f"| {' / '.join(have)} (GB/s) | {rates(have, 'unidev')} | "
                        f"{rates(have, 'torch')} | {ranges(have)} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and rounds (a smoke run)")
    ap.add_argument("--device", default="x86")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--batch", type=int, default=8, help="conv batch size")
    ap.add_argument("--pairs", type=int, default=0, help="process pairs (default 3, quick 1)")
    ap.add_argument("--reps", type=int, default=0, help="interleaved rounds in each process "
                    "(default 2)")
    ap.add_argument("--threads", type=int, default=0, help="threads for every library "
                    "(default: all cores); set before any library starts its pool")
    ap.add_argument("--algos", default=",".join(DEFAULT_ALGOS), help="conv algorithms, "
                    f"comma-separated, or 'all' ({','.join(CONV_ALGOS)})")
    ap.add_argument("--lock", default="", help="hold this flock file during each round")
    ap.add_argument("--child", choices=("baseline", "plugin"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.algos = ",".join(CONV_ALGOS) if args.algos == "all" else args.algos
    if bad := [a for a in args.algos.split(",") if a not in CONV_ALGOS]:
        ap.error(f"--algos: unknown {', '.join(bad)}; expected some of {', '.join(CONV_ALGOS)}")
    if "auto" not in args.algos.split(","):
        ap.error("--algos must include auto (the headline figures are auto's)")
    if args.child:
        _child(args, args.child)
        return
    threads = args.threads or os.cpu_count() or 1
    n_threads = f"{threads} thread" + ("s" if threads != 1 else "")
    pairs = args.pairs or (1 if args.quick else 3)
    child = [sys.executable, __file__, "--device", args.device, "--batch", str(args.batch),
             "--reps", str(args.reps), "--threads", str(threads), "--algos", args.algos,
             *(["--quick"] * args.quick),
             "--child"]
    env = {"UNIDEV_X86_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)
           } if args.threads else {}
    machine = Machine(threads=threads, tries=1 if args.quick else 3)
    machine.measure()
    t0 = time.perf_counter()
    runs = alternate([("baseline", [*child, "baseline"], {**BASELINE_ENV, **env}),
                      ("plugin", [*child, "plugin"], {"UNIDEV_PLUGINS": args.device, **env,
                                                      "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})],
                     pairs, lock=args.lock or None, log=print)
    machine.measure()
    leaked = {lib for d in runs["baseline"] if d for lib in d["unidev_libraries"]}
    if leaked or not all(runs["baseline"]) or not all(runs["plugin"]):
        sys.exit(f"a child failed or the baseline was not clean (mapped: {sorted(leaked)})")
    base0 = runs["baseline"][0]
    memory, gemm, conv = merged(runs["baseline"] + runs["plugin"])
    per_pair = [summary(*merged([b, u])) for b, u in zip(runs["baseline"], runs["plugin"],
                                                         strict=True)]
    fractions = bandwidth_fractions(memory)
    bound = [(c, f) for c, f in fractions if not c.name.startswith("exp")]
    low_case, low = min(bound, key=lambda cf: cf[1]) if bound else (None, float("nan"))
    conv_table, _ = conv_summary(conv)
    big = max(gemm, key=lambda c: c.work)
    peak = machine.peak

    def rng(key: str) -> str:
        return fmt_range([d.get(key) for d in per_pair], unit="×")

    lines = [
        f"Measured by `.venv/bin/python benchmarks/run.py {shown_args(sys.argv[1:])}` "
        f"({time.strftime('%Y-%m-%d %H:%M')} UTC, {time.perf_counter() - t0:.0f} s; "
        f"{n_threads}, torch {base0['torch']}, numpy {base0['numpy']}): {pairs} round"
        f"{'s' if pairs > 1 else ''} of one baseline process (torch, numpy; unidev autoload off, "
        "no unidev library mapped) and one plugin process, alternated. Rates are GB/s (bytes "
        "read + written) or GFLOP/s, the best over the processes; ratio > 1 means unidev is "
        "faster; ranges are min–max over the process pairs.",
        "",
        *machine.lines(),
        f"- sgemm vs torch, geometric mean: **{rng('sgemm')}** (target ≥ 1.6×)",
    ]
    if peak:
        lines.append(
            f"- at {big.name} torch reaches {big.rate('torch'):.0f} GFLOP/s "
            f"({big.rate('torch') / peak:.0%} of the FMA peak), unidev {big.rate('unidev'):.0f} "
            f"({big.rate('unidev') / peak:.0%}): 1.6× torch would need "
            f"{1.6 * big.rate('torch') / peak:.0%} of peak")
    lines += [
        f"- ResNet-18 conv layers, fwd + both bwd, `auto`: **{rng('conv')}** (target ≥ 1.3×)",
        f"- elementwise + reductions vs torch: **{rng('memory')}** (target ≥ 1.0×); "
        f"lowest fraction of the copy bandwidth at the same size (best rates): **{low:.0%}** "
        f"({low_case.name if low_case else '—'}; target ≥ 85 %). Per case: "
        + ", ".join(f"{c.name} {f:.0%}" for c, f in fractions)
        + ". exp is compute-bound (a polynomial per element) and not held to the copy rate.",
        "",
        markdown_table(memory + gemm + conv, ["unidev", "torch", "numpy"], "torch", "unidev",
                       ranges={c.name: rng(c.name) for c in memory + gemm + conv}),
        "",
        "Conv2d per ResNet-18 layer, fwd + bwd_input + bwd_weight time of torch / of unidev, per "
        "`algorithm` (best times over the processes):",
        "",
        conv_table,
    ]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.device + ("_quick" if args.quick else "")
    (args.out / f"{name}.md").write_text(text)
    head = lines[0].replace(" Rates are", "\n\nRates are", 1)
    (args.out / f"{name}_summary.md").write_text(
        f"{head}\n\n" + readme_summary(memory, gemm, conv, per_pair, machine,
                                       (low_case, low)) + "\n")
    (args.out / f"{name}.json").write_text(json.dumps(
        {"machine": machine.__dict__, "pairs": pairs, "runs": runs}, indent=1) + "\n")
    ratio_plot(args.out / f"{name}.png", memory + gemm + conv, "unidev", "torch",
               f"unidev-{args.device} vs torch {base0['torch']} CPU ({n_threads})")
    print(f"wrote {args.out / (name + '.md')}, {name}_summary.md, {name}.json, {name}.png")


if __name__ == "__main__":
    main()
