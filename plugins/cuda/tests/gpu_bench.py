"""unidev-cuda vs torch's own CUDA kernels, side by side in one process (run by gpu-check).

sgemm, a ResNet-18 conv layer (forward; backward input + weight) and an elementwise add, each
checked against torch's result, plus the GPU's peaks. Prints a table of ratios; exits 1 if a
result disagrees with torch. Needs torch with CUDA and an installed unidev-cuda.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # time torch's kernels, not ours

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from unidev.contract import opset  # noqa: E402
from unidev.core import ops  # noqa: E402
from unidev.core.array import DeviceArray  # noqa: E402
from unidev.core.device import device as parse_device  # noqa: E402

DEV = "cuda:0"


class Kernel:
    """One plugin kernel with its descriptors made once, so a call is one C call."""

    def __init__(self, name: str, inputs: list, outputs: list, **attrs) -> None:
        schema = opset.get(name)
        full = ops.normalize_attrs(schema, attrs)
        self.attrs = [(a.name, a.type, full[a.name]) for a in schema.attrs]
        dev = outputs[0].device
        self.k = ops.kernel_for(dev, name, (inputs[0] if inputs else outputs[0]).dtype)
        if self.k is None:
            raise SystemExit(f"gpu_bench: the plugin has no {name} kernel")
        self.ins = [x.descriptor() if x is not None else None for x in inputs]
        self.outs = [o.descriptor() for o in outputs]
        self.index = dev.index

    def __call__(self) -> None:
        self.k(self.index, self.ins, self.outs, self.attrs, 0)


def timed(fn, sync, budget: float = 0.3) -> float:
    """Seconds per call: warm up, then as many calls as fit in `budget`."""
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    once = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(max(budget / once, 3), 2000))
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def peaks() -> dict:
    """FP32 peak from SMs x clock (nvidia-smi) and the measured device-to-device copy rate."""
    props = torch.cuda.get_device_properties(0)
    out = {"name": props.name, "sms": props.multi_processor_count, "fp32_tflops": None}
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,"
                            "nounits", "-i", "0"], capture_output=True, text=True)
        try:
            mhz = float(q.stdout.strip().splitlines()[0])
            # 128 FP32 lanes per SM on sm_80+ datacenter parts (A100: 64), 2 FLOP per FMA
            lanes = 64 if props.major == 8 and props.minor == 0 else 128
            out["fp32_tflops"] = props.multi_processor_count * lanes * 2 * mhz * 1e6 / 1e12
        except (ValueError, IndexError):
            pass
    n = 1 << 28  # 1 GiB of float32
    a, b = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    t = timed(lambda: b.copy_(a), torch.cuda.synchronize)
    out["copy_gbs"] = 2 * 4 * n / t / 1e9

    return out


def close(got: np.ndarray, want: torch.Tensor, what: str, rtol: float) -> str:
    w = want.detach().cpu().numpy().astype(np.float64)
    g = got.astype(np.float64)
    err = float(np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-30)) if w.size else 0.0
    return "ok" if err <= rtol else f"MISMATCH ({what}: max rel err {err:.2e})"


class Bench:
    """Runs each benchmark on both sides and collects the table's rows."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.dev = parse_device(DEV)
        self.rng = np.random.default_rng(0)
        self.rows: list[dict] = []
        self.peaks = peaks()

    def usync(self) -> None:
        self.dev.library.synchronize(self.dev.index)

    def pair(self, *shape) -> tuple[DeviceArray, torch.Tensor]:
        a = self.rng.standard_normal(shape, dtype=np.float32)
        return DeviceArray.from_numpy(a, DEV), torch.from_numpy(a).cuda()

    def row(self, name: str, work: float, unit: str, ufn, tfn, check) -> None:
        scale, peak = (1e12, self.peaks["fp32_tflops"]) if unit == "TFLOP/s" else \
            (1e9, self.peaks["copy_gbs"])
        tu, tt = timed(ufn, self.usync), timed(tfn, torch.cuda.synchronize)
        ru, rt = work / tu / scale, work / tt / scale
        self.rows.append({"bench": name, "unit": unit, "unidev_ms": tu * 1e3,
                          "torch_ms": tt * 1e3, "unidev": ru, "torch": rt, "ratio": tt / tu,
                          "unidev_pct_peak": 100 * ru / peak if peak else None,
                          "check": check()})

    def sgemm(self) -> None:
        n = 2048 if self.quick else 4096
        (a, ta), (b, tb) = self.pair(n, n), self.pair(n, n)
        c, tc = DeviceArray.empty((n, n), "float32", DEV), torch.empty(n, n, device="cuda")
        self.row(f"sgemm {n}^3", 2.0 * n ** 3, "TFLOP/s", Kernel("matmul", [a, b], [c]),
                 lambda: torch.mm(ta, tb, out=tc), lambda: close(c.numpy(), tc, "sgemm", 1e-4))

    def conv(self) -> None:
        N = 16 if self.quick else 32  # ResNet-18 layer1 conv: 64->64, 3x3, 56x56, pad 1
        (x, tx), (w, tw), (gy, tgy) = (self.pair(N, 64, 56, 56), self.pair(64, 64, 3, 3),
                                       self.pair(N, 64, 56, 56))
        y = DeviceArray.empty((N, 64, 56, 56), "float32", DEV)
        gx = DeviceArray.empty((N, 64, 56, 56), "float32", DEV)
        gw = DeviceArray.empty((64, 64, 3, 3), "float32", DEV)
        flops = 2.0 * N * 64 * 56 * 56 * 64 * 9
        geo = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
        ty = F.conv2d(tx, tw, padding=1)

        def tbwd():
            return torch.ops.aten.convolution_backward(tgy, tx, tw, None, [1, 1], [1, 1], [1, 1],
                                                       False, [0, 0], 1, [True, True, False])

        tgx, tgw, _ = tbwd()
        for alg in ("auto", "im2col", "direct"):
            k = Kernel("conv2d", [x, w, None], [y], algorithm=alg, **geo)
            self.row(f"conv fwd [{alg}]", flops, "TFLOP/s", k,
                     lambda: F.conv2d(tx, tw, padding=1),
                     lambda alg=alg: close(y.numpy(), ty, f"conv fwd {alg}", 1e-4))
        for alg in ("auto", "im2col"):
            bi = Kernel("conv2d_backward_input", [gy, w], [gx], input_shape=(N, 64, 56, 56),
                        algorithm=alg, **geo)
            bw = Kernel("conv2d_backward_weight", [gy, x], [gw], weight_shape=(64, 64, 3, 3),
                        algorithm=alg, **geo)

            def both(bi=bi, bw=bw) -> None:
                bi()
                bw()

            def check(alg=alg) -> str:
                res = [close(gx.numpy(), tgx, f"bwd input {alg}", 1e-4),
                       close(gw.numpy(), tgw, f"bwd weight {alg}", 1e-3)]
                return " / ".join(dict.fromkeys(res))

            self.row(f"conv bwd [{alg}]", 2 * flops, "TFLOP/s", both, tbwd, check)

    def add(self) -> None:
        m = 1 << (24 if self.quick else 26)
        (u, tu), (v, tv) = self.pair(m), self.pair(m)
        o, to = DeviceArray.empty((m,), "float32", DEV), torch.empty(m, device="cuda")
        self.row(f"add {m >> 20}M f32", 12.0 * m, "GB/s", Kernel("add", [u, v], [o], alpha=1.0),
                 lambda: torch.add(tu, tv, out=to), lambda: close(o.numpy(), to, "add", 1e-6))

    def print(self) -> None:
        pk = self.peaks
        fp32 = f"{pk['fp32_tflops']:.1f}" if pk["fp32_tflops"] else "n/a"
        print(f"\nGPU: {pk['name']}, {pk['sms']} SMs; FP32 peak {fp32} TFLOP/s (SMs x max "
              f"clock x 2 FLOP/FMA); device copy {pk['copy_gbs']:.0f} GB/s (measured, torch)")
        head = (f"{'benchmark':<20}{'unit':>8}{'unidev ms':>11}{'torch ms':>10}{'unidev':>9}"
                f"{'torch':>9}{'ratio':>7}{'% peak':>8}  check")
        print(head + "\n" + "-" * len(head))
        for r in self.rows:
            pct = f"{r['unidev_pct_peak']:.0f}" if r["unidev_pct_peak"] is not None else "n/a"
            print(f"{r['bench']:<20}{r['unit']:>8}{r['unidev_ms']:>11.3f}{r['torch_ms']:>10.3f}"
                  f"{r['unidev']:>9.2f}{r['torch']:>9.2f}{r['ratio']:>7.2f}{pct:>8}  "
                  f"{r['check']}")
        print("ratio = torch time / unidev time (> 1: unidev faster); % peak: unidev's rate vs "
              "the FP32 peak (TFLOP/s rows) or the measured copy rate (GB/s rows); both sides "
              "IEEE float32 (TF32 off).")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_bench: torch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    b = Bench(args.quick)
    for step in (b.sgemm, b.conv, b.add):
        try:
            step()
        except Exception as exc:  # report the others even when one fails
            b.rows.append({"bench": step.__name__, "unit": "-", "unidev_ms": float("nan"),
                           "torch_ms": float("nan"), "unidev": float("nan"),
                           "torch": float("nan"), "ratio": float("nan"),
                           "unidev_pct_peak": None, "check": f"ERROR {type(exc).__name__}: {exc}"})
        torch.cuda.empty_cache()
    b.print()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peaks": b.peaks, "rows": b.rows}, f, indent=1)
    return 0 if all(r["check"] == "ok" for r in b.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
