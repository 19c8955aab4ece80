"""Everything that needs a GPU, run on a GPU machine: python tools/gpu_check.py

Needs Python with torch. Each step runs when what it needs is there, so a bare GPU box
(torch, numpy, matplotlib, pytest) still runs the first four; the report names the
steps that could not run and the one command that adds what they need (CONTRIBUTING.md's
wheel recipe, for a box without network). Steps, in order:

1. the GPUs: fails, and stops, when nvidia-smi lists GPUs that torch cannot see;
2. `python -m d2l_gpu info`;
3. `pytest -m gpu tests` (needs pytest);
4. the torchrun all-reduce demo over nccl, one process per CUDA GPU;
5. every lesson (en and zh) executed with nbclient, saved as it ran (needs nbclient,
   nbformat, ipykernel, numpy and matplotlib).

A step fails on an error or when it runs past its time limit (--timeout, a step or a
cell); then everything it started is ended, and the next step runs. The whole check
keeps within --budget (by default it fits one 9-minute call on a lent GPU machine): a
step gets at most what is left, and the steps the budget cut are named. The report
folder (build/gpu-check) holds the step logs, executed/{en,zh}/*.ipynb and run.json (the
machine and each step's outcome), which tools/publish_gpu.py reads. gpu-check lists the
files it writes in the folder's .gpu-check-report and replaces only those: it refuses a
folder that holds any other file. Exits 1 if a step failed, was cut or could not run.
Without a GPU it says so, skips the nccl demo and runs the rest on the CPU (what it then
saves is a CPU run).
"""

import argparse
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from glob import glob
from importlib.util import find_spec
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # d2l_gpu from this tree, installed or not
from d2l_gpu.__main__ import check_lines  # noqa: E402
from d2l_gpu.report import nvidia_smi  # noqa: E402

DEMO = "notebooks/scripts/all_reduce_demo.py"
LESSONS = ["notebooks/en/[0-9]*.ipynb", "notebooks/zh/[0-9]*.ipynb"]
NEEDS = {
    "gpu-tests": ["pytest"],
    "lessons": ["nbclient", "nbformat", "ipykernel", "numpy", "matplotlib"],
}
WHEELS = "pytest nbval nbclient ipykernel jupytext numpy matplotlib"  # CONTRIBUTING.md's PKGS
STEP = "D2L_GPU_CHECK_STEP"  # each step's processes carry it in their environment
MARK = ".gpu-check-report"  # in every report folder this tool made: the files it wrote
BUDGET = 480  # seconds: a 9-minute call, less a minute for installing wheels and copying
HEADINGS = {"failed": "failed", "cut": "cut by the budget", "not run": "not run"}  # in the summary


def seconds(text: str) -> float:
    """argparse's type for --timeout and --budget: a finite number of seconds > 0."""
    value = float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"a number of seconds > 0 is needed, got {text}")
    return value


def command(args: list[str]) -> str | None:
    """What a command prints, or None when it is missing or fails."""
    try:
        done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine() -> dict:
    """The facts run.json records about this machine and its software."""
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if not names and torch.backends.mps.is_available():
        names = ["mps"]
    notes = []
    try:
        driver = (nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader") or "").split()
    except TimeoutError as hung:  # a wedged driver: said, and the check goes on
        driver, notes = [], [f"{hung}, so the driver is not recorded"]
    inside = command(["git", "rev-parse", "--show-toplevel"]) == str(ROOT)
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": command(["git", "rev-parse", "HEAD"]) if inside else None,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": driver[0] if driver else None,
        "gpus": names,
        "notes": notes,
    }


def end_all(key: str) -> None:
    """Kill every process whose environment holds STEP=key: all that a step started,
    torchrun's ranks too, which sit in process groups of their own (Linux's /proc)."""
    mark, me = f"{STEP}={key}".encode(), str(os.getpid())
    for _ in range(20):  # again, in case one started another meanwhile; bounded
        found = []
        for environ in Path("/proc").glob("[0-9]*/environ"):
            try:
                if environ.parent.name != me and mark in environ.read_bytes().split(b"\0"):
                    found.append(int(environ.parent.name))
            except OSError:  # gone, or not ours
                pass
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not found:
            return
        time.sleep(0.1)


def run_step(report: Path, name: str, args: list[str], timeout: float) -> tuple[str, str, float]:
    """Run `python args...` from the repository root, its output logged in the report;
    when it ends or times out, whatever it started is ended too."""
    tik, key = time.monotonic(), uuid.uuid4().hex
    with open(claim(report, f"{name}.log"), "w", encoding="utf-8") as log:
        log.write(f"$ python {' '.join(args)}\n")
        log.flush()
        # A file, not a pipe: a process that outlives the step cannot keep us waiting.
        child = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, STEP: key},  # inherited by all it starts, unlike a group
            start_new_session=True,
        )
        try:
            child.wait(timeout)
            outcome = (
                "passed" if child.returncode == 0 else f"failed: exit status {child.returncode}"
            )
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # its group (where there is no /proc)
            outcome = f"failed: timed out after {timeout:.0f} s"
        end_all(key)
        child.wait()
    return name, outcome, time.monotonic() - tik


def execute(notebook: Path, target: Path, timeout: float, deadline: float) -> tuple[str, float]:
    """Execute one lesson in a fresh kernel, in its folder, each cell within timeout and
    the whole before deadline; save it as it ran, even if it failed."""
    import nbformat
    from nbclient import NotebookClient

    tik = time.monotonic()
    try:
        lesson = nbformat.read(notebook, as_version=4)
    except Exception as error:  # not JSON, not a notebook: nothing to run or save
        return f"failed: not a notebook ({type(error).__name__})", time.monotonic() - tik
    client = NotebookClient(
        lesson,
        kernel_name="python3",
        timeout=max(1, int(timeout)),  # waits outside a cell
        timeout_func=lambda cell: round(max(1, min(timeout, deadline - time.monotonic()))),
        startup_timeout=int(max(1, min(60, deadline - time.monotonic()))),
        record_timing=False,
        resources={"metadata": {"path": str(notebook.parent)}},
        extra_arguments=["--IPKernelApp.log_level=CRITICAL"],  # no kernel log in the summary
    )
    key = uuid.uuid4().hex  # carried by the kernel and all it starts (a cell's torchrun)
    try:
        client.execute(env={**os.environ, STEP: key})
        outcome = "passed"
    except Exception as error:  # a cell raised or ran past its time limit
        lines = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().splitlines() or [""]
        said = lines[0] if isinstance(error, TimeoutError) else lines[-1]  # not a cell's preview
        outcome = f"failed: {type(error).__name__}: {said[:300]}"  # the exception's line
    end_all(key)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(lesson, target)
    return outcome, time.monotonic() - tik


def claim(report: Path, name: str) -> Path:
    """List a file in the report's MARK before writing it: a later run replaces it."""
    with open(report / MARK, "a", encoding="utf-8") as mark:
        mark.write(f"{name}\n")
    return report / name


def fresh(report: Path) -> None:
    """Delete the files an earlier run listed in the report folder's MARK; change nothing
    in a folder that holds any other file (the user's)."""
    if report.exists() and not report.is_dir():
        raise SystemExit(f"gpu-check: {report} is a file; --report takes a folder")
    mark, files = report / MARK, {}
    if report.is_dir() and any(report.iterdir()):
        if not mark.is_file():  # the checkout, notebooks/gpu, ...: not even walked
            raise SystemExit(
                f"gpu-check: {report} holds files gpu-check did not write (it has no {MARK}), "
                "so it is left as it is: give --report a new folder, or one gpu-check wrote"
            )
        listed = {MARK, *mark.read_text("utf-8", "replace").splitlines()[1:]}
        for path in report.rglob("*"):  # follows no link
            if path.is_symlink() or not path.is_dir():
                files[path.relative_to(report).as_posix()] = path
        if others := sorted(set(files) - listed):
            raise SystemExit(
                f"gpu-check: {report} holds files gpu-check did not write ({', '.join(others[:3])}"
                "), so it is left as it is: give --report a new folder, or move them"
            )
    try:
        for path in files.values():
            path.unlink()
        report.mkdir(parents=True, exist_ok=True)
        mark.write_text("tools/gpu_check.py wrote the files listed below\n")
    except OSError as error:
        raise SystemExit(f"gpu-check: cannot write a report in {report}: {error}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=ROOT / "build" / "gpu-check")
    parser.add_argument("--lessons", nargs="+", default=LESSONS, help="globs of .ipynb files")
    parser.add_argument("--tests", default="tests", help="where pytest looks for gpu tests")
    parser.add_argument("--timeout", type=seconds, default=120, help="seconds a step or a cell")
    parser.add_argument("--budget", type=seconds, default=BUDGET, help="seconds for them all")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.budget
    lessons = sorted({ROOT / p for pattern in args.lessons for p in glob(pattern, root_dir=ROOT)})
    named = Counter(f"{notebook.parent.name}/{notebook.stem}" for notebook in lessons)
    if twice := [name for name, n in named.items() if n > 1]:  # one step name, one saved file
        raise SystemExit(f"gpu-check: two lessons are step {twice[0]}: give --lessons one of them")
    report = args.report.resolve()
    fresh(report)
    # Kernels, pytest and torchrun import d2l_gpu from this tree, installed or not, and
    # carried wheels from PYTHONPATH, made absolute: lessons run in their own folders.
    paths = [str(ROOT), *filter(None, os.getenv("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in paths)
    facts, steps = machine(), []
    for note in facts["notes"]:
        print(f"gpu-check: {note}")

    def record(step: str, outcome: str, seconds: float = 0) -> None:
        if "timed out" in outcome and deadline - time.monotonic() < 1:  # the budget's limit
            outcome = f"cut: the budget of {args.budget:g} s ran out while it ran ({outcome})"
        steps.append({"step": step, "outcome": outcome, "seconds": round(seconds, 1)})
        print(f"{step}: {outcome} ({seconds:.1f} s)", flush=True)

    def limit(step: str) -> float | None:
        """A step's time: --timeout, or what is left of the budget (None: spent, said)."""
        if (left := deadline - time.monotonic()) < 1:
            record(step, f"cut: the budget of {args.budget:g} s was spent before it started")
            return None
        return min(args.timeout, left)

    def lacks(step: str, what: str) -> bool:
        """Whether this Python lacks what a step needs (then said, with the command)."""
        if missing := [name for name in NEEDS[step] if find_spec(name) is None]:
            python = sys.executable
            record(step, (
                f"not run: {what} need {', '.join(missing)}, which this Python lacks; "
                f"CONTRIBUTING.md's wheel recipe adds them: {python} -m pip install --no-index "
                f"--find-links build/wheels --target build/gpu-packages {WHEELS}, then "
                f"PYTHONPATH=build/gpu-packages make gpu-check GPU_PYTHON={python}"
            ))  # fmt: skip
        return bool(missing)

    print(f"gpu-check: torch {facts['torch']}, Python {facts['python']}, GPUs: {facts['gpus']}")
    # torch alone (no notebook extras): it fails when nvidia-smi lists GPUs torch cannot see.
    lines = check_lines({})
    if problems := [text for ok, text in lines if ok is False]:
        record("gpus", f"failed: {'; '.join(problems)}")  # the steps below would prove nothing
        return finish(report, facts, steps)
    for text in [text for ok, text in lines if ok is None]:
        print(f"gpu-check: {text}")
    if not facts["gpus"]:
        print("No GPU: torch sees none. The gpu tests skip, the nccl demo cannot run, and the")
        print("lessons run on the CPU (what is saved is a CPU run, not a GPU's).")
    if timeout := limit("info"):
        record(*run_step(report, "info", ["-m", "d2l_gpu", "info"], timeout))
    pytest = ["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "gpu", args.tests]
    if not lacks("gpu-tests", "the gpu tests") and (timeout := limit("gpu-tests")):
        record(*run_step(report, "gpu-tests", pytest, timeout))
    if not (cuda := torch.cuda.device_count()):
        record("torchrun-nccl", "skipped: no CUDA GPU")
    elif timeout := limit("torchrun-nccl"):
        demo = ["-m", "torch.distributed.run", "--standalone", "--local-addr", "127.0.0.1"]
        demo += ["--nproc-per-node", str(cuda), DEMO, "--backend", "nccl"]
        record(*run_step(report, "torchrun-nccl", demo, timeout))
    if not lessons:
        record("lessons", f"failed: no lesson matches {args.lessons}")
    elif not lacks("lessons", f"the {len(lessons)} lessons"):
        for notebook in lessons:
            name = f"{notebook.parent.name}/{notebook.stem}"
            if timeout := limit(name):
                target = claim(report, f"executed/{name}{notebook.suffix}")
                record(name, *execute(notebook, target, timeout, deadline))
    return finish(report, facts, steps)


def finish(report: Path, facts: dict, steps: list[dict]) -> int:
    """Write run.json, say what failed, was cut or could not run; 1 if any."""
    run = {**facts, "steps": steps}
    claim(report, "run.json").write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    said = []
    for kind, heading in HEADINGS.items():
        if names := [s["step"] for s in steps if s["outcome"].startswith(kind)]:
            said.append(f"{heading}: {', '.join(names)}")
    print(
        f"gpu-check: {len(steps)} steps, {'; '.join(said) or 'no step failed'}; report in {report}"
    )
    return 1 if said else 0


if __name__ == "__main__":
    sys.exit(main())
