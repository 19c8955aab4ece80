"""Clocks that tell the truth about asynchronous devices.

``Timer`` and ``Benchmark`` keep the d2l book's interface, but wait for the device
before every reading (else a GPU time is only the time to queue the kernels);
``benchmark`` is the careful instrument: warm-up, repeated blocks, a median and
its spread. By default each waits for the GPUs the helpers offer: none on a CPU run.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import numbers
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
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


# Every timed side gets at least this many blocks, so that its spread is real.
MIN_RUNS = 10


def _calibrate(
    block: Callable[[int], float], clock: Callable[[], float], block_time: float, longest: float
) -> tuple[int, float]:
    """Calls per block, so that reading the clock costs under 1 % of a block and a block
    lasts about ``block_time`` (never more than ``longest``, whatever the clock costs);
    and the time of a block of that many."""
    gaps = []
    for _ in range(5):
        tik = clock()
        gaps.append(clock() - tik)
    target = min(max(100 * statistics.median(gaps), block_time), longest)
    number = 1
    while True:
        elapsed = block(number)
        if elapsed >= target:
            return number, elapsed
        # Aim 10 % past the target; a block the clock dominates grows fast.
        number = max(number + 1, math.ceil(1.1 * number * target / max(elapsed, 1e-9)))


def _check_setting(
    name: str, value: object, kind: type, low: float, high: float, accepted: str
) -> None:
    """Refuse a setting that is not a ``kind`` (bools are not) with low < value <= high."""
    message = f"{name} must be {accepted}, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(message)
    if not low < value <= high:  # also false for nan
        raise ValueError(message)


# Bounds that keep a typo from running for days: an hour of timing, a thousand
# warm-up calls (lazy set-up is done after a few), threads a machine can have.
MAX_RUN_TIME = 3600.0
MAX_WARMUP = 1000
MAX_THREADS = 1024


def _check_timing_settings(min_run_time: object, warmup: object, num_threads: object) -> None:
    _check_setting(
        "min_run_time",
        min_run_time,
        numbers.Real,
        0,
        MAX_RUN_TIME,
        f"a number of seconds > 0 and <= {MAX_RUN_TIME:g}",
    )
    _check_setting(
        "warmup", warmup, numbers.Integral, -1, MAX_WARMUP, f"a count from 0 to {MAX_WARMUP}"
    )
    if num_threads is not None:
        _check_setting(
            "num_threads",
            num_threads,
            numbers.Integral,
            0,
            MAX_THREADS,
            f"a count from 1 to {MAX_THREADS}, or None",
        )


def _waiting_clock(device: torch.device | str | None) -> Callable[[], float]:
    """A clock that first waits for ``device`` (by default the helpers' GPUs)."""
    devices = _devices_to_wait_for(device)

    def clock() -> float:
        _wait(devices)
        return _clock()

    return clock


def _block_timer(fn: Callable[[], Any], clock: Callable[[], float]) -> Callable[[int], float]:
    """Seconds for ``number`` calls of ``fn``, the device waited for at both ends."""

    def block(number: int) -> float:
        tik = clock()
        for _ in range(number):
            fn()
        return clock() - tik

    return block


@contextlib.contextmanager
def _threads(num_threads: int | None) -> Iterator[None]:
    """Set torch's CPU threads meanwhile (None: as is), and restore them after."""
    before = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
    (at least ``MIN_RUNS`` blocks), reading a clock that first waits for ``device`` (by default
    the helpers' GPUs). Blocks are sized so that waiting for a GPU stays under 1 % of
    a block, yet many fit: the spread is real. ``num_threads`` sets torch's CPU
    threads meanwhile (default: as is).
    """
    _check_timing_settings(min_run_time, warmup, num_threads)
    clock = _waiting_clock(device)
    block = _block_timer(functools.partial(fn, *args, **kwargs), clock)
    with _threads(num_threads):
        for _ in range(warmup):
            fn(*args, **kwargs)
        number, elapsed = _calibrate(block, clock, min_run_time / 100, min_run_time)
        times = [elapsed]  # the last calibration block is a run like the others
        while sum(times) < min_run_time or len(times) < MIN_RUNS:
            times.append(block(number))
    return Measurement.from_times([t / number for t in times], number, label)
