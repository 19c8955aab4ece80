""".ci/verdicts.py: two runs of a lesson must print the same verdict outcomes."""

import importlib.util
import subprocess
import sys

from tests.repository import ROOT

SCRIPT = ROOT / ".ci" / "verdicts.py"
spec = importlib.util.spec_from_file_location("verdicts", SCRIPT)
verdicts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(verdicts)


def test_outcomes_keep_what_was_decided_and_drop_the_figures():
    output = (
        "a: 1.000 ms median, IQR 2.0 us, 10 runs x 3\n"
        "verdict: b takes 3.02x the time of a (q1-q3 2.90x to 3.10x over 10 rounds): "
        "clearly slower\n"
        "  verdict: b takes 1.01x the time of a: they agree within the ±10 % tolerance\n"
        "the verdict: not a line compare() printed\n"
    )
    assert verdicts.outcomes(output) == [
        "clearly slower",
        "they agree within the ±10 % tolerance",
    ]


def _lesson(tmp_path, body: str):
    lesson = tmp_path / "lesson.py"
    lesson.write_text(body, encoding="utf-8")
    return lesson


def _run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True
    )


def test_a_lesson_with_a_steady_verdict_passes(tmp_path):
    lesson = _lesson(
        tmp_path, "print('verdict: b takes 2.00x the time of a (...): clearly slower')\n"
    )
    proc = _run(lesson)
    assert proc.returncode == 0, proc.stdout
    assert "same" in proc.stdout and "1 of 1 lessons print the same verdicts" in proc.stdout


def test_a_verdict_that_flips_between_runs_fails_showing_both(tmp_path):
    # The lesson keeps a counter in a file beside it, so its second run decides otherwise.
    lesson = _lesson(
        tmp_path,
        "from pathlib import Path\n"
        "mark = Path('runs.txt')\n"
        "n = int(mark.read_text()) if mark.exists() else 0\n"
        "mark.write_text(str(n + 1))\n"
        "outcome = 'clearly slower' if n else 'no clear difference'\n"
        "print('verdict: b takes 1.2x the time of a: ' + outcome)\n",
    )
    proc = _run(lesson)
    assert proc.returncode == 1
    assert "DIFFER" in proc.stdout and "run 1:" in proc.stdout and "run 2:" in proc.stdout


def test_a_lesson_that_fails_is_reported(tmp_path):
    proc = _run(_lesson(tmp_path, "raise SystemExit(3)\n"))
    assert proc.returncode == 1 and "exited 3" in proc.stdout


def test_one_run_is_refused():
    proc = _run("--runs", "1", "x.py")
    assert proc.returncode == 2 and "--runs must be at least 2" in proc.stderr
