"""Device helpers on this machine and on simulated ones (monkeypatched torch queries)."""

import os
import subprocess
import sys

import pytest
import torch

import d2l_gpu
from d2l_gpu import devices
from tests.simulate import record_waits, simulate_cuda_contexts, simulate_machine

CPU = torch.device("cpu")


def test_simulated_machine_without_gpu_falls_back_to_cpu(monkeypatch):
    simulate_machine(monkeypatch, None, 0)
    assert d2l_gpu.num_gpus() == 0
    assert d2l_gpu.try_gpu() == CPU
    assert d2l_gpu.try_gpu(3) == CPU
    assert d2l_gpu.try_all_gpus() == [CPU]
    assert d2l_gpu.accelerator_type() is None
    assert d2l_gpu.gpu(1) == torch.device("cuda", 1)
    assert devices._hardware_gpus() == []


@pytest.mark.parametrize("count", [1, 2, 4])
def test_simulated_cuda_machine_offers_each_gpu_then_cpu(monkeypatch, count):
    simulate_machine(monkeypatch, "cuda", count)
    gpus = [torch.device("cuda", i) for i in range(count)]
    assert d2l_gpu.num_gpus() == count
    assert [d2l_gpu.try_gpu(i) for i in range(count)] == gpus
    assert d2l_gpu.try_gpu(count) == CPU
    assert d2l_gpu.try_all_gpus() == gpus
    assert d2l_gpu.accelerator_type() == "cuda"
    assert devices._hardware_gpus() == gpus


def test_simulated_mps_machine_has_exactly_one_gpu(monkeypatch):
    simulate_machine(monkeypatch, "mps", 1)
    mps = torch.device("mps", 0)
    assert d2l_gpu.num_gpus() == 1
    assert d2l_gpu.try_gpu() == mps
    assert d2l_gpu.try_gpu(1) == CPU
    assert d2l_gpu.try_all_gpus() == [mps]
    assert d2l_gpu.gpu() == mps
    assert d2l_gpu.accelerator_type() == "mps"


def test_try_all_gpus_returns_a_fresh_list(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    d2l_gpu.try_all_gpus().clear()
    assert len(d2l_gpu.try_all_gpus()) == 2


def test_this_machine_agrees_with_torch():
    expected = torch.accelerator.device_count() if torch.accelerator.is_available() else 0
    assert d2l_gpu.num_gpus() == expected
    assert (d2l_gpu.try_gpu() == CPU) == (expected == 0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("cpu", [CPU]),
        ("CPU", [CPU]),
        ("cpu:0", [CPU]),
        ("cuda", [torch.device("cuda", 0), torch.device("cuda", 1)]),
        ("cuda:1", [torch.device("cuda", 1)]),
    ],
)
def test_environment_override_on_simulated_two_gpu_machine(monkeypatch, value, expected):
    simulate_machine(monkeypatch, "cuda", 2)
    monkeypatch.setenv(devices.ENV_VAR, value)
    assert d2l_gpu.try_all_gpus() == expected
    assert d2l_gpu.try_gpu() == expected[0]
    assert d2l_gpu.num_gpus() == (0 if value.lower().startswith("cpu") else len(expected))


def test_environment_override_cuda_1_hides_the_other_gpu(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    monkeypatch.setenv(devices.ENV_VAR, "cuda:1")
    assert d2l_gpu.try_gpu(1) == CPU


# torch keeps an index in 8 bits: torch.device("cuda:256") is cuda:0 and "cuda:128" fails
# with an IndexError. torch has one CPU device.
@pytest.mark.parametrize(
    "value", ["mps", "cuda:2", "xpu:0", "cpu:5", "cpu:", "cuda:", "cuda:256", "cuda:128", "cuda:-1"]
)
def test_environment_override_naming_a_missing_device_says_what_exists(monkeypatch, value):
    simulate_machine(monkeypatch, "cuda", 2)
    monkeypatch.setenv(devices.ENV_VAR, value)
    with pytest.raises(ValueError, match="valid values here: 'cpu', 'cuda:0', 'cuda:1'"):
        d2l_gpu.try_gpu()


@pytest.mark.parametrize("value", ["gpu", "banana", "cuda:x"])
def test_environment_override_that_is_no_device_name_is_rejected(monkeypatch, value):
    simulate_machine(monkeypatch, None, 0)
    monkeypatch.setenv(devices.ENV_VAR, value)
    with pytest.raises(ValueError, match=rf"D2L_DEVICE='{value}'.*valid values here: 'cpu'"):
        d2l_gpu.try_all_gpus()


def test_environment_override_cuda_on_cpu_only_machine_is_an_error(monkeypatch):
    simulate_machine(monkeypatch, None, 0)
    monkeypatch.setenv(devices.ENV_VAR, "cuda")
    with pytest.raises(ValueError, match="not a device this machine has"):
        d2l_gpu.num_gpus()


@pytest.mark.parametrize("func", [d2l_gpu.try_gpu, d2l_gpu.gpu])
@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (-1, ValueError, r"an int from 0 to 127 \(0 is the first GPU\), got -1"),
        (128, ValueError, "from 0 to 127.*got 128"),  # torch.device("cuda", 128) fails
        (257, ValueError, "from 0 to 127.*got 257"),  # torch.device("cuda", 257) is cuda:1
        (1.5, TypeError, "got 1.5 of type float"),
        (True, TypeError, "got the bool True"),
        ("x", TypeError, "got 'x' of type str"),
        (None, TypeError, "got None"),
    ],
)
def test_bad_gpu_index_is_rejected_with_what_is_accepted(func, bad, error, message):
    with pytest.raises(error, match=message):
        func(bad)


class _IndexLike:
    """An integer-like index, as numpy's integers are (anything with __index__)."""

    def __index__(self):
        return 1


def test_integer_like_indices_are_accepted(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    assert d2l_gpu.try_gpu(_IndexLike()) == torch.device("cuda", 1)


def test_synchronize_is_a_no_op_on_the_cpu(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    waits = record_waits(monkeypatch)
    d2l_gpu.synchronize("cpu")
    d2l_gpu.synchronize(torch.device("cpu"))
    assert waits == []


def test_synchronize_waits_for_the_devices_a_string_names_as_d2l_device_does(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    waits = record_waits(monkeypatch)
    cuda0, cuda1 = torch.device("cuda", 0), torch.device("cuda", 1)
    d2l_gpu.synchronize()
    assert waits == [cuda0, cuda1]
    waits.clear()
    d2l_gpu.synchronize("cuda:1")
    d2l_gpu.synchronize(cuda1)
    assert waits == [cuda1, cuda1]
    waits.clear()
    d2l_gpu.synchronize("cuda")
    assert waits == [cuda0, cuda1]


@pytest.mark.parametrize(
    ("value", "expected"), [("cpu", []), ("cuda:1", [torch.device("cuda", 1)])]
)
def test_synchronize_with_no_device_follows_the_environment_override(monkeypatch, value, expected):
    simulate_machine(monkeypatch, "cuda", 2)
    monkeypatch.setenv(devices.ENV_VAR, value)
    waits = record_waits(monkeypatch)
    d2l_gpu.synchronize()
    assert waits == expected


def test_synchronize_on_simulated_mps_waits_for_the_mps_device(monkeypatch):
    simulate_machine(monkeypatch, "mps", 1)
    waits = record_waits(monkeypatch)
    d2l_gpu.synchronize("mps")
    d2l_gpu.synchronize()
    assert waits == [torch.device("mps", 0)] * 2


def test_synchronize_without_accelerator_and_no_device_returns(monkeypatch):
    simulate_machine(monkeypatch, None, 0)
    waits = record_waits(monkeypatch)
    d2l_gpu.synchronize()
    assert waits == []


@pytest.mark.parametrize(
    ("kind", "device", "valid"),
    [
        (None, "cuda:0", "'cpu'$"),
        ("mps", "cuda", r"'cpu', 'mps:0' \(or 'mps' for all 1\)"),
        ("cuda", "cuda:2", "'cpu', 'cuda:0', 'cuda:1'"),
        ("cuda", "meta", "'cpu', 'cuda:0', 'cuda:1'"),
    ],
)
def test_synchronize_a_device_this_machine_lacks_says_what_it_has(monkeypatch, kind, device, valid):
    simulate_machine(monkeypatch, kind, 1 if kind == "mps" else 2)
    message = rf"device='{device}' is not a device this machine has; valid values here: {valid}"
    with pytest.raises(ValueError, match=message):
        d2l_gpu.synchronize(device)


def test_gpu_names_any_index_torch_can_hold():
    assert d2l_gpu.gpu(127).index == 127


def test_cpu_override_is_settled_without_asking_the_hardware(monkeypatch):
    def refuse():
        raise AssertionError("D2L_DEVICE=cpu must not query the accelerator")

    contexts = simulate_cuda_contexts(monkeypatch)
    for query in ("is_available", "current_accelerator", "device_count"):
        monkeypatch.setattr(torch.accelerator, query, lambda *_, **__: refuse())
    monkeypatch.setattr(torch.cuda, "_lazy_init", refuse)
    monkeypatch.setenv(devices.ENV_VAR, "cpu")
    assert d2l_gpu.try_all_gpus() == [CPU] and d2l_gpu.try_gpu() == CPU
    d2l_gpu.synchronize()
    d2l_gpu.Timer().stop()
    with d2l_gpu.Benchmark("quiet"):
        pass
    d2l_gpu.benchmark(lambda: None, min_run_time=0.01)
    assert contexts == set()


def test_an_older_torch_stops_the_import_with_one_clear_sentence():
    code = "import torch; torch.__version__ = '2.5.1+cu121'; import d2l_gpu"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == (
        "ImportError: d2l_gpu needs torch >= 2.6, found torch 2.5.1+cu121"
    )


@pytest.mark.gpu
def test_synchronize_waits_for_real_device_work():
    device = d2l_gpu.try_gpu()
    x = torch.randn(2048, 2048, device=device)
    y = x @ x
    d2l_gpu.synchronize(device)
    assert torch.isfinite(y).all().item()


@pytest.mark.gpu
def test_cpu_override_never_initialises_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    code = (
        "import time, torch, d2l_gpu; "
        "t = d2l_gpu.Timer(); t.stop(); d2l_gpu.synchronize(); "
        "d2l_gpu.benchmark(time.sleep, 0, min_run_time=0.01); d2l_gpu.try_gpu(); "
        "print(torch.cuda.is_initialized()); "
        "print(any(torch._C._cuda_hasPrimaryContext(i) for i in range(torch.cuda.device_count())))"
    )
    env = {**os.environ, devices.ENV_VAR: "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False"]
