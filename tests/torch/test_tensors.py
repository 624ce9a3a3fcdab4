"""Tensors on the unidev device: creation, printing, copies, memory, streams, save/load, DLPack."""

from __future__ import annotations

import io

import pytest
import torch

import unidev.torch as ut

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool, torch.uint8]


def test_import_torch_alone_binds_the_device(dev):
    assert torch._C._get_privateuse1_backend_name() == dev
    assert getattr(torch, dev).is_available() and getattr(torch, dev).device_count() >= 1
    assert torch.accelerator.current_accelerator().type == dev


def test_creation_and_printing(dev):
    z = torch.zeros(2, 3, device=dev)
    o = torch.ones(2, 3, device=dev, dtype=torch.int64)
    f = torch.full((2,), 2.5, device=dev)
    assert z.device == torch.device(dev, 0)
    assert torch.equal(z.cpu(), torch.zeros(2, 3)) and torch.equal(o.cpu(), torch.ones(2, 3).long())
    assert f.tolist() == [2.5, 2.5] and f[1].item() == 2.5
    text = str(torch.tensor([[1.5, -2.0], [3.25, 0.0]]).to(dev))
    assert f"device='{dev}:0'" in text and "3.2500" in text and "-2.0000" in text
    assert f"device='{dev}:0'" in repr(torch.arange(3).to(dev))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_and_casts(dev, dtype):
    x = (torch.arange(24).reshape(4, 6) % 5).to(dtype)
    d = x.to(dev)
    assert d.dtype == dtype and torch.equal(d.cpu(), x)
    for other in (torch.float32, torch.int64, torch.bool):
        assert torch.equal(d.to(other).cpu(), x.to(other)), (dtype, other)
    assert torch.equal(d.t().cpu(), x.t()) and torch.equal(d[1:, ::2].cpu(), x[1:, ::2])


def test_strided_copies(dev):
    x = torch.randn(5, 6)
    assert torch.equal(x.t().to(dev).cpu(), x.t())  # non-contiguous host -> device
    d = torch.zeros(6, 5, device=dev)
    d.t()[1:3].copy_(x[1:3])  # host -> strided device view
    want = torch.zeros(6, 5)
    want.t()[1:3].copy_(x[1:3])
    assert torch.equal(d.cpu(), want)
    d[:, 0] = torch.tensor(7.0)  # broadcast 0-d copy
    want[:, 0] = 7.0
    assert torch.equal(d.cpu(), want)
    e = torch.empty(5, 6, device=dev)
    e.copy_(d.t())  # device -> device, transposing
    assert torch.equal(e.cpu(), want.t())
    host = torch.empty(6, 5).t()
    host.copy_(e)  # device -> strided host
    assert torch.equal(host, want.t())
    assert torch.equal(d.clone().cpu(), want) and torch.equal(d.t().contiguous().cpu(), want.t())


def test_resize_and_views(dev):
    d = torch.arange(6.0).to(dev)
    assert torch.equal(d.view(2, 3).cpu(), torch.arange(6.0).view(2, 3))
    assert torch.equal(d.reshape(3, 2).t().cpu(), torch.arange(6.0).reshape(3, 2).t())
    d.resize_(4, 4)
    assert d.shape == (4, 4) and torch.equal(d.flatten()[:6].cpu(), torch.arange(6.0))
    assert torch.equal(torch.stack([d[0], d[1]]).cpu(), torch.stack([d[0].cpu(), d[1].cpu()]))


def test_device_module(dev):
    mod = getattr(torch, dev)
    assert mod.current_device() == 0 and isinstance(mod.get_device_name(), str)
    mod.synchronize()
    assert mod.current_stream().device.type == dev
    mod.manual_seed(3)
    assert mod.initial_seed() == 3
    stats = mod.memory_stats()
    assert {"allocated_bytes.all.current", "reserved_bytes.all.peak", "num_ooms"} <= set(stats)
    with mod.device(0):
        assert mod.current_device() == 0
    assert torch.float32 in mod.get_amp_supported_dtype()


def test_memory_returns_to_baseline(dev):
    mod = getattr(torch, dev)
    mod.synchronize()
    base = torch.accelerator.memory_allocated()
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    net.to(dev)
    loss = net(torch.randn(8, 64, device=dev)).square().mean()
    loss.backward()
    assert mod.memory_allocated() > base + 64 * 64 * 4
    del net, loss
    assert torch.accelerator.memory_allocated() == base == mod.memory_allocated()
    reserved = mod.memory_reserved()
    torch.accelerator.empty_cache()
    assert mod.memory_reserved() <= reserved


def test_out_of_memory_raises_and_process_goes_on(dev):
    mod = getattr(torch, dev)
    ooms = mod.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(1 << 50, device=dev)
    assert mod.memory_stats()["num_ooms"] == ooms + 1
    assert (torch.ones(4, device=dev) * 2).sum().item() == 8.0


def test_bad_device_index(dev):
    with pytest.raises(ValueError, match="out of range"):
        torch.zeros(2, device=f"{dev}:7")


def test_streams_and_events(dev):
    s = torch.Stream(device=dev)
    assert s != torch.accelerator.current_stream()
    x = torch.arange(1000.0, device=dev)
    with s:
        assert torch.accelerator.current_stream() == s
        y = x * 2
    e = torch.Event(device=dev)
    e.record(s)
    torch.accelerator.current_stream().wait_event(e)
    e.synchronize()
    assert e.query() and s.query()
    assert torch.equal(y.cpu(), torch.arange(1000.0) * 2)


def test_save_and_load(dev):
    x = torch.randn(3, 4)
    buf = io.BytesIO()
    torch.save({"x": x.to(dev), "t": x.to(dev).t()}, buf)
    buf.seek(0)
    back = torch.load(buf)
    assert back["x"].device.type == dev and torch.equal(back["x"].cpu(), x)
    assert torch.equal(back["t"].cpu(), x.t())
    buf.seek(0)
    assert torch.load(buf, map_location="cpu")["x"].device.type == "cpu"
    buf = io.BytesIO()
    torch.save(torch.nn.Linear(3, 2).state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, map_location=dev)
    assert all(v.device.type == dev for v in sd.values())


def test_dlpack(dev):
    x = torch.arange(8.0).to(dev)[2:]
    assert x.__dlpack_device__()[0] == torch.utils.dlpack.DLDeviceType.kDLExtDev
    y = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert y.device == x.device and y.data_ptr() == x.data_ptr()
    assert torch.equal(y.cpu(), torch.arange(2.0, 8.0))


def test_generated_methods(dev):
    x = getattr(torch.ones(2), dev)()
    assert x.device.type == dev and getattr(x, f"is_{dev}")
    assert x.untyped_storage().device.type == dev


def test_autocast_runs(dev):
    a = torch.randn(4, 4, device=dev)
    with torch.autocast(dev, dtype=torch.bfloat16):
        out = (a @ a).relu().sum()
    torch.testing.assert_close(out.cpu(), (a.cpu() @ a.cpu()).relu().sum(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile(dev, backend):
    fn = torch.compile(lambda a, b: torch.relu(a @ b + 1).sum(1), backend=backend)
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    torch.testing.assert_close(fn(a.to(dev), b.to(dev)).cpu(), torch.relu(a @ b + 1).sum(1))


def test_fallback_report_lists_registered_ops(dev):
    ops = ut.registered_ops()
    assert {"add.out", "convolution_overrideable", "_copy_from", "mm.out"} <= set(ops)


def test_exact_large_ints_and_nan_scalars(dev):
    big = 2**60 + 1  # not representable as a double: must not go through fill's float value
    assert torch.full((2,), big, dtype=torch.int64, device=dev).tolist() == [big, big]
    assert (torch.zeros(2, dtype=torch.int64, device=dev) + big).tolist() == [big, big]
    x = torch.ones(3, device=dev) * float("nan") + 1.0
    assert torch.isnan(x.cpu()).all()
    assert ((torch.ones(3, device=dev) * 3.0) / 2).tolist() == [1.5, 1.5, 1.5]
