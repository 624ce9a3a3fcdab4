"""torch on the device against torch on CPU: all dtypes, math bits, views, checks, pinning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import unidev.torch as ut

ALL_DTYPES = sorted({getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n),
                                                                        torch.dtype)}, key=str)


def _source(dtype: torch.dtype) -> torch.Tensor | None:
    """A (4, 6) CPU tensor of `dtype` with distinct values, or None if torch cannot make one."""
    try:
        if dtype.is_complex:
            return torch.randn(4, 6, dtype=torch.complex64).to(dtype)
        if dtype == torch.bool:
            return torch.arange(24).reshape(4, 6) % 3 == 0
        if dtype.is_floating_point:
            return (torch.arange(24.0).reshape(4, 6) / 4 - 2).to(dtype)
        return (torch.arange(24).reshape(4, 6) % 7).to(dtype)
    except (RuntimeError, TypeError, NotImplementedError):
        return None


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype == torch.complex32:
        got, want = got.to(torch.complex64), want.to(torch.complex64)
    got, want = got.resolve_conj().resolve_neg(), want.resolve_conj().resolve_neg()
    if want.element_size() == 1 and not want.dtype.is_floating_point and want.dtype != torch.bool:
        return torch.equal(got.contiguous().view(torch.uint8), want.contiguous().view(torch.uint8))
    try:
        return torch.equal(got, want)
    except (RuntimeError, NotImplementedError):  # dtypes without eq on the CPU (float8, ...)
        return torch.equal(got.contiguous().view(torch.uint8), want.contiguous().view(torch.uint8))


def _parity(fn, dev: str) -> None:
    """fn(device) on the device gives what it gives on the CPU, or raises the same type."""
    try:
        want = fn("cpu")
    except Exception as exc:  # noqa: BLE001 - the device must refuse what the CPU refuses
        with pytest.raises(type(exc)):
            fn(dev)
        return
    got = fn(dev)
    wants, gots = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for w, g in zip(wants, gots, strict=True):
        if isinstance(w, torch.Tensor):
            assert g.device.type == dev, g.device
            assert _same(g, w), (g, w)
        else:
            assert g == w or (g != g and w != w), (g, w)


COPY_PATHS = {
    "round_trip": lambda x, d: x.to(d),
    "strided_to_host": lambda x, d: x.to(d).t(),
    "strided_from_host": lambda x, d: x.t().to(d),
    "slice": lambda x, d: x.to(d)[1:, ::2],
    "device_transpose": lambda x, d: x.to(d).t().contiguous(),
    "clone": lambda x, d: x.to(d).clone(),
    "to_float": lambda x, d: x.to(d).to(torch.float32),
    "from_float64": lambda x, d: x.to(torch.float64).to(d).to(x.dtype),
    "zero_": lambda x, d: x.to(d, copy=True).zero_(),
    "fill_": lambda x, d: x.to(d, copy=True).fill_(1),
    "fill_expanded": lambda x, d: x[:1, :1].to(d, copy=True).expand(3, 2).fill_(1),
    "setitem": lambda x, d: (lambda t: (t.__setitem__((0, slice(1, 3)), x[1, 1:3].to(d)), t)[1])(
        x.to(d, copy=True)),
    "item": lambda x, d: x.to(d)[1, 2].item(),
    "add": lambda x, d: x.to(d) + x.to(d),
}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype_works_or_raises_like_cpu(dev, dtype):
    try:
        torch.empty(3, dtype=dtype)
    except (RuntimeError, NotImplementedError):  # the CPU itself cannot make one
        return
    try:
        e = torch.empty(3, dtype=dtype, device=dev)
    except (RuntimeError, NotImplementedError) as exc:  # quantized: refused, named
        assert "Quantized" in str(exc) or str(dtype) in str(exc), exc
        return
    assert e.dtype == dtype and e.device.type == dev
    x = _source(dtype)
    if x is None:
        return
    for name, path in COPY_PATHS.items():
        try:
            _parity(lambda d, path=path: path(x, d), dev)
        except AssertionError as exc:
            raise AssertionError(f"{dtype} {name}: {exc}") from None
    str(x.to(dev))  # printing: what prints on the CPU prints on the device


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_conjugate_and_negative_bits_survive_copies(dev, dtype):
    x = torch.randn(4, 3, dtype=dtype)
    cases = {
        "conj_to_host": lambda d: x.to(d).conj(),
        "conj_from_host": lambda d: x.conj().to(d),
        "conj_into": lambda d: (lambda t: (t.conj().copy_(x), t)[1])(x.to(d, copy=True)),
        "conj_device_copy": lambda d: x.to(d).conj().clone(),
        "conj_strided": lambda d: x.to(d).t().conj().contiguous(),
        "conj_item": lambda d: x.to(d).conj()[1, 2].item(),
        "neg_view": lambda d: torch._neg_view(x.to(d)),
        "neg_into": lambda d: (lambda t: (torch._neg_view(t).copy_(x), t)[1])(
            x.to(d, copy=True)),
        "conj_neg": lambda d: torch._neg_view(x.to(d).conj()).resolve_neg(),
        "real_float_neg": lambda d: torch._neg_view(x.real.contiguous().to(d)),
    }
    for name, fn in cases.items():
        try:
            _parity(fn, dev)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


@pytest.mark.parametrize("fn", ["fft", "ifft", "hfft", "ihfft", "rfft", "irfft", "fft2"])
def test_fft_on_the_device_matches_cpu(dev, fn):
    x = torch.randn(4, 6)
    f = getattr(torch.fft, fn)
    kw = {"n": 6, "dim": 1} if fn in ("hfft", "irfft") else {}
    if fn in ("ifft", "fft", "fft2"):
        x = torch.randn(4, 6, dtype=torch.complex64)
    got, want = f(x.to(dev), **kw), f(x, **kw)
    assert got.device.type == dev
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)


def test_view_ops_share_storage_with_their_input(dev):
    def views(d):
        c = torch.arange(12.0).reshape(3, 2, 2).to(d)
        r = torch.view_as_real(torch.view_as_complex(c))
        r[0, 0, 0] = 100.0
        u = c.flatten().unfold(0, 4, 2)
        u[1, 1] = -7.0
        return c, r.flatten(), u, torch.view_as_real(torch.view_as_complex(c).conj().resolve_conj())

    ut.reset_fallbacks()
    _parity(views, dev)
    assert not {k for k in ut.fallback_report() if "view" in k or "unfold" in k}


def _view_schemas():
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::"):  # other namespaces: the same rule (checked below)
            continue
        if any(a.alias_info is not None and a.alias_info.is_write for a in s.arguments):
            continue
        if any(r.alias_info is not None and not r.alias_info.is_write for r in s.returns):
            yield s.name + ("." + s.overload_name if s.overload_name else "")


def test_every_view_op_is_served_on_the_device_or_refused(dev):
    reaching = []
    for name in _view_schemas():
        table = torch._C._dispatch_dump_table(name)
        line = next((ln for ln in table.splitlines() if ln.startswith("PrivateUse1")), "")
        if "fallback" in line:
            reaching.append(name.split("::")[1])
    # sparse and nested layouts only: the fallback refuses them (checked below)
    assert all(n.startswith(("_values", "_indices", "_nested", "_sparse")) for n in reaching), \
        reaching
    with pytest.raises(NotImplementedError, match="view op"):
        torch.ops.aten._values(torch.ones(3, device=dev))
    lib = torch.library.Library("unidev_parity", "DEF")  # any namespace: the fallback is global
    lib.define("viewish(Tensor(a) x) -> Tensor(a)")
    lib.impl("viewish", lambda x: x.view(x.shape), "CPU")
    with pytest.raises(NotImplementedError, match="view op"):
        torch.ops.unidev_parity.viewish(torch.ones(3, device=dev))


def test_as_strided_partial_views_match_cpu(dev):
    base = torch.randn(20)
    for kw in ({}, {"storage_offset": 0}, {"storage_offset": 10}):
        def run(d, kw=kw):
            x = base.to(d)[5:15].requires_grad_()
            y = torch.as_strided(x, (2, 2), (1, 2), **kw)
            y.backward(torch.arange(4.0).reshape(2, 2).to(d))
            return y.detach(), x.grad
        _parity(run, dev)


def test_batch_norm_and_layer_norm_samples_match_cpu(dev):
    torch.manual_seed(0)
    x, w, b, rm, rv = torch.randn(3, 2, 4), torch.randn(2), torch.randn(2), torch.randn(2), \
        torch.rand(2) + 0.5

    def norm(fn):
        def run(d):
            out = fn(*(t.to(d) for t in (x, w, b, rm, rv)))
            return tuple(t.detach() for t in out)
        return run

    cases = [
        lambda x, w, b, rm, rv: torch.native_batch_norm(x, w, b, rm, rv, False, -1.2, 1e-5),
        lambda x, w, b, rm, rv: torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)[:2],
        lambda x, w, b, rm, rv: torch.native_batch_norm(x[:1, :, :1], None, None, None, None,
                                                        True, 0.1, 1e-5),
        lambda x, w, b, rm, rv: (F.layer_norm(x[0, 0, :1], (1,)),),
        lambda x, w, b, rm, rv: (F.layer_norm(x[:, :, :1], (1,), w[:1], b[:1]),),
        lambda x, w, b, rm, rv: (F.layer_norm(x, (2, 4)),),
    ]
    ut.reset_fallbacks()
    for k, fn in enumerate(cases):
        try:
            got, want = norm(fn)(dev), norm(fn)("cpu")
            for g, wt in zip(got, want, strict=True):
                assert g.shape == wt.shape, (g.shape, wt.shape)
                torch.testing.assert_close(g.cpu(), wt, rtol=1e-4, atol=1e-4)
        except AssertionError as exc:
            raise AssertionError(f"case {k}: {exc}") from None
    # one value per channel (layer_norm's decomposition) runs on the device, not the CPU
    assert not {k for k in ut.fallback_report() if "batch_norm" in k}, ut.fallback_report()


def _t(*shape, d, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(float(n)).reshape(shape) % 7 + 1).to(dtype).to(d)


I64 = torch.int64
# Each is run on the CPU and on the device: the same exception, or the same values.
CHECK_CASES = {
    "copy_shapes": lambda d: _t(3, 4, d=d).copy_(_t(4, 3, d=d)),
    "copy_broadcast": lambda d: _t(3, 4, d=d).copy_(_t(4, d=d)),
    "copy_bad_broadcast": lambda d: _t(3, d=d).copy_(_t(2, 3, d=d)),
    "copy_into_expanded": lambda d: _t(1, d=d).expand(3).copy_(_t(3, d=d)),
    "copy_partial_overlap": lambda d: (lambda v: (v[1:].copy_(v[:-1]), v)[1])(_t(16, d=d)),
    "copy_from_host_shapes": lambda d: _t(3, 4, d=d).copy_(_t(4, 3, d="cpu")),
    "add_int_alpha_float": lambda d: torch.add(_t(3, d=d, dtype=I64), _t(3, d=d, dtype=I64),
                                               alpha=0.5),
    "add_int_alpha_int": lambda d: torch.add(_t(3, d=d, dtype=I64), _t(3, d=d, dtype=I64),
                                             alpha=3),
    "add_inplace_int_alpha_float": lambda d: _t(3, d=d, dtype=I64).add_(_t(3, d=d, dtype=I64),
                                                                        alpha=0.5),
    "sub_int_alpha_float": lambda d: torch.sub(_t(3, d=d, dtype=torch.int32),
                                               _t(3, d=d, dtype=torch.int32), alpha=1.5),
    "add_bool_alpha": lambda d: torch.add(_t(3, d=d), _t(3, d=d), alpha=True),
    "sub_bool": lambda d: torch.sub(_t(3, d=d, dtype=torch.bool), _t(3, d=d, dtype=torch.bool)),
    "add_out_expanded": lambda d: torch.add(_t(3, d=d), _t(3, d=d), out=_t(1, d=d).expand(3)),
    "add_inplace_expanded": lambda d: _t(1, d=d).expand(3).add_(_t(3, d=d)),
    "mul_inplace_expanded": lambda d: _t(1, d=d).expand(3).mul_(2),
    "relu_inplace_expanded": lambda d: _t(1, d=d).expand(3).relu_(),
    "add_out_partial": lambda d: (lambda v: torch.add(v[1:], v[:-1], out=v[1:]))(_t(16, d=d)),
    "add_inplace_partial": lambda d: (lambda v: v[1:].add_(v[:-1]))(_t(16, d=d)),
    "neg_out_partial": lambda d: (lambda v: torch.neg(v[:-1], out=v[1:]))(_t(16, d=d)),
    "exp_out_partial": lambda d: (lambda v: torch.exp(v[:-1], out=v[1:]))(_t(16, d=d)),
    "where_out_partial": lambda d: (lambda v: torch.where(v[:-1] > 3, v[:-1], v[1:],
                                                          out=v[1:]))(_t(16, d=d)),
    "addcmul_out_partial": lambda d: (lambda v: torch.addcmul(v[:-1], v[:-1], v[1:],
                                                              out=v[1:]))(_t(16, d=d)),
    "lerp_out_partial": lambda d: (lambda v: torch.lerp(v[:-1], v[1:], 0.5, out=v[1:]))(
        _t(16, d=d)),
    "pow_out_partial": lambda d: (lambda v: torch.pow(v[:-1], 3, out=v[1:]))(_t(16, d=d)),
    "gt_out_partial": lambda d: (lambda v: torch.gt(v[:-1], 2, out=v[1:]))(_t(16, d=d)),
    "mse_out_partial": lambda d: (lambda v: torch._C._nn.mse_loss(v[:4], v[1:5], 0,
                                                                  out=v[2:6]))(_t(16, d=d)),
    "cat_out_partial": lambda d: (lambda v: torch.cat([v[:4], v[4:8]], out=v[2:10]))(
        _t(16, d=d)),
    "cat_out_expanded": lambda d: torch.cat([_t(2, d=d), _t(2, d=d)], out=_t(1, d=d).expand(4)),
    "mm_out_expanded": lambda d: torch.mm(_t(2, 2, d=d), _t(2, 2, d=d),
                                          out=_t(1, 2, d=d).expand(2, 2)),
    "mean_out_expanded": lambda d: torch.mean(_t(4, 4, d=d), 0, out=_t(1, d=d).expand(4)),
    "log_softmax_out_expanded": lambda d: torch.log_softmax(_t(3, 3, d=d), 1,
                                                            out=_t(1, 3, d=d).expand(3, 3)),
    "arange_out_expanded": lambda d: torch.arange(0, 3, out=_t(1, d=d).expand(3)),
    "add_out_dtype": lambda d: torch.add(_t(3, d=d), _t(3, d=d), out=_t(3, d=d, dtype=I64)),
    "mul_out_dtype": lambda d: torch.mul(_t(3, d=d), _t(3, d=d),
                                         out=_t(3, d=d, dtype=torch.int32)),
    "div_int_out_int": lambda d: torch.div(_t(3, d=d, dtype=I64), _t(3, d=d, dtype=I64),
                                           out=_t(3, d=d, dtype=I64)),
    "neg_out_dtype": lambda d: torch.neg(_t(3, d=d), out=_t(3, d=d, dtype=I64)),
    "exp_int_out_int": lambda d: torch.exp(_t(3, d=d, dtype=I64), out=_t(3, d=d, dtype=I64)),
    "exp_int_out_float": lambda d: torch.exp(_t(3, d=d, dtype=I64), out=_t(3, d=d)),
    "eq_out_float": lambda d: torch.eq(_t(3, d=d), _t(3, d=d), out=_t(3, d=d)),
    "cat_out_dtype": lambda d: torch.cat([_t(2, d=d), _t(2, d=d)], out=_t(4, d=d, dtype=I64)),
    "cat_int_out_float": lambda d: torch.cat([_t(2, d=d, dtype=I64)] * 2, out=_t(4, d=d)),
    "sum_dtype_out_dtype": lambda d: torch.sum(_t(2, 2, d=d), 0, dtype=torch.float64,
                                               out=_t(2, d=d)),
    "amax_out_dtype": lambda d: torch.amax(_t(2, 2, d=d), 0, out=_t(2, d=d, dtype=torch.float64)),
    "argmax_out_int32": lambda d: torch.argmax(_t(2, 2, d=d), 0,
                                               out=_t(2, d=d, dtype=torch.int32)),
    "softmax_out_dtype": lambda d: torch.softmax(_t(2, 2, d=d), 1,
                                                 out=_t(2, 2, d=d, dtype=torch.float64)),
    "mm_out_dtype": lambda d: torch.mm(_t(2, 2, d=d), _t(2, 2, d=d), out=_t(2, 2, d=d, dtype=I64)),
    "maximum_out_dtype": lambda d: torch.maximum(_t(2, d=d), _t(2, d=d), out=_t(2, d=d, dtype=I64)),
    "pow_out_dtype": lambda d: torch.pow(_t(2, d=d), 2, out=_t(2, d=d, dtype=I64)),
    "addcmul_out_dtype": lambda d: torch.addcmul(_t(2, d=d), _t(2, d=d), _t(2, d=d),
                                                 out=_t(2, d=d, dtype=I64)),
    "add_inplace_broadcast": lambda d: _t(3, d=d).add_(_t(2, 3, d=d)),
    "fill_expanded": lambda d: _t(1, d=d).expand(3).fill_(2),
    "set_to_own_slice": lambda d: (lambda v: v.set_(v[2:]))(_t(8, d=d)),
    "zero_expanded": lambda d: _t(1, d=d).expand(3).zero_(),
    "transposed_inplace_full_overlap": lambda d: (lambda a: torch.add(a, a.t(), out=a))(
        _t(3, 3, d=d)),
}


@pytest.mark.parametrize("name", sorted(CHECK_CASES))
def test_device_refuses_what_cpu_refuses(dev, name):
    try:
        want = CHECK_CASES[name]("cpu")
    except Exception as exc:  # noqa: BLE001 - the same type and message on the device
        message = str(exc).split("\n")[0][:40]
        with pytest.raises(type(exc)) as info:
            CHECK_CASES[name](dev).cpu()
        assert message in str(info.value), (message, str(info.value))
        return
    got = CHECK_CASES[name](dev)
    assert got.device.type == dev
    if name != "transposed_inplace_full_overlap":  # the CPU's answer there is garbage
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=0)


def test_record_stream_keeps_the_block_until_the_stream_is_done(dev):
    mod = getattr(torch, dev)
    s = torch.Stream(dev)
    x = torch.ones(1024, device=dev)
    x.record_stream(s)
    with torch.accelerator.device_index(0):
        y = x * 2
    x.record_stream(mod.current_stream())
    del x
    mod.synchronize()
    assert torch.equal(y.cpu(), torch.full((1024,), 2.0))
    with pytest.raises((RuntimeError, TypeError)):
        torch.ones(2, device=dev).record_stream(torch.Stream("cpu"))


def test_pin_memory_and_pinned_data_loader(dev):
    x = torch.randn(5, 7)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and torch.equal(p, x)
    assert p[2:].is_pinned()  # a view of pinned storage is pinned
    assert torch.equal(p.to(dev, non_blocking=True).cpu(), x)
    data = torch.utils.data.TensorDataset(torch.arange(12.0).reshape(6, 2), torch.arange(6))
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True,
                                             num_workers=workers)
        seen = []
        for a, b in loader:
            assert a.is_pinned() and b.is_pinned()
            seen.append(a.to(dev, non_blocking=True).sum().item())
        assert seen == [sum(range(8)), sum(range(8, 12))]


def _usable_plugins() -> list[str]:
    from unidev.core import discovery

    return [r.name for r in discovery.discover() if r.usable]


@pytest.mark.parametrize("plugin", _usable_plugins())
def test_this_file_on_each_plugin(dev, plugin):
    """torch binds one unidev device per process: the other plugins run this file in a child."""
    from unidev.adapters.torch import _backend

    if plugin == _backend.STATE.plugin or os.environ.get("UNIDEV_PARITY_CHILD"):
        pytest.skip("this process is bound to it")
    env = dict(os.environ, UNIDEV_TORCH_DEVICE=plugin, UNIDEV_PARITY_CHILD="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        str(Path(__file__))], capture_output=True, text=True, timeout=600,
                       env=env)
    assert r.returncode == 0, (r.stdout[-4000:], r.stderr[-2000:])
