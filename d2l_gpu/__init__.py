"""Device and timing helpers for the GPU chapter of Dive into Deep Learning."""

from .comparison import compare
from .devices import accelerator_type, cpu, gpu, num_gpus, synchronize, try_all_gpus, try_gpu
from .report import device_info, device_report
from .timing import Benchmark, Timer, benchmark, host_and_device_seconds

__version__ = "0.1.0"

__all__ = [
    "Benchmark",
    "Timer",
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
