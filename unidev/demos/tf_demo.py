"""`unidev demo`, TensorFlow part: one Keras model trained on CPU and on every unidev device."""

from __future__ import annotations

import argparse
import tempfile

from unidev.adapters.tensorflow import build, status

__all__ = ["run"]


def run(args: argparse.Namespace | None = None) -> None:
    """Build/install the adapters if needed, train the CNN 3 epochs per device, print the match."""
    print("\n== TensorFlow: the same small CNN in Keras (Conv2D, BatchNormalization, ReLU, "
          "max/avg/global pooling, Dense, sparse cross-entropy), 3 epochs of SGD with momentum, "
          "CPU vs every unidev device")
    lines = status.summary()
    if build.tf_install() is None:
        print("    " + lines[0])
        return
    if any("run `unidev build tensorflow`" in line for line in lines):
        for msg in build.build():
            print("    " + msg)
    from . import tf_train as train

    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        with train._stderr_to(log.name):  # TF's start-up noise and placement log
            import tensorflow as tf

            tf.debugging.set_log_device_placement(True)  # before TF's context starts
            devices = train.unidev_devices()
            result = train.compare(devices, "cnn", "sgd", placement=True) if devices else {}
        for line in log:
            if line.startswith("unidev:"):
                print("    " + line.rstrip())
    if not devices:
        print("    no unidev TensorFlow device is active (see `unidev list`)")
        return
    print("    epoch  " + "".join(f"{d:>20}" for d in ["CPU loss"] + devices))
    for e, cpu in enumerate(result["cpu"]):
        row = "".join(f"{result[d]['losses'][e]:20.6f}" for d in devices)
        print(f"    {e + 1:5d}  {cpu:20.6f}{row}")
    for d in devices:
        p = result[d]["placement"]
        print(f"    {d}: max |weight - CPU weight| = {result[d]['max_weight_diff']:.2e}; "
              f"{len(p['device_ops'])} op types of the train step ran on it")
        print(f"        on CPU: {', '.join(p['cpu_ops']) or 'nothing'} (int32 shape math, "
              f"constants); fallbacks of compute ops: {', '.join(p['fallback']) or 'none'}")
