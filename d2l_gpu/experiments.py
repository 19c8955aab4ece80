"""The chapter's four exercises (5.5.5) as measurements that return plain rows.

Each function measures through ``d2l_gpu.benchmark`` (synchronized, warmed up,
median and IQR), picks sizes that suit the device (``quick`` keeps a CPU run to
seconds), and returns dataclasses that a notebook plots, a test checks and
``python -m d2l_gpu bench`` writes as JSON. Nothing here prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from .devices import cpu, num_gpus, synchronize, try_all_gpus, try_gpu
from .timing import Measurement, benchmark

__all__ = [
    "ConcurrencyRow",
    "ConcurrencyStudy",
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

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _min_run_time(device: torch.device, quick: bool) -> float:
    # Enough blocks for a stable median; a quick CPU run must stay within seconds.
    if quick:
        return 0.05 if device.type == "cpu" else 0.1
    return 0.2


# --- Exercise 1: large and small matrix products, CPU against accelerator ----


@dataclass(frozen=True)
class MatmulCase:
    """One product to time: which library, where, in which precision, how big."""

    backend: str  # "torch" or "numpy"
    device: str
    dtype: str
    n: int


@dataclass(frozen=True)
class MatmulRow:
    """Seconds per n x n product (median, IQR) and the rate it implies."""

    backend: str
    device: str
    dtype: str
    n: int
    median: float
    iqr: float
    runs: int
    gflops: float


def bf16_supported(device: torch.device | str) -> bool:
    """Whether a bfloat16 product runs on ``device`` (tried, not guessed)."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return False
    try:
        x = torch.ones(2, 2, dtype=torch.bfloat16, device=device)
        (x @ x).sum().item()
    except (RuntimeError, TypeError):
        return False
    return True


def _sizes(device: torch.device, dtype: str, quick: bool) -> list[int]:
    if device.type != "cpu":
        return [16, 64, 256, 1024, 4096] if quick else [2**k for k in range(4, 14)]
    if dtype == "bfloat16":
        # Without AVX512-BF16 or AMX a CPU converts bfloat16 and is slower than
        # float32; larger sizes would take seconds per product and teach nothing new.
        return [16, 64, 256] if quick else [16, 32, 64, 128, 256, 512]
    return [16, 64, 256, 512] if quick else [2**k for k in range(4, 12)]


def matmul_cases(
    devices: Sequence[torch.device | str] | None = None,
    quick: bool = False,
    numpy: bool = True,
) -> list[MatmulCase]:
    """Every product the sweep times; by default the CPU and the first GPU, if any.

    On the CPU the sweep also times NumPy (float32) on the same sizes, since
    both libraries hand the product to a BLAS and the interesting question is
    which one.
    """
    devs = [torch.device(d) for d in devices] if devices else [cpu()]
    if devices is None and num_gpus() > 0:
        devs.append(try_gpu())
    cases = []
    for dev in devs:
        dtypes = ["float32"] + (["bfloat16"] if bf16_supported(dev) else [])
        for dtype in dtypes:
            cases += [MatmulCase("torch", str(dev), dtype, n) for n in _sizes(dev, dtype, quick)]
        if numpy and dev.type == "cpu":
            cases += [
                MatmulCase("numpy", str(dev), "float32", n) for n in _sizes(dev, "float32", quick)
            ]
    return cases


def measure_matmul(
    case: MatmulCase, min_run_time: float | None = None, quick: bool = False
) -> MatmulRow:
    """Time one product of two random n x n matrices and report GFLOP/s (2 n^3 flops)."""
    if case.backend not in ("torch", "numpy"):
        raise ValueError(f"backend must be 'torch' or 'numpy', got {case.backend!r}")
    if case.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {case.dtype!r}")
    device = torch.device(case.device)
    a = torch.randn(case.n, case.n, device=device, dtype=DTYPES[case.dtype])
    b = torch.randn(case.n, case.n, device=device, dtype=DTYPES[case.dtype])
    if case.backend == "numpy":
        if device.type != "cpu" or case.dtype != "float32":
            raise ValueError("the NumPy comparison runs on the CPU in float32 only")
        import numpy as np

        fn, args = np.matmul, (a.numpy(), b.numpy())
    else:
        fn, args = torch.matmul, (a, b)
    m = benchmark(
        fn,
        *args,
        device=device,
        min_run_time=min_run_time or _min_run_time(device, quick),
        label=f"{case.backend} {case.dtype} {case.n}",
    )
    return MatmulRow(
        case.backend,
        case.device,
        case.dtype,
        case.n,
        m.median,
        m.iqr,
        m.runs,
        gflops=2 * case.n**3 / m.median / 1e9,
    )


def matmul_sweep(
    devices: Sequence[torch.device | str] | None = None,
    quick: bool = False,
    numpy: bool = True,
    min_run_time: float | None = None,
) -> list[MatmulRow]:
    """Exercise 1: time n x n products from tiny to large on each device."""
    cases = matmul_cases(devices, quick=quick, numpy=numpy)
    return [measure_matmul(case, min_run_time, quick) for case in cases]


def best_gflops(rows: Sequence[MatmulRow]) -> dict[tuple[str, str, str], float]:
    """The highest rate measured per (backend, device, dtype): the measured peak.

    Vendor peaks depend on clocks and tensor-core modes; the best rate this
    sweep reached is a figure the reader's own machine produced.
    """
    best: dict[tuple[str, str, str], float] = {}
    for r in rows:
        key = (r.backend, r.device, r.dtype)
        best[key] = max(best.get(key, 0.0), r.gflops)
    return best


def crossover(rows: Sequence[MatmulRow], dtype: str = "float32") -> dict[str, int | None]:
    """Per accelerator, the smallest n from which its torch products beat the CPU's.

    "Beat" means a higher rate at that n and at every larger n measured on both;
    None when it never does. Empty when no accelerator was measured.
    """
    rate = {(r.device, r.n): r.gflops for r in rows if r.backend == "torch" and r.dtype == dtype}
    result: dict[str, int | None] = {}
    for device in sorted({d for d, _ in rate if d != "cpu"}):
        sizes = sorted(n for d, n in rate if d == device and ("cpu", n) in rate)
        wins = [rate[(device, n)] > rate[("cpu", n)] for n in sizes]
        result[device] = None
        for i, n in enumerate(sizes):
            if all(wins[i:]):
                result[device] = n
                break
    return result


def blas_libraries() -> dict[str, str]:
    """Which BLAS torch and NumPy call for a CPU product, from their build records."""
    match = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    torch_blas = match.group(1) if match else "unknown"
    if torch_blas == "mkl":
        torch_blas = f"mkl ({torch.backends.mkl.is_available() and 'available' or 'missing'})"
    info = {"torch": torch_blas, "torch cpu capability": torch.backends.cpu.get_cpu_capability()}
    try:
        import numpy as np

        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["numpy"] = f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip()
    except (ImportError, KeyError, TypeError):
        # NumPy older than 1.25 has no mode="dicts"; say so rather than guess.
        info["numpy"] = "unknown (numpy missing or too old to report its BLAS)"
    return info


# --- Exercise 2: reading and writing parameters on the device -----------------


@dataclass(frozen=True)
class LoadRow:
    """One ``torch.load`` of the saved file: where its tensors landed, and if exact."""

    map_location: str
    loaded_on: str
    exact: bool


@dataclass(frozen=True)
class RoundTrip:
    """A state_dict saved from ``saved_from`` and loaded back in several ways."""

    saved_from: str
    tensors: int
    file_bytes: int
    recorded_locations: list[str]
    loads: list[LoadRow]
    missing_gpu_error: str | None
    missing_gpu_how: str


def _small_model(device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and torch.equal(a[k].cpu(), b[k].cpu()) for k in a
    )


def _load_without_cuda(path: Path) -> str:
    """Load a GPU-saved file in a child process that cannot see any CUDA device."""
    code = (
        "import torch\n"
        "try:\n"
        f"    torch.load({str(path)!r}, weights_only=True)\n"
        "    print('loaded without error')\n"
        "except Exception as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the CUDA-free child process failed:\n{proc.stderr}")
    return proc.stdout.strip()


def round_trip(device: torch.device | str | None = None) -> RoundTrip:
    """Exercise 2: save a model's parameters from ``device`` and load them back.

    Loads with ``weights_only=True`` (no arbitrary code from the file) onto the
    CPU, back onto the device, and through a location map, checking each
    result bit for bit. It also records what happens when the device the file
    names is missing: for real in a CUDA-free child process when the file comes
    from a CUDA GPU, otherwise by asking for ``cuda:0`` on this CUDA-less
    machine, which trips the same check.
    """
    device = torch.device(device) if device is not None else try_gpu()
    state = _small_model(device).state_dict()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.pt"
        torch.save(state, path)
        recorded: list[str] = []

        def record(storage: torch.UntypedStorage, location: str) -> torch.UntypedStorage:
            recorded.append(location)
            return storage

        torch.load(path, map_location=record, weights_only=True)
        loads = []
        targets: list[tuple[str, object]] = [
            ("'cpu'", "cpu"),
            (f"'{device}'", device),
            (f"{{'{recorded[0]}': 'cpu'}}", {recorded[0]: "cpu"}),
        ]
        for label, where in targets:
            loaded = torch.load(path, map_location=where, weights_only=True)
            places = sorted({str(t.device) for t in loaded.values()})
            loads.append(LoadRow(label, ", ".join(places), _same(state, loaded)))
        if device.type == "cuda":
            error: str | None = _load_without_cuda(path)
            how = "loaded in a child process with CUDA_VISIBLE_DEVICES='' (no GPU visible)"
        elif not torch.cuda.is_available():
            try:
                torch.load(path, map_location=torch.device("cuda", 0), weights_only=True)
                error = None
            except RuntimeError as exc:
                error = str(exc)
            how = "asked torch.load for cuda:0 on a machine without CUDA (the same check)"
        else:
            error, how = None, "not measured: the file was not saved from CUDA"
        return RoundTrip(
            saved_from=str(device),
            tensors=len(state),
            file_bytes=path.stat().st_size,
            recorded_locations=sorted(set(recorded)),
            loads=loads,
            missing_gpu_error=error,
            missing_gpu_how=how,
        )


# --- Exercise 3: 1000 products of 100 x 100 matrices, logging each norm -------


@dataclass(frozen=True)
class NormRow:
    """One way of logging the norms: its time and how often it waited for the device."""

    method: str
    device: str
    median: float
    iqr: float
    runs: int
    host_syncs: int | None


@dataclass(frozen=True)
class NormsStudy:
    """The three logging methods side by side, and whether their norms agree."""

    device: str
    products: int
    size: int
    rows: list[NormRow]
    max_rel_diff: float
    agree: bool
    sync_note: str
    norms: list[float] = field(repr=False)


def _norms_item(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    return [torch.linalg.matrix_norm(a[i] @ b[i]).item() for i in range(len(a))]


def _norms_device_log(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    log = torch.empty(len(a), device=a.device, dtype=a.dtype)
    for i in range(len(a)):
        log[i] = torch.linalg.matrix_norm(a[i] @ b[i])
    return log.cpu().tolist()


def _norms_bmm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> list[float]:
    torch.bmm(a, b, out=out)
    return torch.linalg.matrix_norm(out).cpu().tolist()


def _count_syncs(fn: Callable[[], object]) -> int:
    """How many times ``fn`` made the host wait for the CUDA device."""
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum("synchroniz" in str(w.message) for w in caught)


def norms_study(
    device: torch.device | str | None = None,
    products: int = 1000,
    size: int = 100,
    quick: bool = False,
    min_run_time: float | None = None,
    rtol: float = 1e-4,
) -> NormsStudy:
    """Exercise 3: log the Frobenius norm of many small products in three ways.

    (a) ``.item()`` after each product, (b) each norm written into a device
    tensor that is copied to the host once, (c) one batched ``torch.bmm`` into a
    preallocated output. Host synchronizations are counted on CUDA with
    ``torch.cuda.set_sync_debug_mode``; elsewhere there is no such counter.
    """
    if products < 1 or size < 1:
        raise ValueError(f"products and size must be >= 1, got {products} and {size}")
    device = torch.device(device) if device is not None else try_gpu()
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(products, size, size, generator=gen).to(device)
    b = torch.randn(products, size, size, generator=gen).to(device)
    out = torch.empty_like(a)
    methods: list[tuple[str, Callable[[], list[float]]]] = [
        ("(a) .item() each step", lambda: _norms_item(a, b)),
        ("(b) device log, one copy", lambda: _norms_device_log(a, b)),
        ("(c) one bmm, preallocated", lambda: _norms_bmm(a, b, out)),
    ]
    # Each call takes tens of milliseconds on a CPU: allow a few for a spread.
    mrt = min_run_time or max(0.3, _min_run_time(device, quick))
    rows, results = [], []
    for name, fn in methods:
        results.append(torch.tensor(fn(), dtype=torch.float64))
        syncs = _count_syncs(fn) if device.type == "cuda" else None
        # The call above was the warm-up.
        m: Measurement = benchmark(fn, device=device, min_run_time=mrt, warmup=0, label=name)
        rows.append(NormRow(name, str(device), m.median, m.iqr, m.runs, syncs))
    ref = results[0]
    rel = max(((r - ref).abs() / ref.abs()).max().item() for r in results[1:])
    if device.type == "cuda":
        note = "counted with torch.cuda.set_sync_debug_mode('warn')"
    else:
        note = (
            f"not applicable on {device.type}: the CPU computes each result before the call "
            "returns, so there is no queue to wait for and no counter to read"
        )
    return NormsStudy(
        device=str(device),
        products=products,
        size=size,
        rows=rows,
        max_rel_diff=rel,
        agree=rel <= rtol,
        sync_note=note,
        norms=ref.tolist(),
    )


# --- Exercise 4: two products at once on two devices, or in sequence on one --


@dataclass(frozen=True)
class ConcurrencyRow:
    """Two products run one after the other or at the same time."""

    mode: str  # "sequential" or "concurrent"
    devices: str
    median: float
    iqr: float
    runs: int


@dataclass(frozen=True)
class ConcurrencyStudy:
    """What was really measured (``kind``), the times, and sequential / concurrent."""

    kind: str
    n: int
    rows: list[ConcurrencyRow]
    speedup: float
    note: str


KIND_GPUS = "two GPUs"
KIND_STREAMS = "two CUDA streams on one GPU"
KIND_THREADS = "two CPU threads, one core each (CPU stand-in, not a GPU result)"


def _pair(device: torch.device, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.randn(n, n, generator=gen).to(device),
        torch.randn(n, n, generator=gen).to(device),
    )


def _study(
    kind: str,
    n: int,
    seq: Callable[[], object],
    conc: Callable[[], object],
    where: tuple[str, str],
    min_run_time: float,
) -> ConcurrencyStudy:
    rows = []
    for mode, fn, devices in (("sequential", seq, where[0]), ("concurrent", conc, where[1])):
        # fn waits for its own devices, so the clock stays honest with several of them.
        m = benchmark(fn, device=cpu(), min_run_time=min_run_time, label=f"{kind} {mode}")
        rows.append(ConcurrencyRow(mode, devices, m.median, m.iqr, m.runs))
    notes = {
        KIND_GPUS: "each GPU runs its own product; near 2x is the expected scaling",
        KIND_STREAMS: (
            "one GPU, two streams: a large product already fills the GPU, so expect little "
            "gain; this shows overlap on one device, not scaling across two"
        ),
        KIND_THREADS: (
            "no second GPU here: two CPU cores stand in for two devices; "
            "the ratio says nothing about GPUs"
        ),
    }
    return ConcurrencyStudy(kind, n, rows, rows[0].median / rows[1].median, notes[kind])


def two_products(
    devices: Sequence[torch.device | str] | None = None,
    n: int | None = None,
    quick: bool = False,
    min_run_time: float | None = None,
) -> ConcurrencyStudy:
    """Exercise 4: two n x n products in sequence on one device vs at once.

    Two or more GPUs: one product each, against both on the first GPU. One
    CUDA GPU: two streams on it. Otherwise (CPU, or an accelerator without
    streams): two CPU threads limited to one core each, labelled as a stand-in.
    """
    devs = [torch.device(d) for d in devices] if devices else try_all_gpus()
    gpus = [d for d in devs if d.type != "cpu"]
    gen = torch.Generator().manual_seed(0)
    if len(gpus) >= 2:
        kind, first, second = KIND_GPUS, gpus[0], gpus[1]
    elif gpus and gpus[0].type == "cuda":
        kind, first, second = KIND_STREAMS, gpus[0], gpus[0]
    else:
        kind, first, second = KIND_THREADS, cpu(), cpu()
    if n is None:
        n = (2048 if quick else 8192) if kind != KIND_THREADS else (384 if quick else 1024)
    mrt = min_run_time or _min_run_time(first, quick)
    a0, b0 = _pair(first, n, gen)
    a1, b1 = _pair(second, n, gen)
    if kind == KIND_GPUS:
        c0, c1 = _pair(first, n, gen)

        def seq() -> None:
            torch.mm(a0, b0)
            torch.mm(c0, c1)
            synchronize(first)

        def conc() -> None:
            torch.mm(a0, b0)  # returns at once: the launch is asynchronous
            torch.mm(a1, b1)
            synchronize(first)
            synchronize(second)

        return _study(kind, n, seq, conc, (str(first), f"{first}, {second}"), mrt)
    if kind == KIND_STREAMS:
        streams = (torch.cuda.Stream(first), torch.cuda.Stream(first))

        def seq() -> None:
            torch.mm(a0, b0)
            torch.mm(a1, b1)
            synchronize(first)

        def conc() -> None:
            for stream, (x, y) in zip(streams, ((a0, b0), (a1, b1)), strict=True):
                stream.wait_stream(torch.cuda.current_stream(first))
                with torch.cuda.stream(stream):
                    torch.mm(x, y)
            synchronize(first)

        return _study(kind, n, seq, conc, (f"{first}, 1 stream", f"{first}, 2 streams"), mrt)
    with ThreadPoolExecutor(2, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        # Start both workers now, so neither measurement pays for creating a thread.
        list(pool.map(torch.mm, (a0, a1), (b0, b1)))

        def seq() -> None:
            pool.submit(lambda: (torch.mm(a0, b0), torch.mm(a1, b1))).result()

        def conc() -> None:
            jobs = [pool.submit(torch.mm, a0, b0), pool.submit(torch.mm, a1, b1)]
            for job in jobs:
                job.result()

        return _study(kind, n, seq, conc, ("cpu, 1 thread", "cpu, 2 threads"), mrt)
