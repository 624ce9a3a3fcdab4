"""Errors through torch on the device have unidev.ops' Python type for the same bad input."""

# One case per kind of unidev/contract/errors.py that torch can reach (RUNTIME, a failing device
# or plugin, has no bad input): the same bad input goes to
# unidev.ops on the plugin behind this process's torch device, then to torch on the device. The
# kind's builtin must be in both MROs (torch's MEMORY is torch.OutOfMemoryError, as torch.cuda's
# is), and torch's message must name the op and the argument. test_processes.py runs this file
# again with every other usable plugin bound.

from __future__ import annotations

import contextlib
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from unidev import DeviceArray, ops
from unidev.adapters.torch import _backend
from unidev.contract import errors as vocabulary
from unidev.core import discovery

TORCH_TYPE = {"VALUE": ValueError, "INDEX": IndexError, "NOT_IMPLEMENTED": NotImplementedError,
              "MEMORY": torch.OutOfMemoryError, "RUNTIME": RuntimeError}


@pytest.fixture
def plugin(dev) -> str:
    """The unidev device name of the plugin behind the torch device (x86 behind avx)."""
    return _backend.STATE.plugin


def _caught(fn) -> BaseException:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the type is what the test compares
        return exc
    raise AssertionError("no error raised")


def _kind_of(exc: BaseException) -> str:
    """The kind whose builtin unidev.ops' exception is."""
    kinds = [k.name for k in vocabulary.KIND_TABLE if isinstance(exc, k.python)]
    assert kinds, type(exc).__mro__
    return kinds[0]


def _same_kind(unidev_fn, torch_fn, pattern: str, kind: str) -> None:
    want = _caught(unidev_fn)
    assert _kind_of(want) == kind, (type(want).__mro__, str(want))
    got = _caught(torch_fn)
    assert isinstance(got, TORCH_TYPE[kind]), (kind, type(got).__mro__, str(got))
    assert re.search(pattern, str(got)), str(got)


def test_invalid_argument_is_a_value_error(dev, plugin):
    if discovery.load(plugin).kernel("nll_loss", "float32") is None:
        pytest.skip(f"{plugin} has no nll_loss")
    logp = np.log(np.full((3, 4), 0.25, np.float32))
    target = np.array([0, 9, 1], np.int64)
    _same_kind(lambda: [r.numpy() for r in ops.nll_loss(DeviceArray.from_numpy(logp, plugin),
                                                        DeviceArray.from_numpy(target, plugin))],
               lambda: F.nll_loss(torch.from_numpy(logp).to(dev),
                                  torch.from_numpy(target).to(dev)).item(),
               r"nll_loss: .*target'?( holds)? 9", "VALUE")
    with contextlib.suppress(ValueError):  # aurora reports unidev.ops' failed work once more
        getattr(torch, dev).synchronize()
    assert (torch.ones(3, device=dev) * 2).sum().item() == 6.0  # the device goes on


def test_bad_device_index_is_a_value_error(dev, plugin):
    _same_kind(lambda: DeviceArray.empty((2,), "float32", f"{plugin}:7"),
               lambda: torch.zeros(2, device=f"{dev}:7"), r"device index 7 out of range", "VALUE")


def test_view_past_its_storage_is_an_index_error(dev, plugin):
    a = DeviceArray.from_numpy(np.ones((4, 4), np.float32), plugin)
    x = torch.ones(4096, device=dev)
    x.untyped_storage().resize_(0)  # x still claims 16 KiB of a storage that holds none

    _same_kind(lambda: a.as_strided((4,), (1,), offset=13), lambda: (x + 1).cpu(),
               r"add: .*('x'|input 0)", "INDEX")


@contextlib.contextmanager
def _fallback_mode(mode: int):
    ext = _backend.STATE.ext
    ext.set_fallback_mode(mode)
    try:
        yield
    finally:
        ext.set_fallback_mode(_backend._fallback_mode())


# (op, unidev call, torch call) on float64 inputs of shape (1, 2, 4, 4)
UNSUPPORTED_CANDIDATES = [
    ("max_pool2d", lambda x: ops.max_pool2d(x, kernel_size=[2, 2]), lambda x: F.max_pool2d(x, 2)),
    ("exp", ops.exp, torch.exp),
    ("softmax", lambda x: ops.softmax(x, axis=1), lambda x: torch.softmax(x, 1)),
]


def test_op_without_a_kernel_is_not_implemented(dev, plugin):
    lib = discovery.load(plugin)
    missing = [c for c in UNSUPPORTED_CANDIDATES if lib.kernel(c[0], "float64") is None]
    if not missing:
        pytest.skip(f"{plugin} implements every op of the op set: nothing is unsupported")
    op, unidev_call, torch_call = missing[0]
    x = np.ones((1, 2, 4, 4))
    with _fallback_mode(2):  # UNIDEV_FALLBACK=error: the CPU may not serve it either
        _same_kind(lambda: unidev_call(DeviceArray.from_numpy(x, plugin)).numpy(),
                   lambda: torch_call(torch.from_numpy(x).to(dev)).cpu(),
                   rf"{op}.* has no device kernel", "NOT_IMPLEMENTED")


def test_out_of_memory_is_torchs_out_of_memory_error(dev, plugin):
    _same_kind(lambda: DeviceArray.empty((1 << 60,), "float32", plugin),
               lambda: torch.empty(1 << 60, device=dev), r"out of memory", "MEMORY")
    assert (torch.ones(3, device=dev) * 2).sum().item() == 6.0
