"""Pretend this machine has other accelerators, by monkeypatching torch's queries.

Good for testing the helpers' logic; no evidence that GPU code works.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch

from d2l_gpu import devices


def simulate_machine(monkeypatch: pytest.MonkeyPatch, kind: str | None, count: int) -> None:
    """Make torch report ``count`` devices of backend ``kind`` (None: no accelerator)."""
    available = kind is not None and count > 0
    current = torch.device(kind) if available else None
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: available)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: current)
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: count if available else 0)
    # On a real CUDA machine the driver would be asked about devices that may not exist.
    monkeypatch.setattr(devices, "_cuda_has_context", None)
    devices._visible_gpus.cache_clear()


def record_waits(monkeypatch: pytest.MonkeyPatch, seconds: float = 0.0) -> list[torch.device]:
    """Replace every way torch waits for a device; return the list of devices waited for.

    Each wait spins ``seconds`` (a real synchronize costs a few microseconds).
    """
    waits: list[torch.device] = []

    def fake_synchronize(device=None):
        waits.append(torch.device(device) if device is not None else None)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    monkeypatch.setattr(torch.accelerator, "synchronize", fake_synchronize)
    monkeypatch.setattr(torch.cuda, "synchronize", fake_synchronize)
    monkeypatch.setattr(torch.mps, "synchronize", lambda: fake_synchronize(torch.device("mps")))
    return waits


def simulate_cuda_contexts(
    monkeypatch: pytest.MonkeyPatch,
    in_use: set[int] = frozenset(),
    free_total: tuple[int, int] = (12 * 2**30, 16 * 2**30),
    nvml_used: int | None = None,
) -> set[int]:
    """Keep CUDA primary contexts as the driver does; return the live set of cards that have one.

    Cards in ``in_use`` start with one. As with the real driver, asking a card's free
    memory, waiting on it or making it current creates one; its name and size do not.
    ``nvml_used`` is NVML's answer for every card (None: nvidia-ml-py is missing).
    """
    contexts = set(in_use)

    def needs_context(device=None):
        index = device if isinstance(device, int) else torch.device(device or "cuda").index
        contexts.add(index or 0)

    def mem_get_info(device=None):
        needs_context(device)
        return free_total

    def device_memory_used(device=None):
        if nvml_used is None:
            raise ModuleNotFoundError("nvidia-ml-py does not seem to be installed")
        return nvml_used

    def properties(device):
        index = torch.device(device).index
        return SimpleNamespace(name=f"Simulated GPU #{index}", total_memory=free_total[1])

    monkeypatch.setattr(devices, "_cuda_has_context", contexts.__contains__)
    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    monkeypatch.setattr(torch.cuda, "device_memory_used", device_memory_used)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: properties(d).name)
    for module in (torch.cuda, torch.accelerator):
        monkeypatch.setattr(module, "synchronize", needs_context)
    monkeypatch.setattr(torch.cuda, "set_device", needs_context)
    return contexts


# Every way the report could start CUDA or ask a card; none is harmless under D2L_DEVICE=cpu.
CUDA_ENTRY_POINTS = {
    torch.cuda: (
        "_lazy_init", "init", "synchronize", "set_device", "current_device", "mem_get_info",
        "get_device_name", "get_device_properties", "get_device_capability",
        "device_memory_used", "reset_peak_memory_stats",
    ),
    torch.accelerator: (
        "synchronize", "get_memory_info", "set_device_index", "current_device_index",
    ),
}  # fmt: skip


def guard_cuda(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every CUDA entry point record its name and raise; return the live record.

    The record is what a test checks: code under test may catch the error.
    """
    touched: list[str] = []

    def entry(name: str):
        def refuse(*args, **kwargs):
            touched.append(name)
            raise RuntimeError(f"touched CUDA: {name}")

        return refuse

    for module, names in CUDA_ENTRY_POINTS.items():
        for name in names:
            monkeypatch.setattr(module, name, entry(f"{module.__name__}.{name}"))
    monkeypatch.setattr(torch._C, "_cuda_init", entry("torch._C._cuda_init"), raising=False)
    return touched


def simulate_cudnn(
    monkeypatch: pytest.MonkeyPatch,
    compiled: tuple[int, int, int] = (9, 10, 2),
    loaded: int = 91900,
) -> None:
    """Make torch a CUDA build with cuDNN: compiled against ``compiled``, ``loaded`` found.

    ``torch.backends.cudnn.version()`` is modelled on torch's own: it asks every card's
    compute capability (which starts CUDA) before it answers.
    """

    def version() -> int:
        for index in range(torch.accelerator.device_count()):
            torch.cuda.get_device_capability(index)
        return loaded

    monkeypatch.setattr(torch._C, "_has_cudnn", True)
    monkeypatch.setattr(torch._C, "_cudnn", SimpleNamespace(getCompileVersion=lambda: compiled),
                        raising=False)  # fmt: skip
    monkeypatch.setattr(torch.backends.cudnn, "version", version)
