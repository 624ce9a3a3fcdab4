"""Streams and events group: in-order execution, cross-stream waits, queries, synchronization,
and errors that surface at the next synchronizing call."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from unidev.conformance import abi
from unidev.core import ops
from unidev.core.array import DeviceArray
from unidev.core.errors import UnidevError

_N = 1 << 22  # 16 MiB of float32: long enough for an asynchronous device to show a race


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


@pytest.fixture
def env(unidev_usable):
    t = unidev_usable
    lib, dev = t.library, t.index
    streams, events = [], []

    def stream() -> int:
        s = lib.stream_create(dev)
        streams.append(s)
        return s

    def event() -> int:
        e = lib.event_create(dev)
        events.append(e)
        return e

    def array(n: int = _N) -> DeviceArray:
        a = DeviceArray.empty((n,), "float32", t.device)
        lib.synchronize(dev)  # allocated on the default stream; visible to others after this
        return a

    yield t, lib, dev, stream, event, array
    for e in events:
        lib.event_destroy(e)
    for s in streams:
        lib.stream_destroy(s)


def _fill(lib, a: DeviceArray, value: float, stream: int) -> None:
    lib.memset(a.buffer.handle, 0, _bits(value), 4, a.size, stream)


def _check(a: DeviceArray, value: float, what: str) -> None:
    got = a.numpy()
    bad = np.flatnonzero(got != value)
    assert bad.size == 0, (f"{what}: {bad.size} of {got.size} elements are not {value} "
                           f"(first at {bad[0]}: {got[bad[0]]}) — work ran out of order")


def test_in_order_on_one_stream(env) -> None:
    t, lib, dev, stream, _, array = env
    s = stream()
    a, b, c = array(), array(), array()
    _fill(lib, a, 1.0, s)
    ops.copy(a, out=b, stream=s)
    _fill(lib, a, 2.0, s)
    ops.copy(a, out=c, stream=s)
    lib.stream_synchronize(s)
    assert lib.stream_query(s), "stream_query says busy right after stream_synchronize"
    _check(b, 1.0, "copy enqueued before the second memset")
    _check(c, 2.0, "copy enqueued after the second memset")


def test_cross_stream_wait(env) -> None:
    t, lib, dev, stream, event, array = env
    s1, s2 = stream(), stream()
    a, b, c = array(), array(), array()
    e = event()
    _fill(lib, c, 0.0, s2)
    lib.stream_synchronize(s2)
    _fill(lib, a, 3.0, s1)
    ops.copy(a, out=b, stream=s1)
    lib.event_record(e, s1)
    lib.stream_wait_event(s2, e)
    lib.copy_d2d(c.buffer.handle, 0, b.buffer.handle, 0, 4 * _N, s2)
    lib.stream_synchronize(s2)
    _check(c, 3.0, "a copy on stream 2 that waited for an event of stream 1")
    lib.stream_synchronize(s1)


def test_event_query_and_synchronize(env) -> None:
    t, lib, dev, stream, event, array = env
    s = stream()
    e = event()
    assert lib.event_query(e), "an event never recorded must count as done"
    a, b = array(), array()
    _fill(lib, a, 5.0, s)
    ops.copy(a, out=b, stream=s)
    lib.event_record(e, s)
    lib.event_synchronize(e)
    assert lib.event_query(e), "event_query says not done after event_synchronize"
    _check(b, 5.0, "work before a synchronized event")


def test_event_elapsed(env) -> None:
    t, lib, dev, stream, event, array = env
    caps = lib.device_properties(dev)["capabilities"]
    if not caps & 0x2:
        pytest.skip("the device does not claim UD_CAP_EVENT_TIMING")
    s = stream()
    e1, e2 = event(), event()
    a, b = array(), array()
    lib.event_record(e1, s)
    ops.copy(a, out=b, stream=s)
    lib.event_record(e2, s)
    lib.event_synchronize(e2)
    ms = t.api.elapsed(e1, e2)
    assert ms >= 0.0, f"event_elapsed gave {ms} ms between two ordered events"


def test_stream_destroy_waits(env) -> None:
    t, lib, dev, _, _, array = env
    a = array()
    s = lib.stream_create(dev)
    _fill(lib, a, 7.0, s)
    lib.stream_destroy(s)
    _check(a, 7.0, "work enqueued before stream_destroy")


def test_device_synchronize(env) -> None:
    t, lib, dev, stream, _, array = env
    s1, s2 = stream(), stream()
    a, b = array(), array()
    _fill(lib, a, 4.0, s1)
    _fill(lib, b, 6.0, s2)
    t.api.call("device_synchronize", dev)
    assert lib.stream_query(s1) and lib.stream_query(s2), (
        "streams still busy after device_synchronize")
    _check(a, 4.0, "stream 1 after device_synchronize")
    _check(b, 6.0, "stream 2 after device_synchronize")


def test_stream_ordered_alloc_free(env) -> None:
    t, lib, dev, stream, _, _ = env
    s = stream()
    for i in range(20):
        h = lib.malloc(dev, 1 << 16, s)
        lib.memset(h, 0, i, 1, 1 << 16, s)
        lib.free(dev, h, s)
    lib.stream_synchronize(s)


def test_error_surfaces_at_sync(env) -> None:
    """A fault found while running (an out-of-range class index) is returned by the kernel
    call or by the next synchronizing call — and the stream keeps working afterwards."""
    t, lib, dev, stream, _, array = env
    if lib.kernel("nll_loss", "float32") is None:
        pytest.skip("no nll_loss[float32] kernel (tier 2) to provoke a run-time error with")
    s = stream()
    logp = DeviceArray.from_numpy(np.log(np.full((4, 3), 1 / 3, np.float32)), t.device)
    target = DeviceArray.from_numpy(np.array([0, 1, 7, 2], np.int64), t.device)
    raised = None
    try:
        ops.nll_loss(logp, target, stream=s)
        lib.stream_synchronize(s)
    except UnidevError as exc:
        raised = exc
    assert raised is not None, "nll_loss with target 7 for 3 classes raised nothing"
    assert str(raised).strip(), "the error has no message"
    a = array(1024)
    _fill(lib, a, 9.0, s)
    lib.stream_synchronize(s)
    _check(a, 9.0, "work on a stream after it reported an error")


def test_raw_stream_query_idle(env) -> None:
    t, lib, dev, stream, _, _ = env
    s = stream()
    done = abi.C.c_int32(0)
    t.api.call("stream_query", s, abi.C.byref(done))
    assert done.value == 1, "a new stream with no work is not idle"


# ---- errors of enqueued work: on their own stream, once; what failed reads as the failure ----

def _enqueue_failing_nll(t, lib, stream: int, bad: int = 7):
    """nll_loss of 3 classes with target `bad`, outputs made beforehand so that only the kernel
    runs on `stream`. Returns (loss, total_weight), or None when the plugin refused the call at
    once (it validates targets before enqueueing: then there is no run-time failure to test)."""
    if lib.kernel("nll_loss", "float32") is None:
        pytest.skip("no nll_loss[float32] kernel (tier 2) to provoke a run-time error with")
    logp = DeviceArray.from_numpy(np.log(np.full((4, 3), 1 / 3, np.float32)), t.device)
    target = DeviceArray.from_numpy(np.array([0, 1, bad, 2], np.int64), t.device)
    loss = DeviceArray.from_numpy(np.array(5.0, np.float32), t.device)
    total = DeviceArray.from_numpy(np.array(5.0, np.float32), t.device)
    lib.synchronize(t.index)
    try:
        ops.nll_loss(logp, target, out=(loss, total), stream=stream)
    except UnidevError as exc:
        assert "nll_loss" in str(exc) and str(bad) in str(exc), (
            f"the refusal of target {bad} does not name the op and the value: {exc}")
        return None
    return loss, total


def _expect_failure(fn, what: str, bad: int = 7) -> None:
    with pytest.raises(UnidevError) as err:
        fn()
    assert "nll_loss" in str(err.value) and str(bad) in str(err.value), (
        f"{what} raised, but without naming the failed op and its message: {err.value}")


def test_run_time_error_stays_on_its_stream(env) -> None:
    """A kernel failing while it runs on stream A is returned by A's next stream_synchronize,
    once — never by work or synchronization on stream B."""
    t, lib, dev, stream, _, array = env
    a, b = stream(), stream()
    if _enqueue_failing_nll(t, lib, a) is None:
        return
    x = array(1024)
    _fill(lib, x, 2.0, b)
    lib.stream_synchronize(b)  # raising here: A's failure was reported on B
    lib.stream_synchronize(b)
    _check(x, 2.0, "work on stream B while stream A failed")
    _expect_failure(lambda: lib.stream_synchronize(a), "stream_synchronize of the failed stream")
    lib.stream_synchronize(a)  # raising here: the failure was reported twice


def test_failed_output_reads_as_an_error(env) -> None:
    """Reading what a failed kernel was to write is an error naming it (here on another stream
    ordered after it, and through DeviceArray.numpy), not a value."""
    t, lib, dev, stream, event, _ = env
    a, b = stream(), stream()
    outs = _enqueue_failing_nll(t, lib, a)
    if outs is None:
        return
    e = event()
    lib.event_record(e, a)
    lib.stream_wait_event(b, e)
    host = abi.C.create_string_buffer(4)
    try:
        t.api.call("memcpy_d2h", b, host, outs[0].buffer.handle + outs[0].offset * 4, 4)
        lib.stream_synchronize(b)
    except (UnidevError, abi.PluginError) as exc:
        assert "nll_loss" in str(exc), f"the read failed without naming nll_loss: {exc}"
    else:
        value = struct.unpack("<f", host.raw)[0]
        pytest.fail(f"a failed nll_loss's loss read back as {value} on another stream")
    with pytest.raises(UnidevError):  # A's own failure is still A's to report
        lib.stream_synchronize(a)
    for out, name in zip(outs, ("loss", "total_weight"), strict=True):
        try:
            value = out.numpy()
        except UnidevError as exc:
            assert "nll_loss" in str(exc), f"reading {name} failed without naming nll_loss: {exc}"
        else:
            pytest.fail(f"a failed nll_loss's {name} read back as {value}")


def test_event_reports_a_run_time_error(env) -> None:
    """event_synchronize of an event recorded after the failed work returns the failure; the
    stream does not report it a second time."""
    t, lib, dev, stream, event, _ = env
    a = stream()
    if _enqueue_failing_nll(t, lib, a) is None:
        return
    e = event()
    lib.event_record(e, a)
    _expect_failure(lambda: lib.event_synchronize(e), "event_synchronize")
    lib.stream_synchronize(a)
    lib.event_record(e, a)
    lib.event_synchronize(e)


def test_run_time_errors_of_two_threads_stay_apart(env) -> None:
    """Two threads, two streams: one's kernels fail, the other's work must see none of that."""
    import threading

    t, lib, dev, stream, _, array = env
    a, b = stream(), stream()
    x = array(1024)
    wrong: list[str] = []
    if _enqueue_failing_nll(t, lib, a) is None:
        return
    with pytest.raises(UnidevError):
        lib.stream_synchronize(a)

    def failing() -> None:
        for _ in range(20):
            _enqueue_failing_nll(t, lib, a, bad=9)
            try:
                lib.stream_synchronize(a)
                wrong.append("the failing stream synchronized without an error")
            except UnidevError as exc:
                if "9" not in str(exc):
                    wrong.append(f"the failing stream reported: {exc}")

    def clean() -> None:
        for i in range(20):
            try:
                _fill(lib, x, float(i), b)
                lib.stream_synchronize(b)
            except UnidevError as exc:
                wrong.append(f"the clean stream reported: {exc}")

    threads = [threading.Thread(target=failing), threading.Thread(target=clean)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not wrong, f"{len(wrong)} wrong results, first: {wrong[0]}"
    _check(x, 19.0, "the clean thread's last fill")
