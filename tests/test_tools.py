"""tools/: execute's cell ids, gpu-check on this machine, publish on a fabricated report."""

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from d2l_gpu.report import listed_gpus

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import execute  # noqa: E402
import publish_gpu  # noqa: E402

KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def notebook(*cells, tags=None) -> nbformat.NotebookNode:
    """Markdown for sources starting with '#', code for the rest."""
    made = [new_markdown_cell(c) if c.startswith("#") else new_code_cell(c) for c in cells]
    for cell in made:
        cell.metadata = {"tags": tags} if tags and cell.cell_type == "code" else {}
    return new_notebook(cells=made, metadata={"kernelspec": KERNEL, "other": 1})


def test_execute_keeps_the_ids_of_kept_and_edited_cells(tmp_path):
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


def run_gpu_check(tmp_path: Path, *args: str, path: str | None = None):
    env = {**os.environ, "PATH": path or os.environ["PATH"]}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    report = tmp_path / "report"
    command = [sys.executable, str(ROOT / "tools/gpu_check.py"), "--report", str(report), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    return done, report


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
def test_gpu_check_on_a_cpu_machine_says_so_runs_what_it_can_and_reports(tmp_path):
    lessons = tmp_path / "en"
    lessons.mkdir()
    counts = notebook("# A", "import d2l_gpu\nprint(d2l_gpu.num_gpus())")
    nbformat.write(counts, lessons / "01-a.ipynb")
    nbformat.write(notebook("# B", "raise ValueError('boom')"), lessons / "02-b.ipynb")
    tests = tmp_path / "test_gpu.py"
    tests.write_text("import pytest\n\n@pytest.mark.gpu\ndef test_gpu():\n    pytest.skip()\n")
    done, report = run_gpu_check(tmp_path, "--lessons", f"{lessons}/*.ipynb", "--tests", str(tests))
    assert "No GPU: torch sees none" in done.stdout
    assert done.returncode == 1, "a lesson that raises fails the run"
    run = json.loads((report / "run.json").read_text())
    assert {"date", "commit", "python", "torch", "cuda", "driver", "gpus"} <= set(run)
    outcomes = {s["step"]: s["outcome"] for s in run["steps"]}
    assert outcomes["info"] == outcomes["gpu-tests"] == outcomes["en/01-a"] == "passed"
    assert outcomes["torchrun-nccl"].startswith("skipped")
    assert outcomes["en/02-b"].startswith("failed") and "ValueError: boom" in outcomes["en/02-b"]
    ran = nbformat.read(report / "executed/en/01-a.ipynb", as_version=4)
    assert ran.cells[1].outputs[0].text == "0\n"
    assert (report / "executed/en/02-b.ipynb").is_file(), "a failed lesson is kept as it ran"


def fabricated(tmp_path: Path, gpus: list[str]) -> tuple[Path, Path]:
    """Current lessons en/zh 01-x, and a report where en passed and zh failed."""
    notebooks, report = tmp_path / "notebooks", tmp_path / "report"
    for language in ("en", "zh"):
        (notebooks / language).mkdir(parents=True)
        current = notebook("# # X: a lesson", "a = 1\n# a comment", "b = 2", "b = 2", "print(a)")
        nbformat.write(current, notebooks / language / "01-x.ipynb")
        ran = notebook("# # X: old title", "a = 1", "b = 2", "print(a + 1)", tags=["key-result"])
        ran.cells[-1].outputs = [nbformat.v4.new_output("stream", text="2 GB/s\n")]
        (report / "executed" / language).mkdir(parents=True)
        nbformat.write(ran, report / "executed" / language / "01-x.ipynb")
    steps = [{"step": "info", "outcome": "passed"}, {"step": "en/01-x", "outcome": "passed"}]
    steps += [{"step": "zh/01-x", "outcome": "failed: boom"}]
    facts = {"date": "2000-01-01", "commit": "abc", "python": "3.12", "torch": "2.x"}
    run = {**facts, "cuda": "13", "driver": "1.2", "gpus": gpus, "steps": steps}
    (report / "run.json").write_text(json.dumps(run))
    return notebooks, report


def test_publish_copies_passed_lessons_with_a_manifest_and_writes_one_page(tmp_path):
    notebooks, report = fabricated(tmp_path, ["Fake GPU 9000", "Fake GPU 9000"])
    folder = publish_gpu.publish(report, notebooks)
    assert folder == notebooks / "gpu" / "fake-gpu-9000"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["lessons"] == {"en/01-x": "en/01-x.ipynb"}, "only passed lessons"
    assert manifest["machine"] == "fake-gpu-9000" and manifest["driver"] == "1.2"
    assert set(manifest) == {"machine", "lessons", *publish_gpu.FACTS}
    published = nbformat.read(folder / "en/01-x.ipynb", as_version=4)
    assert published.metadata == {"kernelspec": KERNEL}
    assert published.cells[-1].outputs[0].text == "2 GB/s\n"
    assert not (folder / "zh").exists()

    page = publish_gpu.render(notebooks)
    assert "## 2 × Fake GPU 9000 (`fake-gpu-9000/`)" in page
    assert "Driver 1.2, torch 2.x (CUDA 13)" in page and "2000-01-01" in page
    # a = 1 (comments aside) and one b = 2 are as run; the second b = 2 and print(a) are not.
    row = "| 01 – X | [2 of 4](fake-gpu-9000/en/01-x.ipynb) | not run on this machine |"
    assert row in page
    assert "01 – X (en):" in page and "2 GB/s" in page


def test_publish_refuses_a_run_without_a_gpu(tmp_path):
    notebooks, report = fabricated(tmp_path, [])
    with pytest.raises(SystemExit, match="no GPU"):
        publish_gpu.publish(report, notebooks)
    assert not (notebooks / "gpu").exists()
