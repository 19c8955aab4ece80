"""`make gpu-check` (.ci/gpu_check.py) on this machine: what it runs, skips and reports."""

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from tests.repository import LESSON_SOURCES

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "gpu_check.py"
# Hide every CUDA and ROCm GPU from the child, so it sees what a machine without one sees.
NO_GPU = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}


def _load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run_gpu_check(report: Path, *args: str, timeout: float = 180):
    env = {**os.environ, **NO_GPU}
    env.pop("D2L_DEVICE", None)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--report", str(report), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )
    summary = (report / "summary.txt").read_text(encoding="utf-8").splitlines()
    return result, summary


@pytest.fixture
def no_mps():
    if torch.backends.mps.is_available():
        pytest.skip("an MPS GPU cannot be hidden from a child process")


def test_without_a_gpu_it_runs_what_it_can_and_says_what_it_skipped(tmp_path, no_mps):
    result, summary = run_gpu_check(tmp_path, "--only", "info,tests,torchrun")
    assert result.returncode == 0, result.stdout + result.stderr
    assert summary[0].startswith("gpu-check summary: torch ") and ", no GPU, " in summary[0]
    lines = summary[1:]
    assert lines[0].startswith("passed   info (")
    assert lines[1].startswith("skipped  gpu tests (")
    assert "no GPU: all " in lines[1] and "gpu-marked tests skipped" in lines[1]
    # The nccl demo runs before the lessons, so their time budget can never skip it.
    assert lines[2] == "skipped  torchrun nccl demo: no CUDA GPU: nccl needs one"
    notebooks = lines[3:]
    assert len(notebooks) == len(LESSON_SOURCES)
    assert all(line.endswith(": not selected (--only)") for line in notebooks)
    assert all(line.startswith("skipped  notebook ") for line in notebooks)
    assert "cpu" in (tmp_path / "info.txt").read_text(encoding="utf-8")
    assert result.stdout.rstrip().endswith("\n".join(summary))


SCRIPTS = {
    "pass.py": "print('fine')\n",
    "fail.py": "raise ValueError('boom')\n",
    "needs.py": "import surely_not_an_installed_module\n",
    "litter.py": "open('left.txt', 'w').close()\n",
    "slow.py": "import time\ntime.sleep(60)\n",
}


def test_each_notebook_script_gets_one_honest_line(tmp_path, no_mps):
    folder = tmp_path / "lessons"
    folder.mkdir()
    for name, code in SCRIPTS.items():
        (folder / name).write_text(code, encoding="utf-8")
    args = ["--only", "notebooks", "--notebooks", str(folder / "*.py"), "--budget", "12"]
    result, summary = run_gpu_check(tmp_path / "report", *args)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = {line.split(" (")[0].split(":")[0]: line for line in summary[1:]}
    assert lines["passed   notebook lessons/pass.py"]
    assert lines["failed   notebook lessons/fail.py"].endswith(": exit 1: ValueError: boom")
    assert lines["skipped  notebook lessons/needs.py"].endswith(
        ": needs the 'surely_not_an_installed_module' package, not installed"
    )
    assert lines["failed   notebook lessons/litter.py"].endswith(": left files behind: left.txt")
    assert "timed out after" in lines["failed   notebook lessons/slow.py"]
    assert (tmp_path / "report" / "notebooks" / "lessons-fail.log").is_file()


def test_an_unknown_check_is_refused_with_the_choices(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--report", str(tmp_path), "--only", "info,gpu"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown check(s) ['gpu']; choose from ['info', 'tests', 'torchrun', 'notebooks']" in (
        result.stderr
    )


@pytest.mark.parametrize("override", ["cuda:1", "cpu"])
def test_nccl_demo_takes_one_rank_per_cuda_gpu_whatever_d2l_device_says(
    tmp_path, monkeypatch, override
):
    """On two GPUs with D2L_DEVICE=cuda:1 both ranks would take cuda:1 and nccl would refuse."""
    gpu_check = _load_gpu_check()
    monkeypatch.setenv("D2L_DEVICE", override)
    runner = gpu_check.Runner(tmp_path, budget=60)
    calls = []

    def fake_run(args, log, limit, cwd=gpu_check.ROOT, env=None):
        calls.append((args, env))
        return 0, 1.5, "rank 0/2: ...\n"

    monkeypatch.setattr(runner, "run", fake_run)
    result = gpu_check.check_torchrun(runner, {"cuda": 2})
    assert (result.status, result.why) == ("passed", "2 rank(s)")
    [(args, env)] = calls
    assert args[args.index("--nproc-per-node") + 1] == "2" and args[-2:] == ["--backend", "nccl"]
    assert "D2L_DEVICE" not in env
    assert env["PYTHONPATH"] == runner.env["PYTHONPATH"]  # d2l_gpu still imports
    assert runner.env["D2L_DEVICE"] == override  # the lessons still run where it says


def test_pure_python_wheels_unpack_into_an_import_path(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "demo_pkg-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("demo_pkg/__init__.py", "VALUE = 42\n")
        wheel.writestr("demo_pkg-1.0.dist-info/METADATA", "Name: demo-pkg\nVersion: 1.0\n")
    with zipfile.ZipFile(wheels / "fast-1.0-cp311-cp311-linux_x86_64.whl", "w") as wheel:
        wheel.writestr("fast/__init__.py", "")
    site = tmp_path / "site"
    assert _load_gpu_check().unpack_wheels(wheels, site) == ["demo_pkg-1.0-py3-none-any.whl"]
    code = "import demo_pkg, importlib.metadata as m; print(demo_pkg.VALUE, m.version('demo-pkg'))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["42", "1.0"]
    assert not (site / "fast").exists()


def test_make_gpu_check_is_listed_and_documented():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    help_text = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert "make gpu-check" in help_text and "make gpu-wheels" in help_text
    assert ".ci/gpu_check.py --report $(GPU_REPORT)" in makefile
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make gpu-check" in readme and "python3 .ci/gpu_check.py" in readme
