"""The device report and ``python -m d2l_gpu info|check``, here and on simulated machines."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch

import d2l_gpu
from d2l_gpu import report
from d2l_gpu.__main__ import _NOTEBOOK_PACKAGES, main
from tests.simulate import simulate_cuda_contexts, simulate_machine


def _row(device, name, total, used):
    return {"device": device, "name": name, "total_memory": total, "used_memory": used}


def test_info_prints_the_report_of_this_machine_or_its_json(capsys):
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[1].startswith("cpu ") and "GiB" in text.splitlines()[1]
    for key in ("torch", "cuda", "cudnn", "blas", "nvidia-smi", "platform"):
        assert re.search(rf"^{key} +\S", text, re.M), key
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == json.loads(json.dumps(d2l_gpu.device_info()))
    cpu = info["devices"][0]
    assert cpu["device"] == "cpu" and 0 <= cpu["used_memory"] <= cpu["total_memory"]
    assert info["software"]["torch"] == torch.__version__
    assert info["software"]["cuda"] == (torch.version.cuda or "none")


@pytest.mark.parametrize(("nvml_used", "used"), [(None, "unknown"), (2**31, r"2\.0 GiB")])
def test_the_report_on_a_shared_eight_gpu_box_creates_no_context(monkeypatch, nvml_used, used):
    """Asking a card's free memory would create a context on it (memory, or an error on
    a card another job holds in exclusive mode): only the card in use is asked; the others
    are asked of NVML where nvidia-ml-py is installed."""
    simulate_machine(monkeypatch, "cuda", 8)
    contexts = simulate_cuda_contexts(monkeypatch, in_use={0}, nvml_used=nvml_used)
    rows = d2l_gpu.device_info()["devices"]
    assert [r["device"] for r in rows] == ["cpu", *(f"cuda:{i}" for i in range(8))]
    assert rows[1] == _row("cuda:0", "Simulated GPU #0", 16 * 2**30, 4 * 2**30)
    assert rows[8] == _row("cuda:7", "Simulated GPU #7", 16 * 2**30, nvml_used)
    text = d2l_gpu.device_report()
    assert contexts == {0}
    assert re.search(rf"^cuda:7 +16\.0 GiB +{used} +Simulated GPU #7$", text, re.M)
    unknown = "used unknown on cuda:1, cuda:2, cuda:3, cuda:4, cuda:5, cuda:6, cuda:7: a card"
    if nvml_used is None:
        assert unknown in text
    else:
        assert "used unknown" not in text


@pytest.mark.parametrize(
    ("query", "error", "line"),
    [
        # A busy or exclusive-process card, or a driver error: the used memory is unknown.
        ("mem_get_info", "devices are busy", r"16\.0 GiB +unknown +Simulated GPU #1"),
        # A card that fell off the bus: named by its error.
        (
            "get_device_properties",
            "launch failure",
            r"unknown +unknown +unreadable \(RuntimeError: CUDA error: launch failure\)",
        ),
    ],
)
def test_the_report_names_a_card_whose_driver_fails_and_goes_on(
    monkeypatch, capsys, query, error, line
):
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cuda_contexts(monkeypatch, in_use={0, 1})
    working = getattr(torch.cuda, query)

    def fails_on_card_1(device=None):
        if torch.device(device).index == 1:
            raise RuntimeError(f"CUDA error: {error}")
        return working(device)

    monkeypatch.setattr(torch.cuda, query, fails_on_card_1)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^cuda:0 +16\.0 GiB +4\.0 GiB +Simulated GPU #0$", out, re.M)
    assert re.search(rf"^cuda:1 +{line}$", out, re.M)
    assert "used unknown on cuda:1: a card this process has not used, or whose driver" in out


def test_the_report_on_mps_and_on_a_backend_that_will_not_say(monkeypatch):
    simulate_machine(monkeypatch, "mps", 1)
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 8 * 2**30)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 2**30)
    rows = d2l_gpu.device_info()["devices"]
    assert rows[1] == _row("mps:0", "Apple GPU (MPS)", 8 * 2**30, 2**30)

    def refuse(device):
        raise RuntimeError("getMemoryInfo is not supported by this backend")

    simulate_machine(monkeypatch, "xpu", 1)
    monkeypatch.setattr(torch.accelerator, "get_memory_info", refuse)
    assert d2l_gpu.device_info()["devices"][1] == _row("xpu:0", "XPU", None, None)
    monkeypatch.delattr(torch.accelerator, "get_memory_info")  # newer than torch 2.6
    assert d2l_gpu.device_info()["devices"][1] == _row("xpu:0", "XPU", None, None)


@pytest.mark.gpu
def test_the_report_on_this_gpu_machine_names_every_device_and_creates_no_context():
    code = (
        "import torch, d2l_gpu; print(d2l_gpu.device_report()); "
        "print(torch.cuda.is_available() and any(torch._C._cuda_hasPrimaryContext(i) "
        "for i in range(torch.cuda.device_count())))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    for device in d2l_gpu.try_all_gpus():
        assert re.search(rf"^{device} ", out.stdout, re.M), out.stdout
    assert out.stdout.splitlines()[-1] == "False"


def test_help_documents_each_subcommand_and_a_wrong_one_is_a_usage_error(capsys):
    for command in ("", "info", "check"):
        with pytest.raises(SystemExit) as exit_info:
            main([*command.split(), "--help"])
        assert exit_info.value.code == 0
        assert f"usage: python -m d2l_gpu {command}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_check_names_each_package_and_how_to_install_a_missing_one(monkeypatch, capsys):
    # make test's venv lacks JupyterLab until make lab, a bare GPU box has torch alone:
    # so check is asked of the packages here, and of one that is nowhere.
    here = {name: why for name, why in _NOTEBOOK_PACKAGES.items() if importlib.util.find_spec(name)}
    missing = {"not-installed-pkg": "testing"}
    monkeypatch.setattr(d2l_gpu.__main__, "_NOTEBOOK_PACKAGES", here | missing)
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "[OK] torch" in out and "[INFO]" in out
    assert all(f"[OK] {name} " in out for name in here)
    said = "not-installed-pkg is missing (needed for testing): pip install 'd2l-gpu[notebooks]'"
    assert out.count("[FAIL]") == 1 and f"[FAIL] {said}\n" in out


def test_check_reads_nvidia_smi_fails_on_a_gpu_torch_cannot_see_and_waits_seconds_if_it_hangs(
    tmp_path, monkeypatch, capsys
):
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-1)"\necho "  MIG 1g"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.defpath}")
    simulate_machine(monkeypatch, None, 0)
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    assert main(["check", "--core"]) == 1
    assert (
        f"[FAIL] nvidia-smi lists GPU 0: NVIDIA H200 (UUID: GPU-1), but torch "
        f"{torch.__version__} (built for CUDA {torch.version.cuda or 'none'}) sees no GPU: "
    ) in capsys.readouterr().out
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hidden on purpose: all is well
    assert main(["check", "--core"]) == 0
    assert "[FAIL]" not in capsys.readouterr().out
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    smi.write_text("#!/bin/sh\nexec sleep 60\n")  # a wedged driver
    monkeypatch.setattr(report, "SMI_SECONDS", 0.5)
    tik = time.monotonic()
    assert main(["check", "--core"]) == 0 and time.monotonic() - tik < 5
    assert (
        "[INFO] nvidia-smi did not answer within 0.5 s: whether it lists a GPU torch cannot see "
        "is unknown"
    ) in capsys.readouterr().out


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("info >&-", "cannot write its output: standard output is closed\n"),
        ("info > /dev/full", "cannot write its output: [Errno 28] No space left on device\n"),
        ("check", None),  # into a pipe already closed, as `check | head -1` after head ended
    ],
)
def test_output_that_cannot_be_written_is_one_line_or_none_for_a_closed_pipe(command, said):
    read, write = os.pipe()
    os.close(read)  # before the command writes a byte: every write meets a closed pipe
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    shell = ["sh", "-c", f'exec "$0" -m d2l_gpu {command}', sys.executable]
    try:
        done = subprocess.run(
            shell, stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=120
        )
    finally:
        os.close(write)
    assert done.returncode == 1
    assert done.stderr == (f"python -m d2l_gpu: {said}" if said else "")


def test_under_an_older_torch_the_command_says_so_in_one_line(tmp_path):
    # A torch that is only its version number, found first on the path: d2l_gpu checks
    # the version before it uses anything an older torch may lack.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("__version__ = '2.5.1'\n")
    command = [sys.executable, "-m", "d2l_gpu", "check"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "ImportError: d2l_gpu needs torch >= 2.6, found torch 2.5.1" in done.stderr
