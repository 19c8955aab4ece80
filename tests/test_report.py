"""The device report, on this machine and on a simulated two-GPU one."""

import re
from types import SimpleNamespace

import pytest
import torch

import d2l_gpu
from d2l_gpu import devices, report
from tests.simulate import simulate_machine


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
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: (12 * 2**30, 16 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: f"Simulated V100 #{d.index}")
    rows = d2l_gpu.device_info()
    assert [r.device for r in rows] == ["cpu", "cuda:0", "cuda:1"]
    assert rows[2].as_dict() == {
        "device": "cuda:1",
        "name": "Simulated V100 #1",
        "total_memory": 16 * 2**30,
        "used_memory": 4 * 2**30,
    }
    report = d2l_gpu.device_report()
    assert re.search(r"^cuda:1 +16\.0 GiB +4\.0 GiB +Simulated V100 #1$", report, re.M)
    assert "helpers use: cuda:0, cuda:1" in report


def _busy_card(device):
    # What cudaMemGetInfo answers on an exclusive-process card another process holds.
    raise torch.AcceleratorError("CUDA error: CUDA-capable device(s) is/are busy or unavailable")


def test_report_on_a_busy_card_falls_back_to_its_size_and_names_every_device(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    monkeypatch.setattr(
        torch.cuda, "mem_get_info", lambda d: _busy_card(d) if d.index == 0 else (2**30, 2**32)
    )
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: f"Simulated H100 #{d.index}")
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda d: SimpleNamespace(total_memory=80 * 2**30)
    )
    rows = d2l_gpu.device_info()
    assert rows[1] == report.DeviceInfo("cuda:0", "Simulated H100 #0", 80 * 2**30, None)
    assert rows[2] == report.DeviceInfo("cuda:1", "Simulated H100 #1", 2**32, 3 * 2**30)
    text = d2l_gpu.device_report()
    assert re.search(r"^cuda:0 +80\.0 GiB +\? +Simulated H100 #0$", text, re.M)
    assert re.search(r"^cuda:1 +4\.0 GiB +3\.0 GiB +Simulated H100 #1$", text, re.M)


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
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: (2**30, 2**32))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: "Simulated")
    monkeypatch.setenv(devices.ENV_VAR, "cuda:1")
    text = d2l_gpu.device_report()
    assert [r.device for r in d2l_gpu.device_info()] == ["cpu", "cuda:0", "cuda:1"]
    assert "helpers use: cuda:1\n" in text


@pytest.mark.gpu
def test_report_on_this_gpu_machine_names_every_device():
    text = d2l_gpu.device_report()
    for device in devices.available_devices():
        assert re.search(rf"^{device} ", text, re.M), text


def test_report_on_simulated_mps_machine(monkeypatch):
    simulate_machine(monkeypatch, "mps", 1)
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 8 * 2**30)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 2**30)
    rows = d2l_gpu.device_info()
    assert rows[1].device == "mps:0" and rows[1].total_memory == 8 * 2**30
