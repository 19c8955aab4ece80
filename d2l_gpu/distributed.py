"""``torchrun -m d2l_gpu.distributed``: the chapter's device lessons across processes.

Each process (rank) owns one device, puts its data there, and joins an
``all_reduce``; then rank 0 times that collective against local work on the
same data. ``torchrun`` starts the processes and sets ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; this module only reads
them, so one machine or several servers run the same code.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import torch

from .devices import try_gpu
from .timing import Measurement, Timer, benchmark

__all__ = [
    "BACKENDS",
    "RankEnv",
    "Rank",
    "choose_backend",
    "launch_hint",
    "process_group",
    "rank_device",
    "rank_env",
]

BACKENDS = ("gloo", "nccl")
_ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
# gloo and nccl move CPU and CUDA tensors only; other accelerators fall back to the CPU.
_COLLECTIVE_DEVICE_TYPES = ("cpu", "cuda")


def launch_hint() -> str:
    """How to start the demo, for a reader who ran it without torchrun."""
    return (
        "d2l_gpu.distributed runs one process per device and must be started by torchrun,\n"
        "which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT:\n"
        "  one machine, 2 processes:\n"
        "    torchrun --nproc-per-node 2 -m d2l_gpu.distributed\n"
        "  two servers, 1 process each (run on both, with --node-rank 0 and 1; HOST is node 0):\n"
        "    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 1 --rdzv-backend c10d \\\n"
        "        --rdzv-id demo --rdzv-endpoint HOST:29500 -m d2l_gpu.distributed\n"
        f"('torchrun' is '{sys.executable} -m torch.distributed.run' if it is not on PATH.)"
    )


@dataclass(frozen=True)
class RankEnv:
    """Who this process is, as torchrun told it."""

    rank: int
    world_size: int
    local_rank: int


def rank_env(environ: Mapping[str, str] | None = None) -> RankEnv | None:
    """Read this process's place from the torchrun variables; None outside torchrun."""
    env = os.environ if environ is None else environ
    if "RANK" not in env:
        return None
    missing = [k for k in _ENV_KEYS if k not in env]
    if missing:
        raise RuntimeError(
            f"RANK is set but {', '.join(missing)} is not: start the demo with torchrun, "
            f"which sets all of {', '.join(_ENV_KEYS)}"
        )
    values = {}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        try:
            values[key] = int(env[key])
        except ValueError:
            raise ValueError(f"{key} must be an integer, got {env[key]!r}") from None
    rank, world, local = values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"]
    if world < 1 or not 0 <= rank < world or local < 0:
        raise ValueError(
            f"need WORLD_SIZE >= 1, 0 <= RANK < WORLD_SIZE and LOCAL_RANK >= 0; "
            f"got RANK={rank}, WORLD_SIZE={world}, LOCAL_RANK={local}"
        )
    return RankEnv(rank, world, local)


def rank_device(local_rank: int) -> torch.device:
    """The LOCAL_RANK-th GPU of this machine, or the CPU when it has no such GPU.

    Ranks on one machine are numbered 0, 1, ... by LOCAL_RANK, so each takes
    its own card. An accelerator that gloo and nccl cannot read (Apple MPS, for
    one) is passed over for the CPU.
    """
    device = try_gpu(local_rank)
    return device if device.type in _COLLECTIVE_DEVICE_TYPES else torch.device("cpu")


def choose_backend(device_types: Sequence[str], requested: str | None = None) -> str:
    """``nccl`` when every rank has a CUDA device, else ``gloo``; ``requested`` overrides.

    Every rank calls this with the same list (one device type per rank), so all
    agree: ranks that picked different backends would wait for each other forever.
    """
    if not device_types:
        raise ValueError("choose_backend needs the device type of at least one rank")
    on_cpu = [r for r, t in enumerate(device_types) if t != "cuda"]
    if requested is None or requested == "auto":
        return "gloo" if on_cpu else "nccl"
    if requested not in BACKENDS:
        raise ValueError(
            f"unknown backend {requested!r}; accepted: 'auto', {', '.join(map(repr, BACKENDS))}"
        )
    if requested == "nccl" and on_cpu:
        ranks = ", ".join(f"rank {r} ({device_types[r]})" for r in on_cpu)
        raise RuntimeError(
            f"backend 'nccl' needs a CUDA device on every rank, but {ranks} has none; "
            "accepted here: 'gloo' or 'auto' (which picks gloo)"
        )
    return requested


@dataclass(frozen=True)
class Rank:
    """A process inside a process group: its place, its device and the backend."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str


def _gather_device_types(
    store: torch.distributed.Store, me: int, world: int, mine: str
) -> list[str]:
    """Every rank's device type, through the rendezvous store torchrun set up."""
    store.set(f"d2l_gpu/device/{me}", mine)
    keys = [f"d2l_gpu/device/{r}" for r in range(world)]
    store.wait(keys)
    return [store.get(k).decode() for k in keys]


@contextlib.contextmanager
def process_group(requested: str | None = None, timeout: float = 60.0) -> Iterator[Rank]:
    """Join the torchrun job on this rank's device; always leave the group on exit.

    The ranks first swap their device types through torchrun's rendezvous store,
    so the backend fits all of them, then start the process group on that store.
    ``destroy_process_group`` runs in ``finally``: a rank that raises still
    closes its connections, and its error reaches stderr for torchrun to report.
    """
    import torch.distributed as dist

    env = rank_env()
    if env is None:
        raise RuntimeError(launch_hint())
    device = rank_device(env.local_rank)
    wait = timedelta(seconds=timeout)
    store, _, _ = next(dist.rendezvous("env://", env.rank, env.world_size, timeout=wait))
    types = _gather_device_types(store, env.rank, env.world_size, device.type)
    backend = choose_backend(types, requested)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend,
        store=dist.PrefixStore("default_pg", store),
        rank=env.rank,
        world_size=env.world_size,
        timeout=wait,
        device_id=device if backend == "nccl" else None,
    )
    try:
        yield Rank(env.rank, env.world_size, env.local_rank, device, backend)
    finally:
        dist.destroy_process_group()


def check_all_reduce(me: Rank) -> tuple[list[float], list[float]]:
    """All-reduce ``[1, 2, 3, 4] * (rank + 1)``, made on this rank's device; check the sum."""
    import torch.distributed as dist

    x = torch.arange(1, 5, dtype=torch.float32, device=me.device) * (me.rank + 1)
    dist.all_reduce(x, op=dist.ReduceOp.SUM)
    # Sum of (rank + 1) over all ranks, times each entry: small integers, exact in float32.
    expected = torch.arange(1, 5, dtype=torch.float32) * (me.world_size * (me.world_size + 1) // 2)
    got = x.cpu()
    if not torch.equal(got, expected):
        raise RuntimeError(
            f"rank {me.rank}: all_reduce gave {got.tolist()}, expected {expected.tolist()}"
        )
    return got.tolist(), expected.tolist()


def time_collective(
    fn: Callable[[], object],
    device: torch.device,
    repeats: int,
    warmup: int = 3,
    setup: Callable[[], object] | None = None,
) -> list[float]:
    """Seconds per call of a collective, ``repeats`` times, every rank in step.

    ``d2l_gpu.benchmark`` sizes its blocks from each process's own clock, so two
    ranks would call the collective a different number of times and one would
    wait forever. Here every rank runs the same fixed count, and a barrier before
    each call lines them up, so a time is the collective alone, not a wait for a
    rank that was still busy; the Timer synchronizes the device around it.
    ``setup`` runs before the barrier, untimed.
    """
    import torch.distributed as dist

    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    timer = Timer(device)
    for _ in range(repeats):
        if setup is not None:
            setup()
        dist.barrier()
        timer.start()
        fn()
        timer.stop()
    return timer.times


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} us"


def _timing_table(me: Rank, sizes: Sequence[int], repeats: int, min_run_time: float) -> list[str]:
    """Time all_reduce, x + y and x @ x on one n x n float32 matrix per size."""
    import torch.distributed as dist

    gen = torch.Generator().manual_seed(me.rank)
    lines = []
    for n in sizes:
        data = torch.rand(n, n, generator=gen).to(me.device)
        buf = data.clone()
        # all_reduce sums in place: refill the buffer (untimed) so values stay bounded.
        times = time_collective(
            functools.partial(dist.all_reduce, buf),
            me.device,
            repeats,
            setup=functools.partial(buf.copy_, data),
        )
        collective = Measurement.from_times(times)
        comm = collective.median
        add = benchmark(torch.add, data, data, device=me.device, min_run_time=min_run_time).median
        mm = benchmark(torch.matmul, data, data, device=me.device, min_run_time=min_run_time).median
        lines.append(
            f"{n:>6} {4 * n * n:>11,} B  all_reduce {_us(comm):>12} (IQR {_us(collective.iqr)})  "
            f"x + y {_us(add):>12}  x @ x {_us(mm):>13}  "
            f"all_reduce/add {comm / add:8.1f}x  all_reduce/matmul {comm / mm:8.2f}x"
        )
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        default="auto",
        choices=("auto", *BACKENDS),
        help="process-group backend; auto: nccl when every rank has a CUDA device, else gloo",
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[8, 64, 512],
        metavar="N",
        help="side n of the n x n float32 matrices timed (4*n*n bytes each); none skips timing",
    )
    parser.add_argument(
        "--repeats", type=int, default=20, help="synchronized repeats of each collective"
    )
    parser.add_argument(
        "--min-run-time",
        type=float,
        default=0.1,
        help="seconds d2l_gpu.benchmark spends on each local operation",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the other ranks"
    )
    parser.add_argument(
        "--fail-rank",
        type=int,
        default=None,
        metavar="R",
        help="make rank R raise before the all_reduce (to see how a failing job ends)",
    )


def _validate(args: argparse.Namespace, world_size: int) -> None:
    if any(n < 1 for n in args.sizes):
        raise ValueError(f"--sizes takes matrix sides >= 1, got {args.sizes}")
    if args.repeats < 2:
        raise ValueError(f"--repeats must be >= 2 to give a median and spread, got {args.repeats}")
    if args.min_run_time <= 0 or args.timeout <= 0:
        raise ValueError("--min-run-time and --timeout take a positive number of seconds")
    if args.fail_rank is not None and not 0 <= args.fail_rank < world_size:
        raise ValueError(f"--fail-rank takes a rank in 0..{world_size - 1}, got {args.fail_rank}")


def _say(*lines: str) -> None:
    """Print whole lines in one write, so lines of ranks sharing a terminal never mix.

    ``print`` writes the text and its newline separately when Python runs
    unbuffered, and two ranks' pieces then interleave.
    """
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    """The demo on this rank; returns the exit status."""
    env = rank_env()
    if env is None:
        print(launch_hint(), file=sys.stderr)
        return 2
    _validate(args, env.world_size)
    with process_group(args.backend, timeout=args.timeout) as me:
        head = f"rank {me.rank}/{me.world_size}:"
        _say(f"{head} local rank {me.local_rank}, device {me.device}, backend {me.backend}")
        if me.rank == args.fail_rank:
            raise RuntimeError(f"rank {me.rank} failed on purpose (--fail-rank {args.fail_rank})")
        got, expected = check_all_reduce(me)
        _say(f"{head} all_reduce(sum) = {got}, expected {expected}")
        if args.sizes:
            table = _timing_table(me, args.sizes, args.repeats, args.min_run_time)
            if me.rank == 0:
                _say(
                    f"timing on rank 0 ({me.device}, {me.backend}, {me.world_size} ranks): "
                    f"median of {args.repeats} barrier-aligned all_reduce calls, "
                    "local ops by d2l_gpu.benchmark",
                    *table,
                )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="torchrun --nproc-per-node N -m d2l_gpu.distributed", description=__doc__
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    # record() writes this rank's traceback where torchrun's failure summary finds it.
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())
