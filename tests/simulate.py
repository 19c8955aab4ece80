"""Pretend this machine has other accelerators, by monkeypatching torch's queries.

Good for testing the helpers' logic; no evidence that GPU code works.
"""

from __future__ import annotations

import pytest
import torch

from d2l_gpu import devices


def simulate_machine(
    monkeypatch: pytest.MonkeyPatch, kind: str | None, count: int, *, accelerator_api: bool = True
) -> None:
    """Make torch report ``count`` devices of backend ``kind`` (None: no accelerator)."""
    available = kind is not None and count > 0
    if accelerator_api:
        monkeypatch.setattr(torch.accelerator, "is_available", lambda: available)
        current = torch.device(kind) if available else None
        monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: current)
        monkeypatch.setattr(torch.accelerator, "device_count", lambda: count if available else 0)
    else:
        monkeypatch.delattr(torch, "accelerator")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: kind == "cuda" and available)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count if kind == "cuda" else 0)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: kind == "mps" and available)
    devices._visible_gpus.cache_clear()
