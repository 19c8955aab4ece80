"""gpu-marked tests need a real accelerator: without one they are skipped, saying so."""

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.accelerator.is_available():
        return
    skip = pytest.mark.skip(reason="needs a real CUDA or MPS device; none on this machine")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
