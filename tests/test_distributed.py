"""d2l_gpu.distributed and the torchrun demo: one real gloo job on 127.0.0.1, the rest in
this process (a one-rank group) or on simulated machines."""

from __future__ import annotations

import os
import re
import runpy
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from subprocess import PIPE

import pytest
import torch
import torch.distributed as dist

from d2l_gpu import distributed
from tests.simulate import Timeline, python_without, simulate_machine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gpu_check  # noqa: E402 (its end_all ends a job's ranks, as after its own torchrun step)

DEMO = ROOT / "notebooks" / "scripts" / "all_reduce_demo.py"
DEVICE_LINE = re.compile(r"^rank (\d+)/(\d+): local rank (\d+), device (\S+), backend (\w+)", re.M)
SUM_LINE = re.compile(r"^rank (\d+)/\d+: all_reduce\(sum\) = \[([^\]]*)\], checked$", re.M)
ONE_RANK = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_demo(tmp_path: Path, *args: str, **env: str) -> tuple[str, set[tuple]]:
    """The demo on two ranks under torchrun on 127.0.0.1 (the machine's own name may not
    resolve), with its temp folder (torchrun leaves a torchelastic_* folder there) in
    ``tmp_path``. Once the job ended well and both ranks summed right: its output, and
    each rank's (rank, world size, local rank, device, backend)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "TORCHELASTIC_"))}
    clean = {k: v for k, v in clean.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1"]
    command += ["--nproc-per-node", "2", "--local-addr", "127.0.0.1"]
    command += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]
    command += [str(DEMO), "--timeout", "20", "--sizes", "8", "--repeats", "3", *args]
    env = {**clean, "TMPDIR": str(tmp_path), gpu_check.STEP: str(tmp_path), **env}
    proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=PIPE, stderr=PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        out, err = "", "job still running after 60 s"
    gpu_check.end_all(str(tmp_path))  # torchrun starts each rank in a session of its own
    assert proc.wait() == 0, err
    expected = [3.0, 6.0, 9.0, 12.0]  # rank r sends [1, 2, 3, 4] * (r + 1)
    sums = {int(r): [float(v) for v in vals.split(",")] for r, vals in SUM_LINE.findall(out)}
    assert sums == {0: expected, 1: expected}
    return out, {(int(r), int(w), int(lr), d, b) for r, w, lr, d, b in DEVICE_LINE.findall(out)}


def test_two_processes_on_gloo_sum_correctly_without_numpy_and_rank_0_times_them(tmp_path):
    """As in an environment with torch alone: process_group() swaps the ranks' device
    identities without pickling, which goes through Tensor.numpy()."""
    out, ranks = run_demo(tmp_path, "--backend", "gloo", **python_without(tmp_path, ["numpy"]))
    # Each rank on the device the helpers choose for its local rank on this machine:
    # cpu twice here, cuda:0 twice on one GPU, cuda:0 and cuda:1 on two.
    mine = [str(distributed.rank_device(local)) for local in (0, 1)]
    assert ranks == {(0, 2, 0, mine[0], "gloo"), (1, 2, 1, mine[1], "gloo")}
    assert "median, IQR" in out
    calls = r"all_reduce: [\d,.]+ us fastest of 3 calls, median [\d,.]+ us, IQR [\d,.]+ us$"
    assert re.search(calls, out, re.M)


def test_process_group_joins_on_its_device_and_always_leaves(monkeypatch):
    """A one-rank job in this process, set up as torchrun would, on a Mac: gloo and nccl
    cannot read MPS tensors, so the rank computes on the CPU."""
    simulate_machine(monkeypatch, "mps", 1)
    for key, value in {**ONE_RANK, "MASTER_PORT": str(free_port())}.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(KeyError), distributed.process_group(timeout=10) as me:
        assert (me.rank, me.world_size, me.local_rank) == (0, 1, 0)
        assert (me.device, me.backend) == (torch.device("cpu"), "gloo")
        assert me.why_not_nccl == ("rank 0 has no CUDA device",)
        x = torch.ones(3)
        dist.all_reduce(x, group=me.group)
        assert x.tolist() == [1.0, 1.0, 1.0]
        raise KeyError("a rank that raises still leaves the group")
    assert not dist.is_initialized()


def test_process_group_makes_a_nccl_group_bound_to_the_device_when_nccl_suits(monkeypatch):
    """The nccl wiring, simulated: a real one-rank gloo group, a pretend GPU of its own."""
    for key, value in {**ONE_RANK, "MASTER_PORT": str(free_port())}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(distributed, "rank_device", lambda local: torch.device("cpu"))
    monkeypatch.setattr(distributed, "device_identity", lambda device: "cuda GPU-a")
    calls = []
    monkeypatch.setattr(dist, "new_group", lambda **kwargs: calls.append(kwargs) or "nccl group")
    with distributed.process_group(timeout=10) as me:
        assert (me.backend, me.group, me.why_not_nccl) == ("nccl", "nccl group", ())
    assert calls == [{"backend": "nccl", "timeout": timedelta(seconds=10), "device_id": me.device}]
    assert not dist.is_initialized()


def test_process_group_refuses_outside_torchrun_a_bad_local_rank_or_backend(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(RuntimeError, match="LOCAL_RANK, which is missing.*torchrun"):
        distributed.process_group().__enter__()
    for bad in ("one", "²"):  # str.isdigit() holds for '²', which int() refuses
        monkeypatch.setenv("LOCAL_RANK", bad)
        with pytest.raises(ValueError, match=f"LOCAL_RANK must be an integer >= 0, got '{bad}'"):
            distributed.process_group().__enter__()
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.raises(ValueError, match=r"'mpi'; accepted: 'auto', 'gloo', 'nccl'"):
        distributed.process_group("mpi").__enter__()
    assert not dist.is_initialized()


@pytest.mark.parametrize(
    ("ranks", "used", "problems"),  # ranks: (LOCAL_RANK, UUIDs of the GPUs it sees) each
    [
        (  # more processes than GPUs: taken in turn, shared
            [(r, ["GPU-a", "GPU-b"]) for r in range(3)],
            ["GPU-a", "GPU-b", "GPU-a"],
            ["ranks 0, 2 share one GPU (GPU-a)"],
        ),
        # One GPU per rank: the launcher left each rank its own (CUDA_VISIBLE_DEVICES), so
        # each sees one as cuda:0; the UUIDs tell them apart.
        ([(0, ["GPU-a"]), (1, ["GPU-b"])], ["GPU-a", "GPU-b"], []),
    ],
)
def test_a_simulated_job_uses_nccl_when_each_rank_has_a_gpu_of_its_own(
    monkeypatch, ranks, used, problems
):
    found = []
    for local, uuids in ranks:
        simulate_machine(monkeypatch, "cuda", len(uuids))

        def properties(device, uuids=uuids):
            return type("Props", (), {"uuid": uuids[torch.device(device).index]})

        monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
        found.append(distributed.device_identity(distributed.rank_device(local)))
    assert found == [f"cuda {uuid}" for uuid in used]  # the GPU each rank computes on
    assert distributed.nccl_problems(found) == problems
    assert distributed.choose_backend(found) == ("gloo" if problems else "nccl")


@pytest.mark.parametrize(
    ("identities", "requested", "outcome"),  # outcome: the backend, or the error raised
    [
        (["cuda GPU-a", "cuda GPU-b"], "gloo", "gloo"),
        (["cuda GPU-a"], "nccl", "nccl"),
        (["cuda GPU-a", "cpu"], "nccl", RuntimeError("rank 1 has no CUDA device; accepted here")),
        (["cpu"], "mpi", ValueError("'mpi'; accepted: 'auto', 'gloo', 'nccl'")),
        ([], "auto", ValueError("at least one rank")),
    ],
)
def test_choose_backend_gives_the_one_asked_for_or_says_why_not(identities, requested, outcome):
    if isinstance(outcome, str):
        assert distributed.choose_backend(identities, requested) == outcome
    else:
        with pytest.raises(type(outcome), match=re.escape(str(outcome))):
            distributed.choose_backend(identities, requested)


def test_demo_times_each_all_reduce_after_a_barrier_until_the_gpu_is_done(monkeypatch):
    """On a simulated GPU where an all_reduce queues 10 ms of work and returns at once;
    two sizes take turns, so that a busy spell on the machine slows both alike."""
    demo = runpy.run_path(str(DEMO), run_name="all_reduce_demo")  # not __main__: no exit
    simulate_machine(monkeypatch, "cuda", 1)
    clock, events = Timeline(monkeypatch), []

    def synchronize(device=None):
        events.append(f"wait {torch.device(device)}")
        clock.sync()

    def all_reduce(tensor, group=None):
        events.append(f"all_reduce {tensor.numel()}")
        clock.launch(0.01)

    monkeypatch.setattr(torch.accelerator, "synchronize", synchronize)
    monkeypatch.setattr(dist, "barrier", lambda group=None: events.append("barrier"))
    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    me = distributed.Rank(0, 2, 0, torch.device("cuda", 0), "gloo", None, ())
    times = demo["time_all_reduce"](me, [torch.zeros(4), torch.zeros(8)], repeats=2)
    # Each Timer starts (and waits) on creation; then 10 warm-up rounds and the 2 timed
    # ones, each round one call of each size.
    one_round = ["barrier", "wait cuda:0", "all_reduce 4", "wait cuda:0"]
    one_round += ["barrier", "wait cuda:0", "all_reduce 8", "wait cuda:0"]
    assert events == ["wait cuda:0"] * 2 + one_round * 12
    assert times == [[pytest.approx(0.01)] * 2] * 2


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_nccl_on_two_gpus(tmp_path):
    _, ranks = run_demo(tmp_path)
    assert ranks == {(0, 2, 0, "cuda:0", "nccl"), (1, 2, 1, "cuda:1", "nccl")}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_two_ranks_on_one_gpu_use_gloo_instead_of_failing(tmp_path):
    _, ranks = run_demo(tmp_path, CUDA_VISIBLE_DEVICES="0")
    assert ranks == {(0, 2, 0, "cuda:0", "gloo"), (1, 2, 1, "cuda:0", "gloo")}
