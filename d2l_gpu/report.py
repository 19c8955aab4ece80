"""Describe this machine's devices and the software that drives them."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import torch

from .devices import in_use, try_all_gpus

# How long nvidia-smi may take: seconds, even on a box with many cards.
SMI_SECONDS = 10.0


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
        page, pages, free = map(os.sysconf, ("SC_PAGE_SIZE", "SC_PHYS_PAGES", "SC_AVPHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None, None
    return page * pages, page * (pages - free)


def _cuda_used(device: torch.device) -> int | None:
    """Bytes in use on a CUDA card, asked without creating a context on it: of the driver
    for a card this process uses, else (or when the driver refuses) of NVML where
    nvidia-ml-py is installed."""
    if in_use(device):
        try:
            free, total = torch.cuda.mem_get_info(device)
            return total - free
        except Exception:  # a busy or exclusive-process card, a driver error
            pass
    try:
        return torch.cuda.device_memory_used(device)
    except Exception:  # the library missing, or one of NVML's own error types
        return None


def _accelerator(device: torch.device) -> tuple[str, int | None, int | None]:
    """An accelerator's name, total and used bytes; None where it will not say."""
    if device.type == "cuda":  # name and size need no context
        props = torch.cuda.get_device_properties(device)
        return props.name, props.total_memory, _cuda_used(device)
    if device.type == "mps":
        mps = torch.mps
        return "Apple GPU (MPS)", mps.recommended_max_memory(), mps.driver_allocated_memory()
    try:
        free, total = torch.accelerator.get_memory_info(device)
    except (AttributeError, RuntimeError):  # newer than torch 2.6; some backends refuse
        return device.type.upper(), None, None
    return device.type.upper(), total, total - free


def _described(device: torch.device) -> tuple[str, int | None, int | None]:
    """As ``_accelerator``, but a card that cannot be read (off the bus, a wedged driver)
    is named by its error, and the report goes on."""
    try:
        return _accelerator(device)
    except Exception as error:
        return f"unreadable ({type(error).__name__}: {str(error)[:120]})", None, None


def software_versions() -> dict[str, str]:
    """Versions that decide what a device can do, as strings; 'none' when absent."""
    blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    cudnn = torch.backends.cudnn.is_available() and torch.backends.cudnn.version()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "hip": getattr(torch.version, "hip", None) or "none",
        "cudnn": str(cudnn or "none"),
        "blas": blas.group(1) if blas else "unknown",
        "torch threads": str(torch.get_num_threads()),
        "nvidia-smi": shutil.which("nvidia-smi") or "not found",
    }


def device_info() -> dict[str, Any]:
    """The CPU and every accelerator torch sees, with their memory in bytes (None when
    unknown), and the software versions: what ``python -m d2l_gpu info --json`` prints."""
    rows = [("cpu", _cpu_name(), *_host_memory())]
    rows += [(str(d), *_described(d)) for d in try_all_gpus() if d.type != "cpu"]
    keys = ("device", "name", "total_memory", "used_memory")
    return {
        "devices": [dict(zip(keys, row, strict=True)) for row in rows],
        "software": software_versions(),
    }


def nvidia_smi(*args: str) -> str | None:
    """What ``nvidia-smi args`` prints, or None when it is missing or fails; a
    TimeoutError after SMI_SECONDS when it hangs, as it does on a wedged driver."""
    if not (smi := shutil.which("nvidia-smi")):
        return None
    # A file, not a pipe, and no wait after the kill: one stuck in the driver may never end.
    with tempfile.TemporaryFile() as out:
        try:
            child = subprocess.Popen([smi, *args], stdout=out, stderr=subprocess.DEVNULL)
            status = child.wait(SMI_SECONDS)
        except OSError:
            return None
        except subprocess.TimeoutExpired:
            child.kill()
            raise TimeoutError(f"nvidia-smi did not answer within {SMI_SECONDS:g} s") from None
        out.seek(0)
        return out.read().decode(errors="replace") if status == 0 else None


def listed_gpus() -> list[str]:
    """The GPUs ``nvidia-smi -L`` lists, whether or not torch can see them."""
    out = nvidia_smi("-L") or ""  # a broken nvidia-smi proves nothing either way
    return [line.strip() for line in out.splitlines() if line.startswith("GPU")]


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**30:.1f} GiB"


def device_report() -> str:
    """A table of devices with their memory, then the software versions."""
    info = device_info()
    rows = info["devices"]
    width = max(len("device"), *(len(r["device"]) for r in rows))
    lines = [f"{'device':<{width}}  {'total':>10}  {'used':>10}  name"]
    for r in rows:
        total, used = _gib(r["total_memory"]), _gib(r["used_memory"])
        lines.append(f"{r['device']:<{width}}  {total:>10}  {used:>10}  {r['name']}")
    unknown = [r["device"] for r in rows if r["used_memory"] is None and r["device"] != "cpu"]
    if unknown:
        lines.append(
            f"used unknown on {', '.join(unknown)}: a card this process has not used, or "
            "whose driver would not say (nvidia-ml-py would tell for a CUDA card)"
        )
    versions = {**info["software"], "platform": f"{sys.platform}, {platform.machine()}"}
    key_width = max(map(len, versions))
    lines += [f"{k:<{key_width}}  {v}" for k, v in versions.items()]
    return "\n".join(lines)
