"""Device and timing helpers for the GPU chapter of Dive into Deep Learning."""

from .comparison import compare
from .devices import accelerator_type, cpu, gpu, num_gpus, synchronize, try_all_gpus, try_gpu
from .report import device_info, device_report
from .timing import Benchmark, Timer, benchmark, host_and_device_seconds

__version__ = "0.1.0"

# fmt: off
__all__ = [
    "cpu", "gpu", "num_gpus", "try_gpu", "try_all_gpus", "accelerator_type", "synchronize",
    "Timer", "Benchmark", "benchmark", "compare", "host_and_device_seconds",
    "device_info", "device_report",
]  # fmt: on
