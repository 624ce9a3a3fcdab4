"""One error vocabulary: each code's bad input raises the agreed type through all three doors."""

# Doors: unidev.ops (testdev, x86, aurora), torch on the device, TF on the device. Types are
# unidev/contract/errors.py's kinds (interfaces.md section 4). Codes a door cannot reach are
# left out: torch and TF allocate and view memory themselves, so no out-of-bounds view and no
# freed handle ever reaches a plugin from them.

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import unidev
from unidev import DeviceArray, ops
from unidev.contract import errors as vocabulary
from unidev.core import discovery, errors


def _kind(code_name: str) -> type:
    return vocabulary.KINDS_BY_NAME[vocabulary.BY_NAME[code_name].kind].python


def test_the_table_and_the_classes_agree():
    for e in vocabulary.ERRORS:
        cls = type(errors.from_code(e.code, "m"))
        assert issubclass(cls, errors.UnidevError) and cls.__name__ == e.exception, e
        assert issubclass(cls, _kind(e.name)), (e, cls.__mro__)
    assert issubclass(unidev.UnknownHandleError, ValueError)


# ---- unidev.ops ----------------------------------------------------------------------------


def _raises(code_name: str, pattern: str, fn) -> None:
    cls = type(errors.from_code(vocabulary.BY_NAME[code_name].code, ""))
    with pytest.raises(cls) as info:
        fn()
    assert isinstance(info.value, _kind(code_name)), type(info.value).__mro__
    assert re.search(pattern, str(info.value)), str(info.value)


def test_ops_invalid_argument(dev):
    a = DeviceArray.from_numpy(np.ones((4, 5), np.float32), dev)
    b = DeviceArray.from_numpy(np.ones(4, np.float32), dev)
    _raises("INVALID_ARGUMENT", r"add: input 'y'", lambda: ops.add(a, b))
    if discovery.load(dev).kernel("nll_loss", "float32") is None:
        return
    logp = DeviceArray.from_numpy(np.log(np.full((3, 4), 0.25, np.float32)), dev)
    target = DeviceArray.from_numpy(np.array([0, 9, 1], np.int64), dev)
    # the plugin's own check; aurora finds it while running, so it comes with the read back
    _raises("INVALID_ARGUMENT", r"nll_loss: .*'?target'?( holds)? 9",
            lambda: [r.numpy() for r in ops.nll_loss(logp, target)])
    # aurora: the read runs on a copy stream and reports the poison; the kernel's own failure
    # stays pending on the stream it ran on (unidev.h) until that is synchronized: take it here
    # so the tests after this one start clean
    with contextlib.suppress(errors.UnidevError):
        discovery.load(dev).synchronize(0)


def test_ops_out_of_bounds(dev):
    a = DeviceArray.from_numpy(np.ones((4, 4), np.float32), dev)
    _raises("OUT_OF_BOUNDS", r"as_strided: view shape \(4,\).*offset 13.*past the allocation",
            lambda: a.as_strided((4,), (1,), offset=13))
    k = discovery.load(dev).kernel("copy", "float32")
    h, off, dt, _, _ = a.descriptor()
    out = DeviceArray.empty((5, 4), "float32", dev)
    _raises("OUT_OF_BOUNDS", r"copy: input 0.*exceed the allocation of 64 bytes",
            lambda: k(a.device.index, [(h, off, dt, [5, 4], [4, 1])], [out.descriptor()], []))


def test_ops_unsupported(dev):
    lib = discovery.load(dev)
    x = DeviceArray.from_numpy(np.ones((1, 2, 4, 4)), dev)
    if lib.kernel("max_pool2d", "float64") is None:
        _raises("UNSUPPORTED", r"max_pool2d.*no kernel",
                lambda: ops.max_pool2d(x, kernel_size=[2, 2]))
    elif dev == "x86":  # its oneDNN path is float32 only: a valid request it does not implement
        w = DeviceArray.from_numpy(np.ones((2, 2, 1, 1)), dev)
        _raises("UNSUPPORTED", r"conv2d: .*algorithm 'onednn'",
                lambda: ops.conv2d(x, w, algorithm="onednn").numpy())
    else:
        pytest.skip(f"{dev} implements every op of the op set: nothing is unsupported")


def test_ops_out_of_memory(dev):
    _raises("OUT_OF_MEMORY", r"malloc\(4611686018427387904 bytes\)",
            lambda: DeviceArray.empty((1 << 60,), "float32", dev))
    assert DeviceArray.from_numpy(np.ones(3, np.float32), dev).numpy().sum() == 3.0


def test_ops_unknown_handle(dev):
    a = DeviceArray.from_numpy(np.ones(4, np.float32), dev)
    view = a[1:]
    a.buffer.free()
    _raises("UNKNOWN_HANDLE", r"copy: input 'x' .* was freed", lambda: ops.copy(view))


# ---- the frameworks (fresh processes: one plugin per torch process) ------------------------


def _usable() -> dict[str, str]:
    return {r.name: r.spec.tf_type for r in discovery.discover()
            if r.usable and r.spec and r.name in ("x86", "aurora")}


def _run(code: str, env: dict, *args: str, timeout: int = 900) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                         capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and lines, (out.returncode, out.stdout[-2000:],
                                           out.stderr[-3000:])
    return json.loads(lines[-1][7:])


CATCH = """
    import json
    out = {}
    def run(name, fn):
        try:
            fn()
            out[name] = [[], "no error"]
        except BaseException as exc:
            out[name] = [[f"{c.__module__}.{c.__name__}" for c in type(exc).__mro__], str(exc)]
"""

TORCH = CATCH + """
    import torch, torch.nn.functional as F
    import unidev.torch as ut
    dev = ut.load()
    logp = torch.randn(3, 4).log_softmax(1).to(dev)
    run("INVALID_ARGUMENT", lambda: F.nll_loss(logp, torch.tensor([0, 9, 1]).to(dev)).item())
    run("INVALID_ARGUMENT device", lambda: torch.ones(3, device=f"{dev}:99"))
    run("OUT_OF_MEMORY", lambda: torch.empty(1 << 60, device=dev))
    run("UNSUPPORTED", lambda: torch.nonzero(torch.ones(3, device=dev)))  # UNIDEV_FALLBACK=error
    out["after"] = (torch.ones(3, device=dev) * 2).sum().item()
    print("RESULT " + json.dumps(out))
"""

# (types the exception must be, in its MRO; what its message must say)
TORCH_WANT = {
    "INVALID_ARGUMENT": (["builtins.ValueError"], r"nll_loss: .*'?target'?( holds)? 9"),
    "INVALID_ARGUMENT device": (["builtins.ValueError"], r"device index 99 out of range"),
    "OUT_OF_MEMORY": (["torch.OutOfMemoryError"],
                      r"out of memory: tried to allocate 4611686018427387904 bytes"),
    "UNSUPPORTED": (["builtins.NotImplementedError"], r"nonzero has no device kernel"),
}


@pytest.mark.parametrize("plugin", sorted(_usable()))
def test_torch_door(plugin):
    pytest.importorskip("torch")
    res = _run(TORCH, dict(os.environ, UNIDEV_TORCH_DEVICE=plugin, UNIDEV_FALLBACK="error"))
    assert res.pop("after") == 6.0  # the device still works after every error
    for case, (types, pattern) in TORCH_WANT.items():
        mro, message = res[case]
        for t in types:
            assert t in mro, (case, mro, message)
        assert re.search(pattern, message), (case, message)


TF = CATCH + """
    import sys
    import numpy as np
    import tensorflow as tf
    device = f"/device:{sys.argv[1]}:0"
    def on(fn):
        def go():
            with tf.device(device):
                np.asarray(fn())
        return go
    run("INVALID_ARGUMENT", on(lambda: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([7], tf.int32), logits=tf.ones((1, 5)))))
    run("INVALID_ARGUMENT matmul", on(lambda: tf.matmul(tf.ones((2, 3)), tf.ones((4, 2)))))
    run("OUT_OF_MEMORY", on(lambda: tf.zeros((1 << 40,), tf.float32)))
    run("UNSUPPORTED", on(lambda: tf.nn.conv2d(tf.ones((1, 4, 4, 2)), tf.ones((1, 1, 2, 2)),
                                               strides=[1, 1, 1, 2], padding="VALID")))
    with tf.device(device):
        out["after"] = float(tf.reduce_sum(tf.ones(3) * 2))
    print("RESULT " + json.dumps(out))
"""

_E = "tensorflow.python.framework.errors_impl."
TF_WANT = {
    "INVALID_ARGUMENT": ([_E + "InvalidArgumentError"],
                         r"SparseSoftmaxCrossEntropyWithLogits on {t}: .*label value of 7"),
    "INVALID_ARGUMENT matmul": ([_E + "InvalidArgumentError"],
                                r"MatMul on {t}: .*inner dimensions 3 and 4"),
    "OUT_OF_MEMORY": ([_E + "ResourceExhaustedError"], r"OOM .*shape\[1099511627776\]"),
    "UNSUPPORTED": ([_E + "UnimplementedError"], r"Conv2D on {t}: strides \[1,1,1,2\]"),
}


@pytest.fixture(scope="module")
def tf_installed() -> None:
    """The TF adapters of the installed plugins, built from these sources and installed."""
    from unidev.adapters.tensorflow import build

    if build.tf_install() is None:
        pytest.skip("tensorflow is not installed")
    out = subprocess.run(["flock", "/tmp/unidev-install.lock", sys.executable, "-m", "unidev.cli",
                          "build", "tensorflow"], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


@pytest.mark.parametrize("plugin", sorted(_usable()))
def test_tensorflow_door(plugin, tf_installed):
    tf_type = _usable()[plugin]
    res = _run(TF, dict(os.environ, UNIDEV_PLUGINS=plugin, TF_CPP_MIN_LOG_LEVEL="2"), tf_type)
    assert res.pop("after") == 6.0
    for case, (types, pattern) in TF_WANT.items():
        mro, message = res[case]
        for t in types:
            assert t in mro, (case, mro, message)
        assert re.search(pattern.format(t=tf_type), message), (case, message)
