"""Timers and benchmark(): the book's interface, real waits for the device."""

import re
import time

import pytest
import torch

import d2l_gpu
from d2l_gpu import timing
from tests.simulate import simulate_machine


@pytest.fixture
def slow_device(monkeypatch):
    """A simulated device whose queued work takes 20 ms to finish once waited for."""
    waits = []

    def fake_synchronize(device=None):
        waits.append(device)
        time.sleep(0.02)

    monkeypatch.setattr(timing, "synchronize", fake_synchronize)
    return waits


def test_timer_records_times_like_the_book():
    timer = d2l_gpu.Timer()
    time.sleep(0.01)
    first = timer.stop()
    timer.start()
    second = timer.stop()
    assert first >= 0.01
    assert timer.times == [first, second]
    assert timer.sum() == pytest.approx(first + second)
    assert timer.avg() == pytest.approx((first + second) / 2)
    assert timer.cumsum() == pytest.approx([first, first + second])


def test_timer_avg_without_times_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one recorded time"):
        d2l_gpu.Timer().avg()


def test_timer_stop_twice_without_start_is_a_clear_error():
    timer = d2l_gpu.Timer()
    timer.stop()
    with pytest.raises(RuntimeError, match="needs a running timer; call start"):
        timer.stop()


def test_timer_waits_for_the_simulated_device_before_reading_the_clock(slow_device):
    timer = d2l_gpu.Timer("cuda:0")
    elapsed = timer.stop()
    # stop() waited for the queued work (20 ms) before reading the clock.
    assert elapsed >= 0.02
    assert slow_device == [torch.device("cuda", 0)] * 2


def test_timer_on_cpu_never_synchronizes(slow_device):
    timer = d2l_gpu.Timer("cpu")
    timer.stop()
    assert slow_device == []


def test_timer_without_device_synchronizes_the_simulated_accelerator(monkeypatch, slow_device):
    simulate_machine(monkeypatch, "mps", 1)
    d2l_gpu.Timer().stop()
    assert slow_device == [torch.device("mps")] * 2


def test_benchmark_context_prints_description_and_seconds(capsys):
    with d2l_gpu.Benchmark("ten ms") as bench:
        time.sleep(0.01)
    printed = capsys.readouterr().out
    assert re.fullmatch(r"ten ms: \d+\.\d{4} sec\n", printed)
    assert bench.elapsed >= 0.01


def test_benchmark_measures_a_known_duration():
    m = d2l_gpu.benchmark(time.sleep, 0.002, min_run_time=0.05, warmup=1)
    assert 0.002 <= m.median < 0.006
    assert m.runs >= 1 and m.number_per_run >= 1
    assert m.q1 <= m.median <= m.q3
    assert m.iqr == pytest.approx(m.q3 - m.q1)
    assert "median" in str(m)


def test_benchmark_warms_up_and_passes_arguments():
    calls = []
    m = d2l_gpu.benchmark(lambda a, b=0: calls.append((a, b)), 1, b=2, warmup=5, min_run_time=0.01)
    assert calls[:5] == [(1, 2)] * 5
    assert len(calls) >= 5 + m.runs * m.number_per_run


def test_benchmark_synchronizes_the_device_it_is_given(slow_device):
    m = d2l_gpu.benchmark(lambda: None, device="cuda:0", min_run_time=0.05, warmup=0)
    assert slow_device and set(slow_device) == {torch.device("cuda", 0)}
    # Each block's clock waits 20 ms for the simulated device.
    assert m.median * m.number_per_run >= 0.02


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"min_run_time": 0}, "min_run_time"), ({"warmup": -1}, "warmup")],
)
def test_benchmark_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        d2l_gpu.benchmark(lambda: None, **kwargs)


def _matmul_seconds_by_cuda_events(x, repeats):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        x @ x
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000


@pytest.mark.gpu
def test_timer_agrees_with_cuda_events_and_an_unsynchronized_clock_does_not():
    if d2l_gpu.accelerator_type() != "cuda":
        pytest.skip("CUDA events need a CUDA device")
    x = torch.randn(4096, 4096, device="cuda")
    repeats = 20
    x @ x
    events = _matmul_seconds_by_cuda_events(x, repeats)

    timer = d2l_gpu.Timer("cuda")
    for _ in range(repeats):
        x @ x
    synced = timer.stop()

    torch.cuda.synchronize()
    tik = time.perf_counter()
    for _ in range(repeats):
        x @ x
    unsynced = time.perf_counter() - tik
    torch.cuda.synchronize()

    assert synced == pytest.approx(events, rel=0.05)
    assert unsynced < 0.5 * events


def test_measurement_from_times_gives_median_and_iqr():
    m = d2l_gpu.Measurement.from_times([0.005, 0.001, 0.003, 0.002, 0.004], label="five")
    assert (m.median, m.iqr, m.runs, m.number_per_run) == (0.003, 0.002, 5, 1)
    assert m.label == "five"


def test_measurement_from_no_times_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one time"):
        d2l_gpu.Measurement.from_times([])
