"""The device report, on this machine and on a simulated two-GPU one."""

import dataclasses
import re
import subprocess
import sys

import pytest
import torch

import d2l_gpu
from d2l_gpu import devices, report
from tests.simulate import guard_cuda, simulate_cuda_contexts, simulate_cudnn, simulate_machine


def test_report_on_this_machine_lists_cpu_versions_and_choice():
    report = d2l_gpu.device_report()
    first_row = report.splitlines()[1]
    assert first_row.startswith("cpu ") and "GiB" in first_row
    for key in ("torch", "cuda", "blas", "nvidia-smi", "helpers use: "):
        assert key in report


def test_cpu_row_has_positive_memory():
    cpu = d2l_gpu.device_info()[0]
    assert cpu.device == "cpu"
    assert cpu.total_memory > 0 and 0 <= cpu.used_memory <= cpu.total_memory


def test_software_versions_match_torch():
    versions = report.software_versions()
    assert versions["torch"] == torch.__version__
    assert versions["cuda"] == (torch.version.cuda or "none")
    assert versions["blas"] != ""


def test_report_on_simulated_two_gpu_machine_lists_each_card(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cuda_contexts(monkeypatch, in_use={0, 1}, free_total=(12 * 2**30, 16 * 2**30))
    rows = d2l_gpu.device_info()
    assert [r.device for r in rows] == ["cpu", "cuda:0", "cuda:1"]
    assert dataclasses.asdict(rows[2]) == {
        "device": "cuda:1",
        "name": "Simulated GPU #1",
        "total_memory": 16 * 2**30,
        "used_memory": 4 * 2**30,
    }
    report = d2l_gpu.device_report()
    assert re.search(r"^cuda:1 +16\.0 GiB +4\.0 GiB +Simulated GPU #1$", report, re.M)
    assert "helpers use: cuda:0, cuda:1" in report
    assert "used unknown" not in report


def test_report_on_a_shared_eight_gpu_box_asks_only_the_card_in_use(monkeypatch):
    """Asking a card's free memory would create a context on it (memory, or an
    error on a card another job holds in exclusive mode)."""
    simulate_machine(monkeypatch, "cuda", 8)
    contexts = simulate_cuda_contexts(monkeypatch, in_use={0}, free_total=(2**30, 2**32))
    rows = d2l_gpu.device_info()
    assert contexts == {0}
    assert [r.device for r in rows] == ["cpu", *(f"cuda:{i}" for i in range(8))]
    assert rows[1] == report.DeviceInfo("cuda:0", "Simulated GPU #0", 2**32, 3 * 2**30)
    assert rows[8] == report.DeviceInfo("cuda:7", "Simulated GPU #7", 2**32, None)
    text = d2l_gpu.device_report()
    assert contexts == {0}
    assert re.search(r"^cuda:0 +4\.0 GiB +3\.0 GiB +Simulated GPU #0$", text, re.M)
    assert re.search(r"^cuda:7 +4\.0 GiB +unknown +Simulated GPU #7$", text, re.M)
    assert "used unknown: a card this process has not used" in text


def test_report_asks_nvml_about_cards_this_process_has_not_used(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    contexts = simulate_cuda_contexts(monkeypatch, free_total=(2**30, 2**32), nvml_used=2**31)
    assert [r.used_memory for r in d2l_gpu.device_info()[1:]] == [2**31, 2**31]
    assert contexts == set()


@pytest.mark.parametrize(("value", "asked"), [("cpu", []), ("cuda:1", ["cuda:1"])])
def test_report_never_asks_a_card_that_d2l_device_leaves_out(monkeypatch, value, asked):
    """Even a card's name initialises CUDA: a run kept off a card must not ask it."""
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cuda_contexts(monkeypatch, in_use={0, 1})
    queried = []
    properties = torch.cuda.get_device_properties
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda d: queried.append(str(d)) or properties(d)
    )
    monkeypatch.setenv(devices.ENV_VAR, value)
    rows = d2l_gpu.device_info()
    assert queried == asked
    assert [r.device for r in rows] == ["cpu", "cuda:0", "cuda:1"]  # still listed
    left_out = [r for r in rows[1:] if str(r.device) not in asked]
    assert all(r.name == "not queried: D2L_DEVICE leaves it out" for r in left_out)
    text = d2l_gpu.device_report()
    assert f"helpers use: {value}" in text and "used unknown" not in text


@pytest.mark.gpu
def test_report_creates_no_cuda_context():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    code = (
        "import torch, d2l_gpu; d2l_gpu.device_report(); "
        "print(any(torch._C._cuda_hasPrimaryContext(i) for i in range(torch.cuda.device_count())))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_report_on_a_backend_without_memory_query_shows_unknown(monkeypatch):
    simulate_machine(monkeypatch, "xpu", 1)

    def no_memory_info(device):
        raise RuntimeError("getMemoryInfo is not supported by this backend")

    monkeypatch.setattr(torch.accelerator, "get_memory_info", no_memory_info)
    assert d2l_gpu.device_info()[1] == report.DeviceInfo("xpu:0", "XPU", None, None)


def test_report_on_a_torch_without_the_memory_query_shows_unknown(monkeypatch):
    # torch.accelerator.get_memory_info is newer than the oldest torch d2l_gpu supports.
    simulate_machine(monkeypatch, "xpu", 1)
    monkeypatch.delattr(torch.accelerator, "get_memory_info")
    assert d2l_gpu.device_info()[1] == report.DeviceInfo("xpu:0", "XPU", None, None)


def test_report_lists_every_device_but_says_what_the_helpers_use(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cuda_contexts(monkeypatch)
    monkeypatch.setenv(devices.ENV_VAR, "cuda:1")
    text = d2l_gpu.device_report()
    assert [r.device for r in d2l_gpu.device_info()] == ["cpu", "cuda:0", "cuda:1"]
    assert "helpers use: cuda:1\n" in text


def test_report_with_a_bad_d2l_device_still_lists_the_devices_and_flags_it(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cuda_contexts(monkeypatch)
    monkeypatch.setenv(devices.ENV_VAR, "cuda:256")
    text = d2l_gpu.device_report()
    assert re.search(r"^cuda:1 +16\.0 GiB", text, re.M)
    assert (
        "helpers use: [FAIL] D2L_DEVICE='cuda:256' is not a device this machine has; "
        "valid values here: 'cpu', 'cuda:0', 'cuda:1' (or 'cuda' for all 2)\n"
    ) in text


@pytest.mark.gpu
def test_report_on_this_gpu_machine_names_every_device():
    text = d2l_gpu.device_report()
    for device in ["cpu", *devices._hardware_gpus()]:
        assert re.search(rf"^{device} ", text, re.M), text


def test_report_on_simulated_mps_machine(monkeypatch):
    simulate_machine(monkeypatch, "mps", 1)
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 8 * 2**30)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 2**30)
    rows = d2l_gpu.device_info()
    assert rows[1].device == "mps:0" and rows[1].total_memory == 8 * 2**30


def test_under_d2l_device_cpu_the_report_touches_no_cuda_entry_point(monkeypatch):
    """On a CUDA machine D2L_DEVICE=cpu keeps CUDA unstarted: cuDNN's version is the
    compiled-in one (asking the library asks every card's compute capability)."""
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cudnn(monkeypatch, compiled=(9, 10, 2))
    touched = guard_cuda(monkeypatch)
    monkeypatch.setenv(devices.ENV_VAR, "cpu")
    text = d2l_gpu.device_report()
    assert touched == []
    assert (
        "cudnn          9.10.2 compiled in; library not asked: D2L_DEVICE leaves CUDA out\n" in text
    )
    assert re.search(
        r"^cuda:1 +unknown +unknown +not queried: D2L_DEVICE leaves it out$", text, re.M
    )


@pytest.mark.parametrize(
    ("value", "cudnn", "asked"),
    [
        (None, "91900", ["cuda:0", "cuda:1", 0, 1]),  # the library, then each capability
        ("cuda", "91900", ["cuda:0", "cuda:1", 0, 1]),
        (
            "cuda:1",
            "9.10.2 compiled in; library not asked: D2L_DEVICE leaves cuda:0 out",
            ["cuda:1"],
        ),
    ],
)
def test_cudnn_is_asked_only_when_the_helpers_offer_every_cuda_card(
    monkeypatch, value, cudnn, asked
):
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cudnn(monkeypatch, compiled=(9, 10, 2), loaded=91900)
    simulate_cuda_contexts(monkeypatch, in_use={0, 1})
    queried = []
    properties = torch.cuda.get_device_properties
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda d: queried.append(str(d)) or properties(d)
    )
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: queried.append(i) or (9, 0))
    if value:
        monkeypatch.setenv(devices.ENV_VAR, value)
    assert report.software_versions()["cudnn"] == cudnn
    d2l_gpu.device_info()
    assert sorted(queried, key=str) == sorted(asked, key=str)
