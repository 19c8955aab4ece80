"""The package's promises about itself: light import, public API, pinned installs."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import tomllib

import d2l_gpu

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _name_and_spec(requirement: str) -> tuple[str, str]:
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*?)\s*", requirement)
    assert match, requirement
    return match.group(1).lower().replace("_", "-"), match.group(2).replace(" ", "")


def test_environment_yml_asks_for_what_pyproject_asks_for():
    project = PYPROJECT["project"]
    wanted = [f"python{project['requires-python']}", *project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        wanted += [r for r in extra if not r.startswith("d2l-gpu")]
    text = (ROOT / "environment.yml").read_text(encoding="utf-8")
    listed = re.findall(r"^  - ([A-Za-z0-9_.\-]+[^\n]*)$", text.split("\ndependencies:\n")[1], re.M)
    conda = dict(_name_and_spec(d) for d in listed)
    del conda["pip"]  # pip, then the list pip installs: this package
    conda["torch"] = conda.pop("pytorch")  # conda-forge's name for it
    assert conda == dict(_name_and_spec(r) for r in wanted)


def test_torch_is_a_range_for_users_and_every_extra_pinned_for_make():
    assert PYPROJECT["project"]["dependencies"] == ["torch>=2.6", "setuptools"]  # benchmark()
    pins = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    assert "torch==2.13.0" in pins
    assert all("+" not in line for line in pins if not line.startswith("#"))
    pinned = {_name_and_spec(line.split("==")[0])[0] for line in pins if "==" in line}
    for extra in PYPROJECT["project"]["optional-dependencies"].values():  # make lab, site, ...
        wanted = {_name_and_spec(r)[0] for r in extra if not r.startswith("d2l-gpu")}
        assert wanted <= pinned, f"not in constraints.txt: {wanted - pinned}"


def test_import_adds_nothing_heavy_to_what_torch_loads():
    code = (
        "import sys, torch; before = set(sys.modules); import d2l_gpu; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    added = {name.split(".")[0] for name in out.stdout.split()}
    assert added - {"d2l_gpu"} <= sys.stdlib_module_names, added


def test_public_api_is_what_another_chapter_imports_typed_and_versioned():
    assert sorted(d2l_gpu.__all__) == sorted(
        ["cpu", "gpu", "num_gpus", "try_gpu", "try_all_gpus", "accelerator_type", "synchronize"]
        + ["Timer", "Benchmark", "benchmark", "compare", "host_and_device_seconds"]
        + ["device_info", "device_report"]
    )
    public = {name for name in vars(d2l_gpu) if not name.startswith("_")}
    modules = {"comparison", "devices", "distributed", "report", "timing"}
    assert public - modules == set(d2l_gpu.__all__)
    assert (ROOT / "d2l_gpu" / "py.typed").is_file()
    assert re.fullmatch(r"\d+\.\d+\.\d+", d2l_gpu.__version__)


def test_modules_import_only_each_others_public_names():
    for path in (ROOT / "d2l_gpu").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:  # from .timing import ...
                names = [alias.name for alias in node.names]
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                assert not private, (path.name, private)


def test_ci_runs_make_test():
    script = ROOT / ".ci" / "run"
    assert script.stat().st_mode & 0o111
    assert re.search(r"^make .*\btest\b", script.read_text(encoding="utf-8"), re.M)
