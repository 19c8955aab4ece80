"""The exercises' experiments: right fields, sane numbers, agreeing methods."""

import dataclasses
import json
import tempfile

import pytest
import torch

import d2l_gpu
from d2l_gpu import experiments as ex
from d2l_gpu.experiments import norms, state_dict

FAST = 0.01  # seconds of timing per measurement: shape and sanity, not precision


def test_matmul_cases_cover_cpu_dtypes_and_numpy():
    cases = ex.matmul_cases([d2l_gpu.cpu()], quick=True)
    kinds = {(c.backend, c.dtype) for c in cases}
    assert ("torch", "float32") in kinds and ("numpy", "float32") in kinds
    assert ("torch", "bfloat16") in kinds  # torch runs bfloat16 on every CPU
    assert all(c.device == "cpu" for c in cases)
    assert [c.n for c in cases if c.backend == "numpy"] == [
        c.n for c in cases if c.backend == "torch" and c.dtype == "float32"
    ]
    full = ex.matmul_cases([d2l_gpu.cpu()], quick=False, numpy=False)
    assert max(c.n for c in full) > max(c.n for c in cases)
    assert {c.backend for c in full} == {"torch"}


def test_measure_matmul_reports_a_consistent_rate():
    row = ex.measure_matmul(ex.MatmulCase("torch", "cpu", "float32", 32), min_run_time=FAST)
    assert row.n == 32 and row.runs >= 1 and row.median > 0 and row.iqr >= 0
    assert row.gflops == pytest.approx(2 * 32**3 / row.median / 1e9)
    numpy_row = ex.measure_matmul(ex.MatmulCase("numpy", "cpu", "float32", 32), FAST)
    assert numpy_row.backend == "numpy" and numpy_row.gflops > 0


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (ex.MatmulCase("jax", "cpu", "float32", 8), "backend must be"),
        (ex.MatmulCase("torch", "cpu", "int8", 8), "dtype must be one of"),
        (ex.MatmulCase("numpy", "cpu", "bfloat16", 8), "CPU in float32 only"),
    ],
)
def test_measure_matmul_rejects_what_it_cannot_time(case, message):
    with pytest.raises(ValueError, match=message):
        ex.measure_matmul(case, FAST)


def test_sweep_rows_have_the_fields_and_json_serialize():
    rows = ex.matmul_sweep([d2l_gpu.cpu()], quick=True, min_run_time=FAST)
    assert len(rows) == len(ex.matmul_cases([d2l_gpu.cpu()], quick=True))
    fields = {f.name for f in dataclasses.fields(ex.MatmulRow)}
    assert fields >= {"backend", "device", "dtype", "n", "median", "iqr", "runs", "gflops"}
    json.dumps([dataclasses.asdict(r) for r in rows])
    best = ex.best_gflops(rows)
    assert best[("torch", "cpu", "float32")] == max(
        r.gflops for r in rows if (r.backend, r.dtype) == ("torch", "float32")
    )


def test_blas_libraries_names_both_libraries():
    info = ex.blas_libraries()
    assert info["torch"] and info["numpy"] and info["torch cpu capability"]


def test_bf16_support_is_tried_on_the_cpu():
    assert ex.bf16_supported("cpu") is True


def test_round_trip_is_exact_and_temporary(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rt = ex.round_trip("cpu")
    assert rt.saved_from == "cpu" and rt.tensors == 4 and rt.file_bytes > 0
    assert rt.recorded_locations == ["cpu"]
    assert [load.exact for load in rt.loads] == [True, True, True]
    assert {load.loaded_on for load in rt.loads} == {"cpu"}
    assert list(tmp_path.iterdir()) == []  # the temporary folder is gone again


@pytest.mark.skipif(torch.cuda.is_available(), reason="shows the CUDA-less failure")
def test_round_trip_shows_why_map_location_matters_without_cuda():
    rt = ex.round_trip("cpu")
    assert "torch.cuda.is_available() is False" in rt.missing_gpu_error
    assert "map_location" in rt.missing_gpu_error


def test_norms_agree_across_the_three_methods():
    study = ex.norms_study("cpu", products=20, size=16, min_run_time=FAST)
    assert [r.method[:3] for r in study.rows] == ["(a)", "(b)", "(c)"]
    assert study.agree and study.max_rel_diff <= 1e-4
    assert all(r.median > 0 and r.host_syncs is None for r in study.rows)
    assert "not applicable" in study.sync_note
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(20, 16, 16, generator=gen)
    b = torch.randn(20, 16, 16, generator=gen)
    expected = torch.linalg.matrix_norm(a.double() @ b.double())
    torch.testing.assert_close(
        torch.tensor(study.norms, dtype=torch.float64), expected, rtol=1e-5, atol=0
    )


def test_norm_methods_are_the_same_function_of_the_inputs():
    a, b = torch.randn(5, 8, 8), torch.randn(5, 8, 8)
    item = norms._norms_item(a, b)
    torch.testing.assert_close(norms._norms_device_log(a, b), item)
    torch.testing.assert_close(norms._norms_bmm(a, b, torch.empty(5, 8, 8)), item)


def test_norms_study_rejects_empty_work():
    with pytest.raises(ValueError, match="products and size must be >= 1"):
        ex.norms_study("cpu", products=0)


def test_two_products_on_cpu_is_labelled_a_stand_in():
    threads = torch.get_num_threads()
    study = ex.two_products(["cpu"], n=64, min_run_time=FAST)
    assert study.kind == ex.KIND_THREADS and "not a GPU result" in study.kind
    assert [r.mode for r in study.rows] == ["sequential", "concurrent"]
    assert study.speedup == pytest.approx(study.rows[0].median / study.rows[1].median)
    assert torch.get_num_threads() == threads  # the one-thread limit stays in the workers


@pytest.mark.gpu
def test_sweep_on_the_gpu_includes_it():
    gpu = d2l_gpu.try_gpu()
    rows = ex.matmul_sweep([gpu], quick=True, min_run_time=FAST)
    assert {r.device for r in rows} == {str(gpu)} and all(r.gflops > 0 for r in rows)


@pytest.mark.gpu
def test_round_trip_from_the_gpu_is_exact():
    gpu = d2l_gpu.try_gpu()
    rt = ex.round_trip(gpu)
    assert rt.recorded_locations == [str(torch.device(gpu.type, 0))] or gpu.type == "mps"
    assert [load.loaded_on for load in rt.loads] == ["cpu", str(gpu), "cpu"]
    assert all(load.exact for load in rt.loads)
    if gpu.type == "cuda":
        assert "torch.cuda.is_available() is False" in rt.missing_gpu_error


@pytest.mark.gpu
def test_norms_on_cuda_count_host_syncs():
    gpu = d2l_gpu.try_gpu()
    if gpu.type != "cuda":
        pytest.skip("sync counting needs CUDA")
    study = ex.norms_study(gpu, products=50, size=32, min_run_time=FAST)
    assert study.agree
    assert [r.host_syncs for r in study.rows] == [50, 1, 1]


@pytest.mark.gpu
def test_two_products_on_gpus_say_what_they_measured():
    study = ex.two_products(n=512, min_run_time=FAST)
    expected = ex.KIND_GPUS if d2l_gpu.num_gpus() >= 2 else ex.KIND_STREAMS
    if d2l_gpu.accelerator_type() == "cuda":
        assert study.kind == expected
    assert study.speedup > 0


def test_child_process_without_cuda_reports_what_torch_load_said(tmp_path):
    path = tmp_path / "cpu.pt"
    torch.save({"w": torch.ones(2)}, path)
    assert state_dict._load_without_cuda(path) == "loaded without error"
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    assert state_dict._load_without_cuda(tmp_path / "bad.pt")  # torch's own message, not a crash


def _row(device, n, gflops):
    return ex.MatmulRow("torch", device, "float32", n, 1.0, 0.0, 1, gflops)


def test_crossover_is_where_the_accelerator_stays_ahead():
    rows = [_row("cpu", n, g) for n, g in ((16, 5), (64, 30), (256, 80), (1024, 90))]
    rows += [_row("cuda:0", n, g) for n, g in ((16, 1), (64, 40), (256, 20), (1024, 9000))]
    rows += [_row("cuda:1", n, 0.5) for n in (16, 64, 256, 1024)]
    assert ex.crossover(rows) == {"cuda:0": 1024, "cuda:1": None}  # 64 wins, 256 not
    assert ex.crossover(rows[:4]) == {}
