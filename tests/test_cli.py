"""python -m d2l_gpu: help, info, check."""

import json
import subprocess
import sys

import pytest

from d2l_gpu import check
from d2l_gpu.__main__ import build_parser, main


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "d2l_gpu", *args], capture_output=True, text=True, timeout=120
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


def test_check_passes_in_the_dev_environment(capsys):
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "[OK] torch" in out and "[FAIL]" not in out and "[INFO]" in out


def test_check_reports_a_missing_package():
    lines = check.check_lines({"surely-not-installed-pkg": "testing"})
    ok, text = lines[-1]
    assert not ok
    assert text == (
        "surely-not-installed-pkg is missing (needed for testing): pip install 'd2l-gpu[notebooks]'"
    )


def test_check_flags_a_too_old_torch(monkeypatch):
    monkeypatch.setattr(check.torch, "__version__", "2.1.0")
    assert check.check_lines({})[0] == (False, "torch 2.1.0 (need >= 2.6)")
