"""Every op of the aten → unidev table on the device vs torch CPU, strided and broadcast inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import unidev.torch as ut


class Maker:
    """Makes the same pseudo-random inputs on any device; views are taken after the transfer."""

    def __init__(self, device: str) -> None:
        self.device, self.gen, self.leaves = device, torch.Generator().manual_seed(0), []

    def __call__(self, *shape, dtype=torch.float32, positive=False, grad=False, low=0, high=4):
        if dtype.is_floating_point:
            x = torch.randn(*shape, generator=self.gen, dtype=dtype)
            x = x.abs() + 0.5 if positive else x
        elif dtype == torch.bool:
            x = torch.randint(0, 2, shape, generator=self.gen).bool()
        else:
            x = torch.randint(low, high, shape, generator=self.gen, dtype=dtype)
        x = x.to(self.device)
        if grad:
            x.requires_grad_(True)
            self.leaves.append(x)
        return x


I64, BOOL = torch.int64, torch.bool
UNARY = ["abs", "neg", "exp", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid",
         "erf", "floor", "ceil", "round", "sign", "relu", "log"]
CASES = {
    **{f"{n}": (lambda m, n=n: getattr(torch, n)(m(5, 6, positive=n in ("sqrt", "rsqrt", "log"))))
       for n in UNARY},
    **{f"{n}_strided": (lambda m, n=n: getattr(torch, n)(m(6, 8, positive=True).t()[1:, ::2]))
       for n in ("exp", "sqrt", "abs", "relu")},
    "relu_inplace": lambda m: torch.relu_(m(4, 5) * 1),
    "logical_not": lambda m: torch.logical_not(m(4, 5, dtype=BOOL)),
    "gelu": lambda m: F.gelu(m(4, 5)),
    "gelu_tanh": lambda m: F.gelu(m(4, 5), approximate="tanh"),
    "add_alpha_broadcast": lambda m: torch.add(m(3, 1), m(1, 4), alpha=2.5),
    "add_scalar": lambda m: m(3, 4) + 1.5,
    "add_int": lambda m: m(3, 4, dtype=I64) + m(4, dtype=I64),
    "add_int_float_promote": lambda m: m(3, 4, dtype=I64) + m(3, 4),
    "add_inplace_broadcast": lambda m: m(3, 4).add_(m(4), alpha=-1),
    "add_out": lambda m: torch.add(m(2, 3), m(2, 3), out=m(2, 3)),
    "sub_transposed": lambda m: m(4, 3).t() - m(3, 4),
    "mul_scalar": lambda m: m(2, 3, 4) * 0.25,
    "mul_inplace": lambda m: m(3, 4).mul_(m(3, 1)),
    "div": lambda m: m(3, 4) / m(3, 4, positive=True),
    "div_int_true": lambda m: m(3, 4, dtype=I64) / m(3, 4, dtype=I64, low=1),
    "div_inplace": lambda m: m(3, 4).div_(3.0),
    "pow_scalar": lambda m: m(3, 4) ** 2,
    "pow_tensor": lambda m: m(3, 4, positive=True) ** m(4),
    "maximum": lambda m: torch.maximum(m(3, 4), m(4)),
    "minimum": lambda m: torch.minimum(m(3, 4), m(3, 1)),
    **{f"cmp_{n}": (lambda m, n=n: getattr(torch, n)(m(3, 4), m(4))) for n in
       ("eq", "ne", "lt", "le", "gt", "ge")},
    **{f"cmp_{n}_scalar": (lambda m, n=n: getattr(torch, n)(m(3, 4), 0.1)) for n in
       ("eq", "ne", "lt", "le", "gt", "ge")},
    "logical_and": lambda m: torch.logical_and(m(3, 4, dtype=BOOL), m(4, dtype=BOOL)),
    "logical_or": lambda m: torch.logical_or(m(3, 4, dtype=BOOL), m(3, 4, dtype=BOOL)),
    "bitwise_and_bool": lambda m: m(3, 4, dtype=BOOL) & m(3, 4, dtype=BOOL),
    "where": lambda m: torch.where(m(3, 4) > 0, m(3, 4), m(4)),
    "addcmul": lambda m: torch.addcmul(m(3, 4), m(4), m(3, 1), value=0.5),
    "addcdiv": lambda m: torch.addcdiv(m(3, 4), m(3, 4), m(3, 4, positive=True), value=-2),
    "lerp": lambda m: torch.lerp(m(3, 4), m(3, 4), 0.3),
    "sum_all": lambda m: m(3, 4, 5).sum(),
    "sum_dims": lambda m: m(3, 4, 5).sum((0, 2)),
    "sum_keepdim_neg": lambda m: m(3, 4, 5).sum(-1, keepdim=True),
    "sum_int": lambda m: m(3, 4, dtype=I64).sum(1),
    "sum_strided": lambda m: m(6, 4).t()[:, 1:].sum(1),
    "mean": lambda m: m(3, 4, 5).mean((1,)),
    "amax": lambda m: m(3, 4, 5).amax(2),
    "amin": lambda m: m(3, 4, 5).amin((0, 1), keepdim=True),
    "max_all": lambda m: m(3, 4).max(),
    "min_all": lambda m: m(3, 4).min(),
    "argmax": lambda m: m(3, 4, 5).argmax(1),
    "argmin_flat": lambda m: m(3, 4).argmin(),
    "mm": lambda m: m(5, 3) @ m(3, 4),
    "mm_transposed": lambda m: m(3, 5).t() @ m(4, 3).t(),
    "addmm": lambda m: torch.addmm(m(4), m(5, 3), m(3, 4), beta=0.5, alpha=2),
    "bmm": lambda m: torch.bmm(m(2, 5, 3), m(2, 3, 4)),
    "matmul_batched": lambda m: m(2, 5, 3) @ m(3, 4),
    "linear": lambda m: F.linear(m(5, 3), m(4, 3), m(4)),
    "cat": lambda m: torch.cat([m(2, 3), m(4, 3), m(1, 3)]),
    "cat_dim1": lambda m: torch.cat([m(2, 3), m(2, 1).t().t()], dim=1),
    "pad": lambda m: F.pad(m(2, 3, 4), (1, 2, 0, 1), value=0.5),
    "softmax": lambda m: torch.softmax(m(3, 5), dim=1),
    "log_softmax_dim0": lambda m: torch.log_softmax(m(3, 5), dim=0),
    "mse_none": lambda m: F.mse_loss(m(3, 4), m(3, 4), reduction="none"),
    "mse_sum": lambda m: F.mse_loss(m(3, 4), m(3, 4), reduction="sum"),
    "nll_none": lambda m: F.nll_loss(m(4, 5).log_softmax(1), m(4, dtype=I64, high=5),
                                     reduction="none"),
    "nll_weighted": lambda m: F.nll_loss(m(4, 5).log_softmax(1), m(4, dtype=I64, high=5),
                                         weight=m(5, positive=True), ignore_index=1),
    "conv2d": lambda m: F.conv2d(m(2, 3, 7, 6), m(4, 3, 3, 3), m(4), stride=2, padding=1),
    "conv2d_groups_dilation": lambda m: F.conv2d(m(1, 4, 8, 8), m(6, 2, 3, 3), groups=2,
                                                 dilation=2),
    "max_pool2d": lambda m: F.max_pool2d(m(2, 3, 7, 7), 3, 2, padding=1),
    "max_pool2d_ceil": lambda m: F.max_pool2d(m(1, 2, 7, 6), 2, ceil_mode=True),
    "avg_pool2d": lambda m: F.avg_pool2d(m(2, 3, 6, 6), 3, 2, padding=1,
                                         count_include_pad=False),
    "adaptive_avg_pool2d": lambda m: F.adaptive_avg_pool2d(m(2, 3, 7, 5), (3, 2)),
    "batch_norm_train": lambda m: F.batch_norm(m(4, 3, 5, 5), m(3), m(3, positive=True), m(3),
                                               m(3), training=True, momentum=0.2),
    "batch_norm_eval": lambda m: F.batch_norm(m(4, 3, 5), m(3), m(3, positive=True), m(3), m(3),
                                              training=False),
    "arange": lambda m: torch.cat([torch.arange(1.5, 9, 0.75, device=m.device),
                                   torch.arange(-3, 10, 1.25, device=m.device)]),
    "arange_int": lambda m: torch.arange(-5, 37, 3, device=m.device),
    "fill_zero": lambda m: torch.stack([m(3).fill_(2.5), m(3).zero_()]),
    "copy_cast": lambda m: m(3, 4).t().to(torch.float64).to(torch.int32),
    "clone_strided": lambda m: m(4, 6)[::2, 1::2].clone(),
    # tier 3
    "log1p": lambda m: torch.log1p(m(4, 5, positive=True) - 0.9),
    "expm1": lambda m: torch.expm1(m(4, 5)),
    **{n: (lambda m, n=n: getattr(F, n)(m(4, 5) * 3)) for n in
       ("silu", "hardswish", "hardsigmoid", "mish", "softplus")},
    "hardswish_inplace": lambda m: F.hardswish(m(4, 5) * 3, inplace=True),
    "softplus_beta": lambda m: F.softplus(m(4, 5) * 3, beta=2.0, threshold=1.5),
    "leaky_relu": lambda m: F.leaky_relu(m(4, 5), 0.2),
    "elu": lambda m: F.elu(m(4, 5), 1.5),
    "selu_celu": lambda m: torch.stack([F.selu(m(4, 5)), F.celu(m(4, 5), 0.7)]),
    "clamp": lambda m: torch.clamp(m(4, 5), -0.5, 0.7),
    "clamp_min": lambda m: torch.clamp(m(4, 5), min=0.1),
    "clamp_nan_bound": lambda m: (lambda t: t != t)(torch.clamp(m(4, 5), -1.0, float("nan"))),
    "clamp_max_inplace": lambda m: m(4, 5).clamp_max_(0.3),
    "floor_divide": lambda m: torch.floor_divide(m(3, 4) * 4, m(4, positive=True)),
    "floor_divide_inplace": lambda m: (m(3, 4) * 4).floor_divide_(-m(3, 4, positive=True)),
    "remainder": lambda m: torch.remainder(m(3, 4) * 4, -m(3, 1, positive=True)),
    "remainder_scalar": lambda m: (m(3, 4) * 4) % 1.5,
    "xlogy": lambda m: torch.xlogy(m(3, 4) * (m(3, 4) > 0), m(3, 4, positive=True)),
    "isinf": lambda m: torch.isinf(m(3, 4) / (m(3, 4) > 0)),
    "isnan": lambda m: torch.stack([torch.isnan(torch.log(m(3, 4))), torch.isnan(m(3, 4) > 0)]),
}

GRAD_CASES = {
    "mlp_ops": lambda m: F.cross_entropy(
        F.relu(F.linear(m(4, 6, grad=True), m(5, 6, grad=True), m(5, grad=True))),
        m(4, dtype=I64, high=5)),
    "mse": lambda m: F.mse_loss(torch.tanh(m(3, 4, grad=True)), m(3, 4)),
    "sigmoid_gelu": lambda m: (torch.sigmoid(m(3, 4, grad=True))
                               * F.gelu(m(3, 4, grad=True))).sum(),
    "softmax": lambda m: (torch.softmax(m(3, 5, grad=True), 1) * m(3, 5)).sum(),
    "conv_bias": lambda m: (F.conv2d(m(2, 3, 6, 6, grad=True), m(4, 3, 3, 3, grad=True),
                                     m(4, grad=True), padding=1) ** 2).sum(),
    "conv_stride_groups": lambda m: F.conv2d(m(1, 4, 7, 7, grad=True), m(4, 2, 3, 3, grad=True),
                                             stride=2, groups=2).sum(),
    "pools": lambda m: (F.max_pool2d(m(2, 3, 6, 6, grad=True), 2) * m(2, 3, 3, 3)).sum()
    + (F.avg_pool2d(m(2, 3, 6, 6, grad=True), 3, 1, 1) * m(2, 3, 6, 6)).sum()
    + (F.adaptive_avg_pool2d(m(2, 3, 6, 6, grad=True), 2) * m(2, 3, 2, 2)).sum(),
    "batch_norm": lambda m: (F.batch_norm(m(4, 3, 5, 5, grad=True), None, None,
                                          weight=m(3, grad=True), bias=m(3, grad=True),
                                          training=True) * m(4, 3, 5, 5)).sum(),
    "batch_norm_eval": lambda m: (F.batch_norm(m(4, 3, 5, 5, grad=True), m(3),
                                               m(3, positive=True), weight=m(3, grad=True),
                                               training=False) * m(4, 3, 5, 5)).sum(),
    "broadcast_mul_add": lambda m: ((m(3, 1, grad=True) * m(4, grad=True)) + m(1, grad=True)).sum(),
    "tier3_activations": lambda m: (F.silu(m(3, 4, grad=True) * 3) * m(3, 4)
                                    + F.hardswish(m(3, 4, grad=True) * 3) * m(3, 4)
                                    + F.hardsigmoid(m(3, 4, grad=True) * 3) * m(3, 4)
                                    + F.mish(m(3, 4, grad=True)) * m(3, 4)
                                    + torch.log1p(m(3, 4, grad=True, positive=True))
                                    + torch.clamp(m(3, 4, grad=True), -0.5, 0.5)).sum(),
    "tier3_scalar_activations": lambda m: (F.elu(m(3, 4, grad=True), 1.5) * m(3, 4)
                                           + F.selu(m(3, 4, grad=True)) * m(3, 4)
                                           + F.leaky_relu(m(3, 4, grad=True), 0.2) * m(3, 4)
                                           + F.softplus(m(3, 4, grad=True), 2.0, 1.0) * m(3, 4)
                                           ).sum(),
}


def _compare(got, want, name: str) -> None:
    got, want = (got, want) if isinstance(got, tuple | list) else ((got,), (want,))
    for g, w in zip(got, want, strict=True):
        assert g.device.type != "cpu" or w.device.type == "cpu"
        g = g.detach().cpu()
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, w.dtype, g.shape, w.shape)
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w.detach(), rtol=1e-4, atol=1e-5,
                                       msg=lambda m: f"{name}: {m}")
        else:
            assert torch.equal(g, w), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_cpu(dev, no_fallbacks, name):
    want = CASES[name](Maker("cpu"))
    got = CASES[name](Maker(dev))
    assert got.device.type == dev
    _compare(got, want, name)


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_autograd_matches_cpu(dev, no_fallbacks, name):
    results = []
    for d in ("cpu", dev):
        m = Maker(d)
        loss = GRAD_CASES[name](m)
        loss.backward()
        results.append((loss, [leaf.grad for leaf in m.leaves]))
    _compare(results[1][0], results[0][0], name)
    _compare(tuple(results[1][1]), tuple(results[0][1]), name)


def test_batch_norm_updates_running_stats(dev, no_fallbacks):
    stats = []
    for d in ("cpu", dev):
        m = Maker(d)
        x, rm, rv = m(4, 3, 5), m(3), m(3, positive=True)
        F.batch_norm(x, rm, rv, training=True, momentum=0.3)
        stats.append((rm, rv))
    _compare(stats[1], stats[0], "running stats")


def test_unmapped_op_falls_back_and_is_counted(dev):
    ut.reset_fallbacks()
    x = torch.tensor([0.0, 1.0, 0.0, 2.0])
    got = torch.nonzero(x.to(dev))
    assert got.device.type == dev and torch.equal(got.cpu(), torch.nonzero(x))
    assert ut.fallback_report() == {"nonzero": 1}


def test_plugin_error_raises_and_process_goes_on(dev):
    logp = torch.randn(3, 4).log_softmax(1).to(dev)
    bad = torch.tensor([0, 9, 1]).to(dev)
    with pytest.raises(ValueError, match="nll_loss"):  # the plugin's INVALID_ARGUMENT
        F.nll_loss(logp, bad).item()
    getattr(torch, dev).synchronize()
    assert (logp.exp().sum(1).cpu() - 1).abs().max() < 1e-5


def test_mixed_devices_rejected(dev):
    with pytest.raises(RuntimeError, match="device"):
        torch.ones(3, device=dev) + torch.ones(3)


def test_cat_mismatch_is_a_clear_error(dev):
    with pytest.raises(RuntimeError, match="must match|concat"):
        torch.cat([torch.ones(2, 3, device=dev), torch.ones(2, 4, device=dev)]).cpu()
