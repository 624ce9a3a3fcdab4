"""Contract group: the plugin loads, its table is complete and versioned, its devices describe
themselves consistently."""

from __future__ import annotations

import ctypes

import pytest

from unidev import _C
from unidev.conformance import abi
from unidev.contract import dtypes, opset
from unidev.core import discovery

_KNOWN_CAPS = 0x1 | 0x2


def test_plugin_loads(unidev_target) -> None:
    rec = unidev_target.record
    if rec.status == discovery.NO_DEVICES:
        pytest.skip(f"plugin {unidev_target.name!r} loads but has no devices here: {rec.error}")
    assert rec.status == discovery.OK, (
        f"plugin {unidev_target.name!r} is {rec.status}: {rec.error}")


def test_abi_mirror_matches_the_header() -> None:
    """unidev.contract.abi's table sizes are the C header's (unidev._C is compiled with it)."""
    for name, mirror, header in (("UD_API_SIZE_1_0", abi.SIZE_1_0, _C.API_SIZE_1_0),
                                 ("UD_API_SIZE_1_1", abi.SIZE_1_1, _C.API_SIZE_1_1),
                                 ("UD_API_SIZE_1_2", abi.SIZE_1_2, _C.API_SIZE_1_2),
                                 ("sizeof(UD_Api)", ctypes.sizeof(abi.ApiTable), _C.API_SIZE)):
        assert mirror == header, f"the ctypes mirror says {name} = {mirror}, unidev.h {header}"
    assert abi.SIZES[(_C.ABI_MAJOR, _C.ABI_MINOR)] == _C.API_SIZE, (
        f"the mirror has no size for this unidev's ABI {_C.ABI_MAJOR}.{_C.ABI_MINOR}")
    mirror = {name: getattr(abi.ApiTable, name).offset for name, _ in abi.ApiTable._fields_}
    assert mirror == dict(_C.API_OFFSETS), "the mirror's UD_Api field offsets differ from unidev.h"
    required = [name for name, _, _, minor in abi.API_FUNCTIONS if minor == 0]
    assert required == list(_C.API_1_0_FUNCTIONS), (
        "the mirror's 1.0 functions differ from those loader.h requires")


def test_abi_version(unidev_usable) -> None:
    table = unidev_usable.api.table
    assert table.abi_major == _C.ABI_MAJOR, (
        f"UD_Api.abi_major {table.abi_major}, this unidev speaks {_C.ABI_MAJOR}")
    assert table.abi_minor >= 0, f"UD_Api.abi_minor {table.abi_minor} is negative"
    assert table.struct_size >= abi.SIZE_1_0, (
        f"UD_Api.struct_size {table.struct_size} is smaller than the ABI 1.0 table "
        f"({abi.SIZE_1_0} bytes)")
    # a table claiming minor m holds every field of 1.m (a newer minor: at least ours)
    known = [m for (major, m) in abi.SIZES if major == table.abi_major and m <= table.abi_minor]
    need = abi.SIZES[(table.abi_major, max(known))] if known else abi.SIZE_1_0
    assert table.struct_size >= need, (
        f"UD_Api says ABI {table.abi_major}.{table.abi_minor} but its struct_size "
        f"{table.struct_size} is smaller than that version's table ({need} bytes)")


def test_table_complete(unidev_usable) -> None:
    missing = unidev_usable.api.missing()
    assert not missing, f"UD_Api leaves these functions NULL: {', '.join(missing)}"


def test_names_and_version(unidev_usable) -> None:
    table = unidev_usable.api.table
    name = (table.plugin_name or b"").decode()
    assert name == unidev_usable.record.spec.name, (
        f"UD_Api.plugin_name {name!r} differs from the hook's PluginSpec.name "
        f"{unidev_usable.record.spec.name!r}")
    assert (table.plugin_version or b"").decode(), "UD_Api.plugin_version is empty"


def test_device_count(unidev_usable) -> None:
    n = unidev_usable.api.device_count()
    assert n >= 1, "device_count reports no devices although discovery found some"
    assert unidev_usable.index < n, f"device index {unidev_usable.index} >= device_count {n}"


def test_device_properties(unidev_usable) -> None:
    t = unidev_usable
    p = t.api.properties(t.index)
    raw = ctypes.string_at(ctypes.addressof(p) + abi.DeviceProperties.name.offset, 64)
    assert b"\0" in raw, "UD_DeviceProperties.name is not NUL-terminated within 64 bytes"
    assert raw.split(b"\0")[0].strip(), "UD_DeviceProperties.name is empty"
    assert p.total_memory > 0, "total_memory is 0"
    assert p.compute_units >= 1, f"compute_units {p.compute_units}, expected >= 1"
    assert p.vector_width >= 1, f"vector_width {p.vector_width}, expected >= 1 (bytes)"
    assert bool(p.host_addressable) == t.record.spec.host_addressable, (
        f"device says host_addressable={bool(p.host_addressable)} but the PluginSpec says "
        f"{t.record.spec.host_addressable}")
    assert p.capabilities & ~_KNOWN_CAPS == 0, (
        f"capabilities 0x{p.capabilities:x} sets bits unidev.h does not define")
    # the binding's view agrees with the raw table
    d = t.library.device_properties(t.index)
    assert d["total_memory"] == p.total_memory


def test_memory_info(unidev_usable) -> None:
    t = unidev_usable
    free, total = t.library.memory_info(t.index)
    assert 0 < total, "device_memory_info: total is 0"
    assert free <= total, f"device_memory_info: free {free} > total {total}"
    assert total == t.library.device_properties(t.index)["total_memory"], (
        "device_memory_info total differs from UD_DeviceProperties.total_memory")


def test_unknown_op_lookup(unidev_usable) -> None:
    assert unidev_usable.library.kernel("no_such_op_anywhere", "float32") is None, (
        "kernel_lookup returned a kernel for an op that is not in the op set")


def test_lookup_other_dtypes(unidev_usable) -> None:
    """Lookups of dtypes outside an op's rule (float16, uint8) return NULL or a kernel, never
    an error or a crash."""
    lib = unidev_usable.library
    for dt in ("float16", "bfloat16", "uint8"):
        lib.kernel("add", dt)  # any answer is fine; raising would fail the test


def test_claimed_tier_has_float32_kernels(unidev_usable) -> None:
    t = unidev_usable
    lib = t.library
    missing = [op.name for op in opset.OPS.values()
               if op.tier <= t.conformance.tier and "float32" in op.dtypes
               and not t.exclusion(op.name, "float32") and lib.kernel(op.name, "float32") is None]
    assert not missing, (f"the plugin claims tier {t.conformance.tier} but has no float32 "
                         f"kernel for: {', '.join(missing)}")


def test_spec_is_consistent(unidev_usable) -> None:
    conf = unidev_usable.conformance
    assert conf.tier in opset.TIERS, f"Conformance.tier {conf.tier} is not one of {opset.TIERS}"
    for key in conf.exclusions:
        op, _, dt = key.partition(":")
        assert op in opset.OPS, f"exclusion {key!r} names an unknown op"
        assert not dt or dt in opset.OPS[op].dtypes, f"exclusion {key!r}: {op} has no {dt}"
    for dt, tol in conf.tolerances.items():
        dtypes.check(dt, "Conformance.tolerances")
        assert len(tol) == 2 and all(v >= 0 for v in tol), (
            f"tolerance for {dt} must be (rtol, atol) >= 0, got {tol}")


def test_error_objects(unidev_usable) -> None:
    """A provoked error carries a known code and a non-empty message."""
    t = unidev_usable
    try:
        t.api.properties(10_000)
    except abi.PluginError as exc:
        assert exc.code in abi.ERROR_CODES and exc.code != 0, f"unknown error code {exc.code}"
        assert exc.message.strip(), "error_message returned an empty message"
    else:
        raise AssertionError("device_properties(10000) succeeded; expected INVALID_ARGUMENT")


def test_kernel_compile(unidev_usable) -> None:
    """ABI 1.2's optional kernel_compile: absent is allowed (1.0/1.1 tables, or NULL); present,
    it answers each tier-4 op (valid attributes) and an unknown op with a kernel or NULL ("no
    specialization") and no error. Malformed programs: the bad_inputs group (tier4)."""
    api = unidev_usable.api
    if not api.has("kernel_compile"):
        pytest.skip(f"plugin {unidev_usable.name!r} has no kernel_compile (ABI "
                    f"{api.table.abi_major}.{api.table.abi_minor}); optional")
    api.compile("no_such_op", "float32", [])
    for op in opset.by_tier(4):
        attrs = [(a.name, a.type, "i0 o0" if a.name == "program" else a.default)
                 for a in op.attrs]
        for dtype in op.dtypes:
            api.compile(op.name, dtype, attrs)
