"""Algorithm selection benchmark (issue 21): swap overhead, autotune vs auto per layer and per step.

    UNIDEV_TORCH_DEVICE=x86 .venv/bin/python benchmarks/algorithms.py [--quick]
        [--out benchmarks/results]

Three measurements, each timed interleaved with _timing.measure (best of rounds):
- overhead: one ResNet-18 conv layer's forward swapped to an algorithm (unidev.torch.swap_conv2d)
  against the same algorithm called directly through unidev.ops (ai3's "no overhead" claim;
  GFLOP/s, swapped / ops should be >= 0.98);
- per layer: what autotune measured for every ResNet-18 layer (batch 2, 56x56 input scaled to a
  quarter), forward and both gradients, next to the plugin's "auto" (the autotune table, also
  written as a PNG by `unidev autotune report --png`);
- training step: the demo ResNet (unidev.demos.torch_models.resnet, width 32, batch 8, 32x32)
  swapped to "auto" and to "autotune", one SGD step each.
Writes <out>/algorithms.md and algorithms.json (algorithms_quick.* with --quick). Autotune uses
a fresh UNIDEV_CACHE_DIR, so every decision is measured in this run.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("UNIDEV_CACHE_DIR", tempfile.mkdtemp(prefix="unidev-algo-bench-"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import RESULTS, Case, markdown_table, measure, shown_args  # noqa: E402

# ResNet-18's distinct conv layers at a quarter of 224x224: (C, H, K, kernel, stride, padding)
LAYERS = [(64, 14, 64, 3, 1, 1), (64, 14, 128, 3, 2, 1), (128, 7, 128, 3, 1, 1),
          (64, 14, 128, 1, 2, 0), (128, 7, 256, 3, 2, 1), (256, 4, 256, 3, 1, 1)]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    import unidev.algorithms as ua
    import unidev.torch as ut
    from unidev import ops
    from unidev.adapters.torch import _backend
    from unidev.core.array import DeviceArray
    from unidev.demos import torch_models

    dev = ut.load()
    st = _backend.load()
    plugin, sync = st.plugin, (lambda: st.ext.synchronize(0))
    layers = LAYERS[:2] if args.quick else LAYERS
    names = [s.name for s in ua.algorithms(plugin, "conv2d")["conv2d"]]

    # 1. overhead of a swapped layer against unidev.ops, same algorithm
    over = []
    c, h, k, r, s, p = LAYERS[0]
    x = torch.randn(8, c, h * 2, h * 2)
    conv = torch.nn.Conv2d(c, k, r, s, p, bias=False)
    xa = DeviceArray.from_numpy(x.numpy(), f"{plugin}:0")
    wa = DeviceArray.from_numpy(conv.weight.detach().numpy(), f"{plugin}:0")
    oh = (2 * h + 2 * p - r) // s + 1
    flops = 2.0 * 8 * k * oh * oh * c * r * r
    xd = x.to(dev)
    for name in ["auto", *names]:
        m = copy.deepcopy(conv).to(dev)
        ut.swap_conv2d(m, name)

        def swapped(m=m):
            with torch.no_grad():
                m(xd)
            sync()

        def direct(name=name):
            ops.conv2d(xa, wa, stride=(s, s), padding=(p, p), algorithm=name)
            sync()

        over.append(Case("overhead", f"{name} {c}x{2 * h}->{k} k{r}s{s}", flops, "GFLOP/s",
                         {"swapped": swapped, "ops": direct}))
    measure(over, reps=3 if args.quick else 5)

    # 2. autotune's table per layer, next to auto
    rows = []
    for i, (c, h, k, r, s, p) in enumerate(layers):
        layer = ua.Layer(f"conv{i}", i, c, k, (r, r), (s, s), (p, p), device=plugin,
                         bias=False, input_shape=(2, c, h, h))
        for op in ua.DIRECTIONS:
            best = ua.autotune(layer, op)
            rec = next(v for v in ua.decisions().values() if v["op"] == op and
                       v["input_shape"] == list(layer.input_shape) and
                       v["weight_shape"] == list(layer.weight_shape) and v["stride"] == [s, s])
            rows.append({"layer": f"{c}x{h}x{h}->{k} k{r}s{s}", "op": op, "best": best,
                         "ms": rec["ms"], "auto_ms": rec["auto_ms"], "refused": rec["refused"]})

    # 3. one training step of the demo ResNet: auto vs autotune
    torch.manual_seed(0)
    base = torch_models.resnet(width=16 if args.quick else 32)
    xb, tb = torch.randn(8, 3, 32, 32).to(dev), torch.randint(0, 10, (8,)).to(dev)
    steps = {}
    for sel in ("auto", "autotune"):
        model = copy.deepcopy(base).to(dev)
        ut.swap_conv2d(model, sel, example_inputs=xb)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step(model=model, opt=opt):
            opt.zero_grad()
            F.cross_entropy(model(xb), tb).backward()
            opt.step()
            sync()

        steps[sel] = step
    train = [Case("training step", "demo resnet", 1e9, "steps/s (x1e9)", steps)]
    measure(train, reps=3 if args.quick else 5)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "algorithms_quick" if args.quick else "algorithms"
    lines = [f"# Algorithm selection ({plugin}, `{shown_args(argv)}`)", "",
             "## Swapped layer vs unidev.ops (same algorithm)", "",
             markdown_table(over, ["swapped", "ops"], "ops", "swapped"), "",
             "## Autotune per layer (ms per algorithm; batch 2)", "",
             "| layer | op | best | auto ms / best ms | ms per algorithm | refused |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        ms = ", ".join(f"{n} {t:.3g}" for n, t in sorted(row["ms"].items(), key=lambda kv: kv[1]))
        gain = row["auto_ms"] / row["ms"][row["best"]]
        lines.append(f"| {row['layer']} | {row['op']} | {row['best']} | {gain:.2f}x | {ms} | "
                     f"{', '.join(row['refused']) or ''} |")
    t_auto, t_tuned = train[0].seconds.get("auto"), train[0].seconds.get("autotune")
    lines += ["", "## Training step, demo ResNet", "",
              f"auto {t_auto * 1e3:.2f} ms, autotune {t_tuned * 1e3:.2f} ms: autotune / auto "
              f"speed {t_auto / t_tuned:.2f}x", ""]
    (out / f"{stem}.md").write_text("\n".join(lines))
    (out / f"{stem}.json").write_text(json.dumps({
        "plugin": plugin, "overhead": [{"case": c.name, "seconds": c.seconds} for c in over],
        "layers": rows, "step_seconds": train[0].seconds}, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
