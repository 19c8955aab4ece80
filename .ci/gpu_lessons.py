"""Run each lesson for gpu_check and say how it compares with its stored outputs.

The comparison is nbval's own (``pytest --nbval`` with tests/nbval-sanitize.cfg and
the nbval-ignore-output / nbval-skip tags), the rules ``make test`` applies; a small
plugin (gpu_nbval_plugin) keeps the notebook as executed and each cell's outcome.
Running pytest once per lesson costs a second or two each, and buys a time limit
per lesson and a report that a crash in one lesson cannot take from the others.
Without nbval a lesson still runs as a plain script, but cannot pass: nothing was
compared. From the lessons as executed it reads their key results, and their
verdicts, so that the en and zh runs of one lesson can be held to the same ones.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import verdicts

CI = Path(__file__).resolve().parent
ROOT = CI.parent
SANITIZE = ROOT / "tests" / "nbval-sanitize.cfg"
KEY_TAG = "key-result"
# Names the folder where gpu_nbval_plugin writes each lesson as executed.
FOLDER_VARIABLE = "D2L_GPU_CHECK_EXECUTED"
KEY_LINES = 6  # a key result is a few lines; more would drown the table
VERDICT = "verdict: "  # how d2l_gpu.compare's verdict lines start


@dataclass
class Outcome:
    status: str  # passed or failed
    why: str


def files_under(folders: list[Path]) -> set[Path]:
    """Every file below ``folders``: compared before and after, what a lesson left."""
    return {
        p
        for folder in folders
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def exception_line(output: str) -> str:
    """The line naming the exception, else the last meaningful line.

    torchrun ends a failure with a ``====`` banner and a summary table; what a
    reader needs is the ``SomeError: message`` line above it.
    """
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    pattern = re.compile(r"^(?:\[rank\d+\]:\s*)?((?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b.*)$")
    for line in reversed(lines):
        match = pattern.match(line)
        # torchrun's own ChildFailedError only says that a rank failed; the rank says why.
        if match and "ChildFailedError" not in match.group(1):
            return match.group(1)[:200]
    meaningful = [line for line in lines if not set(line) <= set("=-*+ ")]
    return meaningful[-1][:200] if meaningful else "no output"


def last_json(output: str):
    """The last line of ``output`` that parses as JSON: a child prints its answer last,
    but a warning at exit (stderr is merged) may still follow it."""
    for line in reversed(output.splitlines()):
        if line.strip()[:1] in ("{", "["):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise ValueError(f"no JSON line in the output: {output.strip()[-200:]!r}")


def nbval_args(notebook: Path, cell_timeout: float) -> list[str]:
    return [
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "gpu_nbval_plugin",
        "--rootdir",
        str(ROOT),
        "--nbval",
        "--nbval-current-env",
        f"--nbval-cell-timeout={cell_timeout:.0f}",
        "--nbval-sanitize-with",
        str(SANITIZE),
        str(notebook),
    ]


def _cell_words(notebook: Path, number: int) -> str:
    """The first line of code cell ``number``, to find it by eye."""
    try:
        cells = json.loads(notebook.read_text("utf-8"))["cells"]
        source = [c for c in cells if c["cell_type"] == "code"][number]["source"]
        text = "".join(source) if isinstance(source, list) else source
    except (OSError, ValueError, KeyError, IndexError):
        return ""
    first = next((line for line in text.splitlines() if line.strip()), "")
    return f" ({first.strip()[:60]})" if first else ""


def judge_nbval(notebook: Path, code: int | None, seconds: float, output: str, record: Path):
    """Read the plugin's record of one ``pytest --nbval`` run into an Outcome."""
    if code is None:
        return Outcome("failed", f"INCOMPLETE: timed out after {seconds:.0f} s")
    if not record.is_file():
        return Outcome("failed", f"INCOMPLETE: nbval did not run it: {exception_line(output)}")
    data = json.loads(record.read_text("utf-8"))
    cells = data["cells"]
    for cell in cells:
        if cell["outcome"] == "failed" and cell["message"] != "Cell outputs differ":
            where = f"code cell {cell['cell']}{_cell_words(notebook, cell['cell'])}"
            return Outcome("failed", f"INCOMPLETE: {where}: {cell['error'] or cell['message']}")
    if len(cells) < data["code_cells"]:
        return Outcome("failed", f"INCOMPLETE: {len(cells)} of {data['code_cells']} cells ran")
    differ = [c for c in cells if c["outcome"] == "failed"]
    if differ:
        first = differ[0]["cell"]
        where = f"code cell {first}{_cell_words(notebook, first)}"
        return Outcome("failed", f"differs from the stored outputs at {where}")
    if code != 0:
        return Outcome("failed", f"pytest exit {code}: {exception_line(output)}")
    skipped = sum(c["outcome"] == "skipped" for c in cells)
    kept = "" if data["outputs_kept"] else "; nbval kept no outputs to save"
    tagged = f", {skipped} skipped by tag" if skipped else ""
    return Outcome("passed", f"matches the stored outputs ({len(cells)} cells{tagged}){kept}")


def judge_script(code: int | None, seconds: float, output: str, compared: bool) -> Outcome:
    if code is None:
        return Outcome("failed", f"INCOMPLETE: timed out after {seconds:.0f} s")
    if code != 0:
        return Outcome("failed", f"INCOMPLETE: exit {code}: {exception_line(output)}")
    if compared:
        return Outcome("passed", "ran to its end as a script (outputs not compared: --as-scripts)")
    return Outcome(
        "failed",
        "ran to its end as a script, but was not compared with its stored outputs: "
        "nbval does not import here (carry it: make gpu-wheels)",
    )


def left_behind(before: set[Path], folders: list[Path], cwd: Path) -> list[str]:
    return sorted(os.path.relpath(p, cwd) for p in files_under(folders) - before)


def _output_lines(cell: dict) -> list[str]:
    """The non-blank lines a cell printed or displayed as text."""
    lines = []
    for out in cell.get("outputs", []):
        text = out.get("text") or out.get("data", {}).get("text/plain") or ""
        text = "".join(text) if isinstance(text, list) else text
        lines += [line.rstrip() for line in text.splitlines() if line.strip()]
    return lines


def _lessons(executed: Path):
    """(lesson as 'en/NN-name', its cells) for each notebook kept as executed."""
    for notebook in sorted(executed.rglob("*.ipynb")):
        yield (
            f"{notebook.parent.name}/{notebook.stem}",
            json.loads(notebook.read_text("utf-8"))["cells"],
        )


def key_results(executed: Path) -> list[tuple[str, str]]:
    """(lesson, line) for each output line of a cell tagged key-result, in order."""
    found = []
    for lesson, cells in _lessons(executed):
        for cell in cells:
            if KEY_TAG not in cell.get("metadata", {}).get("tags", []):
                continue
            lines = _output_lines(cell) or ["(no output: the cell did not run)"]
            if len(lines) > KEY_LINES:
                lines = lines[:KEY_LINES] + [f"... {len(lines) - KEY_LINES} more lines"]
            found += [(lesson, line) for line in lines]
    return found


def verdict_lines(executed: Path) -> dict[str, list[str]]:
    """Each executed lesson's lines from d2l_gpu.compare (they start "verdict: "), in order."""
    return {
        lesson: [line for cell in cells for line in _output_lines(cell) if line.startswith(VERDICT)]
        for lesson, cells in _lessons(executed)
    }


def _outcome(line: str) -> str:
    # The rule .ci/verdicts.py applies between two CPU runs: the words after the last colon.
    return (verdicts.outcomes(line) or [line])[0]


def verdicts_agree(found: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """(lesson, status, why) for each lesson that printed a verdict in its en or zh run:
    passed where both runs decided alike, verdict by verdict (the figures in the lines
    may differ), failed naming the first pair that does not, skipped if one did not run."""
    judged = []
    for stem in sorted({lesson.split("/", 1)[1] for lesson in found}):
        en, zh = (found.get(f"{lang}/{stem}") for lang in ("en", "zh"))
        if not (en or zh):
            continue
        if en is None or zh is None:
            ran = "en" if zh is None else "zh"
            judged.append((stem, "skipped", f"only the {ran} run was kept: nothing to compare"))
            continue
        pairs = list(itertools.zip_longest(en, zh, fillvalue="(none)"))
        differ = [i for i, (a, b) in enumerate(pairs) if _outcome(a) != _outcome(b)]
        if differ:
            a, b = pairs[differ[0]]
            why = f"verdict {differ[0] + 1} differs: en {a!r}; zh {b!r}"
            if len(en) != len(zh):
                why += f" (en printed {len(en)}, zh {len(zh)})"
            judged.append((stem, "failed", why))
        else:
            judged.append((stem, "passed", f"{len(en)} verdict(s) agree"))
    return judged
