"""Publish what a GPU printed: python tools/publish_gpu.py [REPORT]

A report comes from a machine the maintainer does not control: it is untrusted input. Its
facts are held to the shapes gpu-check writes; the lessons that passed are copied into
notebooks/gpu/<machine>/{en,zh}/ keeping only what a lesson prints (clean()), with
manifest.json, all or nothing. Then notebooks/gpu/README.md, the only generated file, is
written from every manifest, facts escaped as text (markdown_text()): per lesson, how many of
today's code cells that machine ran, and key results whose code is still today's.
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
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
FACTS = ["gpus", "driver", "torch", "cuda", "python", "date", "commit"]
KEY_TAG, KEY_LINES = "key-result", 12
LESSON = re.compile(r"[a-z]{2}/\d\d-[a-z0-9-]+")  # a lesson's step, as en/01-introduction
NAME = (  # a GPU name: it becomes a folder's name too
    r"(?=.*[A-Za-z0-9])[A-Za-z0-9 ._()-]{1,100}",
    "a list of GPU names: 1 to 100 letters, digits, spaces or -_.() each, a letter or digit",
)
VERSION = r"\d[0-9A-Za-z.+]{0,39}", "a version: digits, dots, + and letters, at most 40, or null"
SHAPES = {  # what gpu-check writes: gpus and notes are lists, the rest one value or null
    "gpus": NAME,
    "notes": (r"[^\x00-\x1f\x7f]{1,2000}", "a list of one-line texts of 1 to 2000 characters"),
    **dict.fromkeys(["driver", "torch", "cuda", "python"], VERSION),
    "date": (r"\d{4}-\d\d-\d\d", "an ISO date such as 2026-12-04, or null"),
    "commit": (r"[0-9a-f]{4,64}", "a git commit in hex, or null"),
}
ENTITY = {c: html.escape(c) for c in "&<>\"'"}
PRINTED = {"text/plain": r"(?s).*", "image/png": r"[A-Za-z0-9+/=\s]*"}  # what clean() keeps


def markdown_text(value: object) -> str:
    """`value` as Markdown (CommonMark, MyST) that a page shows as exactly that text, on one line.

    A report's facts and notes come from a machine the maintainer does not control. Every ASCII
    punctuation mark is markup somewhere (a tag, a link, a table's |, a MyST role such as
    {download}, a directive's fence) and CommonMark lets each be escaped with a backslash, so
    each is; & < > " ' become HTML entities, which read as the same text in Markdown and in
    HTML. Line breaks and runs of spaces become one space, so no line can start a block."""
    words = " ".join(str(value).split())
    return "".join(ENTITY.get(c) or "\\" * (c in string.punctuation) + c for c in words)


def fact_problems(record: dict) -> list[str]:
    """Each fact of a run.json or manifest not of the shape gpu-check writes, one line each:
    facts reach a page, so none may hold more than a GPU name, a version, a date or a commit."""
    problems = []
    for field, (pattern, what) in SHAPES.items():
        value = record.get(field, [] if field == "notes" else None)
        if field in ("gpus", "notes"):
            each = value if isinstance(value, list) else [None]
            fits = all(isinstance(v, str) and re.fullmatch(pattern, v) for v in each)
        else:
            fits = value is None or isinstance(value, str) and re.fullmatch(pattern, value)
        if not fits:  # quoted up to 60 characters, and its length said when longer
            said = repr(value)
            said = said if len(said) <= 60 else f"{said[:60]}... ({len(said)} characters)"
            problems.append(f"{field} must be {what}, got {said}")
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


def read(path: Path) -> NotebookNode:
    """A notebook, or one line naming the file that is none."""
    try:
        return nbformat.read(path, as_version=4)
    except Exception as error:  # missing, not JSON, not a notebook
        raise SystemExit(f"{path}: not a notebook ({type(error).__name__})") from None


def printed(output: NotebookNode) -> bool:
    """Whether an output is what a lesson prints; of a rich one only text/plain and image/png
    are kept. HTML, JavaScript, errors and any other type would run or render on a page."""
    if output.output_type == "stream":
        return output.get("name") in ("stdout", "stderr") and isinstance(output.get("text"), str)
    rich = output.output_type in ("execute_result", "display_data")
    data = output.get("data", {}).items() if rich else []
    output.data = {k: v for k, v in data if re.fullmatch(PRINTED.get(k, "(?!)"), str(v))}
    output.metadata = {}
    return bool(output.data)


def clean(notebook: NotebookNode, lesson: Path) -> NotebookNode:
    """What a reader needs and nothing that runs on a page: the kernel, each cell's tags and
    figure alt text (docutils escapes it), the outputs a lesson prints; markdown that is not
    today's `lesson`'s own is plain text (heading marks kept); raw cells, which pass HTML, go."""
    own = today(lesson, "markdown")
    notebook.metadata = {k: notebook.metadata[k] for k in ["kernelspec"] if k in notebook.metadata}
    notebook.cells = [c for c in notebook.cells if c.cell_type in ("code", "markdown")]
    for cell in notebook.cells:
        alt = cell.metadata.get("mystnb")  # as the lessons write it: mystnb.image.alt
        for key in ("image", "alt"):
            alt = alt.get(key) if isinstance(alt, dict) else None
        tags = cell.metadata.get("tags")
        cell.metadata = {"tags": tags} if tags else {}
        if isinstance(alt, str):
            cell.metadata["mystnb"] = {"image": {"alt": alt}}
        cell.pop("attachments", None)
        if cell.cell_type == "code":
            cell.outputs = [output for output in cell.outputs if printed(output)]
        elif cell.source not in own:
            lines = [(re.match(r"(#{1,6} )?", line)[0], line) for line in cell.source.splitlines()]
            cell.source = "\n".join(mark + markdown_text(line[len(mark) :]) for mark, line in lines)
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
    folder = notebooks / "gpu" / slug(run["gpus"][0])
    folder.parent.mkdir(parents=True, exist_ok=True)  # new: beside it, hidden from render
    new = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        for file in lessons.values():
            if (executed / file).is_symlink():
                raise ValueError(f"{executed / file} is a link, not a file gpu-check wrote")
            notebook = clean(nbformat.read(executed / file, as_version=4), notebooks / file)
            (new / file).parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, new / file)
        facts = {"machine": folder.name, **{k: run.get(k) for k in FACTS}}
        manifest = {**facts, "notes": run.get("notes", []), "lessons": lessons}
        text = json.dumps(manifest, indent=1, ensure_ascii=False)
        (new / "manifest.json").write_text(text + "\n", encoding="utf-8")
    except (Exception, SystemExit) as error:  # a lesson that is no notebook, a full disk, ...
        shutil.rmtree(new)
        why = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        raise SystemExit(f"{report}: nothing published, {folder} is as it was ({why})") from None
    old = new.with_name(f"{new.name}-old")
    if folder.exists():
        folder.rename(old)
    new.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def code(cell: NotebookNode) -> str:
    """A cell's code without comment lines and blank lines (they print nothing)."""
    return "\n".join(s for s in cell.source.splitlines() if s.strip()[:1] not in ("", "#"))


def code_cells(notebook: NotebookNode) -> list[str]:
    """Each code cell's code, comments aside."""
    return [code(c) for c in notebook.cells if c.cell_type == "code"]


def today(lesson: Path, kind: str) -> list[str]:
    """Today's lesson's markdown cells, or its code cells' code (comments aside); [] if gone."""
    cells = [c for c in read(lesson).cells if c.cell_type == kind] if lesson.is_file() else []
    return [code(c) if kind == "code" else c.source for c in cells]


def key_results(published: NotebookNode, current: Path) -> tuple[list[str], int]:
    """The text printed by cells tagged key-result whose code (comments aside) is in today's
    lesson, at most KEY_LINES lines a cell; and how many ran code that has changed since."""
    keyed = [c for c in published.cells if KEY_TAG in c.metadata.get("tags", [])]
    lines, lesson = [], today(current, "code")
    same = [c for c in keyed if code(c) in lesson]
    for outputs in (cell.get("outputs", []) for cell in same):
        texts = [o.get("text") or o.get("data", {}).get("text/plain", "") for o in outputs]
        lines += "".join(texts).strip().splitlines()[:KEY_LINES]
    return lines, len(keyed) - len(same)


def as_run(published: NotebookNode, current: Path) -> tuple[int, int]:
    """(7, 9): 7 of the current lesson's 9 code cells are as that machine ran them."""
    lesson = today(current, "code")
    ran, same = Counter(code_cells(published)), 0
    for source in lesson:  # each published cell vouches for one current cell at most
        if ran[source]:
            ran[source] -= 1
            same += 1
    return same, len(lesson)


def title(lesson: Path) -> str:
    """'04 – Asynchrony and transfers', from the lesson's first heading."""
    heading = read(lesson).cells[0].source.splitlines()[0].lstrip("# ").split(":")[0]
    return f"{lesson.stem[:2]} – {heading}"


def read_manifest(path: Path) -> dict:
    """A machine's manifest.json, checked as run.json is, with a GPU and lessons inside its
    folder; or one line naming the file and what is wrong."""
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
        problems = [f"no {k}" for k in [*FACTS, "lessons"] if k not in m] + fact_problems(m)
        lessons = m.get("lessons", {}).items()
        inside = all(LESSON.fullmatch(n) and f == f"{n}.ipynb" for n, f in lessons)
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as error:
        raise SystemExit(f"{path}: not a manifest ({type(error).__name__}: {error})") from None
    problems += ["gpus is empty, and a record is what a GPU ran"] * (m.get("gpus") == [])
    problems += ["lessons must map each en/01-x to en/01-x.ipynb"] * (not inside)
    if problems:
        raise SystemExit(f"{path}: " + "; ".join(problems))
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
        "published by `make gpu-publish` (`tools/publish_gpu.py`, which generates this page):",
        'records to read; the lessons to edit and run are in `../en/` and `../zh/`. "As run"',
        "counts today's code cells whose code (comments aside) is what that machine ran. Where a",
        "lesson has changed since, an older version ran: the other cells' outputs come from older",
        "code or are missing, and a key result is quoted only where its cell's code is today's.",
        "",
        "每个目录是 `make gpu-check` 在一台机器上执行过的各课，只供阅读；"
        "“as run” 是当前课程中与那台机器运行时完全相同的代码单元格数。"
        "课程此后改过的，那台机器运行的是旧版本；关键结果只引用代码至今未变的单元格。",
    ]
    current = sorted(notebooks.glob("en/[0-9]*.ipynb"))
    for folder, m in machines(notebooks):
        gpus = ", ".join(f"{n} × {markdown_text(g)}" for g, n in Counter(m["gpus"]).items())
        lines += ["", f"## {gpus} (`{folder.name}/`)", ""]
        fact = {k: markdown_text(m[k] or "unknown") for k in FACTS}
        lines += [
            f"Driver {fact['driver']}, torch {fact['torch']} (CUDA {fact['cuda']}), Python"
            f" {fact['python']}; run on {fact['date']} at commit {fact['commit']}.",
            *[f"\n{markdown_text(note)}" for note in m.get("notes", [])],
            "",
            "| lesson | en: code cells as run | zh: code cells as run |",
            "| --- | --- | --- |",
        ]
        keys = []
        for lesson in current:
            heading = markdown_text(title(lesson))
            row = [heading]
            for language in ("en", "zh"):
                name = f"{language}/{lesson.stem}"
                if name not in m["lessons"]:
                    row.append("not run on this machine")
                    continue
                published = read(folder / m["lessons"][name])
                same, total = as_run(published, notebooks / f"{name}.ipynb")
                older = same < total or same < len(code_cells(published))
                link = f"[{same} of {total}]({folder.name}/{m['lessons'][name]})"
                row.append(link + ", an older version ran" * older)
                found, changed = key_results(published, notebooks / f"{name}.ipynb")
                ticks = [len(run) + 1 for run in re.findall("`+", "\n".join(found))]
                fence = "`" * max([3, *ticks])  # longer than any in the text: no line closes it
                keys += ["", f"{heading} ({language}):", "", fence, *found, fence] * bool(found)
                said = f"key-result cells whose code has changed since, not quoted: {changed}"
                keys += [f"\n{heading} ({language}): {said}."] * bool(changed)
            lines.append("| " + " | ".join(row) + " |")
        said = "Key results (cells tagged `key-result` whose code is today's, as printed there):"
        lines += ["", said, *keys] if keys else []
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
