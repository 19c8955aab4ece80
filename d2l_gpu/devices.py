"""Name the devices a tensor can live on, pick ones that exist, and wait for them.

The names follow the d2l book so its code runs unchanged, but "GPU" means whatever
accelerator ``torch.accelerator`` finds: CUDA (ROCm reports itself as CUDA), Apple
MPS (one device), Intel XPU, ... ``CUDA_VISIBLE_DEVICES=`` hides the GPUs from torch.
"""

from __future__ import annotations

import operator
import re

import torch

if tuple(map(int, re.findall(r"\d+", torch.__version__)[:2])) < (2, 6):  # torch.accelerator
    # Named as this package's failure, `python -m d2l_gpu` says it in one line.
    raise ImportError(
        f"d2l_gpu needs torch >= 2.6, found torch {torch.__version__}", name=__package__
    )

_CPU = torch.device("cpu")
# Whether this process has a context on a CUDA card, asked without creating one (which
# costs memory there, or fails on a card held in exclusive mode); torch has no public
# per-card query, and CPU builds lack this one.
_cuda_has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)


def _index(i: object, func: str) -> int:
    # torch keeps an index in 8 bits: torch.device("cuda", 300) would be cuda:44.
    accepted = f"{func}(i) takes a GPU index, an int from 0 to 127 (0 is the first GPU)"
    try:
        # operator.index(True) is 1, but a flag (or a bool tensor) is no GPU index.
        if isinstance(i, bool) or getattr(i, "dtype", None) == torch.bool:
            raise TypeError
        index = operator.index(i)
    except TypeError:
        raise TypeError(f"{accepted}, got {i!r}") from None
    if not 0 <= index <= 127:
        raise ValueError(f"{accepted}, got {index}")
    return index


def _gpus() -> list[torch.device]:
    if not torch.accelerator.is_available():
        return []
    kind = torch.accelerator.current_accelerator().type
    return [torch.device(kind, i) for i in range(torch.accelerator.device_count())]


def accelerator_type() -> str | None:
    """The accelerator backend torch finds (``'cuda'``, ``'mps'``, ...), or None."""
    gpus = _gpus()
    return gpus[0].type if gpus else None


def cpu() -> torch.device:
    """The CPU device: host memory, always present."""
    return _CPU


def gpu(i: int = 0) -> torch.device:
    """Name the i-th GPU, whether or not it exists (CUDA's name without an accelerator)."""
    return torch.device(accelerator_type() or "cuda", _index(i, "gpu"))


def num_gpus() -> int:
    """How many accelerator devices torch can use (MPS counts as one)."""
    return len(_gpus())


def try_gpu(i: int = 0) -> torch.device:
    """The i-th GPU if it exists, else the CPU, so code runs on any machine."""
    gpus, index = _gpus(), _index(i, "try_gpu")
    return gpus[index] if index < len(gpus) else _CPU


def try_all_gpus() -> list[torch.device]:
    """Every GPU, or ``[cpu()]`` when there is none (what the book promises)."""
    return _gpus() or [_CPU]


def gpus_named(device: torch.device | str | None = None) -> list[torch.device]:
    """The GPUs ``device`` names: ``None`` or a bare ``'cuda'`` every one, ``'cuda:1'``
    that one, the CPU none; a device this machine lacks is an error naming those it has."""
    gpus = _gpus()
    if device is None:
        return gpus
    written = device if isinstance(device, str) else str(device)
    if (device := torch.device(device)).type == "cpu":
        return []
    # torch keeps an index in 8 bits: "cuda:256" would name cuda:0, "cuda:255" every card.
    past = re.fullmatch(r"\s*\w+:(\d+)\s*", written)
    named = [d for d in gpus if d.type == device.type and device.index in (None, d.index)]
    if not named or past and int(past[1]) > 127:
        has = ", ".join(repr(str(d)) for d in [_CPU, *gpus])
        raise ValueError(f"device {written!r} is not on this machine, which has {has}")
    return named


def in_use(device: torch.device) -> bool:
    """Whether this process may have work queued on ``device``: False for a CUDA card
    it never used (asked without starting CUDA there), True for any other GPU."""
    return device.type != "cuda" or _cuda_has_context is None or _cuda_has_context(device.index)


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until work queued on ``device`` is done (``None``: every GPU this process
    used); a no-op on the CPU. A clock read without it times only the kernel launch."""
    for gpu_ in gpus_named(device):
        if in_use(gpu_):
            torch.accelerator.synchronize(gpu_)
