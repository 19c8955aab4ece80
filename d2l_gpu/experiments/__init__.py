"""The chapter's four exercises (5.5.5) as measurements that return plain rows."""

from .concurrency import (
    KIND_GPUS,
    KIND_STREAMS,
    KIND_THREADS,
    ConcurrencyRow,
    ConcurrencyStudy,
    two_products,
)
from .matmul import (
    MatmulCase,
    MatmulRow,
    best_gflops,
    bf16_supported,
    blas_libraries,
    crossover,
    matmul_cases,
    matmul_sweep,
    measure_matmul,
)
from .norms import NormRow, NormsStudy, norms_study
from .state_dict import LoadRow, RoundTrip, round_trip

__all__ = [
    "ConcurrencyRow",
    "ConcurrencyStudy",
    "KIND_GPUS",
    "KIND_STREAMS",
    "KIND_THREADS",
    "LoadRow",
    "MatmulCase",
    "MatmulRow",
    "NormRow",
    "NormsStudy",
    "RoundTrip",
    "blas_libraries",
    "crossover",
    "bf16_supported",
    "best_gflops",
    "matmul_cases",
    "matmul_sweep",
    "measure_matmul",
    "norms_study",
    "round_trip",
    "two_products",
]
