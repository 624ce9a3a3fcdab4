"""torch.compile(backend="unidev") vs torch CPU: inference, training, partitions, recompiles."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from unidev.adapters.torch import dynamo


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    dynamo.reset()
    yield
    torch._dynamo.reset()


class ConvNet(nn.Module):
    """conv+bn+relu, max pool, conv+relu (no bn: a conv2d_bias_act epilogue), pool, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.fc = nn.Conv2d(8, 6, 3, stride=1, padding=1), nn.Linear(6 * 2 * 2, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        x = F.adaptive_avg_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.Softsign(),
                         nn.Linear(32, 4))


def ops() -> dict[str, int]:
    return {k[3:]: v for k, v in dynamo.stats().items() if k.startswith("op:")}


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-4, atol=1e-5)


def train_like_cpu(cpu: nn.Module, model: nn.Module, compiled, dev: str, shape: tuple,
                   steps: int) -> None:
    """`steps` SGD steps (momentum 0.9, cross-entropy over 4 classes) of `cpu` and of `compiled`
    (over `model`, a copy of `cpu` on `dev`) on the same batches; the losses must agree."""
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (cpu, model)]
    for _ in range(steps):
        x, t = torch.randn(*shape), torch.randint(0, 4, (shape[0],))
        for m, opt, xx, tt in ((cpu, opts[0], x, t), (compiled, opts[1], x.to(dev), t.to(dev))):
            loss = F.cross_entropy(m(xx), tt)
            opt.zero_grad()
            loss.backward()
            opt.step()
            m.last = loss
        close(compiled.last, cpu.last)


@pytest.mark.parametrize("make,shape", [(mlp, (5, 12)), (ConvNet, (3, 3, 8, 8))],
                         ids=["mlp", "convnet"])
def test_inference_matches_cpu_and_fuses(dev, make, shape):
    torch.manual_seed(0)
    cpu = make().eval()
    compiled = torch.compile(copy.deepcopy(cpu).to(dev), backend="unidev")
    x = torch.randn(*shape)
    with torch.no_grad():
        got = compiled(x.to(dev))
        close(got, cpu(x))
        close(compiled(x.to(dev)), cpu(x))  # the cached program again
    fused = ops()
    if make is ConvNet:
        assert fused.get("conv2d_bias_act", 0) > 0, fused
    else:
        assert fused.get("gemm_bias_act", 0) > 0, fused
        # softsign is x / (1 + |x|): abs, add and div fuse into one elementwise program
        assert fused.get("elementwise_program", 0) > 0, fused
    assert dynamo.eager_counts() == {}
    assert dynamo.stats()["programs"] == 1


@pytest.mark.parametrize("make,shape", [(mlp, (6, 12)), (ConvNet, (4, 3, 8, 8))],
                         ids=["mlp", "convnet"])
def test_three_sgd_steps_match_cpu(dev, make, shape):
    torch.manual_seed(0)
    cpu = make()
    model = copy.deepcopy(cpu).to(dev)
    train_like_cpu(cpu, model, torch.compile(model, backend="unidev"), dev, shape, 3)
    for (name, a), b in zip(model.state_dict().items(), cpu.state_dict().values(), strict=True):
        assert a.device.type == dev, name
        close(a, b)
    fused = ops()
    assert fused.get("matmul", 0) + fused.get("gemm", 0) > 0 and "threshold_backward" in fused
    if make is ConvNet:
        assert {"conv2d_backward_weight", "batch_norm_backward", "max_pool2d_backward"} <= \
            set(fused), fused
    # forward + backward graph, one program each (one input signature)
    assert dynamo.stats()["programs"] == 2
    assert dynamo.stats()["adopted"] == len(list(model.parameters()))


class WithCumsum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.cumsum(torch.relu(self.a(x)), 1) * 0.5)


def test_op_outside_the_op_set_stays_eager(dev):
    torch.manual_seed(0)
    cpu = WithCumsum()
    compiled = torch.compile(copy.deepcopy(cpu).to(dev), backend="unidev")
    x = torch.randn(4, 6)
    with torch.no_grad():
        close(compiled(x.to(dev)), cpu(x))
    assert dynamo.eager_counts() == {"cumsum.default": 1}
    assert dynamo.stats()["partitions"] == 2  # linear+relu before, mul+linear after


def test_new_batch_size_recompiles(dev):
    torch.manual_seed(0)
    cpu = mlp()
    compiled = torch.compile(copy.deepcopy(cpu).to(dev), backend="unidev")
    programs = []
    with torch.no_grad():
        for n in (2, 7, 7, 3, 3):
            x = torch.randn(n, 12)
            close(compiled(x.to(dev)), cpu(x))
            programs.append(dynamo.stats()["programs"])
    # a program per new batch size (from the second size on, Dynamo's graph has a symbolic
    # batch, which the backend specializes per call signature); a repeated size reuses it
    assert programs == [1, 2, 2, 3, 3]


def test_cpu_tensors_run_the_fx_graph_eagerly(dev):
    torch.manual_seed(0)
    cpu = mlp()
    x = torch.randn(3, 12)
    with torch.no_grad():
        close(torch.compile(copy.deepcopy(cpu), backend="unidev")(x), cpu(x))
    assert dynamo.stats().get("programs", 0) == 0 and dynamo.stats()["eager_graphs"] >= 1


@pytest.mark.parametrize("algorithms", ["direct", {"conv2d": "im2col",
                                                   "conv2d_backward_weight": "direct"}])
def test_compile_options_choose_conv_algorithms(dev, algorithms):
    torch.manual_seed(0)
    cpu = ConvNet()
    model = copy.deepcopy(cpu).to(dev)
    compiled = torch.compile(model, backend="unidev", options={"algorithms": algorithms})
    train_like_cpu(cpu, model, compiled, dev, (4, 3, 8, 8), 2)
    assert {"conv2d_backward_weight", "conv2d_backward_input"} <= set(ops())


@pytest.mark.parametrize("options, words", [({"algorithms": "nonesuch"}, ["nonesuch"]),
                                            ({"fusion": False}, ["unknown options", "fusion"])])
def test_bad_compile_options_are_errors(dev, options, words):
    compiled = torch.compile(ConvNet().to(dev), backend="unidev", options=options)
    with pytest.raises(Exception) as e:  # Dynamo may wrap the backend's error
        compiled(torch.randn(2, 3, 8, 8).to(dev))
    for w in words:
        assert w in str(e.value), str(e.value)


def test_max_autotune_autotunes_the_convs(dev, tmp_path, monkeypatch):
    import unidev.algorithms as ua

    monkeypatch.setenv("UNIDEV_CACHE_DIR", str(tmp_path))
    ua.clear()  # also the process's memo of earlier decisions
    torch.manual_seed(0)
    cpu = ConvNet().eval()
    compiled = torch.compile(copy.deepcopy(cpu).to(dev), backend="unidev", mode="max-autotune")
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        close(compiled(x.to(dev)), cpu(x))
    decided = ua.decisions()
    assert len(decided) == 2 and all(d["op"] == "conv2d" for d in decided.values()), decided
