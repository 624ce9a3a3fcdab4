"""PyTorch adapter benchmark: tiny-op overhead and training steps, each unidev device vs torch CPU.

PrivateUse1 takes one plugin per process, so each plugin is measured in its own child process;
inside it, torch CPU and the device are timed interleaved (benchmarks/_timing.measure).
Run: python benchmarks/torch_adapter.py [--quick] [--plugins x86,aurora]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _child(quick: bool) -> None:
    sys.path.insert(0, str(HERE))
    import copy

    import torch
    import torch.nn.functional as F
    from _timing import Case, measure

    import unidev.torch as ut
    from unidev.demos import torch_models as models

    dev = ut.load()
    sync = getattr(torch, dev).synchronize
    torch.manual_seed(0)

    def tiny(device):
        a, b = torch.ones(8, device=device), torch.ones(8, device=device)

        def run():
            for _ in range(10_000):
                a + b
            if device != "cpu":
                sync()
        return run

    def step(model, x, y, device):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        xd, yd = x.to(device), y.to(device)

        def run():
            loss = F.cross_entropy(m(xd), yd)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if device != "cpu":
                sync()
        return run

    batch = 64 if quick else 256
    mlp = models.mlp(inputs=512, hidden=1024)
    xm, ym = torch.randn(batch, 512), torch.randint(0, 10, (batch,))
    res = models.resnet(width=16 if quick else 32)
    xr, yr = torch.randn(8 if quick else 16, 3, 32, 32), torch.randint(0, 10, (8 if quick else 16,))
    cases = [
        Case("torch", "tiny add (10k calls)", 1.0, "calls", {"cpu": tiny("cpu"), dev: tiny(dev)}),
        Case("torch", f"MLP step (batch {batch}, 512-1024-1024-10)", 1.0, "steps",
             {"cpu": step(mlp, xm, ym, "cpu"), dev: step(mlp, xm, ym, dev)}),
        Case("torch", f"small ResNet step (batch {xr.shape[0]}, 32x32)", 1.0, "steps",
             {"cpu": step(res, xr, yr, "cpu"), dev: step(res, xr, yr, dev)}),
    ]
    ut.reset_fallbacks()
    measure(cases, reps=3 if quick else 7, min_time=0.05 if quick else 0.2, log=None)
    out = [{"case": c.name, "cpu_s": c.seconds["cpu"], "dev_s": c.seconds[dev]} for c in cases]
    print(json.dumps({"device": dev, "plugin": ut.device_name(), "rows": out,
                      "fallbacks": ut.fallback_report()}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller problems, fewer repetitions")
    p.add_argument("--plugins", default="", help="comma-separated plugins (default: all usable)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args.quick)
        return 0
    from unidev.core import discovery

    plugins = [n for n in args.plugins.split(",") if n] or [
        r.name for r in discovery.discover() if r.usable]
    lines = ["| plugin | case | torch CPU | device | speed-up (CPU time / device time) |",
             "|---|---|---|---|---|"]
    ok = True
    for name in plugins:
        cmd = [sys.executable, __file__, "--child"] + (["--quick"] if args.quick else [])
        r = subprocess.run(cmd, capture_output=True, text=True,
                           env={**os.environ, "UNIDEV_TORCH_DEVICE": name})
        if r.returncode != 0:
            print(f"{name}: FAILED\n{r.stderr[-2000:]}", file=sys.stderr)
            ok = False
            continue
        data = json.loads(r.stdout.strip().splitlines()[-1])
        for row in data["rows"]:
            ratio = row["cpu_s"] / row["dev_s"]
            unit, scale = ("ms", 1e3)
            lines.append(f"| {name} ({data['device']}) | {row['case']} | "
                         f"{row['cpu_s'] * scale:.2f} {unit} | {row['dev_s'] * scale:.2f} {unit} | "
                         f"{ratio:.2f}× |")
        if data["fallbacks"]:
            lines.append(f"| {name} | CPU fallbacks | {data['fallbacks']} | | |")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
