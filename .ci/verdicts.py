#!/usr/bin/env python3
"""Run lessons as scripts twice and check that they print the same verdicts.

Usage: python .ci/verdicts.py [--runs N] notebooks/en/07-summary.py [...]

A verdict is a line that ``d2l_gpu.compare`` printed (it starts with "verdict: ");
the figures in it vary from run to run, the outcome must not. Each run is a fresh
``python lesson.py`` in the lesson's folder, with a private temporary folder, as
tests/test_notebook_scripts.py runs it. Exits 1 naming each lesson whose outcomes
differ between runs, or that failed to run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# What compare() decided, without the measured figures: the words after the last colon.
OUTCOME = re.compile(r"^verdict: .*: (?P<outcome>[^:]+)$")


def outcomes(output: str) -> list[str]:
    """The outcome of every verdict line, in order (e.g. 'clearly slower')."""
    found = []
    for line in output.splitlines():
        match = OUTCOME.match(line.strip())
        if match:
            found.append(match["outcome"])
    return found


def run(lesson: Path) -> tuple[list[str], list[str]]:
    """One run of the lesson as a script: its outcomes and full verdict lines."""
    with tempfile.TemporaryDirectory(prefix="d2l-verdicts-") as tmp:
        env = {**os.environ, "TMPDIR": tmp, "MPLBACKEND": "Agg"}
        command = [sys.executable, lesson.name]
        proc = subprocess.run(command, cwd=lesson.parent, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{lesson} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    lines = [line.strip() for line in proc.stdout.splitlines()]
    lines = [line for line in lines if line.startswith("verdict: ")]
    return outcomes(proc.stdout), lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=2, help="runs per lesson (default 2)")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error(f"--runs must be at least 2 to compare runs, got {args.runs}")
    failed = []
    for lesson in args.lessons:
        try:
            runs = [run(lesson.resolve()) for _ in range(args.runs)]
        except RuntimeError as error:
            print(f"FAILED  {error}")
            failed.append(lesson)
            continue
        same = all(r[0] == runs[0][0] for r in runs)
        print(f"{'same   ' if same else 'DIFFER '} {lesson}: {len(runs[0][0])} verdicts")
        for i, (_, lines) in enumerate(runs, 1):
            for line in lines if not same or i == 1 else []:
                print(f"    run {i}: {line}")
        if not same:
            failed.append(lesson)
    total = len(args.lessons)
    print(f"{total - len(failed)} of {total} lessons print the same verdicts")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
