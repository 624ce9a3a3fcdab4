"""Framework level: torch and TensorFlow op sweeps and MLP/CNN training on the device vs CPU.

Runs in a child process per framework (``python -m unidev.conformance.framework FRAMEWORK NAME``),
so a framework that aborts costs its checks, not the run. When the adapter for a framework is not
installed (torch does not know the device, TensorFlow does not list it), every check is skipped
with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

from .target import Target

__all__ = ["item_names", "run_framework", "FRAMEWORKS"]

FRAMEWORKS = ("torch", "tensorflow")
_RTOL, _ATOL = 1e-4, 1e-5
_TRAIN_RTOL, _TRAIN_ATOL = 2e-3, 2e-4

# (check, unidev op it exercises, tier)
TORCH_SWEEP = [
    ("add", "add", 1), ("sub", "sub", 1), ("mul", "mul", 1), ("div", "div", 1),
    ("neg", "neg", 1), ("abs", "abs", 1), ("exp", "exp", 1), ("log", "log", 1),
    ("sqrt", "sqrt", 1), ("tanh", "tanh", 1), ("sigmoid", "sigmoid", 1), ("relu", "relu", 1),
    ("gelu", "gelu", 1), ("maximum", "maximum", 1), ("where", "where", 1), ("sum", "sum", 1),
    ("mean", "mean", 1), ("amax", "max", 1), ("argmax", "argmax", 1), ("matmul", "matmul", 1),
    ("addmm", "gemm", 1), ("copy", "copy", 0), ("cast", "cast", 0), ("full", "fill", 0),
    ("arange", "arange", 0), ("softmax", "softmax", 2), ("log_softmax", "log_softmax", 2),
    ("conv2d", "conv2d", 2), ("max_pool2d", "max_pool2d", 2), ("avg_pool2d", "avg_pool2d", 2),
    ("adaptive_avg_pool2d", "adaptive_avg_pool2d", 2), ("batch_norm", "batch_norm", 2),
    ("nll_loss", "nll_loss", 2), ("mse_loss", "mse_loss", 2), ("cat", "concat", 2),
    ("pad", "pad_constant", 2),
]
TF_SWEEP = [
    ("AddV2", "add", 1), ("Sub", "sub", 1), ("Mul", "mul", 1), ("RealDiv", "div", 1),
    ("Neg", "neg", 1), ("Exp", "exp", 1), ("Sqrt", "sqrt", 1), ("Tanh", "tanh", 1),
    ("Sigmoid", "sigmoid", 1), ("Relu", "relu", 1), ("Maximum", "maximum", 1),
    ("Sum", "sum", 1), ("Mean", "mean", 1), ("Max", "max", 1), ("MatMul", "matmul", 1),
    ("Cast", "cast", 0), ("Fill", "fill", 0), ("Softmax", "softmax", 2),
    ("LogSoftmax", "log_softmax", 2), ("Conv2D", "conv2d", 2), ("MaxPool", "max_pool2d", 2),
    ("AvgPool", "avg_pool2d", 2), ("ConcatV2", "concat", 2),
]
_MODELS = [("mlp-training", "-", 1), ("cnn-training", "-", 2)]


def _items(fw: str) -> list[tuple[str, str, int]]:
    return (TORCH_SWEEP if fw == "torch" else TF_SWEEP) + _MODELS


def item_names(t: Target) -> list[tuple[str, str]]:
    """(framework, check) for every framework-level check up to the tested tier."""
    return [(fw, name) for fw in FRAMEWORKS for name, _, tier in _items(fw) if tier <= t.tier]


def item_tier(fw: str, name: str) -> int:
    return next(tier for n, _, tier in _items(fw) if n == name)


def unidev_op(fw: str, name: str) -> str | None:
    """The unidev op a sweep check exercises (None for the training checks)."""
    op = next(uop for n, uop, _ in _items(fw) if n == name)
    return None if op == "-" else op


def run_framework(t: Target, fw: str, timeout: float = 600.0) -> dict:
    """Run every check of `fw` in a child process; {"available", "reason", "items"}."""
    spec = t.record.spec
    dev_name = spec.torch_name if fw == "torch" else spec.tf_type
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    if fw == "torch":
        env["UNIDEV_TORCH_DEVICE"] = t.name
    cmd = [sys.executable, "-m", "unidev.conformance.framework", fw, dev_name,
           "--index", str(t.index), "--tier", str(t.tier), "--plugin", t.name]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"available": True, "reason": "", "error": f"{fw} checks hung (> {timeout:.0f} s)",
                "items": {}}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
    return {"available": True, "reason": "", "items": {},
            "error": f"the {fw} child process died (exit status {proc.returncode}): {tail}"}


# ---- the child: torch ------------------------------------------------------------------------

def _compare(got, want, rtol: float, atol: float, what: str) -> str | None:
    import numpy as np

    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        return f"{what}: shape {g.shape}, CPU gives {w.shape}"
    if g.size == 0:
        return None
    diff = np.abs(g - w)
    bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        return (f"{what}: {int(bad.sum())} of {g.size} values differ from CPU; largest |diff| "
                f"{float(np.nanmax(diff)):.3g} (rtol {rtol:g}, atol {atol:g})")
    return None


def _brief(exc: BaseException) -> str:
    """An exception's message on one line; framework errors put the cause after a header."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = " ".join(lines)
    return text if len(text) <= 700 else text[:350] + " … " + text[-340:]


def _torch_fallbacks() -> Callable[[], dict]:
    for mod in ("unidev.torch", "unidev.adapters.torch"):
        try:
            m = __import__(mod, fromlist=["fallback_report"])
            report = m.fallback_report
            return lambda: dict(report() or {})
        except (ImportError, AttributeError):
            continue
    return dict


def _torch_ops(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(0)

    def r(*s):
        return torch.randn(*s, generator=g)

    a, b, row = r(6, 5), r(6, 5), r(5)
    at = r(5, 6).t()  # a transposed view
    img, w = r(2, 3, 8, 8), r(4, 3, 3, 3)
    return {
        "add": ((a, row), lambda x, y: x + 2 * y), "sub": ((at, b), lambda x, y: x - y),
        "mul": ((a, row), lambda x, y: x * y), "div": ((a, b.abs() + 0.5), lambda x, y: x / y),
        "neg": ((at,), lambda x: -x), "abs": ((a,), torch.abs), "exp": ((a,), torch.exp),
        "log": ((a.abs() + 0.5,), torch.log), "sqrt": ((a.abs(),), torch.sqrt),
        "tanh": ((at,), torch.tanh), "sigmoid": ((a,), torch.sigmoid), "relu": ((at,), F.relu),
        "gelu": ((a,), F.gelu), "maximum": ((a, row), torch.maximum),
        "where": ((a, b), lambda x, y: torch.where(x > 0, x, y)),
        "sum": ((at,), lambda x: x.sum(dim=1)), "mean": ((a,), lambda x: x.mean(dim=0)),
        "amax": ((a,), lambda x: x.amax(dim=1)), "argmax": ((a,), lambda x: x.argmax(dim=1)),
        "matmul": ((a, r(6, 7)), lambda x, y: x.t() @ y),
        "addmm": ((row, a, r(5, 5)), lambda c, x, y: torch.addmm(c, x, y)),
        "copy": ((at,), lambda x: x.contiguous()), "cast": ((a,), lambda x: x.to(torch.float64)),
        "full": ((a,), lambda x: torch.full((3, 4), 2.5, device=x.device)),
        "arange": ((a,), lambda x: torch.arange(0, 10, 0.5, device=x.device)),
        "softmax": ((a,), lambda x: F.softmax(x, dim=1)),
        "log_softmax": ((at,), lambda x: F.log_softmax(x, dim=0)),
        "conv2d": ((img, w), lambda x, k: F.conv2d(x, k, padding=1, stride=2)),
        "max_pool2d": ((img,), lambda x: F.max_pool2d(x, 3, 2, 1)),
        "avg_pool2d": ((img,), lambda x: F.avg_pool2d(x, 2)),
        "adaptive_avg_pool2d": ((img,), lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
        "batch_norm": ((img,), lambda x: F.batch_norm(x, None, None, training=True)),
        "nll_loss": ((F.log_softmax(a, 1), torch.tensor([0, 1, 2, 3, 4, 0])),
                     lambda x, t: F.nll_loss(x, t)),
        "mse_loss": ((a, b), F.mse_loss), "cat": ((a, b), lambda x, y: torch.cat([x, y], 1)),
        "pad": ((a,), lambda x: F.pad(x, (1, 2, 0, 1), value=0.5)),
    }


def _torch_train(torch, dev, kind: str) -> str | None:
    import copy

    nn = torch.nn
    torch.manual_seed(0)
    if kind == "mlp-training":
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        x, y = torch.randn(32, 16), torch.randn(32, 4)
        loss_fn, steps = nn.MSELoss(), 5
    else:
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
        x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
        loss_fn, steps = nn.CrossEntropyLoss(), 3
    dmodel = copy.deepcopy(model).to(dev)
    losses = []
    for m, xx, yy in ((model, x, y), (dmodel, x.to(dev), y.to(dev))):
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        run = []
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(m(xx), yy)
            loss.backward()
            opt.step()
            run.append(float(loss.detach().cpu()))
        losses.append(run)
    bad = _compare(losses[1], losses[0], _TRAIN_RTOL, _TRAIN_ATOL, f"{kind} losses")
    if bad:
        return bad
    for (name, p), q in zip(model.named_parameters(), dmodel.parameters(), strict=True):
        bad = _compare(q.detach().cpu().numpy(), p.detach().numpy(), _TRAIN_RTOL, _TRAIN_ATOL,
                       f"{kind} weight {name}")
        if bad:
            return bad
    return None


def _adapter_torch_name(plugin: str | None) -> str | None:
    """The device name the torch adapter gave `plugin`, if it bound it (it may differ from the
    spec's torch_name, which torch can refuse)."""
    backend = sys.modules.get("unidev.adapters.torch._backend")
    state = getattr(backend, "STATE", None)
    if state is not None and plugin and getattr(state, "plugin", None) == plugin:
        return getattr(state, "torch_name", None)
    return None


def _child_torch(name: str, index: int, tier: int, plugin: str | None = None) -> dict:
    import torch

    if name != "cpu":
        backend = torch._C._get_privateuse1_backend_name()
        name = _adapter_torch_name(plugin) or name
        if backend != name:
            return {"available": False, "items": {},
                    "reason": f"torch does not know device {name!r} (its PrivateUse1 backend is "
                              f"{backend!r}): the unidev torch adapter is not installed or "
                              "failed to load (see `unidev list`)"}
    dev = torch.device(name, index) if name != "cpu" else torch.device("cpu")
    try:
        torch.ones(2, device=dev).cpu()
    except Exception as exc:
        return {"available": False, "items": {}, "reason": f"torch cannot use {dev}: {exc}"}
    fallbacks = _torch_fallbacks()
    ops = _torch_ops(torch)
    items = {}
    for check, _, t in TORCH_SWEEP + _MODELS:
        if t > tier:
            continue
        before = fallbacks()
        try:
            if check in ops:
                args, fn = ops[check]
                want = fn(*args)
                got = fn(*[a.to(dev) for a in args]).cpu()
                msg = _compare(got.detach().numpy(), want.numpy(), _RTOL, _ATOL, check)
            else:
                msg = _torch_train(torch, dev, check)
        except Exception as exc:
            msg = f"{check}: {type(exc).__name__}: {_brief(exc)}"
        after = fallbacks()
        fb = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        items[check] = {"outcome": "failed" if msg else "passed", "message": msg or "",
                        "fallbacks": fb}
    return {"available": True, "reason": "", "items": items}


# ---- the child: TensorFlow -------------------------------------------------------------------

def _tf_ops(tf):
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 5)).astype("float32")
    b = rng.standard_normal((6, 5)).astype("float32")
    row = rng.standard_normal((5,)).astype("float32")
    img = rng.standard_normal((2, 8, 8, 3)).astype("float32")
    k = rng.standard_normal((3, 3, 3, 4)).astype("float32")
    return {
        "AddV2": ((a, row), tf.add), "Sub": ((a, b), tf.subtract), "Mul": ((a, row), tf.multiply),
        "RealDiv": ((a, np.abs(b) + 0.5), tf.divide), "Neg": ((a,), tf.negative),
        "Exp": ((a,), tf.exp), "Sqrt": ((np.abs(a),), tf.sqrt), "Tanh": ((a,), tf.tanh),
        "Sigmoid": ((a,), tf.sigmoid), "Relu": ((a,), tf.nn.relu),
        "Maximum": ((a, b), tf.maximum), "Sum": ((a,), lambda x: tf.reduce_sum(x, 1)),
        "Mean": ((a,), lambda x: tf.reduce_mean(x, 0)),
        "Max": ((a,), lambda x: tf.reduce_max(x, 1)),
        "MatMul": ((a, b), lambda x, y: tf.matmul(x, y, transpose_b=True)),
        "Cast": ((a,), lambda x: tf.cast(x, tf.float64)), "Fill": ((a,), lambda x: tf.fill((3, 4),
                                                                                        2.5)),
        "Softmax": ((a,), tf.nn.softmax), "LogSoftmax": ((a,), tf.nn.log_softmax),
        "Conv2D": ((img, k), lambda x, f: tf.nn.conv2d(x, f, 1, "SAME")),
        "MaxPool": ((img,), lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID")),
        "AvgPool": ((img,), lambda x: tf.nn.avg_pool2d(x, 2, 2, "VALID")),
        "ConcatV2": ((a, b), lambda x, y: tf.concat([x, y], 1)),
    }


def _tf_train(tf, device: str, kind: str) -> str | None:
    import numpy as np

    rng = np.random.default_rng(0)
    keras = tf.keras

    def build():
        if kind == "mlp-training":
            return keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, "relu"),
                                     keras.layers.Dense(4)])
        return keras.Sequential([keras.Input((16, 16, 3)),
                                 keras.layers.Conv2D(8, 3, padding="same"),
                                 keras.layers.BatchNormalization(), keras.layers.ReLU(),
                                 keras.layers.MaxPooling2D(2),
                                 keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])

    if kind == "mlp-training":
        x = rng.standard_normal((64, 16)).astype("float32")
        y = rng.standard_normal((64, 4)).astype("float32")
        loss = "mse"
    else:
        x = rng.standard_normal((32, 16, 16, 3)).astype("float32")
        y = rng.integers(0, 10, 32)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    results = []
    weights = None
    for where in ("/device:CPU:0", device):
        with tf.device(where):
            keras.utils.set_random_seed(0)
            m = build()
            if weights is None:
                weights = m.get_weights()
            m.set_weights(weights)
            # XLA is not part of the contract: Keras' jit_compile="auto" would ask for it
            m.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss=loss,
                      jit_compile=False)
            hist = m.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
            results.append((hist.history["loss"], m.get_weights()))
    bad = _compare(results[1][0], results[0][0], _TRAIN_RTOL, _TRAIN_ATOL, f"{kind} losses")
    for i, (wd, wc) in enumerate(zip(results[1][1], results[0][1], strict=True)):
        bad = bad or _compare(wd, wc, _TRAIN_RTOL, _TRAIN_ATOL, f"{kind} weight {i}")
    return bad


def _child_tf(tf_type: str, index: int, tier: int, plugin: str | None = None) -> dict:
    import tensorflow as tf

    if not tf.config.list_physical_devices(tf_type):
        return {"available": False, "items": {},
                "reason": f"TensorFlow lists no {tf_type} device: the unidev TensorFlow adapter "
                          "is not installed or failed to load (see `unidev list`)"}
    device = f"/device:{tf_type}:{index}"
    ops = _tf_ops(tf)
    items = {}
    for check, _, t in TF_SWEEP + _MODELS:
        if t > tier:
            continue
        fb: dict = {}
        try:
            if check in ops:
                args, fn = ops[check]
                with tf.device("/device:CPU:0"):
                    want = fn(*[tf.constant(a) for a in args]).numpy()
                with tf.device(device):
                    res = fn(*[tf.constant(a) for a in args])
                if not res.device.upper().endswith(f"{tf_type}:{index}"):
                    fb = {check: 1}  # TF placed it elsewhere: a fallback
                msg = _compare(res.numpy(), want, _RTOL, _ATOL, check)
            else:
                msg = _tf_train(tf, device, check)
        except Exception as exc:
            msg = f"{check}: {type(exc).__name__}: {_brief(exc)}"
        items[check] = {"outcome": "failed" if msg else "passed", "message": msg or "",
                        "fallbacks": fb}
    return {"available": True, "reason": "", "items": items}


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("framework", choices=FRAMEWORKS)
    p.add_argument("name", help="torch device name or TF device type ('cpu': self-check)")
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--tier", type=int, default=2)
    p.add_argument("--plugin", default=None, help="the unidev plugin the device belongs to")
    a = p.parse_args()
    child = _child_torch if a.framework == "torch" else _child_tf
    try:
        out = child(a.name, a.index, a.tier, a.plugin)
    except ImportError as exc:
        out = {"available": False, "items": {}, "reason": f"{a.framework} is not installed: {exc}"}
    print(json.dumps(out), flush=True)
