"""Clocks that tell the truth about asynchronous devices.

A kernel launch returns before the GPU has run it, so every clock here first waits
for the device (by default every GPU this process used; none on the CPU). ``Timer``
and ``Benchmark`` keep the d2l book's interface; ``benchmark`` is the careful one.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import threading
import time
import timeit
from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any

import torch

from .devices import gpus_named, in_use, synchronize

_clock = time.perf_counter
# Every timed side gets at least this many blocks of calls, so that its spread is real.
MIN_BLOCKS = 10
# The longest min_run_time taken: a longer timing is a typo, and 1e300 s would never end.
MAX_RUN_TIME = 3600
# torch's thread count is the process's: benchmarks that set it run one at a time.
_threads_set = threading.RLock()


def waiting_clock(device: torch.device | str | None = None) -> Callable[[], float]:
    """``time.perf_counter``, read once the work queued on ``device`` is done."""
    gpus = gpus_named(device)  # resolved once: a reading costs a clock call (plus the wait)

    def clock() -> float:
        for gpu in gpus:
            if in_use(gpu):  # a card this process never used has nothing queued
                torch.accelerator.synchronize(gpu)
        return _clock()

    return clock


class Timer:
    """Record several running times; starts on creation, as in the book."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.times: list[float] = []
        self._clock, self._tik = waiting_clock(device), None
        self.start()

    def start(self) -> None:
        """Start the clock once queued device work is done."""
        self._tik = self._clock()

    def stop(self) -> float:
        """Stop the clock once queued device work is done; return and record the time."""
        now, tik = self._clock(), self._tik
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
        self.description, self.device, self.elapsed = description, device, None

    def __enter__(self) -> Benchmark:
        self._timer = Timer(self.device)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.elapsed = self._timer.stop()
        print(f"{self.description}: {self.elapsed:.4f} sec")


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """The first quartile, the median and the third quartile of ``values``."""
    if len(values) < 2:
        return (values[0],) * 3
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def format_seconds(seconds: float) -> str:
    """Seconds in the largest unit (s, ms, us, ns) not above the duration."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


class Measurement:
    """Seconds per call, one figure per block of calls: their median and spread."""

    def __init__(self, times: Sequence[float], label: str = "") -> None:
        if not times:
            raise ValueError("a Measurement needs at least one time")
        self.times, self.label = list(times), label
        self.q1, self.median, self.q3 = quartiles(self.times)

    @property
    def iqr(self) -> float:
        """The interquartile range: the spread of the middle half of the blocks."""
        return self.q3 - self.q1

    def __str__(self) -> str:
        head = f"{self.label}: " if self.label else ""
        return (
            f"{head}{format_seconds(self.median)} median, IQR {format_seconds(self.iqr)} "
            f"({len(self.times)} blocks)"
        )

    __repr__ = __str__


def check_count(
    value: object, name: str, least: int, more: str = "", most: float = math.inf
) -> None:
    """Refuse anything but a whole number from ``least`` to ``most``: a flag, a float, a tensor."""
    if isinstance(value, bool) or not isinstance(value, Integral) or not least <= value <= most:
        span = f">= {least}" if most == math.inf else f"from {least} to {most}"
        raise ValueError(f"{name} must be a whole number {span}{more}, got {value!r}")


def check_timing(fn: object, min_run_time: float, warmup: int, name: str = "fn") -> None:
    """Refuse settings no timing can use, naming what is accepted (a huge
    ``min_run_time`` would loop for ever or overflow deep inside)."""
    if not callable(fn):
        raise TypeError(f"{name} must be a function to call with no arguments, got {fn!r}")
    seconds = not isinstance(min_run_time, bool) and isinstance(min_run_time, Real)
    if not (seconds and 0 < min_run_time <= MAX_RUN_TIME):  # nan fails too
        raise ValueError(
            f"min_run_time must be seconds > 0, at most {MAX_RUN_TIME} (1 h), "
            f"got {min_run_time!r:.40}"
        )
    check_count(warmup, "warmup", 0)


def benchmark(
    fn: Callable[[], Any],
    *,
    device: torch.device | str | None = None,
    label: str = "",
    min_run_time: float = 0.2,
    warmup: int = 3,
    num_threads: int | None = None,
) -> Measurement:
    """Time ``fn()`` the careful way: the median and IQR of at least 10 blocks of calls.

    After ``warmup`` calls, ``torch.utils.benchmark.Timer.blocked_autorange`` sizes
    blocks once, so that reading the clock (which waits for ``device``) costs little
    beside one, and near ``min_run_time / 10``; blocks of that size then run for
    ``min_run_time`` seconds, and on until there are 10.
    ``num_threads``: torch's CPU threads meanwhile (default: as they are), at most one
    per CPU. torch's count is the process's, so every thread runs with it meanwhile, and
    benchmarks in several threads run one at a time, each restoring the count it found.
    """
    check_timing(fn, min_run_time, warmup)
    if num_threads is not None:
        cpus = os.cpu_count() or 1
        check_count(num_threads, "num_threads", 1, " (this machine's CPUs) or None", cpus)
    try:  # Imported here: it loads setuptools, too slow for every ``import d2l_gpu``.
        from torch.utils.benchmark import Timer as TorchTimer
        from torch.utils.benchmark.utils.common import set_torch_threads
    except ModuleNotFoundError as e:  # torch requires setuptools from Python 3.12 only
        why = f"benchmark() needs {e.name} (torch.utils.benchmark imports it): pip install {e.name}"
        raise ModuleNotFoundError(why, name=e.name) from None

    threads = num_threads or torch.get_num_threads()
    clock = waiting_clock(device)
    timer = TorchTimer("fn()", globals={"fn": fn}, timer=clock, num_threads=threads)
    block = timeit.Timer("fn()", timer=clock, globals={"fn": fn})
    with _threads_set, set_torch_threads(threads):  # the warm-up runs as the timed calls will
        for _ in range(warmup):
            fn()
        # A short first run keeps blocks near min_run_time / 10 when the clock waits on a GPU.
        first = timer.blocked_autorange(min_run_time=min_run_time / MIN_BLOCKS)
        number, times, spent = first.number_per_run, list(first.times), sum(first.raw_times)
        # More blocks of that size, on the loop Timer runs (gc off), without sizing again:
        # sizing costs a call or more, so anew for each block it doubled a long call's time.
        while len(times) < MIN_BLOCKS or spent < min_run_time:
            seconds = block.timeit(number)
            times.append(seconds / number)
            spent += seconds
    return Measurement(times, label)


def host_and_device_seconds(
    step: Callable[[], Any], device: torch.device | str, steps: int = 20
) -> tuple[float, float]:
    """Seconds per call of ``step()``: to queue it on the host, and to run it on a CUDA GPU.

    After a warm-up call, ``steps`` calls are queued behind large products: the host
    only queues them (its time, by the clock), then the GPU runs them back to back
    (its time, by CUDA events). If the GPU reached them before the host was done, it
    is given more to do and asked again.
    """
    if (device := torch.device(device)).type != "cuda":
        raise ValueError(
            "host_and_device_seconds times the GPU with CUDA events: device must be a "
            f"CUDA device such as 'cuda:0', got {str(device)!r}"
        )
    check_count(steps, "steps", 1)
    if not callable(step):
        raise TypeError(f"step must be a function to call with no arguments, got {step!r}")
    gpus_named(device)  # a clear error where it is missing, also under a CPU-only torch
    hold = torch.randn(4096, 4096, device=device)  # its products keep the GPU busy
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream(device)
    step()  # warm-up
    for products in (10, 40, 160):  # more, if the GPU ran dry before the host was done
        synchronize(device)
        for _ in range(products):
            hold @ hold
        start.record(stream)
        tik = _clock()
        for _ in range(steps):
            step()
        host = (_clock() - tik) / steps
        queued = not start.query()  # the GPU had not reached the first step yet
        end.record(stream)
        end.synchronize()
        if queued:
            break
    return host, start.elapsed_time(end) / 1e3 / steps
