"""Device helpers on this machine and on simulated ones (monkeypatched torch queries)."""

import os
import subprocess
import sys

import pytest
import torch

import d2l_gpu
from tests.simulate import record_waits, simulate_machine

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("kind", "count"), [(None, 0), ("cuda", 1), ("cuda", 2), ("cuda", 4), ("mps", 1)]
)
def test_each_gpu_is_offered_then_the_cpu(monkeypatch, kind, count):
    simulate_machine(monkeypatch, kind, count)
    gpus = [torch.device(kind, i) for i in range(count)]
    assert d2l_gpu.num_gpus() == count
    assert [d2l_gpu.try_gpu(i) for i in range(count)] == gpus
    # Past the last GPU, the CPU; an int tensor is an index too, as numpy's integers are.
    past_the_last = [count, count + 2, torch.tensor(count)]
    assert [d2l_gpu.try_gpu(i) for i in past_the_last] == [CPU, CPU, CPU]
    assert d2l_gpu.cpu() == CPU
    expected = gpus or [CPU]  # what the book promises, and its try_all_gpus() breaks
    assert d2l_gpu.try_gpu() == expected[0]
    d2l_gpu.try_all_gpus().clear()  # a fresh list each call
    assert d2l_gpu.try_all_gpus() == expected
    assert d2l_gpu.accelerator_type() == kind
    name = kind or "cuda"  # a GPU's name, whether or not it exists
    assert d2l_gpu.gpu() == torch.device(name, 0) and d2l_gpu.gpu(5) == torch.device(name, 5)


@pytest.mark.gpu
def test_hiding_the_gpus_from_torch_rehearses_the_cpu_path():
    # What lesson 02 teaches instead of a variable of the helpers' own.
    code = "import d2l_gpu; print(d2l_gpu.try_gpu(), d2l_gpu.num_gpus(), d2l_gpu.try_all_gpus())"
    if torch.backends.mps.is_available():
        pytest.skip("MPS cannot be hidden this way")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["cpu", "0", "[device(type='cpu')]"], out.stderr


@pytest.mark.parametrize("func", [d2l_gpu.try_gpu, d2l_gpu.gpu])
@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (-1, ValueError, r"an int from 0 to 127 \(0 is the first GPU\), got -1"),
        (257, ValueError, "got 257"),  # torch.device("cuda", 257) would be cuda:1
        (1.5, TypeError, "got 1.5"),
        ("x", TypeError, "got 'x'"),
        (True, TypeError, "got True"),  # operator.index(True) is 1: a flag is no index
        (torch.tensor(True), TypeError, r"got tensor\(True\)"),
    ],
)
def test_a_bad_gpu_index_is_refused_saying_what_is_accepted(func, bad, error, message):
    with pytest.raises(error, match=rf"{func.__name__}\(i\) takes a GPU index, .*{message}"):
        func(bad)


@pytest.mark.parametrize("wait", [d2l_gpu.synchronize, d2l_gpu.Timer])
@pytest.mark.parametrize(
    ("kind", "device", "has"),
    [
        (None, "cuda:0", "'cpu'$"),
        ("mps", "cuda", "'cpu', 'mps:0'"),
        ("cuda", "cuda:2", "'cpu', 'cuda:0', 'cuda:1'"),
        ("cuda", "meta", "'cpu', 'cuda:0', 'cuda:1'"),
        # torch keeps an index in 8 bits: these would name cuda:-128, every card, cuda:0.
        *[("cuda", f"cuda:{i}", "'cpu', 'cuda:0', 'cuda:1'") for i in (128, 255, 256)],
    ],
)
def test_waiting_on_a_device_this_machine_lacks_says_what_it_has(
    monkeypatch, wait, kind, device, has
):
    simulate_machine(monkeypatch, kind, 1 if kind == "mps" else 2)
    waits = record_waits(monkeypatch)
    with pytest.raises(
        ValueError, match=rf"device '{device}' is not on this machine, which has {has}"
    ):
        wait(device)
    assert waits == []
