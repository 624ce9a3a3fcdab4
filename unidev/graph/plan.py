"""Plans: a lowered, shape-specialized graph: kernel per step, temps in an arena; file format."""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import dtypes
from ..core.errors import InvalidArgumentError

BUFFER_KINDS = ("input", "output", "const", "temp")


@dataclass
class Buffer:
    """One memory region a step reads or writes; temps live in the arena at `offset`."""

    index: int
    kind: str
    slot: int
    nbytes: int
    offset: int = 0


@dataclass
class TensorRef:
    """A strided view (strides and offset in elements) of one buffer."""

    buffer: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0


@dataclass
class Step:
    """One kernel call: op, kernel dtype, views, attributes (name, type, value) in schema order."""

    op: str
    dtype: str
    inputs: list[TensorRef | None]
    outputs: list[TensorRef]
    attrs: list[tuple[str, str, Any]] = field(default_factory=list)
    node: str = ""


@dataclass
class Plan:
    """Steps over buffers; the arena holds every temp; consts are uploaded once."""

    steps: list[Step]
    buffers: list[Buffer]
    arena_bytes: int
    consts: list[np.ndarray]
    inputs: list[TensorRef]
    outputs: list[TensorRef]
    key: str = ""
    plugin: str = ""
    meta: dict = field(default_factory=dict)


# ---- file format (read by unidev/graph/native/ud_plan.c too; see ud_plan.h) -------------------

MAGIC = b"UDPLAN\r\n"
VERSION = 1
HEADER = struct.Struct("<8sIIQQIIQ")  # magic, version, flags, meta, data, crc, byte order, 0
ALIGN = 64
_KINDS = {k: i for i, k in enumerate(BUFFER_KINDS)}
_ATTR_TYPES = ("int", "float", "bool", "str", "ints")  # UD_AttrType order


class PlanFileError(InvalidArgumentError):
    """A file that is not a plan this unidev can read (foreign, corrupt, truncated, newer)."""


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def pack(self, fmt: str, *values) -> None:
        self.parts.append(struct.pack("<" + fmt, *values))

    def str(self, s: str) -> None:
        b = s.encode()
        self.pack("I", len(b))
        self.parts.append(b)

    def ref(self, t: TensorRef) -> None:
        self.pack("I", t.buffer)
        self.str(t.dtype)
        n = len(t.shape)
        self.pack(f"I{2 * n + 1}q", n, *t.shape, *t.strides, t.offset)


def to_bytes(plan: Plan) -> bytes:
    """The plan as one file: header, metadata, constants (64-byte aligned)."""
    w = _Writer()
    w.str(plan.key)
    w.str(plan.plugin)
    w.str(json.dumps(plan.meta, sort_keys=True, default=str))
    w.pack("Q", plan.arena_bytes)
    data = bytearray()
    w.pack("I", len(plan.consts))
    for c in plan.consts:
        c = np.ascontiguousarray(c)
        data += bytes(-len(data) % ALIGN)
        w.str(dtypes.from_numpy(c.dtype))
        w.pack(f"I{c.ndim}qQQ", c.ndim, *c.shape, len(data), c.nbytes)
        data += c.tobytes()
    w.pack("I", len(plan.buffers))
    for b in plan.buffers:
        if b.kind not in _KINDS:
            raise InvalidArgumentError(f"buffer {b.index}: kind {b.kind!r}, expected one of "
                                       f"{BUFFER_KINDS}")
        w.pack("BqQQ", _KINDS[b.kind], b.slot, b.nbytes, b.offset)
    for refs in (plan.inputs, plan.outputs):
        w.pack("I", len(refs))
        for t in refs:
            w.ref(t)
    w.pack("I", len(plan.steps))
    for s in plan.steps:
        w.str(s.op)
        w.str(s.dtype)
        w.str(s.node)
        w.pack("I", len(s.inputs))
        for t in s.inputs:
            w.pack("B", t is not None)
            if t is not None:
                w.ref(t)
        w.pack("I", len(s.outputs))
        for t in s.outputs:
            w.ref(t)
        w.pack("I", len(s.attrs))
        for name, kind, value in s.attrs:
            if kind not in _ATTR_TYPES:
                raise InvalidArgumentError(f"node '{s.node}' ({s.op}): attribute '{name}' has "
                                           f"type {kind!r}, expected one of {_ATTR_TYPES}")
            w.str(name)
            w.pack("B", _ATTR_TYPES.index(kind))
            if kind == "int":
                w.pack("q", int(value))
            elif kind == "float":
                w.pack("d", float(value))
            elif kind == "bool":
                w.pack("B", bool(value))
            elif kind == "str":
                w.str(value)
            else:
                w.pack(f"I{len(value)}q", len(value), *(int(v) for v in value))
    meta = b"".join(w.parts)
    body = meta + bytes(data)
    header = HEADER.pack(MAGIC, VERSION, 0, len(meta), len(data), zlib.crc32(body), 0x01020304, 0)
    return header + body


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise PlanFileError("plan file: metadata truncated")
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def u8(self) -> int:
        return self.take("<B")[0]

    def u32(self) -> int:
        return self.take("<I")[0]

    def u64(self) -> int:
        return self.take("<Q")[0]

    def i64(self) -> int:
        return self.take("<q")[0]

    def i64s(self, n: int) -> tuple[int, ...]:
        if n > len(self.data):
            raise PlanFileError("plan file: metadata truncated")
        return self.take(f"<{n}q")

    def str(self) -> str:
        n = self.u32()
        if self.pos + n > len(self.data):
            raise PlanFileError("plan file: metadata truncated")
        s = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return s.decode()

    def ref(self) -> TensorRef:
        buffer, dtype, ndim = self.u32(), self.str(), self.u32()
        return TensorRef(buffer, dtype, self.i64s(ndim), self.i64s(ndim), self.i64())


def from_bytes(data: bytes) -> Plan:
    """Parse a plan file (checked like the native runtime: magic, version, sizes, CRC-32)."""
    if len(data) < HEADER.size or data[:8] != MAGIC:
        raise PlanFileError("not a unidev plan file (no UDPLAN header)")
    _, version, flags, meta_n, data_n, crc, order, _ = HEADER.unpack_from(data)
    if order != 0x01020304:
        raise PlanFileError("plan file of another byte order")
    if version != VERSION or flags:
        raise PlanFileError(f"plan file version {version} (flags {flags}); this unidev reads "
                            f"version {VERSION}")
    if HEADER.size + meta_n + data_n != len(data):
        raise PlanFileError(f"plan file truncated or padded: {len(data)} bytes, the header says "
                            f"{HEADER.size + meta_n + data_n}")
    body = memoryview(data)[HEADER.size:]
    if zlib.crc32(body) != crc:
        raise PlanFileError(f"plan file corrupt: CRC-32 {zlib.crc32(body):08x}, the header says "
                            f"{crc:08x}")
    r = _Reader(body[:meta_n])
    try:
        key, plugin, meta = r.str(), r.str(), json.loads(r.str())
        arena = r.u64()
        consts = []
        for _ in range(r.u32()):
            dtype, ndim = r.str(), r.u32()
            shape = r.i64s(ndim)
            off, n = r.u64(), r.u64()
            if off + n > data_n:
                raise PlanFileError("plan file: a constant lies outside the data section")
            raw = body[meta_n + off:meta_n + off + n]
            consts.append(np.frombuffer(raw, dtypes.to_numpy(dtype)).reshape(shape).copy())
        buffers = []
        for i in range(r.u32()):
            kind = r.u8()
            if kind >= len(BUFFER_KINDS):
                raise PlanFileError(f"plan file: buffer {i} has kind {kind}")
            buffers.append(Buffer(i, BUFFER_KINDS[kind], r.i64(), r.u64(), r.u64()))
        inputs = [r.ref() for _ in range(r.u32())]
        outputs = [r.ref() for _ in range(r.u32())]
        steps = []
        for _ in range(r.u32()):
            step = Step(r.str(), r.str(), [], [], [], "")
            step.node = r.str()
            step.inputs = [r.ref() if r.u8() else None for _ in range(r.u32())]
            step.outputs = [r.ref() for _ in range(r.u32())]
            for _ in range(r.u32()):
                name, kind = r.str(), r.u8()
                if kind >= len(_ATTR_TYPES):
                    raise PlanFileError(f"plan file: attribute {name!r} has type {kind}")
                kind = _ATTR_TYPES[kind]
                value = (r.i64() if kind == "int" else r.take("<d")[0] if kind == "float"
                         else bool(r.u8()) if kind == "bool" else r.str() if kind == "str"
                         else r.i64s(r.u32()))
                step.attrs.append((name, kind, value))
            steps.append(step)
    except (UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        if isinstance(exc, PlanFileError):
            raise
        raise PlanFileError(f"plan file: malformed metadata ({exc})") from None
    if r.pos != meta_n:
        raise PlanFileError(f"plan file: {meta_n - r.pos} bytes of metadata left over")
    return Plan(steps, buffers, arena, consts, inputs, outputs, key, plugin, meta)


def save(plan: Plan, path: str | os.PathLike) -> None:
    """Write the plan file (atomically: a reader never sees half a file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(to_bytes(plan))
    os.replace(tmp, path)


def load(path: str | os.PathLike) -> Plan:
    """Read a plan file; PlanFileError when it is not one this unidev can run."""
    return from_bytes(Path(path).read_bytes())
