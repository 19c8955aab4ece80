"""site/build.py on a tiny copy of notebooks/ (one lesson, one GPU record, per language): a
report's facts and a notebook's HTML and scripts never become markup; a bad input is one line
and keeps the last good site; a rebuild reuses Sphinx's work; a second build waits."""

import fcntl
import json
import shutil
import sys
from concurrent import futures
from pathlib import Path

import pytest

# A bare GPU box has no Jupyter: gpu-check's `pytest -m gpu tests` collects this file there.
nbformat = pytest.importorskip("nbformat", reason="the site build reads notebooks")
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site"))
import build  # noqa: E402 (site/build.py)

BADGE = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://x)"
PNG = "iVBORw0KGgo="  # a PNG's signature: a page shows it; no one looks
SCRIPTS = {"text/html": "<script>HTMLRAN=1</script>", "application/javascript": "JSRAN=1"}
SECRET, LANGS = "SECRET-FROM-OUTSIDE-4711", ("en", "zh")
MANIFEST = {"machine": "m", "gpus": ["NVIDIA H100"], "python": "3", "date": "2026-12-04"}
MANIFEST |= {"driver": "1", "torch": "1", "cuda": "1", "commit": "abc1234", "lessons": {}}
PAYLOADS = {  # the review's section 2.3, as facts of a manifest that no check held to a shape
    "gpus": ["NVIDIA <script>GPURAN=1</script> _em_"],
    "driver": '550 <img src=x onerror="DRIVERRAN=1">',
    "date": '<a href="https://evil.example/date">DATELINK</a>',
    "commit": '<iframe srcdoc="FRAMED"></iframe> {download}`x <SECRETPATH>`',
    "cuda": "12.4\n```{literalinclude} SECRETPATH\n```",
    "torch": "2.6 [TORCHLINK](https://evil.example/torch)",
}


def lesson(lang: str, words: str, record: bool = False) -> nbformat.NotebookNode:
    figure = new_output("display_data", {"image/png": PNG, "text/plain": "<Figure>", **SCRIPTS})
    return new_notebook(
        metadata={
            "executed": {"device": "CPU", "torch": "2.6", "date": "2026-12-06"},
            "language_info": {"name": "python"},
        },
        cells=[
            new_markdown_cell(f"# Intro\n\n{BADGE}\n\nGPU: [notebooks/gpu](../gpu/README.md)."),
            new_code_cell('if "google.colab" in sys.modules: pass', outputs=[]),
            new_code_cell(
                "old()" if record else "plot()",
                metadata={"mystnb": {"image": {"alt": "ALT-" + lang}}},
                outputs=[] if record else [figure],
            ),
            new_markdown_cell(f"{words} [`../README.md`](../README.md)"),
            new_code_cell("show()", outputs=[new_output("display_data", SCRIPTS)] * record),
        ],
    )


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory) -> Path:
    nb = tmp_path_factory.mktemp("site") / "notebooks"
    rows = "| # | en | zh |\n| - | - | - |\n| 01 | [A](en/01-a.ipynb) | [甲](zh/01-a.ipynb) |"
    files = {
        "README.md": f"# Lessons / 课程\n\nIntro.\n\n中文简介。\n\n## Path / 主线\n\n{rows}\n",
        "gpu/README.md": "# GPUs\n\nSee the records.\n",
        "zh/README.md": "# 术语表\n\n| en | 中文 | 说明 |\n| - | - | - |\n| pin | 锁页内存 | 是 |",
        "gpu/m/manifest.json": json.dumps(
            MANIFEST | {"lessons": {f"{x}/01-a": f"{x}/01-a.ipynb" for x in LANGS}}
        ),
        "../SECRETPATH": SECRET,
    }
    for lang in LANGS:
        files[f"{lang}/01-a.ipynb"] = nbformat.writes(lesson(lang, "lessonword"))
        files[f"gpu/m/{lang}/01-a.ipynb"] = nbformat.writes(lesson(lang, "recordword", True))
    for path, text in files.items():
        (nb / path).parent.mkdir(parents=True, exist_ok=True)
        (nb / path).write_text(text, encoding="utf-8")
    return nb


def unchecked(notebooks: Path) -> list:
    """The record with the review's payloads, as machines() would give it if it checked none."""
    manifest = json.loads((notebooks / "gpu/m/manifest.json").read_text())
    return [(notebooks / "gpu" / "m", {**manifest, **PAYLOADS})]


@pytest.fixture(scope="module")
def built(notebooks: Path) -> Path:
    pytest.importorskip("sphinx", reason="the site extra: pip install -e '.[site]'")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "machines", unchecked)
        assert build.main([str(notebooks)], notebooks.parent / "build") == 0
    return notebooks.parent / "build"


def test_facts_and_outputs_never_become_markup(built: Path):
    pages = "".join(p.read_text("utf-8") for p in built.glob("site/**/*.html"))
    tags = ["<script>GPURAN", "<img src=x", "<iframe", "<em>em", 'href="https://evil.example']
    for markup in [*tags, "HTMLRAN", "JSRAN", "application/javascript", SECRET]:
        assert markup not in pages
    assert "&lt;script&gt;GPURAN=1&lt;/script&gt;" in pages  # shown, as text
    assert not list(built.glob("site/**/SECRETPATH*")) and "{literalinclude}" in pages


def test_lesson_page(built: Path):
    page, zh = ((built / "site" / lang / "01-a.html").read_text("utf-8") for lang in LANGS)
    assert "An older version of this lesson ran on NVIDIA" in page
    record = (built / "site/en/gpu/m/en/01-a.html").read_text("utf-8")
    assert "2 of today’s 3 code cells are the code it ran" in record
    assert 'class="btn btn-outline-primary btn-sm reference download internal"' in page
    assert "tag_hide-input" in page and 'alt="ALT-en"' in page and "notebooks/gpu" not in page
    assert ">the index</span></a>" in page and ">目录</span></a>" in zh  # not ../README.md
    for lang, book in {"en": "https://d2l.ai/chapter_", "zh": "https://zh.d2l.ai/chapter_"}.items():
        assert book in (built / "site" / lang / "index.html").read_text("utf-8")
    index = (built / "site" / "en" / "searchindex.js").read_text("utf-8")
    assert "lessonword" in index and "recordword" not in index  # the record is left out
    for unused in ["jupyter_execute", "_sources", "*.map", ".buildinfo", "*.mo"]:
        assert not list((built / "site").rglob(unused))


def test_a_rebuild_redoes_only_what_changed(built: Path, notebooks: Path, monkeypatch):
    pages = {p: p.stat().st_mtime_ns for p in built.glob("site-src/pages/**/01-a.html")}
    monkeypatch.setattr(build, "machines", unchecked)
    assert build.main([str(notebooks)], built) == 0  # nothing changed: Sphinx writes no page
    assert {p: p.stat().st_mtime_ns for p in pages} == pages
    (notebooks / "gpu" / "README.md").write_text("# GPUs\n\nChanged.\n", encoding="utf-8")
    (built / "site-src/pages/en/_images/gone.png").write_bytes(b"")  # a figure since replaced
    assert build.main([str(notebooks)], built) == 0
    assert "Changed." in (built / "site/en/gpu/README.html").read_text("utf-8")
    lesson = built / "site-src/pages/en/01-a.html"
    assert lesson.stat().st_mtime_ns == pages[lesson] and not list(built.glob(".site-*"))
    assert len(list((built / "site/en/_images").iterdir())) == 1  # the lesson's figure alone


@pytest.mark.parametrize("stop, rc", [(KeyboardInterrupt, 130), (None, 1)])
def test_stopped_build_keeps_the_site(built, notebooks, monkeypatch, capsys, stop, rc):
    def sphinx(argv: list) -> int:  # Ctrl-C; or a failure, as Sphinx reports its own Ctrl-C
        if stop:
            raise stop
        return 2

    monkeypatch.setattr("sphinx.cmd.build.build_main", sphinx)
    old = (built / "site").stat().st_ino
    assert build.main([str(notebooks)], built) == rc and (built / "site").stat().st_ino == old
    assert f"{built / 'site'} is as it was" in capsys.readouterr().out
    assert (built / "site-src" / "unfinished").exists()  # so the next build starts afresh


NO_DEVICE = new_notebook(cells=[new_markdown_cell("# B")], metadata={"executed": {"torch": "2"}})
NO_DEVICE = nbformat.writes(NO_DEVICE)
NO_CELLS = nbformat.writes(new_notebook(metadata=lesson("en", "").metadata))  # made as it should
BAD = [  # a file planted in the copy (None: removed), and the words of its one line
    ("en/01-a.ipynb", '{"cells": [', "01-a.ipynb: not a notebook (NotJSONError"),
    ("zh/01-a.ipynb", "{}", "01-a.ipynb: not a notebook"),
    ("en/02-b.ipynb", NO_CELLS, "02-b.ipynb: no cells"),
    ("zh/02-b.ipynb", NO_DEVICE, "02-b.ipynb: metadata.executed lacks date, device"),
    ("gpu/n/manifest.json", '{"gpus": []}', "n/manifest.json: no driver"),
    ("gpu/m/en/01-a.ipynb", None, "01-a.ipynb: not a notebook (FileNotFoundError"),
    ("gpu/README.md", None, "gpu/README.md: missing"),
]


def planted(notebooks: Path, to: Path, name: str, content: str | None) -> Path:
    shutil.copytree(notebooks, to)
    if content is None:
        (to / name).unlink()
    else:
        (to / name).parent.mkdir(parents=True, exist_ok=True)
        (to / name).write_text(content, encoding="utf-8")
    return to


@pytest.mark.parametrize("name, content, said", BAD)
def test_bad_input_is_one_line_and_keeps_the_site(notebooks, tmp_path, name, content, said):
    (tmp_path / "build" / "site").mkdir(parents=True)
    with pytest.raises(SystemExit) as stop:
        build.main([str(planted(notebooks, tmp_path / "nb", name, content))], tmp_path / "build")
    assert said in str(stop.value) and "\n" not in str(stop.value)
    assert (tmp_path / "build" / "site").is_dir()


def test_headings_links_and_arguments(notebooks: Path, tmp_path: Path):
    readme = tmp_path / "README.md"  # a heading in one language; a paragraph that starts with #
    readme.write_text("# Lessons\n\n#word and more\n\n## Extra\n\n简介。", encoding="utf-8")
    assert "## Extra" in build.index(readme, "zh") and "#word and more" in build.index(readme, "en")
    with pytest.raises(SystemExit, match=r"\[g\]\(\.\./\.\./gpu/\) leads nowhere on the site"):
        build.relink("see [g](../../gpu/)", "en", readme)
    with pytest.raises(SystemExit, match="one folder of notebooks expected, got 2 arguments"):
        build.main([str(notebooks), "b"], tmp_path)  # make site SITE_NOTEBOOKS="a b" gives one
    with pytest.raises(SystemExit, match="a b: no such folder; SITE_NOTEBOOKS names a copy"):
        build.main(["a b"], tmp_path)


def test_a_second_build_waits_for_the_first(notebooks: Path, tmp_path: Path, capsys):
    # A thread waits as a second process would: a flock belongs to an open file.
    into, bad = tmp_path / "build", planted(notebooks, tmp_path / "nb", "README.md", None)
    into.mkdir()
    with futures.ThreadPoolExecutor() as pool, open(into / "site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        second = pool.submit(build.main, [str(bad)], into)
        with pytest.raises(futures.TimeoutError):
            second.result(timeout=0.5)  # it waits
        fcntl.flock(lock, fcntl.LOCK_UN)
        with pytest.raises(SystemExit, match="README.md: missing"):
            second.result(timeout=60)
    assert "another build of the site is running" in capsys.readouterr().out
