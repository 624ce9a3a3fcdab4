"""Hand-built plans for the executor, cache and deploy tests (independent of the lowering)."""

from __future__ import annotations

import math

import numpy as np

from unidev.contract import dtypes, opset
from unidev.core.ops import normalize_attrs
from unidev.graph.plan import Buffer, Plan, Step, TensorRef


def contiguous(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


class Builder:
    """Buffers, steps and consts, temps packed into the arena at 64-byte offsets."""

    def __init__(self, key: str = "test", plugin: str = "x86") -> None:
        self.key, self.plugin = key, plugin
        self.buffers: list[Buffer] = []
        self.steps: list[Step] = []
        self.consts: list[np.ndarray] = []
        self.inputs: list[TensorRef] = []
        self.outputs: list[TensorRef] = []
        self.arena = 0

    def _buffer(self, kind: str, slot: int, shape, dtype: str, offset: int = 0) -> TensorRef:
        nbytes = math.prod(shape) * dtypes.itemsize(dtype)
        self.buffers.append(Buffer(len(self.buffers), kind, slot, nbytes, offset))
        return TensorRef(len(self.buffers) - 1, dtype, tuple(shape), contiguous(shape), 0)

    def input(self, shape, dtype: str = "float32") -> TensorRef:
        self.inputs.append(self._buffer("input", len(self.inputs), shape, dtype))
        return self.inputs[-1]

    def output(self, shape, dtype: str = "float32") -> TensorRef:
        self.outputs.append(self._buffer("output", len(self.outputs), shape, dtype))
        return self.outputs[-1]

    def const(self, array) -> TensorRef:
        array = np.ascontiguousarray(array)
        self.consts.append(array)
        return self._buffer("const", len(self.consts) - 1, array.shape,
                            dtypes.from_numpy(array.dtype))

    def temp(self, shape, dtype: str = "float32") -> TensorRef:
        ref = self._buffer("temp", -1, shape, dtype, self.arena)
        self.arena += -(-self.buffers[-1].nbytes // 64) * 64
        return ref

    def step(self, op: str, inputs: list, outputs: list, node: str | None = None,
             dtype: str | None = None, **attrs) -> None:
        schema = opset.get(op)
        full = normalize_attrs(schema, attrs)
        first = next((t for t in inputs if t is not None), None) or outputs[0]
        self.steps.append(Step(op, dtype or first.dtype, list(inputs), list(outputs),
                               [(a.name, a.type, full[a.name]) for a in schema.attrs],
                               node or f"{op}{len(self.steps)}"))

    def plan(self) -> Plan:
        return Plan(self.steps, self.buffers, self.arena, self.consts, self.inputs, self.outputs,
                    self.key, self.plugin, {"builder": "tests"})


def broadcast(ref: TensorRef, shape) -> TensorRef:
    """`ref` viewed with stride 0 on its leading and size-1 dims, as a broadcast op's input."""
    pad = len(shape) - len(ref.shape)
    dims, strides = (1,) * pad + tuple(ref.shape), (0,) * pad + tuple(ref.strides)
    return TensorRef(ref.buffer, ref.dtype, tuple(shape),
                     tuple(0 if d == 1 else s for d, s in zip(dims, strides, strict=True)),
                     ref.offset)


def chain_plan(shape=(4, 5), key: str = "chain") -> tuple[Plan, callable]:
    """relu((x + y) * c) - x with a constant c: four steps, two temps. Returns (plan, reference)."""
    rng = np.random.default_rng(0)
    c = rng.standard_normal(shape).astype(np.float32)
    b = Builder(key)
    x, y = b.input(shape), b.input(shape)
    cc = b.const(c)
    t0, t1, t2 = b.temp(shape), b.temp(shape), b.temp(shape)
    out = b.output(shape)
    b.step("add", [x, y], [t0], "sum")
    b.step("mul", [t0, cc], [t1], "scale")
    b.step("relu", [t1], [t2], "act")
    b.step("sub", [t2, x], [out], "res")
    return b.plan(), lambda xv, yv: np.maximum((xv + yv) * c, 0) - xv


def mlp_plan(batch=3, sizes=(8, 16, 4), seed=0, key: str = "mlp"):
    """gemm + bias (broadcast) + relu per layer; last layer without relu. (plan, weights)."""
    rng = np.random.default_rng(seed)
    b = Builder(key)
    h = b.input((batch, sizes[0]))
    weights = []
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        weights.append((w, bias))
        wr, br = b.const(w), b.const(bias)
        last = i == len(sizes) - 2
        mm = b.temp((batch, n))
        b.step("matmul", [h, wr], [mm], f"fc{i}.matmul")
        y = b.output((batch, n)) if last else b.temp((batch, n))
        if last:
            b.step("add", [mm, broadcast(br, (batch, n))], [y], f"fc{i}.bias")
        else:
            z = b.temp((batch, n))
            b.step("add", [mm, broadcast(br, (batch, n))], [z], f"fc{i}.bias")
            b.step("relu", [z], [y], f"fc{i}.relu")
        h = y
    return b.plan(), weights


def mlp_reference(x: np.ndarray, weights) -> np.ndarray:
    for i, (w, bias) in enumerate(weights):
        x = x @ w + bias
        if i < len(weights) - 1:
            x = np.maximum(x, 0)
    return x
