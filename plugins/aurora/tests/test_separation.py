"""The device is really separate: the host cannot touch aurora memory, the device side rejects
bad accesses, and the process survives all of it."""

from __future__ import annotations

import ctypes
import signal

import numpy as np
import pytest
from aurora_testutil import run_python

from unidev.conformance import abi

F32 = "float32"


def _sync(api) -> None:
    api.call("stream_synchronize", None)


def _maps() -> list[tuple[int, int]]:
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = line.split()[0].split("-")
            out.append((int(lo, 16), int(hi, 16)))
    return out


def test_handles_are_vptrs_outside_every_mapping(api) -> None:
    handles = [api.alloc(0, 0, n) for n in (0, 64, 1 << 20, 3 << 20)]
    _sync(api)
    maps = _maps()
    for h in handles:
        # VEDA's layout: device (5 bits) | allocation index (22) | offset (37)
        assert h >> 59 == 0 and (h >> 37) & ((1 << 22) - 1) != 0 and h & ((1 << 37) - 1) == 0
        assert not any(lo <= h < hi for lo, hi in maps), f"handle {h:#x} is a mapped address"
    assert len(set(handles)) == len(handles)
    for h in handles:
        api.call("mem_free", 0, None, h)
    _sync(api)


def test_host_dereference_kills_only_a_child() -> None:
    code = """
import ctypes
from unidev.core import discovery
from unidev.conformance import abi
api = abi.Api(discovery.get("aurora").library.api_address)
h = api.alloc(0, 0, 64)
api.call("stream_synchronize", None)
print("HANDLE", hex(h), flush=True)
ctypes.string_at(h + 8, 8)
print("READ", flush=True)
"""
    r = run_python(code)
    assert "HANDLE" in r.stdout, r.stderr
    assert "READ" not in r.stdout
    assert r.returncode in (-signal.SIGSEGV, -signal.SIGBUS), (r.returncode, r.stderr)


def test_out_of_bounds_descriptor_rejected_by_device(api, raw) -> None:
    h = api.alloc(0, 0, 64)  # 16 float32
    # the host half only validates structure: it cannot see allocation sizes
    raw.kernel("neg", F32, 0, 0, [abi.RawTensor(h, F32, [17])], [abi.RawTensor(h, F32, [17])], [])
    with pytest.raises(abi.PluginError) as err:
        _sync(api)
    assert err.value.code_name == "OUT_OF_BOUNDS"
    assert "neg" in err.value.message and "leaves" in err.value.message
    raw.kernel("exp", F32, 0, 0, [abi.RawTensor(h, F32, [16], byte_offset=4)],
               [abi.RawTensor(h, F32, [16])], [])
    with pytest.raises(abi.PluginError) as err:
        _sync(api)
    assert err.value.code_name == "OUT_OF_BOUNDS"
    buf = (ctypes.c_char * 128)()
    api.call("memcpy_d2h", None, buf, h, 65)
    with pytest.raises(abi.PluginError) as err:
        _sync(api)
    assert err.value.code_name == "OUT_OF_BOUNDS"
    api.call("mem_free", 0, None, h)
    _sync(api)


def test_use_after_free_is_unknown_handle(api, raw) -> None:
    h = api.alloc(0, 0, 64)
    api.call("mem_free", 0, None, h)
    _sync(api)
    raw.kernel("relu", F32, 0, 0, [abi.RawTensor(h, F32, [4])], [abi.RawTensor(h, F32, [4])], [])
    with pytest.raises(abi.PluginError) as err:
        _sync(api)
    assert err.value.code_name == "UNKNOWN_HANDLE"
    buf = (ctypes.c_char * 8)()
    api.call("memcpy_d2h", None, buf, h + 8, 8)  # an offset handle into the freed allocation
    with pytest.raises(abi.PluginError) as err:
        _sync(api)
    assert err.value.code_name == "UNKNOWN_HANDLE"
    with pytest.raises(abi.PluginError) as err:
        api.call("mem_free", 0, None, h)  # double free, found at once
    assert err.value.code_name == "UNKNOWN_HANDLE"


def test_freeing_an_offset_handle_is_refused(api) -> None:
    h = api.alloc(0, 0, 64)
    with pytest.raises(abi.PluginError) as err:
        api.call("mem_free", 0, None, h + 16)
    assert err.value.code_name == "INVALID_ARGUMENT" and "offset" in err.value.message
    api.call("mem_free", 0, None, h)
    _sync(api)


def test_process_survives_and_still_computes(api, raw) -> None:
    test_out_of_bounds_descriptor_rejected_by_device(api, raw)
    test_use_after_free_is_unknown_handle(api, raw)
    import unidev

    x = np.arange(-5, 5, dtype=np.float32)
    y = unidev.ops.relu(unidev.DeviceArray.from_numpy(x, "aurora")).numpy()
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_signals_outside_device_code_keep_their_meaning() -> None:
    # vesim catches faults only inside device code; a signal sent to the host acts as usual
    code = """
import os, signal
from unidev.core import discovery
discovery.get("aurora").library.device_count()
os.kill(os.getpid(), signal.SIGFPE)
print("survived")
"""
    r = run_python(code)
    assert r.returncode == -signal.SIGFPE and "survived" not in r.stdout, r.stderr
