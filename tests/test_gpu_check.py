"""`make gpu-check` (.ci/gpu_check.py) on this machine: what it runs, compares and reports."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from tests.repository import LESSON_SOURCES

ROOT = Path(__file__).resolve().parents[1]
# run.json, as .ci/publish_gpu_outputs.py reads it.
RUN_KEYS = ["date", "commit", "python", "torch", "cuda", "driver", "gpu", "gpus", "checks"]
RUN_KEYS += ["figures", "lessons"]
FIGURE_KEYS = {"what", "value", "goal", "verdict", "hard", "limit", "fraction"}
SCRIPT = ROOT / ".ci" / "gpu_check.py"
# Hide every CUDA and ROCm GPU from the child, so it sees what a machine without one sees.
NO_GPU = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}


def _load(name: str):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPT.parent / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def run_gpu_check(report: Path, *args: str, env: dict | None = None, script: Path = SCRIPT):
    env = {**os.environ, **NO_GPU, **(env or {})}
    env.pop("D2L_DEVICE", None)
    result = subprocess.run(
        [sys.executable, str(script), "--report", str(report), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=script.parents[1],
        timeout=600,
    )
    # A relative report folder is relative to the repository the script is in.
    summary = (script.parents[1] / report / "summary.txt").read_text(encoding="utf-8")
    return result, summary.splitlines()


def _lines(summary: list[str]) -> dict[str, str]:
    """Check lines by their name: 'passed   lesson en/x (1.0 s): why' -> 'lesson en/x'."""
    lines = {}
    for line in summary[1:]:
        if line[:8].strip() in ("passed", "failed", "skipped"):
            lines[line[9:].split(" (")[0].split(":")[0]] = line
    return lines


@pytest.fixture
def notebook_stack():
    """What gpu-check needs to compare a lesson with its stored outputs (carried as wheels)."""
    for name in ("nbval", "ipykernel", "nbformat"):
        pytest.importorskip(name, reason=f"comparing outputs needs {name}; none here")


@pytest.fixture
def no_mps():
    if torch.backends.mps.is_available():
        pytest.skip("an MPS GPU cannot be hidden from a child process")


def test_without_a_gpu_it_runs_what_it_can_and_says_what_it_skipped(tmp_path, no_mps):
    args = ["--only", "info,figures,tests,torchrun", "--wheels", str(tmp_path / "none")]
    result, summary = run_gpu_check(tmp_path, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert summary[0].startswith("gpu-check summary: torch ") and ", no GPU, " in summary[0]
    lines = summary[1:]
    Result = _load("gpu_check").Result
    assert lines[0] == f"skipped  carried wheels: none in {tmp_path / 'none'}"
    assert lines[1].startswith("passed   info (")
    assert lines[2].startswith("skipped  figures (") and lines[2].endswith(
        "no GPU: nothing to measure"
    )
    assert lines[3].startswith("skipped  gpu tests (")
    assert "no GPU: all " in lines[3] and "gpu-marked tests skipped" in lines[3]
    # The nccl demo runs before the lessons, so their time budget can never skip it.
    assert lines[4] == "skipped  torchrun nccl demo: no CUDA GPU: nccl needs one"
    lessons = lines[5 : 5 + len(LESSON_SOURCES)]
    assert all(line.startswith("skipped  lesson ") for line in lessons)
    assert all(line.endswith(": not selected (--only)") for line in lessons)
    # The closing table names each figure with its goal, and says "no GPU", not a number.
    table = "\n".join(summary)
    for what in (
        "Timer / CUDA events",
        "unsynchronized clock",
        "benchmark(): empty call",
        "host-to-device, pinned",
        "bfloat16 matmul",
        "D2L_DEVICE=cpu: CUDA untouched",
    ):
        assert f"{what}" in table
    figures = [line for line in summary if "| goal " in line]
    assert len(figures) == 10 and all(line.endswith(": no GPU") for line in figures)
    assert "  no GPU  | goal 0.99-1.01: no GPU" in table
    assert "  none: no executed lesson printed a verdict" in summary
    assert summary[-1].startswith("passed: 0 check(s) failed, ")
    assert "cpu" in (tmp_path / "info.txt").read_text(encoding="utf-8")
    assert result.stdout.rstrip().endswith("\n".join(summary))

    record = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert list(record) == RUN_KEYS
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", record["date"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    assert record["commit"] == (head.stdout.strip() if head.returncode == 0 else None)
    assert record["python"] == sys.version.split()[0]
    assert (record["torch"], record["cuda"]) == (torch.__version__, torch.version.cuda)
    assert record["driver"] is None or shutil.which("nvidia-smi")
    assert (record["gpu"], record["gpus"]) == (None, 0)  # the GPUs were hidden
    checks = record["checks"]
    assert [list(c) for c in checks] == [["name", "status", "why", "seconds"]] * len(checks)
    assert [Result(**c).line() for c in checks] == lines[: len(checks)]
    assert len(checks) == 5 + len(LESSON_SOURCES)  # every check line, and no more
    assert [set(f) for f in record["figures"]] == [FIGURE_KEYS] * 10
    assert all(f["limit"] is None and f["fraction"] is None for f in record["figures"])
    assert record["lessons"] == {}  # none selected


def _notebook(cells: list[tuple[str, str, list[str]]]) -> dict:
    """A stored notebook: (code, stored stdout, tags) per code cell."""
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": i + 1,
                "id": f"c{i}",
                "metadata": {"tags": tags},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": [out]}]
                if out
                else [],
                "source": [code],
            }
            for i, (code, out, tags) in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _lesson(folder: Path, name: str, cells) -> None:
    (folder / f"{name}.py").write_text("# a lesson's source; its .ipynb is what is run\n")
    (folder / f"{name}.ipynb").write_text(json.dumps(_notebook(cells)), encoding="utf-8")


def test_each_lesson_is_compared_by_nbval_and_kept_as_executed(tmp_path, no_mps, notebook_stack):
    folder = tmp_path / "lessons"
    folder.mkdir()
    _lesson(
        folder,
        "changed",
        [("print(1)", "1\n", []), ("print(2)", "3\n", []), ("print(4)", "5\n", [])],
    )
    _lesson(folder, "broken", [("print(1)", "1\n", []), ("import not_a_real_package", "", [])])
    _lesson(
        folder,
        "keyed",
        [
            ("print('on', 'cuda:0')", "on cpu\n", []),  # the same output, by the sanitizer
            ("import time; print(time.time())", "0\n", ["nbval-ignore-output", "key-result"]),
            ("print('GPU/CPU ratio: 1.0')", "GPU/CPU ratio: 1.0\n", ["key-result"]),
            ("raise SystemExit('never run')", "", ["nbval-skip"]),
        ],
    )
    (folder / "unstored.py").write_text("print('no .ipynb next to me')\n")
    args = ["--only", "notebooks", "--notebooks", str(folder / "*.py")]
    result, summary = run_gpu_check(tmp_path / "report", *args, "--wheels", str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = _lines(summary)
    assert lines["lesson lessons/changed"].endswith(
        ": differs from the stored outputs at code cell 1 (print(2))"
    )
    assert lines["lesson lessons/broken"].endswith(
        ": INCOMPLETE: code cell 1 (import not_a_real_package): "
        "ModuleNotFoundError: No module named 'not_a_real_package'"
    )
    assert lines["lesson lessons/keyed"].endswith(
        ": matches the stored outputs (4 cells, 1 skipped by tag)"
    )
    assert lines["lesson lessons/unstored"].endswith(
        ": no stored outputs: unstored.ipynb not found"
    )
    # Key results: the tagged cells' output as executed in this run, not as stored.
    keys = [line for line in summary if line.startswith("  lessons/keyed: ")]
    assert len(keys) == 2 and keys[0] != "  lessons/keyed: 0", keys
    assert float(keys[0].split(": ")[1]) > 1e9  # time.time() of this run
    assert keys[1] == "  lessons/keyed: GPU/CPU ratio: 1.0"
    executed = json.loads((tmp_path / "report/executed/lessons/changed.ipynb").read_text())
    outputs = [cell["outputs"][0]["text"] for cell in executed["cells"]]
    assert ["".join(t) for t in outputs] == ["1\n", "2\n", "4\n"]
    skipped = json.loads((tmp_path / "report/executed/lessons/keyed.ipynb").read_text())
    assert skipped["cells"][3]["outputs"] == [] and skipped["cells"][3]["execution_count"] is None


def test_a_changed_stored_output_in_a_copy_of_the_repository_fails_naming_the_lesson(
    tmp_path, notebook_stack
):
    """The real lesson, the real sanitizer: one stored line changed makes the run fail."""
    copy = tmp_path / "repo"
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    stored = copy / "notebooks/en/02-computing-devices.ipynb"
    notebook = json.loads(stored.read_text(encoding="utf-8"))
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    number, cell = next(
        (i, c)
        for i, c in enumerate(code)
        if "nbval-ignore-output" not in c["metadata"].get("tags", [])
        and any(out.get("output_type") == "stream" for out in c["outputs"])
    )
    stream = next(out for out in cell["outputs"] if out.get("output_type") == "stream")
    stream["text"] = ["a line no run of this lesson prints\n"]
    stored.write_text(json.dumps(notebook), encoding="utf-8")
    # A report folder given relative to the repository, as `make gpu-check` gives it.
    args = ["--only", "notebooks", "--notebooks", "notebooks/en/02-*.py", "--wheels", "none"]
    result, summary = run_gpu_check(Path("build/report"), *args, script=copy / ".ci/gpu_check.py")
    assert result.returncode == 1, result.stdout + result.stderr
    line = _lines(summary)["lesson en/02-computing-devices"]
    assert line.startswith("failed   lesson en/02-computing-devices (")
    assert f": differs from the stored outputs at code cell {number} (" in line
    assert summary[-1].startswith("FAILED: 1 check(s) failed")


SCRIPTS = {
    "pass.py": "print('fine')\n",
    "fail.py": "raise ValueError('boom')\n",
    "needs.py": "import surely_not_an_installed_module\n",
    "litter.py": "open('left.txt', 'w').close()\n",
}


def test_each_lesson_run_as_a_script_gets_one_honest_line(tmp_path, no_mps):
    folder = tmp_path / "lessons"
    folder.mkdir()
    for name, code in SCRIPTS.items():
        (folder / name).write_text(code, encoding="utf-8")
    args = ["--only", "notebooks", "--notebooks", str(folder / "*.py"), "--as-scripts"]
    result, summary = run_gpu_check(tmp_path / "report", *args, "--wheels", str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = _lines(summary)
    assert lines["lesson lessons/pass"].endswith(
        ": ran to its end as a script (outputs not compared: --as-scripts)"
    )
    assert lines["lesson lessons/fail"].endswith(": INCOMPLETE: exit 1: ValueError: boom")
    # A missing package is no excuse: the lesson did not run to its end.
    assert lines["lesson lessons/needs"].endswith(
        ": INCOMPLETE: exit 1: ModuleNotFoundError: "
        "No module named 'surely_not_an_installed_module'"
    )
    assert lines["lesson lessons/litter"].endswith(": left files behind: left.txt")
    assert (tmp_path / "report" / "lessons" / "lessons-fail.log").is_file()


def test_a_lesson_past_its_time_limit_is_ended_and_fails(tmp_path, no_mps):
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "slow.py").write_text("import time\ntime.sleep(600)\n", encoding="utf-8")
    args = ["--only", "notebooks", "--notebooks", str(folder / "*.py"), "--as-scripts"]
    args += ["--lesson-timeout", "3", "--wheels", str(tmp_path)]
    result, summary = run_gpu_check(tmp_path / "report", *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "INCOMPLETE: timed out after " in _lines(summary)["lesson lessons/slow"]


def test_without_nbval_a_lesson_that_runs_still_fails_as_not_compared(tmp_path, no_mps):
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "fine.py").write_text("print('fine')\n", encoding="utf-8")
    hide = tmp_path / "hide"
    (hide / "nbval").mkdir(parents=True)
    (hide / "nbval" / "__init__.py").write_text("raise ImportError('nbval hidden by the test')\n")
    path = os.pathsep.join(p for p in (str(hide), os.environ.get("PYTHONPATH")) if p)
    args = ["--only", "notebooks", "--notebooks", str(folder / "*.py"), "--wheels", str(tmp_path)]
    result, summary = run_gpu_check(tmp_path / "report", *args, env={"PYTHONPATH": path})
    assert result.returncode == 1, result.stdout + result.stderr
    assert _lines(summary)["lesson lessons/fine"].endswith(
        ": ran to its end as a script, but was not compared with its stored outputs: "
        "nbval does not import here (carry it: make gpu-wheels)"
    )


def _fake_nvidia_smi(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-1234)"\n', encoding="utf-8")
    smi.chmod(0o755)
    return folder


MACHINE = {"torch": "2.13.0+cpu", "cuda_build": None, "hip_build": None, "count": 0, "cuda": 0}


def test_a_gpu_the_machine_lists_but_torch_cannot_see_fails(tmp_path, monkeypatch):
    gpu_check = _load("gpu_check")
    env = {k: v for k, v in os.environ.items() if k not in gpu_check.HIDING}
    monkeypatch.setenv("PATH", f"{_fake_nvidia_smi(tmp_path / 'bin')}{os.pathsep}/usr/bin:/bin")
    result = gpu_check.check_hardware(MACHINE, env, device_files=())
    assert result.status == "failed" and result.name == "GPU hardware"
    assert "lists GPU 0: NVIDIA H200 (UUID: GPU-1234), but torch 2.13.0+cpu " in result.why
    assert "(built for CUDA none, HIP none) sees no GPU" in result.why
    # Hidden on purpose, or seen by torch: nothing to complain about.
    assert gpu_check.check_hardware(MACHINE, {**env, "CUDA_VISIBLE_DEVICES": ""}, ()) is None
    assert gpu_check.check_hardware({**MACHINE, "count": 1}, env, ()) is None


def test_a_gpu_device_file_without_nvidia_smi_also_counts(tmp_path, monkeypatch):
    gpu_check = _load("gpu_check")
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    device = tmp_path / "kfd"
    device.touch()
    result = gpu_check.check_hardware({**MACHINE, "hip_build": "6.4"}, {}, (str(device),))
    assert result.status == "failed" and f"lists {device}, but torch " in result.why
    assert "HIP 6.4" in result.why
    assert gpu_check.check_hardware(MACHINE, {}, (str(tmp_path / "absent"),)) is None


def test_the_whole_run_stops_at_once_on_a_gpu_torch_cannot_see(tmp_path):
    if torch.accelerator.is_available():
        pytest.skip("torch sees a GPU here; the two tests above cover the rule")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES",)}
    env["PATH"] = f"{_fake_nvidia_smi(tmp_path / 'bin')}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--report", str(tmp_path / "report")],
        capture_output=True,
        text=True,
        env={k: v for k, v in env.items() if k not in ("HIP_VISIBLE_DEVICES", "D2L_DEVICE")},
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    summary = (tmp_path / "report/summary.txt").read_text().splitlines()
    assert summary[1].startswith("failed   GPU hardware: this machine lists GPU 0: NVIDIA H200")
    assert summary[-1].startswith("FAILED: 1 check(s) failed")


def test_an_unknown_check_is_refused_with_the_choices(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--report", str(tmp_path), "--only", "info,gpu"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    choices = "['info', 'figures', 'tests', 'torchrun', 'notebooks']"
    assert f"unknown check(s) ['gpu']; choose from {choices}" in result.stderr


@pytest.mark.parametrize("override", ["cuda:1", "cpu"])
@pytest.mark.parametrize("gpus", [1, 2])
def test_nccl_demo_takes_one_rank_per_cuda_gpu_on_loopback(tmp_path, monkeypatch, override, gpus):
    """On two GPUs with D2L_DEVICE=cuda:1 both ranks would take cuda:1 and nccl would refuse."""
    gpu_check = _load("gpu_check")
    monkeypatch.setenv("D2L_DEVICE", override)
    runner = gpu_check.Runner(tmp_path, budget=60)
    calls = []

    def fake_run(args, log, limit, cwd=gpu_check.ROOT, env=None):
        calls.append((args, env))
        return 0, 1.5, "rank 0/2: ...\n"

    monkeypatch.setattr(runner, "run", fake_run)
    result = gpu_check.check_torchrun(runner, {"cuda": gpus})
    assert result.status == "passed"
    if gpus == 1:
        assert result.why == (
            "1 rank: nccl initialises, no traffic between GPUs; "
            "several GPUs: not verifiable on this machine"
        )
    else:
        assert result.why == "2 ranks, one per GPU, all-reduce over nccl"
    [(args, env)] = calls
    assert args[args.index("--nproc-per-node") + 1] == str(gpus)
    assert args[args.index("--local-addr") + 1] == "127.0.0.1"
    host, port = args[args.index("--rdzv-endpoint") + 1].split(":")
    assert host == "127.0.0.1" and int(port) not in (0, 29500)
    assert args[-2:] == ["--backend", "nccl"]
    assert "D2L_DEVICE" not in env
    assert env["PYTHONPATH"] == runner.env["PYTHONPATH"]  # d2l_gpu still imports
    assert runner.env["D2L_DEVICE"] == override  # the lessons still run where it says


TORCHRUN_FAILURE = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "all_reduce_demo.py", line 40, in <module>
[rank0]: RuntimeError: Numpy is not available
E1203 18:00:00.000 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1)
Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
notebooks/scripts/all_reduce_demo.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
============================================================
"""


def test_a_torchrun_failure_shows_the_exception_not_the_banner(tmp_path, monkeypatch):
    gpu_check = _load("gpu_check")
    runner = gpu_check.Runner(tmp_path, budget=60)
    monkeypatch.setattr(runner, "run", lambda *a, **k: (1, 2.0, TORCHRUN_FAILURE))
    result = gpu_check.check_torchrun(runner, {"cuda": 1})
    assert result.why == "exit 1: RuntimeError: Numpy is not available"


def _wheel(folder: Path, name: str, version: str = "1.0") -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{name}/__init__.py", f"VALUE = {version!r}\n")
        info = f"{name}-{version}.dist-info"
        wheel.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    return path


def test_carried_wheels_install_privately_and_only_what_this_python_lacks(tmp_path):
    gpu_check = _load("gpu_check")
    wheels = tmp_path / "wheels"
    (wheels / "set").mkdir(parents=True)
    _wheel(wheels / "set", "demo_pkg")
    _wheel(wheels, "pytest", "0.0.1")  # this Python has pytest: its own must stay in charge
    runner = gpu_check.Runner(tmp_path / "report", budget=120)
    result = gpu_check.prepare_wheels(runner, wheels)
    site = tmp_path / "report" / "site"
    assert result.status == "passed", result.why
    assert result.why == f"installed 1 into {site}: demo-pkg (list in wheels-install.log)"
    assert runner.env["PYTHONPATH"].split(os.pathsep)[0] == str(site)
    code = "import demo_pkg, pytest; print(demo_pkg.VALUE, pytest.__version__ != '0.0.1')"
    out = subprocess.run(
        [sys.executable, "-c", code], env=runner.env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["1.0", "True"]
    assert not (site / "pytest").exists()


def test_make_gpu_wheels_targets_the_gpu_machines_python(tmp_path):
    def dry_run(*variables: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                "make",
                "-n",
                "--no-print-directory",
                "gpu-wheels",
                f"STAMP={tmp_path}/stamp",
                *variables,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )

    (tmp_path / "stamp").touch()
    default = dry_run().stdout
    assert "--python-version 3.12" in default and "--platform manylinux2014_x86_64" in default
    for package in ("numpy", "matplotlib", "pytest", "nbval", "ipykernel"):
        assert f" {package}" in default
    older = dry_run("GPU_PYTHON_VERSION=3.10").stdout
    assert "--python-version 3.10" in older and "exceptiongroup tomli" in older
    assert "-c constraints.txt" not in older  # the pins were resolved on 3.11
    just_nbval = dry_run("GPU_WHEELS_SETS=notebook").stdout
    assert " nbval ipykernel" in just_nbval and " numpy" not in just_nbval
    wrong = dry_run("GPU_WHEELS_SETS=notebook jupyter")
    assert wrong.returncode != 0
    assert "GPU_WHEELS_SETS: unknown set(s) jupyter; choose from: science tests notebook" in (
        wrong.stderr
    )


def test_make_gpu_check_is_listed_and_documented():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    help_text = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert "make gpu-check" in help_text and "make gpu-wheels" in help_text
    assert ".ci/gpu_check.py --report $(GPU_REPORT)" in makefile
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make gpu-check" in readme and "python3 .ci/gpu_check.py" in readme
    assert "GPU_PYTHON_VERSION" in readme and "GPU_WHEELS_SETS" in readme


def test_d2l_device_cpu_row_runs_the_helpers_and_reads_cuda_state():
    """On any machine the probe itself runs; on a CUDA machine its verdict is the claim."""
    figures = _load("gpu_figures")
    row = figures.cpu_only_row()
    assert row["hard"] and row["verdict"] == "meets", row
    assert row["value"] == "initialised: False, contexts on: none"


def test_the_tests_collect_on_python_3_10_with_tomli(tmp_path):
    """Python 3.10 has no tomllib; tests/repository.py then reads pyproject with tomli."""
    (tmp_path / "tomli.py").write_text(
        "def loads(text):\n    return {'tool': {'d2l_gpu': {'read by': 'tomli'}}}\n"
    )
    code = (
        "import sys; sys.modules['tomllib'] = None\n"  # what 3.10 lacks
        "from tests.repository import TOOL; print(TOOL)\n"
    )
    path = os.pathsep.join([str(tmp_path), str(ROOT)])
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": path},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "{'read by': 'tomli'}"


def test_a_childs_answer_is_found_past_a_warning_printed_at_exit():
    lessons = _load("gpu_lessons")
    output = 'starting\n{"count": 1}\n/x.py:3: UserWarning: {late\n'
    assert lessons.last_json(output) == {"count": 1}
    with pytest.raises(ValueError, match="no JSON line in the output"):
        lessons.last_json("Traceback ...\nRuntimeError: boom\n")


AGREE = "verdict: b takes {}x the time of a: they agree within the ±10 % tolerance"
SLOWER = "verdict: b takes {0}x the time of a (q1-q3 {0}x to {0}x over 10 rounds): clearly slower"
UNCLEAR = (
    "verdict: b takes {}x the time of a, but the round ratios (q1-q3 0.95x to 1.62x) "
    "reach into ±10 %: no clear difference"
)


def _executed(report: Path, lesson: str, printed: list[str]) -> None:
    """A lesson as gpu-check keeps it executed: a cell that printed ``printed``, among others."""
    path = report / "executed" / f"{lesson}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = [("print('setup')", "torch 2.13\n", []), ("compare()", "\n".join(printed) + "\n", [])]
    path.write_text(json.dumps(_notebook(cells)), encoding="utf-8")


def test_the_en_and_zh_runs_of_a_lesson_must_print_the_same_verdicts(tmp_path):
    gpu_check = _load("gpu_check")
    _executed(tmp_path, "en/05-same", ["x * 2 on device: 6.7 us", SLOWER.format("12.90")])
    _executed(tmp_path, "zh/05-same", ["x * 2 on device: 13.7 us", SLOWER.format("7.22")])
    _executed(tmp_path, "en/07-flips", [AGREE.format("1.02"), SLOWER.format("3.10")])
    _executed(tmp_path, "zh/07-flips", [AGREE.format("0.99"), UNCLEAR.format("1.31")])
    _executed(tmp_path, "en/08-short", [AGREE.format("1.00"), AGREE.format("1.01")])
    _executed(tmp_path, "zh/08-short", [AGREE.format("1.03")])  # zh stopped early
    _executed(tmp_path, "en/09-alone", [AGREE.format("1.00")])
    _executed(tmp_path, "en/01-none", ["no verdict here"])
    _executed(tmp_path, "zh/01-none", ["no verdict here"])
    results = {r.name: r for r in gpu_check.check_verdicts(tmp_path / "executed")}
    assert list(results) == [f"en/zh verdicts {s}" for s in ("05-same", "07-flips", "08-short")] + [
        "en/zh verdicts 09-alone"
    ]
    assert results["en/zh verdicts 05-same"].line() == (
        "passed   en/zh verdicts 05-same: 1 verdict(s) agree"
    )
    flips = results["en/zh verdicts 07-flips"]
    assert flips.status == "failed"
    assert (
        flips.why
        == f"verdict 2 differs: en {SLOWER.format('3.10')!r}; zh {UNCLEAR.format('1.31')!r}"
    )
    short = results["en/zh verdicts 08-short"]
    assert short.status == "failed"
    assert short.why == (
        f"verdict 2 differs: en {AGREE.format('1.01')!r}; zh '(none)' (en printed 2, zh 1)"
    )
    assert results["en/zh verdicts 09-alone"].line() == (
        "skipped  en/zh verdicts 09-alone: only the en run was kept: nothing to compare"
    )
    # The summary lists every verdict line as printed, lesson by lesson.
    found = _load("gpu_lessons").verdict_lines(tmp_path / "executed")
    listed = gpu_check.table([], [], found)
    start = listed.index("verdicts (lines d2l_gpu.compare printed, as executed in this run):")
    assert listed[start + 1 : start + 3] == [
        f"  en/05-same: {SLOWER.format('12.90')}",
        f"  en/07-flips: {AGREE.format('1.02')}",
    ]
    assert len(listed) == start + 1 + 10 and listed[-1] == f"  zh/08-short: {AGREE.format('1.03')}"


def test_gpu_check_compares_the_verdicts_of_the_lessons_it_ran(tmp_path, no_mps, notebook_stack):
    for lang, line in (("en", AGREE.format("1.02")), ("zh", SLOWER.format("2.50"))):
        folder = tmp_path / lang
        folder.mkdir()
        cells = [(f"print({line!r})", f"{line}\n", ["nbval-ignore-output"])]
        _lesson(folder, "07-flips", cells)
    args = ["--only", "notebooks", "--notebooks", str(tmp_path / "*" / "*.py")]
    result, summary = run_gpu_check(tmp_path / "report", *args, "--wheels", str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = _lines(summary)
    assert lines["lesson en/07-flips"].startswith("passed ")
    assert lines["en/zh verdicts 07-flips"].endswith(
        f": verdict 1 differs: en {AGREE.format('1.02')!r}; zh {SLOWER.format('2.50')!r}"
    )
    assert f"  zh/07-flips: {SLOWER.format('2.50')}" in summary
    record = json.loads((tmp_path / "report" / "run.json").read_text(encoding="utf-8"))
    assert record["lessons"] == {
        "en/07-flips": {"status": "passed", "why": "matches the stored outputs (1 cells)"},
        "zh/07-flips": {"status": "passed", "why": "matches the stored outputs (1 cells)"},
    }
    assert record["checks"][-1]["name"] == "en/zh verdicts 07-flips"


def test_lessons_run_as_scripts_have_no_verdicts_to_compare(tmp_path, no_mps):
    folder = tmp_path / "en"
    folder.mkdir()
    (folder / "pass.py").write_text("print('fine')\n", encoding="utf-8")
    args = ["--only", "notebooks", "--notebooks", str(folder / "*.py"), "--as-scripts"]
    result, summary = run_gpu_check(tmp_path / "report", *args, "--wheels", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _lines(summary)["en/zh verdicts"] == (
        "skipped  en/zh verdicts: the lessons ran as scripts: no outputs were kept to compare"
    )
    record = json.loads((tmp_path / "report" / "run.json").read_text(encoding="utf-8"))
    assert record["lessons"] == {
        "en/pass": {
            "status": "passed",
            "why": "ran to its end as a script (outputs not compared: --as-scripts)",
        }
    }


def test_without_a_gpu_every_figure_is_listed_without_a_limit():
    figures = _load("gpu_figures")
    rows = figures.no_gpu_rows()
    assert [r["what"] for r in rows] == [what for what, _, _ in figures.ROWS]
    assert all(set(r) == FIGURE_KEYS and r["limit"] is r["fraction"] is None for r in rows)


def test_a_listed_card_has_datasheet_limits_and_each_figure_its_fraction(monkeypatch):
    figures = _load("gpu_figures")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H200")
    monkeypatch.setattr(figures, "pcie_link", lambda smi: (63.0, "PCIe 5.0 x16, as reported"))
    limits = figures.limits(torch.device("cuda", 0))
    assert limits == {
        "host-to-device, pageable memory": (63.0, "63.0 GB/s: PCIe 5.0 x16, as reported"),
        "host-to-device, pinned memory": (63.0, "63.0 GB/s: PCIe 5.0 x16, as reported"),
        "device-to-device copy": (4800.0, "4800 GB/s: memory, datasheet of NVIDIA H200"),
        "float32 matmul 8192x8192": (67, "67 TFLOP/s: float32, datasheet of NVIDIA H200"),
        "bfloat16 matmul 8192x8192": (989, "989 TFLOP/s: dense bfloat16, datasheet of NVIDIA H200"),
    }
    what = "bfloat16 matmul 8192x8192"
    row = figures.row(what, "800.0 TFLOP/s on NVIDIA H200", "meets", limits[what], 800.0)
    assert (row["limit"], row["fraction"]) == (limits[what][1], 0.809)
    line = _load("gpu_check").table([row], [], {})[2]
    assert line.endswith(
        "| goal above float32: meets  "
        "| 0.81 of 989 TFLOP/s: dense bfloat16, datasheet of NVIDIA H200"
    )


@pytest.mark.parametrize(
    ("name", "unknown"),
    [
        ("NVIDIA B300", "NVIDIA B300 is not in this script's table"),
        ("Tesla T4", "Tesla T4 has no bfloat16 tensor cores"),
    ],
)
def test_a_card_without_a_datasheet_figure_says_its_limit_is_unknown(monkeypatch, name, unknown):
    figures = _load("gpu_figures")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: name)
    monkeypatch.setattr(figures, "pcie_link", lambda smi: (31.5, "PCIe 4.0 x16"))
    peak, text = figures.limits(torch.device("cuda", 0))["bfloat16 matmul 8192x8192"]
    assert (peak, text) == (None, f"limit unknown: {unknown}")
    row = figures.row("bfloat16 matmul 8192x8192", "1.0 TFLOP/s", "meets", (peak, text), 1.0)
    assert row["fraction"] is None
    assert _load("gpu_check").table([row], [], {})[2].endswith(f"| limit unknown: {unknown}")


def test_an_mps_gpu_has_no_pcie_limit():
    figures = _load("gpu_figures")
    limits = figures.limits(torch.device("mps"))
    assert limits["host-to-device, pinned memory"] == (None, "limit unknown: not a PCIe card (mps)")


REPORTED = "as nvidia-smi reports the link"
ASSUMED = "PCIe 5.0 x16 assumed (nvidia-smi did not say)"


@pytest.mark.parametrize(
    ("printed", "link", "whence"),
    [
        ("5, 16\n", (5, 16), f"PCIe 5.0 x16, {REPORTED}"),
        ("4, 16\n4, 16\n", (4, 16), f"PCIe 4.0 x16, {REPORTED}"),
        ("4, 16\n5, 16\n", (5, 16), ASSUMED),  # the cards differ
        ("[N/A], [N/A]\n", (5, 16), ASSUMED),
    ],
)
def test_the_pcie_limit_is_the_link_nvidia_smi_reports_or_a_stated_assumption(
    tmp_path, printed, link, whence
):
    figures = _load("gpu_figures")
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{printed}'\n", encoding="utf-8")
    smi.chmod(0o755)
    gen, width = link
    assert figures.pcie_link(str(smi)) == (figures.PCIE_LANE[gen] * width, whence)
    assert figures.pcie_link(None) == (figures.PCIE_LANE[5] * 16, ASSUMED)
    assert round(figures.PCIE_LANE[5] * 16, 1) == 63.0  # PCIe 5.0 x16, one way


def test_a_figure_is_timed_over_batches_after_a_warm_up(monkeypatch):
    """Events around each batch (here read from the CPU clock), the median of the batches."""
    figures = _load("gpu_figures")

    class Event:
        def record(self, stream=None):
            self.at = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3

    monkeypatch.setattr(figures, "_events", lambda device: (Event(), Event(), None))
    calls = []

    def work():
        calls.append(1)
        end = time.perf_counter() + 1e-3
        while time.perf_counter() < end:
            pass

    seconds = figures.seconds_per_call(
        work, torch.device("cpu"), warmup=0.02, batch=0.01, batches=3
    )
    assert 1e-3 <= seconds < 1.5e-3
    # 3 + 3 calls to size things, about 20 of warm-up, then 3 batches of about 10
    assert 50 <= len(calls) <= 60


def test_run_json_names_the_driver_and_no_commit_for_a_tree_without_git(tmp_path, monkeypatch):
    gpu_check = _load("gpu_check")
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text('#!/bin/sh\necho "580.159.04, NVIDIA H200"\n', encoding="utf-8")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)  # a copy of the tree, without .git
    machine = {**MACHINE, "torch": "2.11.0+cu130", "cuda_build": "13.0", "count": 1}
    results = [
        gpu_check.Result("info", "passed", "", 3.54),
        gpu_check.Result("lesson en/04-gpu-memory", "failed", "INCOMPLETE: code cell 2", 7.6),
        gpu_check.Result("lesson zh/04-gpu-memory", "skipped", "not selected (--only)"),
    ]
    record = gpu_check.run_record({**machine, "name": "NVIDIA H200"}, results, [])
    assert list(record) == RUN_KEYS
    assert record["commit"] is None
    assert (record["driver"], record["gpu"], record["gpus"]) == ("580.159.04", "NVIDIA H200", 1)
    assert (record["torch"], record["cuda"]) == ("2.11.0+cu130", "13.0")
    assert record["checks"][0] == {"name": "info", "status": "passed", "why": "", "seconds": 3.5}
    assert record["lessons"] == {
        "en/04-gpu-memory": {"status": "failed", "why": "INCOMPLETE: code cell 2"}
    }
    assert gpu_check.run_record(None, [], [])["torch"] is None  # torch did not import
