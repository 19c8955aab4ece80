"""Shared test setup: a clean device cache per test; gpu-marked tests need real hardware."""

import pytest

from d2l_gpu import devices


@pytest.fixture(autouse=True)
def _fresh_device_state(monkeypatch):
    monkeypatch.delenv(devices.ENV_VAR, raising=False)
    devices._visible_gpus.cache_clear()
    yield
    devices._visible_gpus.cache_clear()


def pytest_collection_modifyitems(config, items):
    if devices._hardware_gpus():
        return
    skip = pytest.mark.skip(reason="needs a real CUDA or MPS device; none on this machine")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
