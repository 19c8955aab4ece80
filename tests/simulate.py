"""Pretend this machine has other accelerators, by monkeypatching torch's queries.

Good for testing the helpers' logic; no evidence that GPU code works.
"""

from __future__ import annotations

import time

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
