"""``unidev demo`` (graph part): a traced block fused, compiled into a native plan, vs eager."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np

from ..core import ops
from ..core.array import DeviceArray


def _block(x, w, b, w2, b2):
    """A residual conv block and a GELU MLP head, written with unidev.ops."""
    y = ops.relu(ops.add(ops.conv2d(x, w, b, padding=[1, 1]), x))
    h = ops.mean(y, axes=[2, 3])
    return ops.gelu(ops.gemm(h, w2, b2), approximate="tanh")


def _best_ms(fn, repeat: int = 5) -> float:
    fn()  # warm: kernel lookups, plan caches
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def run(device: str) -> None:
    """Traces _block on `device`, optimizes and compiles it, and compares it with eager ops."""
    import unidev.graph as ug

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) * k for s, k in
              [((8, 16, 16, 16), 1.0), ((16, 16, 3, 3), 0.1), ((16,), 0.1), ((16, 10), 0.3),
               ((10,), 0.1)]]
    args = [DeviceArray.from_numpy(a, device) for a in arrays]
    eager = _block(*args).numpy()
    with ug.trace() as g:
        g.output(_block(*args))
    compiled = ug.compile(g, device)
    got = compiled.run(args)[0].numpy()
    kinds = Counter(op for _, op in compiled.steps)
    print(f"    traced {len(g.order())} ops -> {len(compiled.steps)} plan steps "
          f"({', '.join(f'{n}x {op}' for op, n in kinds.items())})")
    print(f"    max |compiled - eager| = {float(np.abs(got - eager).max()):.2e}")
    t_eager = _best_ms(lambda: _block(*args).numpy())
    t_plan = _best_ms(lambda: compiled.run(args)[0].numpy())
    print(f"    eager {t_eager:.2f} ms, compiled {t_plan:.2f} ms per call (best of 5, incl. "
          f"the copy back)")
