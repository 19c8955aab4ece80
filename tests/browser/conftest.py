"""`make lab` on a copy of notebooks/, and `make site`, for the browser tests
(`make test-browser` only)."""

import functools
import http.server
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"  # Debian's (apt-get install chromium); Playwright drives it
ARGS = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] * (os.geteuid() == 0))
SITE_EXTRA = ["sphinx", "myst_nb", "sphinx_book_theme", "sphinx_copybutton", "jieba"]  # .[site]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Collected only when this folder is named: `make test` needs no browser."""
    named = [Path(config.invocation_params.dir, a.split("::")[0]).resolve() for a in config.args]
    return None if any(p == HERE or HERE in p.parents for p in named) else True


def get(url: str, token: str | None = None) -> int:
    """The HTTP status of a GET (0: no answer), with the token in its header when given."""
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:  # not listening (yet)
        return 0


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(address, token, served folder) of a running `make lab`, with a blank home."""
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "notebooks"
    shutil.copytree(REPOSITORY / "notebooks", root)
    (tmp / "home").mkdir()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = secrets.token_hex(16)  # handed over in the environment, as Jupyter reads it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "XDG_"))}
    env.update(HOME=str(tmp / "home"), JUPYTER_TOKEN=token)
    options = f"LAB_OPTIONS=--no-browser --ServerApp.port={port} --ServerApp.port_retries=0"
    command = ["make", "-s", "-C", str(REPOSITORY), "lab", f"LAB_ROOT={root}", options]
    with (tmp / "lab.log").open("w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=log, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while get(f"{base}/api/status", token) != 200:
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"`make lab` did not serve:\n{(tmp / 'lab.log').read_text()}")
            time.sleep(0.5)
        yield base, token, root
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def site() -> Path:
    """build/site/ as `make site` builds it from notebooks/ now (SITE_NOTEBOOKS: another copy)."""
    if missing := [name for name in SITE_EXTRA if importlib.util.find_spec(name) is None]:
        pytest.skip(f"the 'site' extra is not installed (no {', '.join(missing)}): `make site`")
    built = subprocess.run(
        ["make", "-s", "-C", str(REPOSITORY), "site"], capture_output=True, text=True, timeout=600
    )
    if built.returncode:
        pytest.fail(f"`make site` failed:\n{built.stdout[-3000:]}{built.stderr[-3000:]}", False)
    return REPOSITORY / "build" / "site"


@pytest.fixture(scope="module")
def served(site: Path, tmp_path_factory) -> Iterator[str]:
    """The site served over HTTP under /d2l-gpu/, as GitHub Pages serves it: its address."""
    root = tmp_path_factory.mktemp("pages")
    (root / "d2l-gpu").symlink_to(site, target_is_directory=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}/d2l-gpu"
        server.shutdown()


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, driven by Playwright, for the tests of one module."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no {CHROMIUM}: sudo apt-get install chromium", pytrace=False)
    # Here, not at the top: `make test` reads this file too, and lacks the browser extra.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
