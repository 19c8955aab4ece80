"""Does the exercise-1 sweep add overhead? Its GFLOP/s against a bare Timer's.

Usage: python tests/benchmarks/bench_experiments.py [--rounds 5] [--min-run-time 0.1]

For each size of the quick CPU sweep, times the same float32 product through
``experiments.measure_matmul`` and through ``torch.utils.benchmark.Timer``
directly (same thread count), alternating the two so that a busy machine
slows both alike, and reports the median ratio of their rates. Exits 1 when
any size falls below 90 %: the harness should measure what the bare
instrument measures.
"""

import argparse
import statistics
import sys

import torch
import torch.utils.benchmark as torch_benchmark

from d2l_gpu import experiments as ex

GOAL = 0.90


def bare_gflops(n: int, min_run_time: float) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    timer = torch_benchmark.Timer(
        "torch.matmul(a, b)",
        globals={"torch": torch, "a": a, "b": b},
        num_threads=torch.get_num_threads(),
    )
    return 2 * n**3 / timer.blocked_autorange(min_run_time=min_run_time).median / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-run-time", type=float, default=0.1)
    args = parser.parse_args()
    sizes = sorted({c.n for c in ex.matmul_cases(["cpu"], quick=True, numpy=False)})
    print(f"{'n':>5}  {'harness GFLOP/s':>15}  {'Timer GFLOP/s':>13}  {'ratio':>6}")
    worst = float("inf")
    for n in sizes:
        ours, bare, ratios = [], [], []
        for _ in range(args.rounds):
            case = ex.MatmulCase("torch", "cpu", "float32", n)
            ours.append(ex.measure_matmul(case, args.min_run_time).gflops)
            bare.append(bare_gflops(n, args.min_run_time))
            ratios.append(ours[-1] / bare[-1])
        ratio = statistics.median(ratios)
        worst = min(worst, ratio)
        print(
            f"{n:>5}  {statistics.median(ours):>15.2f}  {statistics.median(bare):>13.2f}  "
            f"{ratio:>6.1%}"
        )
    verdict = "OK" if worst >= GOAL else "BELOW GOAL"
    print(f"worst ratio {worst:.1%} (goal >= {GOAL:.0%}): {verdict}")
    return 0 if worst >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
