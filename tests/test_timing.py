"""Timers and benchmark(): the book's interface, real waits for the right device."""

import re
import subprocess
import sys
import time

import pytest
import torch

import d2l_gpu
from d2l_gpu import devices, timing
from tests.simulate import record_waits, simulate_machine

CUDA0, CUDA1 = torch.device("cuda", 0), torch.device("cuda", 1)


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


def test_timer_waits_for_the_simulated_device_before_reading_the_clock(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    waits = record_waits(monkeypatch, seconds=0.02)
    elapsed = d2l_gpu.Timer("cuda:0").stop()
    # stop() waited for the queued work (20 ms) before reading the clock.
    assert elapsed >= 0.02
    assert waits == [CUDA0, CUDA0]


def test_timer_on_cpu_never_synchronizes(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    waits = record_waits(monkeypatch)
    d2l_gpu.Timer("cpu").stop()
    assert waits == []


@pytest.mark.parametrize(
    ("override", "expected"),
    [(None, [CUDA0, CUDA1]), ("cuda:1", [CUDA1]), ("cuda", [CUDA0, CUDA1]), ("cpu", [])],
)
def test_default_clocks_wait_for_the_devices_the_helpers_offer(monkeypatch, override, expected):
    simulate_machine(monkeypatch, "cuda", 2)
    if override:
        monkeypatch.setenv(devices.ENV_VAR, override)
    waits = record_waits(monkeypatch)
    d2l_gpu.Timer().stop()
    assert waits == expected * 2
    waits.clear()
    with d2l_gpu.Benchmark("quiet"):
        pass
    assert waits == expected * 2
    waits.clear()
    d2l_gpu.benchmark(lambda: None, min_run_time=0.01, warmup=0)
    assert set(waits) == set(expected)


def test_default_clocks_skip_a_gpu_this_process_never_used(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 3)
    monkeypatch.setattr(devices, "_cuda_has_context", lambda index: index != 1)
    waits = record_waits(monkeypatch)
    d2l_gpu.Timer().stop()
    d2l_gpu.synchronize()
    assert waits == [CUDA0, torch.device("cuda", 2)] * 3


def test_timer_without_device_on_simulated_mps_waits_for_it(monkeypatch):
    simulate_machine(monkeypatch, "mps", 1)
    waits = record_waits(monkeypatch)
    d2l_gpu.Timer().stop()
    assert waits == [torch.device("mps", 0)] * 2


def test_timer_for_a_device_this_machine_lacks_is_a_clear_error(monkeypatch):
    simulate_machine(monkeypatch, None, 0)
    with pytest.raises(ValueError, match="device='cuda:1' is not a device this machine has"):
        d2l_gpu.Timer("cuda:1")


def test_benchmark_context_prints_description_and_seconds(capsys):
    with d2l_gpu.Benchmark("ten ms") as bench:
        time.sleep(0.01)
    printed = capsys.readouterr().out
    assert re.fullmatch(r"ten ms: \d+\.\d{4} sec\n", printed)
    assert bench.elapsed >= 0.01


def test_benchmark_measures_a_known_duration():
    m = d2l_gpu.benchmark(time.sleep, 0.002, min_run_time=0.05, warmup=1)
    assert m.median >= 0.002  # sleep() may overrun on a busy machine, never underrun
    assert m.runs >= timing.MIN_RUNS and m.number_per_run == 1
    assert m.q1 <= m.median <= m.q3
    assert m.iqr == pytest.approx(m.q3 - m.q1)
    assert "median" in str(m)


def test_benchmark_warms_up_and_passes_arguments():
    calls = []
    m = d2l_gpu.benchmark(lambda a, b=0: calls.append((a, b)), 1, b=2, warmup=5, min_run_time=0.01)
    assert calls[:5] == [(1, 2)] * 5
    assert len(calls) >= 5 + m.runs * m.number_per_run


def test_benchmark_synchronizes_the_device_it_is_given(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    waits = record_waits(monkeypatch, seconds=0.02)
    m = d2l_gpu.benchmark(lambda: None, device="cuda:1", min_run_time=0.05, warmup=0)
    assert waits and set(waits) == {CUDA1}
    # Each block's clock waits 20 ms for the simulated device.
    assert m.median * m.number_per_run >= 0.02


class _SimulatedTime:
    """A clock that moves only by what each step costs, so a benchmark's sizing is
    checked exactly, however busy the machine: each wait for the device costs
    ``wait`` seconds and each call of ``op`` costs ``call`` seconds."""

    def __init__(self, monkeypatch, wait: float, call: float) -> None:
        self.now, self.call = 0.0, call
        simulate_machine(monkeypatch, "cuda", 1)
        monkeypatch.setattr(timing, "_clock", lambda: self.now)
        monkeypatch.setattr(torch.accelerator, "synchronize", lambda device: self.spend(wait))

    def spend(self, seconds: float) -> None:
        self.now += seconds

    def op(self) -> None:
        self.spend(self.call)


def test_benchmark_with_a_costly_sync_keeps_it_small_and_still_finishes_on_time(monkeypatch):
    """An empty op (0.1 us) on a device whose synchronize costs 5 us, as a GPU's does."""
    sim = _SimulatedTime(monkeypatch, wait=5e-6, call=1e-7)
    m = d2l_gpu.benchmark(sim.op, device="cuda:0", min_run_time=0.2, warmup=0)
    assert m.median == pytest.approx(1e-7, rel=0.01)
    assert 5e-6 < 0.01 * m.number_per_run * 1e-7  # the wait is < 1 % of a block
    assert 90 <= m.runs <= 110  # about min_run_time / (min_run_time / 100)
    assert sim.now <= 1.1 * 0.2, f"benchmark took {sim.now:.3f} s for min_run_time=0.2"


def test_benchmark_of_a_millisecond_op_with_a_costly_sync_runs_one_call_a_block(monkeypatch):
    sim = _SimulatedTime(monkeypatch, wait=5e-6, call=3e-3)
    m = d2l_gpu.benchmark(sim.op, device="cuda:0", min_run_time=0.2)
    assert m.number_per_run == 1 and m.runs >= 60
    assert m.median == pytest.approx(3e-3 + 5e-6)  # one wait per block, 0.2 % of it
    assert sim.now <= 1.1 * 0.2 + 3 * 3e-3  # plus the warm-up calls


def test_benchmark_of_a_real_op_has_a_spread():
    m = d2l_gpu.benchmark(time.sleep, 0.003, min_run_time=0.1)
    assert m.iqr > 0 and m.median >= 0.003


def test_benchmark_sets_threads_only_while_it_runs():
    before = torch.get_num_threads()
    seen = []
    d2l_gpu.benchmark(
        lambda: seen.append(torch.get_num_threads()), num_threads=1, warmup=1, min_run_time=0.01
    )
    assert set(seen) == {1}
    assert torch.get_num_threads() == before


def test_benchmark_of_a_call_longer_than_min_run_time_keeps_ten_runs_and_its_calibration():
    calls = []

    def slow():
        calls.append(None)
        time.sleep(0.03)

    m = d2l_gpu.benchmark(slow, min_run_time=0.01, warmup=0)
    assert (m.runs, m.number_per_run) == (timing.MIN_RUNS, 1)
    # No call is thrown away: the block that sized the runs is the first run.
    assert len(calls) == timing.MIN_RUNS
    assert m.median >= 0.03


_SECONDS = "a number of seconds > 0 and <= 3600"
_WARMUP = "a count from 0 to 1000"
_THREADS = "a count from 1 to 1024, or None"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_run_time": 0}, ValueError, f"min_run_time must be {_SECONDS}, got 0"),
        ({"min_run_time": -1.0}, ValueError, "min_run_time must be .*, got -1.0"),
        ({"min_run_time": float("nan")}, ValueError, "min_run_time must be .*, got nan"),
        ({"min_run_time": float("inf")}, ValueError, "min_run_time must be .*, got inf"),
        ({"min_run_time": "0.2"}, TypeError, "min_run_time must be .*, got '0.2'"),
        ({"min_run_time": True}, TypeError, "min_run_time must be .*, got True"),
        ({"min_run_time": 1e308}, ValueError, f"min_run_time must be {_SECONDS}, got 1e\\+308"),
        ({"warmup": -1}, ValueError, f"warmup must be {_WARMUP}, got -1"),
        ({"warmup": 1.5}, TypeError, f"warmup must be {_WARMUP}, got 1.5"),
        ({"warmup": 10**12}, ValueError, f"warmup must be {_WARMUP}, got {10**12}"),
        ({"num_threads": 0}, ValueError, f"num_threads must be {_THREADS}, got 0"),
        ({"num_threads": "2"}, TypeError, f"num_threads must be {_THREADS}, got '2'"),
        ({"num_threads": 2**63}, ValueError, f"num_threads must be {_THREADS}, got {2**63}"),
    ],
)
def test_benchmark_rejects_bad_settings_naming_them(kwargs, error, message):
    calls = []
    with pytest.raises(error, match=message):
        d2l_gpu.benchmark(calls.append, None, **kwargs)
    assert calls == []


def test_benchmark_accepts_any_real_number_of_seconds():
    from fractions import Fraction

    m = d2l_gpu.benchmark(lambda: None, min_run_time=Fraction(1, 100), warmup=0)
    assert m.runs >= timing.MIN_RUNS


def test_measurement_from_times_gives_median_and_iqr():
    m = d2l_gpu.Measurement.from_times([0.005, 0.001, 0.003, 0.002, 0.004], label="five")
    assert (m.median, m.iqr, m.runs, m.number_per_run) == (0.003, 0.002, 5, 1)
    assert m.label == "five"
    assert str(m) == "five: 3.000 ms median, IQR 2.000 ms, 5 runs x 1"


def test_measurement_from_no_times_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one time"):
        d2l_gpu.Measurement.from_times([])


@pytest.mark.gpu
def test_timer_agrees_with_cuda_events_and_an_unsynchronized_clock_does_not():
    if d2l_gpu.accelerator_type() != "cuda":
        pytest.skip("CUDA events need a CUDA device")
    device, repeats = d2l_gpu.try_gpu(), 20
    x = torch.randn(4096, 4096, device=device)
    with torch.cuda.device(device):
        for _ in range(3):  # warm-up: cuBLAS handle, workspace, kernel choice
            x @ x
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        timer = d2l_gpu.Timer(device)
        start.record()
        for _ in range(repeats):
            x @ x
        end.record()
        synced = timer.stop()
        events = start.elapsed_time(end) / 1000

        tik = time.perf_counter()
        for _ in range(repeats):
            x @ x
        unsynced = time.perf_counter() - tik
        torch.cuda.synchronize(device)

    assert synced == pytest.approx(events, rel=0.05)
    assert unsynced < 0.5 * events


@pytest.mark.gpu
def test_benchmark_on_the_gpu_has_many_runs_and_takes_about_min_run_time():
    device = d2l_gpu.try_gpu()
    x = torch.randn(2048, 2048, device=device)
    for fn, args in ((torch.mm, (x, x)), (lambda: None, ())):
        # Outside the wall clock: a first product alone may load cuBLAS and its kernels.
        fn(*args)
        d2l_gpu.synchronize(device)
        tik = time.perf_counter()
        m = d2l_gpu.benchmark(fn, *args, device=device, min_run_time=0.2)
        wall = time.perf_counter() - tik
        assert m.runs >= 10 and m.iqr > 0, m
        assert wall < 0.6, f"{m}: took {wall:.2f} s for min_run_time=0.2"


@pytest.mark.gpu
def test_default_timer_leaves_an_unused_gpu_untouched():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    code = (
        "import torch, d2l_gpu; x = torch.ones(8, device='cuda:0'); "
        "t = d2l_gpu.Timer(); (x * 2).sum(); t.stop(); "
        "print(torch._C._cuda_hasPrimaryContext(0), torch._C._cuda_hasPrimaryContext(1))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
