"""tools/: execute's cell ids, gpu-check on this machine, make lab from a path with a space
(publishing is tests/test_publish_gpu.py)."""

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from d2l_gpu import report as d2l_report
from d2l_gpu.report import listed_gpus
from tests.simulate import python_without

# A bare GPU box has no Jupyter: these tests skip there, and the gpu tests elsewhere run.
nbformat = pytest.importorskip("nbformat", reason="the tools' tests read notebooks")
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gpu_check  # noqa: E402

KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def notebook(*cells, tags=None) -> nbformat.NotebookNode:
    """Markdown for sources starting with '#', code for the rest."""
    made = [new_markdown_cell(c) if c.startswith("#") else new_code_cell(c) for c in cells]
    for cell in made:
        cell.metadata = {"tags": tags} if tags and cell.cell_type == "code" else {}
    return new_notebook(cells=made, metadata={"kernelspec": KERNEL, "other": 1})


def test_execute_keeps_the_ids_of_kept_and_edited_cells(tmp_path):
    pytest.importorskip("jupytext", reason="tools/execute.py writes through Jupytext")
    import execute

    previous = tmp_path / "lesson.ipynb"
    old = notebook("# Title", "x = 1", "# Prose", "print(x)")
    nbformat.write(old, previous)
    new = notebook("# Title", "y = 0", "x = 2", "# Prose", "print(x)")
    execute.keep_cell_ids(new, previous)
    ids = [c.id for c in new.cells]
    assert ids[0] == old.cells[0].id and ids[3:] == [c.id for c in old.cells[2:]]
    assert old.cells[1].id in ids[1:3], "the edited cell keeps its id"
    assert len(set(ids)) == len(ids)
    again = notebook("# Title", "y = 0", "x = 2", "# Prose", "print(x)")
    execute.keep_cell_ids(again, previous)
    assert [c.id for c in again.cells] == ids, "a re-run gives the same ids"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_execute_stopped_mid_lesson_says_in_one_line_which_lesson_it_did_not_write(tmp_path, stop):
    pytest.importorskip("jupytext", reason="tools/execute.py writes through Jupytext")
    lesson, started = tmp_path / "01-sleeps.py", tmp_path / "started"
    touch = f"pathlib.Path({str(started)!r}).touch()"
    lesson.write_text(f"# %%\nimport pathlib, time\n{touch}\ntime.sleep(600)\n")
    command = [sys.executable, str(ROOT / "tools/execute.py"), str(lesson)]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(600):  # until the kernel runs the cell
        if started.exists() or run.poll() is not None:
            break
        time.sleep(0.1)
    run.send_signal(stop)
    out, err = run.communicate(timeout=60)
    said = f"interrupted: {tmp_path / '01-sleeps.ipynb'} not written\n"
    assert (run.returncode, out, err) == (1, "", said), "one line, no traceback"
    assert not (tmp_path / "01-sleeps.ipynb").exists()


def run_gpu_check(tmp_path: Path, *args: str, path: str | None = None, **env: str):
    env = {**os.environ, "PATH": path or os.environ["PATH"], **env}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    report = tmp_path / "report"
    command = [sys.executable, str(ROOT / "tools/gpu_check.py"), "--report", str(report), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    return done, report


def run_here(monkeypatch, tmp_path: Path, *args: str) -> int:
    """gpu_check.main in this process (no start of Python and torch; the steps still start
    theirs), its report in tmp_path/report; the PYTHONPATH it sets is put back after."""
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    return gpu_check.main(["--report", str(tmp_path / "report"), *args])


TORCH_SEES_A_GPU = torch.cuda.device_count() > 0 or torch.backends.mps.is_available()


@pytest.mark.skipif(TORCH_SEES_A_GPU, reason="torch sees a GPU here, so nothing is missed")
def test_gpu_check_stops_plainly_when_torch_cannot_see_the_listed_gpu(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-1)'\n")
    smi.chmod(0o755)
    done, report = run_gpu_check(tmp_path, path=f"{fake}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 1
    assert "nvidia-smi lists GPU 0: NVIDIA H200" in done.stdout and "sees no GPU" in done.stdout
    assert not (report / "executed").exists(), "nothing runs on the CPU in the GPU's place"


@pytest.mark.skipif(TORCH_SEES_A_GPU or listed_gpus(), reason="this machine has a GPU")
def test_gpu_check_on_a_cpu_machine_says_so_runs_what_it_can_and_reports(
    tmp_path, monkeypatch, capsys
):
    # Its steps lack Jupytext, as a box with CONTRIBUTING.md's wheels does: the gpu tests
    # must still be collected and run.
    for name, value in python_without(tmp_path, ["jupytext"]).items():
        monkeypatch.setenv(name, value)
    lessons, report = tmp_path / "en", tmp_path / "report"
    lessons.mkdir()
    counts = notebook("# A", "import d2l_gpu\nprint(d2l_gpu.num_gpus())")
    nbformat.write(counts, lessons / "01-a.ipynb")
    nbformat.write(notebook("# B", "raise ValueError('boom')"), lessons / "02-b.ipynb")
    done = run_here(monkeypatch, tmp_path, "--lessons", f"{lessons}/*.ipynb")
    assert "No GPU: torch sees none" in capsys.readouterr().out
    assert done == 1, "a lesson that raises fails the run"
    run = json.loads((report / "run.json").read_text())
    assert {"date", "commit", "python", "torch", "cuda", "driver", "gpus"} <= set(run)
    outcomes = steps(report)
    assert outcomes["info"] == outcomes["gpu-tests"] == outcomes["en/01-a"] == "passed"
    assert " skipped" in (report / "gpu-tests.log").read_text()
    assert outcomes["torchrun-nccl"].startswith("skipped")
    assert outcomes["en/02-b"].startswith("failed") and "ValueError: boom" in outcomes["en/02-b"]
    ran = nbformat.read(report / "executed/en/01-a.ipynb", as_version=4)
    assert ran.cells[1].outputs[0].text == "0\n"
    assert (report / "executed/en/02-b.ipynb").is_file(), "a failed lesson is kept as it ran"


def steps(report: Path) -> dict[str, str]:
    """Each step's outcome in a gpu-check report."""
    return {s["step"]: s["outcome"] for s in json.loads((report / "run.json").read_text())["steps"]}


@pytest.mark.skipif(TORCH_SEES_A_GPU or listed_gpus(), reason="this machine has a GPU")
def test_gpu_check_on_a_bare_box_runs_the_gpu_tests_and_says_what_the_lessons_need(tmp_path):
    bare = python_without(
        tmp_path, ["nbclient", "nbformat", "ipykernel", "jupytext", "jupyterlab", "nbval"]
    )
    lessons = ["notebooks/en/01-*.ipynb", "notebooks/zh/01-*.ipynb"]
    done, report = run_gpu_check(tmp_path, "--lessons", *lessons, **bare)
    outcomes, log = steps(report), (report / "gpu-tests.log").read_text()
    assert outcomes["info"] == outcomes["gpu-tests"] == "passed" and " skipped" in log, log
    python = sys.executable
    assert done.returncode == 1 and outcomes["lessons"] == (
        "not run: the 2 lessons need nbclient, nbformat, ipykernel, which this Python lacks; "
        f"CONTRIBUTING.md's wheel recipe adds them: {python} -m pip install --no-index "
        f"--find-links build/wheels --target build/gpu-packages {gpu_check.WHEELS}, then "
        f"PYTHONPATH=build/gpu-packages make gpu-check GPU_PYTHON={python}"
    )
    assert f'PKGS="{gpu_check.WHEELS}"' in (ROOT / "CONTRIBUTING.md").read_text()
    assert done.stdout.rstrip().endswith(f"not run: lessons; report in {report}")


def test_gpu_check_replaces_only_the_files_it_listed_as_its_own(tmp_path, monkeypatch):
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    gpu_check.fresh(mine)
    (mine / "executed/en").mkdir(parents=True)
    for name in ("run.json", "executed/en/01-x.ipynb"):
        gpu_check.claim(mine, name).write_text("from the last run")
    gpu_check.fresh(mine)
    assert [p.name for p in mine.rglob("*") if p.is_file()] == [gpu_check.MARK]
    gpu_check.claim(mine, "info.log").write_text("from the last run")
    (mine / "my-data").mkdir()  # the user's, put there after the run
    (mine / "my-data/results.csv").write_text("keep")
    with pytest.raises(SystemExit, match=r"not write \(my-data/results.csv\), so it is left as"):
        gpu_check.fresh(mine)
    assert (mine / "info.log").is_file() and (mine / "my-data/results.csv").is_file()
    shutil.rmtree(mine / "my-data")

    def read_only(path: Path, missing_ok: bool = False) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(Path, "unlink", read_only)  # a report on a read-only disk
    with pytest.raises(SystemExit, match=f"cannot write a report in {mine}: .*Read-only"):
        gpu_check.fresh(mine)
    theirs.mkdir()  # such as the checkout itself, or notebooks/gpu
    (theirs / "notes.txt").write_text("keep")
    with pytest.raises(SystemExit, match="holds files gpu-check did not write .* left as it is"):
        gpu_check.fresh(theirs)
    with pytest.raises(SystemExit, match="notes.txt is a file; --report takes a folder"):
        gpu_check.fresh(theirs / "notes.txt")
    assert os.listdir(theirs) == ["notes.txt"]


def _rank_then_sleep(pid_file: Path) -> str:
    """Code that starts a "rank" in a session of its own, as torchrun does, then sleeps."""
    return (
        "import subprocess, sys, time\n"
        "rank = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],"
        f" start_new_session=True)\nopen({str(pid_file)!r}, 'w').write(str(rank.pid))\n"
        "time.sleep(600)\n"
    )


def _ended(pid_file: Path) -> bool:
    pid = int(pid_file.read_text())
    stat = Path(f"/proc/{pid}/stat")  # a zombie has ended, if not yet been reaped
    if alive := stat.exists() and stat.read_text().split()[2] != "Z":
        os.kill(pid, 9)  # the planted fault: end what the test started
    return not alive


PROC = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")


@PROC
def test_a_step_that_times_out_ends_with_all_it_started_also_in_other_process_groups(tmp_path):
    agent, result = _rank_then_sleep(tmp_path / "rank"), []
    step = threading.Thread(
        target=lambda: result.append(gpu_check.run_step(tmp_path, "job", ["-c", agent], 3)),
        daemon=True,
    )
    step.start()
    step.join(30)
    assert _ended(tmp_path / "rank") and result[0][:2] == ("job", "failed: timed out after 3 s")


@PROC
def test_gpu_check_keeps_to_its_budget_and_names_the_steps_it_cut(tmp_path, monkeypatch, capsys):
    lessons = ["--lessons", "notebooks/en/01-*.ipynb"]
    assert run_here(monkeypatch, tmp_path, "--budget", "0.01", *lessons) == 1
    outcomes = steps(tmp_path / "report")
    cut = "cut: the budget of 0.01 s was spent before it started"
    assert outcomes["info"] == outcomes["gpu-tests"] == outcomes["en/01-introduction"] == cut
    assert "cut by the budget: info, gpu-tests, en/01-introduction" in capsys.readouterr().out


TIMED_OUT = r"failed: CellTimeoutError: A cell timed out while it was being executed, after"


@PROC
@pytest.mark.parametrize(
    ("limit", "said"),  # not nbclient's last line, the dashes under its preview of the cell
    [
        (["--budget", "8"], rf"cut: the budget of 8 s ran out while it ran \({TIMED_OUT} \d s.*"),
        (["--timeout", "2"], rf"{TIMED_OUT} 2 seconds\."),
    ],
)
def test_a_lesson_past_its_time_says_so_and_ends_with_all_it_started(
    tmp_path, monkeypatch, limit, said
):
    monkeypatch.setattr(gpu_check, "run_step", lambda report, name, *_: (name, "passed", 0))
    lesson = tmp_path / "en/01-sleeps.ipynb"  # a cell that would take ten minutes, and its rank
    lesson.parent.mkdir()
    nbformat.write(notebook("# A", _rank_then_sleep(tmp_path / "rank")), lesson)
    tik = time.monotonic()
    assert run_here(monkeypatch, tmp_path, *limit, "--lessons", str(lesson)) == 1
    outcome = steps(tmp_path / "report")["en/01-sleeps"]
    assert re.fullmatch(said, outcome) and time.monotonic() - tik < 60, outcome
    assert _ended(tmp_path / "rank")
    assert (tmp_path / "report/executed/en/01-sleeps.ipynb").is_file()


def test_gpu_check_refuses_two_lessons_that_would_be_one_step(tmp_path, monkeypatch):
    for folder in ("a", "b"):  # a/en/01-x and b/en/01-x: one step name, one saved notebook
        (tmp_path / folder / "en").mkdir(parents=True)
        nbformat.write(notebook("# X"), tmp_path / folder / "en/01-x.ipynb")
    with pytest.raises(SystemExit, match="two lessons are step en/01-x: give --lessons one of"):
        run_here(monkeypatch, tmp_path, "--lessons", f"{tmp_path}/[ab]/en/01-x.ipynb")
    assert not (tmp_path / "report").exists(), "refused before anything is written"


def test_gpu_check_waits_seconds_for_a_hung_nvidia_smi_and_says_so(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexec sleep 60\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.defpath}")
    monkeypatch.setattr(d2l_report, "SMI_SECONDS", 0.5)
    tik = time.monotonic()
    facts = gpu_check.machine()
    assert time.monotonic() - tik < 5 and facts["driver"] is None
    assert facts["notes"] == [
        "nvidia-smi did not answer within 0.5 s, so the driver is not recorded"
    ]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_runs_from_a_folder_whose_path_holds_a_space(tmp_path):
    checkout = tmp_path / "a b" / "d2l gpu"
    (checkout / ".venv/bin").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", checkout)
    python = checkout / ".venv/bin/python"  # finds JupyterLab installed
    python.write_text("#!/bin/sh\nexit 0\n")
    jupyter = checkout / ".venv/bin/jupyter"  # says where lab would read its settings
    jupyter.write_text('#!/bin/sh\necho "$JUPYTER_CONFIG_PATH"\n')
    for program in (python, jupyter):
        program.chmod(0o755)
    command = ["make", "-s", "-o", ".venv/.installed", "lab"]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=60)
    assert done.stdout == f"{checkout / 'jupyter-config'}\n", done.stderr
