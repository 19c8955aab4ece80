#!/usr/bin/env python3
"""Run everything that needs a GPU, on a borrowed GPU machine, and summarize it.

Needs only Python and torch (no Jupyter, no network): `make gpu-check`, or from
the repository root `python3 .ci/gpu_check.py`. It runs, each with a time limit:
`python -m d2l_gpu info`; the gpu-marked tests (pytest from this Python, else
unpacked from the wheel folder `make gpu-wheels` fills); the torchrun
all-reduce demo on nccl, one rank per CUDA GPU whatever D2L_DEVICE says; every
notebook source as a plain script in its own folder (on the devices D2L_DEVICE allows).
Logs go to the report folder; the last lines say, per check, passed / failed /
skipped and why. Exits 1 if a check failed, else 0 (a machine without a GPU
skips what needs one).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKS = ("info", "tests", "torchrun", "notebooks")
DEMO = Path("notebooks/scripts/all_reduce_demo.py")
# Seconds each kind of check may take; all of them share --budget.
LIMITS = {"probe": 60, "info": 60, "tests": 240, "notebook": 150, "torchrun": 180}

PROBE = """
import json, torch
acc = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
print(json.dumps({
    "torch": torch.__version__,
    "kind": acc.type if acc else None,
    "count": torch.accelerator.device_count() if acc else 0,
    "cuda": torch.cuda.device_count() if torch.cuda.is_available() else 0,
}))
"""


@dataclass
class Result:
    name: str
    status: str  # passed, failed or skipped
    why: str = ""
    seconds: float | None = None

    def line(self) -> str:
        took = f" ({self.seconds:.1f} s)" if self.seconds is not None else ""
        why = f": {self.why}" if self.why else ""
        return f"{self.status:<8} {self.name}{took}{why}"


class Runner:
    """Runs commands with this Python, each logged and bounded by the shared budget."""

    def __init__(self, report: Path, budget: float) -> None:
        self.report = report
        self.deadline = time.monotonic() + budget
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
        )
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env["MPLBACKEND"] = "Agg"  # plt.show() must not wait for a window

    def time_left(self, limit: float = float("inf")) -> float:
        return min(limit, self.deadline - time.monotonic())

    def run(
        self, args: list[str], log: str, limit: float, cwd: Path = ROOT, env: dict | None = None
    ) -> tuple[int | None, float, str]:
        """(exit code or None on timeout, seconds, output) of ``python args...``."""
        timeout = self.time_left(limit)
        path = self.report / log
        path.parent.mkdir(parents=True, exist_ok=True)
        tik = time.monotonic()
        # Its own process group, so a timeout also ends what it started (torchrun's ranks).
        child = subprocess.Popen(
            [sys.executable, *args],
            cwd=cwd,
            env=env or self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        try:
            output, _ = child.communicate(timeout=max(timeout, 1))
            code: int | None = child.returncode
        except subprocess.TimeoutExpired:
            code = None
            os.killpg(child.pid, signal.SIGTERM)
            try:
                output, _ = child.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                output, _ = child.communicate()
        seconds = time.monotonic() - tik
        path.write_text(f"$ python {' '.join(args)}  (in {cwd})\n{output}", encoding="utf-8")
        return code, seconds, output


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else "no output"


def _failure(name: str, code: int | None, seconds: float, output: str) -> Result:
    if code is None:
        return Result(name, "failed", f"timed out after {seconds:.0f} s", seconds)
    return Result(name, "failed", f"exit {code}: {_last_line(output)}", seconds)


def probe(runner: Runner) -> dict | None:
    code, _, output = runner.run(["-c", PROBE], "probe.log", LIMITS["probe"])
    if code != 0:
        return None
    return json.loads(output.strip().splitlines()[-1])


def check_info(runner: Runner) -> Result:
    code, seconds, output = runner.run(["-m", "d2l_gpu", "info"], "info.txt", LIMITS["info"])
    if code == 0:
        return Result("info", "passed", seconds=seconds)
    return _failure("info", code, seconds, output)


def unpack_wheels(wheels: Path, site: Path) -> list[str]:
    """Unpack pure-Python wheels into ``site`` (an import path); return their names.

    Unpacking is all a pure-Python wheel needs to be importable, so this works
    where pip cannot install (no network, a Python the user keeps untouched).
    """
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    names = []
    for wheel in sorted(wheels.glob("*.whl")):
        if not wheel.name.endswith("-none-any.whl"):
            continue  # compiled for some Python; pytest needs none of those
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
        names.append(wheel.name)
    return names


def _pytest_env(runner: Runner, wheels: Path) -> tuple[dict | None, str]:
    """An environment whose Python imports pytest, and where pytest came from."""
    code, _, _ = runner.run(["-c", "import pytest"], "pytest-probe.log", 30)
    if code == 0:
        return runner.env, "this Python's pytest"
    if not any(wheels.glob("*.whl")):
        return None, (
            f"pytest is not installed and {wheels} holds no wheels: run `make gpu-wheels` "
            "on a machine with network and copy that folder here"
        )
    site = runner.report / "pytest-site"
    unpack_wheels(wheels, site)
    env = dict(runner.env, PYTHONPATH=os.pathsep.join([str(site), runner.env["PYTHONPATH"]]))
    code, _, output = runner.run(["-c", "import pytest"], "pytest-probe.log", 30, env=env)
    if code != 0:
        return None, f"pytest from {wheels} does not import: {_last_line(output)}"
    return env, f"pytest from {wheels}"


def _gpu_test_files() -> list[str]:
    files = sorted((ROOT / "tests").glob("test_*.py"))
    return [str(f.relative_to(ROOT)) for f in files if "pytest.mark.gpu" in f.read_text("utf-8")]


def _junit_counts(path: Path) -> dict[str, int]:
    import xml.etree.ElementTree as ElementTree

    suite = ElementTree.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return {key: int(suite.get(key, 0)) for key in ("tests", "skipped", "failures", "errors")}


def check_tests(runner: Runner, wheels: Path, machine: dict) -> Result:
    name = "gpu tests"
    env, source = _pytest_env(runner, wheels)
    if env is None:
        return Result(name, "skipped", source)
    junit = runner.report / "gpu-tests.xml"
    junit.unlink(missing_ok=True)
    args = ["-m", "pytest", "-m", "gpu", "-q", "-rs", "-p", "no:cacheprovider"]
    args += ["--junitxml", str(junit), *_gpu_test_files()]
    code, seconds, output = runner.run(args, "gpu-tests.log", LIMITS["tests"], env=env)
    if code != 0 or not junit.is_file():
        return _failure(name, code, seconds, output)
    n = _junit_counts(junit)
    ran = n["tests"] - n["skipped"]
    if not machine["count"]:
        why = f"no GPU: all {n['tests']} gpu-marked tests skipped ({source} works)"
        return Result(name, "skipped", why, seconds)
    return Result(name, "passed", f"{ran} passed, {n['skipped']} skipped ({source})", seconds)


def _files_under(folders: list[Path]) -> set[Path]:
    return {
        p
        for folder in folders
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _missing_module(output: str) -> str | None:
    """The third-party module a script lacked, if that is why it stopped."""
    match = re.search(r"^ModuleNotFoundError: No module named '([\w.]+)'\s*$", output, re.M)
    if match and match.group(1).split(".")[0] not in ("d2l_gpu", "torch"):
        return match.group(1)
    return None


def check_notebook(runner: Runner, script: Path) -> Result:
    name = f"notebook {script.parent.name}/{script.name}"
    watched = [script.parent, ROOT / "notebooks"]
    before = _files_under(watched)
    log = f"notebooks/{script.parent.name}-{script.stem}.log"
    code, seconds, output = runner.run([script.name], log, LIMITS["notebook"], cwd=script.parent)
    left = sorted(os.path.relpath(p, script.parent) for p in _files_under(watched) - before)
    if code != 0 and (module := _missing_module(output)):
        return Result(name, "skipped", f"needs the {module!r} package, not installed", seconds)
    if code != 0:
        return _failure(name, code, seconds, output)
    if left:
        return Result(name, "failed", f"left files behind: {', '.join(left)}", seconds)
    return Result(name, "passed", seconds=seconds)


def check_torchrun(runner: Runner, machine: dict) -> Result:
    name = "torchrun nccl demo"
    if not machine["cuda"]:
        return Result(name, "skipped", "no CUDA GPU: nccl needs one")
    if not (ROOT / DEMO).is_file():
        return Result(name, "skipped", f"{DEMO} not found")
    n = machine["cuda"]
    args = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n)]
    args += [str(DEMO), "--backend", "nccl"]
    # One rank per CUDA GPU: with D2L_DEVICE=cuda:1 (or cpu) every rank would take the
    # same device (or none), and the demo would rightly refuse nccl.
    env = {k: v for k, v in runner.env.items() if k != "D2L_DEVICE"}
    code, seconds, output = runner.run(args, "torchrun.log", LIMITS["torchrun"], env=env)
    if code == 0:
        return Result(name, "passed", f"{n} rank(s)", seconds)
    return _failure(name, code, seconds, output)


def run_checks(args: argparse.Namespace, runner: Runner) -> tuple[str, list[Result]]:
    machine = probe(runner)
    if machine is None:
        log = runner.report / "probe.log"
        return "torch does not import", [Result("torch", "failed", f"see {log}")]
    gpus = f"{machine['count']} {machine['kind']} device(s)" if machine["count"] else "no GPU"
    header = f"torch {machine['torch']}, {gpus}, Python {sys.version.split()[0]}"
    if "D2L_DEVICE" in runner.env:  # the lessons run on what it names
        header += f", D2L_DEVICE={runner.env['D2L_DEVICE']}"

    planned: list[tuple[str, str, Callable[[], Result]]] = [
        ("info", "info", lambda: check_info(runner))
    ]
    planned.append(("tests", "gpu tests", lambda: check_tests(runner, args.wheels, machine)))
    # Before the lessons: one short command, and the one check no CPU run can stand in for,
    # so a budget the lessons use up never skips it.
    planned.append(("torchrun", "torchrun nccl demo", lambda: check_torchrun(runner, machine)))
    found = (glob.glob(str(ROOT / pattern)) for pattern in args.notebooks)
    scripts = sorted({Path(p).resolve() for paths in found for p in paths})
    if not scripts:
        planned.append(
            (
                "notebooks",
                "notebooks",
                lambda: Result("notebooks", "failed", f"no file matches {args.notebooks}"),
            )
        )
    for script in scripts:
        name = f"notebook {script.parent.name}/{script.name}"
        planned.append(("notebooks", name, lambda s=script: check_notebook(runner, s)))

    results = []
    for group, name, check in planned:
        if group not in args.only:
            results.append(Result(name, "skipped", "not selected (--only)"))
        elif runner.time_left() < 5:
            results.append(Result(name, "skipped", f"time budget of {args.budget:.0f} s spent"))
        else:
            results.append(check())
            print(results[-1].line(), flush=True)
    return header, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, default=ROOT / "build" / "gpu-check")
    parser.add_argument("--wheels", type=Path, default=ROOT / "build" / "gpu-wheels")
    parser.add_argument(
        "--only",
        type=lambda s: s.split(","),
        default=list(CHECKS),
        help=f"comma-separated checks to run, of {','.join(CHECKS)} (default: all)",
    )
    parser.add_argument(
        "--notebooks",
        nargs="+",
        default=["notebooks/en/*.py", "notebooks/zh/*.py"],
        help="glob patterns of notebook sources to run, relative to the repository",
    )
    parser.add_argument("--budget", type=float, default=480, help="seconds for the whole run")
    args = parser.parse_args(argv)
    unknown = set(args.only) - set(CHECKS)
    if unknown:
        parser.error(f"--only: unknown check(s) {sorted(unknown)}; choose from {list(CHECKS)}")
    args.report.mkdir(parents=True, exist_ok=True)

    runner = Runner(args.report, args.budget)
    header, results = run_checks(args, runner)
    lines = [f"gpu-check summary: {header}; logs in {args.report}"]
    lines += [r.line() for r in results]
    summary = "\n".join(lines)
    (args.report / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    print("\n" + summary)
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
