"""Device and timing helpers for the GPU chapter of Dive into Deep Learning."""

from .comparison import Comparison, compare
from .devices import (
    ENV_VAR,
    accelerator_type,
    cpu,
    gpu,
    num_gpus,
    synchronize,
    try_all_gpus,
    try_gpu,
)
from .overlap import host_and_device_seconds
from .report import device_info, device_report
from .timing import Benchmark, Measurement, Timer, benchmark

__version__ = "0.1.0"

__all__ = [
    "ENV_VAR",
    "Benchmark",
    "Comparison",
    "Measurement",
    "Timer",
    "__version__",
    "accelerator_type",
    "benchmark",
    "compare",
    "cpu",
    "device_info",
    "device_report",
    "gpu",
    "host_and_device_seconds",
    "num_gpus",
    "synchronize",
    "try_all_gpus",
    "try_gpu",
]
