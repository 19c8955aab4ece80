"""Which of two pieces of code takes longer, decided by one rule wherever it is asked.

A verdict printed from one noisy run can flip on the next. ``compare`` times both
sides in alternating rounds (first, second, second, first, ...), so a slow phase
of the machine falls on both; it judges the ratio of the two blocks of each round,
and calls a difference only when the middle half of those ratios lies beyond a
stated tolerance.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .timing import (
    MIN_RUNS,
    Measurement,
    _block_timer,
    _calibrate,
    _check_setting,
    _check_timing_settings,
    _quantiles,
    _threads,
    _waiting_clock,
)

MAX_ROUNDS = 10_000


@dataclass(frozen=True)
class Comparison:
    """Two sides timed round by round; ``ratio`` > 1 means the second takes longer."""

    first: Measurement
    second: Measurement
    ratios: list[float] = field(repr=False)  # second / first, one per round
    tolerance: float

    @property
    def ratio(self) -> float:
        return _quantiles(self.ratios)[1]

    @property
    def ratio_q1(self) -> float:
        return _quantiles(self.ratios)[0]

    @property
    def ratio_q3(self) -> float:
        return _quantiles(self.ratios)[2]

    @property
    def outcome(self) -> str:
        """'agree', 'slower', 'faster' or 'unclear': the second side against the first."""
        high, low = 1 + self.tolerance, 1 / (1 + self.tolerance)
        if low <= self.ratio <= high:
            return "agree"
        if self.ratio > high and self.ratio_q1 > high:
            return "slower"
        if self.ratio < low and self.ratio_q3 < low:
            return "faster"
        return "unclear"

    @property
    def verdict(self) -> str:
        """One line, starting ``verdict: ``, that says what the rule decided and why."""
        a, b = self.first.label or "first", self.second.label or "second"
        gap = f"{b} takes {_times(self.ratio)} the time of {a}"
        spread = f"q1-q3 {_times(self.ratio_q1)} to {_times(self.ratio_q3)}"
        band = f"±{self.tolerance * 100:g} %"
        outcome = self.outcome
        if outcome == "agree":
            return f"verdict: {gap}: they agree within the {band} tolerance"
        if outcome == "unclear":
            unclear = f"the round ratios ({spread}) reach into {band}: no clear difference"
            return f"verdict: {gap}, but {unclear}"
        return f"verdict: {gap} ({spread} over {len(self.ratios)} rounds): clearly {outcome}"

    def __str__(self) -> str:
        return f"{self.first}\n{self.second}\n{self.verdict}"


def _times(ratio: float) -> str:
    return f"{ratio:.3g}x" if ratio < 0.1 else f"{ratio:.2f}x"


def compare(
    first: Callable[[], Any],
    second: Callable[[], Any],
    *,
    labels: tuple[str, str] = ("first", "second"),
    device: torch.device | str | None = None,
    rounds: int = MIN_RUNS,
    min_run_time: float = 0.4,
    warmup: int = 3,
    num_threads: int | None = None,
    tolerance: float = 0.1,
) -> Comparison:
    """Time two zero-argument callables against each other and judge the gap.

    After ``warmup`` calls of each, every side gets a block size of its own (clock
    cost under 1 % of a block, both sides together about ``min_run_time``), then
    ``rounds`` rounds each time one block per side, in the order first-second,
    second-first, ... Clocks wait for ``device`` (by default the helpers' GPUs).
    The sides agree when the median round ratio is within ``tolerance`` of 1.
    """
    for name, fn in (("first", first), ("second", second)):
        if not callable(fn):
            raise TypeError(f"compare() takes two callables; {name} is {fn!r}")
    if not (
        isinstance(labels, tuple) and len(labels) == 2 and all(isinstance(x, str) for x in labels)
    ):
        raise TypeError(f"labels must be a tuple of two strings, got {labels!r}")
    _check_timing_settings(min_run_time, warmup, num_threads)
    _check_setting(
        "rounds",
        rounds,
        numbers.Integral,
        MIN_RUNS - 1,
        MAX_ROUNDS,
        f"a count from {MIN_RUNS} to {MAX_ROUNDS}",
    )
    _check_setting("tolerance", tolerance, numbers.Real, 0, 1, "a fraction > 0 and <= 1")
    clock = _waiting_clock(device)
    blocks = [_block_timer(first, clock), _block_timer(second, clock)]
    block_time = min_run_time / (2 * rounds)
    with _threads(num_threads):
        for _ in range(warmup):
            first()
            second()
        numbers_per_block = [_calibrate(b, clock, block_time, min_run_time / 2)[0] for b in blocks]
        times: list[list[float]] = [[], []]
        for r in range(rounds):
            for side in (0, 1) if r % 2 == 0 else (1, 0):
                times[side].append(blocks[side](numbers_per_block[side]) / numbers_per_block[side])
    # A block the clock saw as instant (a coarse clock) counts as one tick.
    ratios = [b / max(a, 1e-9) for a, b in zip(*times, strict=True)]
    first_m, second_m = (
        Measurement.from_times(t, n, label)
        for t, n, label in zip(times, numbers_per_block, labels, strict=True)
    )
    return Comparison(first_m, second_m, ratios, float(tolerance))
