"""Shared by the exercises: how long each measurement runs."""

from __future__ import annotations

import torch


def _min_run_time(device: torch.device, quick: bool) -> float:
    # Enough blocks for a stable median; a quick CPU run must stay within seconds.
    if quick:
        return 0.05 if device.type == "cpu" else 0.1
    return 0.2
