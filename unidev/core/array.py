"""DeviceArray: a strided view of plugin memory, with numpy and DLPack interchange."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from . import dtypes
from .device import Device
from .device import device as parse_device
from .errors import InvalidArgumentError, UnknownHandleError

__all__ = ["Buffer", "DeviceArray"]


class Buffer:
    """One allocation on a device; freed when the last view of it is garbage-collected."""

    __slots__ = ("device", "lib", "handle", "nbytes", "_freed", "__weakref__")

    def __init__(self, dev: Device, nbytes: int) -> None:
        if nbytes < 0:
            raise InvalidArgumentError(f"malloc: size {nbytes}, expected >= 0")
        self.device = dev
        self.lib = dev.library
        self.nbytes = int(nbytes)
        self._freed = False
        self.handle = self.lib.malloc(dev.index, self.nbytes)

    def free(self) -> None:
        """Release the memory now; later use of any view raises UnknownHandleError."""
        if not self._freed:
            self._freed = True
            self.lib.free(self.device.index, self.handle)

    @property
    def freed(self) -> bool:
        return self._freed

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # interpreter shutdown or a device already gone
            pass


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


class DeviceArray:
    """An n-d view (shape, strides in elements, offset in elements, dtype) of a Buffer."""

    __slots__ = ("buffer", "shape", "strides", "offset", "dtype")

    def __init__(self, buffer: Buffer, shape: Sequence[int], dtype: str,
                 strides: Sequence[int] | None = None, offset: int = 0) -> None:
        self.buffer = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtypes.check(dtype)
        self.strides = tuple(int(s) for s in strides) if strides is not None else \
            _contiguous_strides(self.shape)
        self.offset = int(offset)

    # ---- construction --------------------------------------------------------------------
    @classmethod
    def empty(cls, shape: Sequence[int], dtype: str = "float32",
              device: str | Device = "") -> DeviceArray:
        dev = parse_device(device)
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(f"empty: shape {shape} has a negative dimension")
        nbytes = math.prod(shape) * dtypes.itemsize(dtype)
        return cls(Buffer(dev, nbytes), shape, dtype)

    @classmethod
    def from_numpy(cls, array: np.ndarray, device: str | Device) -> DeviceArray:
        """Copy a numpy array (any layout) to a new contiguous array on `device`."""
        array = np.asarray(array)
        dtype = dtypes.from_numpy(array.dtype)
        out = cls.empty(array.shape, dtype, device)
        host = np.ascontiguousarray(array)
        if host.nbytes:
            out.buffer.lib.copy_h2d(out.buffer.handle, 0, host.reshape(-1).view(np.uint8))
        return out

    @classmethod
    def from_dlpack(cls, obj: object, device: str | Device) -> DeviceArray:
        """Copy a host DLPack producer (numpy, torch CPU tensor, ...) to `device`."""
        return cls.from_numpy(np.from_dlpack(obj), device)

    # ---- properties ------------------------------------------------------------------------
    @property
    def device(self) -> Device:
        return self.buffer.device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return dtypes.itemsize(self.dtype)

    @property
    def is_contiguous(self) -> bool:
        return all(s == c for d, s, c in zip(self.shape, self.strides,
                                             _contiguous_strides(self.shape), strict=True)
                   if d != 1)

    def descriptor(self) -> tuple:
        """(handle, byte_offset, dtype, shape, strides) as unidev._C kernels take it."""
        return (self.buffer.handle, self.offset * self.itemsize, self.dtype, self.shape,
                self.strides)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device='{self.device}')"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    # ---- views -------------------------------------------------------------------------------
    def _view(self, shape, strides, offset) -> DeviceArray:
        return DeviceArray(self.buffer, shape, self.dtype, strides, offset)

    def as_strided(self, shape: Sequence[int], strides: Sequence[int],
                   offset: int = 0) -> DeviceArray:
        """A view with explicit strides and element offset (checked against the buffer at use)."""
        return self._view(shape, strides, offset)

    def transpose(self, *axes: int) -> DeviceArray:
        if not axes:
            axes = tuple(reversed(range(self.ndim)))
        elif len(axes) == 1 and isinstance(axes[0], list | tuple):
            axes = tuple(axes[0])
        if sorted(a % max(self.ndim, 1) for a in axes) != list(range(self.ndim)):
            raise InvalidArgumentError(f"transpose: axes {axes} are not a permutation of "
                                       f"{self.ndim} dims")
        axes = tuple(a % self.ndim for a in axes)
        return self._view([self.shape[a] for a in axes], [self.strides[a] for a in axes],
                          self.offset)

    @property
    def T(self) -> DeviceArray:
        return self.transpose()

    def broadcast_to(self, shape: Sequence[int]) -> DeviceArray:
        shape = tuple(int(d) for d in shape)
        if len(shape) < self.ndim:
            raise InvalidArgumentError(f"broadcast_to: cannot broadcast {self.shape} to {shape}")
        lead = len(shape) - self.ndim
        strides = [0] * lead
        for i, (d, s) in enumerate(zip(self.shape, self.strides, strict=True)):
            if d == shape[lead + i]:
                strides.append(s)
            elif d == 1:
                strides.append(0)
            else:
                raise InvalidArgumentError(f"broadcast_to: cannot broadcast {self.shape} to "
                                           f"{shape} (dim {i})")
        return self._view(shape, strides, self.offset)

    def reshape(self, *shape: int) -> DeviceArray:
        if len(shape) == 1 and isinstance(shape[0], list | tuple):
            shape = tuple(shape[0])
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            shape = tuple(self.size // known if d == -1 else d for d in shape)
        if math.prod(shape) != self.size:
            raise InvalidArgumentError(f"reshape: cannot reshape {self.shape} to {shape}")
        src = self if self.is_contiguous else self.contiguous()
        return src._view(shape, None, src.offset)

    def contiguous(self) -> DeviceArray:
        if self.is_contiguous:
            return self
        from . import ops  # ops imports this module

        return ops.copy(self)

    def __getitem__(self, key) -> DeviceArray:
        if not isinstance(key, tuple):
            key = (key,)
        real = sum(1 for k in key if k is not None and k is not Ellipsis)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - real) + key[i + 1:]
        if real > self.ndim:
            raise IndexError(f"too many indices: {real} for {self.ndim} dims")
        shape, strides, offset, dim = [], [], self.offset, 0
        for k in key:
            if k is None:
                shape.append(1)
                strides.append(0)
                continue
            n, s = self.shape[dim], self.strides[dim]
            dim += 1
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step <= 0:
                    raise InvalidArgumentError("DeviceArray slicing: negative steps are not "
                                               "supported (strides must be >= 0)")
                count = max(0, (stop - start + step - 1) // step)
                offset += start * s if count else 0
                shape.append(count)
                strides.append(s * step)
            elif isinstance(k, int | np.integer):
                k = int(k)
                if not -n <= k < n:
                    raise IndexError(f"index {k} out of range for dim {dim - 1} of size {n}")
                offset += (k % n) * s
            else:
                raise TypeError(f"DeviceArray indices must be ints, slices or None, got {k!r}")
        shape += self.shape[dim:]
        strides += self.strides[dim:]
        return self._view(shape, strides, offset)

    # ---- host interchange ------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """Copy to a new contiguous numpy array (synchronizes)."""
        np_dtype = dtypes.to_numpy(self.dtype)
        if self.buffer.freed:
            raise UnknownHandleError(f"numpy: the buffer of {self!r} was freed")
        if self.size == 0:
            return np.empty(self.shape, np_dtype)
        span = 1 + sum((d - 1) * s for d, s in zip(self.shape, self.strides, strict=True))
        host = np.empty(span, np_dtype)
        self.buffer.lib.copy_d2h(self.buffer.handle, self.offset * self.itemsize,
                                 host.view(np.uint8))
        view = np.lib.stride_tricks.as_strided(
            host, self.shape, [s * self.itemsize for s in self.strides])
        return np.array(view, order="C", copy=True)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1 if self.device.host_addressable else 12, self.device.index)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this view (kDLCPU for host-addressable plugins, else kDLExtDev)."""
        from .. import _C

        if copy:
            raise BufferError("DeviceArray.__dlpack__: copy=True is not supported")
        self.buffer.lib.synchronize(self.device.index)
        kind, idx = self.__dlpack_device__()
        return _C.make_dlpack(self.buffer.handle, kind, idx, self.dtype, list(self.shape),
                              list(self.strides), self.offset * self.itemsize, self.buffer)
