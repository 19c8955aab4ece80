"""Exercise 2: reading and writing parameters on the device."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..devices import try_gpu


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
