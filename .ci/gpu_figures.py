"""Measure what the GPU half of the lessons claims, for gpu_check's closing table.

Run as a child of gpu_check (``python .ci/gpu_figures.py``); prints one JSON list
of rows: what was measured, the figure, the goal it is held to, a verdict
(``meets``, ``misses`` or ``no GPU``), and where a figure has one, its limit and
the fraction of it reached. ``hard`` rows are claims the lessons and helpers make
(a miss fails the run); the others are the machine's figures, with the direction
a reader is told to expect. Rates are decimal (GB/s, TFLOP/s), as datasheets count.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

import torch

import d2l_gpu
from d2l_gpu.timing import MIN_RUNS


class Peaks(NamedTuple):
    """A card's datasheet peaks: TFLOP/s of float32 (no tensor cores) and of dense
    bfloat16 (None: no bfloat16 tensor cores), and its memory's TB/s."""

    fp32: float
    bf16: float | None
    memory: float


# From NVIDIA's datasheets, keyed by the name torch reports. "Dense": the datasheets'
# larger bf16 figures assume 2:4 sparsity, which a plain product never has.
PEAKS = {
    "NVIDIA H200": Peaks(67, 989, 4.8),  # SXM; the H200 NVL has lower clocks
    "NVIDIA H100 80GB HBM3": Peaks(67, 989, 3.35),  # H100 SXM
    "NVIDIA H100 PCIe": Peaks(51, 756, 2.0),
    "NVIDIA A100-SXM4-80GB": Peaks(19.5, 312, 2.039),
    "NVIDIA A100-SXM4-40GB": Peaks(19.5, 312, 1.555),
    "NVIDIA L4": Peaks(30.3, 121, 0.3),
    "Tesla T4": Peaks(8.1, None, 0.32),
}
# GB/s one way per PCIe lane, after line encoding (8b/10b to 2.0, 128b/130b from 3.0).
PCIE_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938}
ASSUMED_LINK = (5, 16)  # what an H100/H200-class host offers
PCIE_QUERY = "--query-gpu=pcie.link.gen.max,pcie.link.width.max"

# What a lesson under D2L_DEVICE=cpu calls; afterwards CUDA must be untouched.
CPU_ONLY = """
import contextlib, io, json, torch, d2l_gpu
from d2l_gpu.__main__ import main
x = torch.ones(3, device=d2l_gpu.try_gpu())
d2l_gpu.try_all_gpus(); d2l_gpu.num_gpus(); d2l_gpu.synchronize()
timer = d2l_gpu.Timer(); x + 1; timer.stop()
d2l_gpu.benchmark(lambda: x + 1, min_run_time=0.01)
d2l_gpu.device_report()
with contextlib.redirect_stdout(io.StringIO()):
    main(["info"]); main(["info", "--json"])
has = getattr(torch._C, "_cuda_hasPrimaryContext", None)
count = torch.cuda.device_count()
print(json.dumps({"initialized": torch.cuda.is_initialized(),
                  "contexts": [i for i in range(count) if has and has(i)]}))
"""

ROWS = [  # what, goal, hard: in the order measure() returns them
    ("Timer / CUDA events, same interval", "0.99-1.01", True),
    ("unsynchronized clock / CUDA events", "far below 1 (< 0.5)", True),
    ("benchmark(): empty call", f">= {MIN_RUNS} runs", True),
    ("benchmark(): 2048x2048 product", f">= {MIN_RUNS} runs", True),
    ("host-to-device, pageable memory", "below pinned", False),
    ("host-to-device, pinned memory", "above pageable", False),
    ("device-to-device copy", "above pinned host-to-device", False),
    ("float32 matmul 8192x8192", "below bfloat16", False),
    ("bfloat16 matmul 8192x8192", "above float32", False),
    ("D2L_DEVICE=cpu: CUDA untouched", "not initialised, no context", True),
]
GOALS = {what: (goal, hard) for what, goal, hard in ROWS}


def row(
    what: str,
    value: str,
    verdict: str,
    limit: tuple[float | None, str] | None = None,
    measured: float | None = None,
) -> dict:
    """One figure; ``limit`` is (the peak in the figure's unit or None, what it is)."""
    goal, hard = GOALS[what]
    peak, text = limit or (None, None)
    fraction = round(measured / peak, 3) if peak and measured is not None else None
    return {
        "what": what,
        "value": value,
        "goal": goal,
        "verdict": verdict,
        "hard": hard,
        "limit": text,
        "fraction": fraction,
    }


def no_gpu_rows() -> list[dict]:
    return [row(what, "no GPU", "no GPU") for what, _, _ in ROWS]


def _events(device: torch.device) -> tuple[torch.Event, torch.Event, torch.Stream]:
    """A start and an end event, and the stream of ``device`` to record them on (by
    default an event would go to the current device's stream, which under
    D2L_DEVICE=cuda:1 is another card's)."""
    start, end = (torch.Event(device=device, enable_timing=True) for _ in range(2))
    return start, end, torch.accelerator.current_stream(device)


def _name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def _meets(ok: bool) -> str:
    return "meets" if ok else "misses"


def seconds_per_call(
    fn: Callable[[], object],
    device: torch.device,
    warmup: float = 0.5,
    batch: float = 0.2,
    batches: int = 7,
) -> float:
    """Seconds of device time one call of ``fn`` takes: CUDA events around a batch of
    calls (``batch`` seconds' worth), the median of ``batches`` batches, after about
    ``warmup`` seconds of calls.

    A few products after three warm-ups read low on a fast GPU (its clocks and
    cuBLAS's choice of kernel still settling), and a clock read per call adds the
    wait for the device to every call; events around a batch see the device only.
    """

    def timed(calls: int) -> float:
        start, end, stream = _events(device)
        start.record(stream)
        for _ in range(calls):
            fn()
        end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls

    timed(3)  # the first calls choose kernels and allocate
    per_call = max(timed(3), 1e-6)  # a clock tick, should a batch read as instant
    timed(math.ceil(warmup / per_call))
    calls = math.ceil(batch / per_call)
    return statistics.median(timed(calls) for _ in range(batches))


def clock_rows(device: torch.device) -> list[dict]:
    x = torch.randn(4096, 4096, device=device)

    def work() -> None:
        for _ in range(20):
            x @ x

    work()
    d2l_gpu.synchronize(device)
    synced, unsynced = [], []
    for _ in range(5):
        start, end, stream = _events(device)
        timer = d2l_gpu.Timer(device)
        start.record(stream)
        work()
        end.record(stream)
        seconds = timer.stop()
        end.synchronize()
        synced.append(seconds / (start.elapsed_time(end) / 1e3))

        start, end, stream = _events(device)
        tik = time.perf_counter()
        start.record(stream)
        work()
        end.record(stream)
        seconds = time.perf_counter() - tik
        end.synchronize()
        unsynced.append(seconds / (start.elapsed_time(end) / 1e3))
    ratio, blind = statistics.median(synced), statistics.median(unsynced)
    value = f"{ratio:.4f} (median of 5, 20 products 4096^2 each)"
    return [
        row("Timer / CUDA events, same interval", value, _meets(0.99 <= ratio <= 1.01)),
        row(
            "unsynchronized clock / CUDA events", f"{blind:.4f} (median of 5)", _meets(blind < 0.5)
        ),
    ]


def benchmark_rows(device: torch.device) -> list[dict]:
    a = torch.randn(2048, 2048, device=device)
    rows = []
    for what, fn in (("empty call", lambda: None), ("2048x2048 product", lambda: a @ a)):
        tik = time.perf_counter()
        m = d2l_gpu.benchmark(fn, device=device)
        wall = time.perf_counter() - tik
        verdict = _meets(m.runs >= MIN_RUNS)
        rows.append(row(f"benchmark(): {what}", f"{m}, wall {wall:.2f} s", verdict))
    return rows


def pcie_link(smi: str | None) -> tuple[float, str]:
    """GB/s one way over the host link, and whence: the link nvidia-smi reports (the
    most this card and this host support together, not the idle link's downshifted
    speed), the same for every card; else PCIe 5.0 x16, said to be assumed."""
    if smi:
        try:
            run = subprocess.run(
                [smi, PCIE_QUERY, "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            # One line per card; unpacking fails unless every card reports the same link.
            [line] = {line.strip() for line in run.stdout.splitlines()} - {""}
            gen, width = (int(part) for part in line.split(","))
            return PCIE_LANE[gen] * width, f"PCIe {gen}.0 x{width}, as nvidia-smi reports the link"
        except (OSError, subprocess.TimeoutExpired, ValueError, KeyError):
            pass  # no answer, "[N/A]", cards that differ: assume
    gen, width = ASSUMED_LINK
    return PCIE_LANE[gen] * width, f"PCIe {gen}.0 x{width} assumed (nvidia-smi did not say)"


def limits(device: torch.device) -> dict[str, tuple[float | None, str]]:
    """Each figure's limit in the figure's unit, and what it is (or why it is unknown)."""
    name = _name(device)
    peaks = PEAKS.get(name)
    sheet = f"datasheet of {name}"
    if device.type == "cuda":
        link, whence = pcie_link(shutil.which("nvidia-smi"))
        host = (link, f"{link:.1f} GB/s: {whence}")
    else:
        host = (None, f"limit unknown: not a PCIe card ({name})")
    if peaks is None:
        fp32 = bf16 = memory = (None, f"limit unknown: {name} is not in this script's table")
    else:
        fp32 = (peaks.fp32, f"{peaks.fp32:g} TFLOP/s: float32, {sheet}")
        bf16 = (
            (peaks.bf16, f"{peaks.bf16:g} TFLOP/s: dense bfloat16, {sheet}")
            if peaks.bf16
            else (None, f"limit unknown: {name} has no bfloat16 tensor cores")
        )
        memory = (peaks.memory * 1e3, f"{peaks.memory * 1e3:.0f} GB/s: memory, {sheet}")
    return {
        "host-to-device, pageable memory": host,
        "host-to-device, pinned memory": host,
        "device-to-device copy": memory,
        "float32 matmul 8192x8192": fp32,
        "bfloat16 matmul 8192x8192": bf16,
    }


def copy_rows(device: torch.device, limit: dict) -> list[dict]:
    size = 256 * 2**20
    pageable = torch.empty(size, dtype=torch.uint8)
    speeds = {}
    for kind, host in (("pageable", pageable), ("pinned", pageable.pin_memory())):
        copy = lambda h=host: h.to(device, non_blocking=True)  # noqa: E731
        speeds[kind] = size / seconds_per_call(copy, device) / 1e9
    source = torch.empty(4 * size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    # A copy reads each byte and writes it: both count against the memory's bandwidth.
    on_device = 2 * source.numel() / seconds_per_call(lambda: target.copy_(source), device) / 1e9
    rows = []
    for kind in ("pageable", "pinned"):
        what = f"host-to-device, {kind} memory"
        value = f"{speeds[kind]:.1f} GB/s (256 MiB copies)"
        verdict = _meets(speeds["pinned"] > speeds["pageable"])
        rows.append(row(what, value, verdict, limit[what], speeds[kind]))
    what = "device-to-device copy"
    value = f"{on_device:.0f} GB/s (1 GiB copies, read and write counted)"
    rows.append(row(what, value, _meets(on_device > speeds["pinned"]), limit[what], on_device))
    return rows


def matmul_rows(device: torch.device, limit: dict) -> list[dict]:
    n = 8192
    name = _name(device)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 as float32: the FP32 peak applies
    flops = {}
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(n, n, device=device, dtype=dtype)
        flops[dtype] = 2 * n**3 / seconds_per_call(lambda a=a: a @ a, device) / 1e12
    verdict = _meets(flops[torch.bfloat16] > flops[torch.float32])
    rows = []
    for dtype, what, note in (
        (torch.float32, "float32 matmul 8192x8192", " (TF32 off)"),
        (torch.bfloat16, "bfloat16 matmul 8192x8192", ""),
    ):
        value = f"{flops[dtype]:.1f} TFLOP/s on {name}{note}"
        rows.append(row(what, value, verdict, limit[what], flops[dtype]))
    return rows


def cpu_only_row() -> dict:
    what = "D2L_DEVICE=cpu: CUDA untouched"
    env = {**os.environ, "D2L_DEVICE": "cpu"}
    run = subprocess.run(
        [sys.executable, "-c", CPU_ONLY], env=env, capture_output=True, text=True, timeout=120
    )
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return row(what, f"the helpers failed: {last[:120]}", "misses")
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    value = f"initialised: {seen['initialized']}, contexts on: {seen['contexts'] or 'none'}"
    return row(what, value, _meets(not seen["initialized"] and not seen["contexts"]))


def measure() -> list[dict]:
    device = d2l_gpu.try_gpu()
    if device.type == "cpu":
        return no_gpu_rows()
    limit = limits(device)
    untouched = (
        cpu_only_row()
        if device.type == "cuda"
        else row("D2L_DEVICE=cpu: CUDA untouched", f"not a CUDA GPU ({device.type})", "no GPU")
    )
    return [
        *clock_rows(device),
        *benchmark_rows(device),
        *copy_rows(device, limit),
        *matmul_rows(device, limit),
        untouched,
    ]


if __name__ == "__main__":
    print(json.dumps(measure()))
