"""Debug counters of a loaded TF adapter: kernel calls, copies, transposes and pads per TF op."""

from __future__ import annotations

import ctypes
from pathlib import Path

from . import build, ops

__all__ = ["COUNTERS", "op_counts", "reset"]

COUNTERS = ("calls", "copies", "transposes", "pads")


def _library(plugin: str) -> ctypes.CDLL:
    """The adapter library of `plugin` that TF loaded (dlopen of the same file is that handle)."""
    tf = build.tf_install()
    if tf is None:
        raise RuntimeError("TensorFlow is not installed")
    path = Path(build.plugin_dir(tf)) / build.library_name(plugin)
    lib = ctypes.CDLL(str(path))
    lib.udtf_debug_count.restype = ctypes.c_int64
    lib.udtf_debug_count.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return lib


def op_counts(plugin: str) -> dict[str, dict[str, int]]:
    """Nonzero counters per TF op since the last reset(): {"Conv2D": {"calls": 3, ...}, ...}.

    "copies" and "pads" are the op set's copy and pad_constant calls the op's handler made,
    "transposes" those copies that change the order of the dimensions in memory.
    """
    lib = _library(plugin)
    out: dict[str, dict[str, int]] = {}
    for op in ops.TF_OPS:
        got = {w: lib.udtf_debug_count(op.tf.encode(), w.encode()) for w in COUNTERS}
        got = {w: n for w, n in got.items() if n > 0}
        if got:
            out[op.tf] = got
    return out


def reset(plugin: str) -> None:
    """Sets every counter of `plugin`'s adapter to zero."""
    _library(plugin).udtf_debug_reset()
