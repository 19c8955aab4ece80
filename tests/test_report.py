"""The device report, on this machine and on a simulated two-GPU one."""

import re

import torch

import d2l_gpu
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
    versions = d2l_gpu.software_versions()
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


def test_report_on_simulated_mps_machine(monkeypatch):
    simulate_machine(monkeypatch, "mps", 1)
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 8 * 2**30, raising=False)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 2**30)
    rows = d2l_gpu.device_info()
    assert rows[1].device == "mps:0" and rows[1].total_memory == 8 * 2**30
