"""JupyterLab served by `make lab` on a copy of notebooks/, and Debian's Chromium.

This folder runs only when it is named (`make test-browser`), so `make test`
needs no browser.
"""

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.repository import free_port

REPOSITORY = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
NO_CHROMIUM = (
    "No Chromium found. Install it with `sudo apt-get install chromium` (Debian, Ubuntu) "
    "or point CHROMIUM at a Chromium or Chrome executable. Playwright drives it; its own "
    "browser download is not needed."
)
URL_LINE = re.compile(r"JupyterLab will open at (http://127\.0\.0\.1:(\d+)(\S*)\?token=(\S+))")
START_TIMEOUT_S = 90


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    named = [
        Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args
    ]
    if not any(path == HERE or HERE in path.parents for path in named):
        return True
    return None  # let pytest's own rules decide


@dataclass
class Lab:
    """A running `make lab`: the address it printed, and the folder it serves."""

    url: str
    base: str
    token: str
    root: Path
    log: Path


@pytest.fixture
def chromium() -> str:
    if given := os.environ.get("CHROMIUM"):
        if not os.access(given, os.X_OK):
            pytest.fail(f"CHROMIUM={given} is not an executable. {NO_CHROMIUM}", pytrace=False)
        return given
    path = next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    if path is None:
        pytest.fail(NO_CHROMIUM, pytrace=False)
    return path


def _printed_url(log: Path, server: subprocess.Popen) -> re.Match:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if match := URL_LINE.search(log.read_text(encoding="utf-8")):
            return match
        if server.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"`make lab` printed no address:\n{log.read_text(encoding='utf-8')}")


def _wait_until_serving(lab: Lab, server: subprocess.Popen) -> None:
    request = urllib.request.Request(
        f"{lab.base}/api/status", headers={"Authorization": f"token {lab.token}"}
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"JupyterLab did not answer:\n{lab.log.read_text(encoding='utf-8')}")


def _group_alive(server: subprocess.Popen) -> bool:
    server.poll()  # reap `make` itself, or the group never looks empty
    try:
        os.killpg(server.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for_group(server: subprocess.Popen, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _group_alive(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _group_alive(server)


def _stop(server: subprocess.Popen, lab: Lab | None) -> None:
    """Ask the server to shut down with its kernels; end its process group if it does not."""
    if lab is not None and server.poll() is None:
        request = urllib.request.Request(
            f"{lab.base}/api/shutdown",
            method="POST",
            headers={"Authorization": f"token {lab.token}"},
        )
        try:
            urllib.request.urlopen(request, timeout=10).close()
        except OSError:
            pass
        _wait_for_group(server, 30)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(server):
            return
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        _wait_for_group(server, 15)


@pytest.fixture
def lab(tmp_path: Path):
    """`make lab` as a reader runs it, on a copy of notebooks/ and with a blank home."""
    root = tmp_path / "notebooks"
    shutil.copytree(
        REPOSITORY / "notebooks",
        root,
        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"),
    )
    home = tmp_path / "home"
    home.mkdir()
    # The reader's own Jupyter folders and settings play no part in the test.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "XDG_"))}
    env.update(
        HOME=str(home),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
    )
    log = tmp_path / "lab.log"
    command = [
        "make", "--no-print-directory", "-C", str(REPOSITORY), "lab",
        f"LAB_ROOT={root}", f"LAB_PORT={free_port()}", "LAB_OPTIONS=--no-browser",
    ]  # fmt: skip
    with log.open("w", encoding="utf-8") as out:
        server = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    running = None
    try:
        match = _printed_url(log, server)
        running = Lab(
            url=match.group(1),
            base=f"http://127.0.0.1:{match.group(2)}",
            token=match.group(4),
            root=root,
            log=log,
        )
        _wait_until_serving(running, server)
        yield running
    finally:
        _stop(server, running)
    # A reader's whole session, lesson run included, writes nothing into their home.
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
