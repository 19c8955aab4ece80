"""Everything that needs a GPU, run on a GPU machine: python tools/gpu_check.py

Needs Python with torch, plus pytest, nbclient, nbformat and ipykernel (and what the
lessons import: numpy, matplotlib); a box without network gets them as wheels
(CONTRIBUTING.md has the recipe). Steps, in order:

1. the GPUs: fails, and stops, when nvidia-smi lists GPUs that torch cannot see;
2. `python -m d2l_gpu info`;
3. `pytest -m gpu tests`;
4. the torchrun all-reduce demo over nccl, one process per CUDA GPU;
5. every lesson (en and zh) executed with nbclient, saved as it ran.

A step fails on an error or when it runs past its time limit; a failed step does not
stop the ones after it. The report folder (build/gpu-check) holds the step logs,
executed/{en,zh}/*.ipynb and run.json (the machine and each step's outcome), which
tools/publish_gpu.py reads. Exits 1 if a step failed. Without a GPU it says so, skips
the nccl demo and runs the rest on the CPU (what it then saves is a CPU run).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from glob import glob
from importlib.util import find_spec
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # d2l_gpu from this tree, installed or not
from d2l_gpu.__main__ import check_lines  # noqa: E402

DEMO = "notebooks/scripts/all_reduce_demo.py"
LESSONS = ["notebooks/en/[0-9]*.ipynb", "notebooks/zh/[0-9]*.ipynb"]
NEEDS = ["pytest", "nbclient", "nbformat", "ipykernel", "numpy", "matplotlib"]


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
    driver = command(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    inside = command(["git", "rev-parse", "--show-toplevel"]) == str(ROOT)
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": command(["git", "rev-parse", "HEAD"]) if inside else None,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": driver.splitlines()[0] if driver else None,
        "gpus": names,
    }


def run_step(report: Path, name: str, args: list[str], timeout: float) -> tuple[str, str, float]:
    """Run `python args...` from the repository root, its output logged in the report."""
    tik = time.monotonic()
    # Its own process group, so that a timeout also ends what it started (torchrun's ranks).
    child = subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        output, _ = child.communicate(timeout=timeout)
        outcome = "passed" if child.returncode == 0 else f"failed: exit status {child.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, 9)
        output, _ = child.communicate()
        outcome = f"failed: timed out after {timeout:.0f} s"
    (report / f"{name}.log").write_text(f"$ python {' '.join(args)}\n{output}", encoding="utf-8")
    return name, outcome, time.monotonic() - tik


def execute(notebook: Path, target: Path, timeout: float) -> tuple[str, float]:
    """Execute one lesson in a fresh kernel, in its folder; save it as it ran, even if it failed."""
    import nbformat
    from nbclient import NotebookClient

    tik = time.monotonic()
    lesson = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        lesson,
        kernel_name="python3",
        timeout=timeout,
        record_timing=False,
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    try:
        client.execute()
        outcome = "passed"
    except Exception as error:  # a cell raised or ran past its time limit
        lines = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().splitlines() or [""]
        outcome = f"failed: {type(error).__name__}: {lines[-1][:300]}"  # the exception's line
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(lesson, target)
    return outcome, time.monotonic() - tik


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=ROOT / "build" / "gpu-check")
    parser.add_argument("--lessons", nargs="+", default=LESSONS, help="globs of .ipynb files")
    parser.add_argument("--tests", default="tests", help="where pytest looks for gpu tests")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per step or cell")
    args = parser.parse_args(argv)
    report = args.report.resolve()
    shutil.rmtree(report, ignore_errors=True)
    report.mkdir(parents=True)
    # Kernels, pytest and torchrun import d2l_gpu from this tree, installed or not, and
    # carried wheels from PYTHONPATH, made absolute: lessons run in their own folders.
    paths = [str(ROOT), *filter(None, os.getenv("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in paths)
    facts, steps = machine(), []

    def record(step: str, outcome: str, seconds: float = 0) -> None:
        steps.append({"step": step, "outcome": outcome, "seconds": round(seconds, 1)})
        print(f"{step}: {outcome} ({seconds:.1f} s)", flush=True)

    print(f"gpu-check: torch {facts['torch']}, Python {facts['python']}, GPUs: {facts['gpus']}")
    # torch alone (no notebook extras): it fails when nvidia-smi lists GPUs torch cannot see.
    if problems := [text for ok, text in check_lines({}) if not ok]:
        record("gpus", f"failed: {'; '.join(problems)}")  # the steps below would prove nothing
        return finish(report, facts, steps)
    if not facts["gpus"]:
        print("No GPU: torch sees none. The gpu tests skip, the nccl demo cannot run, and the")
        print("lessons run on the CPU (what is saved is a CPU run, not a GPU's).")
    record(*run_step(report, "info", ["-m", "d2l_gpu", "info"], args.timeout))
    if missing := [name for name in NEEDS if find_spec(name) is None]:
        record("packages", f"failed: this Python lacks {', '.join(missing)} (see CONTRIBUTING.md)")
    else:
        pytest = ["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "gpu", args.tests]
        record(*run_step(report, "gpu-tests", pytest, args.timeout))
    if cuda := torch.cuda.device_count():
        demo = ["-m", "torch.distributed.run", "--standalone", "--local-addr", "127.0.0.1"]
        demo += ["--nproc-per-node", str(cuda), DEMO, "--backend", "nccl"]
        record(*run_step(report, "torchrun-nccl", demo, args.timeout))
    else:
        record("torchrun-nccl", "skipped: no CUDA GPU")
    lessons = sorted({ROOT / p for pattern in args.lessons for p in glob(pattern, root_dir=ROOT)})
    if not lessons:
        record("lessons", f"failed: no lesson matches {args.lessons}")
    for notebook in [] if missing else lessons:
        target = report / "executed" / notebook.parent.name / notebook.name
        record(f"{notebook.parent.name}/{notebook.stem}", *execute(notebook, target, args.timeout))
    return finish(report, facts, steps)


def finish(report: Path, facts: dict, steps: list[dict]) -> int:
    """Write run.json, say what failed; 1 if a step failed."""
    run = {**facts, "steps": steps}
    (report / "run.json").write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    failed = [s["step"] for s in steps if s["outcome"].startswith("failed")]
    verdict = f"failed: {', '.join(failed)}" if failed else "no step failed"
    print(f"gpu-check: {len(steps)} steps, {verdict}; report in {report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
