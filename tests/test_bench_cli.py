"""``python -m d2l_gpu bench``: arguments, tables, JSON and figure files."""

import argparse
import functools
import json
import subprocess
import sys

import pytest
import torch

import d2l_gpu
from d2l_gpu import bench
from d2l_gpu import experiments as ex
from d2l_gpu.__main__ import main
from d2l_gpu.experiments import concurrency, matmul, norms


@pytest.fixture
def tiny(monkeypatch):
    """The real bench path with sizes and timings small enough for a unit test."""
    monkeypatch.setattr(matmul, "_sizes", lambda device, dtype, quick: [8, 16])
    for module in (matmul, norms, concurrency):  # where each exercise looks it up
        monkeypatch.setattr(module, "_min_run_time", lambda device, quick: 0.01)
    monkeypatch.setattr(
        ex, "norms_study", functools.partial(ex.norms_study, products=10, size=8, min_run_time=0.01)
    )
    monkeypatch.setattr(ex, "two_products", functools.partial(ex.two_products, n=32))


def test_bench_writes_json_and_png(tiny, tmp_path, capsys):
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    rc = main(
        ["bench", "--quick", "--device", "cpu", "--json", str(out_json), "--plot", str(out_png)]
    )
    assert rc == 0
    stdout, stderr = capsys.readouterr()
    for heading in ("Exercise 1", "Exercise 2", "Exercise 3", "Exercise 4", "BLAS:"):
        assert heading in stdout
    assert "ex 4" in stderr  # the progress bar goes to stderr, not into the table
    data = json.loads(out_json.read_text())
    assert {"matmul", "round_trip", "norms", "two_products", "software", "blas"} <= set(data)
    assert {r["n"] for r in data["matmul"]} == {8, 16}
    assert all(r["gflops"] > 0 for r in data["matmul"])
    assert all(load["exact"] for load in data["round_trip"]["loads"])
    assert data["norms"]["agree"] is True and "norms" not in data["norms"]
    assert data["two_products"]["kind"] == ex.KIND_THREADS
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_writes_nothing_unasked(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--quick", "--device", "cpu"]) == 0
    assert list(tmp_path.iterdir()) == []
    assert "wrote" not in capsys.readouterr().out


@pytest.mark.parametrize("text", ["cpu", "CPU", " cpu:0 "])
def test_parse_device_accepts_the_cpu_however_written(text):
    assert bench.parse_device(text) == torch.device("cpu")


@pytest.mark.parametrize("text", ["nope", "cuda:7", "mps:3", ""])
def test_parse_device_names_the_valid_choices(text):
    if text == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    with pytest.raises(argparse.ArgumentTypeError, match="choose one of: cpu"):
        bench.parse_device(text)


def test_bad_device_is_a_clear_command_line_error():
    proc = subprocess.run(
        [sys.executable, "-m", "d2l_gpu", "bench", "--device", "tpu:9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "argument --device: 'tpu:9' is not a device this machine has" in proc.stderr
    assert "cpu" in proc.stderr.rsplit(":", 1)[1]
    assert proc.stdout == ""


def test_missing_output_folder_is_caught_before_measuring(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench", "--json", str(tmp_path / "no" / "such.json")])
    assert info.value.code == 2
    assert "folder" in capsys.readouterr().err


def test_import_stays_as_light_as_torch():
    heavy = "{'matplotlib', 'tqdm', 'numpy', 'IPython'}"
    loaded = f"print(sorted({heavy} & set(sys.modules)))"
    runs = [
        subprocess.run(
            [sys.executable, "-c", f"import sys, {module}; {loaded}"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        for module in ("torch", "d2l_gpu.bench, d2l_gpu.plotting")
    ]
    assert runs[0] == runs[1] and "matplotlib" not in runs[1]


@pytest.mark.gpu
def test_bench_on_the_gpu_compares_it_with_the_cpu(tiny, tmp_path, capsys):
    gpu = d2l_gpu.try_gpu()
    out_json = tmp_path / "gpu.json"
    assert main(["bench", "--quick", "--device", str(gpu), "--json", str(out_json)]) == 0
    data = json.loads(out_json.read_text())
    assert {r["device"] for r in data["matmul"]} == {"cpu", str(gpu)}
    assert data["round_trip"]["saved_from"] == str(gpu)
    assert data["two_products"]["kind"] != ex.KIND_THREADS or gpu.type != "cuda"


def test_parse_device_on_a_simulated_two_gpu_machine(monkeypatch):
    from tests.simulate import simulate_machine

    simulate_machine(monkeypatch, "cuda", 2)
    assert bench.parse_device("cuda") == torch.device("cuda", 0)
    assert bench.parse_device("CUDA:1") == torch.device("cuda", 1)
    with pytest.raises(argparse.ArgumentTypeError, match="choose one of: cpu, cuda:0, cuda:1$"):
        bench.parse_device("cuda:2")
