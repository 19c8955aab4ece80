"""Clocks that tell the truth about asynchronous devices.

``Timer`` and ``Benchmark`` keep the d2l book's interface, but read
``time.perf_counter`` and synchronize the device before every reading: without
that, a GPU time is only the time to queue the kernels. ``benchmark`` is the
careful instrument: warm-up, repeated blocks and a median with its spread, built
on ``torch.utils.benchmark.Timer``.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .devices import _device_to_wait_for, synchronize

__all__ = ["Benchmark", "Measurement", "Timer", "benchmark"]


def _syncer(device: torch.device | str | None) -> Callable[[], None] | None:
    """Resolve once which device to wait for, so each clock reading stays cheap."""
    target = _device_to_wait_for(device)
    return None if target is None else lambda: synchronize(target)


class Timer:
    """Record several running times; starts on creation, as in the book."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.times: list[float] = []
        self._sync = _syncer(device)
        self._tik: float | None = None
        self.start()

    def start(self) -> None:
        """Start the clock once queued device work is done."""
        if self._sync is not None:
            self._sync()
        self._tik = time.perf_counter()

    def stop(self) -> float:
        """Stop the clock after queued device work is done; return and record the time."""
        if self._sync is not None:
            self._sync()
        now = time.perf_counter()
        if self._tik is None:
            raise RuntimeError("Timer.stop() needs a running timer; call start() first")
        self.times.append(now - self._tik)
        self._tik = None
        return self.times[-1]

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
            f"{head}{_human(self.median)} median, IQR {_human(self.iqr)}, "
            f"{self.runs} runs x {self.number_per_run}"
        )


def _quantiles(times: list[float]) -> list[float]:
    if len(times) < 2:
        return [times[0]] * 3
    return statistics.quantiles(times, n=4, method="inclusive")


def _human(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


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

    ``torch.utils.benchmark.Timer`` sizes blocks until clock overhead vanishes;
    we give it a clock that waits for ``device`` (or the current accelerator),
    which it otherwise does for CUDA only, and keep torch's own thread count
    unless ``num_threads`` says otherwise (its default of 1 would understate
    what a reader's code gets).
    """
    if min_run_time <= 0:
        raise ValueError(f"min_run_time must be a positive number of seconds, got {min_run_time!r}")
    if warmup < 0:
        raise ValueError(f"warmup must be a count >= 0, got {warmup!r}")
    sync = _syncer(device)

    def clock() -> float:
        if sync is not None:
            sync()
        return time.perf_counter()

    # Imported here: it pulls in setuptools, which would slow `import d2l_gpu`.
    import torch.utils.benchmark as torch_benchmark

    for _ in range(warmup):
        fn(*args, **kwargs)
    timer = torch_benchmark.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        timer=clock,
        num_threads=num_threads or torch.get_num_threads(),
        label=label or getattr(fn, "__name__", "fn"),
    )
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Measurement.from_times(m.times, m.number_per_run, label)
