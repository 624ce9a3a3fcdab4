"""``unidev demo`` (torch part): one small model trained on the CPU and on the device."""

from __future__ import annotations

import argparse
import contextlib
import copy
import time
from collections import Counter


def run(args: argparse.Namespace | None = None) -> None:
    """Trains the demo CNN 5 steps on CPU and device; prints losses, weights, what ran where."""
    try:
        import torch
        import torch.nn.functional as F
        from torch.utils._python_dispatch import TorchDispatchMode

        import unidev.torch as ut
        from unidev.demos import torch_models as models

        dev = ut.load()
    except Exception as exc:
        print(f"\n== PyTorch: skipped ({type(exc).__name__}: {exc})")
        return

    class Seen(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func.overloadpacket.__name__)] += 1
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    model = models.small_cnn()
    x, y = torch.randn(16, 3, 12, 12), torch.randint(0, 5, (16,))
    print(f"\n== PyTorch {torch.__version__}: small CNN (Conv2d, BatchNorm, ReLU, max/avg/global "
          f"pooling, Linear, cross-entropy), 5 SGD-momentum steps, cpu vs {dev}:0 "
          f"({getattr(torch, dev).get_device_name()})")
    results, seen = {}, Seen()
    for d in ("cpu", dev):
        m = copy.deepcopy(model).to(d)
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        ut.reset_fallbacks()
        losses, t0 = [], 0.0
        for step in range(5):
            t0 = time.perf_counter() if step == 1 else t0  # step 0 warms up (first-call costs)
            with seen if (d == dev and step == 0) else contextlib.nullcontext():
                loss = F.cross_entropy(m(x.to(d)), y.to(d))
                opt.zero_grad()
                loss.backward()
                opt.step()
            losses.append(loss.item())
        results[d] = (losses, [p.detach().cpu() for p in m.parameters()],
                      time.perf_counter() - t0, ut.fallback_report())
    print(f"    {'step':<6}{'loss cpu':>12}{'loss ' + dev:>14}")
    for i, (a, b) in enumerate(zip(results["cpu"][0], results[dev][0], strict=True)):
        print(f"    {i:<6}{a:>12.6f}{b:>14.6f}")
    pairs = zip(results["cpu"][1], results[dev][1], strict=True)
    diff = max((a - b).abs().max().item() for a, b in pairs)
    print(f"    max |weight cpu - weight {dev}| after 5 steps: {diff:.2e}; time: cpu "
          f"{results['cpu'][2] * 250:.1f} ms, {dev} {results[dev][2] * 250:.1f} ms per step")
    print(f"    ran on {dev}: {len(seen.ops)} distinct aten ops, {sum(seen.ops.values())} calls "
          f"in the first step ({', '.join(sorted(seen.ops)[:12])}, ...)")
    print(f"    CPU fallbacks: {results[dev][3] or 'none'}")

