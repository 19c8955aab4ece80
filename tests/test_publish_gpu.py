"""tools/publish_gpu.py: publishing a fabricated report, refusing a broken one, a report's
payloads kept as text (the 2026-12-06b review's section 2.3), the GPU page of today's lessons."""

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="publishing reads notebooks")
from markdown_it import MarkdownIt  # noqa: E402 (jupytext's, so the dev extra has it)
from mdit_py_plugins.myst_role import myst_role_plugin  # noqa: E402
from nbformat.v4 import new_markdown_cell, new_output  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import publish_gpu  # noqa: E402

from tests.test_tools import KERNEL, notebook  # noqa: E402 (a lesson as gpu-check ran it)

PAYLOADS = {  # what the review's section 2.3 planted in a report, and Chromium ran on the site
    "gpus": "NVIDIA H100 <script>document.title=1</script>",
    "driver": '550 <img src=x onerror="document.title=1">',
    "torch": "2.6 [TORCHLINK](javascript:alert(1))",
    "cuda": "12.4\n\n```{literalinclude} ../../../../etc/hostname\n```\n",
    "python": "3.12 [PYLINK](https://evil.example/phish)",
    "date": '2026-12-06 <a href="https://evil.example/date">DATELINK</a>',
    "commit": 'abc <iframe srcdoc="FRAMED"></iframe>',
    "notes": "580 {download}`notes <../../../../etc/hostname>`",  # a role needs no newline
}


def markup(text: str) -> list[str]:
    """What Markdown with MyST's roles makes of `text` beyond text and code: each tag, link,
    image, role and directive (a fence with a {name}), with its address or content."""
    tokens = MarkdownIt("commonmark").enable("table").use(myst_role_plugin).parse(text)
    found = [f"{t.type} {t.info}" for t in tokens if t.type == "html_block" or t.info.strip()]
    inline = [c for t in tokens for c in t.children or []]
    kinds = ("html_inline", "link_open", "image", "myst_role")
    return found + [f"{c.type} {c.attrs.get('href', c.content)}" for c in inline if c.type in kinds]


def fabricated(tmp_path: Path, gpus: list[str], notes: tuple = ("n",)) -> tuple[Path, Path]:
    """Today's lessons en/zh 01-x, and a report where en passed and zh failed."""
    notebooks, report = tmp_path / "notebooks", tmp_path / "report"
    for language in ("en", "zh"):
        (notebooks / language).mkdir(parents=True)
        current = notebook("# # X: a lesson", "a = 1\n# a comment", "b = 2", "b = 2", "print(a)")
        nbformat.write(current, notebooks / language / "01-x.ipynb")
        ran = notebook("# # X: a lesson", "a = 1", "b = 2", "print(a + 1)", tags=["key-result"])
        for cell, printed in zip(ran.cells[2:], ["2 GB/s\n", "3 GB/s\n"], strict=True):
            cell.outputs = [new_output("stream", text=printed)]
        (report / "executed" / language).mkdir(parents=True)
        nbformat.write(ran, report / "executed" / language / "01-x.ipynb")
    steps = [{"step": "info", "outcome": "passed"}, {"step": "en/01-x", "outcome": "passed"}]
    steps += [{"step": "zh/01-x", "outcome": "failed: boom"}]
    facts = {"date": "2000-01-01", "commit": "abc1234", "python": "3.12", "torch": "2.x"}
    run = {**facts, "cuda": "13", "driver": "1.2", "gpus": gpus, "steps": steps, "notes": [*notes]}
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
    assert published.cells[-1].outputs[0].text == "3 GB/s\n"
    assert not (folder / "zh").exists()

    page = publish_gpu.render(notebooks)
    assert "## 2 × Fake GPU 9000 (`fake-gpu-9000/`)" in page
    facts = r"Driver 1\.2, torch 2\.x (CUDA 13), Python 3\.12; run on 2000\-01\-01"
    assert f"{facts} at commit abc1234.\n\nn\n" in page, "a note says why a fact is missing"
    # a = 1 (comments aside) and one b = 2 are as run; the second b = 2 and print(a) are not.
    row = "| 01 – X | [2 of 4](fake-gpu-9000/en/01-x.ipynb), an older version ran | not run on"
    assert row in page
    # b = 2 printed a key result and is today's code; print(a + 1) is not, so its 3 GB/s is not.
    assert "01 – X (en):\n\n```\n2 GB/s\n```\n" in page and "3 GB/s" not in page
    assert "01 – X (en): key-result cells whose code has changed since, not quoted: 1." in page


def files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("run", "lines"),  # run.json (None: a valid one, and a lesson that is no notebook)
    [
        ("{not json", "not JSON in UTF-8"),
        ('{"gpus": [], "steps": []}', "this run had no GPU, so there is nothing to publish"),
        ("[]", r"an object with gpus and steps expected, got \[\]"),
        ('{"gpus": "H100", "steps": 5}', "gpus must be a list of GPU names|steps must be"),
        ('{"gpus": [5], "steps": [{"step": "en/01-x"}]}', r"gpus must|steps\[0\] must hold"),
        *[(f'{{"gpus": ["{n}"], "steps": []}}', "gpus must") for n in ("显卡", "../", " ", "..")],
        ('{"gpus": ["%s"], "steps": []}' % ("A" * 300), r"gpus must .* \(304 characters\)"),
        *[  # markup in a fact; notes are text of any printable characters, written escaped
            (json.dumps({"gpus": ["X"], "steps": [], k: [v] if k == "gpus" else v}), f"{k} must")
            for k, v in PAYLOADS.items()
            if k != "notes"
        ],
        (  # facts of any type and size (the review's Q2); null is "unknown" (a hung nvidia-smi)
            json.dumps(
                {"gpus": ["X"], "steps": [], "driver": {"v": [1]}, "torch": None, "cuda": 3.5}
                | {"python": ["3"], "date": "9" * 10**5, "commit": True, "notes": ["a\nb"]}
            ),
            "notes must|driver must|cuda must|python must|date must.*100002 characters|commit m",
        ),
        (
            '{"gpus": ["X"], "steps": [{"step": "../../en/01-x", "outcome": "passed"}]}',
            "is no lesson name",
        ),
        (None, "nothing published, .*fake-gpu-9000 is as it was \\(NotJSONError"),
    ],
)
def test_publish_refuses_a_broken_report_a_line_a_field_and_changes_nothing(tmp_path, run, lines):
    notebooks, report = fabricated(tmp_path, ["Fake GPU 9000"])
    publish_gpu.publish(report, notebooks)  # a machine published before
    before = files(notebooks)
    shutil.copytree(report / "executed/en", tmp_path / "en")  # where ../../en/01-x points
    if run is None:
        (report / "executed/en/01-x.ipynb").write_text("{not json")
    else:
        (report / "run.json").write_text(run)
    with pytest.raises(SystemExit) as refused:
        publish_gpu.publish(report, notebooks)
    said, lines = str(refused.value).splitlines(), lines.split("|")
    assert len(said) == len(lines) and all(map(re.search, lines, said)), said
    assert files(notebooks) == before


def test_a_report_is_data_on_the_page_and_in_the_records(tmp_path):
    notes = tuple(p for p in PAYLOADS.values() if "\n" not in p)
    notebooks, report = fabricated(tmp_path, ["Fake GPU 9000"], notes)
    ran = nbformat.read(notebooks / "en/01-x.ipynb", as_version=4)  # today's lesson, run
    everything = "\n\n".join(PAYLOADS.values())
    ran.cells[1:1] = [new_markdown_cell(everything), nbformat.v4.new_raw_cell("<script>")]
    alt = 'Bars <img src=x onerror="document.title=1">'  # a figure's alt text: docutils escapes it
    ran.cells[-1].metadata = {"tags": ["key-result"], "mystnb": {"image": {"alt": alt, "w": 1}}}
    ran.cells[-2].metadata = {"mystnb": {"image": {"alt": 5}}}  # not text: not kept
    ran.cells[-3].metadata = {"mystnb": 1}
    ran.cells[-1].outputs = [
        new_output("stream", text=f"1 GB/s\n````\n{everything}"),
        new_output("display_data", {"text/html": "<script>x</script>", "text/plain": "<b>"}),
        new_output("display_data", {"application/javascript": "document.title=1"}),
        new_output("display_data", {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}),
        new_output("display_data", {"image/png": '" onerror="document.title=1'}),
        new_output("error", ename="E", evalue="<script>", traceback=["<script>"]),
    ]
    nbformat.write(ran, report / "executed/en/01-x.ipynb")
    folder = publish_gpu.publish(report, notebooks)

    page = publish_gpu.render(notebooks)
    assert [m for m in markup(page) if not m.startswith("link_open fake-gpu-9000/")] == []
    shown = MarkdownIt("commonmark").enable("table").render(page)
    assert "{download}`notes &lt;../" in shown and "&lt;script&gt;document.title=1" in shown
    assert "| [4 of 4](fake-gpu-9000/en/01-x.ipynb) |" in page, "as run: no older version"
    assert "1 GB/s\n````\n" in page, "the key result, whole, in a fence longer than its backticks"
    record = nbformat.read(folder / "en/01-x.ipynb", as_version=4)
    assert [c.cell_type for c in record.cells] == ["markdown"] * 2 + ["code"] * 4, "no raw cell"
    assert all(markup(c.source) == [] for c in record.cells if c.cell_type == "markdown")
    kept = [(o.output_type, *o.get("data", {})) for o in record.cells[-1].outputs]
    png = ("display_data", "image/png", "text/plain")
    assert kept == [("stream",), ("display_data", "text/plain"), png]
    figure = {"tags": ["key-result"], "mystnb": {"image": {"alt": alt}}}  # a string alt alone
    assert [c.metadata for c in record.cells[-3:]] == [{}, {}, figure]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"gpus": []}, "gpus is empty"),
        ({"driver": PAYLOADS["driver"]}, "driver must be a version"),
        ({"lessons": {"en/01-x": "../../../Makefile"}}, "lessons must map"),
        ({"lessons": None}, r"not a manifest \(AttributeError"),
        (None, r"not a manifest \(JSONDecodeError"),
    ],
)
def test_the_page_refuses_a_broken_manifest_in_one_line_naming_it(tmp_path, change, said):
    notebooks, report = fabricated(tmp_path, ["Fake GPU 9000"])
    where = publish_gpu.publish(report, notebooks) / "manifest.json"
    manifest = json.loads(where.read_text())
    where.write_text(json.dumps(manifest | change) if change else "{")
    with pytest.raises(SystemExit) as refused:
        publish_gpu.render(notebooks)
    assert re.fullmatch(f"{re.escape(str(where))}: [^\n]*{said}[^\n]*", str(refused.value))


def test_the_gpu_page_is_the_one_render_writes_from_today_s_lessons():
    # A lesson whose code changed makes the page's "as run" counts stale until it is regenerated.
    page = (ROOT / "notebooks/gpu/README.md").read_text(encoding="utf-8")
    assert publish_gpu.render() == page, "stale: regenerate it with python tools/publish_gpu.py"
