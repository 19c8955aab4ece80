"""tests/nbval-sanitize.cfg does what it claims, read and applied by nbval's own code.

nbval silently drops a malformed pair (no space after the colon, a blank line
inside the pair, CRLF endings), so each rule is checked by its effect.
"""

import json
import re
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import pytest

# A GPU machine without the notebook tools still collects the rest of the suite.
_plugin = pytest.importorskip(
    "nbval.plugin", reason="these checks run nbval's own code (make setup installs nbval)"
)
IPyNbCell, IPyNbFile = _plugin.IPyNbCell, _plugin.IPyNbFile

CONFIG = Path(__file__).resolve().parent / "nbval-sanitize.cfg"


def _patterns() -> OrderedDict:
    # IPyNbFile.setup_sanitize_files is what nbval runs for --nbval-sanitize-with.
    holder = SimpleNamespace(sanitize_patterns=OrderedDict(), get_sanitize_files=lambda: [CONFIG])
    IPyNbFile.setup_sanitize_files(holder)
    return holder.sanitize_patterns


def sanitize(text: str) -> str:
    cell = SimpleNamespace(parent=SimpleNamespace(sanitize_patterns=_patterns()))
    return IPyNbCell.sanitize(cell, text)


def test_every_pair_is_read():
    raw = CONFIG.read_bytes()
    assert b"\r" not in raw, "CRLF line endings make nbval drop every pair"
    lines = raw.decode().splitlines()
    written = [line for line in lines if line.startswith("regex:")]
    assert len(written) == len(_patterns()) > 0, (
        "a regex line was dropped: each 'regex: ' needs a 'replace: ' line right under it, "
        "and regexes must be distinct"
    )


# What a GPU run prints, and what the CPU run stored in the notebook prints.
TWINS = [
    ("tensor([1., 2.], device='cuda:0')", "tensor([1., 2.])"),
    (
        "tensor([[1., 1., 1.],\n        [1., 1., 1.]], device='cuda:0')",
        "tensor([[1., 1., 1.],\n        [1., 1., 1.]])",
    ),
    (
        "tensor([[-0.5947],\n        [-0.5947]], device='cuda:0', grad_fn=<AddmmBackward0>)",
        "tensor([[-0.5947],\n        [-0.5947]], grad_fn=<AddmmBackward0>)",
    ),
    ("tensor([0.5000, 0.2500], device='mps:0')", "tensor([0.5000, 0.2500])"),
    (
        "tensor([[0.1111, 0.2222, 0.3333, 0.4444, 0.5555, 0.6666]],\n       device='cuda:1')",
        "tensor([[0.1111, 0.2222, 0.3333, 0.4444, 0.5555, 0.6666]])",
    ),
    ("device(type='cuda', index=0)", "device(type='cpu')"),
    ("x lives on: cuda:0\n", "x lives on: cpu\n"),
    ("try_gpu():   mps:0\n", "try_gpu():   cpu\n"),
    ("layer weight on xpu:0 | noise on xpu:0\n", "layer weight on cpu | noise on cpu\n"),
    ("copy: 0.0012 sec\n", "copy: 0.3456 sec\n"),
    (
        "x @ x: 12.500 us median, IQR 1.250 us, 20 runs x 100\n",
        "x @ x: 4.028 ms median, IQR 417.557 us, 20 runs x 100\n",
    ),
    ("<function f at 0x7f3a2b1c>", "<function f at 0x55d0e8a0>"),
    # notebook 02: torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ("cuda\n", "cpu\n"),
    # notebook 02: d2l_gpu.gpu(1) names an MPS device on a Mac, CUDA's on a CPU-only machine
    ("device(type='mps', index=1)\n", "device(type='cuda', index=1)\n"),
    # notebook 04 run with D2L_DEVICE=cuda:1
    ("0.weight shape (1, 3), on cuda:1\n", "0.weight shape (1, 3), on cpu\n"),
    # notebook 06, exercise 2: a GPU's checkpoint loads back onto its device
    (
        "no map_location      tensors on ['cuda:0'], every tensor exact: True\n",
        "no map_location      tensors on ['cpu'], every tensor exact: True\n",
    ),
    (
        "no map_location      tensors on ['mps:0'], every tensor exact: True\n",
        "no map_location      tensors on ['cpu'], every tensor exact: True\n",
    ),
    # notebook 07, lesson 1: local ranks 0 to 3 on two GPUs, and on a CPU
    ("['cuda:0', 'cuda:1', 'cuda:0', 'cuda:1']\n", "['cpu', 'cpu', 'cpu', 'cpu']\n"),
]


@pytest.mark.parametrize(("gpu_output", "cpu_output"), TWINS)
def test_gpu_output_matches_its_cpu_twin(gpu_output, cpu_output):
    assert gpu_output != cpu_output
    assert sanitize(gpu_output) == sanitize(cpu_output)


DIFFERENT = [
    ("tensor([1., 2.])", "tensor([1., 3.])"),
    ("tensor(..., device='meta', size=(2, 3))", "tensor([[1., 1., 1.],\n        [1., 1., 1.]])"),
    ("Y: (2, 3) torch.float32\n", "Y: (3, 2) torch.float32\n"),
    ("same memory: False\n", "same memory: True\n"),
    ("8 batches, each pinned as asked: True\n", "8 batches, each pinned as asked: False\n"),
    # values computed on a GPU are still compared: only the device suffix goes
    ("mean loss of the zero model: 1.06\n", "mean loss of the zero model: 1.07\n"),
    (
        "tensor([[-0.5948],\n        [-0.5948]], device='cuda:0', grad_fn=<AddmmBackward0>)",
        "tensor([[-0.5947],\n        [-0.5947]], grad_fn=<AddmmBackward0>)",
    ),
    ("same losses both ways: False\n", "same losses both ways: True\n"),
    (
        "no map_location      tensors on ['cpu'], every tensor exact: False\n",
        "no map_location      tensors on ['cpu'], every tensor exact: True\n",
    ),
    ("['cpu', 'cpu', 'cpu']\n", "['cpu', 'cpu', 'cpu', 'cpu']\n"),
    (
        "Tensor on device meta is not on the expected device cpu!",
        "Tensor on device cpu is not on the expected device meta!",
    ),
]


@pytest.mark.parametrize(("left", "right"), DIFFERENT)
def test_real_differences_survive(left, right):
    assert sanitize(left) != sanitize(right)


def test_meta_device_is_left_alone():
    text = "tensor(..., device='meta', size=(2, 3))"
    assert sanitize(text) == text


def _cell(code: str, stored_text: str) -> dict:
    return {
        "cell_type": "code",
        "execution_count": 1,
        "id": f"cell-{abs(hash(code))}",
        "metadata": {},
        "outputs": [{"name": "stdout", "output_type": "stream", "text": [stored_text]}],
        "source": [code],
    }


def test_nbval_accepts_a_gpu_notebook_on_the_cpu_with_the_file(tmp_path):
    """End to end, in one nbval run: outputs stored by a GPU run, re-run here on the CPU.

    The second cell's stored output really differs, so the run also proves that
    nbval compared outputs at all rather than passing everything.
    """
    gpu_run = "x lives on cuda:0: tensor([1., 2.], device='cuda:0')\n"
    cpu_run = "x lives on cpu: tensor([1., 2.])"
    notebook = {
        "cells": [_cell(f"print({cpu_run!r})", gpu_run), _cell("print(3)", "2\n")],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "twin.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval"]
        + ["--nbval-current-env", "--nbval-sanitize-with", str(CONFIG), path.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "1 failed, 1 passed" in run.stdout, run.stdout
    failed = re.findall(r"^FAILED \S*::(Cell \d+)", run.stdout, flags=re.M)
    assert failed == ["Cell 1"], run.stdout


def _torch_device_types() -> list[str]:
    """Every device type torch accepts, as its own error message lists them."""
    import torch

    with pytest.raises(RuntimeError) as error:
        torch.device("not_a_device_type")
    listed = re.search(r"Expected one of (.+?) device type", str(error.value))
    assert listed, f"torch's message changed: {error.value}"
    return [name.strip() for name in listed.group(1).split(",")]


def test_every_torch_device_type_is_mapped_as_the_cpu_is():
    types = [name for name in _torch_device_types() if name != "meta"]
    assert {"cpu", "cuda", "mps", "xpu", "hpu", "privateuseone"} <= set(types)
    for name in types:
        assert sanitize(f"x on {name}:1\n") == sanitize("x on cpu\n"), name
        assert sanitize(f"device(type='{name}', index=0)") == sanitize("device(type='cpu')"), name
        assert sanitize(f"tensor([1., 2.], device='{name}:0')") == "tensor([1., 2.])", name


@pytest.mark.parametrize("name", ["npu", "musa", "some_new_backend"])
def test_a_renamed_privateuse1_backend_is_mapped_in_reprs(name):
    """torch.utils.rename_privateuse1_backend lets a backend pick any name."""
    assert sanitize(f"tensor([0.5000], device='{name}:0')") == "tensor([0.5000])"
    assert sanitize(f"device(type='{name}', index=3)") == sanitize("device(type='cpu')")
