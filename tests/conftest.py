"""Shared test setup: gpu-marked tests need real hardware; nothing the tests start
outlives them.

Every process the tests start inherits ``SESSION_VAR`` and a private ``TMPDIR``
(this process keeps the real temp folder). torchrun leaves a ``torchelastic_*``
folder in the temp folder on every run, and starts each worker in a session of
its own, so killing torchrun's process group leaves its workers running. At the
end the session fails if a ``torchelastic_*`` folder or a torchrun process of
the tests is left, ends those processes and removes the private folder.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

SESSION_VAR = "D2L_GPU_TEST_SESSION"


def _read(pid: str, name: str) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes().split(b"\0")
    except OSError:  # gone, or another user's
        return []


def processes_where(test: Callable[[dict[str, str], str], bool]) -> list[int]:
    """Pids of live processes (other than this one) for which ``test(environment,
    command line)`` holds. Reads Linux's /proc; elsewhere finds nothing."""
    proc = Path("/proc")
    found = []
    for pid in [p.name for p in proc.iterdir() if p.name.isdigit()] if proc.is_dir() else []:
        pairs = (item.decode(errors="replace").partition("=") for item in _read(pid, "environ"))
        environ = {k: v for k, _, v in pairs if k}
        command = b" ".join(_read(pid, "cmdline")).decode(errors="replace")
        if int(pid) != os.getpid() and environ and test(environ, command):
            found.append(int(pid))
    return found


def end_processes(test: Callable[[dict[str, str], str], bool], wait: float = 10.0) -> list[int]:
    """SIGKILL every process ``processes_where(test)`` finds; wait up to ``wait`` s for them
    to go. Returns the pids found."""
    found = processes_where(test)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    while processes_where(test) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def _torchrun_of_this_session(environ: dict[str, str], command: str) -> bool:
    # torchrun's agent sets TORCHELASTIC_RUN_ID in every worker it starts.
    if environ.get(SESSION_VAR) != os.environ[SESSION_VAR]:
        return False
    launcher = re.search(r"torch\.distributed\.run|(^|/)torchrun( |$)", command)
    return "TORCHELASTIC_RUN_ID" in environ or launcher is not None


def pytest_configure(config):
    tempfile.gettempdir()  # fixes this process's temp folder before TMPDIR changes
    private = tempfile.mkdtemp(prefix="d2l-gpu-tests-")
    os.environ[SESSION_VAR] = os.environ["TMPDIR"] = private


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    private = Path(os.environ[SESSION_VAR])
    left = sorted(p.name for p in private.glob("**/torchelastic_*"))
    alive = end_processes(_torchrun_of_this_session)
    shutil.rmtree(private, ignore_errors=True)
    problems = [f"torchelastic folder left by the tests: {name}" for name in left]
    problems += [f"torchrun process of the tests still alive (now killed): pid {p}" for p in alive]
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for line in problems:
            if reporter is not None:  # absent under -p no:terminal
                reporter.write_line(f"LEAK: {line}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config, items):
    if torch.accelerator.is_available():
        return
    skip = pytest.mark.skip(reason="needs a real CUDA or MPS device; none on this machine")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
