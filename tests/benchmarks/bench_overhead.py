"""The library's own costs, each as a ratio or per-call figure measured in this run.

Run with `make bench` (or `python tests/benchmarks/bench_overhead.py`). Goals:
`import d2l_gpu` adds <= 5 % to `import torch`; `try_gpu()` / `try_all_gpus()`
<= 2 us a call; a Timer start/stop pair <= 0.5 us; `benchmark()` and `Timer`
agree with `torch.utils.benchmark.Timer` within 5 % on the same CPU matmul;
`benchmark()` of an empty call takes at most 1.5 x `min_run_time`; `compare()` of
two identical calls (1x1, 100x100 and 512x512 CPU products, and a 2048x2048 one on
the helpers' GPU if there is one) says "agree" every time, at its default ±10 %.
Per-call figures are medians over repeats, shown with their quartiles.
The matmul comparison runs one thread: with other work on the machine, a
thread pool's stalls would land in one instrument's blocks and not the other's.
Exits 1 when a goal is missed.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
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


def per_call_us(stmt, number: int = 100_000) -> tuple[float, str]:
    """Median microseconds per call over 15 repeats of `number` calls, and the quartiles."""
    runs = timeit.repeat(stmt, globals={"d2l_gpu": d2l_gpu}, number=number, repeat=15)
    q1, median, q3 = (q / number * 1e6 for q in statistics.quantiles(runs, n=4))
    return median, f"(quartiles {q1:.3f}-{q3:.3f})"


def timer_pair_us(number: int = 100_000) -> tuple[float, str]:
    timer = d2l_gpu.Timer()

    def pair() -> None:
        timer.start()
        timer.stop()

    result = per_call_us(pair, number)
    timer.times.clear()
    return result


def empty_call_seconds(min_run_time: float = 0.2) -> float:
    """Wall time of benchmark() on a call that does nothing (what sizes its blocks)."""
    tik = time.perf_counter()
    d2l_gpu.benchmark(lambda: None, min_run_time=min_run_time)
    return time.perf_counter() - tik


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
    reference = torch_benchmark.Timer(
        "torch.mm(x, x)", globals={"torch": torch, "x": x}, num_threads=1
    )
    ours, timers = [], []
    for _ in range(rounds):
        ref = reference.blocked_autorange(min_run_time=0.15)
        m = d2l_gpu.benchmark(torch.mm, x, x, min_run_time=0.15, num_threads=1)
        ours.append(m.median / ref.median)
        # Same block size and count as the reference, so both see the same noise.
        blocks = len(ref.times)
        timers.append(
            _timer_median(lambda: torch.mm(x, x), ref.number_per_run, blocks) / ref.median
        )
    return statistics.median(ours), statistics.median(timers)


def _identical_pair(n: int, device: torch.device) -> tuple:
    """Two distinct but identical zero-argument calls: an n x n product into a ready output."""
    x = torch.randn(n, n, device=device)
    out = torch.empty_like(x)

    def make():
        return lambda: torch.mm(x, x, out=out)

    return make(), make()


def identical_agreement(n: int, device: torch.device, tries: int = 3) -> tuple[int, float, str]:
    """compare() of identical calls, `tries` times: how many said 'agree', and the
    largest |median round ratio - 1| in percent with that try's round-ratio quartiles."""
    agreed, worst, spread = 0, -1.0, ""
    for _ in range(tries):
        first, second = _identical_pair(n, device)
        result = d2l_gpu.compare(first, second, device=device, num_threads=1)
        agreed += result.outcome == "agree"
        deviation = abs(result.ratio - 1) * 100
        if deviation > worst:
            worst = deviation
            spread = f"(round ratios {result.ratio_q1:.3f}-{result.ratio_q3:.3f})"
    return agreed, worst, spread


def main() -> int:
    results: list[tuple[str, float, str, bool]] = []
    ratio = import_overhead()
    results.append(("import d2l_gpu / import torch", ratio * 100, "%  <= 5", ratio <= 0.05))
    for stmt in ("d2l_gpu.try_gpu()", "d2l_gpu.try_all_gpus()"):
        us, spread = per_call_us(stmt)
        results.append((stmt, us, f"us <= 2 {spread}", us <= 2))
    us, spread = timer_pair_us()
    results.append(("Timer start+stop", us, f"us <= 0.5 {spread}", us <= 0.5))
    wall = empty_call_seconds()
    results.append(("benchmark(empty call), min_run_time=0.2", wall, "s  <= 0.3", wall <= 0.3))
    torch.set_num_threads(1)
    for n in (100, 512):
        bench_ratio, timer_ratio = matmul_agreement(n)
        for name, r in (("benchmark()", bench_ratio), ("Timer", timer_ratio)):
            deviation = abs(r - 1) * 100
            results.append(
                (f"{name} vs torch Timer, {n}x{n} mm", deviation, "%  <= 5", deviation <= 5)
            )

    cases = [(1, d2l_gpu.cpu()), (100, d2l_gpu.cpu()), (512, d2l_gpu.cpu())]
    if d2l_gpu.try_gpu().type != "cpu":
        cases.append((2048, d2l_gpu.try_gpu()))
    for n, device in cases:
        tries = 3
        agreed, worst, spread = identical_agreement(n, device, tries)
        results.append(
            (
                f"compare(): identical {n}x{n} mm on {device}, agreed {agreed}/{tries}",
                worst,
                f"% off 1 at most, all agree {spread}",
                agreed == tries,
            )
        )

    print(
        f"torch {torch.__version__}, d2l_gpu {d2l_gpu.__version__}, helpers use {d2l_gpu.try_gpu()}"
    )
    width = max(len(name) for name, *_ in results)
    for name, value, goal, ok in results:
        print(f"[{'OK' if ok else 'MISS'}] {name:<{width}}  {value:8.3f} {goal}")
    return 0 if all(ok for *_, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
