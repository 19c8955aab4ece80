"""host_and_device_seconds(): each side's time per step, on a simulated GPU timeline.

No CPU build of torch can run its CUDA path, so the GPU is a model: a queue that
runs each piece of work after the previous one, and never before the host has
queued it; CUDA events complete when the queue reaches them.
"""

import pytest
import torch

import d2l_gpu
from d2l_gpu import timing
from tests.simulate import simulate_machine


class SimulatedGPU:
    """Host clock ``now`` and the time ``free_at`` when the GPU's queue runs dry."""

    def __init__(self, monkeypatch, busy_product: float) -> None:
        self.now = self.free_at = 0.0
        self.busy_product, self.products = busy_product, 0
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self, stream=None):
                self.at = max(gpu.free_at, gpu.now)

            def query(self):
                return self.at <= gpu.now

            def synchronize(self):
                gpu.now = max(gpu.now, self.at)

            def elapsed_time(self, other):
                return (other.at - self.at) * 1e3

        class Hold:
            def __matmul__(self, other):
                gpu.products += 1
                gpu.queue(gpu.busy_product)
                return self

        simulate_machine(monkeypatch, "cuda", 1)
        monkeypatch.setattr(timing, "_clock", lambda: self.now)
        monkeypatch.setattr(torch.accelerator, "synchronize", lambda device=None: self.wait())
        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: "stream")
        monkeypatch.setattr(torch, "randn", lambda *size, device=None: Hold())

    def queue(self, seconds: float) -> None:
        self.free_at = max(self.free_at, self.now) + seconds

    def wait(self) -> None:
        self.now = max(self.now, self.free_at)

    def step(self, host: float, device: float):
        def step():
            self.now += host
            self.queue(device)

        return step


def test_a_host_bound_step_is_measured_on_both_sides_at_the_first_try(monkeypatch):
    gpu = SimulatedGPU(monkeypatch, busy_product=2.7e-3)
    host, device = d2l_gpu.host_and_device_seconds(gpu.step(100e-6, 10e-6), "cuda:0")
    assert host == pytest.approx(100e-6) and device == pytest.approx(10e-6)
    assert gpu.products == 10


def test_a_gpu_bound_step_is_measured_on_both_sides(monkeypatch):
    gpu = SimulatedGPU(monkeypatch, busy_product=2.7e-3)
    host, device = d2l_gpu.host_and_device_seconds(gpu.step(10e-6, 400e-6), "cuda:0")
    assert host == pytest.approx(10e-6) and device == pytest.approx(400e-6)


def test_when_the_gpu_runs_dry_first_it_gets_more_to_do(monkeypatch):
    # 20 steps of 1 ms on the host outlast 10 and 40 short products, not 160.
    gpu = SimulatedGPU(monkeypatch, busy_product=0.2e-3)
    host, device = d2l_gpu.host_and_device_seconds(gpu.step(1e-3, 50e-6), "cuda:0")
    assert gpu.products == 10 + 40 + 160
    assert host == pytest.approx(1e-3) and device == pytest.approx(50e-6)


def test_a_gpu_that_always_runs_dry_gives_an_upper_bound(monkeypatch):
    # Without enough queued work the GPU waits for the host: its time reads as the host's.
    gpu = SimulatedGPU(monkeypatch, busy_product=1e-6)
    host, device = d2l_gpu.host_and_device_seconds(gpu.step(1e-3, 50e-6), "cuda:0")
    assert gpu.products == 210 and device >= 50e-6 and device == pytest.approx(host, rel=0.1)


@pytest.mark.parametrize(
    ("device", "steps", "error", "message"),
    [
        ("cpu", 20, ValueError, "device must be a CUDA device such as 'cuda:0', got 'cpu'"),
        ("mps", 20, ValueError, "got 'mps'"),
        ("cuda:0", 0, ValueError, "steps must be a count from 1 to 10000, got 0"),
        ("cuda:0", 2.5, TypeError, "steps must be a count from 1 to 10000, got 2.5"),
    ],
)
def test_bad_arguments_are_refused_before_the_step_runs(device, steps, error, message):
    calls = []
    with pytest.raises(error, match=message):
        d2l_gpu.host_and_device_seconds(lambda: calls.append(1), device, steps=steps)
    assert calls == []
