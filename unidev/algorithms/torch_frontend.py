"""PyTorch frontend of unidev.algorithms: swap_conv2d and swap_backend pick Conv2d algorithms.

A swapped ``nn.Conv2d`` keeps its identity, parameters, hooks and state_dict (only its class
becomes a subclass whose ``_conv_forward`` runs :class:`_ConvFunction`), so any optimizer built
before or after the swap keeps training it. The function sets the torch adapter's per-thread
conv algorithms (``set_conv_algorithms``) around the forward call and, on autograd's device
thread, around the backward call, so the plugin's kernels receive the names as their
``algorithm`` attribute. Registered Python composites run through DLPack views.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .catalog import custom
from .select import DIRECTIONS, Selector, describe, directions, resolve
from .spec import AlgorithmError, Layer
from .tune import autotune

__all__ = ["swap_conv2d", "swap_backend", "unswap", "selection"]


def _state():
    from ..adapters.torch import _backend

    return _backend.load()


def _pairs(v: Any) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _padding(m: nn.Conv2d) -> tuple[tuple[int, int], tuple[int, int, int, int] | None]:
    """(symmetric padding for the kernel, F.pad amounts to apply first or None)."""
    k, d = m.kernel_size, m.dilation
    if m.padding == "valid":
        sym, extra = (0, 0), None
    elif m.padding == "same":
        total = [d[i] * (k[i] - 1) for i in range(2)]
        left = [t // 2 for t in total]
        sym = (left[0], left[1])
        odd = [t - 2 * lf for t, lf in zip(total, left, strict=True)]
        extra = (0, odd[1], 0, odd[0]) if any(odd) else None
    else:
        sym, extra = _pairs(m.padding), None
    if m.padding_mode != "zeros":  # reflect/replicate/circular: pad first, then convolve
        ph, pw = sym
        return (0, 0), (pw, pw, ph, ph)
    return sym, extra


def _layer(name: str, index: int, m: nn.Conv2d, plugin: str) -> Layer:
    return Layer(name=name, index=index, in_channels=m.in_channels, out_channels=m.out_channels,
                 kernel=_pairs(m.kernel_size), stride=_pairs(m.stride),
                 padding=_padding(m)[0], dilation=_pairs(m.dilation), groups=m.groups,
                 dtype=str(m.weight.dtype).removeprefix("torch."), device=plugin,
                 bias=m.bias is not None)


def _input_shapes(model: nn.Module, convs: list[nn.Conv2d], example_inputs: Any) -> dict:
    """Input shape of each conv module in one forward pass on `example_inputs` (as padded)."""
    seen: dict[int, tuple[int, ...]] = {}

    def hook(mod, args):
        x = args[0]
        _, extra = _padding(mod)
        if extra is not None:
            x = F.pad(x, extra)
        seen.setdefault(id(mod), tuple(x.shape))

    handles = [m.register_forward_pre_hook(hook) for m in convs]
    modes = {m: m.training for m in model.modules()}
    model.eval()  # a training-mode pass would move BatchNorm's running statistics
    try:
        with torch.no_grad():
            inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
        for m, mode in modes.items():
            m.training = mode
    return seen


class _ConvFunction(torch.autograd.Function):
    """conv2d whose three kernels run the given algorithms (per call, per thread)."""

    @staticmethod
    def forward(ctx, x, w, b, conf, algos):
        ctx.conf, ctx.algos, ctx.has_bias = conf, algos, b is not None
        ctx.save_for_backward(x, w)
        stride, padding, dilation, groups, plugin = conf
        composite = custom("conv2d", algos[0])
        if composite is not None:
            return _composite(composite.fn, [x, w, b], dict(stride=stride, padding=padding,
                                                         dilation=dilation, groups=groups), x)
        ext = _state().ext
        ext.set_conv_algorithms(algos[0], "", "")
        try:
            return torch.ops.aten.convolution(x, w, b, stride, padding, dilation, False, [0, 0],
                                              groups)
        finally:
            ext.set_conv_algorithms("", "", "")

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        stride, padding, dilation, groups, plugin = ctx.conf
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1],
                ctx.has_bias and ctx.needs_input_grad[2]]
        gx = gw = gb = None
        attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        names = list(ctx.algos[1:])
        for i, (op, shape_attr, shape) in enumerate(
                (("conv2d_backward_input", "input_shape", x.shape),
                 ("conv2d_backward_weight", "weight_shape", w.shape))):
            spec = custom(op, names[i])
            if mask[i] and spec is not None:
                other = w if i == 0 else x
                got = _composite(spec.fn, [gy, other], {shape_attr: tuple(shape), **attrs}, x)
                gx, gw = (got, gw) if i == 0 else (gx, got)
                mask[i], names[i] = False, "auto"
        if mask[0] or mask[1] or mask[2]:
            ext = _state().ext
            ext.set_conv_algorithms("", names[0], names[1])
            try:
                rx, rw, gb = torch.ops.aten.convolution_backward(
                    gy, x, w, [w.shape[0]] if ctx.has_bias else None, stride, padding, dilation,
                    False, [0, 0], groups, mask)
            finally:
                ext.set_conv_algorithms("", "", "")
            gx = rx if mask[0] else gx
            gw = rw if mask[1] else gw
        return gx, gw, gb, None, None


def _composite(fn: Callable, tensors: list, attrs: dict, like: torch.Tensor) -> torch.Tensor:
    """Run a registered unidev.ops composite on torch tensors: each input copied on the device
    into unidev-owned memory (the binding cannot take torch's allocations), the result wrapped
    back without a copy."""
    from ..adapters.torch.dynamo import _wrap
    from ..core.array import DeviceArray

    st, index = _state(), like.device.index or 0
    dev = f"{st.plugin}:{index}"
    ins = []
    for t in tensors:
        a = None
        if t is not None:
            a = DeviceArray.empty(tuple(t.shape), str(t.dtype).removeprefix("torch."), dev)
            _wrap(a, True).copy_(t)
        ins.append(a)
    st.ext.synchronize(index)  # torch's copies (its stream) before the binding's calls
    out = fn(*ins, **attrs)
    if not isinstance(out, DeviceArray):
        raise AlgorithmError(f"custom algorithm {getattr(fn, '__name__', fn)!r} returned "
                             f"{type(out).__name__}, expected a unidev.DeviceArray")
    return _wrap(out, True)


class _Swapped:
    """Mixin of swapped conv modules: the algorithm per direction and the per-shape tuning."""

    def _unidev_names(self, shape: tuple[int, ...]) -> tuple[str, str, str]:
        wanted = self._unidev_algorithms
        if "autotune" not in wanted.values():
            return tuple(wanted[op] for op in DIRECTIONS)
        key = tuple(shape)
        if key not in self._unidev_tuned:
            layer = self._unidev_layer.with_input(key)
            self._unidev_tuned[key] = tuple(
                autotune(layer, op) if wanted[op] == "autotune" else wanted[op]
                for op in DIRECTIONS)
        return self._unidev_tuned[key]

    def _conv_forward(self, input, weight, bias):  # noqa: A002 - nn.Conv2d's own signature
        st = _state()
        if input.device.type != st.torch_name:
            raise AlgorithmError(f"{self._unidev_layer}: swapped to algorithms "
                                 f"{self._unidev_algorithms} of plugin {st.plugin!r}, but its "
                                 f"input is on {input.device}; move the model to "
                                 f"{st.torch_name!r} (or unidev.torch.unswap it)")
        sym, extra = _padding(self)
        if extra is not None:
            mode = "constant" if self.padding_mode == "zeros" else self.padding_mode
            input = F.pad(input, extra, mode=mode)  # noqa: A001
        conf = (list(self._unidev_layer.stride), list(sym), list(self._unidev_layer.dilation),
                self.groups, st.plugin)
        return _ConvFunction.apply(input, weight, bias, conf, self._unidev_names(input.shape))


_classes: dict[type, type] = {}


def _swapped_class(cls: type) -> type:
    if issubclass(cls, _Swapped):
        return cls
    if cls not in _classes:
        _classes[cls] = type(f"Swapped{cls.__name__}", (_Swapped, cls), {"__module__": __name__})
    return _classes[cls]


SwappedConv2d = _swapped_class(nn.Conv2d)  # module-level, so swapped models pickle


def _convs(model: nn.Module) -> list[tuple[str, nn.Conv2d]]:
    return [(n or "<model>", m) for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]


def swap_backend(model: nn.Module, selectors: Mapping[str, Selector], *,
                 example_inputs: Any = None) -> list[Layer]:
    """Choose the algorithms of every ``nn.Conv2d`` of `model`, in place; returns the layers.

    `selectors` maps ``"conv2d"``, ``"conv2d_backward_input"``, ``"conv2d_backward_weight"`` to
    a selector each (``"conv2d"``'s also serves a gradient left out). A selector is an
    algorithm name, a list of names (one per conv layer in ``model.named_modules()`` order), a
    function of a :class:`unidev.algorithms.Layer` returning a name, ``"auto"`` or
    ``"autotune"``. Every choice is checked against its layer here; one that cannot run it
    raises :class:`unidev.algorithms.AlgorithmError` naming the layer, the algorithm and why.
    With `example_inputs` the layers know their input shapes (selectors see them, "autotune"
    tunes now); otherwise "autotune" tunes each new input shape at its first forward pass.
    """
    if not isinstance(model, nn.Module):
        raise AlgorithmError(f"swap: model is a {type(model).__name__}, expected a torch.nn.Module")
    plugin = _state().plugin
    per_op = directions(selectors)
    convs = _convs(model)
    shapes = _input_shapes(model, [m for _, m in convs], example_inputs) \
        if example_inputs is not None else {}
    layers = []
    for i, (name, m) in enumerate(convs):
        layer = _layer(name, i, m, plugin)
        if id(m) in shapes:
            layer = layer.with_input(shapes[id(m)])
        layers.append(layer)
    chosen = {op: resolve(sel, layers, op, plugin) for op, sel in per_op.items()}
    for i, (_, m) in enumerate(convs):
        m.__class__ = _swapped_class(type(m))
        m._unidev_layer = layers[i]
        m._unidev_algorithms = {op: chosen[op][i] for op in DIRECTIONS}
        m._unidev_selectors = {op: describe(s) for op, s in per_op.items()}
        m._unidev_tuned = {}
        if layers[i].input_shape is not None:
            m._unidev_names(layers[i].input_shape)  # "autotune": tune now
    return layers


def swap_conv2d(model: nn.Module, selector: Selector = "auto", *,
                example_inputs: Any = None) -> list[Layer]:
    """:func:`swap_backend` with one selector for all three conv directions."""
    return swap_backend(model, {"conv2d": selector}, example_inputs=example_inputs)


def unswap(model: nn.Module) -> None:
    """Give every swapped conv of `model` back its original class (the plugin's ``auto``)."""
    for _, m in _convs(model):
        if isinstance(m, _Swapped):
            m.__class__ = next(c for c in type(m).__mro__[1:] if not issubclass(c, _Swapped))
            for attr in ("_unidev_layer", "_unidev_algorithms", "_unidev_selectors",
                         "_unidev_tuned"):
                m.__dict__.pop(attr, None)


def selection(model: nn.Module) -> dict[str, dict[str, Any]]:
    """Layer name -> {op: algorithm} of the swapped convs (tuned shapes: ``tuned``)."""
    out = {}
    for name, m in _convs(model):
        if isinstance(m, _Swapped):
            out[name] = dict(m._unidev_algorithms)
            if m._unidev_tuned:
                out[name]["tuned"] = {str(list(k)): v for k, v in m._unidev_tuned.items()}
    return out
