"""compare(): alternating rounds, at least ten blocks a side, one verdict rule.

Most tests run on a virtual clock that moves only by what each call costs, so a
verdict is checked exactly, however busy this machine is.
"""

import itertools
import re

import pytest
import torch

import d2l_gpu
from d2l_gpu import timing
from tests.simulate import record_waits, simulate_machine


class VirtualClock:
    """``timing``'s clock, moved only by the sides' calls; records the order of calls."""

    def __init__(self, monkeypatch) -> None:
        self.now = 0.0
        self.calls: list[str] = []
        monkeypatch.setattr(timing, "_clock", lambda: self.now)

    def side(self, name: str, cost):
        """A callable that costs ``cost(now)`` seconds (or a constant) each call."""

        def call() -> None:
            self.calls.append(name)
            self.now += cost(self.now) if callable(cost) else cost

        return call


def _compare(clock, a_cost, b_cost, **kwargs):
    kwargs = {"labels": ("a", "b"), "warmup": 0, "min_run_time": 0.02, **kwargs}
    return d2l_gpu.compare(clock.side("a", a_cost), clock.side("b", b_cost), **kwargs)


def test_a_side_three_times_as_long_is_clearly_slower(monkeypatch):
    result = _compare(VirtualClock(monkeypatch), 1e-3, 3e-3)
    assert result.outcome == "slower"
    assert result.ratio == pytest.approx(3)
    assert result.first.median == pytest.approx(1e-3) and result.second.median == pytest.approx(
        3e-3
    )
    assert result.verdict == (
        "verdict: b takes 3.00x the time of a (q1-q3 3.00x to 3.00x over 10 rounds): clearly slower"
    )


def test_a_side_a_third_as_long_is_clearly_faster_and_tiny_ratios_keep_their_digits(monkeypatch):
    assert _compare(VirtualClock(monkeypatch), 3e-3, 1e-3).outcome == "faster"
    tiny = _compare(VirtualClock(monkeypatch), 1e-3, 2.5e-6)
    assert tiny.outcome == "faster"
    assert "b takes 0.0025x the time of a" in tiny.verdict


def test_equal_sides_agree_within_the_stated_tolerance(monkeypatch):
    result = _compare(VirtualClock(monkeypatch), 1e-3, 1.05e-3, tolerance=0.1)
    assert result.outcome == "agree"
    assert (
        result.verdict
        == "verdict: b takes 1.05x the time of a: they agree within the ±10 % tolerance"
    )
    strict = _compare(VirtualClock(monkeypatch), 1e-3, 1.05e-3, tolerance=0.02)
    assert strict.outcome == "slower" and "±2 %" not in strict.verdict


def test_a_gap_whose_round_ratios_reach_into_the_band_is_unclear(monkeypatch):
    # b costs 1.5 ms in most rounds and 1 ms in some: the median ratio is beyond the
    # band, the lower quartile inside it.
    costs = itertools.cycle([1.5e-3, 1e-3, 1.5e-3, 1e-3, 1.5e-3])
    result = _compare(VirtualClock(monkeypatch), 1e-3, lambda now: next(costs), min_run_time=1e-6)
    assert result.ratio == pytest.approx(1.5)
    assert result.ratio_q1 == pytest.approx(1.0)
    assert result.outcome == "unclear"
    assert result.verdict.endswith("reach into ±10 %: no clear difference")


def test_sides_alternate_so_a_slow_phase_falls_on_both(monkeypatch):
    # The machine slows down steadily: every call costs more than the one before.
    # Timed one side after the other, b would look far slower; alternated, they agree.
    clock = VirtualClock(monkeypatch)
    drift = lambda now: 1e-3 * (1 + 50 * now)  # noqa: E731
    result = _compare(clock, drift, drift, min_run_time=1e-6)
    assert result.outcome == "agree"
    # After warm-up and calibration: a b | b a | a b | ... (first-second, second-first).
    timed = clock.calls[-20:]
    assert timed == ["a", "b", "b", "a"] * 5


def test_every_side_gets_at_least_ten_blocks(monkeypatch):
    result = _compare(VirtualClock(monkeypatch), 0.5, 0.5, min_run_time=0.01)
    assert result.first.runs == result.second.runs == 10
    assert len(result.ratios) == 10
    more = _compare(VirtualClock(monkeypatch), 1e-3, 1e-3, rounds=25)
    assert more.first.runs == more.second.runs == len(more.ratios) == 25


def test_blocks_are_sized_so_both_sides_fill_about_min_run_time(monkeypatch):
    clock = VirtualClock(monkeypatch)
    result = _compare(clock, 1e-6, 4e-6, min_run_time=0.2)
    assert result.first.number_per_run > 1 and result.second.number_per_run > 1
    assert 0.2 <= clock.now <= 0.4  # calibration included


def test_warm_up_calls_both_sides_before_any_timing(monkeypatch):
    clock = VirtualClock(monkeypatch)
    _compare(clock, 1e-3, 1e-3, warmup=2)
    assert clock.calls[:4] == ["a", "b", "a", "b"]


def test_clocks_wait_for_the_device_before_every_reading(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    waits = record_waits(monkeypatch)
    d2l_gpu.compare(lambda: None, lambda: None, device="cuda:1", min_run_time=0.01, warmup=0)
    assert waits and set(waits) == {torch.device("cuda", 1)}
    waits.clear()
    d2l_gpu.compare(lambda: None, lambda: None, device="cpu", min_run_time=0.01, warmup=0)
    assert waits == []


def test_printing_shows_both_sides_and_the_verdict_last(monkeypatch):
    lines = str(_compare(VirtualClock(monkeypatch), 1e-3, 2e-3)).splitlines()
    assert re.match(r"a: 1\.000 ms median, IQR 0\.0 ns, 10 runs x \d+$", lines[0])
    assert lines[1].startswith("b: 2.000 ms median")
    assert lines[2].startswith("verdict: b takes 2.00x the time of a")


def test_real_identical_work_agrees():
    x = torch.ones(64, 64)
    result = d2l_gpu.compare(lambda: x @ x, lambda: x @ x, min_run_time=0.1, tolerance=0.5)
    assert result.outcome == "agree", result


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"rounds": 9}, ValueError, "rounds must be a count from 10 to 10000, got 9"),
        ({"rounds": 10**6}, ValueError, "rounds must be a count from 10 to 10000, got 1000000"),
        ({"rounds": 10.0}, TypeError, "rounds must be a count from 10 to 10000, got 10.0"),
        ({"tolerance": 0}, ValueError, r"tolerance must be a fraction > 0 and <= 1, got 0"),
        ({"tolerance": 5}, ValueError, r"tolerance must be a fraction > 0 and <= 1, got 5"),
        ({"tolerance": "0.1"}, TypeError, r"tolerance must be a fraction .*, got '0.1'"),
        ({"min_run_time": 1e308}, ValueError, "min_run_time must be a number of seconds"),
        ({"warmup": 10**12}, ValueError, "warmup must be a count from 0 to 1000"),
        ({"num_threads": 2**63}, ValueError, "num_threads must be a count from 1 to 1024"),
        ({"labels": ("a",)}, TypeError, r"labels must be a tuple of two strings, got \('a',\)"),
        ({"labels": "ab"}, TypeError, "labels must be a tuple of two strings, got 'ab'"),
    ],
)
def test_bad_settings_are_refused_naming_them_before_anything_runs(kwargs, error, message):
    calls = []
    with pytest.raises(error, match=message):
        d2l_gpu.compare(lambda: calls.append(1), lambda: calls.append(2), **kwargs)
    assert calls == []


def test_a_side_that_is_not_callable_is_named():
    with pytest.raises(TypeError, match=r"compare\(\) takes two callables; second is 3"):
        d2l_gpu.compare(lambda: None, 3)
