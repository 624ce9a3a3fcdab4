"""Train one small Keras model on CPU and on unidev devices from the same weights; compare.

Used by `unidev demo`, the tests and the benchmark. Imports TensorFlow (call it only where TF
may be imported); with ``placement=True`` TF's placement log is captured from the process's
stderr and summarised per device.
"""

from __future__ import annotations

import os
import re
import tempfile
from contextlib import contextmanager

import numpy as np

from unidev.adapters.tensorflow.ops import TF_OPS

__all__ = ["unidev_devices", "make_model", "fit", "compare", "placement_summary"]

# Placed on CPU by design: int32 shape arithmetic lives in host memory.
HOST_OPS = {"Prod", "StridedSlice", "Shape", "Pack", "Range", "FloorMod"}
DEVICE_OPS = {op.tf for op in TF_OPS} | {"AssignAddVariableOp", "AssignSubVariableOp"}
_PLACED = re.compile(r"placer\.cc:\d+\] (\S+): \((\w+)\): \S*device:(\w+):(\d+)")


def unidev_devices() -> list[str]:
    """TF names (``/device:AURORA:0``) of every device registered by a unidev adapter."""
    import tensorflow as tf

    from ..core import discovery

    types = {r.spec.tf_type for r in discovery.discover() if r.spec is not None}
    return [f"/device:{d.device_type}:{d.name.rsplit(':', 1)[1]}"
            for d in tf.config.list_physical_devices() if d.device_type in types]


def make_model(kind: str, optimizer: str, seed: int = 1):
    """A small MLP or CNN (Conv2D, BatchNorm, ReLU, max/avg/global pooling, softmax)."""
    import keras

    keras.utils.set_random_seed(seed)
    layers = keras.layers
    if kind == "mlp":
        model = keras.Sequential([keras.Input((20,)), layers.Dense(32, activation="relu"),
                                  layers.Dense(32, activation="relu"),
                                  layers.Dense(5, activation="softmax")])
    else:
        model = keras.Sequential([
            keras.Input((12, 12, 3)), layers.Conv2D(8, 3, padding="same"),
            layers.BatchNormalization(), layers.ReLU(), layers.MaxPooling2D(2),
            layers.Conv2D(8, 3, padding="same", activation="relu"), layers.AveragePooling2D(2),
            layers.GlobalAveragePooling2D(), layers.Dense(5, activation="softmax")])
    opt = (keras.optimizers.SGD(0.05, momentum=0.9) if optimizer == "sgd"
           else keras.optimizers.Adam(0.01))
    # XLA has no backend for a PluggableDevice; Keras' "auto" would pick it when one exists.
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy", jit_compile=False)
    return model


def data(kind: str, n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (n, 20) if kind == "mlp" else (n, 12, 12, 3)
    return rng.standard_normal(shape).astype(np.float32), rng.integers(0, 5, n).astype(np.int32)


def fit(device: str, kind: str, optimizer: str, epochs: int = 3, init=None):
    """(losses, weights) of `epochs` epochs on `device`, starting from `init` weights if given."""
    import tensorflow as tf

    x, y = data(kind)
    with tf.device(device):
        model = make_model(kind, optimizer)
        if init is not None:
            model.set_weights(init)
        hist = model.fit(x, y, epochs=epochs, batch_size=16, verbose=0, shuffle=False)
        return hist.history["loss"], [w.numpy() for w in model.weights]


@contextmanager
def _stderr_to(path: str):
    """Send file descriptors 1 and 2 (TF's placement log uses both) to `path` meanwhile."""
    import sys

    sys.stdout.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "a") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        for fd, old in ((1, saved[0]), (2, saved[1])):
            os.dup2(old, fd)
            os.close(old)


def placement_summary(log: str, device: str) -> dict:
    """Op types of the training graph per device, and compute ops that fell back to CPU."""
    dev_type = device.split(":")[1]
    on_device, on_cpu = set(), set()
    for name, op, typ, _ in _PLACED.findall(log):
        if "PartitionedCall" not in name:
            continue  # not the compiled train step (dataset, initialisers)
        (on_device if typ == dev_type else on_cpu).add(op)
    fallback = sorted((on_cpu & DEVICE_OPS) - HOST_OPS)
    return {"device_ops": sorted(on_device), "cpu_ops": sorted(on_cpu), "fallback": fallback}


def compare(devices: list[str], kind: str = "mlp", optimizer: str = "sgd", epochs: int = 3,
            placement: bool = False) -> dict:
    """Train on CPU and on each device from the same initial weights.

    Returns ``{"cpu": losses, device: {"losses", "max_weight_diff", "placement"?}}``. For
    `placement`, tf.debugging.set_log_device_placement(True) must have been called before TF's
    context started, and TF_CPP_MIN_LOG_LEVEL must let INFO through.
    """
    init = make_model(kind, optimizer).get_weights()
    cpu_losses, cpu_w = fit("/device:CPU:0", kind, optimizer, epochs, init)
    out: dict = {"cpu": cpu_losses}
    for dev in devices:
        log = ""
        if placement:
            with tempfile.NamedTemporaryFile("r", suffix=".log") as f:
                with _stderr_to(f.name):
                    losses, w = fit(dev, kind, optimizer, epochs, init)
                log = open(f.name).read()
        else:
            losses, w = fit(dev, kind, optimizer, epochs, init)
        diff = max(float(np.abs(a - b).max()) for a, b in zip(cpu_w, w, strict=True))
        out[dev] = {"losses": losses, "max_weight_diff": diff}
        if placement:
            out[dev]["placement"] = placement_summary(log, dev)
    return out
