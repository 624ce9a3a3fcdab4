"""TensorFlow adapter benchmark: TF CPU and each unidev TF device in own processes, alternated.

    .venv/bin/python benchmarks/tf_adapter.py [--quick] [--pairs 3] [--plugins x86,aurora]
        [--rows add,const,fixed,mlp,convnet,cnn,cnn-cf,mobilenetv2] [--threads N] [--lock FILE]
        [--out DIR]

Rows: an eager AddV2 of 8 floats (per-op overhead), a 64-byte host->device `tf.constant`, and
Keras `train_on_batch` steps: Dense 4->2 on one sample (the fixed cost of a step: Keras, TF, the
loss copied to the host), the MLP 256-512-512-10 at batch 256 (SGD), and the conv-net of the
torch rows (3×3 conv + BatchNorm + ReLU stem, max-pool, two residual blocks of 32 and 64
channels, global average pool, dense; batch 32, 32×32×3 NHWC, SGD momentum 0.9); issue 24's
layout rows: a plain CNN (three 3×3 convs of 32, 64, 64 channels with ReLU, global average pool,
dense; batch 32, 32×32×3, SGD momentum 0.9) in Keras's default `channels_last` (`cnn`) and in
`channels_first` (`cnn-cf`, every process: TF CPU runs NCHW through oneDNN), and Keras's
MobileNetV2 (`weights=None`, 96×96×3, 10 classes, batch 16, SGD momentum 0.9) channels_last.

Each round runs one TF CPU process with no unidev code in it (`UNIDEV_DISABLE_PLUGIN_AUTOLOAD=1`,
no `TF_PLUGGABLE_DEVICE_LIBRARY_PATH`, TF kept from loading `site-packages/tensorflow-plugins/`
and unidev's Keras start-up hook removed; checked: no unidev library mapped) and one process per
plugin (`UNIDEV_PLUGINS=<plugin>`: its device only), in an order rotating per round; round i's
CPU and device processes form pair i. TF CPU runs with its default settings (oneDNN on unless
TF_ENABLE_ONEDNN_OPTS says otherwise, as printed). Every non-CPU device's `tf.constant` runs one
eager op (`_EagerConst`) that TF CPU skips: the table's note gives that floor, TF CPU's
`tf.constant` plus one eager op (Identity), from the CPU processes. Writes <out>/tf_adapter.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _machine import Machine  # noqa: E402
from _timing import (  # noqa: E402
    BASELINE_ENV,
    RESULTS,
    alternate,
    fmt_range,
    mapped_unidev_libraries,
    pair_ratios,
    shown_args,
    sig3,
)

ROW_KEYS = ("add", "const", "fixed", "mlp", "convnet", "cnn", "cnn-cf", "mobilenetv2")
TITLES = {"add": "eager AddV2, 8 floats", "const": "`tf.constant` 64 B host→device",
          "fixed": "Keras `train_on_batch`, Dense 4→2, batch 1 (fixed cost per step)",
          "mlp": "Keras `train_on_batch`, MLP 256-512-512-10, batch 256",
          "convnet": "Keras `train_on_batch`, conv-net (ResNet-style), batch 32, 32²",
          "cnn": "Keras `train_on_batch`, CNN 3×conv3×3, channels_last, batch 32, 32²",
          "cnn-cf": "Keras `train_on_batch`, CNN 3×conv3×3, channels_first, batch 32, 32²",
          "mobilenetv2": "Keras `train_on_batch`, MobileNetV2 (weights=None), batch 16, 96²",
          "floor": "TF CPU `tf.constant` + one eager op"}


def _import_tf_without_unidev():
    """Imports TF as if unidev were not installed: TF scans site-packages/tensorflow-plugins/ at
    import (where `unidev build tensorflow` installs the adapters), so that folder is hidden
    from the scan, and unidev's Keras/TF start-up patch (a meta-path finder) is removed."""
    sys.meta_path[:] = [f for f in sys.meta_path
                        if type(f).__module__ != "_unidev_tf_hooks"]
    real = os.path.exists

    def exists(path) -> bool:
        return False if str(path).rstrip("/").endswith("tensorflow-plugins") else real(path)

    os.path.exists = exists
    try:
        import tensorflow as tf
    finally:
        os.path.exists = real
    return tf


def conv_block(x, width: int, stride: int):
    import keras
    from keras import layers

    def conv(c, k, s):
        return layers.Conv2D(c, k, s, padding="same", use_bias=False)

    y = layers.ReLU()(layers.BatchNormalization()(conv(width, 3, stride)(x)))
    y = layers.BatchNormalization()(conv(width, 3, 1)(y))
    skip = x if stride == 1 else layers.BatchNormalization()(conv(width, 1, stride)(x))
    return layers.ReLU()(keras.ops.add(y, skip))


def keras_convnet(width: int = 32, classes: int = 10):
    """benchmarks/models.py's convnet() in Keras (NHWC)."""
    import keras
    from keras import layers

    inp = keras.Input((32, 32, 3))
    x = layers.Conv2D(width, 3, padding="same", use_bias=False)(inp)
    x = layers.MaxPooling2D(2)(layers.ReLU()(layers.BatchNormalization()(x)))
    x = conv_block(conv_block(x, width, 1), 2 * width, 2)
    out = layers.Dense(classes)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inp, out)


def keras_cnn(data_format: str, classes: int = 10):
    """Issue 24's CNN: three 3×3 convs (32, 64, 64 channels) with ReLU, global average pool,
    dense, in `data_format` (channels_last is Keras's default: NHWC)."""
    import keras
    from keras import layers

    shape = (32, 32, 3) if data_format == "channels_last" else (3, 32, 32)
    convs = [layers.Conv2D(c, 3, padding="same", activation="relu", data_format=data_format)
             for c in (32, 64, 64)]
    return keras.Sequential([keras.Input(shape), *convs,
                             layers.GlobalAveragePooling2D(data_format=data_format),
                             layers.Dense(classes)])


def _timed(fn, calls: int, rounds: int) -> float:
    """Best over `rounds` of the mean time of `calls` calls (after one warm-up batch)."""
    best = float("inf")
    for r in range(rounds + 1):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if r:
            best = min(best, (time.perf_counter() - t0) / calls)
    return best


def _child(quick: bool, keys: list[str]) -> None:
    import numpy as np

    baseline = os.environ.get("UNIDEV_DISABLE_PLUGIN_AUTOLOAD") == "1"
    if baseline:
        tf = _import_tf_without_unidev()
        dev = "/device:CPU:0"
    else:
        import tensorflow as tf

        from unidev.demos import tf_train

        devices = tf_train.unidev_devices()
        if not devices:
            raise SystemExit("no unidev TF device active; run `unidev build tensorflow`")
        dev = devices[0]
    import keras

    rng = np.random.default_rng(0)
    small = np.arange(8, dtype=np.float32)
    scale = 4 if quick else 1
    out: dict[str, dict] = {}

    def keras_step(model, x, y, momentum: float = 0.0):
        model.compile(keras.optimizers.SGD(0.01, momentum=momentum), jit_compile=False,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        xd, yd = tf.constant(x), tf.constant(y)

        def train():
            with tf.device(dev):
                return float(model.train_on_batch(xd, yd))  # float() waits for the step
        return train

    for key in keys:
        with tf.device(dev):
            keras.utils.set_random_seed(0)
            if key == "add":
                a, b = tf.constant(small), tf.constant(small)

                def fn(a=a, b=b):
                    with tf.device(dev):  # unscoped ops would go to the highest-priority device
                        return tf.add(a, b)
                calls, rounds = 2000 // scale, 5
            elif key == "const":
                def fn():
                    with tf.device(dev):
                        return tf.constant(small)
                calls, rounds = 2000 // scale, 5
            elif key == "fixed":
                m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
                fn = keras_step(m, rng.standard_normal((1, 4)).astype(np.float32),
                                np.array([1], np.int32))
                calls, rounds = 200 // scale, 5
            elif key == "mlp":
                dense = keras.layers.Dense
                m = keras.Sequential([keras.Input((256,)), dense(512, activation="relu"),
                                      dense(512, activation="relu"), dense(10)])
                fn = keras_step(m, rng.standard_normal((256, 256)).astype(np.float32),
                                rng.integers(0, 10, 256).astype(np.int32))
                calls, rounds = 20 // scale, 5
            elif key in ("cnn", "cnn-cf"):
                batch = 8 if quick else 32
                cf = key == "cnn-cf"
                x = rng.standard_normal((batch, 32, 32, 3)).astype(np.float32)
                fn = keras_step(keras_cnn("channels_first" if cf else "channels_last"),
                                x.transpose(0, 3, 1, 2).copy() if cf else x,
                                rng.integers(0, 10, batch).astype(np.int32), momentum=0.9)
                calls, rounds = (2, 2) if quick else (5, 4)
            elif key == "mobilenetv2":
                batch = 2 if quick else 16
                m = keras.applications.MobileNetV2(input_shape=(96, 96, 3), weights=None,
                                                   classes=10, classifier_activation=None)
                fn = keras_step(m, rng.standard_normal((batch, 96, 96, 3)).astype(np.float32),
                                rng.integers(0, 10, batch).astype(np.int32), momentum=0.9)
                calls, rounds = (1, 1) if quick else (3, 3)
            else:
                batch = 8 if quick else 32
                fn = keras_step(keras_convnet(), rng.standard_normal(
                    (batch, 32, 32, 3)).astype(np.float32),
                    rng.integers(0, 10, batch).astype(np.int32), momentum=0.9)
                calls, rounds = (2, 2) if quick else (5, 4)
        fn()  # tracing, first allocations
        title = TITLES[key]
        if quick:
            title = title.replace("batch 32", "batch 8").replace("batch 16", "batch 2")
        out[key] = {"title": title, "best_s": _timed(fn, calls, rounds)}
    if baseline and "const" in keys:
        def floor():
            with tf.device(dev):
                return tf.identity(tf.constant(small))
        out["floor"] = {"title": TITLES["floor"], "best_s": _timed(floor, 2000 // scale, 5)}
    print(json.dumps({"device": dev, "tf": tf.version.VERSION,
                      "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on)"),
                      "unidev_libraries": mapped_unidev_libraries(), "rows": out}))


def table(runs: dict[str, list[dict | None]], plugins: list[str], keys: list[str]) -> list[str]:
    """Markdown rows: TF CPU time range, then per plugin device time / TF CPU time (pair by
    pair, lower is better) and the device's time range."""
    cpu = runs["cpu"]

    def best(results, key):
        return [d["rows"][key]["best_s"] if d and key in d["rows"] else None for d in results]

    def times(vals):
        vals = [v for v in vals if v]
        unit, k = ("µs", 1e6) if vals and max(vals) < 1e-3 else ("ms", 1e3)
        return fmt_range([v * k for v in vals], sig3, " " + unit)

    devs = {p: next((d["device"].split(":")[1] for d in runs[p] if d), p) for p in plugins}
    head = ["case", "TF CPU"] + [f"{devs[p]} ({p})" for p in plugins] + [
        f"{devs[p]} / TF CPU" for p in plugins]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        title = next((d["rows"][key]["title"] for d in cpu if d and key in d["rows"]), key)
        cells = [title, times(best(cpu, key))]
        cells += [times(best(runs[p], key)) for p in plugins]
        cells += [fmt_range(pair_ratios(best(runs[p], key), best(cpu, key)), unit="×")
                  for p in plugins]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer calls, one pair: a smoke run")
    p.add_argument("--pairs", type=int, default=0, help="process pairs (default 3, quick 1)")
    p.add_argument("--plugins", default="", help="comma-separated plugins (default: all usable)")
    p.add_argument("--rows", default=",".join(ROW_KEYS), help="comma-separated rows")
    p.add_argument("--threads", type=int, default=0, help="TF's intra/inter-op threads and the "
                   "plugins' (default: TF's default, all cores)")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--lock", default="", help="hold this flock file during each round")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    keys = [k for k in args.rows.split(",") if k]
    if bad := [k for k in keys if k not in ROW_KEYS]:
        p.error(f"--rows: unknown {', '.join(bad)}; expected some of {', '.join(ROW_KEYS)}")
    if args.child:
        _child(args.quick, keys)
        return 0
    from unidev.core import discovery

    plugins = [n for n in args.plugins.split(",") if n] or [
        r.name for r in discovery.discover() if r.usable]
    pairs = args.pairs or (1 if args.quick else 3)
    child = [sys.executable, __file__, "--child", "--rows", ",".join(keys)] + (
        ["--quick"] if args.quick else [])
    threads = {"OMP_NUM_THREADS": str(args.threads), "UNIDEV_X86_THREADS": str(args.threads),
               "TF_NUM_INTRAOP_THREADS": str(args.threads),
               "TF_NUM_INTEROP_THREADS": str(args.threads)} if args.threads else {}
    base_env = {**BASELINE_ENV, **threads, "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": ""}
    procs = [("cpu", child, base_env)] + [
        (n, child, {"UNIDEV_PLUGINS": n, **threads}) for n in plugins]
    machine = Machine(threads=args.threads or os.cpu_count() or 1, tries=1 if args.quick else 3)
    machine.measure()
    t0 = time.perf_counter()
    runs = alternate(procs, pairs, lock=args.lock or None, log=lambda s: print(s, file=sys.stderr))
    machine.measure()
    leaked = {lib for d in runs["cpu"] if d for lib in d["unidev_libraries"]}
    if not any(runs["cpu"]) or leaked:
        print(f"TF CPU baseline failed or not clean (unidev libraries mapped: {leaked})",
              file=sys.stderr)
        return 1
    cpu0 = next(d for d in runs["cpu"] if d)
    cmd = "benchmarks/tf_adapter.py " + shown_args(sys.argv[1:])
    lines = [f"Measured by `.venv/bin/python {cmd.strip()}` ({time.strftime('%Y-%m-%d %H:%M')} "
             f"UTC, {time.perf_counter() - t0:.0f} s): TF {cpu0['tf']}, TF_ENABLE_ONEDNN_OPTS="
             f"{cpu0['onednn']}, {pairs} round{'s' if pairs > 1 else ''} of one TF CPU process "
             "(no unidev code loaded) and "
             "one process per plugin, alternated; each figure the best of several batches of "
             "calls in its process, ranges over the processes; ratio = device time / TF CPU time "
             "pair by pair (< 1: the device is faster).", "", *machine.lines()]
    if "const" in keys:
        floor = [d["rows"]["floor"]["best_s"] for d in runs["cpu"] if d and "floor" in d["rows"]]
        const = [d["rows"]["const"]["best_s"] for d in runs["cpu"] if d]
        lines.append("- every non-CPU device's `tf.constant` runs one eager op (`_EagerConst`) "
                     "that TF CPU skips; TF CPU's `tf.constant` + `tf.identity` takes "
                     f"{fmt_range([f * 1e6 for f in floor], sig3, ' µs')} "
                     f"({fmt_range(pair_ratios(floor, const), unit='×')} its `tf.constant`)")
    if "cnn" in keys and "cnn-cf" in keys:
        for p in plugins:
            ratios = [d["rows"]["cnn-cf"]["best_s"] / d["rows"]["cnn"]["best_s"]
                      for d in runs[p] if d]
            lines.append(f"- {p}: CNN channels_first time / channels_last time in the same "
                         f"process: {fmt_range(ratios, unit='×')} (> 1: channels_last is faster)")
    lines += ["", *table(runs, plugins, keys)]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "tf_adapter" + ("_quick" if args.quick else "")
    (args.out / f"{name}.md").write_text(text)
    (args.out / f"{name}.json").write_text(json.dumps(
        {"machine": machine.__dict__, "pairs": pairs, "runs": runs}, indent=1) + "\n")
    return 0 if all(all(runs[n]) for n in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
