"""Runs in a fresh process: ``python memory_check.py DEVICE`` creates, runs and drops 12
models' worth of variables, traced training steps and eager Keras updates on DEVICE and prints
one JSON line: the device memory in use after each (TF's get_memory_info)."""

from __future__ import annotations

import gc
import json
import sys

import keras
import numpy as np
import tensorflow as tf

device = sys.argv[1]
x, y = np.ones((8, 5), np.float32), np.ones((8, 2), np.float32)


def one() -> None:
    with tf.device(device):
        w = tf.Variable(tf.ones((5, 2)))
        step_count = tf.Variable(np.int64(0))

        @tf.function
        def step(a, b):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(a, w) - b))
            w.assign_sub(0.1 * tape.gradient(loss, w))
            step_count.assign_add(1)
            return loss

        step(x, y).numpy()
        keras.optimizers.SGD(0.1).apply_gradients([(tf.ones((5, 2)), w)])


in_use = []
for _ in range(12):
    one()
    gc.collect()
    in_use.append(tf.config.experimental.get_memory_info(device.split("device:")[1])["current"])
print("RESULT " + json.dumps(in_use))
