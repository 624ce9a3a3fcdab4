"""Framework-neutral partitioning of a frontend's graph into unidev plans and eager nodes."""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..algorithms.spec import AlgorithmError
from .cache import compile as compile_graph
from .ir import VIEW_OPS, Graph

__all__ = ["Stats", "Programs", "Owned", "Part", "Partitioner", "input_segment", "alias_segment"]

# A program is a list of segments: fn(env, args) sets env[frontend node] for the nodes it runs
# (args: an iterator over the call's arguments, consumed by the input segments in order).
Segment = Callable[[dict, Iterator], None]


def input_segment(n: Any) -> Segment:
    return lambda env, args: env.__setitem__(n, next(args))


def alias_segment(n: Any, source: Any) -> Segment:
    return lambda env, args: env.__setitem__(n, env[source])


class Stats:
    """A frontend's counters: eager (op name -> nodes kept as eager calls, per program built) and
    counts (programs, partitions, eager_graphs, 'op:<unidev op>' plan steps, binding events)."""

    def __init__(self) -> None:
        self.eager: Counter = Counter()
        self.counts: Counter = Counter()

    def reset(self) -> None:
        self.eager.clear()
        self.counts.clear()


class Programs:
    """One frontend graph's programs by input signature: the first call with a signature builds
    its program (running it as it goes: build(args, env) -> segments), later calls replay it."""

    def __init__(self, build: Callable[[list, dict], list], stats: Stats) -> None:
        self.build, self.stats = build, stats
        self.programs: dict[Any, list] = {}

    def run(self, key: Any, args: list, env: dict) -> None:
        if key not in self.programs:
            self.stats.counts["programs"] += 1
            self.programs[key] = self.build(args, env)
            return
        it = iter(args)
        for seg in self.programs[key]:
            seg(env, it)


class Owned:
    """The buffers a frontend allocated through unidev._C (plan outputs, staging), by handle:
    the only memory a plan binds (the binding refuses handles it did not allocate). An entry
    lives as long as the owner that keeper() made for it (the framework tensor's DLPack owner);
    the framework's stream may still read a dropped tensor, so its buffer is freed only at the
    next release() (called right after a device synchronization)."""

    def __init__(self) -> None:
        self.by_handle: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self.grave: list = []

    def __contains__(self, handle: int) -> bool:
        return handle in self.by_handle

    def keeper(self, buf: Any) -> _Keep:
        self.by_handle[buf.handle] = buf
        return _Keep(buf, self.grave)

    def release(self) -> None:
        self.grave.clear()


class _Keep:
    __slots__ = ("buf", "grave")

    def __init__(self, buf: Any, grave: list) -> None:
        self.buf, self.grave = buf, grave

    def __del__(self) -> None:
        self.grave.append(self.buf)


class Part:
    """A compiled partition: plan inputs are frontend nodes' values, outputs (node, index|None)
    (index: the position in a tuple result), nones: nodes whose result is None."""

    def __init__(self, cp: Any, ins: list, outs: list, nones: list) -> None:
        self.cp, self.ins, self.outs, self.nones = cp, ins, outs, nones

    def export(self, env: dict, results: list) -> None:
        """Set env for the partition's results (the frontend's tensors over the plan outputs)."""
        for (node, i), t in zip(self.outs, results, strict=True):
            if i is None:
                env[node] = t
            else:  # a tuple result: its tensors the later nodes read, None elsewhere
                env.setdefault(node, [None] * len(self.cp.native.outputs))[i] = t
        for node in self.nones:
            env[node] = None


class Partitioner:
    """Walks a frontend graph once with real values and builds its program as it runs it: nodes
    the frontend translates gather into an open IR graph; a node it cannot translate closes the
    partition (compiled into one plan, run) and runs as an eager call.

    The frontend implements: translate(n, env) -> bool (add n's IR to self.g/self.vals through
    arg()), eager(n) -> Segment, view(n) -> Segment (the framework's view of values that exist),
    part(cp, ins, outs, nones) -> Segment (the bound plan), spec(v) -> (shape, dtype) of a tensor
    value or None, op_name(n) -> the name eager nodes are counted under or None, users(n) and
    inputs(n) (the nodes reading n, the nodes n reads)."""

    frontend = "graph"  # the IR graphs' frontend name

    def __init__(self, device: str, stats: Stats, algorithms: Any = None) -> None:
        self.device, self.stats, self.algorithms = device, stats, algorithms
        self.prog: list = []
        self._open()

    def _open(self) -> None:
        self.g = Graph(self.frontend)
        self.vals: dict = {}  # frontend node -> IR value (or tuple) in the open partition
        self.ins: dict = {}  # frontend node -> IR input of the open partition

    def arg(self, a: Any, env: dict) -> Any:
        """The IR value for node `a`'s value in the open partition (a new input for a tensor made
        outside it), or the value itself when it is not a tensor."""
        if a in self.vals:
            return self.vals[a]
        v = env[a]
        spec = self.spec(v)
        if spec is not None:
            if a not in self.ins:
                self.ins[a] = self.g.input(*spec)
            return self.ins[a]
        if isinstance(v, list | tuple) and any(self.spec(t) is not None for t in v):
            raise NotImplementedError("a tensor list made outside the partition")
        return v

    def _run(self, seg: Segment, env: dict, args: Any = None) -> None:
        self.prog.append(seg)
        seg(env, args)

    def _eager(self, n: Any, env: dict) -> None:
        name = self.op_name(n)
        if name is not None:
            self.stats.eager[name] += 1
        self._run(self.eager(n), env)

    def build(self, nodes: Iterable[tuple[str, Any]], args: Iterator, env: dict) -> list:
        """nodes: (kind, node) in order, kind 'input' (takes the next argument), 'call' or
        'output'; returns the program."""
        for kind, n in nodes:
            if kind == "input":
                self._run(input_segment(n), env, args)
            elif kind == "call" and not self.translate(n, env):
                self._close(env)
                self._eager(n, env)
            elif kind == "output":
                self._close(env)
        return self.prog

    def _close(self, env: dict) -> None:
        """Compile and run the open partition; export its values that later nodes read."""
        if not self.vals:
            return
        outs, nones, values, after = [], [], [], []  # after: views/aliases of the results
        src = {w: n for n, w in reversed(self.ins.items())}  # IR value -> node holding it
        ready = set(self.ins)  # nodes whose values exist once the plan has run
        for node, v in self.vals.items():
            if all(u in self.vals for u in self.users(node)):
                continue
            for i, x in (enumerate(v) if isinstance(v, tuple) else [(None, v)]):
                if i is None and x is None:
                    nones.append(node)
                elif i is None and x in src:  # the same tensor as an input or another result
                    after.append(alias_segment(node, src[x]))
                elif i is None and x.producer.op in VIEW_OPS and set(self.inputs(node)) <= ready:
                    after.append(self.view(node))  # the framework's view: no copy
                elif x is not None:
                    outs.append((node, i))
                    values.append(x)
                    if i is None:
                        src.setdefault(x, node)
                ready.add(node)
        self.g.output(*values)
        try:
            cp = compile_graph(self.g, self.device, algorithms=self.algorithms)
        except AlgorithmError:  # the user's selector: never a silent fallback
            raise
        except Exception:  # e.g. a kernel the plugin lacks for a dtype: the nodes run eagerly
            nodes = list(self.vals)
            self._open()
            for n in nodes:
                self._eager(n, env)
            return
        for _, op in cp.steps:
            self.stats.counts[f"op:{op}"] += 1
        self.stats.counts["partitions"] += 1
        self._run(self.part(cp, list(self.ins), outs, nones), env)
        for seg in after:
            self._run(seg, env)
        self._open()

    # the frontend's side (see the class docstring)
    def translate(self, n: Any, env: dict) -> bool:
        raise NotImplementedError

    def eager(self, n: Any) -> Segment:
        raise NotImplementedError

    def view(self, n: Any) -> Segment:
        return self.eager(n)

    def part(self, cp: Any, ins: list, outs: list, nones: list) -> Segment:
        raise NotImplementedError

    def spec(self, v: Any) -> tuple | None:
        raise NotImplementedError

    def op_name(self, n: Any) -> str | None:
        return None

    def users(self, n: Any) -> Iterable:
        raise NotImplementedError

    def inputs(self, n: Any) -> Iterable:
        raise NotImplementedError
