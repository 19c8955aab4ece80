"""What a multi-GPU chapter reuses to run one process per device under ``torchrun``:
``process_group`` reads what torchrun tells each process (``LOCAL_RANK``, ...), gives
this rank a device, joins the job with a backend that suits every rank, and leaves it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from .devices import cpu, try_all_gpus

BACKENDS = ("auto", "gloo", "nccl")


def local_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's number on its machine, as torchrun set it; None outside torchrun."""
    value = (os.environ if environ is None else environ).get("LOCAL_RANK")
    if value is not None and not (value.isascii() and value.isdigit()):  # '²' is a digit
        raise ValueError(f"LOCAL_RANK must be an integer >= 0, got {value!r}")
    return None if value is None else int(value)


def rank_device(local: int) -> torch.device:
    """The GPU this rank computes on: the visible CUDA devices taken in turn (some shared
    when ranks outnumber them), else the CPU (gloo and nccl cannot read MPS)."""
    gpus = [d for d in try_all_gpus() if d.type == "cuda"]
    return gpus[local % len(gpus)] if gpus else cpu()


def device_identity(device: torch.device) -> str:
    """A name for the physical device, the same in every process that uses it:
    ``cuda:0`` of one process may be another's ``cuda:1``; a GPU's UUID is unique."""
    if device.type != "cuda":
        return device.type
    return f"cuda {torch.cuda.get_device_properties(device).uuid}"


def nccl_problems(identities: Sequence[str]) -> list[str]:
    """Why nccl cannot serve ranks with these device identities (in rank order): it
    needs a CUDA device on each, and refuses two on one GPU ("Duplicate GPU detected")."""
    ranks_of: dict[str, list[int]] = {}
    for r, identity in enumerate(identities):
        ranks_of.setdefault(identity, []).append(r)
    problems = []
    for identity, ranks in ranks_of.items():
        listed = ", ".join(map(str, ranks))
        if not identity.startswith("cuda "):
            who = f"rank {listed} has" if len(ranks) == 1 else f"ranks {listed} have"
            problems.append(f"{who} no CUDA device")
        elif len(ranks) > 1:
            problems.append(f"ranks {listed} share one GPU ({identity.removeprefix('cuda ')})")
    return problems


def _check_backend(requested: str) -> None:
    if requested not in BACKENDS:
        accepted = ", ".join(map(repr, BACKENDS))
        raise ValueError(f"unknown backend {requested!r}; accepted: {accepted}")


def choose_backend(identities: Sequence[str], requested: str = "auto") -> str:
    """``nccl`` when every rank has a GPU of its own, else ``gloo``; ``requested`` overrides.
    Every rank calls it with the same list, so all agree (else they would wait forever)."""
    _check_backend(requested)
    if not identities:
        raise ValueError("choose_backend needs the device identity of at least one rank")
    problems = nccl_problems(identities)
    if requested == "auto":
        return "gloo" if problems else "nccl"
    if requested == "nccl" and problems:
        raise RuntimeError(
            f"backend 'nccl' needs a CUDA device of its own on every rank, but "
            f"{'; '.join(problems)}; accepted here: 'gloo' or 'auto' (which picks gloo)"
        )
    return requested


@dataclass(frozen=True)
class Rank:
    """This process inside the job: its place, its device, and the group to talk through."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    group: torch.distributed.ProcessGroup
    why_not_nccl: tuple[str, ...]


def _all_gather_strings(text: str, size: int = 64) -> list[str]:
    """Every rank's ``text``, in rank order, swapped as fixed-size byte tensors
    (``all_gather_object`` pickles through ``Tensor.numpy()``: torch alone has no NumPy)."""
    data = text.encode().ljust(size, b"\0")
    if len(data) > size:
        raise ValueError(f"{text!r} is longer than the {size} bytes a rank may send")
    mine = torch.tensor(list(data), dtype=torch.uint8)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    return [bytes(t.tolist()).rstrip(b"\0").decode() for t in gathered]


@contextlib.contextmanager
def process_group(backend: str = "auto", timeout: float = 60.0) -> Iterator[Rank]:
    """Join the torchrun job on this rank's device; always leave it, even on an error.
    The ranks meet in a gloo group (it runs anywhere) to swap device identities; if
    nccl suits them all, a nccl group over the same ranks carries the traffic."""
    local = local_rank()
    if local is None:
        raise RuntimeError(
            "process_group() joins a job that torchrun started, and torchrun sets "
            "LOCAL_RANK, which is missing here: launch with torchrun --nproc-per-node N"
        )
    _check_backend(backend)  # before joining, so no other rank waits for this one
    device = rank_device(local)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    wait = timedelta(seconds=timeout)
    dist.init_process_group("gloo", timeout=wait)  # env:// reads torchrun's variables
    try:
        identities = _all_gather_strings(device_identity(device))
        chosen = choose_backend(identities, backend)
        group = dist.group.WORLD
        if chosen == "nccl":
            group = dist.new_group(backend="nccl", timeout=wait, device_id=device)
        problems = tuple(nccl_problems(identities))
        yield Rank(dist.get_rank(), dist.get_world_size(), local, device, chosen, group, problems)
    finally:
        dist.destroy_process_group()
