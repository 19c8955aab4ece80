"""Describe this machine's devices, on any machine, with or without nvidia-smi."""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
from dataclasses import dataclass

import torch

from . import devices
from .devices import ENV_VAR, _hardware_gpus, try_all_gpus


@dataclass(frozen=True)
class DeviceInfo:
    """One device as a reader would list it; memory in bytes, None when unknown."""

    device: str
    name: str
    total_memory: int | None
    used_memory: int | None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    name = (names or [platform.processor() or platform.machine() or "unknown CPU"])[0]
    return f"{name} ({os.cpu_count()} logical cores)"


def _host_memory() -> tuple[int | None, int | None]:
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
        free = page * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None, None
    return total, total - free


def _cuda_used(device: torch.device) -> int | None:
    """Bytes in use on a CUDA card, asked without creating a context on it: of the
    driver for a card this process uses, else of NVML where nvidia-ml-py (or amdsmi)
    is installed; else unknown."""
    has_context = devices._cuda_has_context
    if has_context is not None and has_context(device.index):
        free, total = torch.cuda.mem_get_info(device)
        return total - free
    try:
        return torch.cuda.device_memory_used(device)
    except Exception:  # the library missing, or one of NVML's own error types
        return None


def _accelerator_info(device: torch.device) -> DeviceInfo:
    """An accelerator's name, total and used bytes; None where it will not say."""
    if device.type == "cuda":  # name and size need no context
        props = torch.cuda.get_device_properties(device)
        return DeviceInfo(str(device), props.name, props.total_memory, _cuda_used(device))
    if device.type == "mps":
        total, used = torch.mps.recommended_max_memory(), torch.mps.driver_allocated_memory()
        return DeviceInfo(str(device), "Apple GPU (MPS)", total, used)
    try:
        free, total = torch.accelerator.get_memory_info(device)
    except (AttributeError, RuntimeError):  # newer than torch 2.6; some backends refuse
        return DeviceInfo(str(device), device.type.upper(), None, None)
    return DeviceInfo(str(device), device.type.upper(), total, total - free)


def _offered() -> list[torch.device]:
    """The GPUs the helpers offer; with a bad ``D2L_DEVICE`` (device_report flags it), all."""
    try:
        return try_all_gpus()
    except ValueError:
        return _hardware_gpus()


def device_info() -> list[DeviceInfo]:
    """The CPU and every accelerator this machine has, with their memory. A card that
    ``D2L_DEVICE`` leaves out is listed but never asked, so the run stays off it."""
    offered = _offered()
    left_out = f"not queried: {ENV_VAR} leaves it out"
    return [DeviceInfo("cpu", _cpu_name(), *_host_memory())] + [
        _accelerator_info(d) if d in offered else DeviceInfo(str(d), left_out, None, None)
        for d in _hardware_gpus()
    ]


def _blas() -> str:
    match = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return match.group(1) if match else "unknown"


def _cudnn() -> str:
    """cuDNN's version, or 'none', found without starting CUDA for a card the helpers
    leave out.

    ``torch.backends.cudnn.version()`` asks the loaded library, then every CUDA card's
    compute capability, and that starts CUDA. While ``D2L_DEVICE`` keeps the helpers
    off a card, the version torch was compiled against is read instead and labelled
    so: a constant, which the loaded library may exceed by a minor version.
    """
    if not torch.backends.cudnn.is_available():
        return "none"
    cards = [d for d in _hardware_gpus() if d.type == "cuda"]
    offered = _offered()
    left_out = [str(d) for d in cards if d not in offered]
    if not left_out:
        return str(torch.backends.cudnn.version() or "none")
    major, minor, patch = torch._C._cudnn.getCompileVersion()
    which = "CUDA" if len(left_out) == len(cards) else ", ".join(left_out)
    return f"{major}.{minor}.{patch} compiled in; library not asked: {ENV_VAR} leaves {which} out"


def software_versions() -> dict[str, str]:
    """Versions that decide what a device can do, as strings; 'none' when absent."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "hip": getattr(torch.version, "hip", None) or "none",
        "cudnn": _cudnn(),
        "blas": _blas(),
        "torch threads": str(torch.get_num_threads()),
        "nvidia-smi": shutil.which("nvidia-smi") or "not found",
        ENV_VAR: os.environ.get(ENV_VAR, "unset"),
    }


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**30:.1f} GiB"


def helpers_use() -> tuple[bool, str]:
    """(True, the devices the helpers offer), or (False, why ``D2L_DEVICE`` is wrong)."""
    try:
        return True, ", ".join(str(d) for d in try_all_gpus())
    except ValueError as error:  # it names the value and the valid ones
        return False, str(error)


def device_report() -> str:
    """A table of devices, what the helpers will use, and the software versions."""
    rows = device_info()
    width = max(len("device"), *(len(r.device) for r in rows))
    lines = [f"{'device':<{width}}  {'total':>10}  {'used':>10}  name"]
    lines += [
        f"{r.device:<{width}}  {_gib(r.total_memory):>10}  {_gib(r.used_memory):>10}  {r.name}"
        for r in rows
    ]
    if any(r.total_memory and r.used_memory is None and r.device[:4] == "cuda" for r in rows):
        lines.append("used unknown: a card this process has not used (nvidia-ml-py would tell)")
    ok, use = helpers_use()
    lines.append(f"helpers use: {'' if ok else '[FAIL] '}{use}")
    versions = software_versions()
    key_width = max(map(len, versions))
    lines += [f"{k:<{key_width}}  {v}" for k, v in versions.items()]
    lines.append(f"platform{' ' * (key_width - 8)}  {sys.platform}, {platform.machine()}")
    return "\n".join(lines)
