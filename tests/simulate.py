"""Pretend this machine has other accelerators, and a clock and GPU stream that move
only by what the code under test does, by monkeypatching torch's queries; or that a
child Python lacks some packages.

Good for testing the helpers' logic; no evidence that GPU code works.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from d2l_gpu import devices, timing


def python_without(folder: Path, modules: list[str]) -> dict[str, str]:
    """The environment of a child Python that cannot import ``modules`` (a sitecustomize
    in ``folder`` hides them) and does not autoload pytest's plugins, as on a bare box."""
    (folder / "sitecustomize.py").write_text(
        f"import sys\nsys.modules.update(dict.fromkeys({modules}))"
    )
    return {"PYTHONPATH": str(folder), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def simulate_machine(monkeypatch: pytest.MonkeyPatch, kind: str | None, count: int) -> None:
    """Make torch report ``count`` devices of backend ``kind`` (None: no accelerator)."""
    available = kind is not None and count > 0
    current = torch.device(kind) if available else None
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: available)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: current)
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: count if available else 0)
    # On a real CUDA machine the driver would be asked about devices that may not exist.
    monkeypatch.setattr(devices, "_cuda_has_context", None)


def record_waits(monkeypatch: pytest.MonkeyPatch) -> list[torch.device]:
    """Replace torch's wait for a device; return the live list of devices waited for."""
    waits: list[torch.device] = []

    def synchronize(device=None):
        waits.append(torch.device(device) if device is not None else None)

    monkeypatch.setattr(torch.accelerator, "synchronize", synchronize)
    return waits


def simulate_cuda_contexts(
    monkeypatch: pytest.MonkeyPatch,
    in_use: set[int] = frozenset(),
    free_total: tuple[int, int] = (12 * 2**30, 16 * 2**30),
    nvml_used: int | None = None,
) -> set[int]:
    """Keep CUDA primary contexts as the driver does; return the live set of cards that have one.

    Cards in ``in_use`` start with one. As with the real driver, asking a card's free
    memory or waiting on it creates one; its name and size do not. ``nvml_used`` is
    NVML's answer for every card (None: nvidia-ml-py is missing).
    """
    contexts = set(in_use)

    def needs_context(device=None):
        contexts.add(torch.device(device or "cuda").index or 0)

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
    monkeypatch.setattr(torch.accelerator, "synchronize", needs_context)
    return contexts


class Timeline:
    """A host clock and one GPU stream that move only by the work they are given.

    The host's clock ``now`` moves by host work. A kernel launched at ``now`` follows
    the stream's rule: it starts as soon as it is launched and the GPU is free (done
    with every kernel launched before it), so host and GPU overlap wherever they can.
    Waiting for the GPU moves ``now`` to the time it runs dry, plus ``sync_cost``.
    Patches ``d2l_gpu.timing``'s clock, torch's wait and (``cuda_events``) CUDA events.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, sync_cost: float = 0.0) -> None:
        self.now = self.free_at = 0.0
        self.sync_cost, self.calls, self.launches = sync_cost, [], 0
        monkeypatch.setattr(timing, "_clock", lambda: self.now)
        monkeypatch.setattr(torch.accelerator, "synchronize", lambda device=None: self.sync())

    def host(self, seconds: float) -> None:
        self.now += seconds

    def launch(self, seconds: float) -> None:
        self.launches += 1
        self.free_at = max(self.free_at, self.now) + seconds

    def sync(self) -> None:
        self.now = max(self.now, self.free_at) + self.sync_cost

    def program(self, *work: tuple[str, float]):
        """A function doing ``work`` in order: ("host", s) costs s host seconds, ("gpu", s)
        launches a kernel of s seconds."""
        act = {"host": self.host, "gpu": self.launch}

        def run() -> None:
            for kind, seconds in work:
                act[kind](seconds)

        return run

    def side(self, name: str, cost):
        """A function costing ``cost`` host seconds a call (or ``cost(now)``); logs ``name``."""

        def call() -> None:
            self.calls.append(name)
            self.host(cost(self.now) if callable(cost) else cost)

        return call

    def cuda_events(self, monkeypatch: pytest.MonkeyPatch, busy_product: float) -> None:
        """CUDA events on this stream; ``torch.randn`` makes a matrix whose product
        is a kernel of ``busy_product`` seconds."""
        timeline = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self, stream=None):  # completes when the stream reaches it
                self.at = max(timeline.free_at, timeline.now)

            def query(self):
                return self.at <= timeline.now

            def synchronize(self):
                timeline.now = max(timeline.now, self.at)

            def elapsed_time(self, other):
                return (other.at - self.at) * 1e3

        class Matrix:
            def __matmul__(self, other):
                timeline.launch(busy_product)
                return self

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: "stream")
        monkeypatch.setattr(torch, "randn", lambda *size, device=None: Matrix())
