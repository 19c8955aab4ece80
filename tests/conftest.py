"""Shared test setup: skip gpu-marked tests without a real accelerator."""

import pytest

from d2l_gpu import devices


def pytest_collection_modifyitems(config, items):
    kind, count = devices._hardware()
    if kind is not None and count > 0:
        return
    skip = pytest.mark.skip(reason="needs a real CUDA or MPS device; none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
