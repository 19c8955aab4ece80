#!/usr/bin/env python3
"""`make lab`: JupyterLab on 127.0.0.1 with a fresh token that other local users cannot read.

The token travels in the environment (JUPYTER_TOKEN, as Jupyter documents), never on a
command line, where any local user reads it with `ps`. What Jupyter, IPython and npm
write for the session (the runtime files, one of which holds the token; config, data,
IPython's profile, npm's logs) goes to one private temporary folder that is removed when
the server ends, Ctrl-C included. The reader's own ~/.jupyter, ~/.local/share/jupyter,
~/.ipython and ~/.npm are neither read nor written.

Reads LAB_PORT (default 8888) and LAB_ROOT (default notebooks) from the environment;
its arguments go to `jupyter lab` as extra options (LAB_OPTIONS in the Makefile).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
INDEX = "/lab/tree/README.md"
HOST = "127.0.0.1"
# Where each kind of file would land by default (all in the reader's home), and the
# subfolder of the session folder it lands in instead.
SESSION_DIRS = {
    "JUPYTER_RUNTIME_DIR": "runtime",
    "JUPYTER_CONFIG_DIR": "config",
    "JUPYTER_DATA_DIR": "data",
    "IPYTHONDIR": "ipython",
    "npm_config_cache": "npm",  # jupyter-lsp runs npm, which logs into its cache
}


class UsageError(Exception):
    """A bad LAB_* value: exit 2, as command-line tools do for usage errors."""


class PortBusy(Exception):
    """The port cannot be listened on; said before any address with a token is printed."""


def parse_port(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,5}", text) or not 1 <= int(text) <= 65535:
        raise UsageError(f"LAB_PORT={text!r} is not a TCP port: give an integer from 1 to 65535")
    return int(text)


def check_port_free(port: int) -> None:
    """Bind the port as the server will (SO_REUSEADDR, like tornado), then let it go."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                reason = "something already listens there"
            elif error.errno == errno.EACCES:
                reason = "ports below 1024 need privileges"
            else:
                reason = error.strerror
            raise PortBusy(
                f"cannot serve on {HOST}:{port}: {reason}. Pick a free port with LAB_PORT=..."
            ) from None


def parse_root(text: str) -> Path:
    root = Path(text).resolve()
    if not root.is_dir():
        raise UsageError(f"LAB_ROOT={text!r} is not a folder: give the folder to serve")
    return root


def check_options(options: list[str]) -> None:
    # The token is made here and kept off every command line; an option that sets one
    # would put it back on the server's command line and make the printed address wrong.
    if any("token" in option.lower() for option in options):
        raise UsageError(
            "LAB_OPTIONS may not set a token: `make lab` makes a fresh one for each session"
        )


def _prepend(path: Path, existing: str | None) -> str:
    return os.pathsep.join([str(path), *([existing] if existing else [])])


def session_environment(base: dict[str, str], session: Path, token: str) -> dict[str, str]:
    """The server's environment: the token, and every folder it writes inside `session`.

    The repository's jupyter-config/ and this environment's share/jupyter stay on the
    search paths, ahead of any the reader set.
    """
    env = {k: v for k, v in base.items() if k not in ("JUPYTER_TOKEN_FILE", "NPM_CONFIG_CACHE")}
    for name, folder in SESSION_DIRS.items():
        (session / folder).mkdir(mode=0o700)
        env[name] = str(session / folder)
    env["JUPYTER_CONFIG_PATH"] = _prepend(
        REPOSITORY / "jupyter-config", base.get("JUPYTER_CONFIG_PATH")
    )
    env["JUPYTER_PATH"] = _prepend(Path(sys.prefix) / "share" / "jupyter", base.get("JUPYTER_PATH"))
    env["JUPYTER_TOKEN"] = token
    return env


def server_command(port: int, root: Path, options: list[str]) -> list[str]:
    # Should the reader's options also set one of these, Jupyter stops ("only accepts
    # one value") rather than serve anywhere but here.
    command = [sys.executable, "-m", "jupyter", "lab", *options]
    command += [
        f"--ServerApp.ip={HOST}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.default_url={INDEX}",
    ]
    if os.geteuid() == 0:  # Jupyter refuses root, which is how containers usually run
        command.append("--allow-root")
    return command


def serve(port: int, root: Path, options: list[str]) -> int:
    token = secrets.token_urlsafe(24)
    session = Path(tempfile.mkdtemp(prefix="d2l-gpu-lab-"))  # mode 0700
    server: subprocess.Popen | None = None

    def on_signal(signum: int, frame: object) -> None:
        if server is None:
            raise SystemExit(128 + signum)
        # Ctrl-C reaches the server from the terminal itself; other signals are passed on.
        # Either way this process waits for the server, then removes the session folder.
        if signum != signal.SIGINT:
            server.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    try:
        env = session_environment(dict(os.environ), session, token)
        print(f"JupyterLab will open at http://{HOST}:{port}{INDEX}?token={token}", flush=True)
        server = subprocess.Popen(server_command(port, root, options), env=env)
        code = server.wait()
        return 128 - code if code < 0 else code
    finally:
        shutil.rmtree(session, ignore_errors=True)


def main(argv: list[str]) -> int:
    try:
        port = parse_port(os.environ.get("LAB_PORT", "8888"))
        root = parse_root(os.environ.get("LAB_ROOT", "notebooks"))
        check_options(argv)
        check_port_free(port)
    except UsageError as error:
        print(f"make lab: {error}", file=sys.stderr)
        return 2
    except PortBusy as error:
        print(f"make lab: {error}", file=sys.stderr)
        return 1
    return serve(port, root, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
