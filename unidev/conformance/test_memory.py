"""Memory group: alloc/free, copies, memset, alignment, zero-size, large, OOM, mem_device."""

# All through the binding (unidev._C.Library), except mem_device: through the raw table.

from __future__ import annotations

import numpy as np
import pytest

from unidev.conformance import abi
from unidev.core.errors import DeviceOutOfMemoryError, UnidevError

_LARGE = 64 << 20


@pytest.fixture
def mem(unidev_usable):
    t = unidev_usable
    lib, dev = t.library, t.index
    live = []

    def alloc(size: int) -> int:
        h = lib.malloc(dev, size)
        live.append(h)
        return h

    yield lib, dev, alloc
    for h in live:
        try:
            lib.free(dev, h)
        except UnidevError:
            pass  # freed by the test itself


def _pattern(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_alloc_free_roundtrip(mem) -> None:
    lib, dev, _ = mem
    before = lib.live_allocations()
    hs = [lib.malloc(dev, n) for n in (1, 63, 64, 65, 4096, 1 << 20)]
    assert len(set(hs)) == len(hs), f"malloc returned duplicate handles {hs}"
    assert all(h != 0 for h in hs), "malloc returned handle 0"
    for h in hs:
        lib.free(dev, h)
    assert lib.live_allocations() == before


def test_copy_h2d_d2h(mem) -> None:
    lib, _, alloc = mem
    for n in (1, 7, 64, 1000, 1 << 16):
        src = _pattern(n, n)
        h = alloc(n)
        lib.copy_h2d(h, 0, src)
        back = np.zeros(n, np.uint8)
        lib.copy_d2h(h, 0, back)
        assert np.array_equal(back, src), f"h2d then d2h of {n} bytes changed the data"


def test_copy_with_offsets(mem) -> None:
    lib, _, alloc = mem
    h = alloc(256)
    lib.copy_h2d(h, 0, np.zeros(256, np.uint8))
    lib.copy_h2d(h, 13, _pattern(100))
    back = np.zeros(256, np.uint8)
    lib.copy_d2h(h, 0, back)
    assert np.array_equal(back[13:113], _pattern(100)), "h2d at an offset landed elsewhere"
    assert not back[:13].any() and not back[113:].any(), "h2d at an offset wrote outside its range"
    part = np.zeros(50, np.uint8)
    lib.copy_d2h(h, 20, part)
    assert np.array_equal(part, _pattern(100)[7:57]), "d2h from an offset read the wrong bytes"


def test_copy_d2d(mem) -> None:
    lib, dev, alloc = mem
    n = 4099
    a, b = alloc(n), alloc(n + 10)
    lib.copy_h2d(a, 0, _pattern(n, 1))
    lib.copy_h2d(b, 0, np.zeros(n + 10, np.uint8))
    lib.copy_d2d(b, 5, a, 0, n)
    lib.synchronize(dev)
    back = np.zeros(n + 10, np.uint8)
    lib.copy_d2h(b, 0, back)
    assert np.array_equal(back[5:5 + n], _pattern(n, 1)), "d2d copied the wrong bytes"
    assert not back[:5].any() and not back[5 + n:].any(), "d2d wrote outside its range"


@pytest.mark.parametrize("elem", [1, 2, 4, 8])
def test_memset(mem, elem) -> None:
    lib, dev, alloc = mem
    count = 37
    h = alloc(count * elem + 16)
    lib.copy_h2d(h, 0, np.zeros(count * elem + 16, np.uint8))
    pattern = 0x0123456789ABCDEF
    lib.memset(h, 8, pattern, elem, count)
    lib.synchronize(dev)
    back = np.zeros(count * elem + 16, np.uint8)
    lib.copy_d2h(h, 0, back)
    want = np.frombuffer(pattern.to_bytes(8, "little")[:elem] * count, np.uint8)
    assert np.array_equal(back[8:8 + count * elem], want), (
        f"memset(elem_size={elem}) wrote {back[8:8 + 16].tolist()}…, expected the low {elem} "
        "bytes of the pattern, little endian")
    assert not back[:8].any() and not back[8 + count * elem:].any(), "memset wrote past its range"


def test_alignment(unidev_usable, mem) -> None:
    lib, _, alloc = mem
    if not unidev_usable.record.spec.host_addressable:
        pytest.skip("handles are opaque on this plugin: alignment is not observable from the host")
    for n in (1, 3, 64, 100, 4097):
        h = alloc(n)
        assert h % 64 == 0, f"malloc({n}) returned 0x{h:x}, not 64-byte aligned"


def test_zero_size(mem) -> None:
    lib, dev, _ = mem
    a, b = lib.malloc(dev, 0), lib.malloc(dev, 0)
    assert a != 0 and b != 0, "malloc(0) returned handle 0"
    assert a != b, "two malloc(0) calls returned the same handle"
    lib.copy_h2d(a, 0, np.zeros(0, np.uint8))
    lib.copy_d2h(a, 0, np.zeros(0, np.uint8))
    lib.free(dev, a)
    lib.free(dev, b)


def test_large(mem) -> None:
    lib, dev, alloc = mem
    h = alloc(_LARGE)
    head, tail = _pattern(4096, 3), _pattern(4096, 4)
    lib.copy_h2d(h, 0, head)
    lib.copy_h2d(h, _LARGE - 4096, tail)
    lib.memset(h, 4096, 0x5A, 1, _LARGE - 8192)
    lib.synchronize(dev)
    back = np.zeros(_LARGE, np.uint8)
    lib.copy_d2h(h, 0, back)
    assert np.array_equal(back[:4096], head) and np.array_equal(back[-4096:], tail), (
        f"a {_LARGE >> 20} MiB allocation lost data at its ends")
    assert (back[4096:-4096] == 0x5A).all(), "memset over 64 MiB left bytes unset"


def test_out_of_memory(unidev_usable, mem) -> None:
    lib, dev, alloc = mem
    total = lib.device_properties(dev)["total_memory"]
    for size in (total + (1 << 30), 1 << 62):
        with pytest.raises(DeviceOutOfMemoryError) as info:
            lib.malloc(dev, size)
        assert str(info.value).strip(), "out-of-memory error without a message"
    h = alloc(4096)  # the device keeps working
    lib.copy_h2d(h, 0, _pattern(4096))


def test_memory_info_tracks_allocations(mem) -> None:
    lib, dev, alloc = mem
    free0, total = lib.memory_info(dev)
    h = alloc(32 << 20)
    free1, _ = lib.memory_info(dev)
    assert free1 <= free0, "free memory grew after a 32 MiB allocation"
    lib.free(dev, h)
    lib.synchronize(dev)
    free2, _ = lib.memory_info(dev)
    assert free2 >= free1, "free memory did not come back after free + synchronize"


def _unknown(api: abi.Api, handle: int, what: str) -> None:
    try:
        device = api.mem_device(handle)
    except abi.PluginError as exc:
        assert exc.code_name == "UNKNOWN_HANDLE", (
            f"mem_device({what}) failed with {exc.code_name}, expected UNKNOWN_HANDLE: {exc}")
        assert exc.message.strip(), f"mem_device({what}): error without a message"
    else:
        raise AssertionError(f"mem_device({what}) says device {device}, expected UNKNOWN_HANDLE")


def test_mem_device(unidev_usable, mem) -> None:
    """ABI 1.1: mem_device names the allocating device for a handle and any offset inside it,
    and refuses freed, never-allocated and 0 handles."""
    t = unidev_usable
    lib, dev, alloc = mem
    api = t.api
    if not api.has("mem_device"):
        pytest.skip(f"plugin {t.name!r} has no mem_device (ABI {api.table.abi_major}."
                    f"{api.table.abi_minor}, struct_size {api.table.struct_size}); optional "
                    "before 1.1")
    for n in (1, 64, 100, 4096, 1 << 20):
        h = alloc(n)
        for off in sorted({0, min(1, n - 1), n // 2, n - 1}):
            got = api.mem_device(h + off)
            assert got == dev, (f"mem_device(handle + {off}) of a {n}-byte allocation on device "
                                f"{dev} says {got}")
    h0 = alloc(0)
    assert api.mem_device(h0) == dev, "mem_device of a 0-byte allocation's handle is wrong"
    count = api.device_count()
    others = []
    try:
        for d in range(min(count, 4)):
            others.append((d, lib.malloc(d, 256)))
        for d, h in others:
            for off in (0, 255):
                got = api.mem_device(h + off)
                assert got == d, f"mem_device of an allocation on device {d} (+{off}) says {got}"
    finally:
        for d, h in others:
            lib.free(d, h)
    # never allocated: 0, and below 64 (allocations are 64-byte aligned and never at 0)
    for h, what in ((0, "0"), (8, "0x8"), (63, "0x3f")):
        _unknown(api, h, what)
    h = lib.malloc(dev, 512)
    lib.free(dev, h)
    lib.synchronize(dev)
    _unknown(api, h, "a freed handle")
    _unknown(api, h + 100, "an offset inside a freed allocation")
    for d, h in others:
        _unknown(api, h, f"a freed handle of device {d}")
