"""Name the devices a tensor can live on, pick ones that exist, and wait for them.

The names follow the d2l book package so book code runs unchanged, but "GPU"
means whatever accelerator ``torch.accelerator`` finds: CUDA (and ROCm, which
reports itself as CUDA), Apple MPS (always one device), Intel XPU, ...
``D2L_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``, ...) restricts what the
helpers offer for a whole run; unlike ``CUDA_VISIBLE_DEVICES`` it neither hides
nor renumbers GPUs for torch itself.
"""

from __future__ import annotations

import functools
import operator
import os
import re

import torch

MIN_TORCH = (2, 6)  # torch.accelerator, which every helper asks
if tuple(map(int, re.findall(r"\d+", torch.__version__)[:2])) < MIN_TORCH:
    # Named as this package's failure, `python -m d2l_gpu` says it in one line.
    raise ImportError(
        f"d2l_gpu needs torch >= 2.6, found torch {torch.__version__}", name=__package__
    )

ENV_VAR = "D2L_DEVICE"
_CPU = torch.device("cpu")
# torch keeps a device index in 8 bits (c10::DeviceIndex): torch.device("cuda", 257)
# is cuda:1. Indices are checked against this before a torch.device is built.
MAX_INDEX = 127


def _check_index(i: object, func: str) -> int:
    """Return ``i`` as an int torch can name, or explain what a GPU index must be."""
    accepted = f"{func}(i) takes a GPU index as an int from 0 to {MAX_INDEX} (0 is the first GPU)"
    if isinstance(i, bool):
        raise TypeError(f"{accepted}, got the bool {i!r}")
    try:
        index = operator.index(i)
    except TypeError:
        raise TypeError(f"{accepted}, got {i!r} of type {type(i).__name__}") from None
    if not 0 <= index <= MAX_INDEX:
        raise ValueError(f"{accepted}, got {index}")
    return index


def _hardware_kind() -> str | None:
    """The accelerator backend usable now, or None (torch 2.6 lacks ``check_available``)."""
    if not torch.accelerator.is_available():
        return None
    return torch.accelerator.current_accelerator().type


def _hardware_gpus() -> list[torch.device]:
    """Every accelerator device this machine really has, ignoring ``D2L_DEVICE``."""
    kind = _hardware_kind()
    return [torch.device(kind, i) for i in range(torch.accelerator.device_count())] if kind else []


def _parse(value: str, source: str) -> tuple[torch.device, ...]:
    """The accelerators a device string names: none for ``cpu``, all for ``cuda``.

    The one parser for ``D2L_DEVICE`` and the clocks' ``device``; ``source`` names
    the value in errors. It reads the index itself: torch.device wraps ``cuda:256`` to 0.
    """
    kind, colon, digits = value.strip().lower().partition(":")
    index = int(digits) if digits.isascii() and digits.isdigit() else None
    if kind == "cpu" and (not colon or index == 0):
        return ()
    gpus = _hardware_gpus()
    if gpus and kind == gpus[0].type:
        if not colon:
            return tuple(gpus)
        if index is not None and index < len(gpus):
            return (gpus[index],)
    valid = ", ".join(repr(str(d)) for d in [_CPU, *gpus])
    every = f" (or {gpus[0].type!r} for all {len(gpus)})" if gpus else ""
    raise ValueError(
        f"{source}={value!r} is not a device this machine has; valid values here: {valid}{every}"
    )


@functools.lru_cache(maxsize=16)
def _visible_gpus(value: str | None, source: str = ENV_VAR) -> tuple[torch.device, ...]:
    # Cached per value: device counts are fixed once a process starts, and
    # try_gpu() sits in loops where a fresh query each call would show.
    return _parse(value, source) if value else tuple(_hardware_gpus())


def _gpus() -> tuple[torch.device, ...]:
    # Read on every call, so setting D2L_DEVICE during a run takes effect.
    return _visible_gpus(os.environ.get(ENV_VAR))


def accelerator_type() -> str | None:
    """The accelerator backend the helpers use (``'cuda'``, ``'mps'``, ...), or None."""
    gpus = _gpus()
    return gpus[0].type if gpus else None


def cpu() -> torch.device:
    """The CPU device: host memory, always present."""
    return _CPU


def gpu(i: int = 0) -> torch.device:
    """Name the i-th GPU, whether or not it exists (CUDA's name without an accelerator)."""
    return torch.device(_hardware_kind() or "cuda", _check_index(i, "gpu"))


def num_gpus() -> int:
    """How many accelerator devices the helpers may use (MPS counts as one)."""
    return len(_gpus())


def try_gpu(i: int = 0) -> torch.device:
    """The i-th GPU if it exists, else the CPU, so code runs on any machine."""
    # The exact-int test and _gpus() inline: this runs in loops.
    index = i if type(i) is int and 0 <= i <= MAX_INDEX else _check_index(i, "try_gpu")
    gpus = _visible_gpus(os.environ.get(ENV_VAR))
    return gpus[index] if index < len(gpus) else _CPU


def try_all_gpus() -> list[torch.device]:
    """Every GPU, or ``[cpu()]`` when there is none (what the book promises)."""
    return list(_visible_gpus(os.environ.get(ENV_VAR))) or [_CPU]


def _devices_to_wait_for(device: torch.device | str | None) -> tuple[torch.device, ...]:
    """What a clock waits for: ``device`` (``cuda``: every CUDA GPU), by default the
    GPUs the helpers offer, and nothing for the CPU: D2L_DEVICE=cpu touches no GPU."""
    return _gpus() if device is None else _visible_gpus(str(device), "device")


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until work queued on ``device`` is done; a no-op on the CPU.

    A kernel launch returns at once, so a clock read without this measures only
    the launch. ``None`` waits for every GPU the helpers offer that this process used.
    """
    _wait(_devices_to_wait_for(device))


# Whether this process has a context on a CUDA (or ROCm) device, asked without
# creating one; torch has no public per-device query. Absent from CPU builds.
# A context costs memory on its card, and fails on one held in exclusive mode.
_cuda_has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)


def _wait(devices: tuple[torch.device, ...]) -> None:
    for device in devices:
        # A GPU this process never used has nothing queued: no context is made for it.
        if device.type == "cuda" and _cuda_has_context and not _cuda_has_context(device.index):
            continue
        torch.accelerator.synchronize(device)
