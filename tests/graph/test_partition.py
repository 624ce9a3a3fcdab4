"""unidev.graph.partition with a framework-free frontend (numpy values, tiny nodes)."""

from __future__ import annotations

import gc

import numpy as np

from unidev.core.array import DeviceArray
from unidev.graph.partition import Owned, Part, Partitioner, Programs, Stats


class Node:
    def __init__(self, op: str, *args: Node) -> None:
        self.op, self.args, self.users = op, args, []
        for a in args:
            a.users.append(self)


class NumpyPart(Part):
    def __call__(self, env: dict, args) -> None:
        ins = [DeviceArray.from_numpy(env[n], "x86") for n in self.ins]
        self.export(env, [a.numpy() for a in self.cp.run(ins)])


class Frontend(Partitioner):
    """'add'/'mul' translate; 'sin' runs eagerly (numpy)."""

    def translate(self, n: Node, env: dict) -> bool:
        if n.op == "sin":
            return False
        self.vals[n] = self.g.call(n.op, *[self.arg(a, env) for a in n.args])
        return True

    def eager(self, n: Node):
        return lambda env, args: env.__setitem__(n, np.sin(env[n.args[0]]))

    def part(self, cp, ins, outs, nones):
        return NumpyPart(cp, ins, outs, nones)

    def spec(self, v):
        return (v.shape, str(v.dtype)) if isinstance(v, np.ndarray) else None

    def op_name(self, n: Node) -> str:
        return n.op

    def users(self, n: Node):
        return n.users

    def inputs(self, n: Node):
        return n.args


def _graph():
    x, y = Node("x"), Node("y")
    a = Node("add", x, y)
    s = Node("sin", a)
    m = Node("mul", s, a)
    out = Node("out", m)
    kinds = [("input", x), ("input", y), ("call", a), ("call", s), ("call", m), ("output", out)]
    return kinds, m


def test_partitions_around_eager_nodes_and_replays():
    kinds, m = _graph()
    stats = Stats()
    programs = Programs(lambda args, env: Frontend("x86", stats).build(kinds, iter(args), env),
                        stats)
    rng = np.random.default_rng(0)
    for _ in range(2):  # built on the first call, replayed on the second
        x, y = (rng.standard_normal(5).astype(np.float32) for _ in range(2))
        env: dict = {}
        programs.run(("f32", 5), [x, y], env)
        np.testing.assert_allclose(env[m], np.sin(x + y) * (x + y), rtol=1e-6)
    assert stats.counts["programs"] == 1
    assert stats.counts["partitions"] == 2  # add | sin (eager) | mul
    assert stats.eager == {"sin": 1}
    assert stats.counts["op:add"] == 1 and stats.counts["op:mul"] == 1


def test_owned_frees_only_at_release():
    class Buf:
        handle = 1234

    owned, buf = Owned(), Buf()
    keep = owned.keeper(buf)
    assert 1234 in owned
    del buf, keep
    gc.collect()
    assert 1234 in owned  # the dropped owner's buffer waits in the grave
    owned.release()
    gc.collect()
    assert 1234 not in owned
