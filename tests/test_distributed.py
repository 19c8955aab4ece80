"""d2l_gpu.distributed and the torchrun demo: real gloo jobs on 127.0.0.1, simulated GPU choices."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from d2l_gpu import distributed
from tests.conftest import end_processes, processes_where
from tests.simulate import simulate_machine

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "notebooks" / "scripts" / "all_reduce_demo.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
FAST = ["--timeout", "20", "--sizes", "8", "--repeats", "3"]
# A hung job fails its test after this many seconds instead of stalling CI.
JOB_TIMEOUT = 60
DEVICE_LINE = re.compile(r"^rank (\d+)/(\d+): local rank (\d+), device (\S+), backend (\w+)", re.M)
SUM_LINE = re.compile(r"^rank (\d+)/\d+: all_reduce\(sum\) = \[([^\]]*)\], checked$", re.M)


TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def _env(**extra: str) -> dict[str, str]:
    """This environment as a reader's shell has it (no torchrun variables), plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in TORCHRUN_VARS and not k.startswith(("MASTER_", "TORCHELASTIC_"))
    }
    return {**env, **extra}


JOB_VAR = "D2L_GPU_TEST_JOB"
NO_GPU = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}  # the job runs on the CPU


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Jobs:
    """The torchrun jobs of one test: each in a session of its own, all marked with
    ``JOB_VAR`` and given the test's own temp folder (where torchrun leaves a
    ``torchelastic_*`` folder on every run)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def mine(self, environ: dict[str, str], command: str = "") -> bool:
        return environ.get(JOB_VAR) == str(self.folder)

    def start(self, args: list[str], **env: str) -> subprocess.Popen:
        marks = {"TMPDIR": str(self.folder), JOB_VAR: str(self.folder)}
        return subprocess.Popen(
            args,
            env=_env(**marks, **env),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def finish(self, proc: subprocess.Popen, timeout: float = JOB_TIMEOUT) -> tuple[int, str, str]:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Killing torchrun's process group would leave its workers (each in a
            # session of its own) running and holding the pipes open: end them all.
            end_processes(self.mine)
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"job still running after {timeout} s:\n{out}\n{err}")
        return proc.returncode, out, err


@pytest.fixture
def jobs():
    """Start torchrun jobs; afterwards end whatever they left running and remove their folder."""
    # Under the session's private TMPDIR (conftest.py), not the real temp folder.
    job = Jobs(Path(tempfile.mkdtemp(prefix="job-", dir=os.environ.get("TMPDIR"))))
    yield job
    end_processes(job.mine)
    shutil.rmtree(job.folder)


def _one_node(nproc: int) -> list[str]:
    """torchrun on one machine, all on 127.0.0.1: rank 0 would publish socket.getfqdn(),
    which often does not resolve (macOS, containers), and port 29500 may be taken."""
    return [
        *TORCHRUN,
        *("--nnodes", "1", "--nproc-per-node", str(nproc), "--local-addr", "127.0.0.1"),
        *("--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0"),
    ]


def _sums(out: str) -> dict[int, list[float]]:
    return {int(r): [float(v) for v in vals.split(",")] for r, vals in SUM_LINE.findall(out)}


def _expected(world_size: int) -> list[float]:
    # Rank r sends [1, 2, 3, 4] * (r + 1); the sum over ranks, computed independently.
    return [i * sum(r + 1 for r in range(world_size)) for i in (1.0, 2.0, 3.0, 4.0)]


def _two_nodes(jobs: Jobs, **env: str) -> list[tuple[int, str, str]]:
    """Two torchrun launches of one process each, meeting on 127.0.0.1: a two-node job."""
    rdzv = f"--rdzv-backend c10d --rdzv-id two-nodes --rdzv-endpoint 127.0.0.1:{free_port()}"
    args = [*TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", *rdzv.split()]
    started = [
        jobs.start([*args, "--local-addr", "127.0.0.1", str(DEMO), *FAST], **env) for _ in (0, 1)
    ]
    return [jobs.finish(job) for job in started]


def test_two_processes_on_gloo_sum_correctly_and_rank_0_times_them(jobs):
    rc, out, err = jobs.finish(jobs.start([*_one_node(2), str(DEMO), "--backend", "gloo", *FAST]))
    assert rc == 0, err
    assert _sums(out) == {0: _expected(2), 1: _expected(2)}
    found = {(int(r), int(w), int(lr), d, b) for r, w, lr, d, b in DEVICE_LINE.findall(out)}
    # Each rank on the device the helpers choose for its local rank on this machine:
    # cpu twice here, cuda:0 twice on one GPU, cuda:0 and cuda:1 on two.
    mine = [str(distributed.rank_device(local)) for local in (0, 1)]
    assert found == {(0, 2, 0, mine[0], "gloo"), (1, 2, 1, mine[1], "gloo")}
    assert re.search(
        r"^n = 8 \(256 bytes\):\n  all_reduce: .* median, IQR .*, 3 runs x 1$", out, re.M
    )
    assert re.search(r"all_reduce takes [\d,.]+x the time of x \+ y", out), out


def test_two_processes_on_gloo_need_no_numpy(jobs):
    """As in an environment with torch alone: process_group() swaps the ranks'
    device identities without pickling, which goes through Tensor.numpy()."""
    site = jobs.folder / "no-numpy"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\n\nsys.modules['numpy'] = None\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    probe = subprocess.run(
        [sys.executable, "-c", "import numpy"], env=_env(**env), capture_output=True, text=True
    )
    assert "ModuleNotFoundError: import of numpy halted" in probe.stderr
    rc, out, err = jobs.finish(jobs.start([*_one_node(2), str(DEMO), *FAST], **env))
    assert rc == 0, err
    assert _sums(out) == {0: _expected(2), 1: _expected(2)}


def test_a_job_that_times_out_ends_every_worker(jobs):
    """torchrun starts each worker in a session of its own: killing torchrun alone leaves them."""
    hang = jobs.folder / "hang.py"
    hang.write_text(
        "import os, pathlib, time\n"
        "pathlib.Path(os.environ['TMPDIR'], f'up-{os.getpid()}').touch()\n"
        "time.sleep(600)\n"
    )
    job = jobs.start([*_one_node(2), str(hang)])
    deadline = time.monotonic() + JOB_TIMEOUT
    while len(list(jobs.folder.glob("up-*"))) < 2:
        assert job.poll() is None and time.monotonic() < deadline, "the workers never started"
        time.sleep(0.1)
    workers = {int(p.name.removeprefix("up-")) for p in jobs.folder.glob("up-*")}
    with pytest.raises(pytest.fail.Exception, match="job still running after 0.1 s"):
        jobs.finish(job, timeout=0.1)
    assert job.returncode is not None
    assert not workers & set(processes_where(lambda environ, command: True))
    # What torchrun would have left in the real temp folder is in the test's, removed after it.
    assert list(jobs.folder.glob("torchelastic_*"))


def test_two_nodes_on_loopback_form_one_job_on_the_cpu(jobs):
    finished = _two_nodes(jobs, **NO_GPU)
    for rc, _, err in finished:
        assert rc == 0, err
    # c10d sorts the nodes by (address, torchrun pid), so either launch may hold rank 0.
    per_node = [_sums(out) for _, out, _ in finished]
    assert all(len(sums) == 1 for sums in per_node), per_node
    assert per_node[0] | per_node[1] == {0: _expected(2), 1: _expected(2)}
    lines = [line for _, out, _ in finished for line in DEVICE_LINE.findall(out)]
    assert sorted((lr, d, b) for _, _, lr, d, b in lines) == [("0", "cpu", "gloo")] * 2


def test_a_failing_rank_fails_the_job_with_its_error_shown(jobs):
    rc, out, err = jobs.finish(jobs.start([*_one_node(2), str(DEMO), *FAST, "--fail-rank", "1"]))
    assert rc != 0
    assert "RuntimeError: rank 1 failed on purpose (--fail-rank 1)" in err
    assert "all_reduce(sum)" not in out


def test_nccl_where_ranks_have_no_gpu_stops_every_rank_with_a_clear_error(jobs):
    job = jobs.start([*_one_node(2), str(DEMO), "--backend", "nccl"], **NO_GPU)
    rc, _, err = jobs.finish(job)
    assert rc != 0
    assert "backend 'nccl' needs a CUDA device of its own on every rank" in err
    assert "ranks 0, 1 have no CUDA device; accepted here: 'gloo' or 'auto'" in err


def test_outside_torchrun_the_demo_says_how_to_launch_it_and_exits_2():
    proc = subprocess.run(
        [sys.executable, str(DEMO)], env=_env(), capture_output=True, text=True, timeout=JOB_TIMEOUT
    )
    assert proc.returncode == 2
    assert f"torchrun --nproc-per-node 2 {DEMO}" in proc.stderr
    assert "--rdzv-backend c10d" in proc.stderr and proc.stdout == ""


def test_process_group_joins_on_its_device_and_always_leaves(monkeypatch):
    """A one-rank job in this process, set up as torchrun would."""
    simulate_machine(monkeypatch, None, 0)
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
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
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setattr(distributed, "rank_device", lambda local: torch.device("cpu"))
    monkeypatch.setattr(distributed, "device_identity", lambda device: "cuda GPU-a")
    calls = []
    monkeypatch.setattr(dist, "new_group", lambda **kwargs: calls.append(kwargs) or "nccl group")
    with distributed.process_group(timeout=10) as me:
        assert (me.backend, me.group, me.why_not_nccl) == ("nccl", "nccl group", ())
    assert calls == [{"backend": "nccl", "timeout": timedelta(seconds=10), "device_id": me.device}]
    assert not dist.is_initialized()


def test_process_group_refuses_to_start_outside_torchrun_or_with_an_unknown_backend(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(RuntimeError, match="LOCAL_RANK, which is missing.*torchrun"):
        distributed.process_group().__enter__()
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.raises(ValueError, match=r"'mpi'; accepted: 'auto', 'gloo', 'nccl'"):
        distributed.process_group("mpi").__enter__()
    assert not dist.is_initialized()


def test_local_rank_reads_torchrun_variable():
    assert distributed.local_rank({}) is None
    assert distributed.local_rank({"LOCAL_RANK": "3"}) == 3
    with pytest.raises(ValueError, match="LOCAL_RANK must be an integer >= 0, got 'one'"):
        distributed.local_rank({"LOCAL_RANK": "one"})


@pytest.mark.parametrize(
    ("kind", "count", "local", "expected"),
    [
        ("cuda", 4, 1, "cuda:1"),  # one GPU per rank, by LOCAL_RANK
        ("cuda", 1, 1, "cuda:0"),  # the launcher left each rank one GPU (CUDA_VISIBLE_DEVICES)
        ("cuda", 2, 3, "cuda:1"),  # more ranks than GPUs: taken in turn, shared
        (None, 0, 1, "cpu"),
        ("mps", 1, 0, "cpu"),  # gloo and nccl cannot read MPS tensors
    ],
)
def test_rank_device_on_a_simulated_machine(monkeypatch, kind, count, local, expected):
    simulate_machine(monkeypatch, kind, count)
    assert distributed.rank_device(local) == torch.device(expected)


def _simulated_job(monkeypatch, ranks: list[tuple[int, list[str]]]) -> list[str]:
    """Each rank's device identity, for ranks given as (LOCAL_RANK, UUIDs of the GPUs it sees)."""
    identities = []
    for local, uuids in ranks:
        simulate_machine(monkeypatch, "cuda" if uuids else None, len(uuids))

        def properties(device, uuids=uuids):
            return type("Props", (), {"uuid": uuids[torch.device(device).index]})

        monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
        identities.append(distributed.device_identity(distributed.rank_device(local)))
    return identities


def test_two_launches_on_one_gpu_machine_share_the_gpu_and_use_gloo(monkeypatch):
    # Two torchrun launches on 127.0.0.1: both ranks have LOCAL_RANK 0 and see the same GPU.
    identities = _simulated_job(monkeypatch, [(0, ["GPU-a"]), (0, ["GPU-a"])])
    assert identities == ["cuda GPU-a", "cuda GPU-a"]
    assert distributed.choose_backend(identities) == "gloo"
    assert distributed.nccl_problems(identities) == ["ranks 0, 1 share one GPU (GPU-a)"]
    with pytest.raises(RuntimeError, match=r"ranks 0, 1 share one GPU \(GPU-a\); accepted here"):
        distributed.choose_backend(identities, "nccl")


def test_more_processes_than_gpus_share_them_and_use_gloo(monkeypatch):
    gpus = ["GPU-a", "GPU-b"]
    identities = _simulated_job(monkeypatch, [(r, gpus) for r in range(3)])
    assert distributed.nccl_problems(identities) == ["ranks 0, 2 share one GPU (GPU-a)"]
    assert distributed.choose_backend(identities) == "gloo"


def test_one_gpu_per_rank_uses_nccl_also_when_each_rank_sees_only_its_own(monkeypatch):
    per_rank_visible = _simulated_job(monkeypatch, [(0, ["GPU-a"]), (1, ["GPU-b"])])
    all_visible = _simulated_job(monkeypatch, [(0, ["GPU-a", "GPU-b"]), (1, ["GPU-a", "GPU-b"])])
    assert per_rank_visible == all_visible == ["cuda GPU-a", "cuda GPU-b"]
    assert distributed.choose_backend(all_visible) == "nccl"
    assert distributed.choose_backend(all_visible, "gloo") == "gloo"


@pytest.mark.parametrize(
    ("identities", "requested", "backend"),
    [
        (["cuda GPU-a", "cuda GPU-b"], "auto", "nccl"),
        (["cuda GPU-a", "cpu"], "auto", "gloo"),
        (["cpu", "cpu"], "gloo", "gloo"),
        (["cuda GPU-a"], "nccl", "nccl"),
    ],
)
def test_choose_backend(identities, requested, backend):
    assert distributed.choose_backend(identities, requested) == backend


def test_choose_backend_explains_what_it_refuses():
    with pytest.raises(RuntimeError, match=r"but rank 1 has no CUDA device; accepted here"):
        distributed.choose_backend(["cuda GPU-a", "cpu"], "nccl")
    with pytest.raises(ValueError, match=r"'mpi'; accepted: 'auto', 'gloo', 'nccl'"):
        distributed.choose_backend(["cpu"], "mpi")
    with pytest.raises(ValueError, match="at least one rank"):
        distributed.choose_backend([])


def _load_demo():
    import importlib.util

    spec = importlib.util.spec_from_file_location("all_reduce_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as a module, not __main__: no launch hint, no exit
    return module


def test_demo_times_each_all_reduce_after_a_barrier_until_the_gpu_is_done(monkeypatch):
    """On a simulated GPU where an all_reduce queues 10 ms of work and returns at once."""
    demo = _load_demo()
    simulate_machine(monkeypatch, "cuda", 1)
    events, queued = [], []

    def synchronize(device=None):
        events.append(f"wait {torch.device(device)}")
        end = time.perf_counter() + sum(queued)
        queued.clear()
        while time.perf_counter() < end:
            pass

    def all_reduce(tensor, group=None):
        events.append("all_reduce")
        queued.append(0.01)

    monkeypatch.setattr(torch.accelerator, "synchronize", synchronize)
    monkeypatch.setattr(dist, "barrier", lambda group=None: events.append("barrier"))
    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    me = distributed.Rank(0, 2, 0, torch.device("cuda", 0), "gloo", None, ())
    times = demo.time_all_reduce(me, torch.zeros(4), repeats=2)
    one_call = ["barrier", "wait cuda:0", "all_reduce", "wait cuda:0"]
    # The Timer starts (and waits) on creation; then 3 warm-up calls and the 2 timed ones.
    assert events == ["wait cuda:0", *one_call * 5]
    assert len(times) == 2 and all(t >= 0.01 for t in times), times


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_nccl_on_two_gpus(jobs):
    rc, out, err = jobs.finish(jobs.start([*_one_node(2), str(DEMO), *FAST]))
    assert rc == 0, err
    assert _sums(out) == {0: _expected(2), 1: _expected(2)}
    found = {(int(r), d, b) for r, _, _, d, b in DEVICE_LINE.findall(out)}
    assert found == {(0, "cuda:0", "nccl"), (1, "cuda:1", "nccl")}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_two_launches_on_one_gpu_use_gloo_instead_of_failing(jobs):
    finished = _two_nodes(jobs, CUDA_VISIBLE_DEVICES="0")
    for rc, _, err in finished:
        assert rc == 0, err
    lines = [line for _, out, _ in finished for line in DEVICE_LINE.findall(out)]
    assert sorted((d, b) for *_, d, b in lines) == [("cuda:0", "gloo")] * 2
    assert _sums(finished[0][1]) | _sums(finished[1][1]) == {0: _expected(2), 1: _expected(2)}


LEAKY_TEST = """
import os, subprocess, sys, tempfile

def test_leaks():
    tempfile.mkdtemp(prefix="torchelastic_", dir=os.environ["TMPDIR"])
    # What a torchrun worker looks like: its agent sets TORCHELASTIC_RUN_ID.
    worker = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        env={**os.environ, "TORCHELASTIC_RUN_ID": "leak"},
        start_new_session=True,
    )
    print("worker", worker.pid)
"""


def test_the_session_fails_on_a_leftover_torchelastic_folder_or_worker(tmp_path):
    """conftest.py's check, in a pytest session of its own that leaks both."""
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_leaky.py").write_text(LEAKY_TEST)
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )
    assert inner.returncode == 1, inner.stdout
    worker = int(re.search(r"worker (\d+)", inner.stdout).group(1))
    assert re.search(r"LEAK: torchelastic folder left by the tests: torchelastic_\w+", inner.stdout)
    assert f"LEAK: torchrun process of the tests still alive (now killed): pid {worker}" in (
        inner.stdout
    )
    assert worker not in processes_where(lambda environ, command: True)
