"""DeviceArray: a strided view of plugin memory, with numpy and DLPack interchange."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..contract import dtypes
from .device import Device
from .device import device as parse_device
from .errors import InvalidArgumentError, OutOfBoundsError, UnknownHandleError

__all__ = ["Buffer", "DeviceArray", "check_int"]

INT64_MAX = (1 << 63) - 1
MAX_DIMS = 16  # kMaxDims of unidev._C
MAX_BYTES = 1 << 62  # the largest view extent unidev._C accepts


def check_int(value, what: str, lo: int = -INT64_MAX - 1, hi: int = INT64_MAX) -> int:
    """`value` as an int in [lo, hi], else InvalidArgumentError naming `what` and the value."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidArgumentError(f"{what} = {value!r} ({type(value).__name__}), expected an "
                                   f"integer in [{lo}, {hi}]")
    v = int(value)
    if v < lo:
        raise InvalidArgumentError(f"{what} = {v}, expected >= {lo}")
    if v > hi:
        raise InvalidArgumentError(f"{what} = {v}, expected <= {hi}")
    return v


def check_shape(shape, what: str, note: str = "") -> tuple[int, ...]:
    """A shape (or strides) as a tuple of ints >= 0, at most MAX_DIMS of them."""
    if type(shape) is tuple and len(shape) <= MAX_DIMS and \
            all(type(d) is int and 0 <= d <= INT64_MAX for d in shape):
        return shape  # the common case, checked without building messages
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise InvalidArgumentError(f"{what} = {shape!r}, expected a sequence of ints") from None
    if len(dims) > MAX_DIMS:
        raise InvalidArgumentError(f"{what} = {dims}: {len(dims)} dims, at most {MAX_DIMS}")
    try:
        return tuple(check_int(d, f"{what}[{i}]", 0) for i, d in enumerate(dims))
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{exc}{note}") from None


class Buffer:
    """One allocation on a device; freed when the last view of it is garbage-collected."""

    __slots__ = ("device", "lib", "handle", "nbytes", "_freed", "__weakref__")

    def __init__(self, dev: Device, nbytes: int, stream: int = 0) -> None:
        self.nbytes = check_int(nbytes, "malloc: size", 0, MAX_BYTES)
        self.device = dev
        self.lib = dev.library
        self._freed = False
        # the allocation is ordered on `stream`; unidev._C then tracks the stream of its last
        # use, frees it there and runs host copies there
        self.handle = self.lib.malloc(dev.index, self.nbytes, stream)

    def free(self) -> None:
        """Release the memory now (ordered after its last use); later use of any view raises
        UnknownHandleError, even once the plugin has handed the same handle out again."""
        if not self._freed:
            self._freed = True
            self.lib.free(self.device.index, self.handle)

    def check_live(self, what: str | DeviceArray) -> None:
        """UnknownHandleError naming `what` (a view's repr is made only then) if freed."""
        if self._freed:
            raise UnknownHandleError(f"{what!s}: its buffer (handle {self.handle:#x}) was freed")

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
                 strides: Sequence[int] | None = None, offset: int = 0,
                 what: str = "DeviceArray") -> None:
        """Checks the view against the contract (strides >= 0) and its allocation's extent."""
        self.buffer = buffer
        self.dtype = dtypes.check(dtype)
        self.shape = check_shape(tuple(shape) if isinstance(shape, list) else shape,
                                 what + ": shape")
        if strides is None:
            self.strides = _contiguous_strides(self.shape)
        else:
            self.strides = check_shape(tuple(strides) if isinstance(strides, list) else strides,
                                       what + ": strides",
                                       " (strides are never negative in unidev: unidev.h)")
            if len(self.strides) != len(self.shape):
                raise InvalidArgumentError(f"{what}: strides {self.strides} have "
                                           f"{len(self.strides)} dims, shape {self.shape} has "
                                           f"{len(self.shape)}")
        self.offset = offset if type(offset) is int and 0 <= offset <= INT64_MAX else \
            check_int(offset, what + ": offset", 0)
        item = dtypes.itemsize(self.dtype)
        if any(d == 0 for d in self.shape):
            end = self.offset * item
        else:
            end = (self.offset + 1 + sum((d - 1) * s for d, s in
                                         zip(self.shape, self.strides, strict=True))) * item
        if end > buffer.nbytes:
            raise OutOfBoundsError(
                f"{what}: view shape {self.shape}, strides {self.strides}, offset {self.offset} "
                f"({self.dtype}) reaches byte {end}, past the allocation of {buffer.nbytes} bytes")

    @classmethod
    def _trusted(cls, buffer: Buffer, shape: tuple, dtype: str, strides: tuple,
                 offset: int) -> DeviceArray:
        """A view known to be valid (checked shape, derived from a checked view): no checks."""
        a = cls.__new__(cls)
        a.buffer, a.shape, a.dtype, a.strides, a.offset = buffer, shape, dtype, strides, offset
        return a

    # ---- construction --------------------------------------------------------------------
    @classmethod
    def empty(cls, shape: Sequence[int], dtype: str = "float32",
              device: str | Device = "", stream: int = 0) -> DeviceArray:
        """A new contiguous array, allocated in order on `stream` (0: the default stream)."""
        dev = parse_device(device)
        shape = check_shape(shape, "empty: shape")
        nbytes = math.prod(shape) * dtypes.itemsize(dtype)
        if nbytes > MAX_BYTES:
            raise InvalidArgumentError(f"empty: shape {shape} of {dtype} needs {nbytes} bytes, "
                                       f"more than the {MAX_BYTES} a unidev array can span")
        return cls._trusted(Buffer(dev, nbytes, stream), shape, dtype,
                            _contiguous_strides(shape), 0)

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
        if self.buffer._freed:
            self.buffer.check_live(repr(self))
        return (self.buffer.handle, self.offset * self.itemsize, self.dtype, self.shape,
                self.strides)

    def byte_range(self) -> tuple[int, int]:
        """[first, last + 1) bytes of the buffer this view can touch; (0, 0) when empty."""
        if self.size == 0:
            return (0, 0)
        lo = self.offset * self.itemsize
        span = 1 + sum((d - 1) * s for d, s in zip(self.shape, self.strides, strict=True))
        return (lo, lo + span * self.itemsize)

    def overlaps_itself(self) -> bool:
        """True when two elements of the view may share memory (stride 0 on a dim of size > 1,
        or strides that interleave); cheap unless the strides are unusual."""
        expect = 1  # C-contiguous (the common case) needs no sorting
        for d, s in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if d != 1 and s != expect:
                break
            expect *= d
        else:
            return False
        if self.size == 0:
            return False
        dims = sorted((s, d) for d, s in zip(self.shape, self.strides, strict=True) if d > 1)
        if any(s == 0 for s, _ in dims):
            return True
        reach = 1  # elements spanned by the dims with smaller strides
        ordered = True
        for s, d in dims:
            if s < reach:
                ordered = False
                break
            reach += (d - 1) * s
        if ordered:
            return False
        if self.size > 1 << 20:
            return True  # too large to check exactly: treated as overlapping
        offsets = np.zeros((), np.int64)
        for s, d in dims:
            offsets = np.add.outer(offsets, np.arange(d, dtype=np.int64) * s)
        return np.unique(offsets).size != offsets.size

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device='{self.device}')"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    # ---- views -------------------------------------------------------------------------------
    def _view(self, shape, strides, offset, what: str) -> DeviceArray:
        return DeviceArray(self.buffer, shape, self.dtype, strides, offset, what)

    def as_strided(self, shape: Sequence[int], strides: Sequence[int],
                   offset: int = 0) -> DeviceArray:
        """A view with explicit strides (>= 0) and element offset, checked against the buffer."""
        return self._view(shape, strides, offset, "as_strided")

    def transpose(self, *axes: int) -> DeviceArray:
        if not axes:
            axes = tuple(reversed(range(self.ndim)))
        elif len(axes) == 1 and isinstance(axes[0], list | tuple):
            axes = tuple(axes[0])
        axes = tuple(check_int(a, f"transpose: axes[{i}]", -self.ndim, self.ndim - 1)
                     for i, a in enumerate(axes))
        if sorted(a % self.ndim for a in axes) != list(range(self.ndim)):
            raise InvalidArgumentError(f"transpose: axes {axes} are not a permutation of "
                                       f"{self.ndim} dims")
        axes = tuple(a % self.ndim for a in axes)
        return DeviceArray._trusted(self.buffer, tuple(self.shape[a] for a in axes),
                                    self.dtype, tuple(self.strides[a] for a in axes), self.offset)

    @property
    def T(self) -> DeviceArray:
        return self.transpose()

    def broadcast_to(self, shape: Sequence[int]) -> DeviceArray:
        shape = check_shape(shape, "broadcast_to: shape")
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
        # strides are this view's or 0: the extent stays within this (checked) view's
        return DeviceArray._trusted(self.buffer, shape, self.dtype, tuple(strides), self.offset)

    def reshape(self, *shape: int) -> DeviceArray:
        if len(shape) == 1 and isinstance(shape[0], list | tuple):
            shape = tuple(shape[0])
        shape = tuple(check_int(d, f"reshape: shape[{i}]", -1) for i, d in enumerate(shape))
        if shape.count(-1) > 1:
            raise InvalidArgumentError(f"reshape: shape {shape} has more than one -1")
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            if known == 0 or self.size % known:
                raise InvalidArgumentError(f"reshape: cannot reshape {self.shape} to {shape}")
            shape = tuple(self.size // known if d == -1 else d for d in shape)
        if math.prod(shape) != self.size:
            raise InvalidArgumentError(f"reshape: cannot reshape {self.shape} to {shape}")
        src = self if self.is_contiguous else self.contiguous()
        return src._view(shape, None, src.offset, "reshape")

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
                strides.append(s * step if count > 1 else s)  # a huge step may take one
            elif isinstance(k, int | np.integer):
                k = int(k)
                if not -n <= k < n:
                    raise IndexError(f"index {k} out of range for dim {dim - 1} of size {n}")
                offset += (k % n) * s
            else:
                raise TypeError(f"DeviceArray indices must be ints, slices or None, got {k!r}")
        shape += self.shape[dim:]
        strides += self.strides[dim:]
        return self._view(shape, strides, offset, "DeviceArray[...]")

    # ---- host interchange ------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """Copy to a new contiguous numpy array (synchronizes)."""
        np_dtype = dtypes.to_numpy(self.dtype)
        self.buffer.check_live(f"numpy: {self!r}")
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
        self.buffer.check_live(f"__dlpack__: {self!r}")
        self.buffer.lib.synchronize_allocation(self.buffer.handle)
        kind, idx = self.__dlpack_device__()
        return _C.make_dlpack(self.buffer.handle, kind, idx, self.dtype, list(self.shape),
                              list(self.strides), self.offset * self.itemsize, self.buffer)
