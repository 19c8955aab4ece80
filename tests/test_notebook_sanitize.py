"""tests/nbval-sanitize.cfg maps what a GPU prints onto what the stored CPU run printed.

So `make test` passes on a GPU machine or a Mac as on a CPU. nbval silently drops a
malformed pair (no space after a colon, a blank line inside the pair), so each rule
is checked by its effect, applied by nbval's own code (which reads CRLF as LF).
"""

import re
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import pytest

_plugin = pytest.importorskip("nbval.plugin", reason="these checks run nbval's own code")
CONFIG = Path(__file__).resolve().parent / "nbval-sanitize.cfg"


def _patterns() -> OrderedDict:
    # What nbval runs for --nbval-sanitize-with.
    holder = SimpleNamespace(sanitize_patterns=OrderedDict(), get_sanitize_files=lambda: [CONFIG])
    _plugin.IPyNbFile.setup_sanitize_files(holder)
    return holder.sanitize_patterns


def sanitize(text: str) -> str:
    cell = SimpleNamespace(parent=SimpleNamespace(sanitize_patterns=_patterns()))
    return _plugin.IPyNbCell.sanitize(cell, text)


# A device name in a tensor repr or as str() prints it, for every device type: the last test.
@pytest.mark.parametrize(
    ("gpu", "cpu"),
    [
        ("tensor([[0.1111, 0.2222]],\n       device='cuda:1')", "tensor([[0.1111, 0.2222]])"),
        (
            "tensor([[-0.59]], device='mps:0', grad_fn=<AddmmBackward0>)",
            "tensor([[-0.59]], grad_fn=<AddmmBackward0>)",
        ),
        ("device(type='cuda', index=0)", "device(type='cpu')"),
        ("x * 2: 12.500 us median, IQR 1.250 us\n", "x * 2: 4.028 ms median, IQR 417.557 us\n"),
        ("<Figure at 0x7f3a2b1c>", "<Figure at 0x55d0e8a0>"),
    ],
)
def test_what_a_gpu_prints_matches_its_cpu_twin(gpu, cpu):
    assert gpu != cpu and sanitize(gpu) == sanitize(cpu)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("tensor([1., 2.])", "tensor([1., 3.])"),
        ("tensor(..., device='meta', size=(2, 3))", "tensor([[1., 1., 1.]])"),
        ("Y: (2, 3) torch.float32\n", "Y: (3, 2) torch.float32\n"),
        ("same memory: False\n", "same memory: True\n"),
        ("tensor([[-0.5948]], device='cuda:0')", "tensor([[-0.5947]])"),
    ],
)
def test_real_differences_survive(left, right):
    assert sanitize(left) != sanitize(right)


def test_every_torch_device_type_but_meta_is_mapped():
    import torch

    with pytest.raises(RuntimeError) as error:
        torch.device("not_a_device_type")
    listed = re.search(r"Expected one of (.+?) device type", str(error.value))
    assert listed, f"torch's message changed: {error.value}"
    for name in [n.strip() for n in listed[1].split(",") if n.strip() != "meta"]:
        assert sanitize(f"x on {name}:1\n") == sanitize("x on cpu\n"), name
        assert sanitize(f"tensor([1.], device='{name}:0')") == "tensor([1.])", name
