"""Two fixes to TF's and Keras' Python for unidev devices, applied when those modules load.
`unidev build tensorflow` copies this file to site-packages as _unidev_tf_hooks.py with a .pth
that imports it at start-up (no unidev, TF or Keras import; a module finder waits for them):

- Keras' jit_compile="auto" turns XLA on whenever TF lists a non-CPU device, but XLA has no
  backend for a PluggableDevice: "auto" means no XLA while a unidev device is present (explicit
  jit_compile=True is left alone).
- TF keeps one memory-growth setting for all PluggableDevices and refuses to start when they
  differ ("Memory growth cannot differ"), so set_memory_growth on one unidev device broke the
  others. unidev's platforms always grow (force_memory_growth), so the value set on any
  PluggableDevice is given to every unidev device too."""

import sys

TYPES: frozenset = frozenset()  # the unidev device types; filled in at install


def _patch_trainer(module) -> None:
    trainer = module.Trainer
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


def _patch_context(module) -> None:
    context = module.Context
    original = context.set_memory_growth

    def set_memory_growth(self, dev, enable):
        original(self, dev, enable)
        if dev in (self._pluggable_devices or ()):
            for other in self._pluggable_devices:
                if other != dev and other.device_type in TYPES:
                    original(self, other, enable)

    context.set_memory_growth = set_memory_growth


_PATCHES = {"keras.src.trainers.trainer": _patch_trainer,
            "tensorflow.python.eager.context": _patch_context}


class _Finder:
    def find_spec(self, name, path=None, target=None):
        patch = _PATCHES.pop(name, None)
        if patch is None:
            return None
        import importlib.util

        sys.meta_path.remove(self)  # find the real module without coming back here
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if _PATCHES:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            try:
                patch(module)
            except Exception:  # another version without these names: nothing to fix
                pass

        spec.loader.exec_module = exec_module
        return spec


if TYPES:
    sys.meta_path.insert(0, _Finder())
