"""Exercise 4: two products at once on two devices, or in sequence on one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from ..devices import cpu, synchronize, try_all_gpus
from ..timing import benchmark
from ._common import _min_run_time


@dataclass(frozen=True)
class ConcurrencyRow:
    """Two products run one after the other or at the same time."""

    mode: str  # "sequential" or "concurrent"
    devices: str
    median: float
    iqr: float
    runs: int


@dataclass(frozen=True)
class ConcurrencyStudy:
    """What was really measured (``kind``), the times, and sequential / concurrent."""

    kind: str
    n: int
    rows: list[ConcurrencyRow]
    speedup: float
    note: str


KIND_GPUS = "two GPUs"
KIND_STREAMS = "two CUDA streams on one GPU"
KIND_THREADS = "two CPU threads, one core each (CPU stand-in, not a GPU result)"


def _pair(device: torch.device, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.randn(n, n, generator=gen).to(device),
        torch.randn(n, n, generator=gen).to(device),
    )


def _study(
    kind: str,
    n: int,
    seq: Callable[[], object],
    conc: Callable[[], object],
    where: tuple[str, str],
    min_run_time: float,
) -> ConcurrencyStudy:
    rows = []
    for mode, fn, devices in (("sequential", seq, where[0]), ("concurrent", conc, where[1])):
        # fn waits for its own devices, so the clock stays honest with several of them.
        m = benchmark(fn, device=cpu(), min_run_time=min_run_time, label=f"{kind} {mode}")
        rows.append(ConcurrencyRow(mode, devices, m.median, m.iqr, m.runs))
    notes = {
        KIND_GPUS: "each GPU runs its own product; near 2x is the expected scaling",
        KIND_STREAMS: (
            "one GPU, two streams: a large product already fills the GPU, so expect little "
            "gain; this shows overlap on one device, not scaling across two"
        ),
        KIND_THREADS: (
            "no second GPU here: two CPU cores stand in for two devices; "
            "the ratio says nothing about GPUs"
        ),
    }
    return ConcurrencyStudy(kind, n, rows, rows[0].median / rows[1].median, notes[kind])


def two_products(
    devices: Sequence[torch.device | str] | None = None,
    n: int | None = None,
    quick: bool = False,
    min_run_time: float | None = None,
) -> ConcurrencyStudy:
    """Exercise 4: two n x n products in sequence on one device vs at once.

    Two or more GPUs: one product each, against both on the first GPU. One
    CUDA GPU: two streams on it. Otherwise (CPU, or an accelerator without
    streams): two CPU threads limited to one core each, labelled as a stand-in.
    """
    devs = [torch.device(d) for d in devices] if devices else try_all_gpus()
    gpus = [d for d in devs if d.type != "cpu"]
    gen = torch.Generator().manual_seed(0)
    if len(gpus) >= 2:
        kind, first, second = KIND_GPUS, gpus[0], gpus[1]
    elif gpus and gpus[0].type == "cuda":
        kind, first, second = KIND_STREAMS, gpus[0], gpus[0]
    else:
        kind, first, second = KIND_THREADS, cpu(), cpu()
    if n is None:
        n = (2048 if quick else 8192) if kind != KIND_THREADS else (384 if quick else 1024)
    mrt = min_run_time or _min_run_time(first, quick)
    a0, b0 = _pair(first, n, gen)
    a1, b1 = _pair(second, n, gen)
    if kind == KIND_GPUS:
        c0, c1 = _pair(first, n, gen)

        def seq() -> None:
            torch.mm(a0, b0)
            torch.mm(c0, c1)
            synchronize(first)

        def conc() -> None:
            torch.mm(a0, b0)  # returns at once: the launch is asynchronous
            torch.mm(a1, b1)
            synchronize(first)
            synchronize(second)

        return _study(kind, n, seq, conc, (str(first), f"{first}, {second}"), mrt)
    if kind == KIND_STREAMS:
        streams = (torch.cuda.Stream(first), torch.cuda.Stream(first))

        def seq() -> None:
            torch.mm(a0, b0)
            torch.mm(a1, b1)
            synchronize(first)

        def conc() -> None:
            for stream, (x, y) in zip(streams, ((a0, b0), (a1, b1)), strict=True):
                stream.wait_stream(torch.cuda.current_stream(first))
                with torch.cuda.stream(stream):
                    torch.mm(x, y)
            synchronize(first)

        return _study(kind, n, seq, conc, (f"{first}, 1 stream", f"{first}, 2 streams"), mrt)
    with ThreadPoolExecutor(2, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        # Start both workers now, so neither measurement pays for creating a thread.
        list(pool.map(torch.mm, (a0, a1), (b0, b1)))

        def seq() -> None:
            pool.submit(lambda: (torch.mm(a0, b0), torch.mm(a1, b1))).result()

        def conc() -> None:
            jobs = [pool.submit(torch.mm, a0, b0), pool.submit(torch.mm, a1, b1)]
            for job in jobs:
                job.result()

        return _study(kind, n, seq, conc, ("cpu, 1 thread", "cpu, 2 threads"), mrt)
