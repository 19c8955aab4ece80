# %% [markdown]
# # Beyond one machine: processes, devices and `torch.distributed`
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/d2l-gpu/d2l-gpu/blob/main/notebooks/en/09-beyond-one-machine.ipynb)
#
# As run on an NVIDIA H200: [outputs](../gpu/nvidia-h200/en/09-beyond-one-machine.ipynb) (earlier version).
#
# **What you will learn**
#
# - how `torchrun` starts one process per device and tells each process who it is;
# - how each process picks its own device, and how all of them agree on a
#   communication backend (`nccl` or `gloo`) that fits every one;
# - how to run the same job as two "servers", here two launches on 127.0.0.1;
# - why a collective such as `all_reduce` costs far more than the arithmetic it
#   replaces, above all for small messages.
#
# **What you need**
#
# - [03 – Tensors and GPUs](03-tensors-and-gpus.ipynb); a GPU is optional: with
#   none, every process computes on the CPU and talks over TCP with `gloo`.

# %% tags=["nbval-ignore-output"]
import sys

if "google.colab" in sys.modules:  # Colab: add d2l_gpu and keep Colab's own torch
    get_ipython().run_line_magic(
        "pip", "install --quiet --no-deps git+https://github.com/d2l-gpu/d2l-gpu"
    )

import torch

import d2l_gpu

torch.manual_seed(0)
print(f"torch {torch.__version__}, d2l_gpu {d2l_gpu.__version__}")
print("devices the helpers will use:", d2l_gpu.try_all_gpus())
if d2l_gpu.num_gpus() == 0:
    print("No GPU found: every cell still runs on the CPU; the text says what a GPU shows.")

# %% [markdown]
# ## One process per device
#
# Within one process we moved tensors between `cuda:0` and `cuda:1` ourselves.
# Past a few GPUs, and past one server, training runs one process per GPU
# instead.
# PyTorch's launcher `torchrun` starts them and hands each a few variables:
#
# - `RANK`: this process's number in the whole job, `0 ... WORLD_SIZE - 1`;
# - `WORLD_SIZE`: how many processes there are in total;
# - `LOCAL_RANK`: its number on this machine, which says which GPU it should take;
# - `MASTER_ADDR`, `MASTER_PORT`: where the processes meet to connect.
#
# The demo is a plain program, `all_reduce_demo.py`, in the `scripts` folder
# beside the notebooks. This kernel was not started by `torchrun`, so it has no
# place in any job:

# %%
import ast
import os
import re
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from d2l_gpu import distributed

DEMO = Path("..", "scripts", "all_reduce_demo.py")
if "google.colab" in sys.modules and not DEMO.is_file():  # Colab opened this notebook alone
    clone = Path("d2l-gpu")
    if not clone.is_dir():  # a second run reuses the first one's clone
        url = "https://github.com/d2l-gpu/d2l-gpu"
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", url, str(clone)], check=True)
    DEMO = clone / "notebooks" / "scripts" / "all_reduce_demo.py"
print("inside torchrun:", distributed.local_rank() is not None)

# %% [markdown]
# Run the demo with plain Python anyway, and instead of waiting forever for
# partners that never come, it says how to launch it and exits with status 2:

# %%
plain = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=60)
print("exit status:", plain.returncode)
print(plain.stderr)

# %% [markdown]
# ## Lesson 1: every process owns a device
#
# `d2l_gpu.distributed.rank_device(LOCAL_RANK)` gives each process of a machine
# its own GPU: local rank 0 the first, 1 the second, and so on, cycling when
# there are more processes than GPUs. (A launcher that sets
# `CUDA_VISIBLE_DEVICES` per process leaves each one a single GPU, `cuda:0`.)
# With no GPU, every process computes on the CPU. Local ranks 0 to 3 here get:

# %%
print([str(distributed.rank_device(local_rank)) for local_rank in range(4)])

# %% [markdown]
# The processes must also agree on how to talk. `nccl` moves data directly
# between NVIDIA GPUs (over NVLink or the network), but only if every process has
# a GPU *of its own*: two processes on one GPU make it stop with "Duplicate GPU
# detected". `gloo` works everywhere and takes GPU tensors too for the common
# collectives, copying them through the CPU. A process alone cannot see whether
# another uses the same GPU: `cuda:0` in two processes may be one card or two.
# So the processes first meet in a `gloo` group and swap a name for their device
# that means the same in every process, the GPU's UUID or `cpu`, and each makes
# the same choice from the same list.

# %%
examples = {
    "a GPU per process": ["cuda GPU-1111", "cuda GPU-2222"],
    "two processes, one GPU": ["cuda GPU-1111", "cuda GPU-1111"],
    "a process without GPU": ["cuda GPU-1111", "cpu"],
}
for case, identities in examples.items():
    why = "; ".join(distributed.nccl_problems(identities))
    print(f"{case:<24} -> {distributed.choose_backend(identities)}" + (f" ({why})" if why else ""))

# %% [markdown]
# Asking for `nccl` where it cannot work is refused before any data moves,
# saying why and what would work:

# %%
try:
    distributed.choose_backend(["cuda GPU-1111", "cuda GPU-1111"], "nccl")
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# `distributed.process_group()` does all this on entry and leaves the group on
# exit, even if the code inside raised.
#
# ## Lesson 2: data on the right device before an operation
#
# A collective is an operation like any other: every process passes a tensor on
# its own device. `all_reduce` adds up all processes' tensors and leaves the sum
# in each. The demo makes its tensor directly on the process's device and checks
# the result against the expected sum; a wrong sum ends the job with an error:

# %%
source = DEMO.read_text(encoding="utf-8")
for node in ast.parse(source).body:
    if isinstance(node, ast.FunctionDef) and node.name in ("check_all_reduce", "main"):
        print(ast.get_source_segment(source, node), end="\n\n")

# %% [markdown]
# ## Launching the job from a notebook
#
# A cell starts `torchrun` (the same program as `python -m torch.distributed.run`)
# as a subprocess, with this notebook's Python.
# `--standalone --local-addr 127.0.0.1` keeps a one-machine job on the loopback
# interface and a free port. Each launch gets a temporary folder as its `TMPDIR`,
# so torchrun's log folders (`torchelastic_*`) go with it. `finish()` waits for
# all launches of a job under one time limit; when one fails or time is up, it
# ends every launch still running and says which failed, and why.
#
# `torchrun` limits each process to one CPU thread (`OMP_NUM_THREADS=1`) only
# when it starts several on a machine; `start()` always sets it, so timings
# compare like with like.

# %%
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
ONE_MACHINE = ["--standalone", "--local-addr", "127.0.0.1"]


@dataclass
class Launch:
    """One running torchrun, and the files that collect what it prints."""

    process: subprocess.Popen
    out: IO[str]
    err: IO[str]

    def read(self):
        """What it printed: (standard output, standard error)."""
        texts = []
        for file in (self.out, self.err):
            file.seek(0)
            texts.append(file.read())
            file.close()
        return texts


def start(torchrun_options, demo_options, folder):
    """Start `torchrun OPTIONS all_reduce_demo.py OPTIONS` in `folder`; see finish()."""
    command = [*TORCHRUN, *torchrun_options, str(DEMO.resolve()), *demo_options]
    env = {**os.environ, "TMPDIR": folder, "OMP_NUM_THREADS": "1"}
    out, err = (tempfile.TemporaryFile("w+", dir=folder) for _ in range(2))
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=err, text=True)
    return Launch(process, out, err)


def first_error(err):
    """The first exception printed: the process that failed first prints it before the
    others fail in turn (torchrun's "Root Cause" compares whole seconds, and may not)."""
    # An exception line, e.g. "[rank1]: RuntimeError: ...", not a source line that raises one.
    found = re.search(r"^(?:\[rank\d+\]:)?\s*(?:[\w.]+\.)?(\w+(?:Error|Exception)\b.*)$", err, re.M)
    return found[1] if found else (err.strip().splitlines() or ["no error output"])[-1]


def finish(launches, timeout=60):
    """Wait for every launch, `timeout` seconds in all; return what each printed.

    A failed launch ends the others (they would wait for it forever), and so
    does the time limit; the error names the launch that failed and its exception.
    """
    deadline = time.monotonic() + timeout
    codes = [launch.process.poll() for launch in launches]
    try:
        while None in codes and not any(codes) and time.monotonic() < deadline:
            time.sleep(0.1)
            codes = [launch.process.poll() for launch in launches]
    finally:  # also when the wait itself is interrupted
        for launch in launches:
            if launch.process.poll() is None:
                launch.process.terminate()  # torchrun ends its own processes on SIGTERM
                launch.process.wait(timeout=60)
    outputs = [launch.read() for launch in launches]
    for i, code in enumerate(codes):
        if code:
            why = f"exited with status {code}: {first_error(outputs[i][1])}"
            raise RuntimeError(f"launch {i} of {len(launches)} {why}")
    if None in codes:
        raise RuntimeError(f"launch {codes.index(None)} still running after {timeout} s: ended")
    return [out for out, _ in outputs]


def rank_lines(out, marker):
    """The lines of every process that contain `marker`, in rank order."""
    return sorted(line for line in out.splitlines() if line.startswith("rank ") and marker in line)


# %% [markdown]
# Two processes on this machine, timing square float32 matrices with sides 8 and
# 1024 (256 bytes and 4 MiB). Each process prints its rank, device and the backend
# they agreed on; rank 0 then prints the timings and their ratios.

# %% tags=["nbval-ignore-output"]
with tempfile.TemporaryDirectory() as folder:
    launch = start([*ONE_MACHINE, "--nproc-per-node", "2"], ["--sizes", "8", "1024"], folder)
    [out] = finish([launch])
print(*rank_lines(out, "device"), sep="\n")
print(*(line for line in out.splitlines() if not line.startswith("rank ")), sep="\n")

# %% [markdown]
# Whatever the hardware, the sums are the same: rank `r` sent
# `[1, 2, 3, 4] * (r + 1)`, so with two processes every entry is multiplied by 3.

# %%
print(*rank_lines(out, "all_reduce(sum)"), sep="\n")

# %% [markdown]
# ## Lesson 3: communication costs more than computation
#
# For the same matrix, rank 0 timed the `all_reduce` (summing two matrices in two
# processes) against the local sum `x + y` and the product `x @ x`. A collective
# finishes only when every process has joined, so `d2l_gpu.benchmark`, which
# picks its own number of calls, cannot time it: the processes would disagree
# and one would wait forever. The demo makes a
# fixed number of calls, each after a barrier, and waits for the device before
# reading the clock.
#
# Read the printed ratios. For the 256-byte matrix the `all_reduce` costs many
# times the local sum: that is latency, waking the other process and a round trip
# through the operating system, paid however little data there is. A product's
# work grows with the cube of the side, its data only with the square, so at
# 4 MiB the product may catch up with the communication: on a CPU, where it takes
# milliseconds, it can. A GPU computes it in microseconds while `gloo` still
# copies through the host, so there communication stays far ahead; `nccl` is
# faster but still pays a fixed cost per call. The last line for each size says which took longer here.
#
# Training code does not call `all_reduce` itself: it wraps the model in
# `torch.nn.parallel.DistributedDataParallel` (DDP), one process per GPU as here,
# and DDP all-reduces the gradients during `backward`, packed into buckets of up
# to 25 MiB (`bucket_cap_mb`), each sent as soon as its gradients are ready while
# the rest of `backward` computes: the fixed cost is paid per bucket, not per
# tensor. The cell below builds DDP in a one-process job (an in-memory meeting
# point instead of `torchrun`) so that it runs here:

# %%
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

device = distributed.rank_device(0)  # what local rank 0 would take
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
try:
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    ddp(torch.randn(64, 1024, device=device)).sum().backward()  # gradients all-reduced here
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    print(f"DDP on {device}, {dist.get_world_size()} process, backend {dist.get_backend()}")
    print(f"gradient buckets of up to {ddp.bucket_bytes_cap / 2**20:.0f} MiB")
    print(f"this model's gradients: {grads / 2**20:.1f} MiB per step")
finally:
    dist.destroy_process_group()

# %% [markdown]
# ## Two servers
#
# On two real servers you run the *same* command on each one; `HOST:PORT` is an
# address of the first server that the second can reach, and `join_timeout`
# bounds how long a server waits for the other (the default is 600 s):
#
# ```bash
# torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
#     --rdzv-id my-job --rdzv-endpoint HOST:29500 --rdzv-conf join_timeout=60 \
#     all_reduce_demo.py
# ```
#
# The `c10d` rendezvous waits until both servers have joined, then numbers them
# by sorting their descriptions: first the address each gives (`--local-addr`,
# else its host name), then the process id of its `torchrun`. Neither joining
# order nor `--node-rank` matters (the latter only with `--rdzv-backend static`);
# processes are then numbered server by server. Here
# both "servers" are this machine: two launches of one process each, meeting at
# a free port on 127.0.0.1, so the lower process id gets rank 0. Both processes
# have local rank 0, so with one GPU both take `cuda:0`; the swap of device
# names sees that, and they use `gloo`.

# %% tags=["nbval-ignore-output"]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
two_nodes = (
    f"--nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-id two-nodes "
    f"--rdzv-endpoint 127.0.0.1:{port} --local-addr 127.0.0.1 --rdzv-conf join_timeout=30"
).split()
with tempfile.TemporaryDirectory() as folder:
    nodes = [start(two_nodes, ["--sizes", "--timeout", "30"], folder) for _ in range(2)]
    node_out = finish(nodes)
for i, (node, out) in enumerate(zip(nodes, node_out, strict=True)):
    print(f"launch {i} (torchrun pid {node.process.pid}):", *rank_lines(out, "device"))

# %% [markdown]
# Each launch has a local rank 0 only, but together they form one job of two
# processes, and the all-reduced values are the same as before:

# %%
both = "\n".join(node_out)
print(*rank_lines(both, "all_reduce(sum)"), sep="\n")
local_ranks = [line.split("local rank ")[1].split(",")[0] for line in rank_lines(both, "device")]
print("local ranks:", local_ranks)

# %% [markdown]
# ## When a process fails
#
# If one process raises, the others would wait for it forever inside their next
# collective. `torchrun` stops the rest as soon as one exits with an error, and
# prints a summary of the failures. The demo's `--fail-rank 1` makes rank 1 raise;
# `finish()` reports the first exception printed, and torchrun's log folder goes
# with the cell's temporary folder:

# %%
with tempfile.TemporaryDirectory() as folder:
    failing = start([*ONE_MACHINE, "--nproc-per-node", "2"], ["--fail-rank", "1"], folder)
    try:
        finish([failing])
    except RuntimeError as error:
        print(f"{type(error).__name__}: {error}")
    logs = list(Path(folder).glob("torchelastic_*"))
    print("torchrun log folders in this cell's folder:", len(logs))
print("that folder removed:", not Path(folder).exists())

# %% [markdown]
# ## Exercises
#
# 1. Run the demo with 1, 2 and 4 processes (`--nproc-per-node`), one CPU thread
#    each as here. How do the times of the small and of the 4 MiB message change
#    with the number of processes? Then run one process from a terminal without
#    `OMP_NUM_THREADS`, so that it uses every core: which times change?
# 2. Time more sizes (`--sizes 64 256 2048`). From which size on does the
#    `all_reduce` grow in proportion to the bytes it sends?
# 3. On a machine with two GPUs, compare `--backend nccl` with `--backend gloo`.
#    Which one moves the data between the cards without going through the CPU?

# %% [markdown]
# ## What this lesson showed
#
# - `torchrun` starts one process per device and tells each its `RANK`,
#   `WORLD_SIZE` and `LOCAL_RANK`; the rendezvous numbers machines by sorting, not arrival.
# - Every process owns a device, and the tensors it sends must already be there.
# - The backend must suit every process: `nccl` needs a GPU of its own in each,
#   which the processes can only find out together; `gloo` runs anywhere.
# - A collective costs much more than the arithmetic it replaces, and small
#   messages pay mostly for latency; DDP therefore sends gradients in large buckets.
# - A launcher bounds every wait, ends every process when one fails, and leaves
#   no folder behind.
