"""Every notebook source runs as a plain Python script, as on a bare GPU box without Jupyter.

Each ``notebooks/<lang>/NN-*.py`` is run with this environment's Python from its
own folder, on a pretend one-GPU CUDA machine with ``D2L_DEVICE=cpu``: it must exit
0, touch no CUDA and leave the repository as it found it. (One run does both jobs:
with the helpers kept on the CPU, the lesson takes the path a CPU-only reader takes;
nbval runs each lesson in the unchanged environment.)
"""

import os
import re
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
# Every such call is written to the log at D2L_TOUCHED_CUDA_LOG (a lesson's own
# try/except must not hide it).
#
# The allocator's counters follow the rule a real GPU showed (the H200 run of
# 2026-12-04, torch 2.11): before CUDA has started, the readers (memory_allocated,
# max_memory_allocated, memory_reserved, memory_stats, ...) answer 0 without touching
# it, so they stay; the resets given a device (reset_peak_memory_stats(device),
# reset_accumulated_memory_stats(device), and reset_max_memory_allocated/_cached,
# which call the first) raise RuntimeError("Invalid device argument"), because
# torch.cuda.memory calls the allocator without the is_initialized() check the readers
# make. Without a device they ask for the current device first, and that starts CUDA.
# torch.accelerator's resets refused before the start there too (later torch makes them
# a no-op); the fake refuses them, the rule that holds for both. A refused reset is
# logged like any touch.
#
# With D2L_FAKE_CUDA_MAY_START=1 (the tests of that rule only), torch.cuda.init(),
# torch.cuda._lazy_init() and torch.cuda.mem_get_info() (which starts CUDA on a GPU,
# and here answers 0 free of 0) are allowed: they only mark the pretend GPU as
# started, after which the resets succeed (and do nothing). The first real CUDA
# tensor still fails in a CPU build of torch, so a lesson run this way stops there.
FAKE_CUDA = """
import os
import torch

class TouchedCuda(RuntimeError):
    pass

MAY_START = os.environ.get("D2L_FAKE_CUDA_MAY_START") == "1"
started = False

def _log(name):
    with open(os.environ["D2L_TOUCHED_CUDA_LOG"], "a", encoding="utf-8") as log:
        log.write(name + "\\n")

def _touched(name):
    def refuse(*args, **kwargs):
        _log(name)
        raise TouchedCuda(f"touched CUDA: {name} under D2L_DEVICE=cpu")
    return refuse

def _start(name):
    def start(*args, **kwargs):
        global started
        if not MAY_START:
            _touched(name)()
        started = True
    return start

def _reset(name, without_device_starts):
    def reset(device=None, *args, **kwargs):
        if device is None and without_device_starts:
            torch.cuda._lazy_init()  # as torch.cuda.current_device() does
        elif not started:
            _log(name)
            raise RuntimeError("Invalid device argument")
    return reset

torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.accelerator.is_available = lambda: True
torch.accelerator.current_accelerator = lambda *args, **kwargs: torch.device("cuda")
torch.accelerator.device_count = lambda: 1
for name in ("_lazy_init", "init"):
    setattr(torch.cuda, name, _start(f"torch.cuda.{name}"))
_start_for_memory = _start("torch.cuda.mem_get_info")

def _mem_get_info(device=None):
    _start_for_memory()  # on a GPU it starts CUDA too
    return 0, 0  # free and total: nothing to report on a pretend card

torch.cuda.mem_get_info = _mem_get_info
for name in ("synchronize", "stream", "Stream", "Event", "set_device", "current_device",
             "current_stream", "get_device_name", "get_device_properties",
             "get_device_capability"):
    setattr(torch.cuda, name, _touched(f"torch.cuda.{name}"))
for name in ("reset_peak_memory_stats", "reset_accumulated_memory_stats"):
    for module, where, starts in ((torch.cuda, "torch.cuda", True),
                                  (torch.cuda.memory, "torch.cuda", True),
                                  (torch.accelerator, "torch.accelerator", False),
                                  (getattr(torch.accelerator, "memory", None), "", False)):
        if hasattr(module, name):  # torch.accelerator's counters came after torch 2.6
            setattr(module, name, _reset(f"{where or 'torch.accelerator'}.{name}", starts))
for name in ("synchronize", "set_device_index", "current_device_index", "current_stream"):
    setattr(torch.accelerator, name, _touched(f"torch.accelerator.{name}"))
torch.Tensor.pin_memory = _touched("Tensor.pin_memory")
torch.Tensor.cuda = _touched("Tensor.cuda")
torch.nn.Module.cuda = _touched("Module.cuda")
"""


def test_every_language_has_notebook_sources():
    assert {p.parent.name for p in LESSON_SOURCES} == {"en", "zh"}


def run_script(path: Path, env: dict) -> subprocess.CompletedProcess:
    """``python lesson.py`` in the lesson's folder, bounded by TIMEOUT."""
    # Agg: figures are drawn but never shown, as on a machine without a display.
    env = {**env, "MPLBACKEND": "Agg"}
    try:
        return subprocess.run(
            [sys.executable, path.name],
            cwd=path.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"python {path.name} still running after {TIMEOUT} s")


def run_lesson(path: Path, env: dict, touched: Path | None = None) -> None:
    before = notebooks_snapshot()
    proc = run_script(path, env)
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


def may_start(fake_cuda: dict, log: Path) -> dict:
    """The pretend GPU offered to the helpers, and CUDA allowed to start on it."""
    env = {k: v for k, v in fake_cuda.items() if k != "D2L_DEVICE"}
    return {**env, "D2L_FAKE_CUDA_MAY_START": "1", "D2L_TOUCHED_CUDA_LOG": str(log)}


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
    if "import matplotlib" in path.read_text(encoding="utf-8"):
        # A bare GPU box may lack it; gpu-check carries it in the `science` wheels.
        pytest.importorskip("matplotlib", reason=f"{path.name} draws with matplotlib")
    touched = tmp_path / "touched.log"
    run_lesson(path, {**fake_cuda, "D2L_TOUCHED_CUDA_LOG": str(touched)}, touched)


# Each case as the H200 ran it in a fresh process (torch 2.11, 2026-12-04): the code,
# and whether it got past the allocator's counters. The fake must agree on every row.
COUNTER_RULE = [
    ("reset first", "torch.cuda.reset_peak_memory_stats(gpu)", False),
    ("reset(), no device", "torch.cuda.reset_peak_memory_stats()", True),
    ("init() then reset", "torch.cuda.init()\ntorch.cuda.reset_peak_memory_stats(gpu)", True),
    (
        "memory_allocated then reset",
        "torch.cuda.memory_allocated(gpu)\ntorch.cuda.reset_peak_memory_stats(gpu)",
        False,
    ),
    ("max_memory_allocated first", "assert torch.cuda.max_memory_allocated(gpu) == 0", True),
    ("accelerator.reset_peak first", "torch.accelerator.reset_peak_memory_stats(gpu)", False),
    (
        "reset_max_memory_allocated first",
        "torch.cuda.reset_max_memory_allocated(gpu)",  # calls reset_peak_memory_stats
        False,
    ),
]


@pytest.mark.parametrize(("case", "code", "passes"), COUNTER_RULE, ids=[c[0] for c in COUNTER_RULE])
def test_the_allocator_counters_refuse_until_cuda_has_started(
    case, code, passes, fake_cuda, tmp_path
):
    """A script that resets the counters before CUDA starts fails here as on a GPU."""
    log = tmp_path / "touched.log"
    script = f"import torch\ngpu = torch.device('cuda', 0)\n{code}\nprint('got past')\n"
    run = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        env=may_start(fake_cuda, log),
        capture_output=True,
        text=True,
    )
    if passes:
        assert run.returncode == 0 and run.stdout == "got past\n", run.stderr
        assert not log.exists(), log.read_text(encoding="utf-8")
    else:
        assert run.returncode == 1 and "got past" not in run.stdout
        assert run.stderr.splitlines()[-1] == "RuntimeError: Invalid device argument", run.stderr
        assert log.read_text(encoding="utf-8").split()[-1].endswith(".reset_peak_memory_stats")


def test_under_d2l_device_cpu_starting_cuda_is_a_touch(fake_cuda, tmp_path):
    """Without the tests' permission, the start a counter needs is itself refused."""
    log = tmp_path / "touched.log"
    code = (
        "import torch\n"
        "for start in (torch.cuda.init, torch.cuda.reset_peak_memory_stats):\n"
        "    try:\n"
        "        start()\n"
        "    except Exception as error:\n"
        "        print(type(error).__name__)\n"
        "torch.cuda.reset_peak_memory_stats(0)\n"
    )
    env = {**fake_cuda, "D2L_TOUCHED_CUDA_LOG": str(log)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.stdout.split() == ["TouchedCuda", "TouchedCuda"]
    assert run.stderr.splitlines()[-1] == "RuntimeError: Invalid device argument", run.stderr
    assert log.read_text(encoding="utf-8").split() == [
        "torch.cuda.init",
        "torch.cuda._lazy_init",
        "torch.cuda.reset_peak_memory_stats",
    ]


_RESETS = re.compile(r"reset_(?:peak|accumulated)_memory_stats|reset_max_memory_")
RESETTING_LESSONS = [p for p in LESSON_SOURCES if _RESETS.search(p.read_text(encoding="utf-8"))]


def test_some_lesson_resets_the_counters():
    assert RESETTING_LESSONS, "no lesson resets the allocator's counters: the next test is idle"


@pytest.mark.parametrize("path", RESETTING_LESSONS, ids=lambda p: str(p.relative_to(NOTEBOOKS)))
def test_a_lesson_starts_cuda_before_it_resets_the_counters(path, fake_cuda, tmp_path):
    """On the pretend GPU, offered to the helpers, the lesson's CUDA path gets past its resets.

    CUDA may start here, so the lesson runs until its first real CUDA tensor, which a
    CPU build of torch cannot make; a reset before the start would have stopped it first.
    """
    log = tmp_path / "touched.log"
    run = run_script(path, may_start(fake_cuda, log))
    refused = log.read_text(encoding="utf-8").split() if log.exists() else []
    assert not [name for name in refused if _RESETS.search(name)], (
        f"python {path.name} reset the allocator's counters before CUDA started: {refused}"
    )
    assert "Invalid device argument" not in run.stderr, run.stderr[-3000:]
