"""`make lab` as another local user would probe it: the token on no command line, nothing
written into the reader's home, a bad or busy LAB_PORT refused before any address is shown.
"""

import importlib.util
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.repository import ROOT, free_port

SPEC = importlib.util.spec_from_file_location("lab", ROOT / ".ci" / "lab.py")
lab = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(lab)

URL_LINE = re.compile(r"JupyterLab will open at http://127\.0\.0\.1:(\d+)\S*\?token=(\S+)")
START_TIMEOUT_S = 120


def _reader_env(home: Path, **extra: str) -> dict[str, str]:
    """A reader's environment with a blank home and no Jupyter, IPython or npm settings."""
    prefixes = ("JUPYTER", "XDG_", "IPYTHON", "NPM_", "npm_", "MAKE", "LAB_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return {**env, "HOME": str(home), **extra}


def _make_lab(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess:
    """`make lab` that is expected to stop by itself; a server it starts after all is ended."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    command = ["make", "--no-print-directory", "-C", str(ROOT), "lab", "LAB_OPTIONS=--no-browser"]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=_reader_env(home, **settings),
        start_new_session=True,
    ) as make:
        try:
            out, err = make.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGTERM)
            out, err = make.communicate(timeout=60)
            pytest.fail(f"`make lab` kept running:\n{out}{err}")
    return subprocess.CompletedProcess(command, make.returncode, out, err)


@pytest.mark.parametrize("port", ["99999", "0", "65536", "abc", "", " 8888", "8_888", "-1", "1e3"])
def test_a_bad_lab_port_is_a_usage_error_before_any_address(tmp_path, port):
    result = _make_lab(tmp_path, LAB_PORT=port)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"LAB_PORT={port!r} is not a TCP port: give an integer from 1 to 65535" in result.stderr
    assert "token" not in result.stdout + result.stderr


@pytest.mark.parametrize("port", ["1", "8888", "65535", "08888"])
def test_every_port_number_is_accepted(port):
    assert lab.parse_port(port) == int(port)


def test_a_busy_port_is_an_error_before_any_address(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _make_lab(tmp_path, LAB_PORT=str(port))
    assert result.returncode != 0
    assert f"cannot serve on 127.0.0.1:{port}: something already listens there" in result.stderr
    assert "LAB_PORT" in result.stderr
    assert "token" not in result.stdout + result.stderr


def test_lab_root_must_be_a_folder(tmp_path):
    result = _make_lab(tmp_path, LAB_PORT=str(free_port()), LAB_ROOT=str(tmp_path / "missing"))
    assert result.returncode == 2
    assert "LAB_ROOT=" in result.stderr and "is not a folder" in result.stderr


def test_lab_options_may_not_set_a_token(tmp_path):
    with pytest.raises(lab.UsageError, match="LAB_OPTIONS may not set a token"):
        lab.check_options(["--no-browser", "--IdentityProvider.token=abc"])


@pytest.mark.parametrize("option", ["--ip=0.0.0.0", "--ServerApp.ip=0.0.0.0", "--port=1"])
def test_lab_options_cannot_move_the_server(tmp_path, option):
    LabApp = pytest.importorskip("jupyterlab.labapp", reason="needs JupyterLab").LabApp

    command = lab.server_command(8888, tmp_path, [option])
    with pytest.raises(SystemExit):
        LabApp().parse_command_line(command[4:])


@pytest.mark.parametrize(("uid", "allowed"), [(0, True), (1000, False)])
def test_allow_root_only_as_root(monkeypatch, tmp_path, uid, allowed):
    monkeypatch.setattr(lab.os, "geteuid", lambda: uid)
    command = lab.server_command(8888, tmp_path, [])
    assert ("--allow-root" in command) is allowed
    assert "--ServerApp.ip=127.0.0.1" in command
    assert not [part for part in command if "token" in part.lower()]


def test_the_session_keeps_every_folder_private_and_the_repository_s_config_first(tmp_path):
    base = {"HOME": "/home/reader", "JUPYTER_CONFIG_PATH": "/mine", "JUPYTER_TOKEN_FILE": "/t"}
    env = lab.session_environment(base, tmp_path, "secret")
    for name in lab.SESSION_DIRS:
        assert Path(env[name]).parent == tmp_path
        assert stat.S_IMODE(Path(env[name]).stat().st_mode) == 0o700
    assert env["JUPYTER_CONFIG_PATH"] == f"{ROOT / 'jupyter-config'}{os.pathsep}/mine"
    assert env["JUPYTER_PATH"] == str(Path(sys.prefix) / "share" / "jupyter")
    assert env["JUPYTER_TOKEN"] == "secret"
    assert "JUPYTER_TOKEN_FILE" not in env


# A running lab: every process of it, the token, the session folder, the reader's home.


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat_line = (entry / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            parent = int(stat_line.rsplit(")", 1)[1].split()[1])
            tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, also those in sessions of their own (kernels)."""
    tree, found, pending = _children(), [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(tree.get(current, []))
    return found


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    state = _read(Path(f"/proc/{pid}/stat")).rsplit(b")", 1)[-1].split()[:1]
    return state not in ([], [b"Z"])  # a zombie has ended; only its parent has not asked


def _api(port: int, path: str, token: str | None, method: str = "GET") -> int:
    headers = {"Authorization": f"token {token}"} if token else {}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code


def _wait(condition, what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    pytest.fail(f"{what} within {START_TIMEOUT_S} s:\n{log.read_text()}")


def _serving(port: int) -> bool:
    try:
        return _api(port, "/api/status", None) == 403
    except OSError:
        return False


def _stop(make: subprocess.Popen, how: str) -> None:
    if how == "ctrl-c":  # the terminal signals the whole foreground group
        os.killpg(make.pid, signal.SIGINT)
    else:  # a supervisor ends `make` alone
        make.send_signal(signal.SIGTERM)
    make.wait(timeout=60)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm-to-make"])
def test_a_running_lab_hides_its_token_and_leaves_nothing_behind(tmp_path, how):
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "served"
    root.mkdir()
    (root / "README.md").write_text("# index\n")
    log = tmp_path / "lab.log"
    env = _reader_env(home, LAB_PORT=str(free_port()), LAB_ROOT=str(root))
    with log.open("w") as out:
        make = subprocess.Popen(
            ["make", "--no-print-directory", "-C", str(ROOT), "lab", "LAB_OPTIONS=--no-browser"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    processes: list[int] = []
    try:
        _wait(lambda: URL_LINE.search(log.read_text()), "`make lab` printed no address", log)
        port_text, token = URL_LINE.search(log.read_text()).groups()
        port = int(port_text)
        _wait(lambda: _serving(port), "JupyterLab did not answer", log)
        assert _api(port, "/api/status", token) == 200, "the printed token is not accepted"
        assert _api(port, "/api/kernels", token, method="POST") == 201

        def kernel_started() -> bool:
            return any(
                b"ipykernel" in _read(Path(f"/proc/{p}/cmdline")) for p in _process_tree(make.pid)
            )

        _wait(kernel_started, "no kernel process appeared", log)
        processes = _process_tree(make.pid)
        assert len(processes) >= 4  # make, lab.py, the server, the kernel
        for pid in processes:
            cmdline = _read(Path(f"/proc/{pid}/cmdline")).replace(b"\0", b" ")
            assert token.encode() not in cmdline, f"process {pid} shows the token: {cmdline!r}"
            if b"ipykernel" in cmdline:
                assert b"JUPYTER_TOKEN=" not in _read(Path(f"/proc/{pid}/environ"))
        runtime_dirs = {
            m.group(1).decode()
            for pid in processes
            if (
                m := re.search(
                    rb"(?:^|\0)JUPYTER_RUNTIME_DIR=([^\0]+)", _read(Path(f"/proc/{pid}/environ"))
                )
            )
        }
        assert len(runtime_dirs) == 1, runtime_dirs
        runtime = Path(runtime_dirs.pop())
        session = runtime.parent
        # The temp folder the lab inherits (conftest gives the tests' children their own).
        assert session.parent == Path(os.environ.get("TMPDIR") or tempfile.gettempdir())
        assert stat.S_IMODE(session.stat().st_mode) == 0o700
        assert any(token in p.read_text() for p in runtime.glob("jpserver-*.json"))
    finally:
        if make.poll() is None:
            _stop(make, how)
    assert not session.exists(), "the session folder (runtime files, token) was left"
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
    deadline = time.monotonic() + 30
    while (alive := [p for p in processes if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not alive, f"processes of the lab still alive: {alive}"
