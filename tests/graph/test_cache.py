"""unidev.graph.compile and its plan cache: memory hits/misses, plan files on disk, broken ones."""

from __future__ import annotations

import os

import numpy as np
import pytest

from unidev.core.array import DeviceArray
from unidev.core.errors import InvalidArgumentError
from unidev.graph import Graph, cache

rng = np.random.default_rng(3)


def mlp_graph(seed: int = 0) -> tuple[Graph, callable]:
    r = np.random.default_rng(seed)
    w1, b1 = r.standard_normal((6, 10)).astype(np.float32), r.standard_normal(10).astype(np.float32)
    w2 = r.standard_normal((10, 3)).astype(np.float32)
    g = Graph("mlp")
    x = g.input(("N", 6))
    h = g.call("relu", g.call("add", g.call("matmul", x, g.const(w1)), g.const(b1)))
    g.output(g.call("matmul", h, g.const(w2)))
    return g, lambda xv: np.maximum(xv @ w1 + b1, 0) @ w2


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("UNIDEV_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear()
    yield
    cache.clear()


def run(cp, xv):
    return cp.run([DeviceArray.from_numpy(xv, "x86")])[0].numpy()


def test_memory_hits_and_misses():
    g, ref = mlp_graph()
    a = cache.compile(g, "x86", dims={"N": 4})
    assert cache.compile(g, "x86", dims={"N": 4}) is a
    b = cache.compile(g, "x86", dims={"N": 2})  # another shape: another plan
    assert b is not a
    assert cache.compile(mlp_graph(seed=1)[0], "x86", dims={"N": 4}) is not a  # other weights
    assert cache.compile(g, "x86", dims={"N": 4}, cache=False) is not a
    assert cache.stats() == {"hits": 1, "misses": 4, "disk_hits": 0, "disk_writes": 0,
                             "disk_rebuilt": 0, "entries": 3}
    xv = rng.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(run(b, xv), ref(xv), rtol=1e-4, atol=1e-5)
    with pytest.raises(InvalidArgumentError, match=r"input 'in0' has symbolic shape \('N', 6\)"):
        cache.compile(g, "x86")


def test_disk_entries_survive_and_broken_ones_are_rebuilt():
    g, ref = mlp_graph()
    first = cache.compile(g, "x86", dims={"N": 3}, persist=True)
    assert cache.stats()["disk_writes"] == 1
    cache.clear()  # as a new process would start
    again = cache.compile(g, "x86", dims={"N": 3}, persist=True)
    assert again is not first and cache.stats()["disk_hits"] == 1
    xv = rng.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(run(again, xv), ref(xv), rtol=1e-4, atol=1e-5)
    (entry,) = (cache.disk.cache_root() / cache.FOLDER).glob("*.udplan")
    key = entry.stem
    good = entry.read_bytes()
    other = cache.compile(g, "x86", dims={"N": 5}, persist=True).data
    for broken in (good[:-7], b"garbage", other):  # truncated, foreign, another key's plan
        entry.write_bytes(broken)
        os.chmod(entry, 0o600)
        cache.clear()
        with pytest.warns(RuntimeWarning, match="not loading the cached plan.*rebuilding"):
            cp = cache.compile(g, "x86", dims={"N": 3}, persist=True)
        assert cache.stats()["disk_rebuilt"] == 1 and cache.stats()["disk_writes"] == 1
        np.testing.assert_allclose(run(cp, xv), ref(xv), rtol=1e-4, atol=1e-5)
        assert entry.read_bytes() == good and entry.stem == key  # rewritten
    os.chmod(entry, 0o666)  # writable by others: never read
    cache.clear()
    with pytest.warns(RuntimeWarning, match="writable by others"):
        cache.compile(g, "x86", dims={"N": 3}, persist=True)
