"""The library's own costs, each as a ratio or per-call figure measured in this run.

Run with `make bench` (or `python tests/benchmarks/bench_overhead.py`). Goals:
`import d2l_gpu` adds <= 5 % to `import torch`; `try_gpu()` / `try_all_gpus()`
<= 2 us a call; a Timer start/stop pair <= 0.5 us; `benchmark()` and `Timer`
agree with `torch.utils.benchmark.Timer` within 5 % on the same matmul.
Exits 1 when a goal is missed.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import timeit

import torch
import torch.utils.benchmark as torch_benchmark

import d2l_gpu

IMPORT_PROBE = (
    "import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); "
    "import d2l_gpu; t2 = time.perf_counter(); print(t1 - t0, t2 - t1)"
)


def import_overhead(repeats: int = 5) -> float:
    """Median over fresh interpreters of (import d2l_gpu after torch) / (import torch)."""
    ratios = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True
        )
        torch_s, ours_s = map(float, out.stdout.split())
        ratios.append(ours_s / torch_s)
    return statistics.median(ratios)


def per_call_us(stmt: str, number: int = 100_000) -> float:
    """Median microseconds per call over 7 repeats of `number` calls."""
    runs = timeit.repeat(stmt, globals={"d2l_gpu": d2l_gpu}, number=number, repeat=7)
    return statistics.median(runs) / number * 1e6


def timer_pair_us(number: int = 100_000) -> float:
    timer = d2l_gpu.Timer()

    def pair() -> None:
        timer.start()
        timer.stop()

    runs = timeit.repeat(pair, number=number, repeat=7)
    return statistics.median(runs) / number * 1e6


def _timer_median(fn, number: int, blocks: int) -> float:
    timer = d2l_gpu.Timer()
    for _ in range(blocks):
        timer.start()
        for _ in range(number):
            fn()
        timer.stop()
    return statistics.median(timer.times) / number


def matmul_agreement(n: int, rounds: int = 11) -> tuple[float, float]:
    """Median ratios (benchmark / torch Timer, Timer / torch Timer), interleaved rounds."""
    x = torch.randn(n, n)
    threads = torch.get_num_threads()
    reference = torch_benchmark.Timer(
        "torch.mm(x, x)", globals={"torch": torch, "x": x}, num_threads=threads
    )
    ours, timers = [], []
    for _ in range(rounds):
        ref = reference.blocked_autorange(min_run_time=0.15)
        ours.append(d2l_gpu.benchmark(torch.mm, x, x, min_run_time=0.15).median / ref.median)
        # Same block size and count as the reference, so both see the same noise.
        blocks = len(ref.times)
        timers.append(
            _timer_median(lambda: torch.mm(x, x), ref.number_per_run, blocks) / ref.median
        )
    return statistics.median(ours), statistics.median(timers)


def main() -> int:
    results: list[tuple[str, float, str, bool]] = []
    ratio = import_overhead()
    results.append(("import d2l_gpu / import torch", ratio * 100, "%  <= 5", ratio <= 0.05))
    for stmt in ("d2l_gpu.try_gpu()", "d2l_gpu.try_all_gpus()"):
        us = per_call_us(stmt)
        results.append((stmt, us, "us <= 2", us <= 2))
    us = timer_pair_us()
    results.append(("Timer start+stop", us, "us <= 0.5", us <= 0.5))
    for n in (100, 512):
        bench_ratio, timer_ratio = matmul_agreement(n)
        for name, r in (("benchmark()", bench_ratio), ("Timer", timer_ratio)):
            deviation = abs(r - 1) * 100
            results.append(
                (f"{name} vs torch Timer, {n}x{n} mm", deviation, "%  <= 5", deviation <= 5)
            )

    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} threads, d2l_gpu {d2l_gpu.__version__}")
    width = max(len(name) for name, *_ in results)
    for name, value, goal, ok in results:
        print(f"[{'OK' if ok else 'MISS'}] {name:<{width}}  {value:8.3f} {goal}")
    return 0 if all(ok for *_, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
