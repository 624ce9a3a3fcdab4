"""torch.compile(backend="unidev"): AOTAutograd's FX graphs run as native unidev plans.

Each forward/backward FX graph is split, per input signature (shapes, strides, dtypes, ints),
into partitions of nodes the op table translates (one unidev.graph plan each, bound to the
torch tensors' memory without copies) and eager nodes (torch calls, counted in eager_counts()).
Graphs whose tensors are not on the unidev device run eagerly as FX graphs.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

from ...core.array import DeviceArray
from ...graph.partition import Owned, Part, Partitioner, Programs, Stats
from . import _backend, _fx

__all__ = ["backend", "eager_counts", "stats", "reset"]

_STATS = Stats()


def eager_counts() -> dict[str, int]:
    """aten ops left in the FX graph as eager torch calls (like fallbacks), by name."""
    return dict(_STATS.eager)


def stats() -> dict[str, int]:
    """Counts: programs (one per graph and input signature), partitions (plans), eager_graphs
    (calls run as plain FX graphs: CPU tensors), and 'op:<unidev op>' plan steps."""
    return dict(_STATS.counts)


def reset() -> None:
    _STATS.reset()


def _decompositions() -> dict:
    """torch's core-aten decompositions of the ops the table does not translate, so they reach
    the table as ops it does (silu -> sigmoid/mul, ...); translated ops are kept whole."""
    from torch._decomp import core_aten_decompositions

    return {op: fn for op, fn in core_aten_decompositions().items()
            if not _fx.supported(getattr(op, "__name__", ""))}


def backend(gm: Any, example_inputs: list, *, mode: str | None = None,
            options: dict | None = None) -> Any:
    """The Dynamo backend (entry point torch_dynamo_backends: unidev). options={"algorithms":
    selector} picks the conv algorithms (unidev.algorithms); mode="max-autotune" autotunes them."""
    from torch._dynamo.backends.common import aot_autograd

    opts = dict(options or {})
    algorithms = opts.pop("algorithms", "autotune" if mode == "max-autotune" else None)
    if opts:
        raise ValueError(f"torch.compile(backend='unidev'): unknown options {sorted(opts)}; "
                         "expected 'algorithms'")
    compiler = functools.partial(_compiler, algorithms=algorithms)
    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler,
                        decompositions=_decompositions())(gm, example_inputs)


_KINDS = {"placeholder": "input", "call_function": "call", "output": "output"}


def _compiler(gm: Any, example_inputs: list, algorithms: Any = None) -> Any:
    """One FX graph: a program per input signature (a recompile per new shape)."""
    import torch

    out = next(n for n in gm.graph.nodes if n.op == "output")
    nodes = [(_KINDS.get(n.op, n.op), n) for n in gm.graph.nodes]
    programs = Programs(lambda args, env: _Builder(next(
        a.device for a in args if isinstance(a, torch.Tensor)), algorithms).build(
            nodes, iter(args), env), _STATS)

    def run(args: list) -> Any:
        name = _backend.STATE.torch_name
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if name is None or not tensors or any(t.device.type != name for t in tensors):
            _STATS.counts["eager_graphs"] += 1
            return gm(*args)
        env: dict = {}
        key = tuple((tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor)
                    else (type(a), a) for a in args)
        programs.run(key, args, env)
        return list(_map(out.args[0], env))

    run._boxed_call = True  # AOTAutograd passes the argument list itself
    return run


def _map(a: Any, env: dict) -> Any:
    import torch.fx

    return torch.fx.node.map_arg(a, lambda n: env[n])


def _eager(n: Any) -> Any:
    return lambda env, args: env.__setitem__(n, n.target(*_map(n.args, env),
                                                         **_map(n.kwargs, env)))


_OWNED = Owned()  # the buffers this module made through unidev._C (outputs, staging)


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _wrap(a: Any, sync: bool = False) -> Any:
    """A torch tensor over DeviceArray `a`'s memory (DLPack, no copy); sync: wait for the
    allocation (it is ordered on the binding's stream, torch writes it on its own)."""
    import torch

    from ... import _C

    keep = _OWNED.keeper(a.buffer)  # frees the buffer after the tensor dies (see Owned)
    if sync:
        a.buffer.lib.synchronize_allocation(a.buffer.handle)
    # kDLExtDev (12) even for host-addressable plugins: torch maps it to the PrivateUse1
    # device (DeviceArray.__dlpack__ says kDLCPU there, which would give a CPU tensor)
    return torch.from_dlpack(_C.make_dlpack(a.buffer.handle, 12, a.device.index, a.dtype,
                                            list(a.shape), list(a.strides), 0, keep))


class _Part(Part):
    """A compiled partition bound to torch tensors' memory."""

    def __init__(self, cp: Any, ins: list, outs: list, nones: list, device: Any) -> None:
        super().__init__(cp, ins, outs, nones)
        self.device, self.lib, self.index = device, cp.device.library, cp.device.index
        self.staging: dict[int, Any] = {}  # input position -> owned tensor reused per call

    def _bind(self, k: int, t: Any, strides: tuple) -> Any:
        if t.untyped_storage().data_ptr() in _OWNED and all(
                d == 1 or s == w for d, s, w in zip(t.shape, t.stride(), strides, strict=True)):
            return t
        # torch's allocator made it (a parameter, a user input, an eager node's result): the
        # binding cannot take that handle, so it is copied on the device into owned memory
        import torch

        dev = self.cp.device
        if isinstance(t, torch.nn.Parameter) and t.is_contiguous():
            # a parameter moves into owned memory once (same values, same Parameter object):
            # later calls and the optimizer's in-place updates use it without copies
            _STATS.counts["adopted"] += 1
            t.data = _wrap(DeviceArray.empty(tuple(t.shape), _dtype(t), dev), True).copy_(t)
            return t
        _STATS.counts["input_copies"] += 1
        if k not in self.staging:  # plan inputs are contiguous
            self.staging[k] = _wrap(DeviceArray.empty(tuple(t.shape), _dtype(t), dev), True)
        return self.staging[k].copy_(t)

    def __call__(self, env: dict, args: Any) -> None:
        import torch

        ins = [self._bind(k, env[node], spec[2])
               for k, (node, spec) in enumerate(zip(self.ins, self.cp.native.inputs, strict=True))]
        outs = [_wrap(a) for a in self.cp.new_outputs()]
        # the plan runs on the plugin's default stream; torch's stream handle is not reachable
        # from Python, so order the two by synchronizing the device around the run
        torch.accelerator.synchronize(self.device)
        _OWNED.release()
        self.cp.run_descriptors([_desc(t) for t in ins], [_desc(t) for t in outs], 0)
        self.lib.synchronize(self.index)
        self.export(env, outs)


def _desc(t: Any) -> tuple:
    """(handle, byte offset, dtype, shape, strides): the storage pointer is the plugin handle."""
    return (t.untyped_storage().data_ptr(), t.storage_offset() * t.element_size(), _dtype(t),
            tuple(t.shape), t.stride())


class _Builder(Partitioner):
    """The FX side of the partitioner: aten nodes -> IR (_fx), torch tensors as values."""

    frontend = "torch"

    def __init__(self, device: Any, algorithms: Any = None) -> None:
        self.torch_device = device
        super().__init__(f"{_backend.STATE.plugin}:{device.index or 0}", _STATS, algorithms)

    def spec(self, v: Any) -> tuple | None:
        import torch

        return (tuple(v.shape), _dtype(v)) if isinstance(v, torch.Tensor) else None

    def op_name(self, n: Any) -> str | None:  # an aten op, not Python on ints or tuples
        return n.target.__name__ if hasattr(n.target, "_schema") else None

    def users(self, n: Any) -> Any:
        return n.users

    def inputs(self, n: Any) -> Any:
        return n.all_input_nodes

    def eager(self, n: Any) -> Any:
        return _eager(n)

    def part(self, cp: Any, ins: list, outs: list, nones: list) -> Any:
        return _Part(cp, ins, outs, nones, self.torch_device)

    def translate(self, n: Any, env: dict) -> bool:
        import torch.fx

        if n.target is operator.getitem and n.args[0] in self.vals:
            self.vals[n] = self.vals[n.args[0]][n.args[1]]
            return True
        try:
            args = torch.fx.node.map_arg(n.args, lambda a: self.arg(a, env))
            kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: self.arg(a, env))
            self.vals[n] = _fx.translate(self.g, n.target, list(args), dict(kwargs))
        except Exception:  # no translation (op, dtype, arguments): an eager torch call
            return False
        return True
