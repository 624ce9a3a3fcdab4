"""unidev.torch.swap_conv2d / swap_backend: each algorithm trains like torch CPU and really runs."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import unidev.algorithms as ua

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.fixture(scope="module")
def plugin(dev) -> str:
    from unidev.adapters.torch import _backend

    return _backend.load().plugin


def _names(plugin: str) -> list[str]:
    return [s.name for s in ua.algorithms(plugin, "conv2d")["conv2d"] if s.fn is None]


def _cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1, bias=False), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 8, 5, stride=2, padding=2), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))


def _train(model, dev, x, t, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x.to(dev)), t.to(dev)).backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()]


def _where_it_applies(name):
    return lambda layer: name if ua.why_not(ua.find(layer.device, "conv2d", name), layer) is None \
        else "auto"


@pytest.mark.parametrize("which", ["each", "auto", "autotune"])
def test_swapped_cnn_trains_like_torch_cpu(dev, plugin, which, no_fallbacks, tmp_path,
                                           monkeypatch):
    monkeypatch.setenv("UNIDEV_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    x, t = torch.randn(4, 3, 12, 12), torch.randint(0, 4, (4,))
    base = _cnn()
    want = _train(copy.deepcopy(base), "cpu", x, t)
    for name in _names(plugin) if which == "each" else [which]:
        model = copy.deepcopy(base).to(dev)
        opt_before = torch.optim.SGD(model.parameters(), lr=0.1)  # built before the swap
        sel = _where_it_applies(name) if which == "each" else name
        ua_layers = __import__("unidev.torch", fromlist=["x"]).swap_conv2d(
            model, sel, example_inputs=x.to(dev))
        assert len(ua_layers) == 4 and ua_layers[0].input_shape == (4, 3, 12, 12)
        assert opt_before.param_groups[0]["params"][0] is model[0].weight  # same parameters
        assert model.training and all(m.training for m in model.modules())
        got = _train(model, dev, x, t)
        diff = max((a - b).abs().max().item() for a, b in zip(got, want, strict=True))
        assert diff < 1e-4, (name, diff)
    if which == "autotune":
        import unidev.torch as ut

        chosen = ut.algorithm_selection(model)["0"]["tuned"]
        assert set(next(iter(chosen.values()))) <= set(_names(plugin))
        assert ua.decisions(), "autotune persisted nothing"


def test_chosen_algorithm_is_the_one_that_runs(dev, plugin):
    """The swapped layer's y, grad_x and grad_w are bit for bit those of unidev.ops with the same
    algorithm, and the algorithms' results differ among themselves, so equality identifies it."""
    import unidev.torch as ut
    from unidev import ops
    from unidev.core.array import DeviceArray

    torch.manual_seed(1)
    x, gy = torch.randn(2, 16, 10, 10), torch.randn(2, 16, 10, 10)
    conv = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False)
    w = conv.weight.detach()
    d = f"{plugin}:0"
    xa, wa, ga = (DeviceArray.from_numpy(a.numpy(), d) for a in (x, w, gy))
    at = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    seen = set()
    for name in _names(plugin):
        m = copy.deepcopy(conv).to(dev)
        ut.swap_conv2d(m, name)
        xd = x.to(dev).requires_grad_()
        y = m(xd)
        y.backward(gy.to(dev))
        want = (ops.conv2d(xa, wa, algorithm=name, **at).numpy(),
                ops.conv2d_backward_input(ga, wa, input_shape=x.shape, algorithm=name,
                                          **at).numpy(),
                ops.conv2d_backward_weight(ga, xa, weight_shape=w.shape, algorithm=name,
                                           **at).numpy())
        got = (y.detach().cpu().numpy(), xd.grad.cpu().numpy(), m.weight.grad.cpu().numpy())
        for g, wnt, what in zip(got, want, ("y", "grad_x", "grad_w"), strict=True):
            assert np.array_equal(g, wnt), (name, what, np.abs(g - wnt).max())
        seen.add(tuple(a.tobytes() for a in got))
    assert len(seen) > 1, "every algorithm gave identical bits: the check cannot tell them apart"


def test_kernel_receives_the_name_forward_and_backward(dev, plugin):
    """A name smuggled past the swap-time check reaches the plugin's kernel, which refuses it:
    in the forward call and, on autograd's device thread, in each gradient call."""
    import unidev.torch as ut

    m = torch.nn.Conv2d(3, 4, 3).to(dev)
    ut.swap_conv2d(m, "auto")
    x = torch.randn(1, 3, 6, 6, device=dev, requires_grad=True)
    m._unidev_algorithms["conv2d"] = "no_such_algo_fwd"
    with pytest.raises((RuntimeError, ValueError), match="no_such_algo_fwd"):
        m(x)
    for op in ("conv2d_backward_input", "conv2d_backward_weight"):
        m._unidev_algorithms.update(dict.fromkeys(ua.DIRECTIONS, "auto"))
        m._unidev_algorithms[op] = f"bad_{op}"
        y = m(x)
        with pytest.raises((RuntimeError, ValueError), match=f"bad_{op}"):
            y.sum().backward()
    ut.unswap(m)
    assert type(m) is torch.nn.Conv2d
    m(x).sum().backward()  # the plugin's auto again


def test_bad_selectors_are_refused_at_swap_time(dev, plugin):
    import unidev.torch as ut

    model = _cnn().to(dev)
    with pytest.raises(ua.AlgorithmError, match=r"list of 3 names but the model has 4"):
        ut.swap_conv2d(model, ["auto"] * 3)
    with pytest.raises(ua.AlgorithmError, match=r"layer 1 '2'.*gave 7 \(int\)"):
        ut.swap_conv2d(model, lambda layer: "auto" if layer.index == 0 else 7)
    with pytest.raises(ua.AlgorithmError, match=r"unknown algorithm 'fft'.*known: auto"):
        ut.swap_conv2d(model, "fft")
    with pytest.raises(ua.AlgorithmError, match=r"unknown op key"):
        ut.swap_backend(model, {"linear": "auto"})
    if "winograd" in _names(plugin):
        with pytest.raises(ua.AlgorithmError,
                           match=r"layer 2 '4'.*kernel 5x5.*'winograd'.*needs kernel 3x3, got 5x5"):
            ut.swap_conv2d(model, "winograd")
    assert not ut.algorithm_selection(model), "a refused swap must change nothing"
    with pytest.raises(ua.AlgorithmError, match="input is on cpu"):
        m = _cnn()
        ut.swap_conv2d(m, "auto")
        m(torch.randn(1, 3, 8, 8))


def test_swap_backend_per_direction_and_function_selector(dev, plugin, no_fallbacks):
    import unidev.torch as ut

    names = _names(plugin)
    model = _cnn().to(dev)
    seen = []

    def pick(layer):
        seen.append(layer)
        return names[layer.index % len(names)] if layer.kernel == (3, 3) else "auto"

    ut.swap_backend(model, {"conv2d": pick, "conv2d_backward_input": "auto",
                            "conv2d_backward_weight": [names[-1] if n != "winograd" else "auto"
                                                       for n in ("a", "b", "winograd", "c")]},
                    example_inputs=torch.randn(2, 3, 8, 8).to(dev))
    assert [s.input_shape[1] for s in seen] == [3, 16, 16, 8]  # function saw the shapes
    sel = ut.algorithm_selection(model)
    assert sel["0"]["conv2d"] == names[0] and sel["0"]["conv2d_backward_input"] == "auto"
    assert sel["4"] == {"conv2d": "auto", "conv2d_backward_input": "auto",
                        "conv2d_backward_weight": "auto"}
    model(torch.randn(2, 3, 8, 8).to(dev)).sum().backward()


def _taps(x, weight, bias=None, *, stride, padding, dilation, groups):
    """conv2d as one batched matmul per kernel tap, written with unidev.ops (groups 1)"""
    from unidev import ops

    n, c, h, w = x.shape
    k, _, r, s = weight.shape
    oh = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    xp = ops.pad_constant(x, pads=(0, 0, 0, 0, padding[0], padding[0], padding[1], padding[1]))
    y = None
    for i in range(r):
        for j in range(s):
            hi, wj = i * dilation[0], j * dilation[1]
            v = xp[:, :, hi: hi + (oh - 1) * stride[0] + 1: stride[0],
                   wj: wj + (ow - 1) * stride[1] + 1: stride[1]]
            wt = weight[:, :, i, j].reshape(1, k, c).broadcast_to((n, k, c))
            part = ops.matmul(wt, v.reshape(n, c, oh * ow))
            y = part if y is None else ops.add(y, part)
    y = y.reshape(n, k, oh, ow)
    return ops.add(y, bias.reshape(1, k, 1, 1)) if bias is not None else y


def test_registered_python_composite_is_selectable(dev, plugin, no_fallbacks):
    import unidev.torch as ut

    ua.register("conv2d", "taps", _taps, requires={"groups": 1})
    try:
        torch.manual_seed(2)
        base = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                   torch.nn.Conv2d(8, 4, 3, stride=2))
        x = torch.randn(2, 3, 9, 9)
        ref = copy.deepcopy(base)
        model = copy.deepcopy(base).to(dev)
        ut.swap_backend(model, {"conv2d": "taps", "conv2d_backward_input": "auto",
                                "conv2d_backward_weight": "auto"})
        y = model(x.to(dev))
        assert (y.cpu() - ref(x)).abs().max().item() < 1e-5
        F.mse_loss(model(x.to(dev)), torch.zeros_like(y)).backward()
        F.mse_loss(ref(x), torch.zeros(y.shape)).backward()
        assert (model[0].weight.grad.cpu() - ref[0].weight.grad).abs().max().item() < 1e-4
        with pytest.raises(ua.AlgorithmError, match=r"unknown algorithm 'taps' for "
                                                    r"conv2d_backward_input"):
            ut.swap_conv2d(copy.deepcopy(base).to(dev), "taps")
        dw = torch.nn.Conv2d(4, 4, 3, groups=4).to(dev)
        with pytest.raises(ua.AlgorithmError, match="needs groups 1, got 4"):
            ut.swap_backend(dw, {"conv2d": "taps", "conv2d_backward_input": "auto",
                                 "conv2d_backward_weight": "auto"})
    finally:
        ua.unregister("conv2d", "taps")


AUTOTUNE_SCRIPT = """
    import torch, unidev.torch as ut, unidev.algorithms as ua
    dev = ut.load()
    m = torch.nn.Conv2d(8, 8, 3, padding=1).to(dev)
    ut.swap_conv2d(m, "autotune", example_inputs=torch.randn(2, 8, 12, 12, device=dev))
    print("TUNED", ut.algorithm_selection(m)["<model>"]["tuned"], len(ua.decisions()))
"""


def test_autotune_persists_across_processes(dev, plugin, tmp_path):
    import json

    env = dict(os.environ, UNIDEV_CACHE_DIR=str(tmp_path), UNIDEV_TORCH_DEVICE=plugin)
    outs, stamps = [], []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(AUTOTUNE_SCRIPT)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        outs.append(r.stdout.split("TUNED", 1)[1].strip())
        data = json.loads((tmp_path / "autotune" / "decisions.json").read_text())
        stamps.append({k: v["time"] for k, v in data.items()})
    assert outs[0] == outs[1] and outs[0].endswith(" 3"), outs  # 3 directions decided
    assert stamps[0] == stamps[1] and len(stamps[0]) == 3  # the second process timed nothing
    report = subprocess.run([sys.executable, "-m", "unidev", "autotune", "report"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0 and "decisions" in report.stdout, report.stderr
    assert "conv2d_backward_weight" in report.stdout and "8x8x12x12" not in report.stdout
    assert "2x8x12x12" in report.stdout


def test_demo_resnet_swapped_per_layer_trains_and_pickles(dev, plugin, no_fallbacks):
    """A ResNet (BatchNorm, 3x3 stride 1 and 2, 1x1 stride-2 shortcuts) with the algorithms
    spread over its layers by a function selector: trains like CPU, survives deepcopy/pickle."""
    import io

    import unidev.torch as ut
    from unidev.demos import torch_models

    names = _names(plugin)

    todo = list(names)  # each algorithm at least once: the first layer it fits takes it

    def spread(layer):
        fits = [n for n in names if ua.why_not(ua.find(layer.device, "conv2d", n), layer) is None]
        pick = next((n for n in todo if n in fits), fits[layer.index % len(fits)])
        if pick in todo:
            todo.remove(pick)
        return pick

    torch.manual_seed(3)
    x, t = torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))
    base = torch_models.resnet()
    model = copy.deepcopy(base).to(dev)
    layers = ut.swap_conv2d(model, spread, example_inputs=x.to(dev))  # must not touch BN stats
    used = {a for sel in ut.algorithm_selection(model).values() for a in sel.values()}
    assert len(layers) >= 5 and used == set(names), used
    ref = copy.deepcopy(base)
    want = _train(ref, "cpu", x, t)
    got = _train(model, dev, x, t)
    diff = max((a - b).abs().max().item() for a, b in zip(got, want, strict=True))
    assert diff < 1e-4, diff
    for (name, a), b in zip(ref.named_buffers(), model.buffers(), strict=True):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-4, atol=1e-5, msg=name)
    clone = copy.deepcopy(model)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert ut.algorithm_selection(clone) == ut.algorithm_selection(loaded) == \
        ut.algorithm_selection(model)
    with torch.no_grad():
        assert torch.equal(loaded(x.to(dev)).cpu(), model(x.to(dev)).cpu())


@pytest.mark.parametrize("make", [
    lambda: torch.nn.Conv2d(3, 4, 4, padding="same"),
    lambda: torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
    lambda: torch.nn.Conv2d(3, 4, (3, 5), padding="valid", dilation=(2, 1)),
    lambda: torch.nn.Conv2d(4, 4, 3, groups=2, stride=(2, 1), padding=(1, 2), bias=False),
], ids=["same-even", "reflect", "valid-dilated", "grouped"])
def test_padding_modes_strides_and_groups_match_cpu(dev, plugin, make):
    import unidev.torch as ut

    torch.manual_seed(4)
    conv = make()
    x = torch.randn(2, conv.in_channels, 9, 9, requires_grad=True)
    m = copy.deepcopy(conv).to(dev)
    ut.swap_conv2d(m, "im2col")
    xd = x.detach().to(dev).requires_grad_()
    y = m(xd)
    y.square().sum().backward()
    conv(x).square().sum().backward()
    assert y.shape == conv(x).shape
    torch.testing.assert_close(y.cpu(), conv(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.weight.grad.cpu(), conv.weight.grad, rtol=1e-4, atol=1e-4)
