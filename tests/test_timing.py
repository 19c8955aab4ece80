"""The clocks: Timer, Benchmark, benchmark(), compare() and host_and_device_seconds().

Most tests run on ``Timeline`` (tests/simulate.py): a clock and a GPU stream that
move only by what each call costs, so a result is checked exactly, however busy
this machine is. The gpu-marked tests hold the same claims on a real GPU.
"""

import importlib
import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import d2l_gpu
from d2l_gpu.timing import MIN_BLOCKS, Measurement
from tests.simulate import Timeline, record_waits, simulate_cuda_contexts, simulate_machine

CUDA0, CUDA1, MPS0 = torch.device("cuda", 0), torch.device("cuda", 1), torch.device("mps", 0)


# Timer and Benchmark: the book's interface


def test_timer_and_benchmark_read_the_clock_like_the_book_once_the_gpu_is_done(monkeypatch, capsys):
    simulate_machine(monkeypatch, "cuda", 1)
    clock = Timeline(monkeypatch)
    timer = d2l_gpu.Timer()
    clock.launch(0.5)  # queued on the GPU: stop() waits for it before reading the clock
    assert timer.stop() == 0.5
    timer.start()
    clock.host(0.25)
    assert timer.stop() == 0.25
    assert timer.times == [0.5, 0.25] and timer.cumsum() == [0.5, 0.75]
    assert (timer.sum(), timer.avg()) == (0.75, 0.375)
    with pytest.raises(RuntimeError, match=r"needs a running timer; call start\(\) first"):
        timer.stop()
    with pytest.raises(ValueError, match="at least one recorded time"):
        d2l_gpu.Timer().avg()
    with d2l_gpu.Benchmark("a quarter") as bench:
        clock.launch(0.25)
    assert bench.elapsed == 0.25 and capsys.readouterr().out == "a quarter: 0.2500 sec\n"


@pytest.mark.parametrize(
    ("kind", "device", "expected"),
    [
        ("cuda", None, [CUDA0, CUDA1]),
        ("cuda", "cuda", [CUDA0, CUDA1]),
        ("cuda", "cuda:1", [CUDA1]),
        ("cuda", "cpu", []),
        ("mps", None, [MPS0]),
        ("mps", "mps", [MPS0]),
    ],
)
def test_every_clock_waits_for_the_devices_it_is_given(monkeypatch, kind, device, expected):
    simulate_machine(monkeypatch, kind, 1 if kind == "mps" else 2)
    waits = record_waits(monkeypatch)
    d2l_gpu.Timer(device).stop()
    with d2l_gpu.Benchmark("quiet", device=device):
        pass
    d2l_gpu.synchronize(device)
    assert waits == expected * 5
    clock = Timeline(monkeypatch)
    waits = record_waits(monkeypatch)  # seen, but costing no time on the clock
    d2l_gpu.benchmark(clock.side("f", 1e-3), device=device, warmup=0)
    d2l_gpu.compare(clock.side("a", 1e-3), clock.side("b", 1e-3), device=device, warmup=0)
    assert set(waits) == set(expected) and (len(waits) > 40 or not expected)


def test_default_clocks_skip_a_gpu_this_process_never_used(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 3)
    contexts = simulate_cuda_contexts(monkeypatch, in_use={0, 2})
    d2l_gpu.Timer().stop()
    d2l_gpu.synchronize()
    assert contexts == {0, 2}  # waiting on card 1 would have started CUDA there


# benchmark()


def test_measurement_gives_median_quartiles_and_a_plain_line():
    m = Measurement([0.005, 0.001, 0.003, 0.002, 0.004], label="five")
    assert (m.q1, m.median, m.q3, m.iqr) == (0.002, 0.003, 0.004, 0.002)
    assert str(m) == "five: 3.000 ms median, IQR 2.000 ms (5 blocks)"
    assert str(Measurement([2.5e-9, 2.5e-9])) == "2.5 ns median, IQR 0.0 ns (2 blocks)"
    with pytest.raises(ValueError, match="at least one time"):
        Measurement([])


def _first_calls_cost_a_second(clock: Timeline, first: int = 4):
    costs = itertools.chain([1.0] * first, itertools.repeat(2e-3))  # as a first compile does
    return clock.side("f", lambda now: next(costs))


def test_benchmark_warms_up_then_times_at_least_ten_blocks(monkeypatch):
    clock = Timeline(monkeypatch)
    m = d2l_gpu.benchmark(_first_calls_cost_a_second(clock), label="f", warmup=4)
    assert clock.now >= 4 + 0.2  # the warm-up, then min_run_time of blocks and more
    assert max(m.times) == pytest.approx(2e-3) and m.iqr == pytest.approx(0, abs=1e-12)
    assert len(m.times) >= MIN_BLOCKS and m.label == "f"
    cold = d2l_gpu.benchmark(_first_calls_cost_a_second(Timeline(monkeypatch)), warmup=0)
    assert max(cold.times) > 0.5  # without the warm-up, slow first calls land in blocks
    # A call longer than min_run_time still gets its ten blocks (and no more than needed).
    slow = Timeline(monkeypatch)
    m = d2l_gpu.benchmark(slow.side("slow", 0.3), warmup=0)
    assert len(m.times) == MIN_BLOCKS and m.median == pytest.approx(0.3)
    assert len(slow.calls) == MIN_BLOCKS + 1  # blocks are sized once, at the cost of a call


def test_benchmark_times_the_gpu_work_not_just_its_launch(monkeypatch):
    # Each call spends 10 us on the host to launch a 1 ms kernel: the host runs ahead.
    simulate_machine(monkeypatch, "cuda", 1)
    clock = Timeline(monkeypatch, sync_cost=5e-6)
    launch = clock.program(("host", 10e-6), ("gpu", 1e-3))
    assert d2l_gpu.benchmark(launch).median == pytest.approx(1e-3, rel=1e-3)
    # A clock that does not wait (here: told the work is on the CPU) sees only launches.
    assert d2l_gpu.benchmark(launch, device="cpu").median == pytest.approx(10e-6, rel=1e-3)


def test_benchmark_keeps_a_costly_wait_out_of_the_time_per_call_and_its_blocks_short(monkeypatch):
    # A 5 us launch on a device whose wait costs 7 us, as a GPU's can: blocks grow until
    # the wait is a small part of one, yet stay near min_run_time / 10 (0.02 s here).
    simulate_machine(monkeypatch, "cuda", 1)
    clock = Timeline(monkeypatch, sync_cost=7e-6)
    m = d2l_gpu.benchmark(clock.side("op", 5e-6), warmup=0)
    assert m.median == pytest.approx(5e-6, rel=1e-3) and len(m.times) >= MIN_BLOCKS
    assert clock.now < 1.5  # ten blocks of 0.05 s, each sized anew; not 0.5 s each


def test_benchmark_sets_threads_only_while_it_runs_and_one_benchmark_at_a_time():
    # torch's count is the process's: a second benchmark that began while the first ran
    # found the first's 1 and put it back last, for every thread started afterwards.
    before, seen = torch.get_num_threads(), set()
    first_in, second_in, first_done = (threading.Event() for _ in range(3))

    def first() -> None:  # waits once for the second to start (it cannot, until this ends)
        seen.add(torch.get_num_threads())
        if not first_in.is_set():
            first_in.set()
            second_in.wait(0.5)

    def second() -> None:
        seen.add(torch.get_num_threads())
        second_in.set()
        first_done.wait(0.5)

    def bench(fn: Callable[[], None]) -> None:
        d2l_gpu.benchmark(fn, num_threads=1, min_run_time=0.01, warmup=1)

    torch.set_num_threads(2)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            pool.submit(bench, first).add_done_callback(lambda _: first_done.set())
            first_in.wait(10)
            pool.submit(bench, second)
        with ThreadPoolExecutor(max_workers=1) as later:  # a new thread takes torch's count
            assert later.submit(torch.get_num_threads).result() == 2
    finally:
        torch.set_num_threads(before)
    assert seen == {1}


def test_benchmark_of_a_real_sleep_is_never_shorter():
    m = d2l_gpu.benchmark(lambda: time.sleep(0.002), min_run_time=0.05, warmup=1)
    assert m.median >= 0.002 and len(m.times) >= MIN_BLOCKS and m.iqr >= 0


@pytest.mark.parametrize(
    ("fn", "kwargs", "error", "message"),
    [
        (3, {}, TypeError, "fn must be a function to call with no arguments, got 3"),
        (print, {"min_run_time": 0}, ValueError, r"seconds > 0, at most 3600 \(1 h\), got 0$"),
        (print, {"min_run_time": float("nan")}, ValueError, "min_run_time .*, got nan"),
        (print, {"min_run_time": math.inf}, ValueError, "min_run_time .*, got inf"),
        (print, {"min_run_time": "1"}, ValueError, "min_run_time .*, got '1'"),
        (print, {"min_run_time": True}, ValueError, "min_run_time .*, got True"),  # not 1 s
        (print, {"min_run_time": 1e300}, ValueError, "at most 3600 .*, got 1e"),  # never ends
        (print, {"min_run_time": 10**400}, ValueError, "at most 3600 .*, got 1000"),  # overflows
        (print, {"warmup": -1}, ValueError, "warmup must be a whole number >= 0, got -1"),
        (print, {"warmup": math.inf}, ValueError, "warmup must be .*, got inf"),
        (print, {"warmup": True}, ValueError, "warmup must be .*, got True"),
        (print, {"num_threads": 0}, ValueError, r"num_threads must be a whole number from 1 to"),
        *[(print, {"num_threads": n}, ValueError, "num_threads must") for n in (1.5, True, "2")],
        *[  # more threads than CPUs: no timing worth having; 2**63 overflowed inside torch
            (print, {"num_threads": n}, ValueError, rf"to {os.cpu_count()} \(this machine's CPUs\)")
            for n in (os.cpu_count() + 1, 10**5, 2**63)
        ],
    ],
)
def test_benchmark_refuses_bad_settings_naming_them(fn, kwargs, error, message):
    with pytest.raises(error, match=message):
        d2l_gpu.benchmark(fn, **kwargs)


# compare()


def _compare(clock, a_cost, b_cost, **kwargs):
    kwargs = {"labels": ("a", "b"), "warmup": 0, "min_run_time": 0.02, **kwargs}
    return d2l_gpu.compare(clock.side("a", a_cost), clock.side("b", b_cost), **kwargs)


@pytest.mark.parametrize(
    ("a_cost", "b_cost", "kwargs", "outcome", "says"),
    [
        (1e-3, 3e-3, {}, "slower", "b took 3.0x as long as a, in all 10 rounds."),
        # The side that took longer is named first, so the ratio reads above one.
        (13e-3, 1e-3, {}, "faster", "a took 13x as long as b, in all 10 rounds."),
        (1e-3, 2.5e-6, {}, "faster", "a took 400x as long as b, in all 10 rounds."),
        (1e-3, 1.2e-3, {}, "agree", "a and b took about as long (within 1.25x), in 10 rounds."),
        (1e-3, 1.2e-3, {"band": 1.1}, "slower", "b took 1.2x as long as a, in all 10 rounds."),
    ],
)
def test_compare_judges_the_gap_and_says_it(monkeypatch, a_cost, b_cost, kwargs, outcome, says):
    result = _compare(Timeline(monkeypatch), a_cost, b_cost, **kwargs)
    assert result.first.median == pytest.approx(a_cost)
    assert result.second.median == pytest.approx(b_cost)
    assert (result.outcome, result.ratio) == (outcome, pytest.approx(b_cost / a_cost))
    assert str(result) == says


@pytest.mark.parametrize("longer", ["a", "b"])
def test_a_gap_whose_round_ratios_reach_into_the_band_is_no_clear_difference(monkeypatch, longer):
    # One side costs 1.5 ms in most rounds and 1 ms in some, the other 1 ms: the median
    # ratio is beyond the band, the quartile nearest 1 inside it.
    costs = itertools.cycle([1.5e-3, 1e-3, 1.5e-3, 1e-3, 1.5e-3])
    varies = lambda now: next(costs)  # noqa: E731
    a, b = (varies, 1e-3) if longer == "a" else (1e-3, varies)
    result = _compare(Timeline(monkeypatch), a, b, min_run_time=1e-6)
    assert result.outcome == "unclear"
    assert str(result) == (
        f"no clear difference between a and b: {longer} took 1.5x as long in 6 of 10 rounds."
    )


def test_sides_alternate_so_a_slow_phase_falls_on_both(monkeypatch):
    # The machine slows down steadily: every call costs more than the one before.
    # Timed one side after the other, b would look far slower; alternated, they agree.
    clock = Timeline(monkeypatch)
    drift = lambda now: 1e-3 * (1 + 50 * now)  # noqa: E731
    assert _compare(clock, drift, drift, min_run_time=1e-6).outcome == "agree"
    assert clock.calls[-20:] == ["a", "b", "b", "a"] * 5  # first-second, second-first, ...


def test_each_side_gets_its_rounds_its_warm_up_and_blocks_that_fill_min_run_time(monkeypatch):
    clock = Timeline(monkeypatch)
    result = _compare(clock, 1e-6, 4e-6, min_run_time=0.2, warmup=2, rounds=12)
    assert clock.calls[:4] == ["a", "b", "a", "b"]
    assert len(result.ratios) == len(result.first.times) == len(result.second.times) == 12
    assert 0.2 <= clock.now <= 0.3  # calibration included
    slow = _compare(Timeline(monkeypatch), 0.5, 0.5, min_run_time=0.01)
    assert len(slow.ratios) == 10


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((print, 3), {}, TypeError, "second must be a function to call with no arguments, got 3"),
        ((print, print), {"rounds": 9}, ValueError, "rounds must be a whole number >= 10, got 9"),
        *[((print, print), {"rounds": n}, ValueError, "rounds must") for n in (10.5, "10", None)],
        ((print, print), {"band": 1}, ValueError, r"band must be a finite factor > 1 .*, got 1"),
        # An infinite band would call every pair "about as long".
        *[((print, print), {"band": b}, ValueError, "band must") for b in (0.8, math.inf, "2")],
        ((print, print), {"min_run_time": -1}, ValueError, "min_run_time must be"),
        ((print, print), {"min_run_time": 1e308}, ValueError, "at most 3600"),
        *[((print, print), {"labels": x}, TypeError, "labels must be") for x in ("ab", None, 5)],
    ],
)
def test_compare_refuses_bad_settings_naming_them(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        d2l_gpu.compare(*args, **kwargs)


# host_and_device_seconds(), on a simulated GPU stream


def _gpu(monkeypatch, busy_product=2.7e-3) -> Timeline:
    simulate_machine(monkeypatch, "cuda", 1)
    clock = Timeline(monkeypatch)
    clock.cuda_events(monkeypatch, busy_product)
    return clock


@pytest.mark.parametrize("gpu_first", [True, False])
@pytest.mark.parametrize(("host", "device"), [(100e-6, 10e-6), (10e-6, 400e-6), (200e-6, 200e-6)])
def test_each_side_of_a_step_is_measured_whatever_comes_first(monkeypatch, gpu_first, host, device):
    clock = _gpu(monkeypatch)
    work = [("gpu", device), ("host", host)] if gpu_first else [("host", host), ("gpu", device)]
    measured = d2l_gpu.host_and_device_seconds(clock.program(*work), "cuda:0")
    assert measured == (pytest.approx(host), pytest.approx(device))
    assert clock.launches == 10 + 21  # ten products, the warm-up and 20 steps


@pytest.mark.parametrize(
    ("busy_product", "device_seconds"),
    [
        # 20 steps of 1 ms on the host outlast 10 and 40 products of 0.2 ms, not 160.
        (0.2e-3, pytest.approx(50e-6)),
        # Even 160 products of 1 us run dry: the GPU's time reads as the host's, an upper bound.
        (1e-6, pytest.approx(1e-3, rel=0.1)),
    ],
)
def test_when_the_gpu_runs_dry_first_it_gets_more_to_do(monkeypatch, busy_product, device_seconds):
    clock = _gpu(monkeypatch, busy_product)
    step = clock.program(("host", 1e-3), ("gpu", 50e-6))
    measured = d2l_gpu.host_and_device_seconds(step, "cuda:0")
    assert measured == (pytest.approx(1e-3), device_seconds)
    assert clock.launches == 10 + 40 + 160 + 1 + 3 * 20


@pytest.mark.parametrize(
    ("device", "steps", "message"),
    [
        ("cpu", 20, "device must be a CUDA device such as 'cuda:0', got 'cpu'"),
        ("mps", 20, "got 'mps'"),
        ("cuda:0", 0, "steps must be a whole number >= 1, got 0"),
        ("cuda:0", 1.5, "steps must be .*, got 1.5"),
        ("cuda:0", "3", "steps must be .*, got '3'"),
        # As on a CPU-only torch, whose own error is an AssertionError from deep inside.
        ("cuda:0", 20, "device 'cuda:0' is not on this machine, which has 'cpu'$"),
    ],
)
def test_host_and_device_seconds_refuses_bad_arguments_before_the_step_runs(
    monkeypatch, device, steps, message
):
    simulate_machine(monkeypatch, None, 0)
    calls = []
    with pytest.raises(ValueError, match=message):
        d2l_gpu.host_and_device_seconds(lambda: calls.append(1), device, steps=steps)
    assert calls == []
    with pytest.raises(TypeError, match="step must be a function to call with no arguments, got 5"):
        d2l_gpu.host_and_device_seconds(5, "cuda:0")


# On a real GPU


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
def test_benchmark_on_the_gpu_has_ten_blocks_and_times_the_kernels():
    device = d2l_gpu.try_gpu()
    x = torch.randn(2048, 2048, device=device)
    x @ x  # a first product alone may load cuBLAS and its kernels
    m = d2l_gpu.benchmark(lambda: x @ x, device=device, min_run_time=0.2)
    tik = time.perf_counter()
    for _ in range(10):
        x @ x
    d2l_gpu.synchronize(device)  # d2l_gpu's: were it a no-op, this would time only launches
    assert len(m.times) >= MIN_BLOCKS and m.iqr > 0, m
    assert m.median == pytest.approx((time.perf_counter() - tik) / 10, rel=0.3)


@pytest.mark.gpu
def test_host_and_device_seconds_on_a_real_gpu():
    if d2l_gpu.accelerator_type() != "cuda":
        pytest.skip("needs a CUDA device")
    device = d2l_gpu.try_gpu()
    x = torch.randn(2048, 2048, device=device)
    host, gpu = d2l_gpu.host_and_device_seconds(lambda: x @ x, device)
    events = d2l_gpu.benchmark(lambda: x @ x, device=device).median
    assert 0 < host < gpu and gpu == pytest.approx(events, rel=0.3)


def test_benchmark_without_setuptools_says_what_to_install(monkeypatch):
    # torch.utils.benchmark imports setuptools, which torch requires from Python 3.12 only.
    # d2l_gpu, imported afresh with setuptools missing, loads: only benchmark() needs it.
    for name in list(sys.modules):
        if name.startswith(("d2l_gpu", "torch.utils.benchmark", "torch.utils.cpp_extension")):
            monkeypatch.delitem(sys.modules, name)
    # `from torch.utils import cpp_extension` takes the attribute before asking sys.modules.
    monkeypatch.delattr(torch.utils, "cpp_extension", raising=False)
    monkeypatch.setitem(sys.modules, "setuptools", None)
    fresh = importlib.import_module("d2l_gpu")
    with pytest.raises(ModuleNotFoundError) as missing:
        fresh.benchmark(print)
    assert str(missing.value) == (
        "benchmark() needs setuptools (torch.utils.benchmark imports it): pip install setuptools"
    )
