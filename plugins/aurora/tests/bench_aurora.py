"""Small benchmark of the aurora plugin on vesim: python tests/bench_aurora.py (a few seconds)."""

from __future__ import annotations

import time

import numpy as np

import unidev


def timed(fn, reps: int) -> float:
    """Seconds per call of fn() (which must synchronize), best of three batches."""
    fn()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    dev = unidev.DeviceArray.from_numpy
    n = 1024
    a = dev(rng.standard_normal((n, n), np.float32), "aurora")
    s = timed(lambda: unidev.ops.matmul(a, a).numpy(), 3)
    print(f"matmul {n}^3 float32: {2 * n**3 / s / 1e9:.1f} GFLOP/s (with the 4 MiB d2h copy)")
    x = dev(rng.standard_normal((8, 64, 56, 56), np.float32), "aurora")
    w = dev(rng.standard_normal((64, 64, 3, 3), np.float32), "aurora")
    flops = 2 * 8 * 64 * 56 * 56 * 64 * 9
    for algo in ("im2col", "direct"):
        s = timed(lambda algo=algo: unidev.ops.conv2d(x, w, None, padding=(1, 1),
                                                      algorithm=algo).numpy(), 2)
        print(f"conv2d 8x64x56x56 -> 64, 3x3, {algo}: {flops / s / 1e9:.1f} GFLOP/s")
    m = 1 << 24
    u = dev(rng.standard_normal(m, np.float32), "aurora")
    out = unidev.DeviceArray.empty((m,), "float32", "aurora")
    s = timed(lambda: (unidev.ops.add(u, u, out=out), out.device.library.synchronize(0)), 5)
    print(f"add 16M float32: {3 * 4 * m / s / 1e9:.1f} GB/s (3 streams counted)")
    t = dev(np.ones(8, np.float32), "aurora")
    s = timed(lambda: (unidev.ops.add(t, t), t.device.library.synchronize(0)), 200)
    print(f"tiny add + synchronize: {s * 1e6:.1f} us per call")


if __name__ == "__main__":
    main()
