"""tools/publish_gpu.py: publishing a fabricated report, refusing a broken one, and the GPU page
of the current lessons."""

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="publishing reads notebooks")
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import publish_gpu  # noqa: E402

KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def notebook(*cells, tags=None) -> nbformat.NotebookNode:
    """Markdown for sources starting with '#', code for the rest."""
    made = [new_markdown_cell(c) if c.startswith("#") else new_code_cell(c) for c in cells]
    for cell in made:
        cell.metadata = {"tags": tags} if tags and cell.cell_type == "code" else {}
    return new_notebook(cells=made, metadata={"kernelspec": KERNEL, "other": 1})


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
    facts = {"date": "2000-01-01", "commit": "abc1234", "python": "3.12", "torch": "2.x"}
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
    assert set(manifest) == {"machine", "lessons", "notes", *publish_gpu.FACTS}
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


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("run", "lines"),  # run.json (None: a valid one, and a lesson that is no notebook)
    [
        ("{not json", "not JSON in UTF-8"),
        ("[]", r"an object with gpus and steps expected, got \[\]"),
        ('{"gpus": "H100", "steps": 5}', "gpus must be a list of GPU names|steps must be"),
        ('{"gpus": [5], "steps": [{"step": "en/01-x"}]}', r"gpus\[0\] must|steps\[0\] must hold"),
        *[
            (f'{{"gpus": ["{n}"], "steps": []}}', "gpus.0. must be a GPU name")
            for n in ("显卡", "../")
        ],
        *[(f'{{"gpus": ["{n}"], "steps": []}}', f"{n}' has no ASCII letter") for n in (" ", "..")],
        (
            '{"gpus": ["X"], "steps": [{"step": "../../en/01-x", "outcome": "passed"}]}',
            "is no lesson name",
        ),
        (None, "nothing published, .*fake-gpu-9000 is as it was \\(NotJSONError"),
    ],
)
def test_publish_refuses_a_broken_report_in_one_line_a_field_and_changes_nothing(
    tmp_path, run, lines
):
    notebooks, report = fabricated(tmp_path, ["Fake GPU 9000"])
    publish_gpu.publish(report, notebooks)  # a machine published before
    before = _files(notebooks)
    shutil.copytree(report / "executed/en", tmp_path / "en")  # where ../../en/01-x points
    if run is None:
        (report / "executed/en/01-x.ipynb").write_text("{not json")
    else:
        (report / "run.json").write_text(run)
    with pytest.raises(SystemExit) as refused:
        publish_gpu.publish(report, notebooks)
    said, lines = str(refused.value).splitlines(), lines.split("|")
    assert len(said) == len(lines) and all(map(re.search, lines, said)), said
    assert _files(notebooks) == before


def test_the_gpu_page_counts_what_each_machine_ran_of_the_current_lessons():
    # A lesson whose code changed makes the page's "as run" counts stale until it is regenerated.
    page = (ROOT / "notebooks/gpu/README.md").read_text(encoding="utf-8")
    assert publish_gpu.render() == page, "stale: regenerate it with python tools/publish_gpu.py"
