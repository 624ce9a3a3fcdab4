"""Kernel benchmark of a host-memory unidev plugin (default x86) vs torch CPU vs numpy, one process.

    .venv/bin/python benchmarks/run.py [--quick] [--device x86] [--out benchmarks/results]

The plugin is called through unidev._C kernels with descriptors prepared once (what the framework
adapters do per call; a few microseconds of pybind11 conversion remain), so Python-side checks of
unidev.ops stay out of the numbers. Writes <out>/<device>.md (the table README includes) and
<out>/<device>.png (ratios vs torch).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
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

import unidev  # noqa: E402
from unidev.contract import opset  # noqa: E402
from unidev.core import ops as uops  # noqa: E402
from unidev.core import shapes  # noqa: E402
from unidev.core.errors import UnsupportedError  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import RESULTS, Case, geomean, markdown_table, measure, ratio_plot  # noqa: E402

# ResNet-18 at 224x224: every distinct conv layer as (C, H, K, kernel, stride, padding).
RESNET18_CONVS = [
    (3, 224, 64, 7, 2, 3),
    (64, 56, 64, 3, 1, 1),
    (64, 56, 128, 3, 2, 1), (128, 28, 128, 3, 1, 1), (64, 56, 128, 1, 2, 0),
    (128, 28, 256, 3, 2, 1), (256, 14, 256, 3, 1, 1), (128, 28, 256, 1, 2, 0),
    (256, 14, 512, 3, 2, 1), (512, 7, 512, 3, 1, 1), (256, 14, 512, 1, 2, 0),
]
CONV_ALGOS = ("auto", "onednn", "im2col", "winograd", "direct")


class Plugin:
    """Prepared calls into one plugin device."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.rng = np.random.default_rng(0)

    def array(self, a: np.ndarray) -> unidev.DeviceArray:
        return unidev.DeviceArray.from_numpy(np.ascontiguousarray(a), device=self.device)

    def prepared(self, op: str, *inputs, **attrs) -> Callable[[], None] | None:
        """A callable running `op` through the plugin kernel, outputs allocated once; None when
        the plugin has no kernel for it."""
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


def conv_cases(p: Plugin, quick: bool, batch: int) -> list[Case]:
    layers = RESNET18_CONVS[1:3] if quick else RESNET18_CONVS
    algos = tuple(a for a in CONV_ALGOS if not (quick and a == "direct"))
    return [case for layer in layers for case in conv_layer_cases(p, layer, batch, algos)]


def conv_summary(cases: list[Case]) -> tuple[str, float]:
    """Per-layer fwd+bwd ratios (sum of the three times) of each algorithm vs torch."""
    layers: dict[str, list[Case]] = {}
    for c in cases:
        layers.setdefault(c.name.split(" ", 1)[1], []).append(c)
    algos = [f"unidev:{a}" for a in CONV_ALGOS]
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


def fma_peak(threads: int) -> float | None:
    """This CPU's FP32 FMA throughput on `threads` threads in GFLOP/s (benchmarks/fma_peak.c,
    built with the system C compiler into the user's cache), or None without a compiler."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        print("skipped the FMA peak: no C compiler (set CC)")
        return None
    exe = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "unidev" / "fma_peak"
    exe.parent.mkdir(parents=True, exist_ok=True)
    src = Path(__file__).resolve().parent / "fma_peak.c"
    subprocess.run([cc, "-O2", "-march=native", "-o", str(exe), str(src), "-lpthread"],
                   check=True)
    best = 0.0
    for _ in range(3):  # best of three: another process may take a core for a while
        out = subprocess.run([str(exe), str(threads), "0.3"], capture_output=True, text=True,
                             check=True).stdout
        best = max(best, float(re.match(r"([\d.]+) GFLOP/s", out).group(1)))
    return best


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


def _shown_args() -> str:
    """The command-line options that shape the numbers (not --out)."""
    argv, shown = sys.argv[1:], []
    while argv:
        a = argv.pop(0)
        if a == "--out":
            argv = argv[1:]
        elif not a.startswith("--out="):
            shown.append(a)
    return " ".join(shown)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and rounds (a smoke run)")
    ap.add_argument("--device", default="x86")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--batch", type=int, default=8, help="conv batch size")
    ap.add_argument("--reps", type=int, default=0, help="interleaved rounds (default 5, quick 2)")
    ap.add_argument("--threads", type=int, default=0, help="threads for every library "
                    "(default: all cores); set before any library starts its pool")
    args = ap.parse_args()
    p = Plugin(args.device)
    threads = args.threads or os.cpu_count() or 1
    n_threads = f"{threads} thread" + ("s" if threads != 1 else "")
    torch.set_num_threads(threads)
    reps, min_time = (2, 0.005) if args.quick else (5, 0.03)
    reps = args.reps or reps
    print(f"unidev {args.device} vs torch {torch.__version__} vs numpy {np.__version__}, "
          f"{n_threads}, best of {reps} interleaved rounds")

    load_start = os.getloadavg()[0]  # others' processes on the cores show up here
    memory = memory_cases(p, args.quick)
    measure(memory, reps, min_time)
    peak = fma_peak(threads)  # measured around the dense cases; the best counts
    gemm = gemm_cases(p, args.quick)
    measure(gemm, reps, min_time)
    conv = conv_cases(p, args.quick, args.batch)
    measure(conv, max(2, reps - 2), min_time)
    peak = peak and max(peak, fma_peak(threads) or 0.0)

    for c in conv:  # the plain table shows the "auto" choice; the summary shows every algorithm
        if "unidev:auto" in c.seconds:
            c.seconds["unidev"] = c.seconds["unidev:auto"]
    fractions = bandwidth_fractions(memory)
    bound = [(c, f) for c, f in fractions if not c.name.startswith("exp")]
    low_case, low = min(bound, key=lambda cf: cf[1]) if bound else (None, float("nan"))
    conv_table, conv_gm = conv_summary(conv)
    sgemm_gm = geomean([c.ratio("unidev", "torch") for c in gemm])
    mem_bound = [c for c in memory if c.group in ("elementwise", "reduction")]
    big = max(gemm, key=lambda c: c.work)
    lines = [
        f"Measured by `python benchmarks/run.py {_shown_args()}` "
        f"({n_threads}, torch {torch.__version__}, numpy {np.__version__}); "
        "rates are GB/s (bytes read + written) or GFLOP/s; ratio > 1 means unidev is faster. "
        f"1-minute load average at start / end: {load_start:.2f} / {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} cores (other processes on the cores slow every library's "
        "multi-threaded figures, unevenly).",
        "",
        f"- sgemm vs torch, geometric mean: **{sgemm_gm:.2f}×** (target ≥ 1.6×)",
    ]
    if peak:
        lines.append(
            f"- FP32 FMA peak of this CPU on {n_threads} (`benchmarks/fma_peak.c`, same run): "
            f"**{peak:.0f} GFLOP/s**; at {big.name} torch reaches {big.rate('torch'):.0f} "
            f"({big.rate('torch') / peak:.0%} of peak), unidev {big.rate('unidev'):.0f} "
            f"({big.rate('unidev') / peak:.0%}): 1.6× torch would need "
            f"{1.6 * big.rate('torch') / peak:.0%} of peak")
    lines += [
        f"- ResNet-18 conv layers, fwd + both bwd, `auto`: **{conv_gm:.2f}×** (target ≥ 1.3×)",
        f"- elementwise + reductions vs torch: **"
        f"{geomean([c.ratio('unidev', 'torch') for c in mem_bound]):.2f}×** (target ≥ 1.0×); "
        f"lowest fraction of the copy bandwidth at the same size: **{low:.0%}** "
        f"({low_case.name if low_case else '—'}; target ≥ 85 %). Per case: "
        + ", ".join(f"{c.name} {f:.0%}" for c, f in fractions)
        + ". exp is compute-bound (a polynomial per element) and not held to the copy rate.",
        "",
        markdown_table(memory + gemm + conv, ["unidev", "torch", "numpy"], "torch", "unidev"),
        "",
        "Conv2d per ResNet-18 layer, fwd + bwd_input + bwd_weight time of torch / of unidev, per "
        "`algorithm`:",
        "",
        conv_table,
    ]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.device}.md").write_text(text)
    ratio_plot(args.out / f"{args.device}.png", memory + gemm + conv, "unidev", "torch",
               f"unidev-{args.device} vs torch {torch.__version__} CPU ({n_threads})")
    print(f"wrote {args.out / (args.device + '.md')} and {args.out / (args.device + '.png')}")


if __name__ == "__main__":
    main()
