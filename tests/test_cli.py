"""python -m d2l_gpu: help, info, check."""

import importlib.metadata as metadata
import json
import os
import subprocess
import sys

import pytest

from d2l_gpu.__main__ import _NOTEBOOK_PACKAGES, build_parser, check_lines, main
from tests.simulate import guard_cuda, simulate_cudnn, simulate_machine


def run_cli(*args, **env):
    return subprocess.run(
        [sys.executable, "-m", "d2l_gpu", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_help_documents_every_subcommand():
    result = run_cli("--help")
    assert result.returncode == 0
    subcommands = build_parser()._subparsers._group_actions[0].choices
    for name in subcommands:
        assert name in result.stdout
    assert set(subcommands) == {"info", "check"}


def test_every_subcommand_has_its_own_help(capsys):
    for name in build_parser()._subparsers._group_actions[0].choices:
        with pytest.raises(SystemExit) as exit_info:
            main([name, "--help"])
        assert exit_info.value.code == 0
        assert f"python -m d2l_gpu {name}" in capsys.readouterr().out


def test_info_prints_the_report(capsys):
    assert main(["info"]) == 0
    assert "helpers use:" in capsys.readouterr().out


def test_info_json_is_valid_and_complete(capsys):
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["devices"][0]["device"] == "cpu"
    assert "torch" in data["software"]


def test_unknown_subcommand_exits_with_usage():
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert "invalid choice: 'frobnicate'" in result.stderr


def _installed(distribution: str) -> bool:
    try:
        return bool(metadata.version(distribution))
    except metadata.PackageNotFoundError:
        return False


def test_check_passes_in_the_dev_environment(capsys):
    missing = [name for name in _NOTEBOOK_PACKAGES if not _installed(name)]
    if missing:  # a bare GPU machine: torch alone; `check --core` is its test
        pytest.skip(f"needs the notebook extras, missing here: {', '.join(missing)}")
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "[OK] torch" in out and "[FAIL]" not in out and "[INFO]" in out


def test_check_reports_a_missing_package():
    lines = check_lines({"surely-not-installed-pkg": "testing"})
    ok, text = lines[-1]
    assert not ok
    assert text == (
        "surely-not-installed-pkg is missing (needed for testing): pip install 'd2l-gpu[notebooks]'"
    )


BAD_VALUE = "D2L_DEVICE='garbage' is not a device this machine has; valid values here: 'cpu'"


def test_check_reports_a_bad_d2l_device_as_a_failed_line_and_goes_on():
    result = run_cli("check", D2L_DEVICE="garbage")
    assert result.returncode == 1
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[OK] torch ")
    assert lines[1].startswith(f"[FAIL] {BAD_VALUE}")
    assert lines[-1].startswith("[INFO] ")  # the rest still checked
    assert any(line.startswith("[OK] numpy") for line in lines)


def test_check_names_what_a_good_d2l_device_selects(monkeypatch, capsys):
    monkeypatch.setenv("D2L_DEVICE", "cpu")
    assert main(["check", "--core"]) == 0
    assert "[OK] D2L_DEVICE='cpu': the helpers use cpu\n" in capsys.readouterr().out


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_info_with_a_bad_d2l_device_prints_the_table_and_flags_it(json_flag):
    result = run_cli("info", *json_flag, D2L_DEVICE="garbage")
    assert result.returncode == 1
    assert result.stderr == ""
    if json_flag:
        data = json.loads(result.stdout)
        assert data["devices"][0]["device"] == "cpu"
        assert data["helpers use"].startswith(f"[FAIL] {BAD_VALUE}")
    else:
        assert result.stdout.splitlines()[1].startswith("cpu ")
        assert f"helpers use: [FAIL] {BAD_VALUE}" in result.stdout


def test_check_into_a_closed_pipe_exits_quietly():
    """As in `python -m d2l_gpu check | head -1` when head has already gone."""
    read, write = os.pipe()
    os.close(read)  # before the command writes a byte: every write meets a closed pipe
    try:
        result = subprocess.run(
            [sys.executable, "-m", "d2l_gpu", "check"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert result.stderr == ""
    assert result.returncode == 1


def test_under_an_older_torch_the_command_says_so_in_one_line(tmp_path):
    # sitecustomize runs before the command: torch reports an older version from then on.
    (tmp_path / "sitecustomize.py").write_text("import torch\ntorch.__version__ = '2.5.1'\n")
    result = run_cli("check", PYTHONPATH=str(tmp_path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "ImportError: d2l_gpu needs torch >= 2.6, found torch 2.5.1" in result.stderr


@pytest.mark.parametrize("argv", [["info"], ["info", "--json"], ["check", "--core"]])
def test_under_d2l_device_cpu_no_command_touches_cuda(monkeypatch, capsys, argv):
    """`python -m d2l_gpu info` on a simulated two-GPU CUDA machine with cuDNN."""
    simulate_machine(monkeypatch, "cuda", 2)
    simulate_cudnn(monkeypatch)
    touched = guard_cuda(monkeypatch)
    monkeypatch.setenv("D2L_DEVICE", "cpu")
    assert main(argv) == 0
    assert touched == []
    expected = "[INFO] 2 cuda device(s) found" if argv[0] == "check" else "cuda:1"
    assert expected in capsys.readouterr().out
