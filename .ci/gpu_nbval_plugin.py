"""A pytest plugin for gpu_check: keep what nbval executed, and how each cell fared.

nbval does the comparison (its sanitizers, its tags, its rules); this only
listens. After each cell it notes the outcome and the outputs nbval collected
(``IPyNbCell.test_outputs``); at the end it writes, into the folder named by
D2L_GPU_CHECK_EXECUTED, the notebook as executed (``NAME.ipynb``) and the
outcomes (``NAME.json``). If a later nbval stops keeping ``test_outputs``, the
comparison still holds and the JSON says that the outputs were not kept.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import nbformat
import pytest
from gpu_lessons import FOLDER_VARIABLE

_cells: dict[Path, list[dict]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cell_num = getattr(item, "cell_num", None)
    if cell_num is None or report.when != "call":
        return
    # NbCellError's message: "Cell outputs differ", "Cell execution caused an exception", ...
    message = ""
    if call.excinfo is not None:
        text = str(call.excinfo.value).strip()
        message = text.splitlines()[0] if text else call.excinfo.typename
    outputs = getattr(item, "test_outputs", None)
    _cells.setdefault(Path(str(item.fspath)), []).append(
        {
            "cell": cell_num,
            "outcome": report.outcome,
            "message": message,
            "outputs": None if outputs is None else [dict(o) for o in outputs],
            "skipped": report.skipped,
        }
    )


def _error_line(outputs: list[dict] | None) -> str:
    for out in outputs or []:
        if out.get("output_type") == "error":
            return f"{out.get('ename')}: {out.get('evalue')}"
    return ""


def pytest_sessionfinish(session):
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder:
        return
    for path, cells in _cells.items():
        stored = nbformat.read(path, as_version=4)
        executed = copy.deepcopy(stored)
        code = [c for c in executed.cells if c.cell_type == "code"]
        records = {r["cell"]: r for r in cells}
        for number, cell in enumerate(code):
            record = records.get(number)
            ran = record is not None and record["outputs"] is not None
            cell.outputs = [nbformat.from_dict(o) for o in record["outputs"]] if ran else []
            cell.execution_count = number + 1 if ran else None
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        nbformat.write(executed, out / path.name)
        summary = [
            {**{k: v for k, v in r.items() if k != "outputs"}, "error": _error_line(r["outputs"])}
            for r in cells
        ]
        kept = all(r["outputs"] is not None for r in cells if not r["skipped"])
        (out / f"{path.stem}.json").write_text(
            json.dumps({"cells": summary, "outputs_kept": kept, "code_cells": len(code)}),
            encoding="utf-8",
        )
