"""torch.channels_last on unidev devices: formats as torch CPU gives them, no layout copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from unidev.core import discovery

PLUGINS = sorted(r.name for r in discovery.discover()
                 if r.usable and r.spec and r.name in ("x86", "aurora"))
# Which helper makes the plugin's kernels run channels-last strides without a copy: the plugin
# side of the zero-copy assertion depends on it (the adapter side never does).
LAYOUT_OWNER = {"x86": "nhwc-x86", "aurora": "nhwc-aurora"}

CHILD = r'''
import copy, json
import torch, torch.nn as nn, torch.nn.functional as F
import unidev
import unidev.torch as ut
from unidev.adapters.torch import _backend

dev = ut.load()
ext, plugin = _backend.load().ext, _backend.STATE.plugin
CL = torch.channels_last
out = {"device": dev, "plugin": plugin}
torch.manual_seed(0)


def net():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(16, 10))


model = net()
x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))


def train(device, fmt):
    m = copy.deepcopy(model).to(device).to(memory_format=fmt)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    xd, yd = x.contiguous(memory_format=fmt).to(device), y.to(device)
    strides = []
    for mod in m:
        mod.register_forward_hook(lambda mod, i, o: strides.append(list(o.stride())))
    losses, counts, layout = [], {}, {}
    for step in range(2):
        strides.clear()
        if step == 1 and device != "cpu":
            ext.reset_op_counts()
            before = unidev.debug_counters(plugin)
        loss = F.cross_entropy(m(xd), yd)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step == 1 and device != "cpu":
            counts = ext.op_counts()
            after = unidev.debug_counters(plugin)
            layout = {k: after[k] - before.get(k, 0) for k in after if "layout" in k}
    grads = [list(p.grad.stride()) for p in m.parameters()]
    weights = {k: v.detach().cpu() for k, v in m.state_dict().items()}
    return losses, strides, grads, weights, counts, layout


for name, fmt in (("channels_last", CL), ("nchw", torch.contiguous_format)):
    lc, sc, gc, wc, _, _ = train("cpu", fmt)
    ld, sd, gd, wd, counts, layout = train(dev, fmt)
    out[name] = {"losses": [lc, ld], "strides_equal": sc == sd, "strides": [sc, sd],
                 "grads_equal": gc == gd, "grads": [gc, gd], "counts": counts, "layout": layout,
                 "weight_diff": max((wc[k].double() - wd[k].double()).abs().max().item()
                                    for k in wc)}

# elementwise (and pad, cat) results take the inputs' memory format as on the CPU
a = torch.randn(2, 5, 4, 3).contiguous(memory_format=CL)
b = torch.randn(2, 5, 4, 3)
bias = torch.randn(5, 1, 1)
t2 = torch.randn(6, 7).t()
cases = {"relu": lambda a, b: torch.relu(a), "cl+cl": lambda a, b: a + a * 2,
         "cl+bias": lambda a, b: a + bias.to(a.device), "cl*scalar": lambda a, b: a * 0.5,
         "nchw+cl": lambda a, b: b + a, "cl+nchw": lambda a, b: a - b,
         "t+plain": lambda a, b: t2.to(a.device) + torch.ones(7, 6, device=a.device),
         "threshold": lambda a, b: torch.ops.aten.threshold_backward(a, a, 0.0),
         "pad": lambda a, b: F.pad(a, (1, 1, 2, 0)), "cat": lambda a, b: torch.cat([a, a], 1),
         "se": lambda a, b: a * torch.sigmoid(a.mean((2, 3), keepdim=True)),
         "max_pool_3x3s2": lambda a, b: F.max_pool2d(a, 3, 2, 1),
         "group_norm": lambda a, b: F.group_norm(a, 5)}  # torch's composite views its input
out["elementwise"] = {}
ext.reset_op_counts()
for k, fn in cases.items():
    want, got = fn(a, b), fn(a.to(dev), b.to(dev))
    out["elementwise"][k] = [list(want.stride()), list(got.stride()),
                             torch.allclose(got.cpu(), want)]
# channels-last tensors cross to the device and back in their layout, with no device copy
xc = torch.randn(4, 3, 8, 8).contiguous(memory_format=CL)
ext.reset_op_counts()
xd = xc.to(dev)
back = xd.cpu()
out["transfer"] = [list(xd.stride()), list(back.stride()), torch.equal(back, xc)]
out["transfer_counts"] = ext.op_counts()
out["fallbacks"] = {k: v for k, v in ut.fallback_report().items()
                    if k not in ("var_mean.correction",)}  # group_norm's, as in NCHW
print("RESULT " + json.dumps(out))
'''


def run_child(plugin: str) -> dict:
    env = dict(os.environ, UNIDEV_TORCH_DEVICE=plugin, VESIM_DEVICES="1")
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD)], env=env,
                         capture_output=True, text=True, timeout=600)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert res.returncode == 0 and lines, res.stderr[-3000:]
    return json.loads(lines[-1][7:])


@pytest.mark.parametrize("plugin", PLUGINS)
def test_channels_last_step_keeps_format_with_no_layout_copies(plugin):
    r = run_child(plugin)
    assert r["plugin"] == plugin and r["fallbacks"] == {}, r["fallbacks"]
    for name in ("channels_last", "nchw"):
        case = r[name]
        cpu, got = case["losses"]
        assert got == pytest.approx(cpu, rel=1e-4, abs=1e-5), (name, case["losses"])
        assert case["weight_diff"] < 1e-4, (name, case["weight_diff"])
        # every module's output and every gradient in the memory format torch CPU gives it
        assert case["strides_equal"], (name, case["strides"])
        assert case["grads_equal"], (name, case["grads"])
        counts = case["counts"]
        assert counts.get("conv2d") == 3 and counts.get("batch_norm") == 2, counts
        # the adapter side: no copy at all in a step (after SGD's first-step momentum clone)
        assert "copy" not in counts and "copy.transposes" not in counts, (name, counts)
    # the channels-last step really ran channels-last
    assert r["channels_last"]["strides"][1][0] == [2048, 1, 128, 8]
    # the plugin side (depends on LAYOUT_OWNER[plugin]'s channels-last kernels)
    layout = r["channels_last"]["layout"]
    assert layout.get("layout_copies") == 0, (LAYOUT_OWNER[plugin], layout)
    for k, (want, got, close) in r["elementwise"].items():
        assert got == want and close, (k, want, got)
    assert r["transfer"] == [[192, 1, 24, 3], [192, 1, 24, 3], True], r["transfer"]
    assert "copy.transposes" not in r["transfer_counts"], r["transfer_counts"]
