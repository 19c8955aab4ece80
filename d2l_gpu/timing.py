"""Clocks that tell the truth about asynchronous devices.

``Timer`` and ``Benchmark`` keep the d2l book's interface, but wait for the device
before every reading (else a GPU time is only the time to queue the kernels);
``benchmark`` is the careful instrument: warm-up, repeated blocks, a median and
its spread. By default each waits for the GPUs the helpers offer: none on a CPU run.
"""

from __future__ import annotations

import itertools
import math
import numbers
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .devices import _devices_to_wait_for, _wait

_clock = time.perf_counter


class Timer:
    """Record several running times; starts on creation, as in the book."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.times: list[float] = []
        # Resolved once, so each reading costs a clock call (plus the wait).
        self._devices = _devices_to_wait_for(device)
        self._tik: float | None = None
        self.start()

    def start(self) -> None:
        """Start the clock once queued device work is done."""
        if self._devices:
            _wait(self._devices)
        self._tik = _clock()

    def stop(self) -> float:
        """Stop the clock after queued device work is done; return and record the time."""
        if self._devices:
            _wait(self._devices)
        now, tik = _clock(), self._tik
        if tik is None:
            raise RuntimeError("Timer.stop() needs a running timer; call start() first")
        self._tik = None
        self.times.append(now - tik)
        return now - tik

    def avg(self) -> float:
        """The mean of the recorded times."""
        if not self.times:
            raise ValueError("Timer.avg() needs at least one recorded time; call stop() first")
        return sum(self.times) / len(self.times)

    def sum(self) -> float:
        """The total of the recorded times."""
        return sum(self.times)

    def cumsum(self) -> list[float]:
        """The running total of the recorded times."""
        return list(itertools.accumulate(self.times))


class Benchmark:
    """Time a ``with`` block and print ``description: 0.1234 sec``."""

    def __init__(self, description: str = "Done", device: torch.device | str | None = None) -> None:
        self.description = description
        self.device = device
        self.elapsed: float | None = None

    def __enter__(self) -> Benchmark:
        self._timer = Timer(self.device)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.elapsed = self._timer.stop()
        print(f"{self.description}: {self.elapsed:.4f} sec")


@dataclass(frozen=True)
class Measurement:
    """Seconds per call: the median of repeated blocks, their spread and count."""

    median: float
    iqr: float
    runs: int
    number_per_run: int
    times: list[float] = field(repr=False)
    label: str = ""

    @classmethod
    def from_times(
        cls, times: Sequence[float], number_per_run: int = 1, label: str = ""
    ) -> Measurement:
        """Summarize seconds-per-call readings, each the mean of ``number_per_run`` calls."""
        if not times:
            raise ValueError("Measurement.from_times needs at least one time")
        times = list(times)
        q1, median, q3 = _quantiles(times)
        return cls(median, q3 - q1, len(times), number_per_run, times, label)

    @property
    def q1(self) -> float:
        return _quantiles(self.times)[0]

    @property
    def q3(self) -> float:
        return _quantiles(self.times)[2]

    def __str__(self) -> str:
        head = f"{self.label}: " if self.label else ""
        return (
            f"{head}{_format_duration(self.median)} median, IQR {_format_duration(self.iqr)}, "
            f"{self.runs} runs x {self.number_per_run}"
        )


def _quantiles(times: list[float]) -> list[float]:
    if len(times) < 2:
        return [times[0]] * 3
    return statistics.quantiles(times, n=4, method="inclusive")


def _format_duration(seconds: float) -> str:
    """Seconds in the largest unit (s, ms, us, ns) not above the duration."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


def _calibrate(
    block: Callable[[int], float], clock: Callable[[], float], min_run_time: float
) -> tuple[int, float]:
    """Calls per block, so that reading the clock costs under 1 % of a block and
    ``min_run_time`` holds about 100 blocks; and the time of a block of that many."""
    gaps = []
    for _ in range(5):
        tik = clock()
        gaps.append(clock() - tik)
    target = max(100 * statistics.median(gaps), min_run_time / 100)
    number = 1
    while True:
        elapsed = block(number)
        if elapsed >= target or elapsed >= min_run_time:
            return number, elapsed
        # Aim 10 % past the target; a block the clock dominates grows fast.
        number = max(number + 1, math.ceil(1.1 * number * target / max(elapsed, 1e-9)))


def _check_setting(name: str, value: object, kind: type, low: float, accepted: str) -> None:
    """Refuse a setting that is not a finite ``kind`` (bools are not) above ``low``."""
    message = f"{name} must be {accepted}, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(message)
    if not low < value < math.inf:  # also false for nan
        raise ValueError(message)


def benchmark(
    fn: Callable[..., Any],
    *args: Any,
    device: torch.device | str | None = None,
    min_run_time: float = 0.2,
    warmup: int = 3,
    num_threads: int | None = None,
    label: str = "",
    **kwargs: Any,
) -> Measurement:
    """Time ``fn(*args, **kwargs)`` the careful way and return its median and IQR.

    After ``warmup`` calls, runs blocks of calls for about ``min_run_time`` seconds
    (at least 3 blocks), reading a clock that first waits for ``device`` (by default
    the helpers' GPUs). Blocks are sized so that waiting for a GPU stays under 1 % of
    a block, yet many fit: the spread is real. ``num_threads`` sets torch's CPU
    threads meanwhile (default: as is).
    """
    _check_setting("min_run_time", min_run_time, numbers.Real, 0, "a finite number of seconds > 0")
    _check_setting("warmup", warmup, numbers.Integral, -1, "a count >= 0")
    if num_threads is not None:
        _check_setting("num_threads", num_threads, numbers.Integral, 0, "a count >= 1 or None")
    devices = _devices_to_wait_for(device)

    def clock() -> float:
        _wait(devices)
        return _clock()

    def block(number: int) -> float:
        tik = clock()
        for _ in range(number):
            fn(*args, **kwargs)
        return clock() - tik

    threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        for _ in range(warmup):
            fn(*args, **kwargs)
        number, elapsed = _calibrate(block, clock, min_run_time)
        times = [elapsed]  # the last calibration block is a run like the others
        while sum(times) < min_run_time or len(times) < 3:
            times.append(block(number))
    finally:
        torch.set_num_threads(threads)
    return Measurement.from_times([t / number for t in times], number, label)
