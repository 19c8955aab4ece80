"""Publish what a GPU printed: the lessons as `make gpu-check` ran them, one folder per machine.

    python .ci/publish_gpu_outputs.py [--report build/gpu-check]   (make gpu-publish)
    python .ci/publish_gpu_outputs.py --from-shared-run DIR --commit SHA
    python .ci/publish_gpu_outputs.py --render [--skip-lessons]
    python .ci/publish_gpu_outputs.py --check
    python .ci/publish_gpu_outputs.py --rename en/05-old=en/05-new [...]

Publishing reads a report folder (its run.json and executed/{en,zh}/*.ipynb) and
writes notebooks/gpu/<machine>/{en,zh}/NN-name.ipynb and manifest.json: the machine,
driver, torch, CUDA, Python, date, the commit the run used, the checks and figures,
and per lesson its status, key results and the sha256 of the lesson source that
ran. A lesson that failed there is not published: it is "pending". A lesson the
report did not run keeps what the folder had for it (so a rerun of one lesson
refreshes that lesson alone). --from-shared-run imports a run made before gpu-check
wrote run.json (the H200 run of 2026-12-04).

Every mode then renders the generated parts from the manifests: "## What a GPU
shows" in README.md, the GPU section of notebooks/README.md, and one line under the
Colab badge of every lesson (.py and .ipynb alike) linking to its GPU versions.
--check renders nothing and exits 1 when a generated part differs from what would
be rendered; marks of staleness (a lesson changed since its GPU run) are reported,
not counted. The script needs only the standard library (and git for --commit).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import posixpath
import re
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGUAGES = ("en", "zh")
SCHEMA = 1
LESSON_KEY = re.compile(r"(en|zh)/\d\d-[a-z0-9-]+")
STATUSES = ("published", "pending")
PENDING_WHY = "needs a GPU run of the fixed lesson"
KEY_TAG = "key-result"
KEY_LINES = 6  # as gpu_check's summary: a key result is a few lines
MAX_NOTEBOOK_BYTES = 300_000
MAX_TRACEBACK_LINES = 40  # tests/test_notebooks.py's rule for stored outputs
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}

# What tests/test_notebooks.py calls a machine folder, and where packages live.
MACHINE_FOLDER = re.compile(r"(?<![\w.])(?:/work/|/home/|/tmp/|/root/|/Users/|[A-Z]:\\Users\\)")
_FOLDER_PATH = re.compile(MACHINE_FOLDER.pattern + r"[^\s'\"]*")
_PACKAGES = re.compile(r"(?<![\w.<])/[^\s'\"()<>]*?/(?:site|dist)-packages/")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# The line under a lesson's Colab badge, and the one under a published copy's.
GPU_LINE = re.compile(r"(?:As run on .*|在 .* 上运行的结果：.*)")
# The mark of a lesson changed since its GPU run (short: a lesson's prose is counted).
STALE = {"en": " (earlier version)", "zh": "（较早版本）"}
BEGIN = "<!-- gpu-outputs: rendered by .ci/publish_gpu_outputs.py from the manifests -->"
END = "<!-- /gpu-outputs -->"


class PublishError(Exception):
    """A report or manifest this script cannot publish from, with what to do."""


# Lessons, their sources and hashes.


def lesson_keys(root: Path) -> list[str]:
    return sorted(
        f"{p.parent.name}/{p.stem}"
        for lang in LANGUAGES
        for p in (root / "notebooks" / lang).glob("*.py")
    )


def with_gpu_line(markdown: str, line: str | None) -> str:
    """A title cell's markdown with its GPU line replaced by ``line`` (None: removed)."""
    lines: list[str] = []
    for text in markdown.split("\n"):
        if GPU_LINE.fullmatch(text):
            if lines and lines[-1] == "":
                lines.pop()
            continue
        lines.append(text)
    if line:
        badge = next((i for i, t in enumerate(lines) if t.startswith("[![Open In Colab]")), 0)
        lines[badge + 1 : badge + 1] = ["", line]
    return "\n".join(lines)


def _split_title(py_text: str) -> tuple[str, str, str] | None:
    """(header, title cell markdown, rest) of a py:percent lesson, or None."""
    header = "# %% [markdown]\n"
    if not py_text.startswith(header):
        return None
    end = py_text.find("\n\n# %%", len(header))
    end = len(py_text) if end < 0 else end
    body = py_text[len(header) : end]
    markdown = "\n".join(
        line[2:] if line.startswith("# ") else line[1:] for line in body.split("\n")
    )
    return header, markdown, py_text[end:]


def _comment(markdown: str) -> str:
    return "\n".join(f"# {line}" if line else "#" for line in markdown.split("\n"))


def py_with_gpu_line(py_text: str, line: str | None) -> str:
    parts = _split_title(py_text)
    if parts is None:
        return py_text
    header, markdown, rest = parts
    return header + _comment(with_gpu_line(markdown, line)) + rest


def source_hash(py_text: str) -> str:
    """sha256 of a lesson's .py, its GPU line left out (rendering it changes no hash)."""
    return hashlib.sha256(py_with_gpu_line(py_text, None).encode("utf-8")).hexdigest()


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _cells_signature(notebook: dict) -> list[tuple[str, str]]:
    cells = notebook.get("cells", [])
    return [
        (c["cell_type"], with_gpu_line(_source(c), None) if i == 0 else _source(c))
        for i, c in enumerate(cells)
    ]


def _git_show(root: Path, commit: str, path: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "show", f"{commit}:{path}"],
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=False,
        )
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def notebook_text(notebook: dict) -> str:
    """As nbformat and Jupytext write an .ipynb, byte for byte."""
    return json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


# Published copies.


def _article(gpu: str) -> str:
    first = gpu.split()[0] if gpu.split() else gpu
    initialism = first.isupper() and first[:1] in "AEFHILMNORSX"
    return "an" if initialism or first[:1].upper() in "AEIOU" else "a"


def machine_words(machine: dict, lang: str) -> str:
    """'an NVIDIA H200', '2 × NVIDIA H100'; zh: 'NVIDIA H200', '2 块 NVIDIA H100'."""
    gpu, count = machine["gpu"], machine["gpus"]
    if lang == "zh":
        return gpu if count == 1 else f"{count} 块 {gpu}"
    return f"{_article(gpu)} {gpu}" if count == 1 else f"{count} × {gpu}"


def _line_prefix(machine: dict, lang: str) -> str:
    words = machine_words(machine, lang)
    return f"As run on {words}" if lang == "en" else f"在 {words} 上运行的结果"


def slug_for(gpu: str, gpus: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    return slug if gpus == 1 else f"{slug}-x{gpus}"


def _clean_text(text: str) -> str:
    return _FOLDER_PATH.sub("<folder>", _PACKAGES.sub("<site-packages>/", text))


def _clean_value(value):
    if isinstance(value, list):
        return [_clean_text(v) if isinstance(v, str) else v for v in value]
    return _clean_text(value) if isinstance(value, str) else value


def _clean_output(output: dict) -> dict:
    output = copy.deepcopy(output)
    if "text" in output:
        output["text"] = _clean_value(output["text"])
    for kind in list(output.get("data", {})):
        if kind.startswith("text/") or kind.endswith("json"):
            output["data"][kind] = _clean_value(output["data"][kind])
    if "traceback" in output:
        lines = _ANSI.sub("", "\n".join(output["traceback"])).splitlines()
        if len(lines) > MAX_TRACEBACK_LINES:
            cut = len(lines) - 35
            lines = lines[:4] + [f"... {cut} lines left out ..."] + lines[-31:]
        output["traceback"] = [_clean_text(line) for line in lines]
    return output


def _relink(markdown: str, lang: str, slug: str, published: set[str]) -> str:
    """Links to lessons lead to their published copies where there are some, else to the
    lessons themselves; the GPU line (with its link to the lesson) is left as it is."""
    here = f"notebooks/gpu/{slug}/{lang}"

    def target(match: re.Match) -> str:
        link = match.group(1)
        if re.match(r"[a-z]+:|#|/", link):
            return match.group(0)
        path, _, anchor = link.partition("#")
        anchor = f"#{anchor}" if anchor else ""
        lesson = re.fullmatch(r"(?:\.\./\.\./\.\./(en|zh)/)?(\d\d-[a-z0-9-]+)\.ipynb", path)
        if (
            lesson
            and (lesson.group(1) or lang) == lang
            and f"{lang}/{lesson.group(2)}" in published
        ):
            return f"]({lesson.group(2)}.ipynb{anchor})"
        if lesson and lesson.group(1):
            return match.group(0)
        moved = posixpath.relpath(posixpath.normpath(f"notebooks/{lang}/{path}"), here)
        return f"]({moved}{anchor})"

    return "\n".join(
        line if GPU_LINE.fullmatch(line) else re.sub(r"\]\(([^)\s]+)\)", target, line)
        for line in markdown.split("\n")
    )


def _set_source(cell: dict, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)  # as nbformat writes it


def banner(manifest: dict, key: str) -> str:
    """The line a published copy carries under its Colab badge."""
    lang, name = key.split("/")
    facts = {**manifest, **manifest["lessons"][key].get("run", {})}
    lesson = f"[{key}](../../../{lang}/{name}.ipynb)"
    prefix = _line_prefix(manifest["machine"], lang)
    if lang == "zh":
        commit = f"提交 `{facts['commit']}`" if facts.get("commit") else "提交未知"
        return (
            f"{prefix}：{facts['date']}，torch {facts['torch']}，{commit}；下面的输出都是那台机器"
            f"打印的。这一课本身：{lesson}。"
        )
    commit = f"commit `{facts['commit']}`" if facts.get("commit") else "commit unknown"
    return (
        f"{prefix}: {facts['date']}, torch {facts['torch']}, {commit}; every output below is "
        f"what that machine printed. The lesson itself: {lesson}."
    )


def published_copy(
    executed: dict, manifest: dict, key: str, slug: str, published: set[str]
) -> dict:
    """The executed notebook as published: outputs and figures kept; no machine folder,
    no long traceback, no execution metadata, a banner, and not paired by Jupytext."""
    lang = key.split("/")[0]
    notebook = copy.deepcopy(executed)
    info = dict(notebook.get("metadata", {}).get("language_info", {"name": "python"}))
    info["version"] = manifest["python"]
    notebook["metadata"] = {
        "jupytext": {"formats": "ipynb"},  # a record: saving it in the lab writes no .py
        "kernelspec": notebook.get("metadata", {}).get("kernelspec", KERNELSPEC),
        "language_info": info,
    }
    for i, cell in enumerate(notebook["cells"]):
        tags = cell.get("metadata", {}).get("tags")
        cell["metadata"] = {"tags": tags} if tags else {}
        if cell["cell_type"] == "markdown":
            text = _relink(_source(cell), lang, slug, published)
            if i == 0:
                text = with_gpu_line(text, banner(manifest, key))
            _set_source(cell, text)
        if cell["cell_type"] == "code":
            cell["outputs"] = [_clean_output(o) for o in cell.get("outputs", [])]
    size = len(notebook_text(notebook).encode("utf-8"))
    if size > MAX_NOTEBOOK_BYTES:
        raise PublishError(f"{key}: {size} bytes as published, more than {MAX_NOTEBOOK_BYTES}")
    return notebook


def key_results(notebook: dict) -> list[str]:
    """The output lines of the cells tagged key-result, as gpu_check's summary lists them."""
    found = []
    for cell in notebook.get("cells", []):
        if KEY_TAG not in cell.get("metadata", {}).get("tags", []):
            continue
        lines = []
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain") or ""
            text = "".join(text) if isinstance(text, list) else text
            lines += [line.rstrip() for line in text.splitlines() if line.strip()]
        if not lines:
            lines = ["(no output: the cell did not run)"]
        if len(lines) > KEY_LINES:
            lines = lines[:KEY_LINES] + [f"... {len(lines) - KEY_LINES} more lines"]
        found += lines
    return found


# A run to publish, read from a gpu-check report or from the H200 run in shared/.


@dataclass
class Run:
    machine: dict  # gpu, gpus, memory
    facts: dict  # date, commit, python, torch, cuda, driver, how
    checks: list[dict]
    figures: list[dict]
    notes: list[str] = field(default_factory=list)
    figures_notes: list[str] = field(default_factory=list)
    # key -> {"status": "passed"|"failed", "why": str, "notebook": dict|None, "sha256": str,
    #         "run": {...}}: "run" holds what differs from ``facts`` for that lesson.
    lessons: dict[str, dict] = field(default_factory=dict)


def _hash_for(root: Path, key: str, executed: dict | None, commit: str | None) -> str:
    """The hash of the lesson source the report ran: the current one, or the one at
    ``commit``; the executed notebook must match one of them."""
    current_py = root / "notebooks" / f"{key}.py"
    candidates = []
    if current_py.is_file():
        stored = root / "notebooks" / f"{key}.ipynb"
        candidates.append(
            (
                current_py.read_text(encoding="utf-8"),
                _read_json(stored) if stored.is_file() else None,
            )
        )
    if commit:
        py = _git_show(root, commit, f"notebooks/{key}.py")
        ipynb = _git_show(root, commit, f"notebooks/{key}.ipynb")
        if py is not None:
            candidates.append((py, json.loads(ipynb) if ipynb else None))
    if not candidates:
        raise PublishError(f"{key}: no such lesson in notebooks/ (nor at commit {commit})")
    if executed is None:
        return source_hash(candidates[0][0])
    for py, stored in candidates:
        if stored is not None and _cells_signature(stored) == _cells_signature(executed):
            return source_hash(py)
    raise PublishError(
        f"{key}: the report ran a version of this lesson that is neither the current one nor the "
        f"one at commit {commit}; publish from the tree the run used"
    )


def _memory_from_info(text: str, gpu: str | None) -> str | None:
    for line in text.splitlines():
        match = re.match(
            r"(?:cuda|mps|xpu|hip):?\d*\s+(\d[\d.]* [KMGT]iB)\s+\S+ [KMGT]iB\s+(.*)$", line
        )
        if match and (gpu is None or match.group(2).strip() == gpu):
            return match.group(1)
    return None


def read_report(report: Path, root: Path = ROOT) -> Run:
    """A `make gpu-check` report folder: run.json and executed/{en,zh}/*.ipynb."""
    path = report / "run.json"
    if not path.is_file():
        raise PublishError(f"{path}: not found; run `make gpu-check` first (it writes run.json)")
    data = _read_json(path)
    missing = [k for k in ("date", "python", "torch", "gpu", "gpus", "lessons") if k not in data]
    if missing:
        raise PublishError(f"{path}: lacks {', '.join(missing)}")
    if not data["gpu"] or not data["gpus"]:
        raise PublishError(f"{path}: the run saw no GPU; there is nothing to publish")
    info = report / "info.txt"
    memory = data.get("memory") or (
        _memory_from_info(info.read_text(encoding="utf-8"), data["gpu"]) if info.is_file() else None
    )
    facts = {k: data.get(k) for k in ("date", "commit", "python", "torch", "cuda", "driver")}
    facts["how"] = "make gpu-check"
    run = Run(
        machine={"gpu": data["gpu"], "gpus": int(data["gpus"]), "memory": memory},
        facts=facts,
        checks=[dict(c) for c in data.get("checks", [])],
        figures=[dict(f) for f in data.get("figures", [])],
    )
    for key, outcome in sorted(data["lessons"].items()):
        if not LESSON_KEY.fullmatch(key):
            raise PublishError(f"{path}: {key!r} is not a lesson (en/NN-name or zh/NN-name)")
        executed = report / "executed" / f"{key}.ipynb"
        notebook = _read_json(executed) if executed.is_file() else None
        passed = outcome.get("status") == "passed" and notebook is not None
        if outcome.get("status") == "passed" and notebook is None:
            outcome = {"status": "failed", "why": f"passed, but {executed} is missing"}
        run.lessons[key] = {
            "status": "passed" if passed else "failed",
            "why": outcome.get("why", ""),
            "notebook": notebook if passed else None,
            "sha256": _hash_for(root, key, notebook if passed else None, facts["commit"]),
        }
    return run


_SUMMARY_LINE = re.compile(r"(passed|failed|skipped) +(.+?)(?: \(([\d.]+) s\))?(?:: (.*))?")


def _summary_checks(text: str) -> list[dict]:
    checks = []
    for line in text.splitlines():
        match = _SUMMARY_LINE.fullmatch(line.rstrip())
        if match:
            status, name, seconds, why = match.groups()
            checks.append(
                {
                    "name": name,
                    "status": status,
                    "why": (why or "").strip(),
                    "seconds": float(seconds) if seconds else None,
                }
            )
    return checks


def import_shared_run(folder: Path, commit: str, root: Path = ROOT, git_root: Path = ROOT) -> Run:
    """The H200 run of 2026-12-04 (before run.json): summary.txt, summary-zh-09.txt, logs/."""
    summary = (folder / "summary.txt").read_text(encoding="utf-8")
    logs = folder / "logs"
    machine_txt = (logs / "machine.txt").read_text(encoding="utf-8")
    info = (logs / "info.txt").read_text(encoding="utf-8")
    header = re.search(r"torch (\S+), (\d+) cuda device\(s\), Python (\S+)", summary)
    if not header:
        raise PublishError(f"{folder}/summary.txt: no 'gpu-check summary' header")
    torch, gpus, python = header.group(1), int(header.group(2)), header.group(3).rstrip(";")
    gpu_rows = re.findall(r"^cuda:\d+\s+(\S+ [KMGT]iB)\s+\S+ [KMGT]iB\s+(.+)$", info, re.M)
    date = re.search(r"^\w{3} (\w{3}) +(\d+) [\d:]+ [AP]M \w+ (\d{4})$", machine_txt, re.M)
    cuda = re.search(r"^\S+\+\S+ (\d+\.\d+) True$", machine_txt, re.M)
    driver = re.search(r"Driver Version: (\S+)", machine_txt)
    facts = {
        "date": datetime.strptime(" ".join(date.groups()), "%b %d %Y").strftime("%Y-%m-%d"),
        "commit": commit,
        "python": python,
        "torch": torch,
        "cuda": cuda.group(1) if cuda else None,
        "driver": driver.group(1) if driver else None,
        "how": "make gpu-check PYTHON=python3 GPU_BUDGET=330",
    }
    figures_log = (logs / "figures.log").read_text(encoding="utf-8")
    figures = json.loads(next(x for x in figures_log.splitlines() if x.startswith("[")))
    checks = _summary_checks(summary)
    second_how = "python3 .ci/gpu_check.py --only notebooks --notebooks 'notebooks/zh/09*.py'"
    second = {
        c["name"]: c for c in _summary_checks((folder / "summary-zh-09.txt").read_text("utf-8"))
    }
    checks = [
        {**second[c["name"]], "why": f"{second[c['name']]['why']} (second command)"}
        if c["name"] in second and c["name"].startswith("lesson ")
        else c
        for c in checks
    ]
    run = Run(
        machine={"gpu": gpu_rows[0][1].strip(), "gpus": gpus, "memory": gpu_rows[0][0]},
        facts=facts,
        checks=checks,
        figures=[{**f, "limit": None, "fraction": None} for f in figures],
        notes=[
            "The budget was cut to 330 s to fit a short slot, so zh/09-beyond-one-machine "
            f"ran afterwards in a second command on the same machine: `{second_how}`.",
        ],
        figures_notes=[
            "This run printed no limits: the limit and fraction columns came later, with "
            "gpu-check's datasheet and bandwidth limits.",
            "The bfloat16 row reads low: on the same machine, ten products timed with CUDA "
            "events after three warm-ups gave 800 TFLOP/s (a probe outside gpu-check, in the "
            "run's notes).",
        ],
    )
    statuses = {c["name"][len("lesson ") :]: c for c in checks if c["name"].startswith("lesson ")}
    for path in sorted((folder / "executed").glob("*/*.ipynb")):
        key = f"{path.parent.name}/{path.stem}"
        check = statuses.get(key)
        passed = check is not None and check["status"] == "passed"
        notebook = _read_json(path)
        stored = _git_show(git_root, commit, f"notebooks/{key}.ipynb")
        if stored is None or _cells_signature(json.loads(stored)) != _cells_signature(notebook):
            raise PublishError(f"{path}: not the lesson as it was at commit {commit}")
        run.lessons[key] = {
            "status": "passed" if passed else "failed",
            "why": check["why"] if check else "not in the summary",
            "notebook": notebook if passed else None,
            "sha256": source_hash(_git_show(git_root, commit, f"notebooks/{key}.py") or ""),
        }
        if f"lesson {key}" in second:
            run.lessons[key]["run"] = {"how": second_how}
    return run


# The machine folder and its manifest.


def machine_folder(root: Path, slug: str) -> Path:
    return root / "notebooks" / "gpu" / slug


def write_machine(run: Run, root: Path = ROOT) -> Path:
    """Write notebooks/gpu/<slug>/ from ``run``, keeping what it has for lessons the run
    did not cover."""
    slug = slug_for(run.machine["gpu"], run.machine["gpus"])
    folder = machine_folder(root, slug)
    old_path = folder / "manifest.json"
    old = _read_json(old_path) if old_path.is_file() else None
    manifest = {
        "schema": SCHEMA,
        "machine": run.machine,
        **run.facts,
        "notes": run.notes,
        "checks": run.checks,
        "figures": run.figures,
        "figures_notes": run.figures_notes,
        "lessons": {},
    }
    notebooks: dict[str, dict] = {}
    for key, lesson in run.lessons.items():
        entry = {"status": "published" if lesson["status"] == "passed" else "pending"}
        entry["sha256"] = lesson["sha256"]
        entry["check"] = f"{lesson['status']}: {lesson['why']}".rstrip(": ")
        if entry["status"] == "pending":
            entry["why"] = PENDING_WHY
        if lesson.get("run"):
            entry["run"] = lesson["run"]
        manifest["lessons"][key] = entry
        if lesson["notebook"] is not None:
            notebooks[key] = lesson["notebook"]
    kept = {}
    if old is not None:
        old_facts = {k: old.get(k) for k in run.facts}
        for key, entry in old.get("lessons", {}).items():
            if key in manifest["lessons"]:
                continue
            entry = copy.deepcopy(entry)
            facts = {**old_facts, **entry.get("run", {})}
            differ = {k: v for k, v in facts.items() if manifest.get(k) != v}
            entry.pop("run", None)
            if differ:
                entry["run"] = differ
            manifest["lessons"][key] = entry
            if entry["status"] == "published":
                kept[key] = _read_json(folder / f"{key}.ipynb")
        if not run.figures and old.get("figures"):
            manifest["figures"] = old["figures"]
            note = (
                f"Measured in the run of {old['date']} (commit {old.get('commit')}); "
                "later runs measured none."
            )
            manifest["figures_notes"] = [*old.get("figures_notes", []), note]
            manifest["figures_notes"] = list(dict.fromkeys(manifest["figures_notes"]))
    manifest["lessons"] = dict(sorted(manifest["lessons"].items()))
    published = {k for k, e in manifest["lessons"].items() if e["status"] == "published"}
    copies = {}
    for key, notebook in notebooks.items():
        copy_ = published_copy(notebook, manifest, key, slug, published)
        manifest["lessons"][key]["key_results"] = key_results(copy_)
        copies[key] = copy_
    for key, notebook in kept.items():  # lessons published since lead to their copies now
        for cell in notebook["cells"]:
            if cell["cell_type"] == "markdown":
                _set_source(cell, _relink(_source(cell), key.split("/")[0], slug, published))
        copies[key] = notebook
    for lang in LANGUAGES:
        for stale in (folder / lang).glob("*.ipynb") if (folder / lang).is_dir() else []:
            if f"{lang}/{stale.stem}" not in copies:
                stale.unlink()
    for key, notebook in copies.items():
        target = folder / f"{key}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(notebook_text(notebook), encoding="utf-8")
    folder.mkdir(parents=True, exist_ok=True)
    old_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    problems = manifest_problems(folder, root)
    if problems:
        raise PublishError(f"{folder}: " + "; ".join(problems))
    return folder


def rename(root: Path, old_key: str, new_key: str) -> list[str]:
    """Re-key a lesson in every manifest (a lesson renamed or renumbered since its run)."""
    done = []
    for folder, manifest in machines(root):
        if old_key not in manifest["lessons"]:
            continue
        manifest["lessons"][new_key] = manifest["lessons"].pop(old_key)
        manifest["lessons"] = dict(sorted(manifest["lessons"].items()))
        source = folder / f"{old_key}.ipynb"
        if source.is_file():
            (folder / f"{new_key}.ipynb").parent.mkdir(parents=True, exist_ok=True)
            source.rename(folder / f"{new_key}.ipynb")
        (folder / "manifest.json").write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        done.append(f"{folder.name}: {old_key} -> {new_key}")
    return done


def machines(root: Path = ROOT) -> list[tuple[Path, dict]]:
    gpu = root / "notebooks" / "gpu"
    return [(m.parent, _read_json(m)) for m in sorted(gpu.glob("*/manifest.json"))]


_TYPES = {
    "schema": int,
    "machine": dict,
    "date": str,
    "commit": (str, type(None)),
    "python": str,
    "torch": str,
    "cuda": (str, type(None)),
    "driver": (str, type(None)),
    "how": str,
    "notes": list,
    "checks": list,
    "figures": list,
    "figures_notes": list,
    "lessons": dict,
}
_FIGURE_KEYS = {"what", "value", "goal", "verdict", "hard", "limit", "fraction"}
_CHECK_KEYS = {"name", "status", "why", "seconds"}


def manifest_problems(folder: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with a machine folder: its manifest's schema, a lesson that does not
    exist, a published notebook missing or one that the manifest does not list."""
    path = folder / "manifest.json"
    try:
        manifest = _read_json(path)
    except (OSError, ValueError) as error:
        return [f"{path.name}: {error}"]
    problems = [
        f"{name}: expected {' or '.join(t.__name__ for t in kinds)}, "
        f"got {type(manifest.get(name)).__name__}"
        for name, kind in _TYPES.items()
        if not isinstance(manifest.get(name), kinds := kind if isinstance(kind, tuple) else (kind,))
    ]
    if problems:
        return problems
    if set(manifest) - set(_TYPES):
        problems.append(f"unknown keys {sorted(set(manifest) - set(_TYPES))}")
    if manifest["schema"] != SCHEMA:
        problems.append(f"schema {manifest['schema']}, this script writes {SCHEMA}")
    if not re.fullmatch(r"\d{4}-\d\d-\d\d", manifest["date"]):
        problems.append(f"date {manifest['date']!r} is not YYYY-MM-DD")
    machine = manifest["machine"]
    if not (
        isinstance(machine.get("gpu"), str)
        and isinstance(machine.get("gpus"), int)
        and machine["gpus"] >= 1
        and isinstance(machine.get("memory"), (str, type(None)))
    ):
        problems.append(f"machine {machine!r}: needs gpu (str), gpus (>= 1), memory (str or null)")
    elif folder.name != slug_for(machine["gpu"], machine["gpus"]):
        problems.append(
            f"folder {folder.name!r}: the machine's is "
            f"{slug_for(machine['gpu'], machine['gpus'])!r}"
        )
    for figure in manifest["figures"]:
        if not isinstance(figure, dict) or set(figure) != _FIGURE_KEYS:
            problems.append(f"figure {figure!r}: keys must be {sorted(_FIGURE_KEYS)}")
    for check in manifest["checks"]:
        if not isinstance(check, dict) or set(check) != _CHECK_KEYS:
            problems.append(f"check {check!r}: keys must be {sorted(_CHECK_KEYS)}")
    existing = set(lesson_keys(root))
    for key, entry in manifest["lessons"].items():
        if not LESSON_KEY.fullmatch(key):
            problems.append(f"{key!r} is not a lesson name (en/NN-name or zh/NN-name)")
            continue
        if key not in existing:
            problems.append(
                f"{key}: a hash of a lesson that does not exist (renamed? "
                f"`.ci/publish_gpu_outputs.py --rename {key}=NEW`)"
            )
        if not isinstance(entry, dict) or entry.get("status") not in STATUSES:
            problems.append(f"{key}: status must be one of {STATUSES}")
            continue
        if not re.fullmatch(r"[0-9a-f]{64}", str(entry.get("sha256"))):
            problems.append(f"{key}: sha256 {entry.get('sha256')!r} is not a sha256")
        notebook = folder / f"{key}.ipynb"
        if entry["status"] == "published" and not notebook.is_file():
            problems.append(f"{key}: published, but {notebook.relative_to(folder)} is missing")
        if entry["status"] == "pending" and (notebook.is_file() or not entry.get("why")):
            problems.append(f"{key}: pending needs a why and no notebook")
        if not isinstance(entry.get("key_results", []), list):
            problems.append(f"{key}: key_results must be a list of lines")
    for notebook in sorted(folder.rglob("*.ipynb")):
        key = str(notebook.relative_to(folder).with_suffix(""))
        if manifest["lessons"].get(key, {}).get("status") != "published":
            problems.append(
                f"{notebook.relative_to(folder)}: not listed as published in the manifest"
            )
    return problems


def staleness(manifest: dict, root: Path = ROOT) -> dict[str, str]:
    """Each lesson: 'fresh', 'stale' (changed since its GPU run), 'missing' (no such lesson)
    or 'absent' (a lesson the manifest does not know)."""
    states = {}
    for key, entry in manifest["lessons"].items():
        path = root / "notebooks" / f"{key}.py"
        if not path.is_file():
            states[key] = "missing"
        else:
            fresh = source_hash(path.read_text(encoding="utf-8")) == entry["sha256"]
            states[key] = "fresh" if fresh else "stale"
    for key in lesson_keys(root):
        states.setdefault(key, "absent")
    return dict(sorted(states.items()))


# The generated parts.


def _rel(root: Path, path: Path, start: str) -> str:
    return posixpath.relpath(path.relative_to(root).as_posix(), start)


def lesson_line(
    lang: str, key: str, found: list[tuple[Path, dict, dict]], root: Path
) -> str | None:
    """The line under a lesson's Colab badge: its GPU versions, or why there is none."""
    parts = []
    for folder, manifest, states in found:
        entry = manifest["lessons"].get(key)
        prefix = _line_prefix(manifest["machine"], lang)
        if entry is None:
            state = "not run there yet" if lang == "en" else "还没有在那里运行过"
        elif entry["status"] == "pending":
            state = (
                f"pending ({entry['why']})"
                if lang == "en"
                else "暂缺，修正后的这一课还需要在 GPU 上运行一次"
            )
        else:
            link = _rel(root, folder / f"{key}.ipynb", f"notebooks/{lang}")
            state = f"[outputs]({link})" if lang == "en" else f"[输出]({link})"
            if states.get(key) == "stale":
                state += STALE[lang]
        parts.append((prefix, state))
    if not parts:
        return None
    sep = ": " if lang == "en" else "："
    text = (
        "; ".join(f"{p}{sep}{s}" for p, s in parts)
        if lang == "en"
        else "；".join(f"{p}{sep}{s}" for p, s in parts)
    )
    return text + ("." if lang == "en" else "。")


def _found(root: Path) -> list[tuple[Path, dict, dict]]:
    return [(folder, m, staleness(m, root)) for folder, m in machines(root)]


def render_lesson(py_path: Path, found: list, root: Path) -> dict[Path, str]:
    """New texts of a lesson's .py and .ipynb with the GPU line under the badge."""
    key = f"{py_path.parent.name}/{py_path.stem}"
    line = lesson_line(py_path.parent.name, key, found, root)
    texts = {py_path: py_with_gpu_line(py_path.read_text(encoding="utf-8"), line)}
    ipynb = py_path.with_suffix(".ipynb")
    if ipynb.is_file():
        notebook = _read_json(ipynb)
        title = notebook["cells"][0]
        _set_source(title, with_gpu_line(_source(title), line))
        texts[ipynb] = notebook_text(notebook)
    return texts


def _fmt(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, float):
        return f"{100 * value:.0f} %"
    return str(value).replace("|", "\\|")


def _heading(machine: dict) -> str:
    return machine["gpu"] if machine["gpus"] == 1 else f"{machine['gpus']} × {machine['gpu']}"


def _machine_line(manifest: dict) -> str:
    machine = manifest["machine"]
    count = "One" if machine["gpus"] == 1 else f"{machine['gpus']} ×"
    memory = f" ({machine['memory']})" if machine.get("memory") else ""
    parts = [f"{count} {machine['gpu']}{memory}"]
    parts += [
        f"{label} {manifest[k]}"
        for k, label in (
            ("driver", "driver"),
            ("cuda", "CUDA"),
            ("torch", "torch"),
            ("python", "Python"),
        )
        if manifest.get(k)
    ]
    commit = f" at commit `{manifest['commit']}`" if manifest.get("commit") else ""
    return f"{', '.join(parts)}: `{manifest['how']}` of {manifest['date']}{commit}"


def _lesson_names(manifest: dict, states: dict[str, str]) -> list[str]:
    """Every lesson a machine's table lists: those it ran, and those there are now."""
    return sorted({key.split("/", 1)[1] for key in [*manifest["lessons"], *states]})


def render_readme(root: Path = ROOT) -> str:
    """The body of README.md's "What a GPU shows"."""
    found = _found(root)
    lines = [
        "The lessons as a GPU ran them, with that machine's outputs and figures, are published",
        "in [`notebooks/gpu/`](notebooks/gpu/README.md), one folder per machine with a manifest;",
        "each lesson links to them under its Colab badge. `make gpu-publish` refreshes them from",
        "a `make gpu-check` report. Everything below was printed by the machine named.",
    ]
    if not found:
        return "\n".join([*lines, "", "Nothing has been published yet."])
    for folder, manifest, states in found:
        here = folder.relative_to(root).as_posix()
        lines += ["", f"### {_heading(manifest['machine'])}", ""]
        lines += [f"{_machine_line(manifest)} ([manifest]({here}/manifest.json)).", ""]
        lines += [f"- {note}" for note in manifest["notes"]]
        failed = [c for c in manifest["checks"] if c["status"] == "failed"]
        passed = sum(c["status"] == "passed" for c in manifest["checks"])
        if manifest["checks"]:
            lines.append(
                f"- Checks: {passed} passed, {len(failed)} failed" + (":" if failed else ".")
            )
            lines += [f"  - {c['name']}: {c['why']}" for c in failed]
        if manifest["figures"]:
            lines += [
                "",
                "| figure | measured | goal | verdict | limit | of the limit |",
                "| --- | --- | --- | --- | --- | --- |",
            ]
            for f in manifest["figures"]:
                cells = [f["what"], f["value"], f["goal"], f["verdict"], f["limit"], f["fraction"]]
                lines.append("| " + " | ".join(_fmt(c) for c in cells) + " |")
            for note in manifest["figures_notes"]:
                lines += ["", note]
        lines += ["", "| lesson | en | zh |", "| --- | --- | --- |"]
        for name in _lesson_names(manifest, states):
            cells = []
            for lang in LANGUAGES:
                key = f"{lang}/{name}"
                entry = manifest["lessons"].get(key)
                if entry is None:
                    cells.append("not run there yet")
                elif entry["status"] == "pending":
                    cells.append(f"pending: {entry['why']}")
                else:
                    cell = f"[outputs]({here}/{key}.ipynb)"
                    cells.append(cell + (STALE["en"] if states.get(key) == "stale" else ""))
            lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
        lines += ["", "Earlier version: the lesson has changed since this run (it is stale)."]
        keyed = [k for k in manifest["lessons"] if manifest["lessons"][k].get("key_results")]
        if keyed:
            lines += ["", "Key results (the cells tagged `key-result`), as printed there:"]
        for name in sorted({k.split("/")[1] for k in keyed}):
            for lang in LANGUAGES:
                key = f"{lang}/{name}"
                results = manifest["lessons"].get(key, {}).get("key_results")
                if not results:
                    continue
                mark = STALE["en"] if states.get(key) == "stale" else ""
                block = ["```text", *results, "```"]
                if lang == "en":
                    lines += ["", f"`{key}`{mark}:", "", *block]
                else:
                    lines += [
                        "",
                        f"<details><summary><code>{key}</code>{mark}</summary>",
                        "",
                        *block,
                        "",
                        "</details>",
                    ]
    return "\n".join(lines)


def render_index(root: Path = ROOT) -> str:
    """The body of notebooks/README.md's GPU section."""
    found = _found(root)
    lines = [
        "Each lesson as a GPU ran it, with what that machine printed: a record to read, not the",
        "lesson to edit or run (the `.py` above is). `make gpu-publish` refreshes it from a",
        "`make gpu-check` report; see [gpu/README.md](gpu/README.md).",
        "",
        "每一课在 GPU 上运行后的原样输出：供阅读的记录，不是要修改或运行的那一课"
        "（那是上面的 `.py`）。",
    ]
    if not found:
        return "\n".join([*lines, "", "Nothing has been published yet. / 尚未发布。"])
    for folder, manifest, states in found:
        here = folder.relative_to(root / "notebooks").as_posix()
        commit = f", commit `{manifest['commit']}`" if manifest.get("commit") else ""
        lines += ["", f"### {_heading(manifest['machine'])} ({manifest['date']}{commit})", ""]
        lines += ["| # | English | 中文 |", "| --- | --- | --- |"]
        for name in _lesson_names(manifest, states):
            cells = []
            for lang in LANGUAGES:
                key = f"{lang}/{name}"
                entry = manifest["lessons"].get(key)
                if entry is None:
                    cells.append("not run there yet" if lang == "en" else "尚未运行")
                elif entry["status"] == "pending":
                    cells.append("pending" if lang == "en" else "暂缺")
                else:
                    text = f"[{name}]({here}/{key}.ipynb)"
                    cells.append(text + (STALE[lang] if states.get(key) == "stale" else ""))
            lines.append(f"| {name[:2]} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "Earlier version: the lesson has changed since this run. / "
            "较早版本：这一课在那次运行之后改过。",
        ]
    return "\n".join(lines)


def without_stale(text: str) -> str:
    for mark in STALE.values():
        text = text.replace(mark, "")
    return text


def replace_section(text: str, body: str, where: str) -> str:
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise PublishError(f"{where}: needs one {BEGIN!r} ... {END!r} block to render into")
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{body}\n{END}{rest.split(END, 1)[1]}"


def rendering(root: Path = ROOT, lessons: bool = True) -> dict[Path, str]:
    """Every generated file and what it should hold."""
    texts = {}
    for path, body in (
        (root / "README.md", render_readme(root)),
        (root / "notebooks" / "README.md", render_index(root)),
    ):
        texts[path] = replace_section(
            path.read_text(encoding="utf-8"), body, str(path.relative_to(root))
        )
    if lessons:
        found = _found(root)
        for key in lesson_keys(root):
            texts.update(render_lesson(root / "notebooks" / f"{key}.py", found, root))
    return texts


def render(root: Path = ROOT, lessons: bool = True) -> list[Path]:
    """Write the generated parts; return the files that changed. The lead runs this over
    all lessons at the end (``--render``); ``make gpu-publish`` runs it after publishing."""
    changed = []
    for path, text in rendering(root, lessons).items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def out_of_date(root: Path = ROOT, lessons: bool = True) -> tuple[list[Path], list[Path]]:
    """(files whose generated part differs, files whose only difference is a stale mark)."""
    wrong, marks = [], []
    for path, text in rendering(root, lessons).items():
        current = path.read_text(encoding="utf-8")
        if without_stale(current) != without_stale(text):
            wrong.append(path)
        elif current != text:
            marks.append(path)
    return wrong, marks


def stale_report(root: Path = ROOT) -> list[str]:
    lines = []
    for folder, manifest in machines(root):
        states = staleness(manifest, root)
        for state in ("stale", "absent", "missing"):
            keys = [k for k, s in states.items() if s == state]
            if keys:
                lines.append(f"{folder.name}: {state}: {', '.join(keys)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--report", type=Path, help="a gpu-check report folder (default build/gpu-check)"
    )
    mode.add_argument(
        "--from-shared-run", type=Path, metavar="DIR", help="import a run made before run.json"
    )
    mode.add_argument("--render", action="store_true", help="only render the generated parts")
    mode.add_argument(
        "--check", action="store_true", help="exit 1 if a generated part is out of date"
    )
    mode.add_argument(
        "--rename", action="append", metavar="OLD=NEW", help="re-key a renamed lesson"
    )
    parser.add_argument("--commit", help="with --from-shared-run: the commit that run used")
    parser.add_argument(
        "--skip-lessons", action="store_true", help="leave notebooks/<lang>/ as it is"
    )
    args = parser.parse_args(argv)
    lessons = not args.skip_lessons
    try:
        if args.check:
            wrong, marks = out_of_date(ROOT, lessons)
            for line in stale_report(ROOT):
                print(f"note: {line}")
            for path in marks:
                print(f"note: {path.relative_to(ROOT)}: stale marks out of date (--render)")
            for path in wrong:
                print(
                    f"out of date: {path.relative_to(ROOT)}: "
                    "run .ci/publish_gpu_outputs.py --render"
                )
            return 1 if wrong else 0
        if args.from_shared_run:
            if not args.commit:
                parser.error("--from-shared-run needs --commit (the commit that run used)")
            run = import_shared_run(args.from_shared_run, args.commit, root=ROOT, git_root=ROOT)
            folder = write_machine(run, ROOT)
            print(f"published {folder.relative_to(ROOT)}")
        elif args.rename:
            for pair in args.rename:
                old, sep, new = pair.partition("=")
                if not sep or not LESSON_KEY.fullmatch(old) or not LESSON_KEY.fullmatch(new):
                    parser.error(f"--rename {pair!r}: expected en/NN-old=en/NN-new")
                print("\n".join(rename(ROOT, old, new)) or f"no manifest lists {old}")
        elif not args.render:
            report = (args.report or ROOT / "build" / "gpu-check").resolve()
            print(f"published {write_machine(read_report(report, ROOT), ROOT).relative_to(ROOT)}")
        for path in render(ROOT, lessons):
            print(f"rendered {path.relative_to(ROOT)}")
        for line in stale_report(ROOT):
            print(f"note: {line}")
    except PublishError as error:
        print(f"publish_gpu_outputs: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
