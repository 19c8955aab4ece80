"""Name the devices a tensor can live on, and pick ones that exist.

The names follow the d2l book package (``cpu``, ``gpu``, ``num_gpus``,
``try_gpu``, ``try_all_gpus``) so book code runs unchanged, but "GPU" here means
whatever accelerator this torch build can use: CUDA (ROCm builds report
themselves as CUDA), Apple MPS (always exactly one device), Intel XPU, and any
other backend that ``torch.accelerator`` knows.

Setting ``D2L_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``, ...) restricts
what the helpers offer for a whole run, much like ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import functools
import operator
import os

import torch

ENV_VAR = "D2L_DEVICE"

__all__ = [
    "ENV_VAR",
    "accelerator_type",
    "available_devices",
    "cpu",
    "gpu",
    "num_gpus",
    "synchronize",
    "try_all_gpus",
    "try_gpu",
]


def _check_index(i: object, func: str) -> int:
    """Return ``i`` as a non-negative int, or explain what a GPU index must be."""
    if isinstance(i, bool):
        raise TypeError(f"{func}(i) takes a GPU index as an int >= 0, got the bool {i!r}")
    try:
        index = operator.index(i)
    except TypeError:
        raise TypeError(
            f"{func}(i) takes a GPU index as an int >= 0 (0 is the first GPU), "
            f"got {i!r} of type {type(i).__name__}"
        ) from None
    if index < 0:
        raise ValueError(f"{func}(i) takes a GPU index >= 0 (0 is the first GPU), got {index}")
    return index


def _hardware() -> tuple[str | None, int]:
    """The accelerator backend this process can use and its device count."""
    acc = getattr(torch, "accelerator", None)
    if acc is not None:
        if not acc.is_available():
            return None, 0
        return acc.current_accelerator().type, acc.device_count()
    # torch without torch.accelerator: ask the backends one by one.
    if torch.cuda.is_available():
        return "cuda", torch.cuda.device_count()
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps", 1
    return None, 0


def _hardware_gpus() -> list[torch.device]:
    """Every accelerator device this machine really has."""
    kind, count = _hardware()
    return [torch.device(kind, i) for i in range(count)] if kind else []


def available_devices() -> list[torch.device]:
    """Every device this machine really has, CPU first, ignoring ``D2L_DEVICE``."""
    return [torch.device("cpu"), *_hardware_gpus()]


def _parse_override(value: str) -> list[torch.device]:
    """Turn a ``D2L_DEVICE`` value into the accelerators it leaves visible."""
    gpus = _hardware_gpus()
    kind = gpus[0].type if gpus else None
    valid = ", ".join(repr(str(d)) for d in [torch.device("cpu"), *gpus])
    hint = f"{ENV_VAR}={value!r} is not a device this machine has; valid values here: {valid}"
    if kind:
        hint += f" (or {kind!r} for all {len(gpus)})"
    try:
        requested = torch.device(value.strip().lower())
    except RuntimeError:
        raise ValueError(hint) from None
    if requested.type == "cpu":
        return []
    if requested.type != kind:
        raise RuntimeError(hint)
    if requested.index is None:
        return gpus
    if requested.index >= len(gpus):
        raise RuntimeError(hint)
    return [requested]


@functools.lru_cache(maxsize=8)
def _visible_gpus(override: str | None) -> tuple[torch.device, ...]:
    # Cached per override value: device counts are fixed once a process starts,
    # and try_gpu() sits in loops where a fresh query each call would show.
    return tuple(_parse_override(override) if override else _hardware_gpus())


# os.environ.get costs about 1 us when the variable is unset (it raises and
# catches a KeyError); reading the mapping underneath keeps try_gpu() cheap
# while still seeing changes made during the run.
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEY = os.environ.encodekey(ENV_VAR) if _ENV_DATA is not None else None


def _override() -> str | None:
    if _ENV_DATA is None:
        return os.environ.get(ENV_VAR)
    raw = _ENV_DATA.get(_ENV_KEY)
    return None if raw is None else os.environ.decodevalue(raw)


def _gpus() -> tuple[torch.device, ...]:
    return _visible_gpus(_override())


def accelerator_type() -> str | None:
    """The accelerator backend the helpers use (``'cuda'``, ``'mps'``, ...), or None."""
    gpus = _gpus()
    return gpus[0].type if gpus else None


_CPU = torch.device("cpu")


def cpu() -> torch.device:
    """The CPU device: host memory, always present."""
    return _CPU


def gpu(i: int = 0) -> torch.device:
    """Name the i-th GPU, whether or not it exists (naming allocates nothing).

    On a machine without an accelerator the name is CUDA's, as in the book.
    """
    index = _check_index(i, "gpu")
    kind, _ = _hardware()
    return torch.device(kind or "cuda", index)


def num_gpus() -> int:
    """How many accelerator devices the helpers may use (MPS counts as one)."""
    return len(_gpus())


def try_gpu(i: int = 0) -> torch.device:
    """The i-th GPU if it exists, else the CPU, so code runs on any machine."""
    # The exact-int test first: this runs in loops, and the full check costs more.
    index = i if type(i) is int and i >= 0 else _check_index(i, "try_gpu")
    gpus = _gpus()
    return gpus[index] if index < len(gpus) else _CPU


def try_all_gpus() -> list[torch.device]:
    """Every GPU, or ``[cpu()]`` when there is none (what the book promises)."""
    return list(_gpus()) or [_CPU]


def _device_to_wait_for(device: torch.device | str | None) -> torch.device | None:
    """The accelerator ``device`` names (None: the current one), or None if nothing queues."""
    if device is None:
        kind, _ = _hardware()
        if kind is None:
            return None
        device = torch.device(kind)
    device = torch.device(device)
    return None if device.type in ("cpu", "meta") else device


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until work queued on ``device`` is done; a no-op on the CPU.

    Accelerators run asynchronously: a kernel launch returns at once, so a clock
    read without this measures only the launch. ``None`` means the current
    accelerator, if there is one.
    """
    device = _device_to_wait_for(device)
    if device is None:
        return
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    elif hasattr(torch, "accelerator"):
        torch.accelerator.synchronize(device)
    else:
        getattr(torch, device.type).synchronize(device)
