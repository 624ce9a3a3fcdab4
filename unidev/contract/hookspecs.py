"""The Python half of the plugin contract: pluggy hook specifications in group ``unidev``.

A plugin is a module registered under the entry point group ``unidev``::

    [project.entry-points.unidev]
    aurora = "unidev_aurora"

that implements some of the hooks below, each marked with ``unidev.kit.hookimpl``. The
docstring of every hook is its reference documentation.
"""

from __future__ import annotations

import pluggy

from .spec import PluginSpec

hookspec = pluggy.HookspecMarker("unidev")


@hookspec(firstresult=True)
def unidev_plugin() -> PluginSpec:
    """Describe the plugin: return one :class:`unidev.kit.PluginSpec`.

    Called once per process, at discovery, before the plugin's native library is loaded; it must
    be cheap and must not import torch or tensorflow. The fields are:

    - ``name``: short lowercase name (``"aurora"``), unique among installed plugins; it is what
      ``unidev list``, ``unidev info NAME`` and ``unidev.ops`` device strings use.
    - ``torch_name``: the PyTorch device name (``torch.device("aurora")``), matching ``[a-z_]+``
      and not a built-in torch device type. Defaults to ``name``.
    - ``tf_type``: the TensorFlow device type (``/device:AURORA:0``), matching ``[A-Z][A-Z_]*``
      and not containing ``CPU`` (TF's oneDNN rewrites claim those). Defaults to ``name.upper()``.
    - ``library``: absolute path of the native library exporting ``unidev_get_api``
      (see ``unidev/contract/include/unidev/unidev.h``).
    - ``priority``: PyTorch takes one device per process; the highest priority installed plugin
      wins unless ``UNIDEV_TORCH_DEVICE`` names another. The bundled plugins use 0–100.
    - ``host_addressable``: True if device handles are host pointers (zero-copy DLPack to numpy).
    - ``conformance``: a :class:`unidev.kit.Conformance` with known exclusions (op or
      ``op:dtype`` → reason) and tightened tolerances (dtype → (rtol, atol)). Tolerances can only be
      tightened below the suite's caps, never loosened.
    - ``applicable``: None if the plugin can run on this machine, else a one-line reason (an arm64
      plugin on an x86 host). Inapplicable plugins are listed but never loaded.

    Use in plugins: implement it in the module named by the entry point. If it raises, the plugin
    is recorded as broken with that error and the others keep working.
    """


@hookspec(firstresult=True)
def unidev_debug_counters() -> dict[str, int]:
    """Optional: the plugin's debug counters, name → count since the library was loaded.

    For tests that count work rather than time it, e.g. ``{"layout_copies": 3}``: how many
    tensors a layout-sensitive kernel had to copy because their strides were neither dense NCHW
    nor dense channels-last (issue 24; a channels-last training step should add none). Counters
    only grow; a test reads them before and after what it checks. Names are the plugin's; a
    counter it does not keep is simply absent.

    Use in plugins: keep atomic counters in the native library and expose them through a plain
    exported C function that this hook calls with ctypes (plugins/x86: ``ud_x86_debug_counter``).
    Callers use ``unidev.debug_counters(name)``, which returns ``{}`` for a plugin without the hook.
    """


@hookspec(firstresult=True)
def unidev_algorithms() -> dict:
    """Optional: the plugin's algorithms per op, ``{op: [unidev.algorithms.AlgorithmSpec, ...]}``.

    For the ops with an ``algorithm`` attribute (conv2d, conv2d_backward_input,
    conv2d_backward_weight, conv2d_bias_act). Each spec (a dict of the same fields also works)
    names what the kernel accepts as ``algorithm`` besides ``"auto"``, with a one-line
    description, the dtypes it supports (None: every dtype the op's kernel has), the
    declarative rules a layer must meet (``requires``: ``kernel``, ``stride``, ``dilation``,
    ``groups``, ``min_channels``; see ``unidev.algorithms.RULES``) and optionally ``applies``, a
    predicate of a ``unidev.algorithms.Layer`` returning None or why it cannot run the layer.
    ``unidev.algorithms`` refuses a selection that breaks them at swap time, before any call;
    the kernel must still reject what it cannot run (UD_ERR_INVALID_ARGUMENT / UNSUPPORTED).

    ``unidev info NAME --algorithms`` prints the table; ``unidev.torch.swap_conv2d`` and
    ``unidev.algorithms.autotune`` choose among its entries. Must be cheap and import no
    framework; a plugin without the hook offers only ``"auto"``.
    """
