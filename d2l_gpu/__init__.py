"""Device and timing helpers for the GPU chapter of Dive into Deep Learning."""

from .devices import (
    ENV_VAR,
    accelerator_type,
    available_devices,
    cpu,
    gpu,
    num_gpus,
    synchronize,
    try_all_gpus,
    try_gpu,
)
from .report import DeviceInfo, device_info, device_report, software_versions
from .timing import Benchmark, Measurement, Timer, benchmark

__version__ = "0.1.0"

__all__ = [
    "ENV_VAR",
    "Benchmark",
    "DeviceInfo",
    "Measurement",
    "Timer",
    "__version__",
    "accelerator_type",
    "available_devices",
    "benchmark",
    "cpu",
    "device_info",
    "device_report",
    "gpu",
    "num_gpus",
    "software_versions",
    "synchronize",
    "try_all_gpus",
    "try_gpu",
]
