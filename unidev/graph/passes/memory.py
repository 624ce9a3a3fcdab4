"""Memory planning: temps placed in one arena by liveness (reuse), in-place legality, peak."""

from __future__ import annotations

from dataclasses import dataclass

from ...contract import opset

__all__ = ["Interval", "assign", "peak", "inplace_ok", "ALIGN"]

ALIGN = 64  # bytes: every temp starts on a cache line (and any SIMD width up to AVX-512)


@dataclass
class Interval:
    """A temp buffer alive from step `start` to step `end` (inclusive)."""

    nbytes: int
    start: int
    end: int


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def assign(intervals: list[Interval]) -> tuple[list[int], int]:
    """Offsets for `intervals` such that two alive at the same step never overlap; returns
    (offsets, arena bytes). Greedy by size (largest first), lowest gap that fits."""
    order = sorted(range(len(intervals)), key=lambda i: (-intervals[i].nbytes,
                                                        intervals[i].start, i))
    offsets = [0] * len(intervals)
    placed: list[int] = []
    arena = 0
    for i in order:
        iv = intervals[i]
        size = _align(max(iv.nbytes, 1))
        busy = sorted((offsets[j], offsets[j] + _align(max(intervals[j].nbytes, 1)))
                      for j in placed
                      if intervals[j].start <= iv.end and iv.start <= intervals[j].end)
        at = 0
        for lo, hi in busy:
            if at + size <= lo:
                break
            at = max(at, hi)
        offsets[i] = at
        placed.append(i)
        arena = max(arena, at + size)
    return offsets, arena


def peak(intervals: list[Interval]) -> int:
    """The most bytes alive at one step (a lower bound for any arena)."""
    steps = {s for iv in intervals for s in (iv.start, iv.end)}
    return max((sum(_align(max(iv.nbytes, 1)) for iv in intervals if iv.start <= s <= iv.end)
                for s in steps), default=0)


def inplace_ok(op: str, dtype_in: str, dtype_out: str, same_view: bool) -> bool:
    """Whether `op` may write its output over an input: unidev.h allows an elementwise op's
    output to be exactly one of its inputs (same view). Tier-4 programs are left out until
    their conformance group tests that form."""
    schema = opset.get(op)
    elementwise = schema.broadcast and schema.shape in ("same", "broadcast") and schema.tier < 4
    return elementwise and same_view and dtype_in == dtype_out and len(schema.outputs) == 1
