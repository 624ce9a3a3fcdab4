"""TensorFlow adapter benchmark: unidev TF devices vs TF's own CPU, interleaved in one process.

    .venv/bin/python benchmarks/tf_adapter.py [--quick] [--out benchmarks/results]

Cases: an eager AddV2 of 8 floats (per-op overhead), a 64-byte host->device tf.constant, and
one Keras train step (MLP 256-512-512-10, batch 256, SGD) via train_on_batch, and the same for
a Dense 4-2 on one sample: the fixed cost of a step (Keras, TF, copies). TF CPU runs with
its default settings (oneDNN on unless TF_ENABLE_ONEDNN_OPTS says otherwise, as printed).
tf.constant on any device but the CPU runs one eager op (_EagerConst) that TF CPU skips, so the
table's note gives that floor: TF CPU's tf.constant plus one eager op (Identity), same run.
Writes <out>/tf_adapter.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from _timing import RESULTS, Case, measure  # noqa: E402


def floor_case() -> Case:
    """TF CPU: tf.constant plus one eager op, the least a device's tf.constant can cost."""
    import tensorflow as tf

    small = np.arange(8, dtype=np.float32)

    def const_and_op():
        with tf.device("/device:CPU:0"):
            return tf.identity(tf.constant(small))

    return Case("copy", "floor", 1e-9, "us", {"TF CPU": const_and_op})


def cases(devices: list[str]) -> list[Case]:
    import keras
    import tensorflow as tf

    names = {"/device:CPU:0": "TF CPU", **{d: d.split(":")[1] for d in devices}}
    small = np.arange(8, dtype=np.float32)
    tiny, copy, step, fixed = {}, {}, {}, {}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 256)).astype(np.float32)
    y = rng.integers(0, 10, 256).astype(np.int32)
    for dev, name in names.items():
        with tf.device(dev):
            a = tf.constant(small)
            b = tf.constant(small)
            keras.utils.set_random_seed(0)
            dense = keras.layers.Dense
            model = keras.Sequential([keras.Input((256,)), dense(512, activation="relu"),
                                      dense(512, activation="relu"), dense(10)])
            model.compile(keras.optimizers.SGD(0.01), jit_compile=False,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            xd, yd = tf.constant(x), tf.constant(y)
            small_model = keras.Sequential([keras.Input((4,)), dense(2)])
            small_model.compile(keras.optimizers.SGD(0.01), jit_compile=False,
                                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            x1, y1 = tf.constant(x[:1, :4]), tf.constant(y[:1] % 2)
        def add(a=a, b=b, dev=dev):
            with tf.device(dev):  # unscoped ops would go to the highest-priority device
                return tf.add(a, b)

        tiny[name] = add

        def h2d(dev=dev):
            with tf.device(dev):
                return tf.constant(small)

        copy[name] = h2d

        def train(model=model, dev=dev, xd=xd, yd=yd):
            with tf.device(dev):
                return float(model.train_on_batch(xd, yd))  # float() waits for the step

        step[name] = train
        fixed[name] = partial(train, model=small_model, xd=x1, yd=y1)
    return [Case("eager", "AddV2 8 floats", 1e-9, "us", tiny),
            Case("copy", "tf.constant 64 B host->device", 1e-9, "us", copy),
            Case("keras", "train_on_batch MLP 256-512-512-10 b256", 1e-9, "us", step),
            Case("keras", "train_on_batch Dense 4-2 b1 (fixed cost)", 1e-9, "us", fixed)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    import tensorflow as tf

    from unidev.demos import tf_train as train

    devices = train.unidev_devices()
    if not devices:
        print("no unidev TF device active; run `unidev build tensorflow` (see `unidev list`)")
        return 1
    all_cases = cases(devices)
    floor = floor_case()
    measure([*all_cases[:2], floor, *all_cases[2:]], reps=3 if args.quick else 7,
            min_time=0.02 if args.quick else 0.1, log=None)
    impls = list(all_cases[0].impls)
    head = ["case", *[f"{i} (us)" for i in impls], *[f"{i} / TF CPU" for i in impls[1:]]]
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on)")
    lines = [f"TF {tf.version.VERSION}, TF_ENABLE_ONEDNN_OPTS={onednn}"
             f"; time per call, best of interleaved rounds; ratio = device time / TF CPU time", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in all_cases:
        us = [c.seconds[i] * 1e6 for i in impls]
        ratios = [f"{c.seconds[i] / c.seconds['TF CPU']:.2f}x" for i in impls[1:]]
        lines.append("| " + " | ".join([c.name, *[f"{u:.1f}" for u in us], *ratios]) + " |")
    const_us, floor_us = all_cases[1].seconds["TF CPU"] * 1e6, floor.seconds["TF CPU"] * 1e6
    lines += ["", "Every non-CPU device's tf.constant runs one eager op (_EagerConst) that TF CPU "
              f"skips; for reference, TF CPU tf.constant + tf.identity = {floor_us:.1f} us "
              f"({floor_us / const_us:.2f}x TF CPU's tf.constant, {const_us:.1f} us)."]
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tf_adapter.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
