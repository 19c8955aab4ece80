"""All-reduce across processes: each rank on its own device, the sum checked, the cost timed.

Start it with torchrun, which runs one copy per process and tells each its rank:

    torchrun --standalone --local-addr 127.0.0.1 --nproc-per-node 2 \
        notebooks/scripts/all_reduce_demo.py [--backend auto|gloo|nccl]

Every rank prints its device and backend, all-reduces a small tensor and checks
the sum (a wrong sum ends the job with an error). Then rank 0 times the
all_reduce of an n x n float32 matrix against the local x + y and x @ x.
Run it with --help, with or without torchrun, to see the options.
"""

from __future__ import annotations

import os
import sys


def launch_hint(script: str) -> str:
    """How to start this script, for a reader who ran it with plain Python."""
    return (
        "This demo runs as several processes, one per device, and torchrun starts them.\n"
        "One machine, 2 processes:\n"
        f"  torchrun --nproc-per-node 2 {script}\n"
        "or, kept on the loopback interface and a free port (for containers and machines\n"
        "whose own name does not resolve):\n"
        f"  torchrun --standalone --local-addr 127.0.0.1 --nproc-per-node 2 {script}\n"
        "Two machines (run the same command on both; HOST is an address of the first):\n"
        "  torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-id demo \\\n"
        f"      --rdzv-endpoint HOST:29500 --rdzv-conf join_timeout=60 {script}\n"
        "If torchrun is not on your PATH, `python -m torch.distributed.run` is the same program."
    )


_ASKS_FOR_HELP = {"-h", "--help"}.intersection(sys.argv[1:])
if __name__ == "__main__" and "LOCAL_RANK" not in os.environ and not _ASKS_FOR_HELP:
    # torchrun sets LOCAL_RANK in every process it starts. Without it there are no
    # partners to wait for: say how to launch at once, before importing torch.
    print(launch_hint(sys.argv[0]), file=sys.stderr)
    sys.exit(2)

import argparse

import torch
import torch.distributed as dist

import d2l_gpu
from d2l_gpu import distributed


def say(*lines: str) -> None:
    """Write whole lines at once, so the lines of ranks sharing a terminal never mix."""
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


def check_all_reduce(me: distributed.Rank) -> list[float]:
    """All-reduce ``[1, 2, 3, 4] * (rank + 1)``, made on this rank's device; check the sum."""
    x = torch.arange(1, 5, dtype=torch.float32, device=me.device) * (me.rank + 1)
    dist.all_reduce(x, group=me.group)
    # Each entry is multiplied by 1 + 2 + ... + world_size: small integers, exact in float32.
    expected = torch.arange(1, 5, dtype=torch.float32) * (me.world_size * (me.world_size + 1) // 2)
    got = x.cpu()
    if not torch.equal(got, expected):
        raise RuntimeError(f"rank {me.rank}: all_reduce gave {got.tolist()}, expected {expected}")
    return got.tolist()


def time_all_reduce(me: distributed.Rank, data: torch.Tensor, repeats: int) -> list[float]:
    """Seconds per all_reduce of ``data``, every rank calling it the same number of times.

    ``d2l_gpu.benchmark`` decides from its own clock how often to call, so two
    ranks would disagree and one would wait forever. Here the count is fixed, a
    barrier lines the ranks up before each call (the time is the collective, not
    a wait for a late rank), and the Timer waits for the device.
    """
    buf = data.clone()
    timer = d2l_gpu.Timer(me.device)
    for _ in range(repeats + 3):  # the first 3 calls warm up
        buf.copy_(data)  # all_reduce sums in place: start each call from the same values
        dist.barrier(group=me.group)
        timer.start()
        dist.all_reduce(buf, group=me.group)
        timer.stop()
    return timer.times[-repeats:]


def timing_report(me: distributed.Rank, sizes: list[int], repeats: int) -> list[str]:
    """Time all_reduce, x + y and x @ x on one n x n float32 matrix per size."""
    gen = torch.Generator().manual_seed(me.rank)
    lines = []
    for n in sizes:
        x = torch.rand(n, n, generator=gen).to(me.device)
        comm = d2l_gpu.Measurement.from_times(time_all_reduce(me, x, repeats), label="all_reduce")
        if me.rank != 0:
            continue
        add = d2l_gpu.benchmark(torch.add, x, x, device=me.device, min_run_time=0.05, label="x + y")
        mm = d2l_gpu.benchmark(torch.mm, x, x, device=me.device, min_run_time=0.05, label="x @ x")
        lines += [f"n = {n} ({4 * n * n:,} bytes):", *(f"  {m}" for m in (comm, add, mm))]
        lines.append(
            f"  all_reduce takes {comm.median / add.median:,.1f}x the time of x + y "
            f"and {comm.median / mm.median:,.2f}x that of x @ x"
        )
        if mm.median > comm.median:
            lines.append("  of the median times, x @ x took longer than the all_reduce")
        else:
            lines.append("  of the median times, the all_reduce took longer than x @ x")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=launch_hint(sys.argv[0]),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keep the hint's lines
    )
    parser.add_argument(
        "--backend",
        default="auto",
        choices=distributed.BACKENDS,
        help="auto: nccl when every rank has a CUDA GPU of its own, else gloo",
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[8, 64, 512],
        metavar="N",
        help="sides of the n x n matrices to time (none: only the checked sum)",
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per size (>= 2)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for ranks")
    parser.add_argument(
        "--fail-rank", type=int, metavar="R", help="make rank R raise, to see how a job fails"
    )
    args = parser.parse_args(argv)
    if args.repeats < 2 or any(n < 1 for n in args.sizes):
        parser.error("--repeats takes a count >= 2 and --sizes matrix sides >= 1")
    with distributed.process_group(args.backend, timeout=args.timeout) as me:
        head = f"rank {me.rank}/{me.world_size}:"
        why = f" (not nccl: {'; '.join(me.why_not_nccl)})" if me.why_not_nccl else ""
        say(f"{head} local rank {me.local_rank}, device {me.device}, backend {me.backend}{why}")
        if me.rank == args.fail_rank:
            raise RuntimeError(f"rank {me.rank} failed on purpose (--fail-rank {args.fail_rank})")
        say(f"{head} all_reduce(sum) = {check_all_reduce(me)}, checked")
        report = timing_report(me, args.sizes, args.repeats)
        if me.rank == 0 and report:
            say(
                f"timing on rank 0 ({me.device}, {me.backend}, {me.world_size} ranks, "
                f"CPU threads per rank: {torch.get_num_threads()}): "
                f"all_reduce over {args.repeats} barrier-aligned calls, x + y and x @ x "
                "by d2l_gpu.benchmark",
                *report,
            )
    return 0


if __name__ == "__main__":
    # record() writes a failing rank's traceback where torchrun's summary shows it.
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())
