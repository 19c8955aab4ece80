"""The torchrun demo: real 2-process and 2-node jobs on gloo over 127.0.0.1, plus the pure logic."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

from d2l_gpu import distributed

# A hung job fails the test after this many seconds instead of stalling CI.
JOB_TIMEOUT = 60
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
DEMO = ["-m", "d2l_gpu.distributed", "--timeout", "20"]
FAST = ["--sizes", "8", "--repeats", "3", "--min-run-time", "0.01"]
RESULT = re.compile(r"^rank (\d+)/(\d+): all_reduce\(sum\) = \[([^\]]*)\], expected", re.M)
DEVICE = re.compile(r"^rank (\d+)/(\d+): local rank (\d+), device (\S+), backend (\w+)$", re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    """This environment without torchrun's variables, as a reader's shell would be."""
    drop = {*distributed._ENV_KEYS, "LOCAL_WORLD_SIZE", "GROUP_RANK"}
    return {
        k: v for k, v in os.environ.items() if k not in drop and not k.startswith("TORCHELASTIC_")
    }


def _start(args: list[str]) -> subprocess.Popen:
    # A session of its own, so a timeout can stop torchrun and the workers it started.
    return subprocess.Popen(
        args,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"job still running after {JOB_TIMEOUT} s:\n{out}\n{err}")
    return proc.returncode, out, err


def _results(out: str) -> dict[int, list[float]]:
    return {int(r): [float(v) for v in vals.split(",")] for r, _, vals in RESULT.findall(out)}


def _expected(world_size: int) -> list[float]:
    # Rank r sends [1, 2, 3, 4] * (r + 1); the sum over ranks, computed independently.
    return [i * sum(r + 1 for r in range(world_size)) for i in (1.0, 2.0, 3.0, 4.0)]


def test_two_processes_on_gloo_reduce_the_right_values_within_30_s():
    start = time.perf_counter()
    rc, out, err = _finish(
        _start([*TORCHRUN, "--nproc-per-node", "2", *DEMO, "--backend", "gloo", *FAST])
    )
    elapsed = time.perf_counter() - start
    assert rc == 0, err
    assert _results(out) == {0: _expected(2), 1: _expected(2)}
    ranks = {(int(r), int(w), int(lr), dev, be) for r, w, lr, dev, be in DEVICE.findall(out)}
    assert ranks == {(0, 2, 0, "cpu", "gloo"), (1, 2, 1, "cpu", "gloo")}
    assert re.search(r"^\s+8\s+256 B\s+all_reduce\s+[\d,.]+ us", out, re.M), out
    assert elapsed <= 30, f"the 2-process job took {elapsed:.1f} s"


def test_two_nodes_on_loopback_form_one_job():
    port = _free_port()
    jobs = [
        _start(
            [
                *TORCHRUN,
                "--nnodes",
                "2",
                "--node-rank",
                str(node),
                "--nproc-per-node",
                "1",
                "--rdzv-backend",
                "c10d",
                "--rdzv-id",
                "loopback",
                "--local-addr",
                "127.0.0.1",
                "--rdzv-endpoint",
                f"127.0.0.1:{port}",
                *DEMO,
                *FAST,
            ]
        )
        for node in (0, 1)
    ]
    finished = [_finish(job) for job in jobs]
    for rc, _, err in finished:
        assert rc == 0, err
    # c10d numbers the nodes in the order they join, so either node may hold rank 0.
    per_node = [_results(out) for _, out, _ in finished]
    assert all(len(r) == 1 for r in per_node), per_node
    assert per_node[0] | per_node[1] == {0: _expected(2), 1: _expected(2)}
    assert all(lr == "0" for _, out, _ in finished for _, _, lr, _, _ in DEVICE.findall(out))


def test_a_failing_rank_fails_the_job_fast_with_its_error_shown():
    start = time.perf_counter()
    rc, out, err = _finish(_start([*TORCHRUN, "--nproc-per-node", "2", *DEMO, "--fail-rank", "1"]))
    assert rc != 0
    assert "RuntimeError: rank 1 failed on purpose (--fail-rank 1)" in err
    assert "all_reduce(sum)" not in out  # nobody reached the collective's result
    assert time.perf_counter() - start < 30


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks nccl where no rank has CUDA")
def test_nccl_without_gpus_stops_every_rank_with_a_clear_error():
    rc, _, err = _finish(_start([*TORCHRUN, "--nproc-per-node", "2", *DEMO, "--backend", "nccl"]))
    assert rc != 0
    assert "backend 'nccl' needs a CUDA device on every rank" in err
    assert "accepted here: 'gloo' or 'auto'" in err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="nccl needs CUDA")
def test_nccl_on_every_gpu():
    world = min(torch.cuda.device_count(), 2)
    rc, out, err = _finish(_start([*TORCHRUN, "--nproc-per-node", str(world), *DEMO, *FAST]))
    assert rc == 0, err
    assert _results(out) == {r: _expected(world) for r in range(world)}
    found = {(int(r), dev, be) for r, _, _, dev, be in DEVICE.findall(out)}
    assert found == {(r, f"cuda:{r}", "nccl") for r in range(world)}


def test_outside_torchrun_it_says_how_to_launch(monkeypatch, capsys):
    for key in distributed._ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    assert distributed.main([]) == 2
    err = capsys.readouterr().err
    assert "torchrun --nproc-per-node 2 -m d2l_gpu.distributed" in err
    assert "--nnodes 2 --node-rank 0" in err and "--rdzv-endpoint" in err


def test_outside_torchrun_as_a_script_exits_non_zero():
    proc = subprocess.run(
        [sys.executable, "-m", "d2l_gpu.distributed"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )
    assert proc.returncode == 2
    assert "must be started by torchrun" in proc.stderr


@pytest.mark.parametrize(
    ("types", "requested", "backend"),
    [
        (["cuda", "cuda"], None, "nccl"),
        (["cuda", "cuda"], "auto", "nccl"),
        (["cuda", "cpu"], None, "gloo"),
        (["cpu"], "auto", "gloo"),
        (["cuda", "cuda"], "gloo", "gloo"),
        (["cpu", "cpu"], "gloo", "gloo"),
        (["cuda"], "nccl", "nccl"),
    ],
)
def test_choose_backend(types, requested, backend):
    assert distributed.choose_backend(types, requested) == backend


def test_nccl_without_a_gpu_on_some_rank_names_it_and_the_alternatives():
    with pytest.raises(RuntimeError, match=r"rank 1 \(cpu\).*accepted here: 'gloo' or 'auto'"):
        distributed.choose_backend(["cuda", "cpu"], "nccl")


def test_unknown_backend_lists_the_accepted_ones():
    with pytest.raises(ValueError, match=r"'mpi'.*'auto', 'gloo', 'nccl'"):
        distributed.choose_backend(["cpu"], "mpi")
    with pytest.raises(ValueError, match="at least one rank"):
        distributed.choose_backend([], None)


TORCHRUN_ENV = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1"}


def test_rank_env_reads_torchrun_variables():
    assert distributed.rank_env({}) is None
    env = {**TORCHRUN_ENV, "MASTER_PORT": "29500"}
    assert distributed.rank_env(env) == distributed.RankEnv(rank=1, world_size=2, local_rank=1)
    with pytest.raises(RuntimeError, match="MASTER_PORT is not.*torchrun"):
        distributed.rank_env(TORCHRUN_ENV)
    with pytest.raises(ValueError, match="WORLD_SIZE must be an integer, got 'two'"):
        distributed.rank_env({**env, "WORLD_SIZE": "two"})
    with pytest.raises(ValueError, match="RANK=2, WORLD_SIZE=2"):
        distributed.rank_env({**env, "RANK": "2"})


def test_rank_device_is_the_local_rank_th_gpu_or_the_cpu(monkeypatch):
    monkeypatch.setattr(distributed, "try_gpu", lambda i: torch.device("cuda", i))
    assert distributed.rank_device(1) == torch.device("cuda", 1)
    # gloo and nccl cannot move MPS tensors: such a rank computes on the CPU.
    monkeypatch.setattr(distributed, "try_gpu", lambda i: torch.device("mps", 0))
    assert distributed.rank_device(0) == torch.device("cpu")


def test_rank_device_on_this_machine_matches_try_gpu():
    expected = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    assert distributed.rank_device(0) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fail-rank", "2"], r"--fail-rank takes a rank in 0\.\.1, got 2"),
        (["--sizes", "0"], r"--sizes takes matrix sides >= 1"),
        (["--repeats", "1"], r"--repeats must be >= 2"),
    ],
)
def test_bad_options_are_refused_before_joining(monkeypatch, argv, message):
    for key, value in {**TORCHRUN_ENV, "MASTER_PORT": str(_free_port())}.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match=message):
        distributed.main(argv)
