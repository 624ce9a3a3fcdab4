"""Compiled plans: a Plan prepared on a device by the native runtime; no Python per node."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .. import _C
from ..core.array import Buffer, DeviceArray
from ..core.device import Device
from ..core.device import device as parse_device
from ..core.errors import InvalidArgumentError
from . import plan as planfile
from .plan import Plan

__all__ = ["CompiledPlan", "load"]


def _same_strides(a: DeviceArray, strides) -> bool:
    return all(d == 1 or s == t for d, s, t in zip(a.shape, a.strides, strides, strict=True))


def _dense(shape, strides) -> bool:
    acc = 1
    for d, s in zip(reversed(shape), reversed(strides), strict=True):
        if d != 1 and s != acc:
            return False
        acc *= max(d, 1)
    return True


class CompiledPlan:
    """A plan on one device: kernels looked up, arena and constants allocated and uploaded once.

    run() binds inputs/outputs per call and enqueues every step natively (unidev._C.Plan over
    unidev/graph/native/ud_plan.c); like a single op it returns before the work is done.
    """

    def __init__(self, plan: Plan, device: str | Device, data: bytes | None = None) -> None:
        self.plan = plan
        self.device = parse_device(device)
        # the bytes are not kept: plan.consts already hold the weights on the host
        self.native = _C.Plan(self.device.library, self.device.index,
                              planfile.to_bytes(plan) if data is None else data)
        self._outputs = self.native.outputs  # (dtype, shape, strides, nbytes) per output
        self._inputs = self.native.inputs

    def __repr__(self) -> str:
        return (f"CompiledPlan({self.plan.key[:12] or '?'}, {len(self.plan.steps)} steps, "
                f"{self.device}, arena {self.plan.arena_bytes} bytes)")

    @property
    def data(self) -> bytes:
        """The plan file's bytes (deterministic: the same plan gives the same bytes)."""
        return planfile.to_bytes(self.plan)

    @property
    def steps(self) -> list[tuple[str, str]]:
        """(node, op) per step."""
        return self.native.steps

    @property
    def num_compiled(self) -> int:
        """Steps running a kernel_compile specialization."""
        return self.native.num_compiled

    def _check(self, arrays: Sequence, specs: list, what: str) -> list[DeviceArray]:
        if not isinstance(arrays, list | tuple):
            raise InvalidArgumentError(f"{self!r}.run: {what} must be a list of DeviceArray, got "
                                       f"{type(arrays).__name__}")
        if len(arrays) != len(specs):
            raise InvalidArgumentError(f"{self!r}.run: takes {len(specs)} {what}, got "
                                       f"{len(arrays)}")
        for k, a in enumerate(arrays):
            if not isinstance(a, DeviceArray):
                raise InvalidArgumentError(f"{self!r}.run: {what}[{k}] is a "
                                           f"{type(a).__name__}, expected a DeviceArray")
            if a.device != self.device:
                raise InvalidArgumentError(f"{self!r}.run: {what}[{k}] is on {a.device}, the "
                                           f"plan on {self.device}")
        if what == "inputs":  # another layout of the right shape: a contiguous copy, if wanted
            arrays = [a.contiguous() if a.shape == tuple(shape) and _dense(shape, strides)
                      and not _same_strides(a, strides) else a
                      for a, (_, shape, strides, _) in zip(arrays, specs, strict=True)]
        return list(arrays)

    def new_outputs(self, stream: int = 0) -> list[DeviceArray]:
        """Fresh arrays with the plan's output shapes, dtypes and strides."""
        return [DeviceArray._trusted(Buffer(self.device, nbytes, stream), tuple(shape), dtype,
                                     tuple(strides), 0)
                for dtype, shape, strides, nbytes in self._outputs]

    def run(self, inputs: Sequence[DeviceArray], outputs: Sequence[DeviceArray] | None = None,
            stream: int = 0) -> list[DeviceArray]:
        """Run every step on `stream`; outputs are allocated when not given. Shapes and dtypes
        must be the plan's (checked natively, naming the input); an input view in another layout
        is copied to the contiguous one the plan expects, outputs must have the plan's strides."""
        ins = self._check(inputs, self._inputs, "inputs")  # copies live until the run is over
        outputs = self.new_outputs(stream) if outputs is None else list(outputs)
        self._check(outputs, self._outputs, "outputs")
        self.native.run([a.descriptor() for a in ins], [a.descriptor() for a in outputs], stream)
        return outputs

    def run_descriptors(self, in_descs: Sequence[tuple], out_descs: Sequence[tuple],
                        stream: int = 0) -> None:
        """run() on raw (handle, byte_offset, dtype, shape, strides) descriptors of allocations
        made through this process's unidev._C (checked like a kernel call's). Code holding its
        own UD_Api and tensors (a framework adapter) links ud_plan.c and calls ud_plan_run."""
        self.native.run(list(in_descs), list(out_descs), stream)

    def profile(self, inputs: Sequence[DeviceArray], outputs: Sequence[DeviceArray] | None = None,
                stream: int = 0) -> list[tuple[str, str, float]]:
        """One run with an event between steps: (node, op, milliseconds) per step."""
        self.native.set_profiling(True)
        try:
            self.run(inputs, outputs, stream)
            times = self.native.step_times()
        finally:
            self.native.set_profiling(False)
        return [(node, op, ms) for (node, op), ms in zip(self.steps, times, strict=True)]

    def save(self, path: str | os.PathLike) -> None:
        """Write the plan file (runs again with unidev.graph.load or the C runtime)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(planfile.to_bytes(self.plan))
        os.replace(tmp, path)


def load(path: str | os.PathLike, device: str | Device) -> CompiledPlan:
    """A saved plan, prepared on `device`; a foreign or corrupt file raises PlanFileError."""
    data = Path(path).read_bytes()
    try:
        plan = planfile.from_bytes(data)
    except planfile.PlanFileError as exc:
        raise planfile.PlanFileError(f"{path}: {exc}") from None
    dev = parse_device(device)
    if plan.plugin and plan.plugin != dev.plugin:
        raise InvalidArgumentError(f"{path}: the plan was compiled for plugin '{plan.plugin}', "
                                   f"not for {dev}; compile the graph for that device")
    return CompiledPlan(plan, dev, data)
