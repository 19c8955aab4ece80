#!/usr/bin/env python3
"""Run everything that needs a GPU, on a borrowed GPU machine, and summarize it.

Needs only Python and torch (no Jupyter, no network): `make gpu-check`, or from
the repository root `python3 .ci/gpu_check.py`. The wheels `make gpu-wheels`
carried are installed into the report folder, only those this Python lacks.
Then, each with a time limit: fail at once if the machine lists a GPU torch
cannot see; `python -m d2l_gpu info`; figures (clocks, benchmark(), transfers,
matrix products); the tests that take a GPU path; the torchrun all-reduce demo
on nccl, one rank per CUDA GPU; every lesson through nbval against its stored
outputs (kept as executed in the report folder); then, per lesson, whether its en
and zh runs printed the same verdicts. The summary says, per check, passed /
failed / skipped and why, then the figures with their goals and limits, each
lesson's key results and its verdicts. ``run.json`` in the report folder holds the
same for tools (.ci/publish_gpu_outputs.py). Exits 1 if a check failed, else 0.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_lessons  # noqa: E402
import gpu_wheels  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci"
CHECKS = ("info", "figures", "tests", "torchrun", "notebooks")
DEMO = Path("notebooks/scripts/all_reduce_demo.py")
# The test files whose tests take a GPU path when there is one, run whole; elsewhere
# only the gpu-marked tests.
GPU_PATH_TESTS = ("tests/test_distributed.py", "tests/test_report.py", "tests/test_cli.py")
# Seconds each kind of check may take; all of them share --budget.
LIMITS = {"probe": 60, "info": 60, "figures": 90, "tests": 200, "notebook": 150, "torchrun": 120}
# Where a Linux machine shows NVIDIA and AMD GPUs, whatever torch makes of them.
DEVICE_FILES = ("/dev/nvidia0", "/dev/kfd")
HIDING = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")

PROBE = """
import json, torch
acc = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
backend = getattr(torch, acc.type, None) if acc else None  # torch.cuda, torch.mps, ...
name = backend.get_device_name(0) if hasattr(backend, "get_device_name") else acc and acc.type
print(json.dumps({
    "torch": torch.__version__,
    "cuda_build": torch.version.cuda,
    "hip_build": getattr(torch.version, "hip", None),
    "kind": acc.type if acc else None,
    "count": torch.accelerator.device_count() if acc else 0,
    "cuda": torch.cuda.device_count() if torch.cuda.is_available() else 0,
    "name": name,
}))
"""
NOTEBOOK_STACK = "import pytest, nbval, ipykernel, nbformat"


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


def _failure(name: str, code: int | None, seconds: float, output: str) -> Result:
    if code is None:
        return Result(name, "failed", f"timed out after {seconds:.0f} s", seconds)
    return Result(name, "failed", f"exit {code}: {gpu_lessons.exception_line(output)}", seconds)


def probe(runner: Runner) -> dict | None:
    code, _, output = runner.run(["-c", PROBE], "probe.log", LIMITS["probe"])
    if code != 0:
        return None
    return gpu_lessons.last_json(output)


def listed_gpus(device_files: tuple[str, ...] = DEVICE_FILES) -> list[str]:
    """What the machine itself shows of its GPUs: `nvidia-smi -L` lines, device files."""
    found = []
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            run = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            found += [line.strip() for line in run.stdout.splitlines() if line.startswith("GPU")]
        except (OSError, subprocess.TimeoutExpired):
            pass  # a hung or broken nvidia-smi proves nothing either way
    return found + [path for path in device_files if os.path.exists(path)]


def check_hardware(machine: dict, env: dict, device_files: tuple[str, ...] = DEVICE_FILES):
    """A failed Result when the machine has a GPU that torch cannot see, else None."""
    if machine["count"]:
        return None
    hidden = [name for name in HIDING if env.get(name, "unset").strip() in ("", "-1")]
    listed = listed_gpus(device_files)
    if not listed or hidden:
        return None  # no GPU, or one the user hid on purpose
    why = (
        f"this machine lists {'; '.join(listed)}, but torch {machine['torch']} "
        f"(built for CUDA {machine['cuda_build'] or 'none'}, HIP {machine['hip_build'] or 'none'}) "
        "sees no GPU: a CPU-only torch wheel, a driver too old for this build, or a carried "
        ".venv (make install pins a CPU torch); run with a Python whose torch sees the GPU"
    )
    return Result("GPU hardware", "failed", why)


def check_info(runner: Runner) -> Result:
    code, seconds, output = runner.run(["-m", "d2l_gpu", "info"], "info.txt", LIMITS["info"])
    if code == 0:
        return Result("info", "passed", seconds=seconds)
    return _failure("info", code, seconds, output)


def check_figures(runner: Runner, rows: list[dict]) -> Result:
    name = "figures"
    args = [str(CI / "gpu_figures.py")]
    code, seconds, output = runner.run(args, "figures.log", LIMITS["figures"])
    if code != 0:
        return _failure(name, code, seconds, output)
    rows += gpu_lessons.last_json(output)
    if all(r["verdict"] == "no GPU" for r in rows):
        return Result(name, "skipped", "no GPU: nothing to measure", seconds)
    missed = [r["what"] for r in rows if r["hard"] and r["verdict"] == "misses"]
    if missed:
        return Result(name, "failed", f"missed the goal: {'; '.join(missed)}", seconds)
    return Result(name, "passed", f"{len(rows)} figures, table below", seconds)


def _gpu_marked_files() -> list[str]:
    files = sorted((ROOT / "tests").glob("test_*.py"))
    return [str(f.relative_to(ROOT)) for f in files if "pytest.mark.gpu" in f.read_text("utf-8")]


def _junit_counts(path: Path) -> dict[str, int]:
    import xml.etree.ElementTree as ElementTree

    suite = ElementTree.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return {key: int(suite.get(key, 0)) for key in ("tests", "skipped", "failures", "errors")}


def check_tests(runner: Runner, machine: dict) -> Result:
    name = "gpu tests"
    code, _, output = runner.run(["-c", "import pytest"], "pytest-probe.log", 60)
    if code != 0:
        why = f"pytest does not import ({gpu_lessons.exception_line(output)}): make gpu-wheels"
        return Result(name, "failed", why)
    # With a GPU: the files whose tests take a GPU path, whole, then the gpu-marked rest.
    runs = [("gpu-tests", ["-m", "gpu", *_gpu_marked_files()])]
    if machine["count"]:
        rest = [f for f in _gpu_marked_files() if f not in GPU_PATH_TESTS]
        runs = [("gpu-path-tests", list(GPU_PATH_TESTS))]
        runs += [("gpu-tests", ["-m", "gpu", *rest])] if rest else []
    total = {"tests": 0, "skipped": 0}
    seconds = 0.0
    for log, selection in runs:
        junit = runner.report / f"{log}.xml"
        junit.unlink(missing_ok=True)
        args = ["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--junitxml", str(junit)]
        code, took, output = runner.run(args + selection, f"{log}.log", LIMITS["tests"])
        seconds += took
        if code != 0 or not junit.is_file():
            return _failure(name, code, seconds, output)
        counts = _junit_counts(junit)
        total = {key: total[key] + counts[key] for key in total}
    ran = total["tests"] - total["skipped"]
    if not machine["count"]:
        why = f"no GPU: all {total['tests']} gpu-marked tests skipped (pytest works)"
        return Result(name, "skipped", why, seconds)
    return Result(name, "passed", f"{ran} passed, {total['skipped']} skipped", seconds)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def check_torchrun(runner: Runner, machine: dict) -> Result:
    name = "torchrun nccl demo"
    if not machine["cuda"]:
        return Result(name, "skipped", "no CUDA GPU: nccl needs one")
    if not (ROOT / DEMO).is_file():
        return Result(name, "failed", f"{DEMO} not found")
    n = machine["cuda"]
    # One node on loopback: rank 0 would otherwise publish socket.getfqdn(), which often
    # does not resolve in containers, and older torch would take port 29500 as given.
    args = ["-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(n)]
    args += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]
    args += ["--local-addr", "127.0.0.1", str(DEMO), "--backend", "nccl"]
    # One rank per CUDA GPU: with D2L_DEVICE=cuda:1 (or cpu) every rank would take the
    # same device (or none), and the demo would rightly refuse nccl.
    env = {k: v for k, v in runner.env.items() if k != "D2L_DEVICE"}
    code, seconds, output = runner.run(args, "torchrun.log", LIMITS["torchrun"], env=env)
    if code != 0:
        return _failure(name, code, seconds, output)
    if n == 1:
        why = (
            "1 rank: nccl initialises, no traffic between GPUs; "
            "several GPUs: not verifiable on this machine"
        )
        return Result(name, "passed", why, seconds)
    return Result(name, "passed", f"{n} ranks, one per GPU, all-reduce over nccl", seconds)


def check_lesson(runner: Runner, script: Path, env: dict, mode: str, limit: float) -> Result:
    """One lesson: through nbval (mode "nbval"), or as a plain script."""
    name = f"lesson {script.parent.name}/{script.stem}"
    watched = [script.parent, ROOT / "notebooks"]
    before = gpu_lessons.files_under(watched)
    log = f"lessons/{script.parent.name}-{script.stem}.log"
    if mode == "nbval":
        notebook = script.with_suffix(".ipynb")
        if not notebook.is_file():
            return Result(name, "failed", f"no stored outputs: {notebook.name} not found")
        executed = runner.report / "executed" / script.parent.name
        record = executed / f"{script.stem}.json"
        record.unlink(missing_ok=True)
        # The kernel draws figures inline, as when the outputs were stored; Agg would
        # leave a plt.show() cell without its figure.
        env = {k: v for k, v in env.items() if k != "MPLBACKEND"}
        env[gpu_lessons.FOLDER_VARIABLE] = str(executed)
        env["PYTHONPATH"] = os.pathsep.join([str(CI), env["PYTHONPATH"]])
        args = gpu_lessons.nbval_args(notebook, cell_timeout=limit)
        code, seconds, output = runner.run(args, log, limit, cwd=script.parent, env=env)
        outcome = gpu_lessons.judge_nbval(notebook, code, seconds, output, record)
    else:
        code, seconds, output = runner.run([script.name], log, limit, cwd=script.parent, env=env)
        outcome = gpu_lessons.judge_script(code, seconds, output, compared=mode == "scripts")
    left = gpu_lessons.left_behind(before, watched, script.parent)
    if left and outcome.status == "passed":
        return Result(name, "failed", f"left files behind: {', '.join(left)}", seconds)
    return Result(name, outcome.status, outcome.why, seconds)


def check_verdicts(executed: Path) -> list[Result]:
    """Per lesson: did its en and zh runs print the same verdicts (d2l_gpu.compare's)?"""
    judged = gpu_lessons.verdicts_agree(gpu_lessons.verdict_lines(executed))
    return [Result(f"en/zh verdicts {stem}", status, why) for stem, status, why in judged]


def prepare_wheels(runner: Runner, wheels: Path) -> Result:
    site = runner.report / "site"
    shutil.rmtree(site, ignore_errors=True)
    tik = time.monotonic()
    installed, problem = gpu_wheels.install(runner.run, wheels, site)
    seconds = time.monotonic() - tik
    if problem:
        return Result("carried wheels", "failed", problem, seconds)
    runner.env = gpu_wheels.with_site(runner.env, site)
    if installed:
        shown = ", ".join(installed[:8]) + (
            f" and {len(installed) - 8} more" if len(installed) > 8 else ""
        )
        why = f"installed {len(installed)} into {site}: {shown} (list in wheels-install.log)"
        return Result("carried wheels", "passed", why, seconds)
    if any(wheels.rglob("*.whl")):
        return Result("carried wheels", "passed", "this Python has every one already", seconds)
    return Result("carried wheels", "skipped", f"none in {wheels}")


def run_checks(args: argparse.Namespace, runner: Runner, rows: list[dict]):
    machine = probe(runner)
    if machine is None:
        log = runner.report / "probe.log"
        return "torch does not import", [Result("torch", "failed", f"see {log}")], None
    gpus = f"{machine['count']} {machine['kind']} device(s)" if machine["count"] else "no GPU"
    header = f"torch {machine['torch']}, {gpus}, Python {sys.version.split()[0]}"
    if "D2L_DEVICE" in runner.env:  # the lessons run on what it names
        header += f", D2L_DEVICE={runner.env['D2L_DEVICE']}"
    unseen = check_hardware(machine, runner.env)
    if unseen:  # every later step would run on the CPU and prove nothing
        return header, [unseen], machine

    results = [prepare_wheels(runner, args.wheels)]
    print(results[-1].line(), flush=True)
    mode = "scripts" if args.as_scripts else "nbval"
    if mode == "nbval":
        code, _, _ = runner.run(["-c", NOTEBOOK_STACK], "nbval-probe.log", 60)
        mode = "nbval" if code == 0 else "uncompared"
    limit = args.lesson_timeout

    planned: list[tuple[str, str, Callable[[], Result]]] = [
        ("info", "info", lambda: check_info(runner)),
        ("figures", "figures", lambda: check_figures(runner, rows)),
        ("tests", "gpu tests", lambda: check_tests(runner, machine)),
        # Before the lessons: one short command, and the one check no CPU run can stand
        # in for, so a budget the lessons use up never skips it.
        ("torchrun", "torchrun nccl demo", lambda: check_torchrun(runner, machine)),
    ]
    found = (glob.glob(str(ROOT / pattern)) for pattern in args.notebooks)
    scripts = sorted({Path(p).resolve() for paths in found for p in paths})
    if not scripts:
        why = f"no file matches {args.notebooks}"
        planned.append(("notebooks", "lessons", lambda: Result("lessons", "failed", why)))
    for script in scripts:
        name = f"lesson {script.parent.name}/{script.stem}"
        check = lambda s=script: check_lesson(runner, s, runner.env, mode, limit)  # noqa: E731
        planned.append(("notebooks", name, check))

    for group, name, check in planned:
        if group not in args.only:
            results.append(Result(name, "skipped", "not selected (--only)"))
        elif runner.time_left() < 5:
            why = f"time budget of {args.budget:.0f} s spent (--budget, GPU_BUDGET)"
            results.append(Result(name, "failed", why))
        else:
            results.append(check())
            print(results[-1].line(), flush=True)
    if "notebooks" in args.only:
        if mode == "nbval":
            results += check_verdicts(runner.report / "executed")
        else:
            why = "the lessons ran as scripts: no outputs were kept to compare"
            results.append(Result("en/zh verdicts", "skipped", why))
    return header, results, machine


def _limit(row: dict) -> str:
    if row.get("fraction") is not None:
        return f"  | {row['fraction']:.2f} of {row['limit']}"
    return f"  | {row['limit']}" if row.get("limit") else ""


def table(rows: list[dict], keys: list[tuple[str, str]], verdicts: dict[str, list[str]]):
    """The closing table: each figure with its goal and limit, then the lessons' key
    results and their verdicts."""
    lines = ["", "figures (what was measured, the goal it is held to, verdict, limit):"]
    if not rows:
        lines.append("  not measured (figures not selected or failed)")
    width = max((len(r["what"]) for r in rows), default=0)
    for r in rows:
        figure = f"  {r['what']:<{width}}  {r['value']}  | goal {r['goal']}: {r['verdict']}"
        lines.append(figure + _limit(r))
    lines += ["", "key results (cells tagged key-result, as executed in this run):"]
    if not keys:
        lines.append("  none: no executed lesson has a cell tagged key-result")
    lines += [f"  {lesson}: {line}" for lesson, line in keys]
    lines += ["", "verdicts (lines d2l_gpu.compare printed, as executed in this run):"]
    found = [(lesson, line) for lesson, printed in verdicts.items() for line in printed]
    if not found:
        lines.append("  none: no executed lesson printed a verdict")
    lines += [f"  {lesson}: {line}" for lesson, line in found]
    return lines


def _command(args: list[str]) -> str | None:
    """The first line a command run in the tree prints, or None if it is missing or fails."""
    try:
        run = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = run.stdout.strip().splitlines()
    return lines[0].strip() if run.returncode == 0 and lines else None


def run_record(machine: dict | None, results: list[Result], rows: list[dict]) -> dict:
    """What run.json holds: the machine, the checks, the figures and each lesson's outcome."""
    smi = shutil.which("nvidia-smi")
    query = [smi, "--query-gpu=driver_version,name", "--format=csv,noheader"] if smi else None
    driver = _command(query) if query else None
    # A copy of the tree without its .git (or inside another repository) has no commit.
    ours = _command(["git", "rev-parse", "--show-toplevel"]) == str(ROOT)
    prefix = "lesson "
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": _command(["git", "rev-parse", "HEAD"]) if ours else None,
        "python": sys.version.split()[0],
        "torch": machine and machine["torch"],
        "cuda": machine and machine["cuda_build"],
        "driver": driver.split(",")[0].strip() if driver else None,
        "gpu": machine and machine["name"],
        "gpus": machine["count"] if machine else 0,
        "checks": [{**asdict(r), "seconds": r.seconds and round(r.seconds, 1)} for r in results],
        "figures": rows,
        "lessons": {
            r.name[len(prefix) :]: {"status": r.status, "why": r.why}
            for r in results
            if r.name.startswith(prefix) and r.status != "skipped"
        },
    }


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
        help="glob patterns of lesson sources (.py; their .ipynb holds the stored outputs)",
    )
    parser.add_argument(
        "--as-scripts",
        action="store_true",
        help="run the lessons as plain scripts without comparing outputs (a quicker look)",
    )
    parser.add_argument(
        "--lesson-timeout", type=float, default=LIMITS["notebook"], help="seconds per lesson"
    )
    parser.add_argument("--budget", type=float, default=460, help="seconds for the whole run")
    args = parser.parse_args(argv)
    unknown = set(args.only) - set(CHECKS)
    if unknown:
        parser.error(f"--only: unknown check(s) {sorted(unknown)}; choose from {list(CHECKS)}")
    if args.lesson_timeout <= 0 or args.budget <= 0:
        parser.error("--lesson-timeout and --budget must be positive numbers of seconds")
    # Absolute: lessons run in their own folders and write their record there.
    args.report, args.wheels = args.report.resolve(), args.wheels.resolve()
    args.report.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.report / "executed", ignore_errors=True)

    tik = time.monotonic()
    runner = Runner(args.report, args.budget)
    rows: list[dict] = []
    header, results, machine = run_checks(args, runner, rows)
    executed = args.report / "executed"
    keys = gpu_lessons.key_results(executed)
    lines = [f"gpu-check summary: {header}; logs in {args.report}"]
    lines += [r.line() for r in results]
    lines += table(rows, keys, gpu_lessons.verdict_lines(executed))
    failed = sum(r.status == "failed" for r in results)
    lines += [
        "",
        f"{'FAILED' if failed else 'passed'}: {failed} check(s) failed, "
        f"{time.monotonic() - tik:.0f} s in all",
    ]
    summary = "\n".join(lines)
    (args.report / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    record = json.dumps(run_record(machine, results, rows), indent=1, ensure_ascii=False)
    (args.report / "run.json").write_text(record + "\n", encoding="utf-8")
    print("\n" + summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
