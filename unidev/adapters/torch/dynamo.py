"""torch.compile(backend="unidev"): AOTAutograd's FX graphs run as native unidev plans.

Each forward/backward FX graph is split, per input signature (shapes, strides, dtypes, ints),
into partitions of nodes the op table translates (one unidev.graph plan each, bound to the
torch tensors' memory without copies) and eager nodes (torch calls, counted in eager_counts()).
Graphs whose tensors are not on the unidev device run eagerly as FX graphs.
"""

from __future__ import annotations

import operator
import weakref
from collections import Counter
from typing import Any

from ...core.array import DeviceArray
from . import _backend, _fx

__all__ = ["backend", "eager_counts", "stats", "reset"]

_EAGER: Counter = Counter()  # aten op -> nodes kept as eager torch calls (per program built)
_STATS: Counter = Counter()  # programs, partitions, eager_graphs, plan steps by unidev op


def eager_counts() -> dict[str, int]:
    """aten ops left in the FX graph as eager torch calls (like fallbacks), by name."""
    return dict(_EAGER)


def stats() -> dict[str, int]:
    """Counts: programs (one per graph and input signature), partitions (plans), eager_graphs
    (calls run as plain FX graphs: CPU tensors), and 'op:<unidev op>' plan steps."""
    return dict(_STATS)


def reset() -> None:
    _EAGER.clear()
    _STATS.clear()


def _decompositions() -> dict:
    """torch's core-aten decompositions of the ops the table does not translate, so they reach
    the table as ops it does (silu -> sigmoid/mul, ...); translated ops are kept whole."""
    from torch._decomp import core_aten_decompositions

    return {op: fn for op, fn in core_aten_decompositions().items()
            if not _fx.supported(getattr(op, "__name__", ""))}


def backend(gm: Any, example_inputs: list, **kwargs: Any) -> Any:
    """The Dynamo backend (entry point torch_dynamo_backends: unidev)."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_compiler, bw_compiler=_compiler,
                        decompositions=_decompositions())(gm, example_inputs, **kwargs)


def _compiler(gm: Any, example_inputs: list) -> Any:
    """One FX graph: a program per input signature (a recompile per new shape)."""
    import torch

    programs: dict[tuple, list] = {}
    out = next(n for n in gm.graph.nodes if n.op == "output")

    def run(args: list) -> Any:
        name = _backend.STATE.torch_name
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if name is None or not tensors or any(t.device.type != name for t in tensors):
            _STATS["eager_graphs"] += 1
            return gm(*args)
        env: dict = {}
        key = tuple((tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor)
                    else (type(a), a) for a in args)
        if key not in programs:
            _STATS["programs"] += 1
            programs[key] = _Builder(gm, tensors[0].device).build(iter(args), env)
        else:
            it = iter(args)
            for seg in programs[key]:
                seg(env, it)
        return list(_map(out.args[0], env))

    run._boxed_call = True  # AOTAutograd passes the argument list itself
    return run


def _map(a: Any, env: dict) -> Any:
    import torch.fx

    return torch.fx.node.map_arg(a, lambda n: env[n])


# program segments: fn(env, args) sets env[FX node] for the nodes they run
def _input(n: Any) -> Any:
    return lambda env, args: env.__setitem__(n, next(args))


def _eager(n: Any) -> Any:
    return lambda env, args: env.__setitem__(n, n.target(*_map(n.args, env),
                                                         **_map(n.kwargs, env)))


def _alias(n: Any, source: Any) -> Any:
    return lambda env, args: env.__setitem__(n, env[source])


# handle -> Buffer of the allocations this module made through unidev._C (outputs, staging):
# the only memory a plan binds (the binding refuses handles it did not allocate); an entry
# lives exactly as long as the torch tensor that owns the buffer through DLPack
_OWNED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


_GRAVE: list = []  # buffers of dead tensors, freed once torch's stream is known to be done


class _Keep:
    """DLPack owner of a buffer: torch's work on its stream may still read a tensor Python has
    dropped, so the free waits for the next device synchronization (in _Part.run)."""

    __slots__ = ("buf",)

    def __init__(self, buf: Any) -> None:
        self.buf = buf

    def __del__(self) -> None:
        _GRAVE.append(self.buf)


def _wrap(a: Any, sync: bool = False) -> Any:
    """A torch tensor over DeviceArray `a`'s memory (DLPack, no copy); sync: wait for the
    allocation (it is ordered on the binding's stream, torch writes it on its own)."""
    import torch

    from ... import _C

    _OWNED[a.buffer.handle] = a.buffer
    if sync:
        a.buffer.lib.synchronize_allocation(a.buffer.handle)
    # kDLExtDev (12) even for host-addressable plugins: torch maps it to the PrivateUse1
    # device (DeviceArray.__dlpack__ says kDLCPU there, which would give a CPU tensor)
    return torch.from_dlpack(_C.make_dlpack(a.buffer.handle, 12, a.device.index, a.dtype,
                                            list(a.shape), list(a.strides), 0, _Keep(a.buffer)))


class _Part:
    """A compiled partition: plan inputs are FX nodes' tensors, outputs (node, index|None)."""

    def __init__(self, cp: Any, ins: list, outs: list, nones: list, device: Any) -> None:
        self.cp, self.ins, self.outs, self.nones, self.device = cp, ins, outs, nones, device
        self.lib, self.index = cp.device.library, cp.device.index
        self.staging: dict[int, Any] = {}  # input position -> owned tensor reused per call

    def _bind(self, k: int, t: Any, strides: tuple) -> Any:
        if t.untyped_storage().data_ptr() in _OWNED and all(
                d == 1 or s == w for d, s, w in zip(t.shape, t.stride(), strides, strict=True)):
            return t
        # torch's allocator made it (a parameter, a user input, an eager node's result): the
        # binding cannot take that handle, so it is copied on the device into owned memory
        import torch

        dev, dtype = self.cp.device, str(t.dtype).removeprefix("torch.")
        if isinstance(t, torch.nn.Parameter) and t.is_contiguous():
            # a parameter moves into owned memory once (same values, same Parameter object):
            # later calls and the optimizer's in-place updates use it without copies
            _STATS["adopted"] += 1
            t.data = _wrap(DeviceArray.empty(tuple(t.shape), dtype, dev), True).copy_(t)
            return t
        _STATS["input_copies"] += 1
        if k not in self.staging:  # plan inputs are contiguous
            self.staging[k] = _wrap(DeviceArray.empty(tuple(t.shape), dtype, dev), True)
        return self.staging[k].copy_(t)

    def __call__(self, env: dict, args: Any) -> None:
        import torch

        ins = [self._bind(k, env[node], spec[2])
               for k, (node, spec) in enumerate(zip(self.ins, self.cp.native.inputs, strict=True))]
        outs = [_wrap(a) for a in self.cp.new_outputs()]
        # the plan runs on the plugin's default stream; torch's stream handle is not reachable
        # from Python, so order the two by synchronizing the device around the run
        torch.accelerator.synchronize(self.device)
        _GRAVE.clear()
        self.cp.run_descriptors([_desc(t) for t in ins], [_desc(t) for t in outs], 0)
        self.lib.synchronize(self.index)
        for (node, i), t in zip(self.outs, outs, strict=True):
            if i is None:
                env[node] = t
            else:  # a tuple result: its tensors the later nodes read, None elsewhere
                env.setdefault(node, [None] * len(self.cp.native.outputs))[i] = t
        for node in self.nones:
            env[node] = None


def _desc(t: Any) -> tuple:
    """(handle, byte offset, dtype, shape, strides): the storage pointer is the plugin handle."""
    return (t.untyped_storage().data_ptr(), t.storage_offset() * t.element_size(),
            str(t.dtype).removeprefix("torch."), tuple(t.shape), t.stride())


class _Builder:
    """Walks the FX graph once with real tensors: builds the program and runs it as it goes."""

    def __init__(self, gm: Any, device: Any) -> None:
        self.gm, self.device = gm, device
        self.dev = f"{_backend.STATE.plugin}:{device.index or 0}"
        self.prog: list = []
        self._open()

    def _open(self) -> None:
        from ...graph import Graph

        self.g = Graph("torch")
        self.vals: dict = {}  # FX node -> IR value (or tuple) in the open partition
        self.ins: dict = {}  # FX node -> IR input of the open partition

    def _arg(self, a: Any, env: dict) -> Any:
        import torch

        if a in self.vals:
            return self.vals[a]
        v = env[a]
        if isinstance(v, torch.Tensor):
            if a not in self.ins:
                self.ins[a] = self.g.input(tuple(v.shape), str(v.dtype).removeprefix("torch."))
            return self.ins[a]
        if isinstance(v, list | tuple) and any(isinstance(t, torch.Tensor) for t in v):
            raise NotImplementedError("a tensor list made outside the partition")
        return v

    def _run(self, seg: Any, env: dict, args: Any = None) -> None:
        self.prog.append(seg)
        seg(env, args)

    def _eager(self, n: Any, env: dict) -> None:
        if hasattr(n.target, "_schema"):  # an aten op, not Python on ints or tuples
            _EAGER[n.target.__name__] += 1
        self._run(_eager(n), env)

    def build(self, args: Any, env: dict) -> list:
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                self._run(_input(n), env, args)
            elif n.op == "call_function" and not self._translate(n, env):
                self._close(env)
                self._eager(n, env)
            elif n.op == "output":
                self._close(env)
        return self.prog

    def _translate(self, n: Any, env: dict) -> bool:
        import torch.fx

        if n.target is operator.getitem and n.args[0] in self.vals:
            self.vals[n] = self.vals[n.args[0]][n.args[1]]
            return True
        try:
            args = torch.fx.node.map_arg(n.args, lambda a: self._arg(a, env))
            kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: self._arg(a, env))
            self.vals[n] = _fx.translate(self.g, n.target, list(args), dict(kwargs))
        except Exception:  # no translation (op, dtype, arguments): an eager torch call
            return False
        return True

    def _close(self, env: dict) -> None:
        """Compile and run the open partition; export its values that later nodes read."""
        from ...graph import VIEW_OPS
        from ...graph import compile as compile_graph

        if not self.vals:
            return

        outs, nones, values, after = [], [], [], []  # after: torch views/aliases of the results
        src = {w: n for n, w in reversed(self.ins.items())}  # IR value -> FX node holding it
        ready = set(self.ins)  # FX nodes whose tensors exist once the plan has run
        for node, v in self.vals.items():
            if all(u in self.vals for u in node.users):
                continue
            for i, x in (enumerate(v) if isinstance(v, tuple) else [(None, v)]):
                if i is None and x is None:
                    nones.append(node)
                elif i is None and x in src:  # the same tensor as an input or another result
                    after.append(_alias(node, src[x]))
                elif i is None and x.producer.op in VIEW_OPS and set(node.all_input_nodes) <= ready:
                    after.append(_eager(node))  # torch's view of a tensor there is: no copy
                elif x is not None:
                    outs.append((node, i))
                    values.append(x)
                    if i is None:
                        src.setdefault(x, node)
                ready.add(node)
        self.g.output(*values)
        try:
            cp = compile_graph(self.g, self.dev)
        except Exception:  # e.g. a kernel the plugin lacks for a dtype: the nodes run eagerly
            nodes = list(self.vals)
            self._open()
            for n in nodes:
                self._eager(n, env)
            return
        for _, op in cp.steps:
            _STATS[f"op:{op}"] += 1
        _STATS["partitions"] += 1
        self._run(_Part(cp, list(self.ins), outs, nones, self.device), env)
        for seg in after:
            self._run(seg, env)
        self._open()
