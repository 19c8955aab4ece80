"""The GPU runs published in notebooks/gpu/ (.ci/publish_gpu_outputs.py, make gpu-publish).

Fails on real defects only: a manifest of the wrong shape, a published notebook missing
or not listed, a lesson the manifest names that does not exist, a published notebook
that names a machine folder or keeps what must not be kept, and a generated part
(README, index, the line under each lesson's badge) that differs from the rendering.
A lesson changed since its GPU run is stale: listed as a warning, never a failure.
Needs neither Jupyter nor a GPU; the checks that use Jupytext or the lab skip without.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.repository import LANGUAGES, NOTEBOOKS, ROOT, TOOL


def _load():
    spec = importlib.util.spec_from_file_location(
        "publish_gpu_outputs", ROOT / ".ci" / "publish_gpu_outputs.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


publish = _load()
GPU = NOTEBOOKS / "gpu"
MACHINES = sorted(p.parent for p in GPU.glob("*/manifest.json"))
PUBLISHED = sorted(GPU.glob("*/*/*.ipynb"))
H200 = GPU / "nvidia-h200"
H200_COMMIT = "d597512"
SHARED_RUN = ROOT.parent / "shared" / "gpu-runs" / "2026-12-04-h200"


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def _has_git_commit(commit: str) -> bool:
    try:
        return _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0
    except OSError:
        return False


# What is committed.


def test_the_h200_run_is_published():
    assert H200 in MACHINES, "notebooks/gpu/nvidia-h200/manifest.json is missing"


@pytest.mark.parametrize("folder", MACHINES, ids=_rel)
def test_manifest_holds_together(folder):
    problems = publish.manifest_problems(folder, ROOT)
    assert not problems, f"{_rel(folder)}: " + "; ".join(problems)


def test_h200_manifest_records_the_run():
    manifest = json.loads((H200 / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["machine"] == {"gpu": "NVIDIA H200", "gpus": 1, "memory": "139.8 GiB"}
    assert (manifest["date"], manifest["commit"]) == ("2026-12-04", H200_COMMIT)
    assert (manifest["driver"], manifest["torch"], manifest["cuda"], manifest["python"]) == (
        "580.159.04",
        "2.11.0+cu130",
        "13.0",
        "3.12.3",
    )
    lessons = manifest["lessons"]
    assert len(lessons) == 18
    for lang in LANGUAGES:
        crashed = lessons[f"{lang}/04-gpu-memory"]
        assert crashed["status"] == "pending" and crashed["why"] == publish.PENDING_WHY
        assert "Invalid device argument" in crashed["check"]
        assert not (H200 / lang / "04-gpu-memory.ipynb").exists()
    assert "--only notebooks" in lessons["zh/09-beyond-one-machine"]["run"]["how"]
    assert all(f["limit"] is None and f["fraction"] is None for f in manifest["figures"])
    assert any("limit" in note for note in manifest["figures_notes"])


@pytest.mark.skipif(not _has_git_commit(H200_COMMIT), reason=f"git does not know {H200_COMMIT}")
def test_h200_hashes_are_those_of_the_lessons_at_its_commit():
    manifest = json.loads((H200 / "manifest.json").read_text(encoding="utf-8"))
    for key, entry in manifest["lessons"].items():
        source = _git("show", f"{H200_COMMIT}:notebooks/{key}.py").stdout
        assert entry["sha256"] == hashlib.sha256(source.encode()).hexdigest(), key


def _output_texts(output: dict) -> list[str]:
    texts = ["\n".join(output.get("traceback", [])), output.get("text", "")]
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/") or kind.endswith("json"):
            texts.append(value)
    return ["".join(t) if isinstance(t, list) else t for t in texts if isinstance(t, (str, list))]


def _notebook_defects(path: Path) -> list[str]:
    """What tests/test_notebooks.py forbids in stored outputs, and what a record must not keep."""
    raw = path.read_bytes()
    notebook = json.loads(raw)
    problems = []
    if len(raw) > publish.MAX_NOTEBOOK_BYTES:
        problems.append(f"{len(raw)} bytes, more than {publish.MAX_NOTEBOOK_BYTES}")
    if notebook["metadata"].get("jupytext") != {"formats": "ipynb"}:
        problems.append("not marked unpaired (metadata.jupytext.formats = 'ipynb')")
    for i, cell in enumerate(notebook["cells"]):
        if set(cell.get("metadata", {})) - {"tags"}:
            problems.append(f"cell {i}: metadata {sorted(cell['metadata'])}")
        for output in cell.get("outputs", []):
            lines = publish._ANSI.sub("", "\n".join(output.get("traceback", []))).splitlines()
            if len(lines) > publish.MAX_TRACEBACK_LINES:
                problems.append(f"cell {i}: a traceback of {len(lines)} lines")
            for text in _output_texts(output):
                found = publish.MACHINE_FOLDER.search(publish._ANSI.sub("", text))
                if found:
                    problems.append(f"cell {i}: names a folder {found[0]!r}")
    return problems


@pytest.mark.parametrize("path", PUBLISHED, ids=_rel)
def test_published_notebook_is_a_clean_record(path):
    assert not _notebook_defects(path), f"{_rel(path)}: " + "; ".join(_notebook_defects(path))
    notebook = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    assert any(c.get("outputs") for c in code), "no outputs were kept"
    title = "".join(notebook["cells"][0]["source"]).splitlines()
    assert [line for line in title if publish.GPU_LINE.fullmatch(line)], "no line naming the run"
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", "".join(cell["source"])):
                if not re.match(r"[a-z]+:", target):
                    assert (path.parent / target).exists(), f"{_rel(path)}: {target} leads nowhere"


def test_the_lesson_tests_and_sync_do_not_reach_the_gpu_runs():
    """tests/test_notebooks.py takes notebooks/*/*.ipynb, .ci/sync_notebooks.py notebooks/*/*.py."""
    assert PUBLISHED and not set(PUBLISHED) & set(NOTEBOOKS.glob("*/*.ipynb"))
    assert not list(GPU.rglob("*.py")), "a .py in notebooks/gpu/ would be taken for a lesson"


def test_sync_moves_the_address_in_the_published_records_too():
    spec = importlib.util.spec_from_file_location("sync_notebooks", ROOT / ".ci/sync_notebooks.py")
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    path = H200 / "en" / "01-introduction.ipynb"
    text = path.read_text(encoding="utf-8")
    moved = sync.render(text, "someone/fork", "dev")
    cells = json.loads(moved)["cells"]
    assert "github/someone/fork/blob/dev/notebooks/en/01-introduction.ipynb" in "".join(
        cells[0]["source"]
    )
    assert 'git+https://github.com/someone/fork"' in "".join(cells[1]["source"])
    assert sync.render(moved, TOOL["repository"], TOOL["branch"]) == text
    assert sync.main(["--check"]) == 0, "run `python .ci/sync_notebooks.py`"


def test_make_notebooks_leaves_the_gpu_runs_out_and_gpu_publish_is_documented():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nnotebooks:", 1)[1].split("\n\n", 1)[0]
    assert "--ignore=notebooks/gpu" in recipe and "$(NBVAL)" in recipe
    assert ".ci/publish_gpu_outputs.py --report $(GPU_REPORT)" in makefile
    help_text = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert "make gpu-publish" in help_text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "## What a GPU shows" in readme and "`make gpu-publish`" in readme


def test_stale_lessons_are_listed_without_failing():
    lines = publish.stale_report(ROOT)
    if lines:
        warnings.warn(
            "GPU outputs older than their lessons (refresh with a GPU run and make gpu-publish): "
            + " | ".join(lines),
            stacklevel=1,
        )


def test_readme_and_index_equal_their_rendering():
    wrong, _ = publish.out_of_date(ROOT, lessons=False)
    assert not wrong, (
        f"{', '.join(_rel(p) for p in wrong)}: run `.venv/bin/python .ci/publish_gpu_outputs.py "
        "--render` (edit the manifests, not the generated text)"
    )


def test_every_lesson_links_to_its_gpu_versions():
    wrong, _ = publish.out_of_date(ROOT, lessons=True)
    lessons = [p for p in wrong if p.parent.parent == NOTEBOOKS]
    assert not lessons, (
        f"{len(lessons)} lesson files lack the line under their Colab badge that links to their "
        "GPU versions, or it is out of date: run `.venv/bin/python .ci/publish_gpu_outputs.py "
        "--render` (" + ", ".join(_rel(p) for p in lessons[:4]) + ")"
    )


@pytest.mark.parametrize(
    "text", ["/work/main/.venv/bin/python", "in /home/ada/x.py", "/tmp/abc", "/root/repo"]
)
def test_folders_are_found_and_replaced(text):
    assert publish.MACHINE_FOLDER.search(text)
    assert not publish.MACHINE_FOLDER.search(publish._clean_text(text))


def test_site_packages_folders_are_shortened():
    text = "/usr/lib/python3/dist-packages/torch/profiler/profiler.py:12: UserWarning: x"
    assert (
        publish._clean_text(text) == "<site-packages>/torch/profiler/profiler.py:12: UserWarning: x"
    )


# The line under the badge, and the hash that ignores it.


def test_the_gpu_line_changes_no_hash_and_replaces_itself():
    rendered = (NOTEBOOKS / "en" / "01-introduction.py").read_text(encoding="utf-8")
    text = publish.py_with_gpu_line(rendered, None)  # the lesson as if never published
    assert text != rendered and publish.source_hash(text) == publish.source_hash(rendered)
    once = publish.py_with_gpu_line(text, "As run on an X: [outputs](../gpu/x/en/01-a.ipynb).")
    twice = publish.py_with_gpu_line(once, "As run on a Y: pending (z).")
    assert once != text and publish.source_hash(once) == publish.source_hash(text)
    assert publish.py_with_gpu_line(twice, None) == text
    assert "# As run on a Y: pending (z)." in twice and "As run on an X" not in twice


@pytest.mark.parametrize(
    ("gpu", "gpus", "en", "zh", "slug"),
    [
        ("NVIDIA H200", 1, "an NVIDIA H200", "NVIDIA H200", "nvidia-h200"),
        ("Tesla T4", 1, "a Tesla T4", "Tesla T4", "tesla-t4"),
        (
            "NVIDIA H100 80GB HBM3",
            2,
            "2 × NVIDIA H100 80GB HBM3",
            "2 块 NVIDIA H100 80GB HBM3",
            None,
        ),
    ],
)
def test_machine_names(gpu, gpus, en, zh, slug):
    machine = {"gpu": gpu, "gpus": gpus}
    assert publish.machine_words(machine, "en") == en
    assert publish.machine_words(machine, "zh") == zh
    assert publish.slug_for(gpu, gpus) == (slug or "nvidia-h100-80gb-hbm3-x2")


# Publishing a report end to end, in a copy of the repository.


def _copy_tree(tmp_path: Path) -> Path:
    """The committed lessons, READMEs and GPU runs, as a repository without git."""
    if not _has_git_commit("HEAD"):
        pytest.skip("needs the repository's git history")
    root = tmp_path / "repo"
    root.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "HEAD", "README.md", "notebooks"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def _fake_report(root: Path, folder: Path, lessons: dict[str, str], **facts) -> Path:
    """A gpu-check report: run.json and the lessons as 'executed' (their stored outputs,
    plus what a published record must lose)."""
    executed = folder / "executed"
    for key, status in lessons.items():
        if status != "passed":
            continue
        notebook = json.loads((root / "notebooks" / f"{key}.ipynb").read_text(encoding="utf-8"))
        code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        code[-1]["metadata"]["execution"] = {"iopub.status.busy": "2026-12-05T10:00:00"}
        code[-1]["outputs"].append(
            {"name": "stdout", "output_type": "stream", "text": ["ran in /home/ada/d2l/x.py\n"]}
        )
        code[-1]["outputs"].append(
            {
                "output_type": "error",
                "ename": "E",
                "evalue": "x",
                "traceback": [f"\x1b[0;31mline {i}\x1b[0m" for i in range(60)],
            }
        )
        target = executed / f"{key}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(publish.notebook_text(notebook), encoding="utf-8")
    run = {
        "date": "2026-12-05",
        "commit": "abc1234",
        "python": "3.12.3",
        "torch": "2.13.0+cu130",
        "cuda": "13.0",
        "driver": "590.1",
        "gpu": "NVIDIA A100-SXM4-80GB",
        "gpus": 1,
        "checks": [{"name": "info", "status": "passed", "why": "", "seconds": 1.0}],
        "figures": [
            {
                "what": "bfloat16 matmul 8192x8192",
                "value": "250.0 TFLOP/s",
                "goal": "above float32",
                "verdict": "meets",
                "hard": False,
                "limit": "312 TFLOP/s (datasheet, dense)",
                "fraction": 0.8,
            }
        ],
        "lessons": {
            k: {"status": s, "why": "matches" if s == "passed" else "INCOMPLETE: boom"}
            for k, s in lessons.items()
        },
        **facts,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    (folder / "info.txt").write_text(
        "device       total        used  name\n"
        "cpu      125.8 GiB     2.7 GiB  CPU\n"
        "cuda:0    79.3 GiB     0.5 GiB  NVIDIA A100-SXM4-80GB\n",
        encoding="utf-8",
    )
    return folder


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _all_lessons(root: Path, failing: tuple[str, ...] = ()) -> dict[str, str]:
    return {
        k: "failed" if k.split("/")[1] in failing else "passed" for k in publish.lesson_keys(root)
    }


@pytest.fixture
def published(tmp_path, monkeypatch):
    root = _copy_tree(tmp_path)
    monkeypatch.setattr(publish, "ROOT", root)
    before = _snapshot(root)
    report = _fake_report(root, tmp_path / "report", _all_lessons(root, ("04-gpu-memory",)))
    assert publish.main(["--report", str(report)]) == 0
    return root, report, before


def test_a_report_is_published_and_rendered(published):
    root, _, before = published
    folder = root / "notebooks" / "gpu" / "nvidia-a100-sxm4-80gb"
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["machine"] == {"gpu": "NVIDIA A100-SXM4-80GB", "gpus": 1, "memory": "79.3 GiB"}
    assert (manifest["commit"], manifest["date"], manifest["how"]) == (
        "abc1234",
        "2026-12-05",
        "make gpu-check",
    )
    assert publish.manifest_problems(folder, root) == []
    for key, entry in manifest["lessons"].items():
        source = (root / "notebooks" / f"{key}.py").read_text(encoding="utf-8")
        assert entry["sha256"] == publish.source_hash(source), key
        assert (folder / f"{key}.ipynb").is_file() == (entry["status"] == "published")
    assert manifest["lessons"]["en/04-gpu-memory"]["status"] == "pending"
    assert manifest["lessons"]["zh/04-gpu-memory"]["check"] == "failed: INCOMPLETE: boom"
    for path in sorted(folder.rglob("*.ipynb")):
        assert not _notebook_defects(path), f"{path.name}: {_notebook_defects(path)}"
        assert "/home/ada" not in path.read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "### NVIDIA A100-SXM4-80GB" in readme and "### NVIDIA H200" in readme
    assert "| bfloat16 matmul 8192x8192 | 250.0 TFLOP/s | above float32 | meets | 312" in readme
    assert "| 80 % |" in readme
    index = (root / "notebooks" / "README.md").read_text(encoding="utf-8")
    assert "](gpu/nvidia-a100-sxm4-80gb/zh/01-introduction.ipynb)" in index
    line = "As run on an NVIDIA A100-SXM4-80GB: [outputs](../gpu/nvidia-a100-sxm4-80gb/en/"
    intro = (root / "notebooks" / "en" / "01-introduction.py").read_text(encoding="utf-8")
    assert line + "01-introduction.ipynb)" in intro
    memory = (root / "notebooks" / "zh" / "04-gpu-memory.py").read_text(encoding="utf-8")
    assert "在 NVIDIA A100-SXM4-80GB 上运行的结果：暂缺" in memory
    assert publish.out_of_date(root) == ([], [])
    changed = {k for k, v in _snapshot(root).items() if before.get(k) != v}
    lessons = {k for k in changed if re.fullmatch(r"notebooks/(en|zh)/\d\d-[a-z0-9-]+\.\w+", k)}
    assert lessons and all(k.endswith((".py", ".ipynb")) for k in lessons)
    assert changed - lessons - {"README.md", "notebooks/README.md"} == {
        k for k in changed if k.startswith("notebooks/gpu/nvidia-a100-sxm4-80gb/")
    }


def test_publishing_twice_changes_nothing(published):
    root, report, _ = published
    before = _snapshot(root)
    assert publish.main(["--report", str(report)]) == 0
    assert _snapshot(root) == before


def test_the_rendered_lessons_stay_pairs_and_twins(published):
    jupytext = pytest.importorskip("jupytext")
    from jupytext.config import load_jupytext_config

    from tests.test_notebooks import _glossary_problems, _prose_words

    root, _, _ = published
    config = load_jupytext_config(str(ROOT / "notebooks" / "en"))
    code = {}
    for key in publish.lesson_keys(root):
        py = root / "notebooks" / f"{key}.py"
        stored = json.loads(py.with_suffix(".ipynb").read_text(encoding="utf-8"))
        source = jupytext.read(py, config=config)
        cells = [(c.cell_type, c.source) for c in source.cells]
        assert cells == [(c["cell_type"], "".join(c["source"])) for c in stored["cells"]], key
        notebook = jupytext.reads(publish.notebook_text(stored), fmt="ipynb")
        assert jupytext.writes(notebook, fmt="py:percent", config=config) == py.read_text("utf-8")
        code[key] = [c.source for c in source.cells if c.cell_type == "code"]
        title = source.cells[0].source
        lines = [line for line in title.splitlines() if publish.GPU_LINE.fullmatch(line)]
        assert len(lines) == 1, key
        assert _prose_words(lines[0]) <= 40
        # test_links_point_at_this_repository: no link of the line looks like a lesson link.
        assert not re.findall(r"\]\((\d\d-[a-z0-9-]+\.ipynb)\)", lines[0])
        for url in re.findall(r"https://colab\.research\.google\.com/github/\S+?\.ipynb", title):
            assert f"github/{TOOL['repository']}/blob/{TOOL['branch']}/notebooks/" in url
        for target in re.findall(r"\]\(([^)]+)\)", lines[0]):
            assert (py.parent / target).is_file(), f"{key}: {target}"
        if key.startswith("zh/"):
            assert _glossary_problems([lines[0]]) == [], key
    for key in code:
        if key.startswith("en/"):
            assert code[key] == code["zh/" + key[3:]], f"{key}: en and zh code cells differ"


def test_a_rerun_of_one_lesson_keeps_the_rest(published, tmp_path):
    root, _, _ = published
    folder = root / "notebooks" / "gpu" / "nvidia-a100-sxm4-80gb"
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    report = _fake_report(
        root, tmp_path / "rerun", {"en/04-gpu-memory": "passed"}, date="2026-12-06", figures=[]
    )
    assert publish.main(["--report", str(report)]) == 0
    after = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert after["date"] == "2026-12-06" and after["figures"] == manifest["figures"]
    assert any("2026-12-05" in note for note in after["figures_notes"])
    assert after["lessons"]["en/04-gpu-memory"]["status"] == "published"
    assert after["lessons"]["zh/04-gpu-memory"]["status"] == "pending"
    kept = after["lessons"]["en/01-introduction"]
    assert kept["run"] == {"date": "2026-12-05"}
    assert {k: v for k, v in kept.items() if k != "run"} == manifest["lessons"][
        "en/01-introduction"
    ]
    # 03 led to the lesson 04 while 04 was pending; now to 04's copy beside it.
    three = (folder / "en" / "03-tensors-and-gpus.ipynb").read_text(encoding="utf-8")
    assert "](04-gpu-memory.ipynb)" in three and "../../../en/04-gpu-memory" not in three
    memory = (root / "notebooks" / "en" / "04-gpu-memory.py").read_text(encoding="utf-8")
    assert "[outputs](../gpu/nvidia-a100-sxm4-80gb/en/04-gpu-memory.ipynb)" in memory
    # It ran with its lesson's line under the badge; the copy has its banner instead.
    copy_ = json.loads((folder / "en" / "04-gpu-memory.ipynb").read_text(encoding="utf-8"))
    title = "".join(copy_["cells"][0]["source"]).splitlines()
    assert [line for line in title if publish.GPU_LINE.fullmatch(line)] == [
        publish.banner(after, "en/04-gpu-memory")
    ]


def test_a_changed_lesson_is_stale_and_its_line_says_so(published):
    root, _, _ = published
    lesson = root / "notebooks" / "en" / "02-computing-devices.py"
    lesson.write_text(lesson.read_text(encoding="utf-8") + "\n# %%\nprint(1)\n", encoding="utf-8")
    states = publish.staleness(
        json.loads(
            (root / "notebooks/gpu/nvidia-a100-sxm4-80gb/manifest.json").read_text(encoding="utf-8")
        ),
        root,
    )
    assert states["en/02-computing-devices"] == "stale"
    assert states["zh/02-computing-devices"] == "fresh"
    assert "nvidia-a100-sxm4-80gb: stale: en/02-computing-devices" in publish.stale_report(root)
    wrong, marks = publish.out_of_date(root)
    assert wrong == [] and lesson in marks  # a mark, not a failure
    publish.render(root)
    assert publish.STALE["en"] + "." in lesson.read_text(encoding="utf-8")
    assert "02-computing-devices.ipynb)" + publish.STALE["en"] in (root / "README.md").read_text(
        encoding="utf-8"
    )


def test_a_report_of_another_lesson_version_or_without_a_gpu_is_refused(tmp_path, capsys):
    root = _copy_tree(tmp_path)
    report = _fake_report(root, tmp_path / "r1", {"en/01-introduction": "passed"})
    executed = report / "executed" / "en" / "01-introduction.ipynb"
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    notebook["cells"][1]["source"] = ["print('another version')\n"]
    executed.write_text(publish.notebook_text(notebook), encoding="utf-8")
    with pytest.raises(publish.PublishError, match="neither the current one nor the one at"):
        publish.read_report(report, root)
    blind = _fake_report(root, tmp_path / "r2", {}, gpu=None, gpus=0)
    with pytest.raises(publish.PublishError, match="saw no GPU"):
        publish.read_report(blind, root)
    with pytest.raises(publish.PublishError, match="run.json"):
        publish.read_report(tmp_path / "nothing", root)


def test_the_manifest_check_names_each_defect(tmp_path):
    root = _copy_tree(tmp_path)
    folder = root / "notebooks" / "gpu" / "nvidia-h200"
    assert publish.manifest_problems(folder, root) == []
    path = folder / "manifest.json"
    good = json.loads(path.read_text(encoding="utf-8"))

    def problems_with(change) -> list[str]:
        manifest = copy.deepcopy(good)
        change(manifest)
        path.write_text(json.dumps(manifest), encoding="utf-8")
        return publish.manifest_problems(folder, root)

    assert "date: expected str" in " ".join(problems_with(lambda m: m.pop("date")))
    assert "not YYYY-MM-DD" in " ".join(problems_with(lambda m: m.update(date="4 Dec")))
    gone = problems_with(
        lambda m: m["lessons"].update({"en/99-gone": m["lessons"]["en/07-summary"]})
    )
    assert any("en/99-gone: a hash of a lesson that does not exist" in p for p in gone)
    bad_hash = problems_with(lambda m: m["lessons"]["en/07-summary"].update(sha256="abc"))
    assert any("is not a sha256" in p for p in bad_hash)
    unlisted = problems_with(lambda m: m["lessons"].pop("en/07-summary"))
    assert any("en/07-summary.ipynb: not listed as published" in p for p in unlisted)
    path.write_text(json.dumps(good), encoding="utf-8")
    (folder / "zh" / "07-summary.ipynb").unlink()
    assert any(
        "zh/07-summary: published, but" in p for p in publish.manifest_problems(folder, root)
    )


def test_a_renamed_lesson_is_rekeyed(tmp_path, monkeypatch):
    root = _copy_tree(tmp_path)
    monkeypatch.setattr(publish, "ROOT", root)
    for suffix in (".py", ".ipynb"):
        old = root / "notebooks" / "en" / f"07-summary{suffix}"
        old.rename(old.with_name(f"07-rules{suffix}"))
    folder = root / "notebooks" / "gpu" / "nvidia-h200"
    assert any("en/07-summary" in p for p in publish.manifest_problems(folder, root))
    assert publish.main(["--rename", "en/07-summary=en/07-rules", "--skip-lessons"]) == 0
    assert (folder / "en" / "07-rules.ipynb").is_file()
    assert publish.manifest_problems(folder, root) == []


# The H200 run, imported again from shared/, gives what is committed.


@pytest.mark.skipif(not SHARED_RUN.is_dir(), reason=f"{SHARED_RUN} is not on this machine")
@pytest.mark.skipif(not _has_git_commit(H200_COMMIT), reason=f"git does not know {H200_COMMIT}")
def test_the_h200_import_gives_the_committed_folder(tmp_path):
    root = _copy_tree(tmp_path)
    shutil.rmtree(root / "notebooks" / "gpu" / "nvidia-h200")
    run = publish.import_shared_run(SHARED_RUN, H200_COMMIT, root=root, git_root=ROOT)
    folder = publish.write_machine(run, root)
    assert _snapshot(folder) == _snapshot(H200)


# The lab lists the GPU runs (jupyter-config/), and saving one writes no .py.


def test_the_lab_lists_the_gpu_runs_and_each_lesson_once(tmp_path):
    pytest.importorskip("jupyter_server")
    pytest.importorskip("jupytext")
    import asyncio
    import runpy

    from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class
    from traitlets.config import Config

    config = Config()
    runpy.run_path(
        str(ROOT / "jupyter-config" / "jupyter_server_config.py"),
        init_globals={"get_config": lambda: config},
    )
    # What jupyterlab_jupytext's server extension does with the configured class.
    manager_class = build_async_jupytext_contents_manager_class(
        config.ServerApp.contents_manager_class
    )
    served = tmp_path / "served"
    lesson = NOTEBOOKS / "en" / "07-summary"
    (served / "en").mkdir(parents=True)
    for suffix in (".py", ".ipynb"):
        shutil.copy(lesson.with_suffix(suffix), served / "en")
    (served / "gpu" / "m" / "en").mkdir(parents=True)
    shutil.copy(H200 / "en" / "07-summary.ipynb", served / "gpu" / "m" / "en")
    shutil.copy(lesson.with_suffix(".ipynb"), served / "en" / "mine.ipynb")
    manager = manager_class(root_dir=str(served), config=config)

    async def listed(path: str) -> list[str]:
        return sorted(entry["name"] for entry in (await manager.get(path))["content"])

    async def save_the_record() -> None:
        model = await manager.get("gpu/m/en/07-summary.ipynb")
        await manager.save(model, "gpu/m/en/07-summary.ipynb")

    assert asyncio.run(listed("en")) == ["07-summary.py", "mine.ipynb"]
    assert asyncio.run(listed("gpu/m/en")) == ["07-summary.ipynb"]
    asyncio.run(save_the_record())
    saved = [p.name for p in (served / "gpu" / "m" / "en").iterdir() if p.is_file()]
    assert saved == ["07-summary.ipynb"], "saving the record paired it with a new .py"
