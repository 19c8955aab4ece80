"""Every notebook source runs as a plain Python script, as on a bare GPU box without Jupyter.

Each ``notebooks/<lang>/NN-*.py`` is run with this environment's Python from its
own folder, on a pretend one-GPU CUDA machine with ``D2L_DEVICE=cpu``: it must exit
0, touch no CUDA and leave the repository as it found it. (One run does both jobs:
with the helpers kept on the CPU, the lesson takes the path a CPU-only reader takes;
nbval runs each lesson in the unchanged environment.)
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.repository import LESSON_SOURCES, NOTEBOOKS, notebooks_changes, notebooks_snapshot

# Far above what any notebook needs; a hung script fails instead of stalling CI.
TIMEOUT = 300

# Loaded by every Python the lesson starts (PYTHONPATH), torchrun's workers included.
# torch then reports one CUDA GPU, and every way into real CUDA raises instead: a
# tensor or module sent to cuda (torch calls torch.cuda._lazy_init first), pinned
# memory, CUDA streams and events, synchronization, device queries, a device change
# (torch.Stream and torch.Event stay: torch subclasses them when it imports parts of itself).
# The memory counters (memory_allocated, ...) stay too: before CUDA is initialised they
# answer 0 without touching it, on a real GPU machine as here.
FAKE_CUDA = """
import os
import torch

class TouchedCuda(RuntimeError):
    pass

def _touched(name):
    def refuse(*args, **kwargs):
        # Written down as well: a lesson's own try/except must not hide the touch.
        with open(os.environ["D2L_TOUCHED_CUDA_LOG"], "a", encoding="utf-8") as log:
            log.write(name + "\\n")
        raise TouchedCuda(f"touched CUDA: {name} under D2L_DEVICE=cpu")
    return refuse

torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.accelerator.is_available = lambda: True
torch.accelerator.current_accelerator = lambda *args, **kwargs: torch.device("cuda")
torch.accelerator.device_count = lambda: 1
for name in ("_lazy_init", "init", "synchronize", "stream", "Stream", "Event", "set_device",
             "current_device", "current_stream", "mem_get_info", "get_device_name",
             "get_device_properties", "get_device_capability", "reset_peak_memory_stats"):
    setattr(torch.cuda, name, _touched(f"torch.cuda.{name}"))
for name in ("synchronize", "set_device_index", "current_device_index", "current_stream"):
    setattr(torch.accelerator, name, _touched(f"torch.accelerator.{name}"))
torch.Tensor.pin_memory = _touched("Tensor.pin_memory")
torch.Tensor.cuda = _touched("Tensor.cuda")
torch.nn.Module.cuda = _touched("Module.cuda")
"""


def test_every_language_has_notebook_sources():
    assert {p.parent.name for p in LESSON_SOURCES} == {"en", "zh"}


def run_lesson(path: Path, env: dict, touched: Path | None = None) -> None:
    before = notebooks_snapshot()
    # Agg: figures are drawn but never shown, as on a machine without a display.
    env = {**env, "MPLBACKEND": "Agg"}
    try:
        proc = subprocess.run(
            [sys.executable, path.name],
            cwd=path.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"python {path.name} still running after {TIMEOUT} s")
    if touched is not None and touched.exists():
        calls = sorted(set(touched.read_text(encoding="utf-8").split()))
        pytest.fail(f"python {path.name} under D2L_DEVICE=cpu touched CUDA: {', '.join(calls)}")
    assert proc.returncode == 0, (
        f"python {path.name} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    )
    changes = notebooks_changes(before)
    assert not changes, f"python {path.name} wrote under notebooks/: {changes}"


@pytest.fixture(scope="module")
def fake_cuda(tmp_path_factory) -> dict:
    """An environment whose Pythons see one CUDA GPU that must never be touched."""
    folder = tmp_path_factory.mktemp("fake-cuda")
    (folder / "sitecustomize.py").write_text(FAKE_CUDA, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "D2L_DEVICE": "cpu"}


def test_the_pretend_gpu_is_seen_and_guarded(fake_cuda, tmp_path):
    fake_cuda = {**fake_cuda, "D2L_TOUCHED_CUDA_LOG": str(tmp_path / "touched.log")}
    code = (
        "import torch, d2l_gpu\n"
        "print(torch.cuda.is_available(), d2l_gpu.try_gpu(), d2l_gpu.num_gpus())\n"
        "for touch in (lambda: torch.ones(1, device='cuda'), lambda: torch.ones(1).pin_memory(),\n"
        "              lambda: torch.cuda.stream(None), lambda: torch.cuda.synchronize()):\n"
        "    try:\n"
        "        touch()\n"
        "    except Exception as error:\n"
        "        print(type(error).__name__, error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=fake_cuda, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "True cpu 0"  # a GPU is there, and D2L_DEVICE=cpu keeps the helpers off it
    assert len(out) == 5 and all(line.startswith("TouchedCuda touched CUDA: ") for line in out[1:])
    touched = (tmp_path / "touched.log").read_text(encoding="utf-8").split()
    assert touched == [
        "torch.cuda._lazy_init",
        "Tensor.pin_memory",
        "torch.cuda.stream",
        "torch.cuda.synchronize",
    ]
    env = {k: v for k, v in fake_cuda.items() if k != "D2L_DEVICE"}
    seen = subprocess.run(
        [sys.executable, "-c", "import d2l_gpu; print(d2l_gpu.try_gpu())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert seen == "cuda:0"  # without the variable, the helpers would take the pretend GPU


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=lambda p: str(p.relative_to(NOTEBOOKS)))
def test_lesson_runs_as_a_script_touching_no_cuda(path, fake_cuda, tmp_path):
    touched = tmp_path / "touched.log"
    run_lesson(path, {**fake_cuda, "D2L_TOUCHED_CUDA_LOG": str(touched)}, touched)
