"""Keras' jit_compile="auto" turns XLA on whenever TF lists a non-CPU device, but XLA has no
backend for a PluggableDevice. `unidev build tensorflow` copies this file to site-packages as
_unidev_tf_keras.py with a .pth that imports it at start-up (no unidev, no Keras import); when
Keras is imported, "auto" then means no XLA while a unidev device is present. Explicit
jit_compile=True is left alone."""

import sys

TYPES: frozenset = frozenset()  # the unidev device types; filled in at install


def _patch(trainer) -> None:
    original = trainer._resolve_auto_jit_compile

    def resolve(self):
        try:
            import tensorflow as tf

            if any(d.device_type in TYPES for d in tf.config.list_physical_devices()):
                return False
        except Exception:  # never break Keras: fall back to its own rule
            pass
        return original(self)

    trainer._resolve_auto_jit_compile = resolve


class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name != "keras.src.trainers.trainer":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            try:
                _patch(module.Trainer)
            except Exception:  # a Keras without this method: nothing to fix
                pass

        spec.loader.exec_module = exec_module
        return spec


if TYPES:
    sys.meta_path.insert(0, _Finder())
