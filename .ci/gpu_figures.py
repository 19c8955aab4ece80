"""Measure what the GPU half of the lessons claims, for gpu_check's closing table.

Run as a child of gpu_check (``python .ci/gpu_figures.py``); prints one JSON list
of rows: what was measured, the figure, the goal it is held to, and a verdict
(``meets``, ``misses`` or ``no GPU``). ``hard`` rows are claims the lessons and
helpers make (a miss fails the run); the others are the machine's figures, with
the direction a reader is told to expect.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import torch

import d2l_gpu

# What a lesson under D2L_DEVICE=cpu calls; afterwards CUDA must be untouched.
CPU_ONLY = """
import json, torch, d2l_gpu
x = torch.ones(3, device=d2l_gpu.try_gpu())
d2l_gpu.try_all_gpus(); d2l_gpu.num_gpus(); d2l_gpu.synchronize()
timer = d2l_gpu.Timer(); x + 1; timer.stop()
d2l_gpu.benchmark(lambda: x + 1, min_run_time=0.01)
d2l_gpu.device_report()
has = getattr(torch._C, "_cuda_hasPrimaryContext", None)
count = torch.cuda.device_count()
print(json.dumps({"initialized": torch.cuda.is_initialized(),
                  "contexts": [i for i in range(count) if has and has(i)]}))
"""


def row(what: str, value: str, goal: str, verdict: str, hard: bool = False) -> dict:
    return {"what": what, "value": value, "goal": goal, "verdict": verdict, "hard": hard}


def no_gpu_rows() -> list[dict]:
    names = [
        ("Timer / CUDA events, same interval", "0.99-1.01", True),
        ("unsynchronized clock / CUDA events", "far below 1 (< 0.5)", True),
        ("benchmark(): empty call", ">= 3 runs", True),
        ("benchmark(): 2048x2048 product", ">= 3 runs", True),
        ("host-to-device, pageable memory", "below pinned", False),
        ("host-to-device, pinned memory", "above pageable", False),
        ("float32 matmul 8192x8192", "below bfloat16", False),
        ("bfloat16 matmul 8192x8192", "above float32", False),
        ("D2L_DEVICE=cpu: CUDA untouched", "not initialised, no context", True),
    ]
    return [row(what, "no GPU", goal, "no GPU", hard) for what, goal, hard in names]


def _event(device: torch.device) -> torch.Event:
    return torch.Event(device=device, enable_timing=True)


def clock_rows(device: torch.device) -> list[dict]:
    x = torch.randn(4096, 4096, device=device)

    def work() -> None:
        for _ in range(20):
            x @ x

    work()
    d2l_gpu.synchronize(device)
    synced, unsynced = [], []
    for _ in range(5):
        start, end = _event(device), _event(device)
        timer = d2l_gpu.Timer(device)
        start.record()
        work()
        end.record()
        seconds = timer.stop()
        end.synchronize()
        synced.append(seconds / (start.elapsed_time(end) / 1e3))

        start, end = _event(device), _event(device)
        tik = time.perf_counter()
        start.record()
        work()
        end.record()
        seconds = time.perf_counter() - tik
        end.synchronize()
        unsynced.append(seconds / (start.elapsed_time(end) / 1e3))
    ratio, blind = statistics.median(synced), statistics.median(unsynced)
    return [
        row(
            "Timer / CUDA events, same interval",
            f"{ratio:.4f} (median of 5, 20 products 4096^2 each)",
            "0.99-1.01",
            "meets" if 0.99 <= ratio <= 1.01 else "misses",
            hard=True,
        ),
        row(
            "unsynchronized clock / CUDA events",
            f"{blind:.4f} (median of 5)",
            "far below 1 (< 0.5)",
            "meets" if blind < 0.5 else "misses",
            hard=True,
        ),
    ]


def benchmark_rows(device: torch.device) -> list[dict]:
    a = torch.randn(2048, 2048, device=device)
    rows = []
    for what, fn in (("empty call", lambda: None), ("2048x2048 product", lambda: a @ a)):
        tik = time.perf_counter()
        m = d2l_gpu.benchmark(fn, device=device)
        wall = time.perf_counter() - tik
        value = f"{m}, wall {wall:.2f} s"
        verdict = "meets" if m.runs >= 3 else "misses"
        rows.append(row(f"benchmark(): {what}", value, ">= 3 runs", verdict, hard=True))
    return rows


def bandwidth_rows(device: torch.device) -> list[dict]:
    size = 256 * 2**20
    pageable = torch.empty(size, dtype=torch.uint8)
    pinned = pageable.pin_memory()
    speeds = {}
    for name, host in (("pageable", pageable), ("pinned", pinned)):
        m = d2l_gpu.benchmark(lambda h=host: h.to(device, non_blocking=True), device=device)
        speeds[name] = size / 2**30 / m.median
    faster = speeds["pinned"] > speeds["pageable"]
    return [
        row(
            "host-to-device, pageable memory",
            f"{speeds['pageable']:.1f} GiB/s (256 MiB copies)",
            "below pinned",
            "meets" if faster else "misses",
        ),
        row(
            "host-to-device, pinned memory",
            f"{speeds['pinned']:.1f} GiB/s (256 MiB copies)",
            "above pageable",
            "meets" if faster else "misses",
        ),
    ]


def matmul_rows(device: torch.device) -> list[dict]:
    n = 8192
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    flops = {}
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(n, n, device=device, dtype=dtype)
        m = d2l_gpu.benchmark(lambda a=a: a @ a, device=device, min_run_time=0.3)
        flops[dtype] = 2 * n**3 / m.median / 1e12
    faster = flops[torch.bfloat16] > flops[torch.float32]
    tf32 = "TF32 on" if torch.backends.cuda.matmul.allow_tf32 else "TF32 off"
    return [
        row(
            "float32 matmul 8192x8192",
            f"{flops[torch.float32]:.1f} TFLOP/s on {name} ({tf32})",
            "below bfloat16",
            "meets" if faster else "misses",
        ),
        row(
            "bfloat16 matmul 8192x8192",
            f"{flops[torch.bfloat16]:.1f} TFLOP/s on {name}",
            "above float32",
            "meets" if faster else "misses",
        ),
    ]


def cpu_only_row() -> dict:
    env = {**os.environ, "D2L_DEVICE": "cpu"}
    run = subprocess.run(
        [sys.executable, "-c", CPU_ONLY], env=env, capture_output=True, text=True, timeout=120
    )
    what, goal = "D2L_DEVICE=cpu: CUDA untouched", "not initialised, no context"
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return row(what, f"the helpers failed: {last[:120]}", goal, "misses", hard=True)
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    value = f"initialised: {seen['initialized']}, contexts on: {seen['contexts'] or 'none'}"
    clean = not seen["initialized"] and not seen["contexts"]
    return row(what, value, goal, "meets" if clean else "misses", hard=True)


def measure() -> list[dict]:
    device = d2l_gpu.try_gpu()
    if device.type == "cpu":
        return no_gpu_rows()
    return [
        *clock_rows(device),
        *benchmark_rows(device),
        *bandwidth_rows(device),
        *matmul_rows(device),
        cpu_only_row()
        if device.type == "cuda"
        else row(
            "D2L_DEVICE=cpu: CUDA untouched", f"not a CUDA GPU ({device.type})", "-", "no GPU"
        ),
    ]


if __name__ == "__main__":
    print(json.dumps(measure()))
