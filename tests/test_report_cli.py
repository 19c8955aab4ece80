"""The device report and ``python -m d2l_gpu info|check``, here and on simulated machines."""

import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch

import d2l_gpu
from d2l_gpu import __main__ as cli
from d2l_gpu import report
from d2l_gpu.__main__ import _NOTEBOOK_PACKAGES, check_lines, main
from tests.simulate import simulate_cuda_contexts, simulate_machine


def run_cli(*args, **env):
    return subprocess.run(
        [sys.executable, "-m", "d2l_gpu", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _row(device, name, total, used):
    return {"device": device, "name": name, "total_memory": total, "used_memory": used}


def test_the_report_on_this_machine_lists_the_cpu_and_the_versions():
    info = d2l_gpu.device_info()
    cpu = info["devices"][0]
    assert cpu["device"] == "cpu" and 0 <= cpu["used_memory"] <= cpu["total_memory"]
    assert info["software"]["torch"] == torch.__version__
    assert info["software"]["cuda"] == (torch.version.cuda or "none")
    text = d2l_gpu.device_report()
    assert text.splitlines()[1].startswith("cpu ") and "GiB" in text.splitlines()[1]
    for key in ("torch", "cuda", "cudnn", "blas", "nvidia-smi", "platform"):
        assert re.search(rf"^{key} +\S", text, re.M), key


def test_the_report_on_a_shared_eight_gpu_box_creates_no_context(monkeypatch):
    """Asking a card's free memory would create a context on it (memory, or an
    error on a card another job holds in exclusive mode): only the card in use is asked."""
    simulate_machine(monkeypatch, "cuda", 8)
    contexts = simulate_cuda_contexts(monkeypatch, in_use={0}, free_total=(2**30, 2**32))
    rows = d2l_gpu.device_info()["devices"]
    assert [r["device"] for r in rows] == ["cpu", *(f"cuda:{i}" for i in range(8))]
    assert rows[1] == _row("cuda:0", "Simulated GPU #0", 2**32, 3 * 2**30)
    assert rows[8] == _row("cuda:7", "Simulated GPU #7", 2**32, None)
    text = d2l_gpu.device_report()
    assert contexts == {0}
    assert re.search(r"^cuda:0 +4\.0 GiB +3\.0 GiB +Simulated GPU #0$", text, re.M)
    assert re.search(r"^cuda:7 +4\.0 GiB +unknown +Simulated GPU #7$", text, re.M)
    assert "used unknown on cuda:1, cuda:2, cuda:3, cuda:4, cuda:5, cuda:6, cuda:7: a card" in text


def test_the_report_names_a_card_in_use_whose_driver_will_not_say(monkeypatch):
    # A busy or exclusive-process card, or a driver error: the report still comes.
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cuda_contexts(monkeypatch, in_use={0, 1}, free_total=(2**30, 2**32))

    def refuse(device=None):
        if torch.device(device).index == 1:
            raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable")
        return (2**30, 2**32)

    monkeypatch.setattr(torch.cuda, "mem_get_info", refuse)
    assert [r["used_memory"] for r in d2l_gpu.device_info()["devices"][1:]] == [3 * 2**30, None]
    text = d2l_gpu.device_report()
    assert re.search(r"^cuda:1 +4\.0 GiB +unknown +Simulated GPU #1$", text, re.M)
    assert "used unknown on cuda:1: a card this process has not used, or whose driver" in text


def test_the_report_asks_nvml_about_cards_this_process_has_not_used(monkeypatch):
    simulate_machine(monkeypatch, "cuda", 2)
    contexts = simulate_cuda_contexts(monkeypatch, free_total=(2**30, 2**32), nvml_used=2**31)
    rows = d2l_gpu.device_info()["devices"]
    assert [r["used_memory"] for r in rows[1:]] == [2**31, 2**31]
    assert contexts == set() and "used unknown" not in d2l_gpu.device_report()


def test_the_report_names_a_card_it_cannot_read_and_goes_on(monkeypatch, capsys):
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cuda_contexts(monkeypatch, in_use={0})
    readable = torch.cuda.get_device_properties

    def lost(device):  # a card that fell off the bus
        if torch.device(device).index == 1:
            raise RuntimeError("CUDA error: unspecified launch failure")
        return readable(device)

    monkeypatch.setattr(torch.cuda, "get_device_properties", lost)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^cuda:0 +16\.0 GiB +4\.0 GiB +Simulated GPU #0$", out, re.M)
    lost_line = r"^cuda:1 +unknown +unknown +unreadable \(RuntimeError: CUDA error: unspecified"
    assert re.search(lost_line, out, re.M) and "used unknown on cuda:1" in out


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
    for argv, status in ((["--help"], 0), (["info", "--help"], 0), (["check", "--help"], 0)):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == status
        assert (
            f"usage: python -m d2l_gpu {argv[0] if len(argv) == 2 else ''}"
            in capsys.readouterr().out
        )
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_info_prints_the_report_or_its_json(capsys):
    assert main(["info"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("cpu ")
    assert main(["info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(d2l_gpu.device_info()))


def test_check_passes_in_the_dev_environment(capsys):
    missing = [name for name in _NOTEBOOK_PACKAGES if not _installed(name)]
    if missing:  # a bare GPU machine: torch alone; `check --core` is its test
        pytest.skip(f"needs the notebook extras, missing here: {', '.join(missing)}")
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "[OK] torch" in out and "[FAIL]" not in out and "[INFO]" in out


def _installed(name: str) -> bool:
    import importlib.metadata as metadata

    try:
        return bool(metadata.version(name))
    except metadata.PackageNotFoundError:
        return False


def test_check_names_a_missing_package_and_how_to_install_it():
    ok, text = check_lines({"surely-not-installed-pkg": "testing"})[-1]
    assert not ok
    assert text == (
        "surely-not-installed-pkg is missing (needed for testing): pip install 'd2l-gpu[notebooks]'"
    )


def test_check_fails_plainly_when_nvidia_smi_lists_a_gpu_torch_cannot_see(monkeypatch, capsys):
    simulate_machine(monkeypatch, None, 0)
    monkeypatch.setattr(cli, "listed_gpus", lambda: ["GPU 0: NVIDIA H200 (UUID: GPU-1234)"])
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    assert main(["check", "--core"]) == 1
    out = capsys.readouterr().out
    assert (
        f"[FAIL] nvidia-smi lists GPU 0: NVIDIA H200 (UUID: GPU-1234), but torch "
        f"{torch.__version__} (built for CUDA {torch.version.cuda or 'none'}) sees no GPU: "
    ) in out
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hidden on purpose: all is well
    assert main(["check", "--core"]) == 0
    assert "[FAIL]" not in capsys.readouterr().out


def test_listed_gpus_reads_nvidia_smi_and_check_waits_seconds_for_a_hung_one(
    tmp_path, monkeypatch, capsys
):
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-1)"\necho "  MIG 1g"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert report.listed_gpus() == ["GPU 0: NVIDIA H200 (UUID: GPU-1)"]
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert report.listed_gpus() == []
    smi.write_text("#!/bin/sh\nexec sleep 60\n")  # a wedged driver
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.defpath}")
    monkeypatch.setattr(report, "SMI_SECONDS", 0.5)
    simulate_machine(monkeypatch, None, 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    tik = time.monotonic()
    assert main(["check", "--core"]) == 0 and time.monotonic() - tik < 5
    assert (
        "[INFO] nvidia-smi did not answer within 0.5 s: whether it lists a GPU torch cannot see "
        "is unknown"
    ) in capsys.readouterr().out


@pytest.mark.parametrize("redirect", [">&-", "> /dev/full"])
def test_info_into_a_closed_output_or_a_full_disk_says_so_in_one_line(redirect):
    command = ["sh", "-c", f'exec "$0" -m d2l_gpu info {redirect}', sys.executable]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("python -m d2l_gpu: cannot write its output: ")


def test_check_into_a_closed_pipe_exits_quietly():
    """As in `python -m d2l_gpu check | head -1` when head has already gone."""
    read, write = os.pipe()
    os.close(read)  # before the command writes a byte: every write meets a closed pipe
    try:
        command = [sys.executable, "-m", "d2l_gpu", "check"]
        result = subprocess.run(command, stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert (result.stderr, result.returncode) == ("", 1)


def test_under_an_older_torch_the_command_says_so_in_one_line(tmp_path):
    # sitecustomize runs before the command: torch reports an older version from then on.
    (tmp_path / "sitecustomize.py").write_text("import torch\ntorch.__version__ = '2.5.1'\n")
    result = run_cli("check", PYTHONPATH=str(tmp_path))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "ImportError: d2l_gpu needs torch >= 2.6, found torch 2.5.1" in result.stderr
