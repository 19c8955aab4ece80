"""Describe this machine's devices, on any machine, with or without nvidia-smi."""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
from dataclasses import asdict, dataclass

import torch

from . import devices
from .devices import ENV_VAR, available_devices, try_all_gpus


@dataclass(frozen=True)
class DeviceInfo:
    """One device as a reader would list it; memory in bytes, None when unknown."""

    device: str
    name: str
    total_memory: int | None
    used_memory: int | None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _host_memory() -> tuple[int | None, int | None]:
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
        free = page * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None, None
    return total, total - free


def _cuda_used(device: torch.device) -> int | None:
    """Bytes in use on a CUDA card, asked without creating a context on it.

    The driver's answer needs a context: asked only of a card this process
    already uses. For the rest NVML answers where nvidia-ml-py (or amdsmi) is
    installed; otherwise unknown. A context costs memory on every card it is
    made on, and fails on a card another job holds in exclusive mode.
    """
    has_context = devices._cuda_has_context
    if has_context is not None and has_context(device.index):
        free, total = torch.cuda.mem_get_info(device)
        return total - free
    try:
        return torch.cuda.device_memory_used(device)
    except Exception:  # the library missing, or one of NVML's own error types
        return None


def _memory(device: torch.device) -> tuple[int | None, int | None]:
    """Total and used bytes of an accelerator; None where it will not say."""
    if device.type == "cuda":  # the size needs no context
        return torch.cuda.get_device_properties(device).total_memory, _cuda_used(device)
    if device.type == "mps":
        return torch.mps.recommended_max_memory(), torch.mps.driver_allocated_memory()
    try:
        free, total = torch.accelerator.get_memory_info(device)
    except (AttributeError, RuntimeError):  # newer than torch 2.6; some backends refuse
        return None, None
    return total, total - free


def _accelerator_info(device: torch.device) -> DeviceInfo:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    elif device.type == "mps":
        name = "Apple GPU (MPS)"
    else:
        name = device.type.upper()
    return DeviceInfo(str(device), name, *_memory(device))


def device_info() -> list[DeviceInfo]:
    """The CPU and every accelerator this machine has, with their memory.

    Lists every device, ignoring ``D2L_DEVICE``; the report says which the helpers use.
    """
    cpu_total, cpu_used = _host_memory()
    name = f"{_cpu_name()} ({os.cpu_count()} logical cores)"
    rows = [DeviceInfo("cpu", name, cpu_total, cpu_used)]
    rows += [_accelerator_info(d) for d in available_devices()[1:]]
    return rows


def _blas() -> str:
    match = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return match.group(1) if match else "unknown"


def software_versions() -> dict[str, str]:
    """Versions that decide what a device can do, as strings; 'none' when absent."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "hip": getattr(torch.version, "hip", None) or "none",
        "cudnn": str(cudnn) if cudnn else "none",
        "blas": _blas(),
        "torch threads": str(torch.get_num_threads()),
        "nvidia-smi": shutil.which("nvidia-smi") or "not found",
        ENV_VAR: os.environ.get(ENV_VAR, "unset"),
    }


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**30:.1f} GiB"


def helpers_use() -> str:
    """The devices the helpers offer, or why ``D2L_DEVICE`` keeps them from saying."""
    try:
        return ", ".join(str(d) for d in try_all_gpus())
    except ValueError as error:
        return f"[FAIL] {error}"


def device_report() -> str:
    """A table of devices, what the helpers will use, and the software versions."""
    rows = device_info()
    width = max(len("device"), *(len(r.device) for r in rows))
    lines = [f"{'device':<{width}}  {'total':>10}  {'used':>10}  name"]
    lines += [
        f"{r.device:<{width}}  {_gib(r.total_memory):>10}  {_gib(r.used_memory):>10}  {r.name}"
        for r in rows
    ]
    if any(r.used_memory is None and r.device.startswith("cuda") for r in rows):
        lines.append("used unknown: a card this process has not used (nvidia-ml-py would tell)")
    lines.append(f"helpers use: {helpers_use()}")
    versions = software_versions()
    key_width = max(map(len, versions))
    lines += [f"{k:<{key_width}}  {v}" for k, v in versions.items()]
    lines.append(f"platform{' ' * (key_width - 8)}  {sys.platform}, {platform.machine()}")
    return "\n".join(lines)
