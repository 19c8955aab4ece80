"""All-reduce across processes: each rank on its own device, the sum checked, the cost timed.

Start it with torchrun, which runs one copy per process and tells each its rank:

    torchrun --standalone --local-addr 127.0.0.1 --nproc-per-node 2 \
        notebooks/scripts/all_reduce_demo.py [--backend auto|gloo|nccl]

Every rank prints its device and backend, all-reduces a small tensor and checks
the sum (a wrong sum ends the job with an error). Then rank 0 times the
all_reduce of an n x n float32 matrix against the local x + y and x @ x.
"""

from __future__ import annotations

import os
import sys


def launch_hint(script: str) -> str:
    return (
        "This demo runs as several processes, one per device, and torchrun starts them.\n"
        f"One machine, 2 processes:  torchrun --nproc-per-node 2 {script}\n"
        "Kept on the loopback interface and a free port (containers, unresolvable names):\n"
        f"  torchrun --standalone --local-addr 127.0.0.1 --nproc-per-node 2 {script}\n"
        "Two machines (the same command on both; HOST is an address of the first):\n"
        "  torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-id demo \\\n"
        f"      --rdzv-endpoint HOST:29500 --rdzv-conf join_timeout=60 {script}\n"
        "Without torchrun on your PATH, `python -m torch.distributed.run` is the same program."
    )


if (
    __name__ == "__main__"
    and "LOCAL_RANK" not in os.environ
    and not {"-h", "--help"} & set(sys.argv)
):
    # torchrun sets LOCAL_RANK in every process it starts. Without it no partner will
    # come: say how to launch, at once, before importing torch.
    print(launch_hint(sys.argv[0]), file=sys.stderr)
    sys.exit(2)

import argparse

import torch
import torch.distributed as dist

import d2l_gpu
from d2l_gpu import distributed
from d2l_gpu.timing import quartiles

# Untimed calls per size. The first calls of a size run slower (buffers and the other
# rank not yet warm); with only 3, a whole size could be timed slow and bend the curve.
WARMUP = 10


def say(*lines: str) -> None:
    # One write per call, so the lines of ranks sharing a terminal never mix.
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


def check_all_reduce(me: distributed.Rank) -> list[float]:
    x = torch.arange(1, 5, dtype=torch.float32, device=me.device) * (me.rank + 1)
    dist.all_reduce(x, group=me.group)
    # Each entry times 1 + 2 + ... + world_size: small integers, exact in float32.
    expected = torch.arange(1, 5, dtype=torch.float32) * (me.world_size * (me.world_size + 1) // 2)
    if not torch.equal(x.cpu(), expected):
        raise RuntimeError(f"rank {me.rank}: all_reduce gave {x.tolist()}, expected {expected}")
    return x.tolist()


def time_all_reduce(
    me: distributed.Rank, data: list[torch.Tensor], repeats: int
) -> list[list[float]]:
    # d2l_gpu.benchmark picks its own number of calls, and ranks that disagree wait
    # forever. So: a fixed count, a barrier before each call (time the collective, not
    # a late rank), and a Timer that waits for the device. The tensors take turns, one
    # call each a round, so that other work on the machine slows all sizes alike.
    bufs, timers = [x.clone() for x in data], [d2l_gpu.Timer(me.device) for _ in data]
    for _ in range(WARMUP + repeats):
        for x, buf, timer in zip(data, bufs, timers, strict=True):
            buf.copy_(x)  # all_reduce sums in place
            dist.barrier(group=me.group)
            timer.start()
            dist.all_reduce(buf, group=me.group)
            timer.stop()
    return [timer.times[-repeats:] for timer in timers]


def timing_report(me: distributed.Rank, sizes: list[int], repeats: int) -> list[str]:
    gen = torch.Generator().manual_seed(me.rank)
    pairs = [[torch.rand(n, n, generator=gen).to(me.device) for _ in range(2)] for n in sizes]
    comm_times = time_all_reduce(me, [x for x, _ in pairs], repeats)  # every rank takes part
    if me.rank != 0:
        return []
    lines = []
    for n, (x, y), times in zip(sizes, pairs, comm_times, strict=True):
        # The fastest call is what the library and the link cost: on cores shared with
        # the other rank, most calls also wait for a process to be scheduled.
        q1, median, q3 = quartiles(times)
        comm = min(times)
        add, mm = (
            d2l_gpu.benchmark(fn, device=me.device, label=label, min_run_time=0.05)
            for fn, label in ((lambda x=x, y=y: x + y, "x + y"), (lambda x=x: x @ x, "x @ x"))
        )
        longer = "x @ x" if mm.median > comm else "the all_reduce"
        lines += [
            f"n = {n} ({4 * n * n:,} bytes):",
            f"  all_reduce: {comm * 1e6:,.1f} us fastest of {repeats} calls, "
            f"median {median * 1e6:,.1f} us, IQR {(q3 - q1) * 1e6:,.1f} us",
            f"  {add}",
            f"  {mm}",
            f"  all_reduce / (x + y): {comm / add.median:,.1f}x; all_reduce / (x @ x): "
            f"{comm / mm.median:,.2f}x; {longer} took longer",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="auto", choices=distributed.BACKENDS)
    parser.add_argument("--sizes", type=int, nargs="*", default=[8, 64, 512], metavar="N")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per size")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for ranks")
    parser.add_argument("--fail-rank", type=int, metavar="R", help="make rank R raise")
    args = parser.parse_args(argv)
    if args.repeats < 1 or any(n < 1 for n in args.sizes):
        parser.error("--repeats and --sizes take counts >= 1")
    with distributed.process_group(args.backend, timeout=args.timeout) as me:
        head = f"rank {me.rank}/{me.world_size}:"
        say(f"{head} local rank {me.local_rank}, device {me.device}, backend {me.backend}")
        if me.rank == args.fail_rank:
            raise RuntimeError(f"rank {me.rank} failed on purpose (--fail-rank {args.fail_rank})")
        say(f"{head} all_reduce(sum) = {check_all_reduce(me)}, checked")
        report = timing_report(me, args.sizes, args.repeats)
        if report:
            say(
                f"timing on rank 0 ({me.device}, {me.backend}, {me.world_size} ranks, "
                f"{torch.get_num_threads()} CPU thread(s) each):",
                *report,
            )
    return 0


if __name__ == "__main__":
    # record() writes a failing rank's traceback where torchrun's summary shows it.
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())
