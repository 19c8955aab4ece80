"""Which of two pieces of code takes longer, decided by one rule wherever it is asked.

``compare`` times both sides in alternating rounds (first, second, second, first, ...),
so a slow phase of the machine falls on both. They agree when the median ratio of a
round's two blocks lies within a band, a factor (1.25: from 1/1.25 to 1.25); one is
clearly slower only when the middle half of the ratios lies beyond it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from numbers import Real
from typing import Any

import torch

from .timing import MIN_BLOCKS, Measurement, check_count, check_timing, quartiles, waiting_clock

BAND = 1.25


def _ratio(r: float) -> str:
    return f"{r:.0f}x" if r >= 9.95 else f"{r:.1f}x"


class Comparison:
    """Two sides timed round by round; ``ratio`` > 1 means the second took longer."""

    def __init__(
        self, first: Measurement, second: Measurement, ratios: list[float], band: float = BAND
    ) -> None:
        self.first, self.second, self.ratios, self.band = first, second, list(ratios), band
        self.ratio_q1, self.ratio, self.ratio_q3 = quartiles(self.ratios)

    @property
    def outcome(self) -> str:
        """'agree', 'slower', 'faster' or 'unclear': the second side against the first."""
        if 1 / self.band <= self.ratio <= self.band:
            return "agree"
        if self.ratio_q1 > self.band:
            return "slower"
        if self.ratio_q3 < 1 / self.band:
            return "faster"
        return "unclear"

    def __str__(self) -> str:
        a, b = self.first.label or "first", self.second.label or "second"
        n = len(self.ratios)
        if self.outcome == "agree":
            return f"{a} and {b} took about as long (within {self.band:g}x), in {n} rounds."
        # The side that took longer is the subject, so the ratio reads >= 1.
        up = self.ratio >= 1
        longer, shorter, r = (b, a, self.ratio) if up else (a, b, 1 / self.ratio)
        k = sum((x if up else 1 / x) > self.band for x in self.ratios)  # rounds beyond the band
        rounds = f"in all {n} rounds" if k == n else f"in {k} of {n} rounds"
        if self.outcome == "unclear":
            unclear = f"no clear difference between {a} and {b}"
            return f"{unclear}: {longer} took {_ratio(r)} as long {rounds}."
        return f"{longer} took {_ratio(r)} as long as {shorter}, {rounds}."

    __repr__ = __str__


def _block(fn: Callable[[], Any], number: int, clock: Callable[[], float]) -> float:
    tik = clock()
    for _ in range(number):
        fn()
    return clock() - tik


def _calls_per_block(fn: Callable[[], Any], clock: Callable[[], float], target: float) -> int:
    """How many calls of ``fn`` last about ``target`` seconds (at least one call)."""
    number = 1
    while (elapsed := _block(fn, number, clock)) < target:
        # Aim 10 % past the target; a block the clock sees as instant grows fast.
        number = max(number + 1, math.ceil(1.1 * number * target / max(elapsed, 1e-9)))
    return number


def compare(
    first: Callable[[], Any],
    second: Callable[[], Any],
    *,
    labels: tuple[str, str] = ("first", "second"),
    device: torch.device | str | None = None,
    rounds: int = MIN_BLOCKS,
    min_run_time: float = 0.4,
    warmup: int = 3,
    band: float = BAND,
) -> Comparison:
    """Time two functions called with no arguments against each other, and judge the gap.

    After ``warmup`` calls of each, each side gets a block size of its own (all blocks
    together fill about ``min_run_time``), then ``rounds`` rounds each time one block
    per side, first-second, second-first, ..., on a clock that waits for ``device``.
    """
    check_timing(first, min_run_time, warmup, "first")
    check_timing(second, min_run_time, warmup, "second")
    if isinstance(labels, str) or not isinstance(labels, Sequence) or len(labels) != 2:
        raise TypeError(f"labels must be two names, as in ('x * 2', 'x + x'), got {labels!r}")
    check_count(rounds, "rounds", MIN_BLOCKS)
    # An infinite band would call every pair "about as long".
    if isinstance(band, bool) or not (isinstance(band, Real) and 1 < band < math.inf):
        raise ValueError(f"band must be a finite factor > 1 (1.25: 1/1.25 to 1.25), got {band!r}")
    clock = waiting_clock(device)
    sides = (first, second)
    for _ in range(warmup):
        first()
        second()
    numbers = [_calls_per_block(fn, clock, min_run_time / (2 * rounds)) for fn in sides]
    times: list[list[float]] = [[], []]
    for r in range(rounds):
        for s in (0, 1) if r % 2 == 0 else (1, 0):
            times[s].append(_block(sides[s], numbers[s], clock) / numbers[s])
    # A block the clock saw as instant (a coarse clock) counts as one tick.
    ratios = [b / max(a, 1e-9) for a, b in zip(*times, strict=True)]
    first_m, second_m = (Measurement(t, label) for t, label in zip(times, labels, strict=True))
    return Comparison(first_m, second_m, ratios, band)
