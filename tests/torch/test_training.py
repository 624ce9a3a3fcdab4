"""An MLP and a small ResNet trained on the device and on the CPU from the same weights agree."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import unidev.torch as ut
from unidev.demos import torch_models as models

OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
}


def train(model, x, y, device: str, opt_name: str, steps: int = 5):
    """Trains a copy of `model` on `device`; returns (losses, final weights on the CPU)."""
    m = copy.deepcopy(model).to(device)
    opt = OPTIMIZERS[opt_name](m.parameters())
    xd, yd = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(m(xd), yd)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    state = {k: v.detach().cpu() for k, v in m.state_dict().items()}
    return losses, state


def check_same_training(make, x, y, dev, opt_name, rtol=1e-4, atol=1e-5):
    torch.manual_seed(0)
    model = make()
    ut.reset_fallbacks()
    got_losses, got = train(model, x, y, dev, opt_name)
    fallbacks = ut.fallback_report()
    want_losses, want = train(model, x, y, "cpu", opt_name)
    assert fallbacks == {}, f"ops ran on the CPU: {fallbacks}"
    torch.testing.assert_close(torch.tensor(got_losses), torch.tensor(want_losses), rtol=rtol,
                               atol=atol)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=rtol, atol=atol, msg=k)


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_mlp_trains_like_cpu(dev, opt_name):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
    check_same_training(models.mlp, x, y, dev, opt_name)


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_resnet_trains_like_cpu(dev, opt_name):
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 10, (4,), generator=g)
    check_same_training(models.resnet, x, y, dev, opt_name, rtol=1e-3, atol=1e-4)


def test_model_eval_and_no_grad(dev):
    torch.manual_seed(0)
    model = models.resnet().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        want = model(x)
        got = copy.deepcopy(model).to(dev)(x.to(dev))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
