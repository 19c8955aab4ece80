#!/usr/bin/env python3
"""Run a command, then fail if it wrote into a folder or left anything in its TMPDIR.

    .ci/tree_guard.py notebooks -- python -m pytest --nbval notebooks

`make notebooks` uses it: lessons may write only to temporary folders. Every file,
folder and link under the guarded folder is recorded before and after, each file by a
hash of its content, so a file written in a new or an existing folder (ignored by git
or not), a second change to a file that was already changed, and a file removed are
all named. Git is not asked: its status shows a new folder as one line and a modified
file as "modified", whatever is written into them afterwards.

The command runs with TMPDIR set to a fresh private folder; whatever it leaves there
(torchrun's torchelastic_* folders, say) is named, and the folder is removed in any
case. torch's compile cache, which torch keeps in the temporary folder across runs on
purpose (importing torch._dynamo creates it), gets a private folder of its own beside
it, unless TORCHINDUCTOR_CACHE_DIR is set. Exit status: the command's own when it
fails, else 1 when something was named.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

USAGE = "usage: tree_guard.py FOLDER -- COMMAND [ARGUMENT...]"


def _describe(path: Path, info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return f"link to {os.readlink(path)}"
    mode = oct(stat.S_IMODE(info.st_mode))
    if stat.S_ISDIR(info.st_mode):
        return f"folder {mode}"
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        return f"file {mode} {digest.hexdigest()}"
    return f"special {stat.S_IFMT(info.st_mode):o}"


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder` (links not followed), named as given, with its content."""
    entries = {}
    pending = [folder]
    while pending:
        current = pending.pop()
        with os.scandir(current) as listing:
            for entry in listing:
                path = Path(entry.path)
                info = entry.stat(follow_symlinks=False)
                entries[path.as_posix()] = _describe(path, info)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(path)
    return entries


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per path that is new, changed or gone, in path order."""
    lines = []
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            lines.append(f"new:     {path}")
        elif path not in after:
            lines.append(f"gone:    {path}")
        elif before[path] != after[path]:
            lines.append(f"changed: {path}")
    return lines


def leftovers(folder: Path) -> list[str]:
    return sorted(
        e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in os.scandir(folder)
    )


def run(command: list[str], env: dict[str, str]) -> int:
    """Run `command`; wait for it even through Ctrl-C, so the caller still checks and
    cleans up afterwards."""
    child: subprocess.Popen | None = None

    def on_signal(signum: int, frame: object) -> None:
        if child is None:
            raise SystemExit(128 + signum)
        if signum != signal.SIGINT:  # Ctrl-C reaches the child from the terminal itself
            child.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    child = subprocess.Popen(command, env=env)
    code = child.wait()
    return 128 - code if code < 0 else code


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    folder, command = Path(argv[0]), argv[2:]
    if not folder.is_dir():
        print(f"tree_guard.py: {folder} is not a folder\n{USAGE}", file=sys.stderr)
        return 2
    before = snapshot(folder)
    private = Path(tempfile.mkdtemp(prefix="d2l-gpu-guard-"))  # mode 0700
    tmpdir = private / "tmp"
    try:
        tmpdir.mkdir(mode=0o700)
        env = {"TORCHINDUCTOR_CACHE_DIR": str(private / "torch-cache"), **os.environ}
        code = run(command, {**env, "TMPDIR": str(tmpdir)})
        left = leftovers(tmpdir)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    changed = differences(before, snapshot(folder))
    if changed:
        print(f"\nThe run wrote under {folder}/ (only temporary folders are allowed):")
        print("\n".join(f"  {line}" for line in changed))
    if left:
        print(f"\nThe run left this in its temporary folder {tmpdir} (now removed):")
        print("\n".join(f"  {name}" for name in left))
    return code or (1 if changed or left else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
