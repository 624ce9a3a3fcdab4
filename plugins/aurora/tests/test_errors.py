"""Errors found while aurora runs enqueued work: reported on their own stream, outputs poisoned."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import unidev
from unidev.core import ops
from unidev.core.errors import InvalidArgumentError, UnidevError

DEV = "aurora"
CLASSES = 3


@pytest.fixture
def lib(record):
    return record.library


@pytest.fixture
def new_stream(lib):
    """Makes streams of device 0, destroyed after the test."""
    made: list[int] = []

    def make() -> int:
        made.append(lib.stream_create(0))
        return made[-1]

    yield make
    for s in made:
        lib.stream_destroy(s)


def synced(x: np.ndarray, lib) -> unidev.DeviceArray:
    a = unidev.DeviceArray.from_numpy(np.require(x, requirements="C"), DEV)
    lib.synchronize(0)  # visible to every stream from here on
    return a


def nll(lib, targets, stream: int):
    """nll_loss (mean) of uniform log-probabilities, outputs made beforehand so that only the
    kernel runs on `stream`; aurora checks the targets on the device, while running."""
    logp = synced(np.log(np.full((len(targets), CLASSES), 1 / CLASSES, np.float32)), lib)
    target = synced(np.array(targets, np.int64), lib)
    loss = synced(np.full((), 5.0, np.float32), lib)
    total = synced(np.full((), 5.0, np.float32), lib)
    ops.nll_loss(logp, target, out=(loss, total), stream=stream)
    return loss, total


def test_failure_is_reported_on_its_stream_once(lib, new_stream) -> None:
    a, b = new_stream(), new_stream()
    nll(lib, [0, 1, 7, 2], a)
    x = synced(np.zeros(256, np.float32), lib)
    ops.fill(out=x, value=2.0, stream=b)
    lib.stream_synchronize(b)  # stream B's work is fine: A's failure is not B's
    with pytest.raises(InvalidArgumentError, match=r"nll_loss: target 7 is outside \[0, 3\)"):
        lib.stream_synchronize(a)
    lib.stream_synchronize(a)  # returned once
    np.testing.assert_array_equal(x.numpy(), 2.0)


def test_failed_output_reads_as_the_failure(lib, new_stream) -> None:
    a = new_stream()
    loss, total = nll(lib, [0, 9], a)
    with pytest.raises(InvalidArgumentError):
        lib.stream_synchronize(a)
    for out in (loss, total):  # before the fix: 0.0 and 1.0, read back without error
        with pytest.raises(InvalidArgumentError, match="nll_loss: target 9 is outside"):
            out.numpy()


def test_failed_output_reads_as_the_failure_on_another_stream(lib, new_stream, api) -> None:
    a, b = new_stream(), new_stream()
    loss, _ = nll(lib, [5], a)
    e = lib.event_create(0)
    lib.event_record(e, a)
    lib.stream_wait_event(b, e)
    buf = (ctypes.c_char * 4)()
    api.call("memcpy_d2h", b, buf, loss.buffer.handle, 4)
    with pytest.raises(UnidevError, match="target 5 is outside"):
        lib.stream_synchronize(b)
    with pytest.raises(UnidevError, match="target 5 is outside"):
        lib.stream_synchronize(a)  # A's own failure is still A's to report
    lib.event_destroy(e)


def test_work_reading_a_failed_output_fails_and_poisons_its_own(lib, new_stream) -> None:
    a = new_stream()
    loss, _ = nll(lib, [3], a)
    with pytest.raises(InvalidArgumentError):
        lib.stream_synchronize(a)
    doubled = synced(np.zeros((), np.float32), lib)
    ops.add(loss, loss, out=doubled, stream=a)
    with pytest.raises(InvalidArgumentError, match="add: input 0.*nll_loss: target 3"):
        lib.stream_synchronize(a)
    with pytest.raises(InvalidArgumentError, match="nll_loss: target 3"):
        doubled.numpy()


def test_overwriting_a_failed_output_makes_it_readable(lib, new_stream) -> None:
    a = new_stream()
    loss, total = nll(lib, [4], a)
    with pytest.raises(InvalidArgumentError):
        lib.stream_synchronize(a)
    lib.copy_h2d(loss.buffer.handle, 0, np.array(1.5, np.float32))  # all of its 4 bytes
    assert loss.numpy() == 1.5
    ops.fill(out=total, value=3.0, stream=a)  # a successful kernel writes all of it
    lib.stream_synchronize(a)
    assert total.numpy() == 3.0


def test_event_synchronize_reports_and_takes_the_failure(lib, new_stream) -> None:
    a = new_stream()
    nll(lib, [0, 8], a)
    e = lib.event_create(0)
    try:
        lib.event_record(e, a)
        with pytest.raises(InvalidArgumentError, match="event_synchronize.*nll_loss: target 8"):
            lib.event_synchronize(e)
        with pytest.raises(InvalidArgumentError, match="target 8"):
            lib.event_synchronize(e)  # the event keeps what happened before it
        lib.stream_synchronize(a)  # already returned: not a second time
        lib.event_record(e, a)
        lib.event_synchronize(e)
    finally:
        lib.event_destroy(e)


def test_device_synchronize_reports_every_stream(lib, new_stream, api) -> None:
    a, b = new_stream(), new_stream()
    nll(lib, [6], a)
    nll(lib, [7], b)
    with pytest.raises(Exception, match="target [67].*target [67]"):
        api.call("device_synchronize", 0)
    lib.stream_synchronize(a)
    lib.stream_synchronize(b)


def test_two_threads_on_two_streams_get_their_own_results(lib, new_stream) -> None:
    """The report in issue 14: a failure in one thread surfaced in another thread's calls."""
    a, b = new_stream(), new_stream()
    rounds, wrong = 40, []
    start = threading.Barrier(2)

    def failing() -> None:
        start.wait()
        for _ in range(rounds):
            loss, _ = nll(lib, [0, 11], a)
            try:
                lib.stream_synchronize(a)
                wrong.append("the failing stream synchronized cleanly")
            except InvalidArgumentError as exc:
                if "target 11" not in str(exc):
                    wrong.append(f"the failing stream reported {exc}")

    def clean() -> None:
        start.wait()
        x = synced(np.zeros(1024, np.float32), lib)
        for i in range(rounds):
            try:
                ops.fill(out=x, value=float(i), stream=b)
                lib.stream_synchronize(b)
                got = x.numpy()
                if not (got == i).all():
                    wrong.append(f"round {i}: read {got[:3]}")
            except UnidevError as exc:
                wrong.append(f"the clean thread got {exc}")

    threads = [threading.Thread(target=failing), threading.Thread(target=clean)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert wrong == []


def test_two_threads_reading_through_the_core(lib, new_stream) -> None:
    """One thread reads a failed output, another clean data, both through DeviceArray.numpy():
    each gets its own result."""
    a = new_stream()
    loss, _ = nll(lib, [0, 9], a)
    with pytest.raises(InvalidArgumentError):
        lib.stream_synchronize(a)
    clean = synced(np.arange(4096, dtype=np.float32), lib)
    rounds, wrong = 300, []

    def read_failed() -> None:
        for _ in range(rounds):
            try:
                wrong.append(f"a failed output read back as {loss.numpy()}")
            except InvalidArgumentError as exc:
                if "target 9" not in str(exc):
                    wrong.append(f"the failed output's read reported {exc}")

    def read_clean() -> None:
        for _ in range(rounds):
            try:
                clean.numpy()
            except UnidevError as exc:
                wrong.append(f"a clean read raised {exc}")

    threads = [threading.Thread(target=read_failed), threading.Thread(target=read_clean)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert wrong == [], f"{len(wrong)} wrong results, first: {wrong[0]}"


def test_failed_optimizer_step_poisons_the_state_it_updates(lib, new_stream) -> None:
    """sgd_update's param and momentum buffer are written in place (the op set's mutated inputs):
    a step that read a failed gradient must leave them unreadable, not holding the old values."""
    a = new_stream()
    grad, _ = nll(lib, [4], a)
    with pytest.raises(InvalidArgumentError):
        lib.stream_synchronize(a)
    param = synced(np.full((), 1.0, np.float32), lib)
    buf = synced(np.full((), 0.5, np.float32), lib)
    ops.sgd_update(param, grad, buf, lr=0.1, momentum=0.9, stream=a)
    with pytest.raises(InvalidArgumentError, match="sgd_update: input 1.*nll_loss: target 4"):
        lib.stream_synchronize(a)
    for state in (param, buf):
        with pytest.raises(InvalidArgumentError, match="nll_loss: target 4"):
            state.numpy()
