"""Publish what a GPU printed: python tools/publish_gpu.py [REPORT]

With a gpu-check report folder, the lessons that passed there are copied, their
metadata cleaned, into notebooks/gpu/<machine>/{en,zh}/ with manifest.json: the
machine's facts and, per lesson, its file. The folder is replaced all or nothing (the
new one is written beside it and swapped in at the end); a malformed run.json is refused
with one line per field, as is any name that would leave its folder. Then, with or
without a report, notebooks/gpu/README.md is generated from every machine's manifest:
the machine, and per lesson its key results (cells tagged key-result) and how many of
the current lesson's code cells are exactly what that machine ran. That page is the only
generated file; the lessons link to it with a static line.
"""

import html
import json
import re
import shutil
import string
import sys
import tempfile
from collections import Counter
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
FACTS = ["gpus", "driver", "torch", "cuda", "python", "date", "commit"]
KEY_TAG, KEY_LINES = "key-result", 12
LESSON = re.compile(r"[a-z]{2}/\d\d-[a-z0-9-]+")  # a lesson's step, as en/01-introduction
GPU_NAME = r"[A-Za-z0-9 ._()-]{1,100}", "a GPU name: letters, digits, spaces and -_.(), 1 to 100"
VERSION = r"\d[0-9A-Za-z.+]{0,39}", "a version: digits, dots, + and letters, at most 40"
SHAPES = {  # what gpu-check writes for each fact; null where it could not tell
    **dict.fromkeys(["driver", "torch", "cuda", "python"], VERSION),
    "date": (r"\d{4}-\d\d-\d\d", "an ISO date such as 2026-12-04"),
    "commit": (r"[0-9a-f]{4,64}", "a git commit in hex"),
}
NOTES = 20, 2000  # at most 20 notes of at most 2,000 printable characters
ENTITY = {c: html.escape(c) for c in "&<>\"'"}


def markdown_text(value: object) -> str:
    """`value` as Markdown (CommonMark, MyST) that a page shows as exactly that text, on one line.

    A report's facts and notes come from a machine the maintainer does not control. Every ASCII
    punctuation mark is markup somewhere (a tag, a link, a table's |, a MyST role such as
    {download}, a directive's fence) and CommonMark lets each be escaped with a backslash, so
    each is; & < > " ' become HTML entities, which read as the same text in Markdown and in
    HTML. Line breaks and runs of spaces become one space, so no line can start a block."""
    words = " ".join(str(value).split())
    return "".join(ENTITY.get(c) or "\\" * (c in string.punctuation) + c for c in words)


def shown(value: object) -> str:
    """A value quoted in an error line: cut at 60 characters, its length said when longer."""
    long = isinstance(value, str) and len(value) > 60
    return f"{value!r:.60}" + (f"... ({len(value)} characters)" if long else "")


def fact_problems(record: dict) -> list[str]:
    """Each fact of a run.json or manifest not of the shape gpu-check writes, one line each:
    facts reach a page, so none may hold more than a GPU name, a version, a date or a commit."""
    problems, gpus = [], record.get("gpus")
    if not isinstance(gpus, list):
        problems.append(f"gpus must be a list of GPU names, got {shown(gpus)}")
    for i, name in enumerate(gpus if isinstance(gpus, list) else []):
        if not (isinstance(name, str) and re.fullmatch(GPU_NAME[0], name)):
            problems.append(f"gpus[{i}] must be {GPU_NAME[1]} characters, got {shown(name)}")
        elif i == 0 and not slug(name):
            problems.append(f"gpus[0] {name!r} has no ASCII letter or digit to name a folder by")
    for field, (pattern, what) in SHAPES.items():
        value = record.get(field)
        if value is not None and not (isinstance(value, str) and re.fullmatch(pattern, value)):
            problems.append(f"{field} must be {what}, or null, got {shown(value)}")
    notes = record.get("notes", [])
    if (
        not isinstance(notes, list)
        or len(notes) > NOTES[0]
        or not all(isinstance(n, str) and n.isprintable() and len(n) <= NOTES[1] for n in notes)
    ):
        problems.append(
            f"notes must be a list of at most {NOTES[0]} lines of text, each at most"
            f" {NOTES[1]} characters, got {shown(notes)}"
        )
    return problems


def slug(name: str) -> str:
    """A machine's folder name: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def read_run(report: Path) -> dict:
    """run.json, checked: one line for each field that is missing or malformed."""
    where = report / "run.json"
    if not where.is_file():
        raise SystemExit(f"{report}: no run.json here; `make gpu-check` writes one")
    try:
        run = json.loads(where.read_text(encoding="utf-8"))
    except ValueError as error:  # not UTF-8, not JSON
        raise SystemExit(f"{where}: not JSON in UTF-8 ({error})") from None
    if not isinstance(run, dict):
        raise SystemExit(f"{where}: an object with gpus and steps expected, got {run!r:.60}")
    problems, steps = fact_problems(run), run.get("steps")
    if not isinstance(steps, list):
        problems.append(f"steps must be a list of {{step, outcome}} objects, got {steps!r:.60}")
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        name = step.get("step") if isinstance(step, dict) else None
        if not (isinstance(name, str) and isinstance(step.get("outcome"), str)):
            problems.append(f"steps[{i}] must hold a step and an outcome, got {step!r:.60}")
        elif "/" in name and not LESSON.fullmatch(name):  # it would leave executed/
            problems.append(f"steps[{i}] {name!r} is no lesson name (such as en/01-introduction)")
    if problems:
        raise SystemExit("\n".join(f"{where}: {problem}" for problem in problems))
    return run


def clean(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Only what a reader needs: the kernel, each cell's tags, the outputs as run."""
    notebook.metadata = {k: notebook.metadata[k] for k in ["kernelspec"] if k in notebook.metadata}
    for cell in notebook.cells:
        tags = cell.metadata.get("tags")
        cell.metadata = {"tags": tags} if tags else {}
    return notebook


def publish(report: Path, notebooks: Path = NOTEBOOKS) -> Path:
    """Copy a report's passed lessons into notebooks/gpu/<machine>/; return that folder."""
    run = read_run(report)
    if not run["gpus"]:
        raise SystemExit(f"{report}: this run had no GPU, so there is nothing to publish")
    executed = report / "executed"  # steps named like en/01-introduction are lessons
    passed = [s["step"] for s in run["steps"] if s["outcome"] == "passed"]
    lessons = {n: f"{n}.ipynb" for n in passed if LESSON.fullmatch(n)}
    lessons = {n: file for n, file in lessons.items() if (executed / file).is_file()}
    if not lessons:
        raise SystemExit(f"{report}: no lesson passed, so there is nothing to publish")
    machine = slug(run["gpus"][0])
    folder, gpu = notebooks / "gpu" / machine, notebooks / "gpu"
    gpu.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{machine}-", dir=gpu))  # beside; hidden from render
    try:
        for file in lessons.values():
            if (executed / file).is_symlink():
                raise ValueError(f"{executed / file} is a link, not a file gpu-check wrote")
            notebook = clean(nbformat.read(executed / file, as_version=4))
            (new / file).parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, new / file)
        facts = {k: run.get(k) for k in FACTS}
        manifest = {"machine": machine, **facts, "notes": run.get("notes", []), "lessons": lessons}
        text = json.dumps(manifest, indent=1, ensure_ascii=False)
        (new / "manifest.json").write_text(text + "\n", encoding="utf-8")
    except Exception as error:  # a lesson that is no notebook, a full disk, ...
        shutil.rmtree(new)
        why = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        raise SystemExit(f"{report}: nothing published, {folder} is as it was ({why})") from None
    old = new.with_name(f"{new.name}-old")
    if folder.exists():
        folder.rename(old)
    new.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def key_results(notebook: nbformat.NotebookNode) -> list[str]:
    """The text printed by cells tagged key-result, at most KEY_LINES lines a cell."""
    lines = []
    for cell in notebook.cells:
        if KEY_TAG in cell.metadata.get("tags", []):
            text = "".join(
                o.get("text", "") or o.get("data", {}).get("text/plain", "")
                for o in cell.get("outputs", [])
            )
            lines += text.strip().splitlines()[:KEY_LINES]
    return lines


def code_cells(notebook: nbformat.NotebookNode) -> list[str]:
    """Each code cell's code, without comment lines and blank lines (they print nothing)."""
    code = [c.source.splitlines() for c in notebook.cells if c.cell_type == "code"]
    return ["\n".join(s for s in lines if s.strip()[:1] not in ("", "#")) for lines in code]


def as_run(published: nbformat.NotebookNode, current: Path) -> tuple[int, int]:
    """(7, 9): 7 of the current lesson's 9 code cells are as that machine ran them."""
    lesson = code_cells(nbformat.read(current, as_version=4)) if current.is_file() else []
    ran, same = Counter(code_cells(published)), 0
    for source in lesson:  # each published cell vouches for one current cell at most
        if ran[source]:
            ran[source] -= 1
            same += 1
    return same, len(lesson)


def title(lesson: Path) -> str:
    """'04 – Asynchrony and transfers', from the lesson's first heading."""
    notebook = nbformat.read(lesson, as_version=4)
    heading = notebook.cells[0].source.splitlines()[0].lstrip("# ").split(":")[0]
    return f"{lesson.stem[:2]} – {heading}"


def read_manifest(path: Path) -> dict:
    """A machine's manifest.json, checked: its facts, and lessons inside its folder."""
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
        missing = [k for k in [*FACTS, "lessons"] if k not in m]
        inside = all(LESSON.fullmatch(n) and f == f"{n}.ipynb" for n, f in m["lessons"].items())
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        raise SystemExit(f"{path}: not a manifest ({type(error).__name__}: {error})") from None
    if missing or not inside or not isinstance(m["gpus"], list):
        raise SystemExit(f"{path}: needs {FACTS}, gpus a list, lessons as en/01-x: en/01-x.ipynb")
    return m


def machines(notebooks: Path = NOTEBOOKS) -> list[tuple[Path, dict]]:
    """Each published machine's folder and checked manifest (not one being written beside)."""
    found = sorted(notebooks.glob("gpu/[!.]*/manifest.json"))
    return [(manifest.parent, read_manifest(manifest)) for manifest in found]


def render(notebooks: Path = NOTEBOOKS) -> str:
    """notebooks/gpu/README.md, from each machine's manifest.json and the current lessons."""
    lines = [
        "# What a GPU printed for these lessons / 各课在 GPU 上打印的结果",
        "",
        "Each folder holds the lessons as `make gpu-check` executed them on one machine,",
        "published by `make gpu-publish` (`tools/publish_gpu.py`, which generates this page).",
        "They are records to read; the lessons to edit and run are in `../en/` and `../zh/`.",
        '"As run" counts the current lesson\'s code cells whose code (comments aside) is exactly',
        "what that machine ran, counted when this page was generated; the other cells' outputs",
        "there come from older code or are missing.",
        "",
        "每个目录是 `make gpu-check` 在一台机器上执行过的各课，只供阅读；"
        "“as run” 是当前课程中与那台机器运行时完全相同的代码单元格数。",
    ]
    current = sorted(notebooks.glob("en/[0-9]*.ipynb"))
    for folder, m in machines(notebooks):
        gpus = ", ".join(f"{n} × {name}" for name, n in Counter(m["gpus"]).items())
        lines += ["", f"## {gpus} (`{folder.name}/`)", ""]
        lines += [
            f"Driver {m['driver']}, torch {m['torch']} (CUDA {m['cuda']}), Python {m['python']};"
            f" run on {m['date']} at commit {m['commit'] or 'unknown'}.",
            *[f"\n{note}" for note in m.get("notes", [])],
            "",
            "| lesson | en: code cells as run | zh: code cells as run |",
            "| --- | --- | --- |",
        ]
        keys = []
        for lesson in current:
            heading = title(lesson)
            row = [heading]
            for language in ("en", "zh"):
                name = f"{language}/{lesson.stem}"
                if name not in m["lessons"]:
                    row.append("not run on this machine")
                    continue
                published = nbformat.read(folder / m["lessons"][name], as_version=4)
                same, total = as_run(published, notebooks / f"{name}.ipynb")
                row.append(f"[{same} of {total}]({folder.name}/{m['lessons'][name]})")
                if found := key_results(published):
                    keys += ["", f"{heading} ({language}):", "", "```", *found, "```"]
            lines.append("| " + " | ".join(row) + " |")
        if keys:
            lines += [
                "",
                "Key results (the cells tagged `key-result`, as this machine printed them):",
            ]
            lines += keys
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv and argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv:
        print(f"published {publish(Path(argv[0]))}")
    (NOTEBOOKS / "gpu" / "README.md").write_text(render(), encoding="utf-8")
    print("wrote notebooks/gpu/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
