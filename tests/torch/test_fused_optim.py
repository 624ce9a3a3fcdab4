"""torch.optim's fused=True steps on the device agree with torch CPU's fused and foreach steps."""

from __future__ import annotations

import pytest
import torch

import unidev.torch as ut
from unidev.adapters.torch import _backend
from unidev.core import discovery

SHAPES = [(7,), (13, 5), (1,), (3, 3, 3), (1031,), ()]  # odd sizes: vector tails, a 0-d param
SGD = {
    "plain": dict(lr=0.1),
    "momentum": dict(lr=0.05, momentum=0.9),
    "nesterov-wd": dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "dampening-maximize": dict(lr=0.1, momentum=0.5, dampening=0.3, maximize=True),
}
ADAM = {
    "adam": (torch.optim.Adam, dict(lr=0.01)),
    "adam-amsgrad-wd": (torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    "adam-maximize": (torch.optim.Adam, dict(lr=0.01, betas=(0.5, 0.9), maximize=True)),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    "adamw-amsgrad": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.05, amsgrad=True)),
}


def _has_kernel(op: str, dtype: str) -> bool:
    return discovery.load(_backend.STATE.plugin).kernel(op, dtype) is not None


def _run(make, device: str, dtype, steps: int = 4, **kw):
    """Parameters of SHAPES stepped with the same gradients; returns them and the states."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=gen, dtype=dtype).to(device).requires_grad_()
              for s in SHAPES]
    opt = make(params, **kw)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen, dtype=dtype).to(device)
        opt.step()
    states = [{k: v.detach().cpu() for k, v in opt.state[p].items() if torch.is_tensor(v)}
              for p in params]
    return [p.detach().cpu() for p in params], states


def _same(a, b, dtype):
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-13)
    for (pa, sa), (pb, sb) in zip(zip(*a, strict=True), zip(*b, strict=True), strict=True):
        torch.testing.assert_close(pa, pb, **tol)
        assert sa.keys() == sb.keys()
        for k in sa:
            torch.testing.assert_close(sa[k], sb[k], **tol, msg=k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("cfg", sorted(SGD))
def test_sgd_fused_on_the_device_matches_cpu_fused_and_foreach(dev, dtype, cfg, no_fallbacks):
    fused = _run(torch.optim.SGD, dev, dtype, fused=True, **SGD[cfg])
    _same(fused, _run(torch.optim.SGD, "cpu", dtype, fused=True, **SGD[cfg]), dtype)
    _same(fused, _run(torch.optim.SGD, dev, dtype, foreach=True, **SGD[cfg]), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("cfg", sorted(ADAM))
def test_adam_fused_on_the_device_matches_cpu_fused_and_foreach(dev, dtype, cfg, no_fallbacks):
    cls, kw = ADAM[cfg]
    fused = _run(cls, dev, dtype, fused=True, **kw)
    _same(fused, _run(cls, "cpu", dtype, fused=True, **kw), dtype)
    _same(fused, _run(cls, dev, dtype, foreach=True, **kw), dtype)


def test_tensor_lr_overloads(dev, no_fallbacks):
    for cls, kw in [(torch.optim.SGD, dict(momentum=0.9)), (torch.optim.Adam, {}),
                    (torch.optim.AdamW, dict(weight_decay=0.1))]:
        got = _run(cls, dev, torch.float32, fused=True, lr=torch.tensor(0.01), **kw)
        want = _run(cls, "cpu", torch.float32, fused=True, lr=torch.tensor(0.01), **kw)
        _same(got, want, torch.float32)


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
def test_grad_scale_unscales_and_found_inf_skips(dev, found_inf, no_fallbacks):
    results = []
    for device in (dev, "cpu"):
        gen = torch.Generator().manual_seed(1)
        t = [torch.randn(37, generator=gen).to(device) for _ in range(5)]
        p, g, m, v, vmax = t
        v.abs_(), vmax.abs_()
        step = torch.tensor(3.0, device=device)
        scale = torch.tensor(4.0, device=device)
        inf = torch.tensor(found_inf, device=device)
        torch._fused_adamw_([p], [g], [m], [v], [vmax], [step], lr=0.01, beta1=0.9, beta2=0.99,
                            weight_decay=0.1, eps=1e-8, amsgrad=True, maximize=False,
                            grad_scale=scale, found_inf=inf)
        p2, g2, b = (torch.randn(37, generator=gen).to(device) for _ in range(3))
        torch._fused_sgd_([p2], [g2], [b], weight_decay=0.0, momentum=0.9, lr=0.1,
                          dampening=0.0, nesterov=False, maximize=False, is_first_step=False,
                          grad_scale=scale, found_inf=inf)
        results.append([x.cpu() for x in (p, g, m, v, vmax, p2, g2, b)])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_fused_steps_call_the_plugin_not_torch_ops(dev):
    """With the plugin's kernels the fused step is one plugin call per parameter: no aten ops."""
    if not (_has_kernel("sgd_update", "float32") and _has_kernel("adam_update", "float32")):
        pytest.skip("the plugin has no sgd_update/adam_update kernels (the composite path runs)")
    params = [torch.randn(s).to(dev).requires_grad_() for s in SHAPES]
    for p in params:
        p.grad = torch.randn(p.shape).to(dev)
    for opt in (torch.optim.SGD(params, lr=0.1, momentum=0.9, fused=True),
                torch.optim.Adam(params, lr=0.1, fused=True)):
        opt.step()  # first steps create the state
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            opt.step()
        fused = [e for e in prof.events() if e.name.startswith("aten::_fused_")]
        assert len(fused) == 1, [e.name for e in prof.events()]
        inside = [e.name for e in prof.events() if e.cpu_parent is not None
                  and e.cpu_parent.name == fused[0].name]
        assert inside == [], f"{fused[0].name} ran torch ops: {inside}"


def test_bad_lists_name_the_op(dev):
    p = [torch.randn(4).to(dev) for _ in range(3)]
    g = [torch.randn(4).to(dev) for _ in range(3)]
    with pytest.raises(RuntimeError, match=r"_fused_sgd_: grads has 2 tensors, expected 3"):
        torch._fused_sgd_(p, g[:2], [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=False)
    with pytest.raises(RuntimeError, match=r"_fused_sgd_: momentum_buffer_list has 0 tensors"):
        torch._fused_sgd_(p, g, [], weight_decay=0.0, momentum=0.9, lr=0.1, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=True)
    bad = [g[0], torch.randn(4), g[2]]
    steps = [torch.tensor(1.0).to(dev) for _ in range(3)]
    with pytest.raises(RuntimeError, match=r"_fused_adam_: grads\[1\] is on cpu"):
        torch._fused_adam_(p, bad, g, g, [], steps, lr=0.1, beta1=0.9, beta2=0.99,
                           weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match=r"_fused_adamw_: max_exp_avg_sqs has 0 tensors"):
        torch._fused_adamw_(p, g, g, g, [], steps, lr=0.1, beta1=0.9, beta2=0.99,
                            weight_decay=0.0, eps=1e-8, amsgrad=True, maximize=False)
    if _has_kernel("sgd_update", "float32"):
        with pytest.raises(ValueError, match=r"sgd_update: .*'grad'.*shape"):
            torch._fused_sgd_(p[:1], [torch.randn(5).to(dev)], [], weight_decay=0.0,
                              momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
                              maximize=False, is_first_step=False)


def test_fused_rows_are_registered(dev):
    names = set(ut.registered_ops())
    assert {"_fused_sgd_", "_fused_adam_", "_fused_adamw_", "_fused_sgd_.tensor_lr"} <= names


def test_grad_scaler_drives_the_fused_step_like_on_the_cpu(dev):
    """GradScaler passes grad_scale/found_inf to fused optimizers; an inf step is skipped."""
    def run(device):
        torch.manual_seed(0)
        m = torch.nn.Linear(9, 4).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.1, fused=True)
        scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10)
        x = torch.randn(6, 9).to(device)
        for i in range(4):
            opt.zero_grad()
            loss = m(x).square().sum() * (float("inf") if i == 1 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return [p.detach().cpu() for p in m.parameters()], scaler.get_scale()

    (got, got_scale), (want, want_scale) = run(dev), run("cpu")
    assert got_scale == want_scale == 2.0 ** 9
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
