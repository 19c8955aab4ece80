"""Whether a step is bound by the host that queues it or the GPU that runs it.

Waiting for the GPU every step (``.item()``, a print) costs most when the two take
about as long: then the wait stops them from working at once. Each side's time is
measured apart: the host's by the clock while the GPU is kept busy, so the steps
only queue; the GPU's by CUDA events around those same steps, which it then runs
back to back.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import torch

from . import timing
from .devices import synchronize

# Products of this size keep a GPU busy while the host queues the steps behind them.
_BUSY_SIZE = 4096
_BUSY_PRODUCTS = (10, 40, 160)  # more, if the GPU ran out of work before the host did


def host_and_device_seconds(
    step: Callable[[], Any], device: torch.device | str, steps: int = 20
) -> tuple[float, float]:
    """Seconds per call of ``step()``: to queue it on the host, and to run it on the GPU.

    ``device`` must be a CUDA device (the GPU is timed with CUDA events). After one
    warm-up call, ``steps`` calls are queued behind large products; if the GPU had
    already reached them before the host finished, it is given more to do and asked
    again, so that its time is of the steps alone.
    """
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(
            f"host_and_device_seconds times the GPU with CUDA events: device must be a "
            f"CUDA device such as 'cuda:0', got {str(device)!r}"
        )
    timing._check_setting("steps", steps, numbers.Integral, 0, 10_000, "a count from 1 to 10000")
    hold = torch.randn(_BUSY_SIZE, _BUSY_SIZE, device=device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream(device)
    step()  # warm-up
    for products in _BUSY_PRODUCTS:
        synchronize(device)
        for _ in range(products):
            hold @ hold
        start.record(stream)
        tik = timing._clock()
        for _ in range(steps):
            step()
        host = (timing._clock() - tik) / steps
        queued = not start.query()  # the GPU had not reached the first step yet
        end.record(stream)
        end.synchronize()
        if queued:
            break
    return host, start.elapsed_time(end) / 1e3 / steps
